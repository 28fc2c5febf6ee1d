"""Offline means offline: whether the Hub is reachable is decided once, quickly, and passed on to child processes."""

import os
import socket
import time

import pytest

from conftest import run_cli
from neuronhelpers.core import network


@pytest.fixture
def unreachable_hub(monkeypatch):
    """A Hub endpoint nothing listens on, with the libraries' offline switches off (as on a user's machine)."""
    with socket.socket() as sock:  # a port that was free a moment ago: connections to it are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv(network.UNREACHABLE_MARK, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(network, "_decided", {})
    return f"http://127.0.0.1:{port}"


def test_an_unreachable_hub_is_detected_quickly_and_switches_offline_mode_on(unreachable_hub, monkeypatch):
    start = time.monotonic()
    assert network.hub_reachable() is False
    assert time.monotonic() - start < network.PROBE_TIMEOUT_S + 0.5
    assert network.offline_env() == {"HF_HUB_OFFLINE": "1"}  # what every run.py is started with
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert network.apply_offline_mode() is False
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.HF_HUB_OFFLINE is True


def test_a_listening_endpoint_is_reachable(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.setattr(network, "_decided", {})
        assert network.hub_reachable() is True
        assert network.offline_env() == {}


def test_offline_switch_wins_without_probing(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(network, "_probe", lambda *a: pytest.fail("probed the network in offline mode"))
    assert network.hub_reachable() is False


@pytest.mark.slow
def test_doctor_says_the_hub_is_unreachable(unreachable_hub):
    """Every check in the full form; the short form (the start page's) shows no line for what is only information
    (an unreachable Hub), just the one summary line, where nothing required failed."""
    proc = run_cli("doctor")
    line = next(line for line in proc.stdout.splitlines() if "Hugging Face Hub" in line)
    assert f"unreachable ({unreachable_hub})" in line and "offline mode is" in line
    checks = sum(1 for line in proc.stdout.splitlines() if line[:4].strip() in ("OK", "FAIL", "INFO"))
    short = run_cli("doctor", "--short")
    assert (short.returncode, short.stdout.splitlines()) == (0, [f"{checks} of {checks} checks passed (backend cpu)"])


def test_publish_dry_run_offline_answers_at_once_without_retries(unreachable_hub, tmp_path):
    from conftest import result_row
    from neuronhelpers.store import dataset

    dataset.append_rows(tmp_path, [result_row("tiny/llama")])
    start = time.monotonic()
    proc = run_cli("publish", str(tmp_path), "--repo", "someone/results", "--dry-run")
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert "the Hub cannot be reached from here" in proc.stdout
    assert "Retrying" not in proc.stderr and "retry" not in proc.stderr.lower()
    assert elapsed < 20, f"{elapsed:.0f} s: the dry run waited on the network"
