"""The scaffold every run.py shares, whatever the library: parameters, main, the JSON line, failure
classification, peak memory, and the sharded launcher (one process per core, no torchrun).

``neuronhelpers.recipes.render`` joins it with one library recipe (``recipes/<library>.py``) into a single
self-contained run.py. The package imports the helpers it needs from here (the runner's parent-death
signal, the out-of-memory words), so nothing is written twice. Taught in notebooks 02 and 03.

Sections are marked by banner comments (``# ---- name ---``); the renderer places them in reading order.
"""

# ---- imports ---------------------------------------------------------------------------------------------
import json
import os
import sys
import time
import traceback

# ---- parameters --------------------------------------------------------------------------------------------
# --- parameters (rendered) ---
PARAMS = {}
# --- end parameters ---


# ---- main --------------------------------------------------------------------------------------------------
def main(argv):
    """`python3 run.py` runs on the device (launching one process per core when sharded);
    `python3 run.py --reference` runs the CPU eager reference; `python3 run.py --eager` runs the model eagerly on
    the device, nothing compiled (after a compiled failure: can the device run it at all?). Prints one JSON line."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if PARAMS["device"] == "neuron" and "--reference" not in argv:
        pin_neuron_contract()
    if "--reference" in argv:
        result = reference_run(PARAMS)
    elif "--eager" in argv:
        result = eager_run(PARAMS)
    elif PARAMS["cores"] > 1:
        result = sharded_run(PARAMS)
    else:
        result = device_run(PARAMS)
    result["model_id"] = PARAMS["model_id"]
    emit(result)
    return 0 if result["ok"] else 1


# ---- sharded launch ----------------------------------------------------------------------------------------
def sharded_run(params):
    """Start one process per core, wait for every rank's result; the first failure ends them all."""
    import multiprocessing
    import queue

    world = params["cores"]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    port = free_port()
    ranks = [context.Process(target=rank_main, args=(r, world, port, params, results)) for r in range(world)]
    for proc in ranks:
        proc.start()
    got, failed_rank = {}, None
    while len(got) < world and failed_rank is None:
        try:
            rank, result = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, proc in enumerate(ranks) if r not in got and proc.exitcode not in (None, 0)]
            if not dead:
                continue
            try:  # the dead rank's own report, if it managed to send one before dying
                rank, result = results.get(timeout=1.0)
            except queue.Empty:
                rank, code = dead[0], ranks[dead[0]].exitcode
                how = f"signal {-code}" if code < 0 else f"exit status {code}"
                result = failure("run", f"died ({how}) without a result", "RankDied")
        got[rank] = result
        if not result["ok"]:
            failed_rank = rank
    for proc in ranks:  # done or failed: no rank may outlive the run (one may be stuck in a collective)
        if proc.is_alive():
            proc.kill()
    for proc in ranks:
        proc.join(timeout=10)
    if failed_rank is not None:
        result = dict(got[failed_rank])
        result.update(error=f"rank {failed_rank}: {result['error']}", failed_rank=failed_rank)
        return result
    merged = dict(got[0])
    merged["peak_memory_per_rank"] = [got[r].get("peak_memory_bytes") for r in range(world)]
    merged["peak_memory_bytes"] = max(p for p in merged["peak_memory_per_rank"] if p is not None)
    merged["cores"] = world
    return merged


def rank_main(rank, world, port, params, results):
    """One rank of a sharded run: take its own environment, join the process group, run, report to the launcher."""
    die_with_parent()
    try:
        os.environ.update(rank_environment(rank, world, port, params["device"], os.environ))
        if params["device"] == "neuron":
            import torch_neuronx  # noqa: F401 - registers the Neuron device and distributed backend first

        import torch.distributed as dist

        dist.init_process_group(backend=params["dist_backend"], rank=rank, world_size=world)
        result = device_run(params, rank=rank)
    except BaseException as exc:  # noqa: BLE001
        result = failed(exc, "load", {})
    results.put((rank, result))
    # Exit without tearing the process group down: the launcher collects results and ends the ranks.


def parse_visible_cores(value):
    """NEURON_RT_VISIBLE_CORES as a list of core ids, in both forms it is given: a range ("4-7", as a sweep's slot)
    or a list ("0,1,2,3", as Ray sets it), or a mix ("0-1,6"); None when unset or empty."""
    if value is None or not str(value).strip():
        return None
    cores = []
    for part in str(value).replace(" ", "").split(","):
        first, _, last = part.partition("-")
        cores.extend(range(int(first), int(last or first) + 1))
    return cores


def rank_environment(rank, world, port, device, inherited):
    """The environment of one rank of a sharded run, decided here for run.py, a sweep's slot and a Ray task alike.

    Each rank gets exactly one core: the rank-th of the cores this run was given (NEURON_RT_VISIBLE_CORES, in
    either form), else core ``rank``. torch-neuronx's process group sets NEURON_RT_VISIBLE_CORES to the local rank
    only "if user hasn't set it", and asserts "Attempted to have more than one device per process in distributed
    setup": an inherited range would reach every rank whole. Its device index is then the local rank (the process
    group calls ``_set_local_device_start_index(local_rank)``), so ``LOCAL_RANK`` is the rank and run.py uses
    ``neuron:<rank>``. Other devices keep their own visibility rules: only the process-group variables are set.
    """
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
           "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world)}
    if device == "neuron":
        given = parse_visible_cores(inherited.get("NEURON_RT_VISIBLE_CORES"))
        if given is not None and len(given) < world:
            raise RuntimeError(f"{world} ranks need {world} NeuronCores; NEURON_RT_VISIBLE_CORES gives "
                               f"{len(given)} ({inherited.get('NEURON_RT_VISIBLE_CORES')})")
        env["NEURON_RT_VISIBLE_CORES"] = str(given[rank] if given is not None else rank)
    return env


def pin_neuron_contract():
    """On Trainium: no silent eager fallback, and the Neuron device registered before anything uses it.

    "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default 1): Set to 0 to fall back to eager execution on a compile
    failure": a compile that fell back to eager would read as a PASS, so run.py pins it to 1 whatever it inherited
    (the compile call also passes ``fallback_execution=False``). The compile-cache counters need
    TORCH_NEURONX_METRICS_ENABLED=1. Set before torch is imported; ``import torch_neuronx`` registers the device."""
    os.environ["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] = "1"
    os.environ.setdefault("TORCH_NEURONX_METRICS_ENABLED", "1")


def compile_options(compile_backend):
    """torch.compile's options for the backend: on neuron, never fall back to eager when a graph fails to compile
    (the option overrides the environment variable, so both are pinned); nothing for inductor."""
    return {"fallback_execution": False} if compile_backend == "neuron" else None


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- helpers ----------------------------------------------------------------------------------------------
# Words an allocator's error uses when memory ran out (the harness classifies crashed processes with them too).
MEMORY_WORDS = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory")


def emit(payload):
    """The one JSON line on stdout: the last line, which the harness reads."""
    sys.stdout.write("\n" + json.dumps(payload) + "\n")
    sys.stdout.flush()


def failure(stage, error, error_type, trace="", timings=None, **extra):
    """The one shape of a failed result."""
    return {"ok": False, "stage": stage, "error": error, "error_type": error_type, "traceback": trace,
            "timings": timings or {}, **extra}


def failed(exc, stage, timings, **extra):
    """A failed result from an exception: its type and the first line of its message (the cause to read
    first; later lines are usually advice or context), the whole traceback, and the stage."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # "backend='inductor' raised:" introduces the cause
        lines[0] = f"{lines[0]} {lines[1]}"
    error = f"{type(exc).__name__}: {lines[0][:500]}" if lines else type(exc).__name__
    trace = "".join(traceback.format_exception(exc))[-20000:]
    return failure(failure_stage(exc, stage), error, type(exc).__name__, trace, timings, **extra)


def failure_stage(exc, stage):
    """Classify an exception into the stage it failed at: load, compile, run or oom."""
    import torch

    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))) or any(w in text for w in MEMORY_WORDS):
        return "oom"
    if stage in ("load", "reference"):
        return stage
    module = type(exc).__module__ or ""
    if module.startswith("torch_neuronx"):
        return stage  # the Neuron runtime and compiler raise alike: the stage it happened in says which it was
    if module.startswith(("torch._dynamo", "torch._inductor")) or "compil" in type(exc).__name__.lower():
        return "compile"
    return stage


def peak_memory_bytes(device):
    """Peak device memory of this process: the accelerator's allocator, or peak resident memory on CPU."""
    import torch

    if device.startswith("neuron"):  # this rank's own device (neuron:<local rank>), not device 0
        torch.neuron.synchronize(device)
        return int(torch.neuron.max_memory_allocated(device))
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def compile_cache_counters(compile_backend):
    """This process's compile-cache hits and misses, from the compiler's own counters: inductor's FX-graph cache, or
    torch-neuronx's persistent NEFF cache (CompilationCache.PersistentHits / PersistentMisses, counted when
    TORCH_NEURONX_METRICS_ENABLED=1, which run.py sets on neuron). None where no counter can be read: the harness
    then compares the cache folder before and after."""
    try:
        if compile_backend == "neuron":
            from torch_neuronx import metrics

            hits = metrics.get_counter_value("CompilationCache.PersistentHits")
            misses = metrics.get_counter_value("CompilationCache.PersistentMisses")
            if hits is None and misses is None:
                return None
            return {"hits": int(hits or 0), "misses": int(misses or 0)}
        if compile_backend != "inductor":
            return None
        from torch._dynamo.utils import counters

        inductor = counters["inductor"]
        return {"hits": int(inductor["fxgraph_cache_hit"]), "misses": int(inductor["fxgraph_cache_miss"])}
    except Exception:  # another compiler, or a release without these counters: the folder comparison decides
        return None


def dynamo_traced():
    """Did dynamo trace Python code in this process (False when a warm cache handed it the graph)?"""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"]) > 0
    except Exception:
        return None


def dynamo_figures(recompiles, compile_backend, exc=None):
    """What the compiler saw, from torch's own counters: graph breaks (0 under fullgraph, where a break is an error:
    then 1), unique graphs compiled, recompilations; on neuron, the ops torch-neuronx ran on the CPU instead."""
    figures = {}
    try:
        import torch
        from torch._dynamo.utils import counters

        breaks = sum(int(n) for n in counters["graph_break"].values())
        if exc is not None and isinstance(exc, getattr(torch._dynamo.exc, "Unsupported", ())):
            breaks = max(breaks, 1)  # fullgraph=True raises at the first break instead of counting it
        figures = {"graph_breaks": breaks, "unique_graphs": int(counters["stats"]["unique_graphs"]),
                   "recompiles": len(recompiles.reasons)}
    except Exception:  # a torch without these counters: the row leaves them empty
        return figures
    if compile_backend == "neuron":
        try:
            import torch_neuronx

            figures["fallback_ops"] = sorted(str(op) for op in torch_neuronx.get_fallback_ops())
        except Exception:  # a release without get_fallback_ops: not recorded rather than guessed
            pass
    return figures


def eager_not_tried(params, sharded, parameters):
    """Why the eager run beside the compiled one is skipped (its bounds, stated in the card), or None."""
    if sharded:
        return f"sharded over {params['cores']} ranks: an eager pass would hold every rank's cores as long again"
    bound = params["eager_max_parameters"]
    if bound <= 0:
        return "eager runs were turned off for this run"
    if parameters > bound:
        return f"{count_text(parameters)} parameters, above the {count_text(bound)} bound for an eager run on the device"
    return None


def count_text(n):
    """A parameter count people read: 135M, 2.7B, 3B."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def eager_seconds(params, sharded, parameters, call, warm_up=False):
    """Time ``call()`` run eagerly on the device (once more first with ``warm_up``), within the eager bounds:
    {"device_eager": "ran", "seconds": s}, or the reason it failed or was not tried (evidence, not the verdict)."""
    why = eager_not_tried(params, sharded, parameters)
    if why:
        return {"device_eager": f"not tried: {why}"}
    try:
        if warm_up:
            call()
        t0 = time.perf_counter()
        call()
        return {"device_eager": "ran", "seconds": time.perf_counter() - t0}
    except Exception as exc:  # noqa: BLE001 - the compiled run is the verdict; this is what it is measured against
        reason = str(exc).splitlines()[0][:200] if str(exc) else ""
        return {"device_eager": f"failed: {type(exc).__name__}: {reason}"}


def eager_only(load_model, run_once):
    """`run.py --eager` for a recipe: load on the device, then one call with nothing compiled; ok, or the failure
    at its stage (load or run)."""
    try:
        model = load_model()
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "load", {})
    try:
        run_once(model)
        return {"ok": True, "mode": "eager", "timings": {}}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "run", {})


class RecompileLog:
    """Collects dynamo's recompilation reasons (the guard that failed), so a run that hits the recompile
    limit can say which guard kept failing."""

    def __init__(self):
        import logging

        self.reasons = []
        self.handler = logging.Handler()
        self.handler.emit = lambda record: self.reasons.append(record.getMessage()[:1500])  # the guard comes first

    LOGGER = "torch._dynamo.guards.__recompiles"  # torch's "recompiles" log artifact

    def __enter__(self):
        import logging

        import torch

        torch._logging.set_logs(recompiles=True)
        logging.getLogger(self.LOGGER).addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        import logging

        logging.getLogger(self.LOGGER).removeHandler(self.handler)
        return False


def die_with_parent():
    """Linux: SIGKILL this process when its parent dies, so no rank (or run) outlives the process that started it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
