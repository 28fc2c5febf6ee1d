"""The workshop's day, worked out from what was measured: each lesson's sections and exercises as the lessons mark
them (*in class*, *in class on the 120-minute day*, *homework*), the seconds each code cell took in an attendee's
Run All (``data/workshop_timings.json``, written by ``python -m neuronhelpers.ui.day --measure``), and the minutes
stated here (explaining per lesson, an attendee's time per exercise). From these come the plan of the 90 and the
120-minute day, what to skip when late (with its measured seconds) and each lesson's own time line
(:func:`write_time_lines`; a test fails when a committed lesson's line differs).

The marks live in the lessons' headings, where the book and an attendee see them: ``## Plots · *homework*``. A
lesson's cells before its first marked heading (parameters, the day's switch) run in class.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
TIMINGS = Path(__file__).resolve().parents[1] / "data" / "workshop_timings.json"

IN_CLASS = "in class"
IN_CLASS_LONG = "in class on the 120-minute day"
HOMEWORK = "homework"
MARKS = (IN_CLASS, IN_CLASS_LONG, HOMEWORK)
DAYS = (90, 120)
_MARK = re.compile(r"\s+·\s+\*(" + "|".join(re.escape(m) for m in MARKS) + r")\*\s*$")
_EXERCISE = re.compile(r"^### Exercise (\d+)\b")
# Headings of a lesson's frame, not of a part that is taught or left: never marked.
# What explaining a section takes at least: its Markdown said aloud at a presenter's pace (about 130 words a minute).
SPOKEN_WORDS_PER_MIN = 130
FRAME = ("Overview", "Prerequisites", "Exercises", "Summary", "What's next")

# An attendee's minutes per exercise: the upper end of a tester session's estimate, from its own run-through working
# from the notebook alone (no person has timed them yet).
EXERCISE_MINUTES_SOURCE = ("the upper end of a tester session's estimate for a human attendee, from its own "
                           "run-through of every exercise working from the notebook alone (no person has timed them "
                           "yet)")
EXERCISE_MINUTES = {("01", 1): 8, ("01", 2): 10, ("02", 1): 6, ("02", 2): 5, ("04", 1): 8, ("04", 2): 8,
                    ("03", 1): 5, ("03", 2): 6, ("06", 1): 4, ("06", 2): 8, ("06", 3): 9, ("05", 1): 6,
                    ("05", 2): 8}


@dataclass(frozen=True)
class Section:
    """A marked heading of a lesson and the code cells under it (their ids), up to the next heading of its level."""

    title: str
    mark: str
    code_cells: tuple[str, ...]
    exercise: int | None = None  # its number, for an "### Exercise N" heading
    words: int = 0  # of its Markdown: what explaining it has to cover

    def in_class(self, day: int) -> bool:
        return self.mark == IN_CLASS or (self.mark == IN_CLASS_LONG and day >= 120)


def split_mark(heading: str) -> tuple[str, str | None]:
    """'Plots · *homework*' -> ('Plots', 'homework'); an unmarked heading -> (heading, None)."""
    match = _MARK.search(heading)
    return (heading[:match.start()], match.group(1)) if match else (heading, None)


def lesson_path(number: str, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> Path:
    return next(Path(notebooks_dir).glob(f"{number}_*.ipynb"))


def sections(number: str, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[Section]:
    """A lesson's sections in order; its leading cells (before the first marked heading) form an unnamed section in
    class. A heading of the frame (Overview, Exercises, Summary, ...) ends the section before it."""
    cells = json.loads(lesson_path(number, notebooks_dir).read_text())["cells"]
    found: list[Section] = []
    title, mark, exercise, code, words = "", IN_CLASS, None, [], 0

    def close():
        if title or code:
            found.append(Section(title, mark, tuple(code), exercise, words))

    for cell in cells:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if not line.startswith(("## ", "### Exercise")):
                    words += len(line.split()) if title else 0
                    continue
                close()
                heading = line.lstrip("#").strip()
                title, found_mark = split_mark(heading)
                number_match = _EXERCISE.match(line)
                exercise = int(number_match.group(1)) if number_match else None
                if title.startswith(FRAME):
                    title, mark, exercise = "", IN_CLASS, None  # its cells (if any) run in class
                else:
                    mark = found_mark
                code, words = [], 0
        elif cell["cell_type"] == "code" and "parameters" not in cell.get("metadata", {}).get("tags", []):
            code.append(cell["id"])
    close()
    return found


def unmarked(number: str, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[str]:
    """The lesson's headings that should carry a mark and do not."""
    return [s.title for s in sections(number, notebooks_dir) if s.title and s.mark is None]


# ---- measured seconds --------------------------------------------------------------------------------------------
def timings() -> dict:
    """The committed measurement: {"measured": {...how...}, "cells": {lesson: {cell id: seconds}}}."""
    return json.loads(TIMINGS.read_text())


def cell_seconds(number: str) -> dict[str, float]:
    return timings()["cells"].get(number, {})


def measured_line() -> str:
    """How the seconds were measured, in a clause: "measured 2026-12-05 at abc1234 on 2 CPU cores, an attendee's Run
    All"."""
    how = timings()["measured"]
    return (f"measured {how['date']} at {how['commit']} on {how['cpu_cores']} CPU cores as an attendee's Run All, "
            "twins and compile cache warm")


def seconds(sections_: list[Section], number: str) -> float:
    measured = cell_seconds(number)
    return sum(measured.get(cell, 0.0) for s in sections_ for cell in s.code_cells)


# ---- the plan ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LessonPlan:
    """One lesson on one day: the seconds its in-class cells take, the in-class exercises' and the explaining
    minutes, and what is left for home."""

    number: str
    day: int
    run_s: float
    exercises: tuple[int, ...]
    exercise_min: int
    explain_min: int
    homework_s: float
    homework_exercises: tuple[int, ...]
    homework_min: int
    words: int  # of the in-class sections' Markdown

    @property
    def minutes(self) -> int:
        return math.ceil(self.run_s / 60 + self.exercise_min + self.explain_min)


def lesson_plan(number: str, day: int, explain_min: int, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> LessonPlan:
    """Work one lesson's minutes out for a day from its marks, the measured seconds and the stated minutes."""
    found = sections(number, notebooks_dir)
    taught = [s for s in found if s.in_class(day)]
    left = [s for s in found if not s.in_class(day)]
    taught_ex = tuple(s.exercise for s in taught if s.exercise)
    left_ex = tuple(s.exercise for s in left if s.exercise)
    homework_s = seconds(left, number)
    return LessonPlan(number, day, seconds(taught, number), taught_ex,
                      sum(EXERCISE_MINUTES[(number, n)] for n in taught_ex), explain_min, homework_s, left_ex,
                      math.ceil(homework_s / 60 + sum(EXERCISE_MINUTES[(number, n)] for n in left_ex)),
                      sum(s.words for s in taught))


def skipped_seconds(number: str, titles, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[tuple[str, float]]:
    """The named in-class sections with their measured seconds (what skipping each saves on top of explaining)."""
    by_title = {s.title: s for s in sections(number, notebooks_dir)}
    return [(title, seconds([by_title[title]], number)) for title in titles]


def measure(results: str | Path, work_root: str | Path, lessons=("01", "02", "04", "03", "06", "05"),
            notebooks_dir: str | Path = NOTEBOOKS_DIR) -> dict:
    """Execute each lesson as an attendee's Run All on the day (parameters as committed, SOLUTIONS off, `make
    demo`'s results present) and return the seconds of every code cell, by lesson and cell id."""
    import datetime as dt
    import os
    import subprocess

    import nbformat

    from neuronhelpers.ui.book import execute_in_copy

    cells: dict[str, dict[str, float]] = {}
    for number in lessons:
        nb = nbformat.read(lesson_path(number, notebooks_dir), as_version=4)
        if number == "01":  # the lesson's own "../results" is make demo's; the copy runs elsewhere
            index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
            injected = nbformat.v4.new_code_cell(f"RESULTS = {str(Path(results).resolve())!r}")
            injected.metadata["tags"] = ["injected-parameters"]
            nb.cells.insert(index + 1, injected)
        execute_in_copy(nb, Path(notebooks_dir), Path(work_root) / number)
        cells[number] = {}
        for cell in nb.cells:
            timing = cell.metadata.get("execution", {})
            if cell.cell_type == "code" and "iopub.execute_input" in timing and "id" in cell:
                start = dt.datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
                end = dt.datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
                cells[number][cell.id] = round((end - start).total_seconds(), 1)
        print(f"{number}: {sum(cells[number].values()):.0f} s", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(notebooks_dir).parent,
                            capture_output=True, text=True).stdout.strip()
    return {"measured": {"date": dt.date.today().isoformat(), "commit": commit, "cpu_cores": os.cpu_count(),
                         "how": "python -m neuronhelpers.ui.day --measure: each lesson executed headless as an "
                                "attendee's Run All (parameters as committed, SOLUTIONS off, make demo's results "
                                "present, twins and inductor's cache warm)"},
            "cells": cells}


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", action="store_true", help="execute every lesson and rewrite the timings file")
    parser.add_argument("--results", default=str(NOTEBOOKS_DIR.parent / "results"), help="make demo's results")
    args = parser.parse_args()
    if args.measure:
        if not Path(args.results, "data").is_dir():
            raise SystemExit(f"no results in {args.results}: run `make demo` first (the day starts from them)")
        with tempfile.TemporaryDirectory(prefix="nh-day-") as tmp:
            measured = measure(args.results, tmp)
        TIMINGS.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
        print(f"wrote {TIMINGS}")
