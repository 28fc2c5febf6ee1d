"""run.py: does this sentence-transformers model run unmodified under torch.compile on Trainium? (neuronhelpers recipe)

Needs only torch, sentence-transformers (with the transformers it builds on) and requirements.txt. Read it
top-down: the parameters, main, the Trainium contract, then the recipe: load the model with SentenceTransformer(...)
(its transformer module through from_pretrained), compile that module with torch.compile(fullgraph=True,
dynamic=False) and the backend's compiler (neuron on Trainium), encode a fixed batch of sentences padded to one
length (static shapes) twice (cold: traces and compiles; warm: runs the compiled graph; compile_s is cold minus
warm), and print one JSON line with the embeddings, timings and peak device memory.

    python3 run.py               # the recipe on the device
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and sentences, nothing compiled

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/: edit those, never a rendered copy.
"""

# The recipe's own imports, for the package (its tests and the twins call its functions); run.py has one imports
# section, the scaffold's, so the renderer takes this file's docstring and sections, not these lines.
import time

from .scaffold import compile_options, failed, peak_memory_bytes

# ---- the recipe --------------------------------------------------------------------------------------------
# What the measuring (neuronhelpers/run/measure.py) may read or wrap, and only that: rename on both sides.
MEASURED = ("PARAMS", "main", "emit", "failed", "pin_neuron_contract", "device_run", "encode", "load",
            "compile_transformer", "rank_main")


def device_run(params, rank=None):
    """Load on the device, compile the transformer module, encode cold and then warm."""
    import torch

    device = params["device"]
    stage, timings = "load", {}
    try:
        t0 = time.perf_counter()
        model = load(params, device)
        timings["load_s"] = time.perf_counter() - t0
        stage = "compile"  # the cold encode traces the transformer's forward and compiles it
        compile_transformer(model, params["compile_backend"])
        t0 = time.perf_counter()
        cold = encode(model, params)
        timings["first_call_s"] = time.perf_counter() - t0
        stage = "run"  # the warm encode runs the compiled graph
        t0 = time.perf_counter()
        embeddings = encode(model, params)
        timings["generate_s"] = time.perf_counter() - t0  # the row's column for the warm, compiled call
        timings["compile_s"] = max(timings["first_call_s"] - timings["generate_s"], 0.0)
        return {"ok": True, "mode": "device", "embeddings": embeddings.tolist(), "dimension": embeddings.shape[1],
                "sequence_length": params["sequence_length"], "warm_equals_cold": bool(torch.equal(cold, embeddings)),
                "timings": timings, "peak_memory_bytes": peak_memory_bytes(device)}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a result with its stage
        return failed(exc, stage, timings)


def compile_transformer(model, backend):
    """Compile the transformers model inside the first module (pooling, normalisation etc. follow it, uncompiled)."""
    import torch

    module = model[0]
    if not hasattr(module, "auto_model"):
        raise TypeError(f"the first module is {type(module).__name__}, not a Transformer module: nothing to compile")
    module.model = torch.compile(module.model, backend=backend, fullgraph=True, dynamic=False,
                                 options=compile_options(backend))


def encode(model, params):
    """The sentences in one batch, each padded (or cut) to the same number of tokens so the compiled graph sees one
    static shape; the embeddings as float32 on the CPU, in the order of the sentences."""
    static = {"text": {"padding": "max_length", "max_length": params["sequence_length"], "truncation": True}}
    embeddings = model.encode(params["prompt"], batch_size=len(params["prompt"]), convert_to_tensor=True,
                              show_progress_bar=False, processing_kwargs=static)
    return embeddings.float().cpu()


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device):
    """SentenceTransformer(...): the transformer module through from_pretrained in the run's dtype, every other module
    (pooling, dense, normalize) as saved, all on the device."""
    import torch
    from sentence_transformers import SentenceTransformer

    dtype = getattr(torch, params["dtype"])
    model = SentenceTransformer(params["model_path"], device=str(device), trust_remote_code=params["trust_remote_code"],
                                revision=params["revision"], model_kwargs={"dtype": dtype})
    model.to(dtype)  # modules with their own weights (Dense) follow the transformer's dtype
    model.eval()
    return model


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype and sentences on the CPU, eagerly: the embeddings to match."""

    try:
        model = load(params, "cpu")
        embeddings = encode(model, params)
        return {"ok": True, "mode": "reference", "embeddings": embeddings.tolist(), "dimension": embeddings.shape[1]}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})
