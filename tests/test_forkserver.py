"""The pre-imported fork server: each run is its own process tree, with the caller's environment, working
directory, timeout and kill; a run it cannot take (or a dead server) falls back to a fresh Python."""

import json
import os
import signal
import time

import pytest

from neuronhelpers.process import tree

SCRIPT = """
import json, os, sys
print(json.dumps({"ok": True, "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "argv": sys.argv,
                  "cwd": os.getcwd(), "marker": os.environ.get("NH_FORK_TEST"), "name": __name__,
                  "torch_preloaded": "torch" in sys.modules}))
"""


@pytest.fixture
def fresh_server(monkeypatch):
    monkeypatch.setenv(tree.FORK_SERVER_ENV, "1")
    tree.reset_fork_server()
    yield
    tree.reset_fork_server()


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper (a container's init may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def write(tmp_path, text, name="probe.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.slow
def test_a_forked_run_is_its_own_session_with_the_callers_argv_env_and_cwd(tmp_path, fresh_server):
    script = write(tmp_path, SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    outcome = tree.execute(script, ["--reference"], timeout=60, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)},
                             cwd=str(work))
    got = outcome.payload
    assert outcome.launcher == "fork" and outcome.returncode == 0, outcome.stderr
    assert got["pid"] == got["pgid"] == got["sid"] and got["pid"] != os.getpid()  # its own session and group
    assert got["argv"] == [script, "--reference"] and got["cwd"] == str(work) and got["name"] == "__main__"
    assert got["torch_preloaded"]  # torch was imported once, by the server


@pytest.mark.slow
def test_a_run_whose_environment_differs_at_import_time_starts_a_fresh_python(tmp_path, fresh_server):
    script = write(tmp_path, SCRIPT)
    tree.shared_fork_server()
    outcome = tree.execute(script, timeout=60, env={"PYTHONPATH": str(tmp_path), "NH_FORK_TEST": "x"})
    assert outcome.launcher == "spawn" and outcome.payload["marker"] == "x"
    assert not outcome.payload["torch_preloaded"]


@pytest.mark.slow
def test_a_forked_run_past_its_timeout_is_killed_with_its_children(tmp_path, fresh_server):
    script = write(tmp_path, "import subprocess, sys, time\n"
                             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                             "print(child.pid, flush=True)\ntime.sleep(600)\n")
    start = time.monotonic()
    outcome = tree.execute(script, timeout=3)
    assert outcome.launcher == "fork" and outcome.timed_out and time.monotonic() - start < 30
    grandchild = int(outcome.stdout.split()[0])
    time.sleep(0.5)
    assert not alive(grandchild), "a process the run started outlived the kill"


@pytest.mark.slow
def test_a_crash_in_a_forked_run_is_its_exit_status(tmp_path, fresh_server):
    outcome = tree.execute(write(tmp_path, "import ctypes; ctypes.string_at(0)\n"), timeout=60)
    assert outcome.launcher == "fork" and outcome.signal_name == "SIGSEGV"


@pytest.mark.slow
def test_when_the_server_dies_runs_fall_back_to_a_fresh_python(tmp_path, fresh_server):
    server = tree.shared_fork_server()
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    script = write(tmp_path, SCRIPT)
    outcome = tree.execute(script, timeout=60)
    assert outcome.returncode == 0 and json.loads(outcome.stdout.strip().splitlines()[-1])["ok"]
    assert tree.shared_fork_server().alive  # a new server for the next run


def test_turned_off_every_run_spawns(tmp_path, monkeypatch):
    monkeypatch.setenv(tree.FORK_SERVER_ENV, "0")
    assert tree.execute(write(tmp_path, SCRIPT), timeout=60).launcher == "spawn"


def test_a_run_folder_gives_back_each_processs_json_line(tmp_path):
    """What a row does not keep (a diffusion run's image) is read back from the run folder's saved logs."""
    from neuronhelpers.run.harness import saved_output

    (tmp_path / "device.stdout.txt").write_text('loading...\n{"ok": true, "image_png": "iVBOR"}\nbye\n')
    (tmp_path / "reference.stdout.txt").write_text("Traceback: no JSON line\n")
    assert saved_output(tmp_path) == {"ok": True, "image_png": "iVBOR"}
    assert saved_output(tmp_path, "reference") is None and saved_output(tmp_path, "eager") is None


@pytest.mark.slow
def test_a_sweeps_offline_runs_are_forked_though_the_caller_never_set_offline_mode(tmp_path, fresh_server,
                                                                                    monkeypatch):
    """Where the Hub cannot be reached, the harness gives each run HF_HUB_OFFLINE=1 (core.network.offline_env), an
    import-time setting. A CLI sweep's own environment lacks it (only the tests set it): the server must be started
    with it, or no run of a sweep is forked and each pays a fresh Python and its imports."""
    from neuronhelpers.core import network

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(network, "hub_reachable", lambda *args, **kwargs: False)
    outcome = tree.execute(write(tmp_path, SCRIPT), timeout=60, env=network.offline_env())
    assert network.offline_env() == {"HF_HUB_OFFLINE": "1"}
    assert outcome.launcher == "fork" and outcome.payload["torch_preloaded"], outcome.stderr
