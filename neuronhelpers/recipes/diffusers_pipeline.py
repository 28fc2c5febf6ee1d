"""run.py: does this diffusers pipeline run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, diffusers (with the transformers its text encoders come from) and the
packages in requirements.txt. Read it top-down: the parameters, main, then the device run, which is the whole
recipe: load the pipeline with from_pretrained, compile its denoiser (UNet or transformer) and its VAE decoder
with torch.compile(fullgraph=True, dynamic=False) and the backend's compiler (neuron on Trainium), draw one
image from a fixed prompt, seed, size and number of steps twice (cold, then warm and timed), and print one JSON
line with the image (a PNG, and the exact pixel values the check compares), timings and peak device memory.

The starting noise comes from a CPU generator seeded with PARAMS["seed"], so every device and the reference
start from the same latents.

    python3 run.py               # the device run
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype, prompt, seed and size, no compile

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/ (this recipe and the shared scaffold):
edit those, never a rendered copy.
"""

import time  # render: drop

from .scaffold import RecompileLog, compile_cache_counters, compile_options, dynamo_figures, dynamo_traced, eager_only, eager_seconds, failed, peak_memory_bytes  # render: drop


# ---- the device run: the recipe ----------------------------------------------------------------------------
def device_run(params, rank=None):
    """Load on the backend's device, compile the denoiser and VAE decoder, draw twice (cold, then warm and timed)."""
    import diffusers
    import torch

    device, dtype = params["device"], getattr(torch, params["dtype"])
    stage, timings = "load", {}
    recompiles = RecompileLog()
    eager = {}  # measured before compiling: a compiled failure still reports it
    try:
        t0 = time.perf_counter()
        pipe = load(params, device, dtype)
        timings["load_s"] = time.perf_counter() - t0
        eager = eager_draw(pipe, params, rank is not None)  # before compiling: the pipeline as loaded

        stage = "compile"  # the first call traces and compiles the denoiser and the decoder
        clock = StepClock(device)
        denoiser = compile_pipeline(pipe, params["compile_backend"], clock)
        t0 = time.perf_counter()
        with recompiles:
            first = draw(pipe, params)
        timings["first_call_s"] = time.perf_counter() - t0

        stage = "run"
        clock.reset()
        t0 = time.perf_counter()
        image = draw(pipe, params)
        timings["image_s"] = time.perf_counter() - t0
        timings["generate_s"] = timings["image_s"]  # the row's column for the warm, compiled call
        timings["compile_s"] = max(timings["first_call_s"] - timings["image_s"], 0.0)
        timings["step_s"] = clock.step_s(params["steps"])
        return {
            "ok": True,
            "mode": "device",
            **image_payload(image),
            "image_png": png_base64(image),
            "warm_equals_cold": bool(torch.equal(first, image)),
            "pipeline": type(pipe).__name__,
            "denoiser": denoiser,
            "steps": params["steps"],
            "seed": params["seed"],
            "timings": timings,
            # seconds per warm denoising step, steps per second, seconds for one warm image
            "figures": {"step_s": timings["step_s"], "items_per_s": 1.0 / timings["step_s"],
                        "image_s": timings["image_s"]},
            "peak_memory_bytes": peak_memory_bytes(str(device)),
            "compile_cache": compile_cache_counters(params["compile_backend"]),
            "retraced": dynamo_traced(),
            "recompile_reasons": recompiles.reasons[-3:],
            "dynamo": dynamo_figures(recompiles, params["compile_backend"]),
            "eager": eager,
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
        }
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a classified result
        return failed(exc, stage, timings, recompile_reasons=recompiles.reasons[-3:], eager=eager,
                      dynamo=dynamo_figures(recompiles, params["compile_backend"], exc))


def pipeline_parameters(pipe):
    import torch

    return sum(p.numel() for m in pipe.components.values() if isinstance(m, torch.nn.Module) for p in m.parameters())


def eager_draw(pipe, params, sharded):
    """One image drawn eagerly on the device (the same seed and steps), after one warm-up draw as the compiled call
    has: seconds per image with nothing compiled, for the speed-up."""
    out = eager_seconds(params, sharded, pipeline_parameters(pipe), lambda: draw(pipe, params), warm_up=True)
    if "seconds" in out:
        out["eager_image_s"] = out.pop("seconds")
    return out


def eager_run(params):
    """`run.py --eager`: one image drawn on the device with nothing compiled, after a compiled run failed."""
    import torch

    return eager_only(lambda: load(params, params["device"], getattr(torch, params["dtype"])),
                      lambda pipe: draw(pipe, params))


def compile_pipeline(pipe, backend, clock):
    """Compile the denoiser (``unet`` or ``transformer``) and ``vae.decode`` in place; the clock stamps each
    denoiser call and the start of decoding. Returns the denoiser's name."""
    import torch

    name = denoiser_name(pipe)
    denoiser = torch.compile(getattr(pipe, name), backend=backend, fullgraph=True, dynamic=False,
                             options=compile_options(backend))
    denoiser.register_forward_pre_hook(clock.denoiser_called)  # runs outside the compiled graph
    setattr(pipe, name, denoiser)
    decode = torch.compile(pipe.vae.decode, backend=backend, fullgraph=True, dynamic=False, options=compile_options(backend))

    def timed_decode(*args, **kwargs):
        clock.decode_called()
        return decode(*args, **kwargs)

    pipe.vae.decode = timed_decode
    return name


def denoiser_name(pipe):
    """The pipeline's denoiser: a UNet (``unet``) or a diffusion transformer (``transformer``)."""
    for name in ("transformer", "unet"):
        if getattr(pipe, name, None) is not None:
            return name
    raise TypeError(f"{type(pipe).__name__} has neither a unet nor a transformer to compile")


def draw(pipe, params):
    """One image from the fixed prompt, seed, size and number of steps: (3, height, width) float32 in [0, 1] on the CPU."""
    import inspect

    import torch

    size = image_size(pipe, params)
    kwargs = {"prompt": params["prompt"], "num_inference_steps": params["steps"], "height": size, "width": size,
              # noise drawn on the CPU from the seed: the same latents on every device
              "generator": torch.Generator("cpu").manual_seed(params["seed"]), "output_type": "pt"}
    if "use_resolution_binning" in inspect.signature(pipe.__call__).parameters:
        kwargs["use_resolution_binning"] = False  # draw at exactly this size (a square native size is its own bin)
    images = pipe(**kwargs).images
    return images[0].float().cpu()


def image_size(pipe, params):
    """PARAMS["image_size"], else the checkpoint's native size: the denoiser's sample size times the VAE's scale."""
    if params["image_size"]:
        return params["image_size"]
    sample = getattr(pipe, "default_sample_size", None) or getattr(getattr(pipe, denoiser_name(pipe)).config, "sample_size")
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    return int(sample) * int(pipe.vae_scale_factor)


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device, dtype):
    """DiffusionPipeline.from_pretrained (the pipeline class named in model_index.json, every component in the run's
    dtype), moved to the device; no progress bars."""
    import diffusers

    pipe = diffusers.DiffusionPipeline.from_pretrained(params["model_path"], dtype=dtype, revision=params["revision"],
                                                       trust_remote_code=params["trust_remote_code"])
    pipe.to(str(device))
    pipe.set_progress_bar_config(disable=True)
    return pipe


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype, prompt, seed and size on CPU in eager mode: the image to match."""
    import torch

    try:
        pipe = load(params, "cpu", getattr(torch, params["dtype"]))
        image = draw(pipe, params)
        return {"ok": True, "mode": "reference", **image_payload(image), "image_png": png_base64(image)}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})


# ---- helpers -----------------------------------------------------------------------------------------------
class StepClock:
    """Stamps each denoiser call and the start of decoding: seconds per denoising step, whatever the pipeline."""

    def __init__(self, device):
        self.device = str(device)
        self.reset()

    def reset(self):
        self.calls, self.decoded = [], None

    def denoiser_called(self, module, args):
        self.calls.append(time.perf_counter())

    def decode_called(self):
        if self.decoded is None:
            synchronize(self.device)  # the steps queued on an accelerator have finished
            self.decoded = time.perf_counter()

    def step_s(self, steps):
        return (self.decoded - self.calls[0]) / steps


def synchronize(device):
    import torch

    if device.startswith("neuron"):
        torch.neuron.synchronize()
    elif device.startswith("cuda"):
        torch.cuda.synchronize()


def image_payload(image):
    """The exact pixel values (float32, little-endian, base64) with their shape and digest: what the check compares."""
    import array
    import base64
    import hashlib
    import sys

    values = array.array("f", image.flatten().tolist())
    if sys.byteorder != "little":
        values.byteswap()
    raw = values.tobytes()
    return {"image": base64.b64encode(raw).decode("ascii"), "image_shape": list(image.shape),
            "image_sha256": hashlib.sha256(raw).hexdigest()}


def png_base64(image):
    """The image as a PNG (8-bit RGB), base64: written with the standard library alone."""
    import base64
    import struct
    import zlib

    import torch

    pixels = (image.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).contiguous()
    height, width, _ = pixels.shape
    rows = b"".join(b"\x00" + bytes(pixels[y].flatten().tolist()) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode("ascii")
