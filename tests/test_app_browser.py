"""End to end: `neuronhelpers app` serves the explorer with Voila; headless Chromium (Debian's, driven by
Playwright) types a filter, picks a model and finds its run.py in the detail pane. Saves a screenshot."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT
from neuronhelpers import dataset, recipe, results
from neuronhelpers.backends import get_backend
from neuronhelpers.models import resolve_model

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (make test installs it)")
XSS = "<img src=x onerror=\"window.__pwned = 1\">"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("app-results")
    run_py = recipe.render_run_py(recipe.recipe_params(resolve_model("tiny/llama"), get_backend("cpu")))
    common = dict(task="text-generation", neuron_cores=1, backend="cpu", compiler="inductor", compiler_version="2.13.0",
                  library="transformers", library_version="5.23.0", wall_s=9.5, peak_memory_bytes=2**29)
    dataset.append_rows(folder, [
        results.new_row(model_id="tiny/llama", twin_of="llama", result="PASS", verification="exact", run_py=run_py,
                        requirements="torch==2.13.0\ntransformers==5.23.0\n", **common),
        results.new_row(model_id="tiny/gemma2", twin_of="gemma2", result="FAIL", stage="compile",
                        error=f"FailOnRecompileLimitHit {XSS}", run_py=f"# {XSS}\n", **common),
    ])
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "neuronhelpers", "app", "--results", str(folder), "--port", str(port)],
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


def test_filter_pick_and_read_run_py_in_the_served_page(served):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    dialogs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1300, "height": 1800})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(served, timeout=120_000)
        page.get_by_role("button", name="Architectures").click(timeout=120_000)
        table = page.locator(".nh-table").first
        table.get_by_text("Architectures: 2 models").wait_for(timeout=30_000)
        page.get_by_placeholder("filter by name").fill("llama")
        page.get_by_placeholder("filter by name").press("Enter")
        table.get_by_text("Architectures: 1 models").wait_for(timeout=30_000)
        table.get_by_role("cell", name="tiny/llama", exact=True).wait_for(timeout=30_000)
        assert "tiny/gemma2" not in table.inner_text()
        picker = page.locator("select").filter(has=page.locator("option", has_text="pick a model"))
        picker.locator("option", has_text="tiny/llama").wait_for(state="attached", timeout=30_000)
        picker.select_option("tiny/llama")
        runpy = page.locator(".nh-runpy")
        runpy.wait_for(timeout=30_000)
        text = runpy.inner_text()
        assert "def device_run" in text and "'model_id': 'tiny/llama'" in text
        page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)

        # untrusted strings arrive as text, never as markup
        page.get_by_placeholder("filter by name").fill("gemma")
        page.get_by_placeholder("filter by name").press("Enter")
        table.get_by_role("cell", name="tiny/gemma2", exact=True).wait_for(timeout=30_000)
        picker.locator("option", has_text="tiny/gemma2").wait_for(state="attached", timeout=30_000)
        picker.select_option("tiny/gemma2")
        page.screenshot(path=str(ARTIFACTS / "explorer-gemma2.png"), full_page=True)
        page.locator(".nh-code", has_text="FailOnRecompileLimitHit").first.wait_for(timeout=30_000)
        assert page.evaluate("window.__pwned") is None and dialogs == []
        assert page.locator("img[src=x]").count() == 0
        assert XSS in page.locator("body").inner_text()
        browser.close()
