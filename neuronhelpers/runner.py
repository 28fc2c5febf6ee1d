"""Run one rendered run.py in its own process tree, with a timeout, and read its one JSON line.

A crash, a hang or an out-of-memory kill becomes a ProcessOutcome the harness classifies; it never
takes the caller down, and no process of the run outlives it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field


@dataclass
class ProcessOutcome:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str
    stderr: str
    payload: dict | None = field(default=None)

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def last_json_line(stdout: str) -> dict | None:
    """The run's result: the last stdout line that is a JSON object with an 'ok' key."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "ok" in value:
                return value
    return None


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this (child) process when its parent dies: a killed sweep leaves no run behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def execute(script: str, args: list[str] = (), *, timeout: float, env: dict | None = None, cwd: str | None = None,
            memory_limit_bytes: int | None = None, cpus: set[int] | None = None,
            python: str | None = None) -> ProcessOutcome:
    """Run ``python script args...`` in a new session; kill its whole process group on timeout or return.

    ``cpus`` pins the run to a CPU set (disjoint sets let parallel sweep jobs share a machine);
    ``memory_limit_bytes`` caps its address space. The child is killed if this process dies.
    """
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}

    def prepare_child():  # runs in the child before exec
        _die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)
        if memory_limit_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))

    start = time.perf_counter()
    proc = subprocess.Popen(
        [python or sys.executable, script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=full_env,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=prepare_child,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
    finally:
        _kill_group(proc.pid)  # children the run left behind (e.g. compile workers)
    wall = time.perf_counter() - start
    return ProcessOutcome(proc.returncode, timed_out, wall, stdout, stderr, last_json_line(stdout))
