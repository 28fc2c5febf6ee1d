"""Shared test setup: an isolated NEURONHELPERS_HOME (twins, compile cache, runs), no network, and machine markers.

The suite runs on a CPU machine, a CUDA machine and a trn2 alike. The harness tests run their models on the
CPU backend everywhere (NEURONHELPERS_BACKEND=cpu unless NEURONHELPERS_TEST_BACKEND names another), and a test
that is about the machine itself says which machine it needs: ``@pytest.mark.machine("cpu")`` (no neuron
device, no GPU), ``"cuda"`` or ``"neuron"``; elsewhere it is skipped with the reason.
"""

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The browser tests (the served explorer, the book): Debian's chromium, driven by Playwright; screenshots land here.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
# A script, style or image the page would fetch (a link a reader may follow, <a href>, is fine: nothing loads it).
CDN = re.compile(r"""\bsrc=["']?(https?:)?//|<link\b[^>]*\bhref=["']?(https?:)?//""")


def launch_chromium(playwright):
    """Headless chromium with nothing of its own reaching for the network (sync, updates, QUIC)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory):
    """One home for the whole session: twins are built once and the compile cache is shared by the tests."""
    from neuronhelpers.core.settings import SHELF_ENV, shelf_home

    home = os.environ.get("NEURONHELPERS_TEST_HOME") or str(tmp_path_factory.mktemp("nh-home"))
    old = {k: os.environ.get(k) for k in ("NEURONHELPERS_HOME", "HF_HUB_OFFLINE", "TORCHINDUCTOR_CACHE_DIR", SHELF_ENV)}
    os.environ[SHELF_ENV] = str(shelf_home())  # the real checkpoints `make checkpoints` installed, read-only to tests
    os.environ["NEURONHELPERS_HOME"] = home
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the Hub in tests
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    yield Path(home)
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# The tests `make test-fast` leaves out carry @pytest.mark.slow on themselves: each compiles a model, builds twins,
# starts a cluster, a browser or a notebook kernel, or runs the CLI end to end (more than 3 s each on 2 cores,
# measured with `pytest --durations=0`). Everything else is the inner loop (`pytest -m "not slow"`).


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "machine(kind): the test is about a cpu, cuda or neuron machine; skipped elsewhere")
    config.addinivalue_line("markers", "slow: compiles, builds twins or starts services (left out of make test-fast)")
    os.environ["NEURONHELPERS_BACKEND"] = os.environ.get("NEURONHELPERS_TEST_BACKEND", "cpu")


def machine_kind() -> str:
    """What this machine is: neuron (a neuron device), cuda (a GPU) or cpu."""
    from neuronhelpers.core.backends import neuron_device_present

    if neuron_device_present():
        return "neuron"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# `make test` runs the suite on two workers (pytest-xdist, --dist loadfile): each module is one unit of work, so its
# fixtures are built once, on one worker, and its tests run in their order (the book of the executed lessons comes
# after the executions, in tests/test_notebooks.py). Units start slowest first (--no-loadscope-reorder keeps this
# order), so the last to finish is a short one: the modules' summed seconds in `pytest -n 2 --durations=0` on 2 cores
# at d6c2d7d (2026-12-07): notebooks 672 s, libraries 291, remedies 280, sweep 237, shelf 166, faults 127, fleet 126,
# sharded 115, judges 113, end_to_end 104, evidence 98, twins 90, rerun 77; the rest under 62 s each.
SLOWEST_FIRST = ("test_notebooks", "test_libraries", "test_remedies", "test_sweep", "test_shelf", "test_faults",
                 "test_fleet", "test_sharded", "test_judges", "test_end_to_end", "test_evidence", "test_twins",
                 "test_rerun")


def pytest_collection_modifyitems(config, items):
    rank = {module: i for i, module in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: a module keeps its own order
    kind = None
    for item in items:
        marker = item.get_closest_marker("machine")
        if marker is None:
            continue
        kind = kind or machine_kind()
        if marker.args[0] != kind:
            item.add_marker(pytest.mark.skip(reason=f"needs a {marker.args[0]} machine; this one is {kind}"))


def run_cli(*args, env=None, timeout=900):
    """Run ``python -m neuronhelpers ARGS`` as a user would; returns the CompletedProcess."""
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "neuronhelpers", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def result_row(model_id, result="PASS", **overrides):
    """A valid result row for dataset tests: CPU/inductor 2.13.0, transformers 5.23.0; PASS is exact,
    FAIL failed at compile. Any column can be overridden."""
    from neuronhelpers.store import schema

    values = dict(model_id=model_id, task="text-generation", result=result, neuron_cores=1, parallelism="none",
                  backend="cpu", compiler="inductor", compiler_version="2.13.0", library="transformers",
                  library_version="5.23.0", wall_s=12.5, peak_memory_bytes=2**30)
    values.update({"PASS": {"verification": "exact"},
                   "FAIL": {"stage": "compile", "error": "BackendCompilerFailed: x"}}.get(result, {}))
    values.update(overrides)
    return schema.new_row(**values)


def imported_modules(source: str) -> set[str]:
    """The top-level modules a Python source imports (what a rendered run.py needs installed)."""
    import ast

    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    return modules


def resumed_results(out, models, first, stdout: str):
    """After a killed sweep was rerun: every model has one row, the rows finished before the kill were kept (not
    run again), and the rerun ran only the rest. Returns the final results."""
    from neuronhelpers.store import dataset

    final = dataset.load_results(out)
    assert sorted(final.model_id) == sorted(models)  # none missing, none duplicated
    kept = final.set_index("model_id").loc[list(first.model_id), "timestamp"]
    assert list(kept) == list(first.set_index("model_id")["timestamp"])  # finished rows were not rerun
    assert f"{len(models) - len(first)} run now" in stdout
    return final
