"""run.py: does this sentence-transformers model run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, sentence-transformers (with the transformers it builds on) and the packages
in requirements.txt. Read it top-down: the parameters, main, then the device run, which is the whole recipe:
load the model with SentenceTransformer(...) (its transformer module through from_pretrained), compile that
transformer module with torch.compile(fullgraph=True, dynamic=False) and the backend's compiler (neuron on
Trainium), encode a fixed batch of sentences padded to one fixed length (static shapes) twice (cold, then warm
and timed), and print one JSON line with the embeddings, timings and peak device memory.

    python3 run.py               # the device run
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and sentences, no compile

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/ (this recipe and the shared scaffold):
edit those, never a rendered copy.
"""

import time  # render: drop

from .scaffold import RecompileLog, compile_cache_counters, compile_options, dynamo_figures, dynamo_traced, eager_only, eager_seconds, failed, peak_memory_bytes  # render: drop


# ---- the device run: the recipe ----------------------------------------------------------------------------
def device_run(params, rank=None):
    """Load on the backend's device, compile the transformer module, encode twice (cold, then warm and timed)."""
    import sentence_transformers
    import torch

    device, dtype = params["device"], getattr(torch, params["dtype"])
    stage, timings = "load", {}
    recompiles = RecompileLog()
    eager = {}  # measured before compiling: a compiled failure still reports it
    try:
        t0 = time.perf_counter()
        model = load(params, device, dtype)
        timings["load_s"] = time.perf_counter() - t0
        eager = eager_encode(model, params, rank is not None)  # before compiling: the module as loaded

        stage = "compile"  # the first encode traces and compiles the transformer's forward
        module = transformer_module(model)
        module.model = torch.compile(module.model, backend=params["compile_backend"], fullgraph=True, dynamic=False,
                                     options=compile_options(params["compile_backend"]))
        t0 = time.perf_counter()
        with recompiles:
            first = encode(model, params)
        timings["first_call_s"] = time.perf_counter() - t0

        stage = "run"
        t0 = time.perf_counter()
        embeddings = encode(model, params)
        timings["encode_s"] = time.perf_counter() - t0
        timings["generate_s"] = timings["encode_s"]  # the row's column for the warm, compiled call
        timings["compile_s"] = max(timings["first_call_s"] - timings["encode_s"], 0.0)
        sentences = len(params["prompt"])
        return {
            "ok": True,
            "mode": "device",
            "embeddings": embeddings.tolist(),
            "dimension": embeddings.shape[1],
            "sequence_length": params["sequence_length"],
            "warm_equals_cold": bool(torch.equal(first, embeddings)),
            "timings": timings,
            "figures": {"items_per_s": sentences / timings["encode_s"]},  # sentences per second, warm
            "peak_memory_bytes": peak_memory_bytes(str(device)),
            "compile_cache": compile_cache_counters(params["compile_backend"]),
            "retraced": dynamo_traced(),
            "recompile_reasons": recompiles.reasons[-3:],
            "dynamo": dynamo_figures(recompiles, params["compile_backend"]),
            "eager": eager,
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        }
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a classified result
        return failed(exc, stage, timings, recompile_reasons=recompiles.reasons[-3:], eager=eager,
                      dynamo=dynamo_figures(recompiles, params["compile_backend"], exc))


def eager_encode(model, params, sharded):
    """The batch encoded eagerly on the device, twice (the second timed, as the compiled one is): sentences per
    second with nothing compiled, for the speed-up. Bounded like every eager run (eager_not_tried)."""
    out = eager_seconds(params, sharded, sum(p.numel() for p in model.parameters()), lambda: encode(model, params),
                        warm_up=True)
    if "seconds" in out:
        out["eager_items_per_s"] = len(params["prompt"]) / out.pop("seconds")
    return out


def eager_run(params):
    """`run.py --eager`: the batch encoded on the device with nothing compiled, after a compiled run failed."""
    import torch

    return eager_only(lambda: load(params, params["device"], getattr(torch, params["dtype"])),
                      lambda model: encode(model, params))


def encode(model, params):
    """The fixed batch of sentences in one batch, every sentence padded (or cut) to the same number of tokens so the
    compiled graph sees one static shape; the embeddings as float32 on the CPU, in the order of the sentences."""
    static = {"text": {"padding": "max_length", "max_length": params["sequence_length"], "truncation": True}}
    embeddings = model.encode(params["prompt"], batch_size=len(params["prompt"]), convert_to_tensor=True,
                              show_progress_bar=False, processing_kwargs=static)
    return embeddings.float().cpu()


def transformer_module(model):
    """The module that holds the transformers model (the first one: pooling, normalisation etc. follow it)."""
    module = model[0]
    if not hasattr(module, "auto_model"):
        raise TypeError(f"the first module is {type(module).__name__}, not a Transformer module: nothing to compile")
    return module


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device, dtype):
    """SentenceTransformer(...) from a folder or Hub id: the transformer module through from_pretrained in the run's
    dtype, every other module (pooling, dense, normalize) as saved, all moved to the device."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(params["model_path"], device=str(device), trust_remote_code=params["trust_remote_code"],
                                revision=params["revision"], model_kwargs={"dtype": dtype})
    model.to(dtype)  # modules with their own weights (Dense) follow the transformer's dtype
    model.eval()
    return model


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype and sentences on CPU in eager mode: the embeddings to match."""
    import torch

    try:
        model = load(params, "cpu", getattr(torch, params["dtype"]))
        embeddings = encode(model, params)
        return {"ok": True, "mode": "reference", "embeddings": embeddings.tolist(), "dimension": embeddings.shape[1]}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})
