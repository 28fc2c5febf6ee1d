"""End to end: `neuronhelpers app` serves the explorer with Voila; headless Chromium (Debian's, driven by
Playwright) uses it as a catalog user would: reads a foreign results file's rows and its notice, picks versions,
looks at Trending one task at a time, sorts by a column header, clicks a model's name, downloads its run.py and
copies the reproduce command. Screenshots go to test-artifacts/:

    explorer-foreign.png   a results file written by another tool (published columns only, a result outside
                           the vocabulary) loaded, with its notice
    explorer-trending.png  Trending, one task, untested models with their architecture twin's verdict as a hint
    explorer-detail.png    a model's detail: reproduce line, versions, timings, run.py with download and copy
    explorer-gemma2.png    a failed twin whose strings try to inject markup (shown as text)
    explorer-published.png a folder in the published dataset's layout: cores, memory, what each row ran on, the
                           date, an exclusion's reason
    explorer-published-detail.png  one such model's detail, the published columns as recorded
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import ARTIFACTS, CHROMIUM, ROOT, launch_chromium
from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.recipes import render
from neuronhelpers.store import dataset, schema

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="Debian's chromium is not installed (make test installs it)")
XSS = "<img src=x onerror=\"window.__pwned = 1\">"
FOREIGN = "other-tool-neuronx-cc-2.21.parquet"
RUN_PY = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_foreign(folder: Path) -> None:
    """A results file from another tool: only the published columns, one result outside our vocabulary."""
    path = folder / "data" / FOREIGN
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "model_id": ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B-Instruct", "google/gemma-3-1b-it"],
        "neuronx_cc": ["2.21.18209.0"] * 3, "library": ["transformers"] * 3, "library_version": ["4.57.1"] * 3,
        "neuron_cores": [1, 1, 1], "result": ["PASS", "COMPILED_ONLY", "FAIL"],
        "error": [None, None, "RuntimeError: NCC_EVRF009 something"],
    }), path)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("app-results")
    run_py = render.render_run_py(render.recipe_params(resolve_model("tiny/llama"), get_backend("cpu")))
    RUN_PY["tiny/llama"] = run_py
    common = dict(task="text-generation", neuron_cores=1, backend="cpu", compiler="inductor", compiler_version="2.13.0",
                  library="transformers", library_version="5.23.0", wall_s=9.5, peak_memory_bytes=2**29)
    dataset.append_rows(folder, [
        schema.new_row(model_id="tiny/llama", twin_of="llama", model_type="llama", result="PASS", verification="exact",
                        run_py=run_py, requirements="torch==2.13.0\ntransformers==5.23.0\n", compile_s=6.25,
                        generate_s=0.84, decode_tokens_per_s=38.5, neuron_sdk="2.27.0", **common),
        schema.new_row(model_id="tiny/qwen3", twin_of="qwen3", model_type="qwen3", result="PASS", verification="exact",
                        run_py="# run.py\n", **{**common, "wall_s": 14.429868023000012}),
        schema.new_row(model_id="tiny/gemma2", twin_of="gemma2", model_type="gemma2", result="FAIL", stage="compile",
                        cause=f"FailOnRecompileLimitHit {XSS}", error=f"FailOnRecompileLimitHit {XSS}",
                        run_py=f"# {XSS}\n", **common),
        schema.new_row(model_id="Qwen/Qwen3-0.6B", model_type="qwen3", result="PASS", verification="exact",
                        run_py="# run.py\n", **{**common, "wall_s": 31.0}),
    ])
    write_foreign(folder)
    yield from _serve(folder)


@pytest.mark.slow
def test_a_catalog_user_browses_the_served_page(served):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    dialogs = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": 1400, "height": 1800}, accept_downloads=True,
                                      permissions=["clipboard-read", "clipboard-write"])
        page = context.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        started = time.monotonic()
        page.goto(served, timeout=120_000)
        ui = page.locator(".nh-explorer")  # the widget (the page also holds the hidden static copy)
        summary = ui.locator(".nh-summary")
        summary.get_by_text("Selected: ").wait_for(timeout=120_000)
        print(f"page rendered in {time.monotonic() - started:.1f} s")
        assert page.locator(".nh-static").is_hidden()  # the static copy is for HTML exports without widgets

        # The newest pair is the foreign file's: its rows show, with one notice naming the file.
        notice = ui.locator(".nh-notice")
        assert notice.count() == 1 and FOREIGN in notice.inner_text() and "COMPILED_ONLY" in notice.inner_text()
        ui.get_by_text("COMPILED_ONLY", exact=True).wait_for(timeout=30_000)
        assert "1 other results" in summary.inner_text() and "1 PASS · 1 FAIL" in summary.inner_text()
        page.screenshot(path=str(ARTIFACTS / "explorer-foreign.png"), full_page=True)

        # The twins' versions; then Trending, one task at a time (no "all tasks" there).
        page.locator("select").filter(has=page.locator("option", has_text="inductor 2.13.0")).select_option(
            "inductor 2.13.0")
        page.locator("select").filter(has=page.locator("option", has_text="5.23.0")).select_option("5.23.0")
        summary.get_by_text(f"Selected: {len(SELECTED)} models").wait_for(timeout=30_000)
        page.get_by_role("button", name="Trending").click()
        summary.get_by_text("Trending: ").wait_for(timeout=30_000)
        task = page.locator("select").filter(has=page.locator("option", has_text="text-to-image"))
        assert task.input_value() == "text-generation" and "all tasks" not in task.inner_text()
        ui.get_by_text("architecture twin tiny/qwen3 (inductor 2.13.0, transformers 5.23.0): PASS").first.wait_for(
            timeout=30_000)  # the hint names the pair it comes from
        assert ui.get_by_role("button", name="rank", exact=True).is_visible()
        assert ui.get_by_role("button", name="downloads", exact=True).is_visible()
        page.get_by_role("button", name="wall time (s)").click()
        page.get_by_role("button", name="wall time (s) ▲").wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "explorer-trending.png"), full_page=True)

        # Architectures: filter, then click the model's name (no picker needed).
        page.get_by_role("button", name="Architectures").click()
        summary.get_by_text("Architectures: 3 models").wait_for(timeout=30_000)
        ui.get_by_role("button", name="tiny/qwen3", exact=True).wait_for(timeout=30_000)
        assert "14.4" in ui.locator(".nh-grid").inner_text() and "14.429" not in ui.locator(".nh-grid").inner_text()
        page.get_by_placeholder("filter by name").fill("llama")
        page.get_by_placeholder("filter by name").press("Enter")
        summary.get_by_text("Architectures: 1 models").wait_for(timeout=30_000)
        assert "tiny/gemma2" not in ui.locator(".nh-grid").inner_text()
        page.get_by_role("button", name="tiny/llama", exact=True).click()
        runpy = ui.locator(".nh-runpy")
        runpy.wait_for(timeout=30_000)
        text = runpy.inner_text()
        assert "def device_run" in text and "'model_id': 'tiny/llama'" in text
        assert runpy.bounding_box()["height"] <= 330  # bounded and scrollable, not 6,000 px
        detail = ui.locator(".nh-block").first
        assert "neuronhelpers run tiny/llama --backend cpu" in detail.inner_text()
        for label in ("Neuron SDK", "2.27.0", "6.2 s", "38.5 tokens/s"):
            ui.get_by_text(label).first.wait_for(timeout=10_000)
        with page.expect_download() as download:
            page.get_by_role("link", name="download run.py").click()
        assert download.value.suggested_filename == "run.py"
        assert Path(download.value.path()).read_text() == RUN_PY["tiny/llama"]
        with page.expect_download() as download:
            page.get_by_role("link", name="download requirements.txt").click()
        assert Path(download.value.path()).read_text() == "torch==2.13.0\ntransformers==5.23.0\n"
        detail.get_by_role("button", name="copy").click()
        detail.get_by_role("button", name="copied").wait_for(timeout=10_000)
        assert page.evaluate("navigator.clipboard.readText()") == "neuronhelpers run tiny/llama --backend cpu"
        page.screenshot(path=str(ARTIFACTS / "explorer-detail.png"), full_page=True)

        # untrusted strings arrive as text, never as markup
        page.get_by_placeholder("filter by name").fill("gemma")
        page.get_by_placeholder("filter by name").press("Enter")
        page.get_by_role("button", name="tiny/gemma2", exact=True).click()
        ui.locator(".nh-code", has_text="FailOnRecompileLimitHit").first.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "explorer-gemma2.png"), full_page=True)
        assert page.evaluate("window.__pwned") is None and dialogs == []
        assert page.locator("img[src=x]").count() == 0
        assert XSS in page.locator("body").inner_text()
        browser.close()


@pytest.fixture(scope="module")
def served_published(tmp_path_factory):
    """The app over a folder in the published dataset's layout: the made-up example (two files, one without
    `exclusion`) and one more file whose untrusted text tries to inject markup."""
    from neuronhelpers.store import example

    folder = example.write_published_example(tmp_path_factory.mktemp("app-published"))
    hostile = example.example_rows(example.NEWER).slice(0, 1).to_pylist()[0]
    hostile.update(model_id="Qwen/Qwen3-8B", neuronx_cc="2.21.0.0", notes=XSS, runner=f"runner {XSS}")
    pq.write_table(pa.Table.from_pylist([hostile], schema=schema.PUBLISHED_SCHEMA),
                   folder / "data" / "hostile.parquet")
    yield from _serve(folder)


def _serve(folder: Path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neuronhelpers", "app", "--results", str(folder),
                             "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stdout.read().decode()[-3000:])
            time.sleep(0.5)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_the_published_layout_shows_cores_memory_reason_date_and_runner(served_published):
    """explorer-published.png: the published layout's rows in the Selected view (cores, memory, what they ran on, the
    date, an exclusion's reason); explorer-published-detail.png: one model's published columns, as recorded."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    dialogs = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": 1500, "height": 1600}).new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(served_published, timeout=120_000)
        ui = page.locator(".nh-explorer")
        summary = ui.locator(".nh-summary")
        summary.get_by_text("Selected: ").wait_for(timeout=120_000)
        assert "made-up example in the published layout" in ui.locator(".nh-notice").inner_text()
        page.locator("select").filter(has=page.locator("option", has_text="neuronx-cc 2.23.6484.0")).select_option(
            "neuronx-cc 2.23.6484.0")
        page.locator("select").filter(has=page.locator("option", has_text="5.23.0")).select_option("5.23.0")
        page.get_by_placeholder("filter by name").fill("llama")
        page.get_by_placeholder("filter by name").press("Enter")
        grid = ui.locator(".nh-grid")
        grid.get_by_text("17.30").first.wait_for(timeout=30_000)  # hbm_peak_gb, to the digit
        for text in ("meta-llama/Llama-3.1-8B-Instruct", "Trainium", "2026-12-02", "1433"):
            assert text in grid.inner_text(), text
        page.get_by_placeholder("filter by name").fill("")
        page.get_by_placeholder("filter by name").press("Enter")
        page.locator("select").filter(has=page.locator("option", has_text="text-to-image")).select_option(
            "text-generation")  # the task's models fit one page
        grid.get_by_text("too large: needs more than 16 cores").wait_for(timeout=30_000)  # the exclusion's reason
        page.screenshot(path=str(ARTIFACTS / "explorer-published.png"), full_page=True)

        page.get_by_role("button", name="meta-llama/Llama-3.1-8B-Instruct", exact=True).click()
        recorded = ui.get_by_text("As the published dataset records it")
        recorded.wait_for(timeout=30_000)
        detail = ui.locator(".nh-table").filter(has_text="runner")
        assert "neuronhelpers-example" in detail.inner_text() and "english" in detail.inner_text()
        tables = " ".join(ui.locator(".nh-table").all_inner_texts())
        for label in ("17.30 GiB", "2026-12-02 09:30:15 UTC", "neuronx-cc 2.23.6484.0", "Trainium"):
            assert label in tables, label
        assert "2 (none)" not in tables  # the published dataset records no parallelism: the count alone
        page.screenshot(path=str(ARTIFACTS / "explorer-published-detail.png"), full_page=True)

        # a published row's untrusted text arrives as text
        page.locator("select").filter(has=page.locator("option", has_text="neuronx-cc 2.21.0.0")).select_option(
            "neuronx-cc 2.21.0.0")
        page.get_by_role("button", name="Qwen/Qwen3-8B", exact=True).click()
        ui.locator("h3", has_text="Qwen/Qwen3-8B").wait_for(timeout=30_000)
        ui.locator(".nh-table", has_text="runner").wait_for(timeout=30_000)
        assert page.evaluate("window.__pwned") is None and dialogs == [] and page.locator("img[src=x]").count() == 0
        assert XSS in page.locator("body").inner_text()
        browser.close()
