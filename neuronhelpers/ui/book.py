"""The static HTML book of the numbered notebooks (nbconvert's lab template, read offline): the lessons as they ran."""

from __future__ import annotations

import html
import re
import shutil
import tempfile
from pathlib import Path

from neuronhelpers.core.errors import UserError
from neuronhelpers.ui import day
from neuronhelpers.ui.pages import GUIDE, START_PAGE
from neuronhelpers.ui.workshop import lesson_paths

NOTEBOOKS_DIR = day.NOTEBOOKS_DIR
DROPPED_TAG = "injected-parameters"  # papermill's test paths: the test's, not the lesson's
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# The lab template, with every script it would fetch from a CDN left out (require.js, MathJax, Mermaid from cdnjs;
# the widget renderer from unpkg): a page is one self-contained file that reads offline. Solutions are collapsed,
# and each page gets the book's previous / contents / next links.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<style type="text/css">
.nh-book-nav { display: flex; gap: 1.5em; justify-content: center; padding: 0.4em; \
font-family: var(--jp-ui-font-family);
  font-size: 14px; border-bottom: 1px solid var(--jp-border-color2); }
.nh-book-nav.nh-bottom { border-bottom: none; border-top: 1px solid var(--jp-border-color2); margin-top: 1em; }
.nh-book-nav .nh-none { color: var(--jp-ui-font-color3); }
details.nh-solution { margin: 0.5em 0 0.5em 64px; padding: 0.3em 0.6em; border: 1px solid var(--jp-border-color2);
  border-radius: 4px; }
body.jp-Notebook { margin-bottom: 0; padding-bottom: 0; }
.jp-Notebook .jp-RenderedHTMLCommon h1 { margin-top: 0; margin-bottom: 0.3em; }
.jp-Notebook .jp-RenderedHTMLCommon h2 { margin-top: 0.5em; margin-bottom: 0.3em; }
.jp-Notebook .jp-RenderedHTMLCommon p { margin-bottom: 0.5em; }
.jp-Notebook .jp-RenderedHTMLCommon ol { margin-top: 0.3em; margin-bottom: 0.5em; }
details.nh-solution > summary { cursor: pointer; font-family: var(--jp-ui-font-family); font-weight: 600; }
</style>{%- endblock extra_css -%}
{%- block body_header -%}{{ super() }}
{{ resources.book_nav }}{%- endblock body_header -%}
{%- block body_footer -%}
{{ resources.book_nav_bottom }}
{{ super() }}{%- endblock body_footer -%}
{%- block any_cell -%}
{%- if 'solution' in cell.metadata.get('tags', []) -%}
<details class="nh-solution"><summary>Solution</summary>
{{ super() }}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock any_cell -%}
"""

INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8" />
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<style type="text/css">
body {{ font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 52em; margin: 2em auto;
  padding: 0 1em; color: #212121; line-height: 1.5; }}
ol.nh-contents {{ padding-left: 0; list-style: none; }}
ol.nh-contents li {{ margin: 0 0 1.2em 0; }}
ol.nh-contents a {{ font-size: 1.15em; font-weight: 600; }}
ol.nh-contents p {{ margin: 0.2em 0 0 0; }}
code {{ font-size: 0.9em; background: #f2f2f2; padding: 0 0.2em; border-radius: 3px; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>The numbered notebooks in lesson order, each as it ran (outputs included).</p>
<ol class="nh-contents">
{items}
</ol>
</body>
</html>
"""


def build_book(executed_dir, out_dir, *, notebooks_dir=NOTEBOOKS_DIR, execute_missing: bool = False,
               title: str = "neuronhelpers notebooks") -> list[Path]:
    """Render each numbered notebook's executed copy (``executed_dir/<name>.ipynb``) to ``out_dir/<stem>.html``
    and write ``out_dir/index.html``, the contents in lesson order. Returns the pages in lesson order, then the
    contents page.

    A notebook without an executed copy is executed once (and its copy saved to ``executed_dir``) when
    ``execute_missing``; otherwise it is a UserError saying so."""
    import nbformat

    executed_dir, out_dir, notebooks_dir = Path(executed_dir), Path(out_dir), Path(notebooks_dir)
    sources = lesson_paths(notebooks_dir)  # teaching order (ui/workshop.py), not file order
    if not sources:
        raise UserError(f"no numbered notebooks (NN_*.ipynb) in {notebooks_dir}")
    missing = [source for source in sources if not (executed_dir / source.name).exists()]
    if missing and not execute_missing:
        names = ", ".join(source.name for source in missing)
        raise UserError(f"{names} {'has' if len(missing) == 1 else 'have'} no executed copy in {executed_dir}: run "
                        "`make book` (it executes the missing notebooks) or tests/test_notebooks.py")
    for source in missing:
        execute_notebook(source, executed_dir / source.name)
    notebooks = [nbformat.read(executed_dir / source.name, as_version=4) for source in sources]
    guide = notebooks_dir / f"{GUIDE}.ipynb"
    if guide.exists():  # the teacher's guide closes the book: Markdown only, nothing to execute
        sources, notebooks = [*sources, guide], [*notebooks, nbformat.read(guide, as_version=4)]
    chapters = [(source.stem, *lesson_heading(nb, source.stem)) for source, nb in zip(sources, notebooks, strict=True)]

    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = book_exporter()
    pages = []
    for i, (nb, (stem, heading, _)) in enumerate(zip(notebooks, chapters, strict=True)):
        nb = book_cells(nb)
        nb.metadata["title"] = plain(heading)
        nav = navigation(chapters[i - 1] if i else None, chapters[i + 1] if i + 1 < len(chapters) else None)
        # The start page ends with its lessons, each a link: no second bar, so that it keeps to one screen.
        bottom = "" if stem == START_PAGE else nav.replace('class="nh-book-nav"', 'class="nh-book-nav nh-bottom"')
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": stem, "path": str(notebooks_dir)},
                                                             "book_nav": nav, "book_nav_bottom": bottom})
        page = out_dir / f"{stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
    items = "\n".join(f'<li><a href="{html.escape(stem)}.html">{inline(heading)}</a><p>{inline(overview)}</p></li>'
                      for stem, heading, overview in chapters)
    index = out_dir / "index.html"
    index.write_text(INDEX.format(title=html.escape(title), items=items), encoding="utf-8")
    return [*pages, index]


def book_exporter():
    """nbconvert's HTMLExporter with the lab template, images embedded, the CDN scripts left out."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", template_file="book.html.j2", embed_images=True,
                        extra_loaders=[DictLoader({"book.html.j2": TEMPLATE})])


def book_cells(nb):
    """A copy of an executed notebook as the book shows it: without the injected-parameters cell, and without
    widget views (their renderer would come from a CDN; the widget state is dropped with them). The explorer
    displays a static copy of itself beside its widget, which then shows in their place."""
    import nbformat

    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if DROPPED_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    return nb


def lesson_heading(nb, stem: str) -> tuple[str, str]:
    """A lesson's title (its first ``# `` heading, else its file name) and its Overview's first sentence (markdown)."""
    markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    heading = re.search(r"^# +(.+?)\s*#*\s*$", markdown, re.M)
    overview = re.search(r"^## +Overview\s*\n+((?:(?!#).+\n?)+)", markdown, re.M)
    paragraph = " ".join(overview.group(1).split()) if overview else ""
    sentence = re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=[.!?])\s+(?=[A-Z*`\[(])", paragraph, maxsplit=1)[0]
    return (heading.group(1) if heading else stem), sentence


def inline(markdown: str) -> str:
    """A line of a notebook's markdown as safe HTML: escaped, then `code`, **bold** and *emphasis* marked up and
    [links](url) reduced to their text."""
    text = html.escape(re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown))
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"(?<![\w*])\*([^*]+)\*(?![\w*])", r"<em>\1</em>", text)


def plain(markdown: str) -> str:
    """A line of markdown as plain text (for a page's <title>; the template escapes it)."""
    return re.sub(r"[`*]", "", re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown))


def navigation(previous, following) -> str:
    """The previous / contents / next links of a page (each neighbour is (stem, heading, overview) or None)."""
    def link(chapter, rel: str, arrow: str) -> str:
        if chapter is None:
            return f'<span class="nh-none">{rel}</span>'
        stem, heading, _ = chapter
        text = f"{arrow} {inline(heading)}" if rel == "previous" else f"{inline(heading)} {arrow}"
        return f'<a href="{html.escape(stem)}.html" rel="{"prev" if rel == "previous" else "next"}">{text}</a>'

    return (f'<nav class="nh-book-nav">{link(previous, "previous", "←")}<a href="index.html">Contents</a>'
            f'{link(following, "next", "→")}</nav>')


def execute_in_copy(nb, notebooks_dir: Path, work_root: Path, *, timeout: int = 900):
    """Execute a notebook headless (kernel python3) in a copy of its folder under ``work_root``, so nothing it writes
    lands in the repository; its ``../catalog`` is the committed one. Returns the notebook, outputs filled in (the
    notebook tests run each lesson this way too)."""
    from nbclient import NotebookClient

    work = Path(work_root) / "notebooks"
    shutil.copytree(notebooks_dir, work, ignore=shutil.ignore_patterns("*.ipynb"))
    catalog = Path(notebooks_dir).parent / "catalog"
    if catalog.is_dir():
        (Path(work_root) / "catalog").symlink_to(catalog, target_is_directory=True)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    return nb


def execute_notebook(source: Path, target: Path, *, timeout: int = 900) -> None:
    """Execute one notebook file in a temporary copy of its folder (``execute_in_copy``) and save the executed copy
    to ``target``."""
    import nbformat

    print(f"book: executing {source.name} (no executed copy yet)", flush=True)
    nb = nbformat.read(source, as_version=4)
    with tempfile.TemporaryDirectory(prefix="nh-book-") as tmp:
        execute_in_copy(nb, source.parent, Path(tmp), timeout=timeout)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


def cell_durations(nb) -> dict[str, float]:
    """Each executed code cell's seconds, by cell id, from the timings the kernel client records in its metadata."""
    import datetime as dt

    durations = {}
    for cell in nb.cells:
        timing = cell.metadata.get("execution", {})
        if cell.cell_type == "code" and "iopub.execute_input" in timing and "id" in cell:
            start = dt.datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            end = dt.datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
            durations[cell.id] = (end - start).total_seconds()
    return durations


def measure_lessons(results: str | Path, work_root: str | Path, lessons=("01", "02", "03", "04", "05", "06"),
                   notebooks_dir: str | Path = NOTEBOOKS_DIR) -> dict:
    """Execute each lesson as an attendee's Run All on the day (parameters as committed, SOLUTIONS off, `make
    demo`'s results present) and return the seconds of every code cell, by lesson and cell id."""
    import datetime as dt
    import os
    import subprocess

    import nbformat

    cells: dict[str, dict[str, float]] = {}
    for number in lessons:
        nb = nbformat.read(day.lesson_path(number, notebooks_dir), as_version=4)
        if number == "01":  # the lesson's own "../results" is make demo's; the copy runs elsewhere
            index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
            injected = nbformat.v4.new_code_cell(f"RESULTS = {str(Path(results).resolve())!r}")
            injected.metadata["tags"] = [DROPPED_TAG]
            nb.cells.insert(index + 1, injected)
        execute_in_copy(nb, Path(notebooks_dir), Path(work_root) / number)
        cells[number] = {cell_id: round(s, 1) for cell_id, s in cell_durations(nb).items()}
        print(f"{number}: {sum(cells[number].values()):.0f} s", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(notebooks_dir).parent,
                            capture_output=True, text=True).stdout.strip()
    return {"measured": {"date": dt.date.today().isoformat(), "commit": commit, "cpu_cores": os.cpu_count(),
                         "how": "make workshop-timings: each lesson executed headless as an "
                                "attendee's Run All (parameters as committed, SOLUTIONS off, make demo's results "
                                "present, twins and inductor's cache warm)"},
            "cells": cells}
