"""Stopping `neuronhelpers app` stops everything it started: the Voila server and its kernels."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, result_row
from neuronhelpers.store import dataset


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def started_with(marker: str) -> list[int]:
    """Live processes whose environment carries the marker (the app, Voila, kernels)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in environ and state != "Z":
            found.append(int(pid))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_app_takes_voila_and_its_kernels_down(tmp_path, how):
    dataset.append_rows(tmp_path / "results", [result_row("tiny/llama")])
    port, marker = free_port(), f"NH_APP_TEST_{os.getpid()}_{how}"
    proc = subprocess.Popen([sys.executable, "-m", "neuronhelpers", "app", "--results", str(tmp_path / "results"),
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, marker: "1"})
    try:
        deadline = time.monotonic() + 120
        while not listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-2000:]
            time.sleep(0.5)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60).read()  # the page starts a kernel
        assert len(started_with(marker)) >= 3, "expected the app, Voila and a kernel"
        proc.send_signal(how)  # to the app only, as a service manager or a terminal would
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while (listening(port) or started_with(marker)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not listening(port), "something still serves on the port"
        assert started_with(marker) == [], "a process the app started outlived it"
    finally:
        for pid in started_with(marker):
            os.kill(pid, signal.SIGKILL)
