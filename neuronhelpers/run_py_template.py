"""run.py: does this Hugging Face model run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, transformers and the packages in requirements.txt. It loads the
checkpoint with from_pretrained, generates 32 greedy tokens with a static KV cache under
torch.compile(fullgraph=True, dynamic=False) with the backend's compiler (neuron on Trainium),
and prints one JSON line on stdout with tokens, timings and peak device memory.

    python3 run.py               # the device run
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and prompt, no compile

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
    if isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError))) or "out of memory" in text:
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


def load(params, device, dtype):
    """from_pretrained the model and its tokenizer or processor, and build the prompt inputs."""
    import transformers

    common = {"trust_remote_code": params["trust_remote_code"], "revision": params["revision"]}
    if params["task"] == "image-text-to-text":
        processor = transformers.AutoProcessor.from_pretrained(params["model_path"], **common)
        model = transformers.AutoModelForImageTextToText.from_pretrained(params["model_path"], dtype=dtype, **common)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": params["prompt"]}]}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(text=text, images=[test_image()], return_tensors="pt")
        tokenizer = processor.tokenizer
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(params["model_path"], **common)
        model = transformers.AutoModelForCausalLM.from_pretrained(params["model_path"], dtype=dtype, **common)
        if tokenizer.chat_template:
            messages = [{"role": "user", "content": params["prompt"]}]
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            text = params["prompt"]
        inputs = tokenizer(text, return_tensors="pt")
    model.eval()
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


def generation_kwargs(params, tokenizer, n):
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # Exactly n tokens (an early end-of-sequence would shorten the comparison), greedy.
    return {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "pad_token_id": pad}


def device_run(params):
    """Load on the backend's device, compile, generate twice (cold, then warm and timed)."""
    import torch
    import transformers

    device, dtype = params["device"], getattr(torch, params["dtype"])
    n = params["max_new_tokens"]
    stage, timings = "load", {}
    try:
        t0 = time.perf_counter()
        model, tokenizer, inputs = load(params, device, dtype)
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
            "peak_memory_bytes": peak_memory_bytes(device),
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
    lines = [line for line in f"{type(exc).__name__}: {exc}".strip().splitlines() if line.strip()]
    return {
        "ok": False,
        "stage": stage,
        "error": lines[-1][:500] if lines else type(exc).__name__,
        "error_type": type(exc).__name__,
        "traceback": "".join(traceback.format_exception(exc))[-20000:],
        "timings": timings,
    }


def main(argv):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = reference_run(PARAMS) if "--reference" in argv else device_run(PARAMS)
    result["model_id"] = PARAMS["model_id"]
    emit(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
