"""Helpers every process of a run needs, in the package and in run.py alike: the parent-death signal, the words of
an out-of-memory error, the NeuronCores a process may see.

The source is here, below every stage; the rendered run.py (which imports nothing of neuronhelpers) carries a copy in
``recipes/scaffold.py``, and tests/test_recipe.py holds the two identical.
"""

# How an out-of-memory failure reads where no exception type says so (a runtime's message, a killed allocator).
MEMORY_WORDS = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory")


def parse_visible_cores(value):
    """NEURON_RT_VISIBLE_CORES as core ids: "4-7", "0,1,2,3" or a mix; None when unset."""
    if value is None or not str(value).strip():
        return None
    cores = []
    for part in str(value).replace(" ", "").split(","):
        first, _, last = part.partition("-")
        cores.extend(range(int(first), int(last or first) + 1))
    return cores


def die_with_parent():
    """Linux: this process is killed when its parent dies (no rank outlives its launcher)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: a rank then ends with its launcher's process group only
        pass
