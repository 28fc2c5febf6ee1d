"""run.py: does this Hugging Face model run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, transformers and the packages in requirements.txt. Read it top-down:
the parameters, main, then the device run, which is the whole recipe: load the checkpoint with
from_pretrained, generate 32 greedy tokens with a static KV cache under
torch.compile(fullgraph=True, dynamic=False) with the backend's compiler (neuron on Trainium), and
print one JSON line with the tokens, timings and peak device memory.

    python3 run.py               # the device run (launches its own ranks when sharded: no torchrun)
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and prompt, no compile

When PARAMS["cores"] > 1 the script starts one process per core, initialises torch.distributed with the
backend's process group (neuron, nccl or gloo), loads through transformers' own sharding (tensor
parallel; expert parallel for mixture-of-experts) and prints rank 0's result with every rank's peak
memory. A rank that fails stops the whole run at once with that rank's error.

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/ (this recipe and the shared scaffold):
edit those, never a rendered copy.
"""

import time  # render: drop

from .scaffold import RecompileLog, compile_cache_counters, compile_options, dynamo_figures, dynamo_traced, eager_seconds, failed, peak_memory_bytes  # render: drop


# ---- the device run: the recipe ----------------------------------------------------------------------------
def device_run(params, rank=None):
    """Load on the backend's device, compile, generate twice (cold, then warm and timed)."""
    import torch
    import transformers

    device, dtype = params["device"], getattr(torch, params["dtype"])
    if rank is not None and device in ("neuron", "cuda"):
        device = f"{device}:{rank}"  # one process per core: device index = local rank
    n = params["max_new_tokens"]
    stage, timings = "load", {}
    recompiles = RecompileLog()
    try:
        t0 = time.perf_counter()
        model, tokenizer, inputs = load(params, device, dtype, sharded=rank is not None)
        timings["load_s"] = time.perf_counter() - t0

        kwargs = compiled_generation_kwargs(params, device, tokenizer, n)

        stage = "compile"  # the first call traces and compiles the decode step
        t0 = time.perf_counter()
        with recompiles, torch.inference_mode():
            first = model.generate(**inputs, **kwargs)
        timings["first_call_s"] = time.perf_counter() - t0
        if not forward_was_compiled(model):
            # generate() falls back to the eager forward, silently, when the model's cache cannot be compiled:
            # that is not the recipe, so it is not a PASS.
            raise NotCompiled("generate() ran the forward eagerly: transformers did not compile it (no compileable "
                              "static cache for this architecture, or it opts out of compilation)")

        stage = "run"
        clock = TokenClock()
        with recompiles, torch.inference_mode():  # a recompile in the warm call counts too
            out = model.generate(**inputs, **kwargs, streamer=clock)
        timings["generate_s"] = time.perf_counter() - clock.start
        timings["compile_s"] = max(timings["first_call_s"] - timings["generate_s"], 0.0)
        timings.update(clock.figures())
        prompt_len = inputs["input_ids"].shape[1]
        tokens = generated_tokens(model, out, prompt_len)
        figures = dynamo_figures(recompiles, params["compile_backend"])  # before the eager run adds nothing to them
        peak = peak_memory_bytes(str(device))  # the compiled run's, before the eager calls
        eager = eager_comparison(model, inputs, kwargs, params, rank is not None, tokens, clock.figures(),
                                 timings["generate_s"])
        timings.update(eager.pop("compiled_best", {}))  # the compiled rate as measured beside the eager one
        return {
            "ok": True, "mode": "device", "tokens": tokens,
            "text": tokenizer.decode(tokens, skip_special_tokens=True),
            "warm_equals_cold": tokens == generated_tokens(model, first, prompt_len),
            "prompt_tokens": prompt_len,
            "timings": timings,
            "peak_memory_bytes": peak,
            "compile_cache": compile_cache_counters(params["compile_backend"]),
            "retraced": dynamo_traced(), "recompile_reasons": recompiles.reasons[-3:],
            "dynamo": figures,
            "declared_fullgraph": getattr(type(model), "_can_compile_fullgraph", None),
            "eager": eager,
            "torch": torch.__version__, "transformers": transformers.__version__,
        }
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a classified result
        return failed(exc, stage, timings, recompile_reasons=recompiles.reasons[-3:],
                      dynamo=dynamo_figures(recompiles, params["compile_backend"], exc))


def eager_comparison(model, inputs, kwargs, params, sharded, compiled_tokens, compiled_figures, compiled_s):
    """The same generate() with the same static cache, eagerly (nothing compiled), in this process right after the
    warm compiled call and timed the same way: a speed-up measured back to back, not across machines or minutes.
    Where a call is quick (under QUICK_CALL_S) the two alternate, TIMING_ROUNDS eager calls between compiled ones, and
    each side keeps its best decode rate: one call on a shared machine can lose tenfold to a neighbour's burst.
    Bounded: never for a sharded run, nor above params["eager_max_parameters"] (the reason goes in the row)."""
    import torch

    prompt_len = inputs["input_ids"].shape[1]
    rounds = TIMING_ROUNDS if compiled_s < QUICK_CALL_S else 1
    eager_calls, compiled_calls = [], [compiled_figures]

    def call(**extra):
        clock = TokenClock()
        with torch.inference_mode():
            output = model.generate(**inputs, **kwargs, streamer=clock, **extra)
        return clock.figures(), generated_tokens(model, output, prompt_len)

    def alternate():
        for i in range(rounds):
            eager_calls.append(call(disable_compile=True))
            if i < rounds - 1:
                compiled_calls.append(call()[0])

    out = eager_seconds(params, sharded, sum(p.numel() for p in model.parameters()), alternate)
    if out["device_eager"] == "ran":  # the decode rates from the token clock, as the compiled call's
        out.pop("seconds")

        def rate(figures):
            return figures.get("decode_tokens_per_s") or 0.0

        out.update(eager_decode_tokens_per_s=max(rate(f) for f, _ in eager_calls) or None,
                   eager_equals_compiled=eager_calls[0][1] == compiled_tokens,
                   compiled_best=max(compiled_calls, key=rate))
    return out


def eager_run(params):
    """`run.py --eager`: the model on the device with nothing compiled (the same static cache and tokens), after a
    compiled run failed: does the device run it at all, or only the compiler not?"""
    import torch

    device, dtype = params["device"], getattr(torch, params["dtype"])
    stage, timings = "load", {}
    try:
        model, tokenizer, inputs = load(params, device, dtype)
        kwargs = compiled_generation_kwargs(params, device, tokenizer, params["max_new_tokens"])
        stage = "run"
        clock = TokenClock()
        with torch.inference_mode():
            out = model.generate(**inputs, **kwargs, disable_compile=True, streamer=clock)
        timings["generate_s"] = time.perf_counter() - clock.start
        timings.update(clock.figures())
        tokens = generated_tokens(model, out, inputs["input_ids"].shape[1])
        return {"ok": True, "mode": "eager", "tokens": tokens, "text": tokenizer.decode(tokens, skip_special_tokens=True),
                "timings": timings}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, stage, timings)


def compiled_generation_kwargs(params, device, tokenizer, n):
    """generate()'s arguments for the recipe: n greedy tokens, a static KV cache, the forward compiled with
    fullgraph=True by the backend's compiler."""
    import transformers

    compile_config = transformers.CompileConfig(
        backend=params["compile_backend"], fullgraph=True, dynamic=False, mode="default",
        options=compile_options(params["compile_backend"]),
    )
    if not device.startswith(("neuron", "cuda")):
        # generate() compiles automatically only on accelerators; ask for it on CPU too.
        compile_config._compile_all_devices = True
    kwargs = generation_kwargs(tokenizer, n)
    kwargs.update(cache_implementation="static", compile_config=compile_config)
    return kwargs


def generated_tokens(model, sequences, prompt_len):
    """The new tokens of the first sequence: after the prompt, or after the decoder's start token for an
    encoder-decoder model (whose output does not repeat the prompt)."""
    start = 1 if getattr(model.config, "is_encoder_decoder", False) else prompt_len
    return sequences[0, start:].tolist()


def generation_kwargs(tokenizer, n):
    """Exactly n greedy tokens (an early end-of-sequence would shorten the comparison)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "pad_token_id": pad}


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device, dtype, sharded=False):
    """from_pretrained the model and its tokenizer or processor, and build the prompt inputs."""
    import transformers

    common = {"trust_remote_code": params["trust_remote_code"], "revision": params["revision"]}
    weights = {**common, **(sharding_kwargs(params) if sharded else {})}
    if params["task"] == "image-text-to-text":
        processor = transformers.AutoProcessor.from_pretrained(params["model_path"], **common)
        model = transformers.AutoModelForImageTextToText.from_pretrained(params["model_path"], dtype=dtype, **weights)
        if getattr(processor, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": params["prompt"]}]}]
            text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:  # no chat template: a plain prompt, after the image token where the processor names one
            text = (getattr(processor, "image_token", None) or "") + params["prompt"]
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


def test_image():
    """A deterministic 64x64 RGB gradient as a PIL image (what processors take first): no file, no download."""
    from PIL import Image

    pixels = bytes(channel for y in range(64) for x in range(64)
                   for channel in ((x * 4) % 256, (y * 4) % 256, ((x + y) * 2) % 256))
    return Image.frombytes("RGB", (64, 64), pixels)


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype and prompt on CPU in eager mode: the tokens to match and their logits."""
    import torch

    dtype = getattr(torch, params["dtype"])
    n, k = params["max_new_tokens"], params["top_k"]
    try:
        model, tokenizer, inputs = load(params, "cpu", dtype)
        with torch.inference_mode():
            out = model.generate(**inputs, **generation_kwargs(tokenizer, n), output_logits=True,
                                 return_dict_in_generate=True)
        top_ids, top_logits = [], []
        for step in out.logits:  # raw logits per generated position
            values, ids = torch.topk(step[0].float(), k)
            top_ids.append(ids.tolist())
            top_logits.append([round(v, 6) for v in values.tolist()])
        tokens = generated_tokens(model, out.sequences, inputs["input_ids"].shape[1])
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


# ---- helpers -----------------------------------------------------------------------------------------------
TIMING_ROUNDS = 3  # eager calls alternating with compiled ones, where a call is quick (eager_comparison)
QUICK_CALL_S = 2.0


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

    def figures(self):
        out = {}
        if self.stamps:
            out["ttft_s"] = self.stamps[0] - self.start
            if len(self.stamps) > 1:
                out["decode_tokens_per_s"] = (len(self.stamps) - 1) / (self.stamps[-1] - self.stamps[0])
        return out


class NotCompiled(RuntimeError):
    """generate() ran without the compiled forward the recipe asks for."""


def forward_was_compiled(model):
    """generate() compiled the model's forward and dynamo traced it (or found it in a warm cache)."""
    return getattr(model, "_compiled_call", None) is not None and dynamo_traced() is not False
