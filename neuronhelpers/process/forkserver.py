"""A pre-imported fork server: one process per run, without paying for Python start-up and imports each time.

Starting Python and importing torch and transformers takes seconds; a sweep pays it twice per model (the
device run and the CPU reference). The fork server is a process that has imported torch and transformers
once (and nothing model-specific: no model was loaded, no kernel compiled, no thread pool started). For each
run it forks a child, which becomes the run's own session and process group, takes the run's environment,
working directory, CPU set and memory limit, sends stdout and stderr to files, and runs the same command line
with ``runpy`` as ``__main__``, exactly as a fresh Python would: ``python run.py --reference``, or the device
run's ``python -m neuronhelpers.run.measure run.py``. The run's timeout and
kill are the caller's, as for a spawned process: ``tree.execute`` does the same with either.

The protocol is JSON lines on the server's stdin/stdout: a request ``{"id", "argv", "cwd", "env", ...}``
is answered by ``{"id", "pid"}`` when the child starts and ``{"id", "status"}`` (a waitpid status) when it
ends. The server dies with the process that started it, and its children die with it (parent-death
signal), so a killed sweep leaves nothing behind.

Not used on Trainium: the Neuron runtime is not known to be safe to fork after import, so ``neuron``
keeps a fresh process per run. Taught in notebook 06 (sweeps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

# Variables a child may set differently from the server: read when used, never at import time.
PER_RUN_ENV = frozenset({"TORCHINDUCTOR_CACHE_DIR", "PYTHONUNBUFFERED", "TOKENIZERS_PARALLELISM",
                         "NH_TEST_FAULTS", "NEURON_RT_VISIBLE_CORES"})
PRELOAD = ("torch", "transformers", "transformers.modeling_utils", "transformers.generation.utils",
           "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
           "transformers.models.auto.processing_auto", "safetensors.torch", "tokenizers")


# ------------------------------------------------------------------------------------------------
# The server process: python -m neuronhelpers.process.forkserver
# ------------------------------------------------------------------------------------------------


def _serve() -> int:
    from neuronhelpers.core.processes import die_with_parent

    die_with_parent()
    import importlib

    for name in PRELOAD:  # what every run.py imports first; nothing that compiles or loads a model
        importlib.import_module(name)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints of the server must not corrupt the protocol
    lock = threading.Lock()
    children: dict[int, str] = {}

    def reply(message: dict) -> None:
        with lock:
            out.write(json.dumps(message) + "\n")

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            with lock:
                request_id = children.pop(pid, None)
            if request_id is not None:
                reply({"id": request_id, "status": status})

    threading.Thread(target=reap, daemon=True).start()
    reply({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        with lock:  # the reaper must know the child before it can exit
            pid = os.fork()
            if pid == 0:
                _child(request)  # never returns
            children[pid] = request["id"]
        reply({"id": request["id"], "pid": pid})
    return 0


def _child(request: dict) -> None:
    """In the forked child: become the run's own process, then execute its script or module as __main__."""
    code = 1
    try:
        os.setsid()  # its own session and process group: the caller kills the whole group
        from neuronhelpers.core.processes import die_with_parent

        die_with_parent()  # dies with the fork server, which dies with the sweep
        if request.get("cpus"):
            os.sched_setaffinity(0, request["cpus"])
        if request.get("memory_limit_bytes"):
            import resource

            limit = request["memory_limit_bytes"]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        import torch

        torch.set_num_threads(len(os.sched_getaffinity(0)))  # as a fresh process would size its thread pool
        code = _run_main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a crash of the run is its exit status, as in a spawned process
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _run_main(argv: list[str]) -> int:
    import importlib
    import runpy

    # A fresh interpreter runs sitecustomize at start-up with its own argv: do the same for this run.
    if "sitecustomize" in sys.modules:
        sys.argv = list(argv)
        importlib.reload(sys.modules["sitecustomize"])
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


# ------------------------------------------------------------------------------------------------
# The client: what tree.execute talks to
# ------------------------------------------------------------------------------------------------


class ForkServer:
    """A running fork server; ``start`` launches it, ``stop`` ends it (and every child still running)."""

    def __init__(self, env: dict | None = None):
        self.env = dict(env if env is not None else os.environ)
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._waiting: dict[str, dict] = {}
        self._events: dict[str, threading.Event] = {}
        self._ids = 0

    # The server must be started from a long-lived thread: Linux delivers the parent-death signal when the
    # *thread* that started a process ends.
    def start(self, timeout: float = 120.0) -> ForkServer:
        self.proc = subprocess.Popen([sys.executable, "-m", "neuronhelpers.process.forkserver"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, text=True,
                                     bufsize=1, start_new_session=True)
        ready = threading.Event()

        def read() -> None:
            for line in self.proc.stdout:
                message = json.loads(line)
                if message.get("ready"):
                    ready.set()
                    continue
                with self._lock:
                    self._waiting.setdefault(message["id"], {}).update(message)
                    event = self._events.get(message["id"])
                if event is not None:
                    event.set()
            ready.set()  # the server ended
            with self._lock:
                for event in self._events.values():
                    event.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("the fork server did not start")
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def accepts(self, env: dict) -> bool:
        """Can a run with this environment be forked? Only if it differs from the server's in variables that are
        read when used (an import-time setting such as PYTHONPATH or HF_HUB_OFFLINE would not take effect)."""
        keys = (set(env) | set(self.env)) - PER_RUN_ENV
        return self.alive and all(env.get(k) == self.env.get(k) for k in keys)

    def spawn(self, argv: list[str], *, env: dict, cwd: str | None, stdout: str, stderr: str,
              cpus: set[int] | None, memory_limit_bytes: int | None) -> tuple[str, int]:
        """Start one run; returns (request id, pid). The pid is also the run's process group."""
        with self._lock:
            self._ids += 1
            request_id = str(self._ids)
            event = self._events[request_id] = threading.Event()
            self._waiting[request_id] = {}
            self.proc.stdin.write(json.dumps({"id": request_id, "argv": argv, "env": env, "cwd": cwd, "stdout": stdout,
                                              "stderr": stderr, "cpus": sorted(cpus) if cpus else None,
                                              "memory_limit_bytes": memory_limit_bytes}) + "\n")
            self.proc.stdin.flush()
        while "pid" not in self._waiting[request_id]:
            event.wait(1.0)
            event.clear()
            if not self.alive:
                raise RuntimeError("the fork server died")
        return request_id, self._waiting[request_id]["pid"]

    def wait(self, request_id: str, timeout: float | None) -> int | None:
        """The run's waitpid status, or None when it did not end within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        event = self._events[request_id]
        while "status" not in self._waiting[request_id]:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            event.wait(min(1.0, remaining) if remaining is not None else 1.0)
            event.clear()
            if not self.alive and "status" not in self._waiting[request_id]:
                raise RuntimeError("the fork server died")
        with self._lock:
            self._events.pop(request_id, None)
            return self._waiting.pop(request_id)["status"]

    def stop(self) -> None:
        if self.proc is None:
            return
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and any child still in its group
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.proc = None


if __name__ == "__main__":
    sys.exit(_serve())
