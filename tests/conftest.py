"""Shared test setup: an isolated NEURONHELPERS_HOME (twins, compile cache, runs) and no network."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def isolated_home(tmp_path_factory):
    """One home for the whole session: twins are built once and the compile cache is shared by the tests."""
    home = os.environ.get("NEURONHELPERS_TEST_HOME") or str(tmp_path_factory.mktemp("nh-home"))
    old = {k: os.environ.get(k) for k in ("NEURONHELPERS_HOME", "HF_HUB_OFFLINE", "TORCHINDUCTOR_CACHE_DIR")}
    os.environ["NEURONHELPERS_HOME"] = home
    os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the Hub in tests
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    yield Path(home)
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


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
    from neuronhelpers import results

    values = dict(model_id=model_id, task="text-generation", result=result, neuron_cores=1, parallelism="none",
                  backend="cpu", compiler="inductor", compiler_version="2.13.0", library="transformers",
                  library_version="5.23.0", wall_s=12.5, peak_memory_bytes=2**30)
    values.update({"PASS": {"verification": "exact"},
                   "FAIL": {"stage": "compile", "error": "BackendCompilerFailed: x"}}.get(result, {}))
    values.update(overrides)
    return results.new_row(**values)
