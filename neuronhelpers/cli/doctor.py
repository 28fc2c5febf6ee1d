"""Environment check for workshop attendees: OK / FAIL (or INFO) per requirement, one line each.

    python -m neuronhelpers.cli.doctor      (also: neuronhelpers doctor)

Used before notebook 01 in a workshop: the README's set-up step.
"""

from __future__ import annotations

import sys
from importlib import metadata

REQUIRED = ["torch", "transformers", "accelerate", "safetensors", "tokenizers", "huggingface_hub", "pyarrow", "pandas",
            "ipywidgets", "matplotlib", "tqdm"]


def checks() -> list[tuple[str, str, str]]:
    """(status, what, detail) for each requirement; status is OK, FAIL or INFO (optional, absent)."""
    out = []
    ok = sys.version_info >= (3, 10)
    out.append(("OK" if ok else "FAIL", "python >= 3.10", sys.version.split()[0]))
    for name in REQUIRED:
        try:
            out.append(("OK", name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append(("FAIL", name, "not installed: run `make install`"))
    from neuronhelpers.core.backends import detect_backend, get_backend, neuron_device_present

    present = neuron_device_present()
    out.append(("OK" if present else "INFO", "neuron device", "present" if present else "none (CPU/GPU backends only)"))
    for name in ("torch-neuronx", "neuronx-cc"):
        try:
            out.append(("OK", name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append(("INFO" if not present else "FAIL", name, "not installed (needed on a trn2 only)"))
    backend = get_backend(detect_backend())
    out.append(("OK", "backend", f"{backend.name} (compile backend {backend.compile_backend}, dist {backend.dist_backend})"))
    from neuronhelpers.run.compile_cache import cache_dir

    folder = cache_dir(backend)
    files = sum(1 for _ in folder.rglob("*") if _.is_file()) if folder.is_dir() else 0
    out.append(("OK" if files else "INFO", "compile cache", f"{folder} ({files} files)" if files
                else f"{folder} (empty: first runs compile from scratch; `neuronhelpers cache sync` fills it)"))
    from neuronhelpers.core.network import hub_reachable, hub_status_line

    out.append(("OK" if hub_reachable() else "INFO", "Hugging Face Hub", hub_status_line()))
    return out


def main() -> int:
    results = checks()
    for status, what, detail in results:
        print(f"{status:4s}  {what:18s} {detail}")
    failed = [r for r in results if r[0] == "FAIL"]
    print("all required checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
