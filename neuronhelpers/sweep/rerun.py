"""Does a row rerun as written? Its stored run.py, run as a plain file (``python run.py``, then ``--reference``) in a
fresh ``NEURONHELPERS_HOME`` (this machine's shelf of real checkpoints kept, as its Hugging Face cache is), judged by
the same rule as the sweep's, against the row: the same verdict, stage and verification, and for generated text the
same tokens (``neuronhelpers rerun``).

Only this environment's version pair is rerun (another pair's rows were made by other releases), and only verdicts
(PASS and FAIL rows that carry a run.py). A sample is drawn across libraries and tasks, so a few reruns cover every
recipe: ``--sample 30`` takes one row of each (library, task) in turn, in a seeded order.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import HOME_ENV, SHELF_ENV, shelf_home

RERUN_TIMEOUT_S = 900.0


def rows_to_rerun(frame, *, sample: int | None = None, models: list[str] | None = None, seed: int = 0) -> list[dict]:
    """The verdict rows of this environment's pair that carry a run.py (newest per model): ``models`` by id, or a
    ``sample`` drawn round-robin over (library, task), or all."""
    from neuronhelpers.store.dataset import newest_per_model, row_records, select_pair

    rows, _pair = select_pair(frame, "current")
    rows = newest_per_model(rows[rows.result.isin([vocab.PASS, vocab.FAIL]) & rows.run_py.notna()])
    records = [row for row in row_records(rows) if other_transformers(row) is None]
    if models:
        found = {row["model_id"]: row for row in records}
        missing = [model for model in models if model not in found]
        if missing:
            raise UserError(f"no verdict with a run.py for {', '.join(missing)} in this environment's pair (a "
                            "sentence-transformers or diffusers row counts only where it was made with this "
                            "transformers): `neuronhelpers plan MODEL` says what the data holds")
        return [found[model] for model in models]
    groups: dict[tuple, list[dict]] = {}
    for row in sorted(records, key=lambda r: r["model_id"]):
        groups.setdefault((row["library"], row["task"]), []).append(row)
    order = random.Random(seed)
    for members in groups.values():
        order.shuffle(members)
    drawn, queues = [], [groups[key] for key in sorted(groups)]
    while queues and (sample is None or len(drawn) < sample):
        for queue in list(queues):
            if sample is not None and len(drawn) >= sample:
                break
            drawn.append(queue.pop(0))
            if not queue:
                queues.remove(queue)
    return drawn


def other_transformers(row: dict) -> str | None:
    """The transformers a sentence-transformers or diffusers row was made with (its ``packages``), where it is not
    this environment's: such a row's version pair names its own library alone, but its twin's files and its text
    encoders come from transformers, so it reruns only beside that release. None when it is this one's."""
    if row.get("library") == vocab.TRANSFORMERS:
        return None
    from neuronhelpers.core.versions import library_version

    made = re.search(r"^transformers==(\S+)$", row.get("packages") or "", re.M)
    return made.group(1) if made and made.group(1) != library_version(vocab.TRANSFORMERS) else None


def _run(folder: Path, home: Path, flags: list[str], timeout: float) -> dict:
    """``python run.py FLAGS`` in ``folder``: its JSON line, or the failure to give one in its own words."""
    # a fresh home, but this machine's checkpoints: the shelf (like the Hugging Face cache) is what a user has
    env = {**os.environ, HOME_ENV: str(home), SHELF_ENV: str(shelf_home()), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    try:
        proc = subprocess.run([sys.executable, "run.py", *flags], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "stage": "timeout", "error": f"no result within {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):  # no JSON line: run.py ended before main (its own one line says why)
        last = (proc.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        return {"ok": False, "stage": "start", "error": f"exit {proc.returncode}: {last[:300]}"}


def rerun_row(row: dict, home: Path, timeout: float = RERUN_TIMEOUT_S) -> dict:
    """One row's run.py rerun as written and judged: {model_id, reproduced, difference}."""
    from neuronhelpers.recipes.render import params_of_run_py
    from neuronhelpers.verdict.verify import output_digest, verify_outputs

    folder = Path(tempfile.mkdtemp(prefix=re.sub(r"[^A-Za-z0-9_.-]+", "_", row["model_id"])[:60] + "-", dir=home))
    (folder / "run.py").write_text(row["run_py"])
    device = _run(folder, home, [], timeout)
    again = {"result": vocab.FAIL, "stage": device.get("stage"), "verification": None, "tokens": device.get("tokens"),
             "error": device.get("error")}
    if device.get("ok"):
        reference = _run(folder, home, ["--reference"], timeout)
        if not reference.get("ok"):
            return _judged(row, None, f"its reference failed at {reference.get('stage')}: {reference.get('error')}")
        again.update(verify_outputs(params_of_run_py(row["run_py"]), device, reference),
                     output_digest=output_digest(row["library"], device))
    elif device.get("stage") in ("timeout", "start"):
        return _judged(row, None, f"it did not run: {device.get('error')}")
    return _judged(row, again, None)


def _judged(row: dict, again: dict | None, failed: str | None) -> dict:
    difference = failed or difference_from(row, again)
    return {"model_id": row["model_id"], "reproduced": difference is None, "difference": difference}


def difference_from(row: dict, again: dict) -> str | None:
    """How a rerun differs from its row, in words, or None when it reproduces it: the verdict, then the stage (a
    FAIL's), then the verification (a PASS's), then the tokens of generated text, or an embedding's or image's output
    digest within the row's tolerance."""
    from neuronhelpers.verdict.verify import digest_difference

    for column in ("result", "stage", "verification"):
        if column == "stage" and row.get("result") != vocab.FAIL or column == "verification" and \
                row.get("result") != vocab.PASS:
            continue
        if row.get(column) != again.get(column):
            failed = again.get("result") == vocab.FAIL and again.get("error")
            why = f" (at {again.get('stage')}: {str(again['error'])[:200]})" if failed else ""
            return f"{column} {again.get(column)!r}{why}, the row's {row.get(column)!r}"
    want, got = row.get("tokens"), again.get("tokens")
    if want is not None and got is not None and list(want) != list(got):
        first = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got)))
        return f"tokens differ from the row's at position {first} of {len(want)}"
    return digest_difference(row.get("output_digest"), again.get("output_digest"), row.get("tolerance") or 0.0)


def rerun(results, *, sample: int | None = None, models: list[str] | None = None, seed: int = 0,
          timeout: float = RERUN_TIMEOUT_S, progress: bool = True) -> list[dict]:
    """Rerun the chosen rows (``rows_to_rerun``) in one fresh NEURONHELPERS_HOME, removed afterwards."""
    import shutil

    from neuronhelpers.store.dataset import load_results

    chosen = rows_to_rerun(load_results(results), sample=sample, models=models, seed=seed)
    if not chosen:
        raise UserError(f"no verdict with a run.py of this environment's pair in '{results}': nothing to rerun")
    home = Path(tempfile.mkdtemp(prefix="nh-rerun-home-"))
    try:
        from tqdm.auto import tqdm

        return [rerun_row(row, home, timeout) for row in tqdm(chosen, desc="rerun", unit="row", disable=not progress)]
    finally:
        shutil.rmtree(home, ignore_errors=True)


def rerun_lines(outcomes: list[dict]) -> list[str]:
    """'N of M reproduced', then each row that was not, with its difference."""
    reproduced = sum(outcome["reproduced"] for outcome in outcomes)
    return [f"{reproduced} of {len(outcomes)} reproduced"] + [
        f"  {outcome['model_id']}: {outcome['difference']}" for outcome in outcomes if not outcome["reproduced"]]
