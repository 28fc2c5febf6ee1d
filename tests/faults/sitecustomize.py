"""Fault injection for sweep tests: put this folder on PYTHONPATH and set NH_TEST_FAULTS to a JSON map
{model_id: fault}. Python imports it at start-up in every process of a run; the model named in the parameters of
the run.py on its command line (`python run.py --reference`, or the device run's `python -m
neuronhelpers.run.measure run.py`) then crashes the way its fault says. The device run only (not --reference).
"""

import json
import os
import re
import sys


def _model_id():
    script = next((arg for arg in sys.argv if arg.endswith(".py") and os.path.isfile(arg)), None)
    try:
        text = open(script).read()
    except (OSError, TypeError):
        return None
    match = re.search(r"'model_id': '([^']+)'", text)
    return match.group(1) if match else None


_faults = json.loads(os.environ.get("NH_TEST_FAULTS", "{}"))
# "*" applies to every process, including a sharded run's ranks (whose argv names no run.py).
_fault = (_faults.get(_model_id()) or _faults.get("*")) if _faults and "--reference" not in sys.argv else None

if _fault == "segfault":
    import ctypes

    ctypes.string_at(0)  # a real segmentation fault
elif _fault == "hang":
    import time

    time.sleep(3600)
elif _fault == "oom":
    import torch

    def _hungry_to(self, *args, **kwargs):
        hoard = []
        while True:  # until the process's memory limit refuses
            hoard.append(torch.ones(256 * 2**20, dtype=torch.uint8))

    torch.nn.Module.to = _hungry_to
elif _fault == "rank1_raises":
    import torch.distributed as _dist

    _real_init = _dist.init_process_group

    def _init_then_fail_on_rank_1(*args, **kwargs):
        _real_init(*args, **kwargs)
        if _dist.get_rank() == 1:  # rank 0 goes on and waits for rank 1 in its first collective
            raise RuntimeError("injected fault: rank 1 failed after joining the process group")

    _dist.init_process_group = _init_then_fail_on_rank_1
elif _fault == "compile":
    import torch._inductor.compile_fx as _compile_fx

    def _broken_compiler(*args, **kwargs):
        raise RuntimeError("injected fault: the compiler crashed")

    _compile_fx.compile_fx = _broken_compiler
elif _fault == "harness_import":
    # a half-edited module of ours, as a sweep once imported: the measuring's import of its instruments fails
    class _HalfEdited:
        def find_spec(self, name, path=None, target=None):
            if name == "neuronhelpers.run.instruments":
                raise ImportError("injected fault: cannot import name 'MIN_DISTINCT_TOKENS' from "
                                  "'neuronhelpers.run.instruments'", name=name)
            return None

    sys.meta_path.insert(0, _HalfEdited())
elif _fault in ("kill", "kill_once"):
    # a SIGKILL from outside (a person, a node agent) a moment into the run; kill_once only the first run of the
    # model (NH_TEST_FAULTS_DIR keeps the mark), so the harness's one retry reaches a verdict
    import signal
    import threading

    _mark = os.path.join(os.environ.get("NH_TEST_FAULTS_DIR", "/tmp"), "killed-" + re.sub(r"\W", "_", str(_model_id())))
    if _fault == "kill" or not os.path.exists(_mark):
        open(_mark, "w").close()
        threading.Timer(float(os.environ.get("NH_TEST_KILL_AFTER_S", "1")),
                        lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
