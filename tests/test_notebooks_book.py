"""The static book of the notebooks (`make book`, neuronhelpers.ui.book): each lesson as it ran, rendered with
nbconvert's lab template, a contents page in lesson order, solutions collapsed, the test's injected parameters left
out, nothing fetched from the network, here on tiny lessons. The book of the lessons as they ran is tested at the end
of tests/test_notebooks.py, whose run makes the executed copies it is rendered from.
"""

import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from conftest import CDN
from neuronhelpers.core.errors import UserError
from neuronhelpers.ui.book import build_book, lesson_heading

XSS = "<script>window.__pwned = 1</script>"


def lesson(number: str, *, executed: bool):
    """A tiny lesson; executed, it carries outputs, the test's injected parameters and a collapsed solution."""
    cells = [new_markdown_cell(f"# {number} · Lesson {XSS}\n\n## Overview\nLearn `x` and **y**. Then more.\n"),
             new_markdown_cell("The parameters:"),
             new_code_cell("A = 1", metadata={"tags": ["parameters"]})]
    if executed:
        cells += [new_code_cell("A = '/tmp/INJECTED'", metadata={"tags": ["injected-parameters"]}),
                  new_code_cell("print(A)", execution_count=1,
                                outputs=[new_output("stream", name="stdout", text="1\n")]),
                  new_code_cell("ANSWER = 42\nANSWER", execution_count=2,
                                metadata={"tags": ["solution"], "jupyter": {"source_hidden": True}},
                                outputs=[new_output("execute_result", execution_count=2, data={"text/plain": "42"})])]
    return new_notebook(cells=cells)


def test_a_book_of_executed_notebooks_is_in_lesson_order_escaped_collapsed_and_offline(tmp_path):
    notebooks, executed, out = tmp_path / "notebooks", tmp_path / "executed", tmp_path / "book"
    notebooks.mkdir()
    executed.mkdir()
    for number in ("02", "01"):
        nbformat.write(lesson(number, executed=False), notebooks / f"{number}_lesson.ipynb")
    nbformat.write(lesson("01", executed=True), executed / "01_lesson.ipynb")
    with pytest.raises(UserError, match=r"02_lesson.ipynb has no executed copy .*make book"):
        build_book(executed, out, notebooks_dir=notebooks)
    nbformat.write(lesson("02", executed=True), executed / "02_lesson.ipynb")

    paths = build_book(executed, out, notebooks_dir=notebooks)
    assert [p.name for p in paths] == ["01_lesson.html", "02_lesson.html", "index.html"]
    index = (out / "index.html").read_text()
    assert index.index('href="01_lesson.html"') < index.index('href="02_lesson.html"')
    assert "<script>" not in index and "Lesson &lt;script&gt;window.__pwned = 1&lt;/script&gt;" in index
    assert "<p>Learn <code>x</code> and <strong>y</strong>.</p>" in index  # the Overview's first sentence
    page = (out / "01_lesson.html").read_text()
    assert "INJECTED" not in page and "print" in page
    details = re.search(r'<details class="nh-solution"><summary>Solution</summary>(.*?)</details>', page, re.S)
    assert details and "ANSWER" in details.group(1) and "42" in details.group(1)  # input and output, collapsed
    assert page.count("ANSWER") == details.group(1).count("ANSWER")
    nav = re.search(r'<nav class="nh-book-nav">(.*?)</nav>', page).group(1)
    assert 'href="index.html"' in nav and 'href="02_lesson.html" rel="next"' in nav and "<script>" not in nav
    for path in paths:
        assert not CDN.search(path.read_text()), path.name  # one file each, read offline


def test_the_title_is_the_first_heading_and_the_overview_its_first_sentence():
    nb = new_notebook(cells=[new_markdown_cell("Intro\n\n# 04 · Sharded runs\n\n## Overview\n"
                                               "How the cores are chosen, e.g. Two. Then the check.\n\n"
                                               "## Prerequisites\nNone.")])
    assert lesson_heading(nb, "04_x") == ("04 · Sharded runs", "How the cores are chosen, e.g. Two.")
    assert lesson_heading(new_notebook(), "04_x") == ("04_x", "")
