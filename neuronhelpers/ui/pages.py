"""The workshop's two pages, written from the package so they stay true: the attendees' start page
(``notebooks/00_start_here.ipynb``: one screen of what you will be able to do, what to know beforehand, the set-up as
typed, the lessons in order) and the teacher's guide (``notebooks/teachers_guide.ipynb``: the plans, homework, a trn2
day prepared, the backend's name and status, the glossary). Tests fail when a committed page differs:
``python -m neuronhelpers.ui.pages`` rewrites both, and each lesson's own time line and frame rows (objectives,
what to know beforehand, where to read more: ``workshop.write_time_lines``).
"""

from __future__ import annotations

import html
from pathlib import Path

from neuronhelpers.ui import day, trn2day, workshop
from neuronhelpers.ui.workshop import DAYS, NOTEBOOKS_DIR, TITLES

START_PAGE = workshop.START_PAGE
GUIDE = "teachers_guide"
START_PAGE_MAX_WORDS = 400  # one screen: the attendee reads it before the first lesson

# What each lesson lets an attendee do, in a line (the start page lists them; each lesson's Overview says more).
CAN_DO = {
    "01": "look a model up, and see what its answer stands on",
    "02": "run a model as Trainium's recipe does, and reproduce it",
    "03": "tell a verified result from a failure and from no verdict",
    "04": "say how many cores a model needs, and what each holds",
    "05": "see which architectures run, and what blocks the rest",
    "06": "compare two releases, and contribute a result",
}


def lessons_markdown() -> str:
    """The lessons in order, each a link to its notebook and what it lets you do."""
    paths = {p.stem[:2]: p.name for p in workshop.lesson_paths()}
    return "\n".join(f"{i}. [{number} · {TITLES[number]}]({paths.get(number, number)}): {CAN_DO[number]}"
                     for i, number in enumerate(workshop.LESSON_ORDER[1:], start=1))


def setup_folded() -> str:
    """The set-up as typed, folded (an HTML block: JupyterLab's and nbconvert's Markdown both keep it closed)."""
    return ("<details><summary>Set-up, as typed (the day before)</summary><pre>" + html.escape(workshop.SETUP)
            + "</pre>Without JupyterLab, <code>build/book/index.html</code> (<code>make book</code>) shows every "
            "lesson as it ran.</details>")


def start_page():
    """The attendees' start page: one screen, then the machine check."""
    from nbformat.v4 import new_code_cell, new_markdown_cell

    # One screen (1366x768, the browser test's screenshot): no table, two headings per cell, the set-up folded, since
    # it was done the day before and the lessons are what the attendee reads next.
    cells = [
        new_markdown_cell(
            "# 00 · Start here\n## Overview\n*Does this Hugging Face model run unmodified on AWS Trainium, and how "
            "do I run it myself?* Trainium runs PyTorch through TorchNeuron, AWS's native backend (in beta).\n"
            "## Prerequisites\nPython, a little pandas, transformers' `from_pretrained` and `generate`; nothing about "
            "Trainium. Set up the day before (folded below). Two switches every lesson has:"),
        new_code_cell("RUN_ON_TRN2 = False     # True on a trn2: the cells that run real models there run\n"
                      "FETCH_FROM_HUB = False  # True: models the shelf lacks are downloaded (sizes are said first)",
                      metadata={"tags": ["parameters"]}),
        new_markdown_cell("**Is this machine ready?** A line per problem, saying what to do, then a summary."),
        new_code_cell("from neuronhelpers import doctor, workshop\n"
                      "workshop.begin(FETCH_FROM_HUB)\ndoctor_status = doctor(short=True)"),
        new_markdown_cell(
            "## Summary\nSix lessons, each ending by naming the next; *in class* exercises are done live, the rest "
            "at home. Terms are defined where first used ([teacher's guide](" + GUIDE + ".ipynb): glossary, plan)."
            "\n## What's next\n" + lessons_markdown() + "\n\n" + setup_folded()),
    ]
    return _notebook(cells, "start")


def teachers_guide():
    """The teacher's guide: plans, homework, the trn2 day prepared, the backend's name, the glossary."""
    from nbformat.v4 import new_markdown_cell

    cells = [
        new_markdown_cell(
            "# Teacher's guide\n\nFor whoever teaches the day; attendees start at [00 · Start here](" + START_PAGE
            + ".ipynb). Here: the plan of the 90- and the 120-minute day, what to skip when late, the homework, a "
            "trn2 day prepared the day before, what a Run All on a trn2 would do, and the glossary."),
        new_markdown_cell(f"## The plan: {DAYS[0]} minutes\nEach lesson marks its sections and exercises *in class*, "
                          f"*{day.IN_CLASS_LONG}* or *homework* in their headings. A lesson's minutes are its in-class "
                          "cells' measured seconds (" + day.measured_line() + "), its in-class exercises (an "
                          f"attendee's minutes: {day.EXERCISE_MINUTES_SOURCE}) and the minutes stated for explaining. "
                          f"{workshop.slack_minutes()} minutes are slack. When late, skip the sections named, in that "
                          "order (their cells' seconds are said; the explaining they save is the larger part).\n\n"
                          + workshop.plan_markdown() + "\n\n" + workshop.PAIR_VARIANT),
        new_markdown_cell("## How the plan was timed\n" + day.run_through_markdown()),
        new_markdown_cell(f"## The {DAYS[1]}-minute day\nThe same lessons with the exercises marked "
                          f"*{day.IN_CLASS_LONG}* done live and two more minutes to explain each: "
                          f"{workshop.slack_minutes(DAYS[1])} minutes are slack.\n\n"
                          + workshop.plan_markdown(DAYS[1])),
        new_markdown_cell(f"## Homework\nWhat the {DAYS[0]}-minute day leaves for home, per lesson: the exercises and "
                          "the cells of the sections marked *homework* (they run in a Run All too; at home they are "
                          "read, not just run).\n\n" + workshop.homework_markdown()),
        new_markdown_cell("## A trn2 day, prepared the day before\n" + trn2day.preparation_markdown()),
        new_markdown_cell("## A Run All on a trn2, cell by cell\n" + trn2day.run_all_markdown()),
        new_markdown_cell("## On a trn2: the compiles of each lesson, estimated\nWith `RUN_ON_TRN2 = True` and an "
                          "empty compile cache, each lesson's cells start these neuronx-cc compiles. **Every figure "
                          "is an estimate** until measured on a trn2 (none was: no trn2 in this project's CI); each "
                          "says its source. A synced or warm cache (`cache sync`, the preparation run) turns the "
                          "twins' compiles into cache hits.\n\n" + day.trn2_compiles_markdown()),
        new_markdown_cell("## The backend's name\n" + trn2day.BACKEND_NAME),
        new_markdown_cell("## Glossary\nEach term is defined in the lesson that first uses it; here they are "
                          "together.\n\n" + workshop.glossary_markdown()),
    ]
    return _notebook(cells, "guide")


def _notebook(cells, prefix: str):
    import nbformat
    from nbformat.v4 import new_notebook

    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{prefix}-{i:02d}"  # fixed ids: a rewrite changes no line
    return nbformat.from_dict(nb)


def markdown_words(nb) -> int:
    """Words of a notebook's Markdown cells, code blocks included (what a reader reads)."""
    return sum(len(cell.source.split()) for cell in nb.cells if cell.cell_type == "markdown")


def write_pages(notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[Path]:
    """Write the start page and the teacher's guide into ``notebooks_dir``."""
    import nbformat

    written = []
    for name, nb in ((START_PAGE, start_page()), (GUIDE, teachers_guide())):
        path = Path(notebooks_dir) / f"{name}.ipynb"
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for written in (*write_pages(), *workshop.write_time_lines()):
        print(written)
