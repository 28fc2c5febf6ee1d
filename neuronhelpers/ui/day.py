"""The workshop's day, worked out from what was measured: each lesson's sections and exercises as the lessons mark
them (*in class*, *in class on the 120-minute day*, *homework*), the seconds each code cell took in an attendee's
Run All (``data/workshop_timings.json``, written by ``make workshop-timings`` through ``book.measure_lessons``), and
the minutes stated here (explaining per lesson, an attendee's time per exercise). From these come the plan of the 90
and the 120-minute day, what to skip when late (with its measured seconds) and each lesson's own time line
(:func:`write_time_lines`; a test fails when a committed lesson's line differs).

The marks live in the lessons' headings, where the book and an attendee see them: ``## Plots · *homework*``. A
lesson's cells before its first marked heading (parameters, the day's switch) run in class.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
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
# What explaining a section takes at least: its Markdown said aloud at a presenter's pace (about 130 words a minute).
SPOKEN_WORDS_PER_MIN = 130
# Headings of a lesson's frame, not of a part that is taught or left: never marked.
FRAME = ("Overview", "Prerequisites", "Exercises", "Summary", "What's next")

# An attendee's minutes per exercise: the upper end of a tester session's estimate, from its own run-through working
# from the notebook alone (no person has timed them yet).
EXERCISE_MINUTES_SOURCE = ("the upper end of a tester session's estimate for a human attendee, from its own "
                           "run-through of every exercise working from the notebook alone (no person has timed them "
                           "yet)")
EXERCISE_MINUTES = {("01", 1): 8, ("01", 2): 10, ("02", 1): 6, ("02", 2): 5, ("03", 1): 8, ("03", 2): 8,
                    ("04", 1): 5, ("04", 2): 6, ("05", 1): 4, ("05", 2): 8, ("05", 3): 9, ("06", 1): 6,
                    ("06", 2): 8,
                    # The open "why" questions (homework): a few sentences written, then compared with the model
                    # answer; 5 minutes is this session's estimate, untimed like the rest.
                    ("01", 3): 5, ("02", 3): 5, ("03", 3): 5, ("04", 3): 5, ("05", 4): 5, ("06", 3): 5}
# The exercises that ask why: no self-check, a model answer (a Markdown cell tagged "model-answer") to compare with.
OPEN_QUESTIONS = (("01", 3), ("02", 3), ("03", 3), ("04", 3), ("05", 4), ("06", 3))


@dataclass(frozen=True)
class Section:
    """A marked heading of a lesson and the code cells under it (their ids), up to the next heading of its level."""

    title: str
    mark: str | None  # None: a heading left unmarked (``unmarked`` names them)
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
@lru_cache(maxsize=1)
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


# ---- the timed run-through: what the day costs beyond the cells --------------------------------------------------
RUN_THROUGH = TIMINGS.parent / "run_through.json"
TERMINAL_EXERCISE = ("02", 1)  # typed in a terminal: its runs take the day's seconds, beside the exercise's minutes


@lru_cache(maxsize=1)
def run_through() -> dict:
    """The committed timed run-through (``scripts/run_through.py``); empty before one was measured."""
    if not RUN_THROUGH.exists():
        return {"lessons": {}, "terminal_s": {}}
    return json.loads(RUN_THROUGH.read_text())


# The person's part of a notebook switch (finding the next file, opening it, scrolling to the top): assumed, not
# timed; the kernel's start is measured.
SWITCH_PERSON_S = 30


def friction_seconds(number: str, exercises: tuple[int, ...], run_s: float = 0.0) -> float:
    """What a lesson costs in class beyond the cells' seconds of the Run All measurement (``run_s``), from the
    run-through: its in-class cells run alone and its kernel's start (that lesson's wall time, minus ``run_s``), the
    person's part of the switch (assumed) and, where its terminal exercise is done in class, the terminal's runs."""
    measured = run_through()
    lesson = measured["lessons"].get(number)
    seconds_ = (lesson["wall_s"] - run_s + SWITCH_PERSON_S) if lesson else 0.0
    if number == TERMINAL_EXERCISE[0] and TERMINAL_EXERCISE[1] in exercises:
        seconds_ += sum(measured["terminal_s"].values())
    return seconds_


def run_through_markdown() -> str:
    """The run-through against the plan, per lesson: the measured seconds of its in-class cells and of opening it,
    beside the cells' seconds the plan had from the Run All measurement, and the terminal's runs."""
    measured = run_through()
    if not measured["lessons"]:
        return "No timed run-through is recorded yet (`scripts/run_through.py` measures one)."
    how = measured["measured"]
    lines = [f"Measured {how['date']} at {how['commit']} on {how['cpu_cores']} CPU cores: {how['how']}. The plan "
             "counts each lesson's run-through time (its in-class cells run alone, and its kernel's start) in place of "
             f"the Run All's cells, {SWITCH_PERSON_S} s for the person's part of each switch (assumed: finding and "
             "opening the file was not timed), and the terminal's runs where 02's Exercise 1 is done in class. The "
             "cells run alone take longer than in the Run All, where the homework cells before them had already "
             "imported and warmed what they use.", "",
             "| lesson | in-class cells, run-through (s) | the same cells in the Run All (s) | kernel start (s) |",
             "| --- | --- | --- | --- |"]
    for number, lesson in sorted(measured["lessons"].items()):
        planned = seconds([s for s in sections(number) if s.in_class(DAYS[0])], number)
        lines.append(f"| {number} | {lesson['cells_s']:.0f} | {planned:.0f} | {lesson['kernel_and_switch_s']:.0f} |")
    terminal = measured["terminal_s"]
    lines += ["", f"02's terminal exercise: `python3 run.py` took {terminal['cold']:.0f} s the first time (a plain "
              f"shell has none of the harness's compile cache) and {terminal['after_edit']:.0f} s after the prompt "
              "edit."]
    return "\n".join(lines)


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
    friction_s: float = 0.0  # opening the lesson, and its terminal runs in class (the run-through's)

    @property
    def minutes(self) -> int:
        return math.ceil((self.run_s + self.friction_s) / 60 + self.exercise_min + self.explain_min)


def lesson_plan(number: str, day: int, explain_min: int, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> LessonPlan:
    """Work one lesson's minutes out for a day from its marks, the measured seconds and the stated minutes."""
    found = sections(number, notebooks_dir)
    taught = [s for s in found if s.in_class(day)]
    left = [s for s in found if not s.in_class(day)]
    taught_ex = tuple(s.exercise for s in taught if s.exercise)
    left_ex = tuple(s.exercise for s in left if s.exercise)
    homework_s, run_s = seconds(left, number), seconds(taught, number)
    return LessonPlan(number, day, run_s, taught_ex,
                      sum(EXERCISE_MINUTES[(number, n)] for n in taught_ex), explain_min, homework_s, left_ex,
                      math.ceil(homework_s / 60 + sum(EXERCISE_MINUTES[(number, n)] for n in left_ex)),
                      sum(s.words for s in taught), friction_seconds(number, taught_ex, run_s))


def skipped_seconds(number: str, titles, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[tuple[str, float]]:
    """The named in-class sections with their measured seconds (what skipping each saves on top of explaining)."""
    by_title = {s.title: s for s in sections(number, notebooks_dir)}
    return [(title, seconds([by_title[title]], number)) for title in titles]


# ---- on a trn2: the compiles of each lesson ---------------------------------------------------------------------
@dataclass(frozen=True)
class Trn2Compile:
    """One run of a lesson on a trn2 with RUN_ON_TRN2 on: the neuronx-cc compiles it triggers with an empty compile
    cache (graphs per process times processes) and the minutes one compile takes (low, high), with their source."""

    lesson: str
    cell: str
    run: str
    graphs: int  # per process: a generate() through a static cache compiles a prefill and a decode graph
    processes: int  # one per rank when sharded: each rank compiles its own graphs
    minutes: tuple[float, float]
    source: str

    @property
    def compiles(self) -> int:
        return self.graphs * self.processes


# The sources of the minutes, said once. No neuronx-cc compile time of a model this small is published, and none was
# measured here (no trn2 in this project's CI): the twin figures are assumed.
TWIN_MINUTES = (0.5, 2.0)
TWIN_SOURCE = ("assumed: no published figure for a tiny graph; AWS says only that a first compile \"can take several "
               "minutes for large models\" (how-to-optimize-with-torch-compile)")
REAL_SOURCE = ("assumed from AWS's \"several minutes for large models\" (how-to-optimize-with-torch-compile); not "
               "measured")
LARGE_SOURCE = ("AWS's recipe for the 32B Qwen3-VL on a trn2.48xlarge allows 1200 s to compile "
                "(tutorial-qwen3-vl-32b): the upper figure; the lower is assumed")
TRN2_COMPILES = (
    Trn2Compile("01", "load the dataset", "3 demo twins, only where `make demo` left no results", 0, 3, TWIN_MINUTES,
                "0: `make demo` the day before already swept them (3 twins x 2 graphs otherwise)"),
    Trn2Compile("02", "run it (cold)", "MODEL tiny/qwen3, one core", 2, 1, TWIN_MINUTES, TWIN_SOURCE),
    Trn2Compile("02", "a real checkpoint", "REAL_HERE SmolLM2-135M, one core", 2, 1, (2.0, 5.0), REAL_SOURCE),
    Trn2Compile("02", "on a trn2", "REAL_MODEL Qwen3-0.6B, one core", 2, 1, (2.0, 5.0), REAL_SOURCE),
    Trn2Compile("02", "other libraries", "all-MiniLM-L6-v2 (one encoder graph) and the diffusion twin (denoiser, "
                "VAE decoder)", 3, 1, TWIN_MINUTES, TWIN_SOURCE),
    Trn2Compile("03", "broken runs", "the perturbed twin and the reference run of tiny/llama (load, compile and "
                "timeout stop before neuronx-cc finishes)", 4, 1, TWIN_MINUTES, TWIN_SOURCE),
    Trn2Compile("04", "run both", "tiny/llama TP and tiny/qwen3_moe TP+EP over 2 cores", 4, 2, TWIN_MINUTES,
                TWIN_SOURCE),
    Trn2Compile("04", "the real Qwen3-30B-A3B", "4 ranks, TP+EP", 2, 4, (5.0, 20.0), LARGE_SOURCE),
    Trn2Compile("04", "a gated model", "Llama-3.3-70B, 8 ranks (only with access)", 2, 8, (5.0, 20.0), LARGE_SOURCE),
    Trn2Compile("05", "one architecture, live", "LIVE tiny/qwen3: 02's graphs, from the cache", 0, 1, TWIN_MINUTES,
                "0: a cache hit of 02's compile"),
    Trn2Compile("06", "a release sweep", "tiny/qwen2 and tiny/smollm3", 4, 1, TWIN_MINUTES, TWIN_SOURCE),
)


def trn2_compiles(lesson: str | None = None) -> dict[str, tuple[int, float, float]]:
    """Per lesson (teaching order): the neuronx-cc compiles its cells trigger on a trn2 with RUN_ON_TRN2 on and an
    empty compile cache, and the minutes they take, low and high (compiles on different ranks run at once, so a
    sharded run counts its graphs' minutes once). ``lesson``: that lesson alone. A synced or warm cache (`cache
    sync`, the day before's `make demo`) turns each of them into a cache hit."""
    out = {}
    for number in dict.fromkeys(r.lesson for r in TRN2_COMPILES):  # teaching order, as listed
        runs = [r for r in TRN2_COMPILES if r.lesson == number]
        out[number] = (sum(r.compiles for r in runs), sum(r.graphs * r.minutes[0] for r in runs),
                       sum(r.graphs * r.minutes[1] for r in runs))
    return {lesson: out[lesson]} if lesson else out


def trn2_compiles_markdown() -> str:
    """The compiles per lesson on a trn2, as a Markdown table, each run with the source of its minutes."""
    lines = ["| lesson | cell | what compiles | compiles (graphs x processes) | minutes each | source |",
             "| --- | --- | --- | --- | --- | --- |"]
    for number in dict.fromkeys(r.lesson for r in TRN2_COMPILES):
        for r in (r for r in TRN2_COMPILES if r.lesson == number):
            lines.append(f"| {number} | {r.cell} | {r.run} | {r.compiles} ({r.graphs} x {r.processes}) | "
                         f"{r.minutes[0]:g}-{r.minutes[1]:g} | {r.source} |")
    total = trn2_compiles()
    lines.append("| all | | | " + str(sum(n for n, _, _ in total.values())) + " | "
                 f"{sum(lo for _, lo, _ in total.values()):.0f}-{sum(hi for _, _, hi in total.values()):.0f} "
                 "min in all | |")
    return "\n".join(lines)
