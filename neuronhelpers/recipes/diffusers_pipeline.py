"""run.py: does this diffusers pipeline run unmodified under torch.compile? (neuronhelpers recipe)

Top-down: the parameters, main, then the device run, the whole recipe: from_pretrained, the denoiser (UNet or
transformer) and the VAE decoder compiled with torch.compile(fullgraph=True, dynamic=False) and the backend's
compiler, one image drawn from a fixed prompt, seed (a CPU generator: the same latents on every device), size and
steps twice (cold, then warm; compile_s is cold minus warm), and one JSON line with the image (a PNG, and the exact
pixels the check compares), timings and peak device memory. Needs only torch, diffusers and requirements.txt.

    python3 run.py               # the device run
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype, prompt, seed and size, no compile

Rendered by neuronhelpers.recipes.render from neuronhelpers/recipes/: edit those, never a rendered copy.
"""

# The recipe's own imports, for the package (its tests and the twins call its functions); run.py has one imports
# section, the scaffold's, so the renderer takes this file's docstring and sections, not these lines.
import time

from .scaffold import compile_options, failed, peak_memory_bytes

# ---- the recipe --------------------------------------------------------------------------------------------
# What the measuring (neuronhelpers/run/measure.py) may read or wrap, and only that: rename on both sides.
MEASURED = ("PARAMS", "main", "emit", "failed", "pin_neuron_contract", "device_run", "draw", "load",
            "compile_pipeline", "resolve", "denoiser_name", "image_payload", "image_decoder", "rank_main")


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
    """Compile every denoiser of the pipeline (its UNet or transformer, a prior, a decoder, a controlnet, ...; those
    of a combined pipeline's stages too) and its image decoder's ``decode`` (``vae``, ``movq`` or ``vqgan``; a
    pixel-space pipeline has none): the main denoiser (``denoiser_name``) wrapped, the others in place. Returns the
    compiled denoisers' names, comma-joined, the main one first."""
    import torch

    names = denoisers(pipe)
    parent, _, attr = names[0].rpartition(".")
    owner = resolve(pipe, parent)
    setattr(owner, attr, torch.compile(getattr(owner, attr), backend=backend, fullgraph=True, dynamic=False,
                                       options=compile_options(backend)))  # the main one, wrapped
    for name in names[1:]:
        # the others compiled in place: they keep their class, which pipelines check (isinstance(self.controlnet,
        # SD3ControlNetModel)); a wrapper would read as a multi-controlnet
        resolve(pipe, name).compile(backend=backend, fullgraph=True, dynamic=False, options=compile_options(backend))
    decoder = image_decoder(pipe)
    if decoder is not None:
        module = resolve(pipe, decoder)
        module.decode = torch.compile(module.decode, backend=backend, fullgraph=True, dynamic=False,
                                      options=compile_options(backend))
    return ",".join(names)


DENOISERS = ("transformer", "unet", "decoder", "prior", "controlnet", "unconditional_transformer")


def stages(pipe):
    """(attribute path, pipeline) of each stage in turn: a combined pipeline's (prior first), else the pipeline's."""
    import diffusers

    inner = [(name, value) for name, value in vars(pipe).items() if isinstance(value, diffusers.DiffusionPipeline)]
    inner.sort(key=lambda item: not item[0].startswith("prior"))  # the prior runs first
    return [(f"{name}.", value) for name, value in inner] or [("", pipe)]


def denoisers(pipe):
    """Every stage's denoisers (modules called once per step) by attribute path, the main one first, then in order."""
    import torch

    found = []
    for prefix, stage in stages(pipe):
        found += [prefix + name for name in DENOISERS if isinstance(getattr(stage, name, None), torch.nn.Module)]
    if not found:
        raise TypeError(f"{type(pipe).__name__} has no denoiser to compile (none of {', '.join(DENOISERS)})")
    main = denoiser_name(pipe)
    return [main] + [name for name in found if name != main]


def denoiser_name(pipe):
    """The final stage's main denoiser, by attribute path: a diffusion transformer, a UNet or a decoder."""
    import torch

    prefix, stage = stages(pipe)[-1]
    for name in ("transformer", "unet", "decoder", "prior"):
        if isinstance(getattr(stage, name, None), torch.nn.Module):
            return prefix + name
    raise TypeError(f"{type(pipe).__name__} has neither a unet nor a transformer to compile")


def image_decoder(pipe):
    """The path of the module whose ``decode`` makes the pixels (``vae``, ``movq``, ``vqgan``); None in pixel space."""
    prefix, stage = stages(pipe)[-1]
    for name in ("vae", "movq", "vqgan"):
        if hasattr(getattr(stage, name, None), "decode"):
            return prefix + name
    return None


def resolve(pipe, path):
    """The object at an attribute path (``decoder_pipe.unet``; "" is the pipeline itself)."""
    for name in filter(None, path.split(".")):
        pipe = getattr(pipe, name)
    return pipe


def draw(pipe, params):
    """One image, (3, h, w) float32 in [0, 1] on the CPU, from the fixed inputs: those the pipeline's __call__ takes."""
    import inspect

    import torch

    size = image_size(pipe, params)
    accepted = inspect.signature(pipe.__call__).parameters
    kwargs = {"prompt": params["prompt"], "num_inference_steps": params["steps"], "height": size, "width": size,
              "prior_num_inference_steps": params["steps"],  # a combined pipeline's prior stage
              # noise drawn on the CPU from the seed: the same latents on every device
              "generator": torch.Generator("cpu").manual_seed(params["seed"]),
              # "np": every pipeline maps it to [0, 1] (some leave "pt" in [-1, 1]: DeepFloyd IF, Kandinsky)
              "output_type": "np",
              "use_resolution_binning": False,  # draw at exactly this size (a square native size is its own bin)
              "max_area": size * size,  # flux kontext rescales to this area
              "_auto_resize": False,  # and would resize its input image to a 1024-pixel preferred resolution
              "num_frames": 1}  # a video pipeline draws the fewest frames it can
    pyramid = accepted.get("pyramid_num_inference_steps_list")
    if pyramid is not None and isinstance(pyramid.default, (list, tuple)):
        kwargs["pyramid_num_inference_steps_list"] = [params["steps"]] * len(pyramid.default)  # steps per stage
    kwargs = {name: value for name, value in kwargs.items() if name in accepted}
    schedule, steps = accepted.get("guidance_schedule"), params["steps"]
    if schedule is not None and isinstance(schedule.default, (list, tuple)) and len(schedule.default) != steps:
        # a default per-step guidance schedule made for the checkpoint's number of steps (Ideogram 4), resampled
        default = schedule.default
        kwargs["guidance_schedule"] = [default[i * len(default) // steps] for i in range(steps)]
    kwargs.update(control_inputs(pipe, accepted, size, params["seed"]))
    # some pipelines also draw from torch's global generator, not the one passed (CogView4 Control samples its
    # control image's latents): seeded too, so every call (cold, warm, reference) draws the same numbers
    torch.manual_seed(params["seed"])
    output = pipe(**kwargs)
    if hasattr(output, "images"):
        return as_chw(output.images[0])
    return as_chw(output.frames[0][0])  # a video pipeline (Helios): its first frame


def control_inputs(pipe, accepted, size, seed):
    """A control (or FLUX Kontext editing) pipeline's input image: uniform noise from the seed, the same on every
    device, and for an inpainting one a mask of the image's right half; nothing for other pipelines."""
    import torch

    name = type(pipe).__name__
    if "Control" not in name and "Kontext" not in name:
        return {}
    generator = torch.Generator("cpu").manual_seed(seed)
    image = torch.rand(1, 3, size, size, generator=generator)
    kwargs = {}
    for key in ("control_image", "image"):  # the controlnet pipelines of Stable Diffusion call it ``image``
        if key in accepted:
            kwargs[key] = image
            break
    if "Union" in name and "control_mode" in accepted:
        kwargs["control_mode"] = 0  # a union controlnet's first kind of control
    if "Inpaint" in name and "mask_image" in accepted:
        mask = torch.zeros(1, 1, size, size)
        mask[..., size // 2:] = 1.0
        kwargs["mask_image"] = mask
        if "image" in accepted and "control_image" in kwargs:
            kwargs["image"] = image
    return kwargs


def as_chw(image):
    """A pipeline's image (an (h, w, c) array, a PIL image or a (c, h, w) tensor) as (3, h, w) float32 on the CPU."""
    import torch

    if hasattr(image, "tobytes") and hasattr(image, "mode"):  # a PIL image: 8-bit channels
        width, height = image.size
        pixels = torch.frombuffer(bytearray(image.convert("RGB").tobytes()), dtype=torch.uint8)
        image = (pixels.view(height, width, 3).float() / 255.0).permute(2, 0, 1)
    elif not isinstance(image, torch.Tensor):  # output_type="np": (height, width, channels) floats in [0, 1]
        image = torch.as_tensor(image).permute(2, 0, 1)
    return image[:3].float().cpu()  # RGB (a pipeline that draws RGBA, QwenImage 2.1, loses the alpha)


def image_size(pipe, params):
    """PARAMS["image_size"], else the native size: the final denoiser's sample size times the decoder's scale, else the
    decoder's sample size, else the pipeline's default sample size times the scale, else __call__'s default height."""
    import inspect

    if params["image_size"]:
        return params["image_size"]
    _, stage = stages(pipe)[-1]
    scale = int(getattr(stage, "vae_scale_factor", None) or getattr(stage, "movq_scale_factor", None) or 1)
    denoiser = getattr(getattr(resolve(pipe, denoiser_name(pipe)), "config", None), "sample_size", None)
    decoder = image_decoder(pipe)
    decoder = getattr(getattr(resolve(pipe, decoder), "config", None), "sample_size", None) if decoder else None
    for sample, times in ((denoiser, scale), (decoder, 1), (getattr(stage, "default_sample_size", None), scale)):
        sample = sample[0] if isinstance(sample, (list, tuple)) else sample
        if isinstance(sample, int) and sample > 0:
            return sample * times
    default = inspect.signature(pipe.__call__).parameters.get("height")
    if default is not None and isinstance(default.default, int):
        return default.default
    raise TypeError(f"{type(pipe).__name__}: no native image size; set PARAMS['image_size']")


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
    """The image as a PNG (8-bit RGB), base64."""
    import base64
    import io

    import torch
    from PIL import Image  # diffusers' own dependency

    pixels = (image.clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).contiguous()
    png = io.BytesIO()
    Image.fromarray(pixels.numpy(), "RGB").save(png, format="PNG")
    return base64.b64encode(png.getvalue()).decode("ascii")
