"""run.py: does this diffusers pipeline run unmodified under torch.compile? (neuronhelpers recipe)

Self-contained: it needs only torch, diffusers (with the transformers its text encoders come from) and the
packages in requirements.txt. Read it top-down: the parameters, main, then the device run, which is the whole
recipe: load the pipeline with from_pretrained, compile its denoiser (UNet or transformer) and its VAE decoder
with torch.compile(fullgraph=True, dynamic=False) and the backend's compiler (neuron on Trainium), draw one
image from a fixed prompt, seed, size and number of steps twice (cold, then warm and timed), and print one JSON
line with the image (a PNG, and the exact pixel values the check compares), timings and peak device memory.
compile_s is the cold call's time minus the warm one's.

The starting noise comes from a CPU generator seeded with PARAMS["seed"], so every device and the reference
start from the same latents.

    python3 run.py               # the device run
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype, prompt, seed and size, no compile

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/: edit those, never a rendered copy.
"""

import time  # render: drop

from .scaffold import compile_options, failed, peak_memory_bytes  # render: drop


# ---- the recipe --------------------------------------------------------------------------------------------
def device_run(params, rank=None):
    """Load on the device, compile the denoiser and the VAE decoder, draw one image cold and then warm."""
    import torch

    device = params["device"]
    stage, timings = "load", {}
    try:
        t0 = time.perf_counter()
        pipe = load(params, device)
        timings["load_s"] = time.perf_counter() - t0

        stage = "compile"  # the cold call traces the denoiser and the decoder and compiles them
        denoiser = compile_pipeline(pipe, params["compile_backend"])
        t0 = time.perf_counter()
        cold = draw(pipe, params)
        timings["first_call_s"] = time.perf_counter() - t0

        stage = "run"  # the warm call runs the compiled graphs
        t0 = time.perf_counter()
        image = draw(pipe, params)
        timings["generate_s"] = time.perf_counter() - t0  # the row's column for the warm, compiled call
        timings["compile_s"] = max(timings["first_call_s"] - timings["generate_s"], 0.0)
        return {"ok": True, "mode": "device", **image_payload(image), "image_png": png_base64(image),
                "warm_equals_cold": bool(torch.equal(cold, image)), "pipeline": type(pipe).__name__,
                "denoiser": denoiser, "steps": params["steps"], "seed": params["seed"], "timings": timings,
                "peak_memory_bytes": peak_memory_bytes(device)}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a result with its stage
        return failed(exc, stage, timings)


def compile_pipeline(pipe, backend):
    """Compile the denoiser (``unet`` or ``transformer``) and ``vae.decode`` in place; returns the denoiser's name."""
    import torch

    name = denoiser_name(pipe)
    setattr(pipe, name, torch.compile(getattr(pipe, name), backend=backend, fullgraph=True, dynamic=False,
                                      options=compile_options(backend)))
    pipe.vae.decode = torch.compile(pipe.vae.decode, backend=backend, fullgraph=True, dynamic=False,
                                    options=compile_options(backend))
    return name


def denoiser_name(pipe):
    """The pipeline's denoiser: a UNet (``unet``) or a diffusion transformer (``transformer``)."""
    for name in ("transformer", "unet"):
        if getattr(pipe, name, None) is not None:
            return name
    raise TypeError(f"{type(pipe).__name__} has neither a unet nor a transformer to compile")


def draw(pipe, params):
    """One image from the fixed prompt, seed, size and number of steps: (3, height, width) float32 in [0, 1], on the
    CPU."""
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
    sample = getattr(pipe, "default_sample_size", None) or getattr(pipe, denoiser_name(pipe)).config.sample_size
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    return int(sample) * int(pipe.vae_scale_factor)


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device):
    """DiffusionPipeline.from_pretrained (the pipeline class named in model_index.json, every component in the run's
    dtype), moved to the device; no progress bars."""
    import diffusers
    import torch

    pipe = diffusers.DiffusionPipeline.from_pretrained(params["model_path"], dtype=getattr(torch, params["dtype"]),
                                                       revision=params["revision"],
                                                       trust_remote_code=params["trust_remote_code"])
    pipe.to(str(device))
    pipe.set_progress_bar_config(disable=True)
    return pipe


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype, prompt, seed and size on CPU in eager mode: the image to match."""

    try:
        pipe = load(params, "cpu")
        image = draw(pipe, params)
        return {"ok": True, "mode": "reference", **image_payload(image), "image_png": png_base64(image)}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})


# ---- helpers -----------------------------------------------------------------------------------------------
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
