"""Run one rendered run.py in its own process tree, with a timeout, and read its one JSON line.

A crash, a hang or an out-of-memory kill becomes a ProcessOutcome the harness classifies; it never
takes the caller down, and no process of the run outlives it. Runs are forked from a pre-imported fork
server where that is safe (see forkserver.py), else started as a fresh Python. Taught in notebook 02.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from neuronhelpers.core import settings
from neuronhelpers.core.network import offline_env
from neuronhelpers.core.processes import die_with_parent
from neuronhelpers.core.settings import FORK_SERVER_ENV  # noqa: F401 - tests turn the server on and off with it


@dataclass
class ProcessOutcome:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stdout: str
    stderr: str
    payload: dict | None = field(default=None)
    launcher: str = "spawn"  # "fork": forked from the pre-imported fork server
    oom_kills: int | None = None  # out-of-memory kills the kernel recorded while it ran (None: no counter here)

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


KILLED_FROM_OUTSIDE = "killed (SIGKILL) from outside, with no out-of-memory kill recorded"


def killed_from_outside(outcome: ProcessOutcome) -> bool:
    """A SIGKILL that neither our timeout nor the kernel's out-of-memory killer sent (``oom_kills`` did not rise): a
    person, a node agent, a scheduler. Not the model's: the harness runs it once more, then records UNTESTED."""
    return outcome.signal_name == "SIGKILL" and not outcome.timed_out and not outcome.oom_kills


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


# Where the kernel counts the processes it killed for memory: this cgroup's (v2, then v1), else the whole machine's.
_OOM_COUNTERS = (("/sys/fs/cgroup/memory.events", "oom_kill"), ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
                 ("/proc/vmstat", "oom_kill"))


def oom_kill_count() -> int | None:
    """The kernel's count of out-of-memory kills (the first counter found of _OOM_COUNTERS), or None where none is
    readable: a SIGKILL is put on memory only when this count rose while the run ran (verdict/classify.py)."""
    for path, name in _OOM_COUNTERS:
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == name:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _oom_kills_since(before: int | None) -> int | None:
    after = oom_kill_count()
    return None if before is None or after is None else after - before


# The process groups of the runs in flight, so that Ctrl-C on a sweep stops them at once (``abandon_runs``): each run
# has its own session, so the terminal's SIGINT never reaches it.
_live_lock = threading.Lock()
_live: set[int] = set()
_abandoned = False


def abandon_runs() -> None:
    """Kill every run in flight and start none until ``resume_runs``: a run started meanwhile ends at once, killed."""
    global _abandoned
    with _live_lock:
        _abandoned = True
        groups = list(_live)
    for pgid in groups:
        _kill_group(pgid)


def runs_abandoned() -> bool:
    """Whether runs are being abandoned now (a killed run is then no reason to run it again)."""
    return _abandoned


def resume_runs() -> None:
    """Runs start again (after an abandoned sweep, in a notebook's kernel that goes on)."""
    global _abandoned
    with _live_lock:
        _abandoned = False


def _abandoned_outcome(launcher: str) -> ProcessOutcome:
    return ProcessOutcome(-signal.SIGKILL, False, 0.0, "", "abandoned: the sweep was interrupted", launcher=launcher)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def execute(script: str | None, args: list[str] = (), *, timeout: float, env: dict | None = None,
            cwd: str | None = None, memory_limit_bytes: int | None = None, cpus: set[int] | None = None,
            python: str | None = None, module: str | None = None, fork: bool = True) -> ProcessOutcome:
    """Run ``python script args...`` (or ``python -m module args...``) as its own process tree; kill its whole
    process group on timeout or return.

    ``cpus`` pins the run to a CPU set (disjoint sets let parallel sweep jobs share a machine);
    ``memory_limit_bytes`` caps its address space. The run is killed if this process dies. With ``fork``
    (and no other ``python``), the run is forked from the shared pre-imported fork server when one is
    enabled and the run's environment allows it; otherwise a fresh Python starts. Both give the same
    isolation: their own session, timeout, kill and limits.
    """
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    argv = ["-m", module] if module else [script]
    server = shared_fork_server() if fork and python is None else None
    oom_before = oom_kill_count()
    if server is not None and server.accepts(full_env):
        try:
            outcome = _execute_forked(server, [*argv, *args], timeout, full_env, cwd, memory_limit_bytes, cpus)
            outcome.oom_kills = _oom_kills_since(oom_before)
            return outcome
        except RuntimeError:  # the fork server died: this run, and the next, start fresh processes
            reset_fork_server()

    start = time.perf_counter()
    proc = _start([python or sys.executable, *argv, *args], full_env, cwd, memory_limit_bytes, cpus)
    if proc is None:
        return _abandoned_outcome("spawn")
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
    finally:
        _kill_group(proc.pid)  # children the run left behind (e.g. compile workers)
        with _live_lock:
            _live.discard(proc.pid)
    wall = time.perf_counter() - start
    return ProcessOutcome(proc.returncode, timed_out, wall, stdout, stderr, last_json_line(stdout), launcher="spawn",
                          oom_kills=_oom_kills_since(oom_before))


def _start(cmd: list[str], env: dict, cwd: str | None, memory_limit_bytes: int | None,
           cpus: set[int] | None) -> subprocess.Popen | None:
    """Start a run in its own session, registered as in flight; None where runs are being abandoned."""
    def prepare_child():  # runs in the child before exec
        die_with_parent()  # a killed sweep leaves no run behind
        if cpus:
            os.sched_setaffinity(0, cpus)
        if memory_limit_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))

    with _live_lock:  # checked and registered at once: an interrupt never misses a run that is starting
        if _abandoned:
            return None
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=env, text=True, errors="replace", start_new_session=True,
                                preexec_fn=prepare_child)
        _live.add(proc.pid)
    return proc


def _execute_forked(server, argv: list[str], timeout: float, env: dict, cwd: str | None,
                    memory_limit_bytes: int | None, cpus: set[int] | None) -> ProcessOutcome:
    import tempfile

    folder = tempfile.mkdtemp(prefix="nh-run-", dir=cwd)
    out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
    start = time.perf_counter()
    with _live_lock:
        if _abandoned:
            shutil.rmtree(folder, ignore_errors=True)
            return _abandoned_outcome("fork")
        request, pid = server.spawn(argv, env=env, cwd=cwd, stdout=out, stderr=err, cpus=cpus,
                                    memory_limit_bytes=memory_limit_bytes)
        _live.add(pid)
    try:
        status = server.wait(request, timeout)
        timed_out = status is None
        if timed_out:
            _kill_group(pid)
            status = server.wait(request, None)
    finally:
        _kill_group(pid)  # children the run left behind (e.g. compile workers)
        with _live_lock:
            _live.discard(pid)
    wall = time.perf_counter() - start
    try:
        stdout, stderr = (open(path, errors="replace").read() for path in (out, err))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    returncode = os.waitstatus_to_exitcode(status)
    return ProcessOutcome(returncode, timed_out, wall, stdout, stderr, last_json_line(stdout), launcher="fork")


# ------------------------------------------------------------------------------------------------
# The shared fork server: started on first use, from a thread that lives as long as this process (Linux
# sends the parent-death signal when the thread that started a child ends), stopped at exit.
# ------------------------------------------------------------------------------------------------

_server_lock = threading.Lock()
_server = None


def fork_server_enabled() -> bool:
    """NEURONHELPERS_FORK_SERVER=0 turns the fork server off (every run starts a fresh Python)."""
    return settings.fork_server_enabled()


def shared_fork_server():
    """The process's fork server (started now if needed), or None when it is turned off or cannot start."""
    global _server
    if not fork_server_enabled():
        return None
    with _server_lock:
        if _server is not None and _server.alive:
            return _server
        from neuronhelpers.process.forkserver import ForkServer

        started: dict = {}

        def keeper(done: threading.Event) -> None:
            try:
                # The runs' own environment: the harness gives each run offline mode when the Hub cannot be reached,
                # an import-time setting, so a server started without it could fork none of them (each run then paid
                # for a fresh Python and its imports, about 4 s, twice per model of a sweep).
                started["server"] = ForkServer({**os.environ, **offline_env(), "PYTHONUNBUFFERED": "1"}).start()
            except Exception as exc:  # noqa: BLE001 - without a server every run spawns, as before
                started["error"] = exc
            done.set()
            threading.Event().wait()  # keep this thread (the server's parent) alive for the life of the process

        done = threading.Event()
        threading.Thread(target=keeper, args=(done,), daemon=True, name="neuronhelpers-fork-server").start()
        done.wait()
        _server = started.get("server")
        if _server is not None:
            import atexit

            atexit.register(reset_fork_server)
        return _server


def reset_fork_server() -> None:
    """Stop the shared fork server; the next run starts a new one with the environment of that moment."""
    global _server
    with _server_lock:
        if _server is not None:
            _server.stop()
        _server = None
