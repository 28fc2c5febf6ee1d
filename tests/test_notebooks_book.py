"""The static book of the notebooks (`make book`, neuronhelpers.ui.book): each lesson as it ran, rendered with
nbconvert's lab template, a contents page in lesson order, solutions collapsed, the test's injected parameters left
out, nothing fetched from the network. This file sorts after tests/test_notebooks.py, whose run leaves the executed
copies in build/executed that the book is rendered from. Screenshots go to test-artifacts/:

    book-index.png     the contents page
    book-00-start.png  the start page: the plan, the set-up, the glossary
    book-01.png        lesson 01 (a matplotlib figure embedded in the page)
"""

import os
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from conftest import ARTIFACTS, CHROMIUM, ROOT, launch_chromium
from neuronhelpers.core.errors import UserError
from neuronhelpers.ui.book import build_book, lesson_heading
from neuronhelpers.ui.pages import GUIDE
from neuronhelpers.ui.workshop import LESSON_ORDER, lesson_paths

NOTEBOOKS = lesson_paths(ROOT / "notebooks")  # in teaching order, the start page first
EXECUTED = ROOT / "build" / "executed"  # where tests/test_notebooks.py keeps each executed notebook
XSS = "<script>window.__pwned = 1</script>"
# A script, style or image the page would fetch (a link a reader may follow, <a href>, is fine: nothing loads it).
CDN = re.compile(r"""\bsrc=["']?(https?:)?//|<link\b[^>]*\bhref=["']?(https?:)?//""")


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


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (make test installs it)")
def test_the_book_of_the_lessons_as_they_ran_reads_offline_in_a_browser(tmp_path):
    from playwright.sync_api import sync_playwright

    missing = [p.name for p in NOTEBOOKS if not (EXECUTED / p.name).exists()]
    if missing:
        pytest.fail(f"no executed copy of {', '.join(missing)} in {EXECUTED}: tests/test_notebooks.py must run first "
                    "(it writes them), or `make book` executes them")
    out = tmp_path / "book"
    paths = build_book(EXECUTED, out, execute_missing=False)
    guide = f"{GUIDE}.html"  # the teacher's guide closes the book (Markdown only: nothing executed)
    assert sorted(p.name for p in paths) == sorted([*(p.stem + ".html" for p in NOTEBOOKS), guide, "index.html"])
    assert len(paths) == len(LESSON_ORDER) + 2
    index = (out / "index.html").read_text()
    links = re.findall(r'<li><a href="([^"]+)">', index)
    assert links == [*(p.stem + ".html" for p in NOTEBOOKS), guide]  # in teaching order (ui/workshop.py), then it
    guide_page = (out / guide).read_text()
    assert "A Run All on a trn2, cell by cell" in guide_page and "TorchNeuron" in guide_page
    titles = [lesson_heading(nbformat.read(EXECUTED / p.name, as_version=4), p.stem)[0] for p in NOTEBOOKS]
    solutions = 0
    for source, path in zip(NOTEBOOKS, paths, strict=False):
        page = path.read_text()
        assert "celltag_injected-parameters" not in page and not CDN.search(page), path.name
        cells = nbformat.read(EXECUTED / source.name, as_version=4).cells
        count = sum("solution" in c.metadata.get("tags", []) for c in cells)
        collapsed = re.findall(r'<details class="nh-solution"><summary>Solution</summary>(.*?)</details>', page, re.S)
        assert len(collapsed) == count and all("celltag_solution" in c for c in collapsed), path.name
        assert "celltag_solution" not in re.sub(r"<details class=\"nh-solution\">.*?</details>", "", page, flags=re.S)
        solutions += count
    print(f"{solutions} solution cells, each collapsed")

    ARTIFACTS.mkdir(exist_ok=True)
    fetched = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": 1400, "height": 1800})
        context.route(re.compile(r"^https?://"), lambda route: (fetched.append(route.request.url), route.abort()))
        page = context.new_page()
        page.goto((out / "index.html").as_uri())
        for title in titles:
            page.get_by_role("link", name=title).wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "book-index.png"), full_page=True)
        page.get_by_role("link", name=titles[0]).click()  # the attendees' start page: one screen
        page.get_by_role("heading", name="The lessons, in order").wait_for(timeout=30_000)
        assert page.locator("table").count() == 1  # its prerequisites; the plans are the teacher's
        page.screenshot(path=str(ARTIFACTS / "book-00-start.png"), full_page=True)
        page.goto((out / "index.html").as_uri())
        page.get_by_role("link", name="Teacher's guide").click()
        page.get_by_role("heading", name="The plan: 90 minutes").wait_for(timeout=30_000)
        assert page.locator("table").count() >= 6  # both plans, homework, the Run All, the compiles, the glossary
        page.screenshot(path=str(ARTIFACTS / "book-teachers-guide.png"), full_page=True)
        page.goto((out / "index.html").as_uri())

        page.get_by_role("link", name=titles[1]).click()
        page.wait_for_url(re.compile(re.escape(NOTEBOOKS[1].stem) + r"\.html$"))
        page.get_by_role("heading", name=titles[1]).wait_for(timeout=30_000)
        figure = page.locator(".jp-OutputArea-output img").first
        figure.wait_for(timeout=30_000)
        assert figure.evaluate("img => img.complete && img.naturalWidth > 100")  # the matplotlib PNG, embedded
        assert page.get_by_role("link", name="Contents").first.is_visible()
        page.screenshot(path=str(ARTIFACTS / f"book-{NOTEBOOKS[1].stem[:2]}.png"), full_page=True)
        for lesson, picture in (("02", "hands the graph on"), ("04", "What a core is")):
            page.goto((out / f"{next(p.stem for p in NOTEBOOKS if p.stem.startswith(lesson))}.html").as_uri())
            text = page.get_by_text(picture).first
            text.wait_for(timeout=30_000)  # the picture's sentence, then the picture drawn below it
            drawn = text.locator("xpath=following::img[1]")
            assert drawn.evaluate("img => img.complete && img.naturalWidth > 300"), lesson
            drawn.screenshot(path=str(ARTIFACTS / f"book-{lesson}-picture.png"))
        browser.close()
    assert not fetched, fetched  # every page reads offline
