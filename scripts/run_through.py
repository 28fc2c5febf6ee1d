"""A timed run-through of the 90-minute day, done as an attendee does it: each lesson opened in turn (a kernel started
for each: a notebook switch), only what is run in class executed (the cells before the first marked heading and the
in-class sections; homework sections, homework exercises and collapsed solutions left alone), and 02's terminal
exercise typed as a terminal runs it: `python3 run.py` in a fresh folder, with the inductor cache a plain shell
really has (none of the harness's: cold), then again after the prompt edit (warm). Writes
neuronhelpers/data/run_through.json; the plan adds what it measured beyond the cells (ui/day.py: ``friction``), and
the teacher's guide shows it.

    .venv/bin/python scripts/run_through.py [--results results]   # after `make demo`
"""

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from neuronhelpers.process.tree import last_json_line
from neuronhelpers.recipes.render import render_run_py
from neuronhelpers.run.harness import plan_run
from neuronhelpers.ui import day
from neuronhelpers.ui.book import DROPPED_TAG, cell_durations, execute_in_copy
from neuronhelpers.ui.exercises import TERMINAL_MODEL, TERMINAL_PROMPT, with_prompt
from neuronhelpers.ui.workshop import LESSON_ORDER


def in_class_copy(number: str, results: str):
    """The lesson as an attendee runs it in class on the 90-minute day: its other code cells removed."""
    nb = nbformat.read(day.lesson_path(number), as_version=4)
    run = {c for s in day.sections(number) if s.in_class(day.DAYS[0]) for c in s.code_cells}
    nb.cells = [c for c in nb.cells if c.cell_type != "code" or c.id in run
                or "parameters" in c.metadata.get("tags", [])]
    if number == "01":  # the lesson's "../results" is make demo's; the copy runs elsewhere
        index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        injected = nbformat.v4.new_code_cell(f"RESULTS = {str(Path(results).resolve())!r}")
        injected.metadata["tags"] = [DROPPED_TAG]
        nb.cells.insert(index + 1, injected)
    return nb


def terminal_runs(work: Path) -> tuple[float, float]:
    """02's exercise 1 as typed: `python3 run.py`, then again after editing the prompt; a plain shell's inductor cache
    is torch's default, which the harness never filled (an empty folder here)."""
    folder = work / "terminal"
    folder.mkdir(parents=True)
    run_py = render_run_py(plan_run(TERMINAL_MODEL, backend="cpu").params)
    (folder / "run.py").write_text(run_py)
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(work / "shell-inductor-cache"), HF_HUB_OFFLINE="1")
    seconds = []
    for edit in (False, True):
        if edit:
            (folder / "run.py").write_text(with_prompt(run_py, TERMINAL_PROMPT))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "run.py"], cwd=folder, env=env, capture_output=True, text=True)
        seconds.append(round(time.perf_counter() - start, 1))
        assert (last_json_line(done.stdout) or {}).get("ok"), done.stderr[-2000:]
    return seconds[0], seconds[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(day.NOTEBOOKS_DIR.parent / "results"), help="make demo's results")
    args = parser.parse_args()
    if not Path(args.results, "data").is_dir():
        sys.exit(f"no results in {args.results}: run `make demo` first (the day starts from them)")
    lessons = {}
    with tempfile.TemporaryDirectory(prefix="nh-run-through-") as tmp:
        for number in LESSON_ORDER[1:]:
            nb = in_class_copy(number, args.results)
            start = time.perf_counter()
            execute_in_copy(nb, day.NOTEBOOKS_DIR, Path(tmp) / number)
            wall = time.perf_counter() - start
            cells = sum(cell_durations(nb).values())
            lessons[number] = {"wall_s": round(wall, 1), "cells_s": round(cells, 1),
                               "kernel_and_switch_s": round(wall - cells, 1)}
            print(number, lessons[number], flush=True)
        cold, warm = terminal_runs(Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"measured": {"date": dt.date.today().isoformat(), "commit": commit, "cpu_cores": os.cpu_count(),
                        "how": "scripts/run_through.py: each lesson in teaching order in a kernel of its own (a "
                               "notebook switch), only its in-class cells of the 90-minute day run, after make demo; "
                               "02's terminal exercise run as a plain shell runs it (torch's default inductor cache, "
                               "cold), then again after the prompt edit"},
           "lessons": lessons, "terminal_s": {"cold": cold, "after_edit": warm}}
    path = day.TIMINGS.parent / "run_through.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"terminal: {cold} s cold, {warm} s after the edit; wrote {path}")


if __name__ == "__main__":
    main()
