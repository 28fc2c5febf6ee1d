"""The scaffold every run.py shares, whatever the library: parameters, main, the Trainium contract, the JSON line,
failures, peak memory, and the sharded launcher (one process per core, no torchrun).

``neuronhelpers.recipes.render`` joins it with one library recipe into a single self-contained run.py. The helpers the
package needs too (the parent-death signal, the out-of-memory words, the visible-cores parser) have their source in
``neuronhelpers.core.processes``; run.py carries a copy, held identical by tests/test_recipe.py. Nothing here measures
more than the recipe itself reports: the harness's measuring (``neuronhelpers.run.measure``) wraps these functions when
it runs the file. Taught in notebooks 02 and 04.

Sections are marked by banner comments (``# ---- name ---``); the renderer places whole sections in reading order,
the sharded launcher only where the plan shards, and fills PARAMS.
"""

# ---- imports ---------------------------------------------------------------------------------------------
import json
import os
import sys
import time  # noqa: F401 - the recipes' clock (run.py has one imports section)
import traceback

# ---- parameters --------------------------------------------------------------------------------------------
PARAMS = {}  # rendered: the model's parameters (core/parameters.py declares each)

# ---- the twin ----------------------------------------------------------------------------------------------
# A neuronhelpers twin, named by id and files' digest: built here if missing, the files this run tested (twins only).
if "twin_files" in PARAMS:
    try:
        from neuronhelpers.twins.rerun import twin_folder
    except ImportError:
        sys.exit(f"{PARAMS['model_path']} is a neuronhelpers twin: install {PARAMS['twin_files']['built_by']}, rerun")
    PARAMS["model_path"] = twin_folder(PARAMS)

# ---- the shelf copy ----------------------------------------------------------------------------------------
# A checkpoint as neuronhelpers' shelf made it, by Hub id and files' digest: found on the shelf or in the HF cache.
if "shelf_files" in PARAMS:
    try:
        from neuronhelpers.models.shelf import copy_folder
    except ImportError:
        sys.exit(f"pip install neuronhelpers, then {PARAMS['shelf_files']['made_by']}, and rerun")
    PARAMS["model_path"] = copy_folder(PARAMS)


# ---- main --------------------------------------------------------------------------------------------------
def main(argv):
    """The recipe on the device (one process per core when sharded), or with --reference the CPU eager reference."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "--reference" in argv:
        result = reference_run(PARAMS)
    else:
        if PARAMS["device"] == "neuron":
            pin_neuron_contract()
        result = sharded_run(PARAMS) if PARAMS["cores"] > 1 else device_run(PARAMS)
    result["model_id"] = PARAMS["model_id"]
    emit(result)
    return 0 if result["ok"] else 1


# ---- the Trainium contract ---------------------------------------------------------------------------------
def pin_neuron_contract():
    """No silent fallback to eager on a compile failure (it would read as a PASS): pinned whatever was inherited,
    before torch is imported, as is the metrics switch the compile-cache counters need."""
    os.environ["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] = "1"
    os.environ.setdefault("TORCH_NEURONX_METRICS_ENABLED", "1")


def compile_options(compile_backend):
    """torch.compile's options: on neuron the fallback is refused here too (the option overrides the variable)."""
    return {"fallback_execution": False} if compile_backend == "neuron" else None


# ---- sharded launch ----------------------------------------------------------------------------------------
def sharded_run(params):
    """One process per core, no torchrun; the first failure, or a rank that dies, ends them all."""
    import multiprocessing
    import queue
    import socket

    cores, context = params["cores"], multiprocessing.get_context("spawn")  # Neuron refuses a fork of its runtime
    results = context.Queue()
    with socket.socket() as sock:  # a free port for the process group's rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ranks = [context.Process(target=rank_main, args=(r, cores, port, params, results)) for r in range(cores)]
    for proc in ranks:
        proc.start()
    got = {}
    while len(got) < cores and all(result["ok"] for result in got.values()):
        try:
            rank, result = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, proc in enumerate(ranks) if r not in got and proc.exitcode not in (None, 0)]
            if not dead:
                continue
            try:  # the dead rank's own report, if it sent one
                rank, result = results.get(timeout=1.0)
            except queue.Empty:
                rank, code = dead[0], ranks[dead[0]].exitcode
                how = f"signal {-code}" if code < 0 else f"exit status {code}"
                result = {"ok": False, "stage": "run", "error": f"died ({how}) without a result",
                          "error_type": "RankDied", "traceback": "", "timings": {}}
        got[rank] = result
    for proc in ranks:  # no rank outlives the run (one may wait in a collective)
        proc.kill()
        proc.join(timeout=10)
    failed_rank = next((r for r, result in got.items() if not result["ok"]), None)
    if failed_rank is not None:
        return {**got[failed_rank], "error": f"rank {failed_rank}: {got[failed_rank]['error']}",
                "failed_rank": failed_rank}
    peaks = [got[r].get("peak_memory_bytes") for r in range(cores)]
    return {**got[0], "peak_memory_per_rank": peaks, "cores": cores,
            "peak_memory_bytes": max((p for p in peaks if p is not None), default=None)}


def rank_main(rank, cores, port, params, results):
    """One rank: its environment, the process group, the recipe; its result goes to the launcher."""
    die_with_parent()
    try:
        os.environ.update(rank_environment(rank, cores, port, params["device"], os.environ))
        if params["device"] == "neuron":
            import torch_neuronx  # noqa: F401 - registers the Neuron device and process group first
        import torch.distributed as dist

        dist.init_process_group(backend=params["dist_backend"], rank=rank, world_size=cores)
        result = device_run(params, rank=rank)
    except BaseException as exc:  # noqa: BLE001 - a rank's failure is its result
        result = failed(exc, "load", {})
    results.put((rank, result))


def rank_environment(rank, cores, port, device, inherited):
    """One rank's environment. On neuron, exactly one core: the rank-th of this run's NEURON_RT_VISIBLE_CORES, else
    core ``rank`` (the process group refuses "more than one device per process" and keeps an inherited value)."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
           "WORLD_SIZE": str(cores), "LOCAL_WORLD_SIZE": str(cores)}
    if device == "neuron":
        given = parse_visible_cores(inherited.get("NEURON_RT_VISIBLE_CORES"))
        if given is not None and len(given) < cores:
            raise RuntimeError(f"{cores} ranks need {cores} NeuronCores; NEURON_RT_VISIBLE_CORES gives "
                               f"{len(given)} ({inherited.get('NEURON_RT_VISIBLE_CORES')})")
        env["NEURON_RT_VISIBLE_CORES"] = str(given[rank] if given is not None else rank)
    return env


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


# ---- helpers -----------------------------------------------------------------------------------------------
MEMORY_WORDS = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory")


def emit(result):
    """The text (or the failure) for a person, then the one JSON line: the last line, which the harness reads."""
    print(result.get("text") or ("ok" if result["ok"] else f"failed at {result['stage']}: {result['error']}"))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()


def failed(exc, stage, timings):
    """A failure from an exception: its type and first line (later lines are usually advice), the traceback, and
    the stage: load, compile, run, or oom when memory ran out."""
    import torch

    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # "backend='inductor' raised:" introduces the cause
        lines[0] = f"{lines[0]} {lines[1]}"
    error = f"{type(exc).__name__}: {lines[0][:500]}" if lines else type(exc).__name__
    module, text = type(exc).__module__ or "", f"{error} {exc}".lower()
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or any(w in text for w in MEMORY_WORDS):
        stage = "oom"
    elif stage not in ("load", "reference") and not module.startswith("torch_neuronx") and (
            module.startswith(("torch._dynamo", "torch._inductor")) or "compil" in type(exc).__name__.lower()):
        stage = "compile"  # (torch-neuronx's compiler and runtime raise alike: the stage they were in says which)
    return {"ok": False, "stage": stage, "error": error, "error_type": type(exc).__name__, "timings": timings or {},
            "traceback": "".join(traceback.format_exception(exc))[-20000:]}


def peak_memory_bytes(device):
    """Peak device memory after a sync: torch.accelerator's (Neuron 2.34+), else torch.neuron's (2.33); CPU: RSS."""
    import torch

    kind = str(device).split(":")[0]  # this rank's own device (neuron:<local rank>)
    if kind == "cpu":
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB
    for source in (getattr(torch, "accelerator", None), getattr(torch, kind, None)):
        try:
            source.synchronize(device)
            if peak := int(source.max_memory_allocated(device)):
                return peak
        except (AttributeError, NotImplementedError, RuntimeError, ValueError):  # not on this torch or device
            continue
    return None
