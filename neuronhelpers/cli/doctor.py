"""Environment check for workshop attendees: OK / FAIL (or INFO) per requirement, one line each.

    python -m neuronhelpers.cli.doctor      (also: neuronhelpers doctor)

The required packages are exactly those the installed neuronhelpers declares (pyproject.toml's
``[project].dependencies``, read back from the distribution's metadata; extras are optional and not checked),
each at a version its specifier allows. Used before notebook 01 in a workshop: the README's set-up step.
"""

from __future__ import annotations

import sys
from importlib import metadata

from neuronhelpers.core import vocab

DISTRIBUTION = "neuronhelpers"
OK, INFO = "OK", "INFO"
FAIL = vocab.FAIL  # the same word as a FAIL row: this requirement is not met
INSTALL = "run `make install`"


def requirements(distribution: str = DISTRIBUTION) -> list:
    """The requirements (``packaging`` Requirement objects) an installed distribution declares, without those of
    its extras (a marker that only holds with an extra)."""
    from packaging.requirements import Requirement

    out = []
    for text in metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            out.append(requirement)
    return out


def requirement_check(requirement) -> tuple[str, str, str]:
    """(status, name, detail) of one requirement: installed at a version its specifier allows, or why not."""
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return FAIL, requirement.name, f"not installed: {INSTALL}"
    if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
        return FAIL, requirement.name, f"{installed} installed, {requirement.specifier} needed: {INSTALL}"
    return OK, requirement.name, installed


def requirement_checks() -> list[tuple[str, str, str]]:
    """One check per requirement of the installed neuronhelpers (one FAIL when it is not installed at all)."""
    try:
        required = requirements()
    except metadata.PackageNotFoundError:
        return [(FAIL, DISTRIBUTION, f"not installed, so its requirements cannot be read: {INSTALL}")]
    return [requirement_check(r) for r in required]


# torch-neuronx 2.13.3 / 2.14.3 (Neuron SDK 2.33) and 2.13.3.1 / 2.14.3.1 (2.34) ship for these Python releases only.
NEURON_PYTHONS = ((3, 12), (3, 13), (3, 14))
# The checks a trn2's environment passes and no other does: on a neuron machine their failures have one cause and one
# fix, so the short form says them in one line.
TRN2_ENVIRONMENT = ("python 3.12-3.14", "torch-neuronx", "neuronx-cc")
TRN2_FIX = "use the Neuron DLAMI's environment or `conda env create -f environment-trn2.yml`"


def python_check(neuron_machine: bool, version=None) -> tuple[str, str, str]:
    """Python itself: >= 3.10 anywhere; on a Neuron machine one that torch-neuronx ships for (3.12-3.14)."""
    version = tuple(version or sys.version_info[:3])
    shown = ".".join(map(str, version))
    if version[:2] < (3, 10):
        return FAIL, "python >= 3.10", shown
    if version[:2] in NEURON_PYTHONS:
        return OK, "python", f"{shown} (torch-neuronx ships for 3.12-3.14)"
    if neuron_machine:
        return FAIL, "python 3.12-3.14", f"{shown}: torch-neuronx ships for 3.12-3.14 only; {TRN2_FIX}"
    return OK, "python", f"{shown} (on a trn2 torch-neuronx needs 3.12-3.14)"


def _neuron_checks() -> list[tuple[str, str, str]]:
    from neuronhelpers.core.topology import neuron_topology

    topology = neuron_topology()  # from /dev and NEURON_LOGICAL_NC_CONFIG: doctor never starts the Neuron runtime
    present = topology.chips > 0
    out = [(OK if present else INFO, "neuron device",
            topology.describe() if present else "none (CPU/GPU backends only)")]
    for name in ("torch-neuronx", "neuronx-cc"):
        try:
            out.append((OK, name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((INFO if not present else FAIL, name, "not installed (needed on a trn2 only)"))
    return out


def short_lines(failed: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The failures as the short form says them: the trn2 environment's in one line where more than one failed."""
    trn2 = [r for r in failed if r[1] in TRN2_ENVIRONMENT]
    if len(trn2) < 2:
        return failed
    missing = [f"python {detail.split(':')[0]}" if what.startswith("python") else f"no {what}"
               for _, what, detail in trn2]
    return [(FAIL, "trn2 environment", f"{', '.join(missing)}: {TRN2_FIX}"),
            *(r for r in failed if r not in trn2)]


def checks() -> list[tuple[str, str, str]]:
    """(status, what, detail) for each requirement; status is OK, FAIL or INFO (optional, absent)."""
    from neuronhelpers.core.topology import neuron_device_present

    out = [python_check(neuron_device_present())]
    out += requirement_checks()
    out += _neuron_checks()
    from neuronhelpers.core.backends import detect_backend, get_backend

    backend = get_backend(detect_backend())
    out.append((OK, "backend", f"{backend.name} (compile backend {backend.compile_backend}, dist "
                               f"{backend.dist_backend})"))
    from neuronhelpers.run.compile_cache import cache_dir

    folder = cache_dir(backend)
    files = sum(1 for _ in folder.rglob("*") if _.is_file()) if folder.is_dir() else 0
    out.append((OK if files else INFO, "compile cache", f"{folder} ({files} files)" if files
                else f"{folder} (empty: first runs compile from scratch; `neuronhelpers cache sync` fills it)"))
    from neuronhelpers.core.network import hub_reachable, hub_status_line

    out.append((OK if hub_reachable() else INFO, "Hugging Face Hub", hub_status_line()))
    return out


def main(short: bool = False) -> int:
    """Every check, one line each, then a summary; ``short`` (the start page's cell, `doctor --short`): a line per
    problem (the trn2 environment's failures in one), then one summary line with the backend. Exit status 1 where a
    required check failed."""
    results = checks()
    failed = [r for r in results if r[0] == FAIL]
    shown = short_lines(failed) if short else results
    width = max(18, *(len(what) for _, what, _ in results))
    for status, what, detail in shown:
        print(f"{status:4s}  {what:{width}s} {detail}")
    backend = next((detail.split(" ")[0] for _, what, detail in results if what == "backend"), "?")
    if short:
        print(f"{len(results) - len(failed)} of {len(results)} checks passed (backend {backend})"
              + ("; `neuronhelpers doctor` lists them all" if failed else ""))
    else:
        print("all required checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
