"""run.py: does this Hugging Face model run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, transformers and the packages in requirements.txt. It loads the
checkpoint with from_pretrained, generates 32 greedy tokens with a static KV cache under
torch.compile(fullgraph=True, dynamic=False) with the backend's compiler (neuron on Trainium),
and prints one JSON line on stdout with tokens, timings and peak device memory.

    python3 run.py               # the device run (launches its own ranks when sharded: no torchrun)
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and prompt, no compile

When PARAMS["cores"] > 1 the script starts one process per core, initialises torch.distributed with
the backend's process group (neuron, nccl or gloo), loads through transformers' own sharding (tensor
parallel, expert parallel for mixture-of-experts), and prints rank 0's result with every rank's peak
memory. A rank that fails stops the whole run at once with that rank's error.

Rendered by neuronhelpers.recipe.render_run_py from neuronhelpers/run_py_template.py: edit the
template, never a rendered copy.
"""

import json
import os
import sys
import time
import traceback

# --- parameters (rendered) ---
PARAMS = {
    "model_id": "tiny/llama",
    "model_path": "tiny/llama",
    "task": "text-generation",
    "backend": "cpu",
    "device": "cpu",
    "compile_backend": "inductor",
    "dtype": "float32",
    "cores": 1,
    "parallelism": "none",
    "dist_backend": "gloo",
    "max_new_tokens": 32,
    "prompt": "Write a short story about a robot who learns to paint.",
    "trust_remote_code": False,
    "revision": None,
    "top_k": 5,
}
# --- end parameters ---

def emit(payload):
    """The one JSON line on stdout: the last line, which the harness reads."""
    sys.stdout.write("\n" + json.dumps(payload) + "\n")
    sys.stdout.flush()


def failure_stage(exc, stage):
    """Classify an exception into the stage it failed at: load, compile, run or oom."""
    import torch

    text = f"{type(exc).__name__}: {exc}".lower()
    memory_words = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory")
    if isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))) or any(w in text for w in memory_words):
        return "oom"
    if stage == "load":
        return "load"
    module = type(exc).__module__ or ""
    if module.startswith(("torch._dynamo", "torch._inductor", "torch_neuronx")) or "compil" in type(exc).__name__.lower():
        return "compile"
    return stage


def peak_memory_bytes(device):
    """Peak device memory of this process: the accelerator's allocator, or peak resident memory on CPU."""
    import torch

    if device.startswith("neuron"):
        torch.neuron.synchronize()
        return int(torch.neuron.max_memory_allocated())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated())
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def test_image():
    """A deterministic 64x64 RGB gradient (channels first, uint8): no file, no download."""
    import torch

    ramp = torch.arange(64, dtype=torch.int64)
    red = (ramp.view(1, 64).expand(64, 64) * 4) % 256
    green = (ramp.view(64, 1).expand(64, 64) * 4) % 256
    blue = ((ramp.view(1, 64) + ramp.view(64, 1)) * 2) % 256
    return torch.stack([red, green, blue]).to(torch.uint8)


def sharding_kwargs(params):
    """from_pretrained arguments for transformers' own sharding, in whichever form the installed release takes."""
    import transformers

    parallelism = params["parallelism"]
    if parallelism == "none":
        return {}
    tp, ep = parallelism.startswith("tp"), "ep" in parallelism
    if hasattr(transformers, "DistributedConfig"):
        config = transformers.DistributedConfig(tp_plan="auto" if tp else None, enable_expert_parallel=ep)
        return {"distributed_config": config}
    if ep:
        raise RuntimeError(f"transformers {transformers.__version__} has no expert parallelism (DistributedConfig)")
    return {"tp_plan": "auto"}  # older releases


def load(params, device, dtype, sharded=False):
    """from_pretrained the model and its tokenizer or processor, and build the prompt inputs."""
    import transformers

    common = {"trust_remote_code": params["trust_remote_code"], "revision": params["revision"]}
    weights = {**common, **(sharding_kwargs(params) if sharded else {})}
    if params["task"] == "image-text-to-text":
        processor = transformers.AutoProcessor.from_pretrained(params["model_path"], **common)
        model = transformers.AutoModelForImageTextToText.from_pretrained(params["model_path"], dtype=dtype, **weights)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": params["prompt"]}]}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(text=text, images=[test_image()], return_tensors="pt")
        tokenizer = processor.tokenizer
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(params["model_path"], **common)
        model = transformers.AutoModelForCausalLM.from_pretrained(params["model_path"], dtype=dtype, **weights)
        if tokenizer.chat_template:
            messages = [{"role": "user", "content": params["prompt"]}]
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            text = params["prompt"]
        inputs = tokenizer(text, return_tensors="pt")
    model.eval()
    if sharded:
        device = model.device  # transformers placed each shard on this rank's device
    else:
        model.to(device)
    inputs = {k: (v.to(device).to(dtype) if v.is_floating_point() else v.to(device)) for k, v in inputs.items()}
    return model, tokenizer, inputs


class TokenClock:
    """A generate() streamer that timestamps each new token: gives time to first token and decode rate."""

    def __init__(self):
        self.start = time.perf_counter()
        self.stamps = []
        self.prompt_seen = False

    def put(self, value):
        if not self.prompt_seen:  # generate() first hands the streamer the prompt
            self.prompt_seen = True
            return
        self.stamps.append(time.perf_counter())

    def end(self):
        pass


def compile_cache_counters():
    """Inductor's FX-graph cache hits and misses in this process (None where the compiler keeps no such count)."""
    try:
        from torch._dynamo.utils import counters

        inductor = counters["inductor"]
        return {"hits": int(inductor["fxgraph_cache_hit"]), "misses": int(inductor["fxgraph_cache_miss"])}
    except Exception:  # not inductor, or another torch release
        return None


def generation_kwargs(params, tokenizer, n):
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # Exactly n tokens (an early end-of-sequence would shorten the comparison), greedy.
    return {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "pad_token_id": pad}


def device_run(params, rank=None):
    """Load on the backend's device, compile, generate twice (cold, then warm and timed)."""
    import torch
    import transformers

    device, dtype = params["device"], getattr(torch, params["dtype"])
    if rank is not None and device in ("neuron", "cuda"):
        device = f"{device}:{rank}"  # one process per core: device index = local rank
    n = params["max_new_tokens"]
    stage, timings = "load", {}
    try:
        t0 = time.perf_counter()
        model, tokenizer, inputs = load(params, device, dtype, sharded=rank is not None)
        timings["load_s"] = time.perf_counter() - t0

        compile_config = transformers.CompileConfig(
            backend=params["compile_backend"], fullgraph=True, dynamic=False, mode="default"
        )
        if not device.startswith(("neuron", "cuda")):
            # generate() compiles automatically only on accelerators; ask for it on CPU too.
            compile_config._compile_all_devices = True
        kwargs = generation_kwargs(params, tokenizer, n)
        kwargs.update(cache_implementation="static", compile_config=compile_config)

        stage = "compile"  # the first call traces and compiles the decode step
        t0 = time.perf_counter()
        with torch.inference_mode():
            first = model.generate(**inputs, **kwargs)
        timings["first_call_s"] = time.perf_counter() - t0

        stage = "run"
        clock = TokenClock()
        with torch.inference_mode():
            out = model.generate(**inputs, **kwargs, streamer=clock)
        end = time.perf_counter()
        timings["generate_s"] = end - clock.start
        timings["compile_s"] = max(timings["first_call_s"] - timings["generate_s"], 0.0)
        if clock.stamps:
            timings["ttft_s"] = clock.stamps[0] - clock.start
            if len(clock.stamps) > 1:
                timings["decode_tokens_per_s"] = (len(clock.stamps) - 1) / (clock.stamps[-1] - clock.stamps[0])
        prompt_len = inputs["input_ids"].shape[1]
        tokens = out[0, prompt_len:].tolist()
        first_tokens = first[0, prompt_len:].tolist()
        return {
            "ok": True,
            "mode": "device",
            "tokens": tokens,
            "text": tokenizer.decode(tokens, skip_special_tokens=True),
            "warm_equals_cold": tokens == first_tokens,
            "prompt_tokens": prompt_len,
            "timings": timings,
            "peak_memory_bytes": peak_memory_bytes(str(device)),
            "compile_cache": compile_cache_counters() if params["compile_backend"] == "inductor" else None,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a classified result
        return failed(exc, failure_stage(exc, stage), timings)


def reference_run(params):
    """The same checkpoint, dtype and prompt on CPU in eager mode: the tokens to match and their logits."""
    import torch

    dtype = getattr(torch, params["dtype"])
    n, k = params["max_new_tokens"], params["top_k"]
    try:
        model, tokenizer, inputs = load(params, "cpu", dtype)
        with torch.inference_mode():
            out = model.generate(
                **inputs, **generation_kwargs(params, tokenizer, n), output_logits=True, return_dict_in_generate=True
            )
        prompt_len = inputs["input_ids"].shape[1]
        top_ids, top_logits = [], []
        for step in out.logits:  # raw logits per generated position
            values, ids = torch.topk(step[0].float(), k)
            top_ids.append(ids.tolist())
            top_logits.append([round(v, 6) for v in values.tolist()])
        tokens = out.sequences[0, prompt_len:].tolist()
        return {
            "ok": True,
            "mode": "reference",
            "tokens": tokens,
            "text": tokenizer.decode(tokens, skip_special_tokens=True),
            "top_ids": top_ids,
            "top_logits": top_logits,
        }
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})


def failed(exc, stage, timings):
    # The exception's own first line says what went wrong; later lines are usually advice or context.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # "backend='inductor' raised:" introduces the cause
        lines[0] = f"{lines[0]} {lines[1]}"
    return {
        "ok": False,
        "stage": stage,
        "error": f"{type(exc).__name__}: {lines[0][:500]}" if lines else type(exc).__name__,
        "error_type": type(exc).__name__,
        "traceback": "".join(traceback.format_exception(exc))[-20000:],
        "timings": timings,
    }


def die_with_parent():
    """Linux: SIGKILL this process when the launcher dies, so no rank outlives the run."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def rank_main(rank, world, port, params, results):
    """One rank of a sharded run: join the process group, run, report to the launcher."""
    die_with_parent()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    try:
        import torch.distributed as dist

        dist.init_process_group(backend=params["dist_backend"], rank=rank, world_size=world)
        result = device_run(params, rank=rank)
    except BaseException as exc:  # noqa: BLE001
        result = failed(exc, "load", {})
    results.put((rank, result))
    # Exit without tearing the process group down: the launcher collects results and ends the ranks.


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    got, failure = {}, None
    while len(got) < world and failure is None:
        try:
            rank, result = results.get(timeout=0.2)
            got[rank] = result
            if not result["ok"]:
                failure = (rank, result)
        except queue.Empty:
            for rank, proc in enumerate(ranks):
                if rank not in got and proc.exitcode not in (None, 0):
                    try:  # its own report, if it managed to send one
                        late_rank, result = results.get(timeout=1.0)
                        got[late_rank] = result
                        if not result["ok"]:
                            failure = (late_rank, result)
                            break
                    except queue.Empty:
                        pass
                    code = proc.exitcode
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    failure = (rank, {"ok": False, "stage": "run", "error": f"rank {rank} died ({how}) without a result",
                                      "error_type": "RankDied", "traceback": "", "timings": {}})
                    break
    for proc in ranks:  # done or failed: no rank may outlive the run (one may be stuck in a collective)
        if proc.is_alive():
            proc.kill()
    for proc in ranks:
        proc.join(timeout=10)
    if failure is not None:
        rank, result = failure
        result = dict(result)
        result["error"] = f"rank {rank}: {result['error']}"
        result["failed_rank"] = rank
        return result
    merged = dict(got[0])
    merged["peak_memory_per_rank"] = [got[r].get("peak_memory_bytes") for r in range(world)]
    merged["peak_memory_bytes"] = max(p for p in merged["peak_memory_per_rank"] if p is not None)
    merged["cores"] = world
    return merged


def main(argv):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "--reference" in argv:
        result = reference_run(PARAMS)
    elif PARAMS["cores"] > 1:
        result = sharded_run(PARAMS)
    else:
        result = device_run(PARAMS)
    result["model_id"] = PARAMS["model_id"]
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
