"""Fault injection for sweep tests: put this folder on PYTHONPATH and set NH_TEST_FAULTS to a JSON map
{model_id: fault}. Python imports it at start-up in every run.py process; the model named in the
run.py's parameters then crashes the way its fault says. The device run only (not --reference).
"""

import json
import os
import re
import sys


def _model_id():
    try:
        text = open(sys.argv[0]).read()
    except (OSError, IndexError):
        return None
    match = re.search(r"'model_id': '([^']+)'", text)
    return match.group(1) if match else None


_faults = json.loads(os.environ.get("NH_TEST_FAULTS", "{}"))
_fault = _faults.get(_model_id()) if _faults and "--reference" not in sys.argv else None

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
elif _fault == "compile":
    import torch._inductor.compile_fx as _compile_fx

    def _broken_compiler(*args, **kwargs):
        raise RuntimeError("injected fault: the compiler crashed")

    _compile_fx.compile_fx = _broken_compiler
