"""Tiny twins of every diffusers text-to-image pipeline family: the family's own pipeline class (the one
``AUTO_TEXT2IMAGE_PIPELINES_MAPPING`` maps its key to) around its own component classes, every dimension shrunk,
random weights from a fixed seed, tokenizers trained here (twins/tokenizers.py), saved with ``save_pretrained``.

The widths that must agree are linked through a few constants: every text encoder is ``TEXT`` wide (two CLIPs side
by side are ``2 * TEXT``), so a denoiser's cross / joint attention and caption widths are ``TEXT``; its input
channels are its VAE's latent channels (times four where a family packs 2x2 latent patches); rope axes add up to
the attention head width. Latent families draw ``IMAGE_SIZE`` pixels natively (denoiser ``sample_size`` 16 over
a VAE that upsamples twice, or a VAE whose ``sample_size`` is ``IMAGE_SIZE``: recorded in its config by
``_native_size`` where the VAE class has no such argument); the recipe's ``image_size`` reads those. Exceptions:
Kandinsky 3 (64 px: its pipeline fixes a MoVQ scale of 8) and Helios' pyramid (128 px: three pyramid stages).

    specs.pipeline_families()   AutoPipeline key -> pipeline class name, from the installed mapping
    parts.py                    the linked widths, one component built or refused, text encoders, VAEs, schedulers
    unet_families.py, dit_families.py, lm_encoder_families.py   one builder per family (BUILDERS)
    SHARES                      families whose twin is another family's components in their own pipeline class
    write_pipeline_twin(key, folder)

A family that cannot be built raises an exception whose one-line message names the component and why.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

from neuronhelpers.twins.pipelines import dit_families, lm_encoder_families, unet_families
from neuronhelpers.twins.pipelines.parts import IMAGE_SIZE, _one_line  # noqa: F401 - IMAGE_SIZE read by libraries.py
from neuronhelpers.twins.specs import SEED, pipeline_families

# A family whose twin is its base family's components inside its own pipeline class (the PAG variants add
# perturbed-attention guidance to the same denoiser; kontext conditions flux's own transformer on an input image;
# PixArt-alpha's transformer differs from PixArt-Sigma's only in the resolution micro-conditions of its 1024
# checkpoints, which its pipeline passes only at their 128-latent size, far beyond a twin's).
SHARES = {
    "stable-diffusion-pag": "stable-diffusion",
    "stable-diffusion-xl-pag": "stable-diffusion-xl",
    "stable-diffusion-3-pag": "stable-diffusion-3",
    "stable-diffusion-controlnet-pag": "stable-diffusion-controlnet",
    "stable-diffusion-xl-controlnet-pag": "stable-diffusion-xl-controlnet",
    "pixart-sigma-pag": "pixart-sigma",
    "sana-pag": "sana",
    "hunyuan-pag": "hunyuan",
    "flux-kontext": "flux",
    "pixart-alpha": "pixart-sigma",
}


# Families with no builder yet, and why (one line each).
# Families diffusers registers only when an optional package is installed: the package each needs.
NEEDS = {"kolors": "sentencepiece", "kolors-pag": "sentencepiece"}
NOT_BUILT = {
    "kolors": "component 'text_encoder' (diffusers' ChatGLMModel) with its sentencepiece ChatGLMTokenizer: no tiny "
              "builder yet",
    "kolors-pag": "the Kolors twin with perturbed-attention guidance: no tiny builder yet (kolors has none)",
    "glm_image": "component 'vision_language_encoder' (GlmImageForConditionalGeneration): no tiny builder yet (an "
                 "autoregressive GLM-Image model that first generates the prior's image tokens, with its own "
                 "GlmImageProcessor and vision-token vocabulary)",
}


def write_pipeline_twin(key: str, folder: Path) -> None:
    """Build the tiny pipeline of family ``key`` (torch.manual_seed(SEED)) and save it into ``folder``."""
    import diffusers
    import torch

    names = pipeline_families()
    if key not in names:
        raise KeyError(f"'{key}' is not a text-to-image family of diffusers {diffusers.__version__}")
    base = SHARES.get(key, key)
    if base in NEEDS and importlib.util.find_spec(NEEDS[base]) is None:  # the package first, as for every family
        raise ImportError(f"{names[key]} requires the {NEEDS[base]} library but it was not found in your environment")
    if base in NOT_BUILT:
        raise NotImplementedError(NOT_BUILT[base])
    if base not in BUILDERS:
        raise NotImplementedError(f"no twin builder for family '{key}' ({names[key]})")
    cls = getattr(diffusers, names[key])
    torch.manual_seed(SEED)
    components = BUILDERS[base]()
    _live_control_outputs(components)
    pipe = _pipeline(cls, components)
    _check_loadable(pipe)
    pipe.save_pretrained(str(folder))


def _live_control_outputs(components: dict) -> None:
    """A controlnet's output projections are zero-initialised (so training starts from the base model): kept at
    zero, the control path adds exactly nothing and the check never sees its numbers. Every all-zero weight matrix
    of a controlnet is drawn at 1/sqrt(fan-in) instead."""
    import math

    import torch

    with torch.no_grad():
        for name, component in components.items():
            if "controlnet" not in name or not isinstance(component, torch.nn.Module):
                continue
            for weight in component.parameters():
                if weight.ndim >= 2 and not weight.any():
                    weight.normal_(0.0, 1.0 / math.sqrt(weight[0].numel()))


def parameter_count(pipe) -> int:
    """Parameters over every torch.nn.Module component of a pipeline."""
    import torch

    return sum(p.numel() for c in pipe.components.values() if isinstance(c, torch.nn.Module) for p in c.parameters())


# ---- assembling --------------------------------------------------------------------------------------------

def _pipeline(cls, components: dict):
    """The pipeline class around ``components``; every other argument it takes that may be None (safety checker,
    feature extractor, image encoder, watermarker) is None; flags that would want those are off."""
    params = inspect.signature(cls.__init__).parameters
    kwargs = {name: value for name, value in components.items() if name in params}
    for name, param in params.items():
        if name == "self" or name in kwargs or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        if param.default is inspect.Parameter.empty:
            kwargs[name] = None
    if "requires_safety_checker" in params:
        kwargs["requires_safety_checker"] = False
    if "add_watermarker" in params:
        kwargs["add_watermarker"] = False
    try:
        return cls(**kwargs)
    except Exception as exc:
        raise ValueError(f"pipeline {cls.__name__}: {_one_line(exc)}") from exc


def _check_loadable(pipe) -> None:
    """Every component is saved as (library, class name); refuse a twin whose class from_pretrained cannot find
    there (diffusers' deprecated modules: Wuerstchen's PaellaVQModel, WuerstchenPrior, WuerstchenDiffNeXt)."""
    for name, value in pipe.config.items():
        if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            continue
        library, class_name = value
        found = False
        # a library is a package, or one of diffusers' pipeline modules (["kandinsky", "MultilingualCLIP"])
        for module in (library, f"diffusers.pipelines.{library}"):
            try:
                found = found or hasattr(importlib.import_module(module), class_name)
            except ImportError:  # not that module: the other spelling may hold it
                pass
        if not found:
            raise ValueError(f"component '{name}' ({class_name}): saved as ['{library}', '{class_name}'], which "
                             f"DiffusionPipeline.from_pretrained cannot load back ({library} has no {class_name}; "
                             f"the class lives in {type(getattr(pipe, name)).__module__})")




# The family's builder: its components by name (SHARES point a family at another's).
BUILDERS = {
    "helios-pyramid": lm_encoder_families.helios_pyramid,
    "helios": lm_encoder_families.helios,
    "ideogram4": lm_encoder_families.ideogram4,
    "flux2": lm_encoder_families.flux2,
    "z-image-omni": lm_encoder_families.z_image_omni,
    "qwenimage21": lm_encoder_families.qwenimage21,
    "nucleusmoe-image": lm_encoder_families.nucleusmoe_image,
    "krea2": lm_encoder_families.krea2,
    "qwenimage": lm_encoder_families.qwenimage,
    "qwenimage-controlnet": lm_encoder_families.qwenimage_controlnet,
    "z-image": lm_encoder_families.z_image,
    "z-image-controlnet": lm_encoder_families.z_image_controlnet,
    "z-image-controlnet-inpaint": lm_encoder_families.z_image_controlnet_inpaint,
    "ovis": lm_encoder_families.ovis,
    "prx": lm_encoder_families.prx,
    "flux2-klein": lm_encoder_families.flux2_klein,
    "kandinsky": unet_families.kandinsky,
    "kandinsky22": unet_families.kandinsky22,
    "wuerstchen": unet_families.wuerstchen,
    "cascade": unet_families.cascade,
    "stable-diffusion": unet_families.stable_diffusion,
    "stable-diffusion-controlnet": unet_families.stable_diffusion_controlnet,
    "lcm": unet_families.lcm,
    "stable-diffusion-xl": unet_families.stable_diffusion_xl,
    "stable-diffusion-xl-controlnet": unet_families.stable_diffusion_xl_controlnet,
    "stable-diffusion-xl-controlnet-union": unet_families.stable_diffusion_xl_controlnet_union,
    "stable-diffusion-3": dit_families.stable_diffusion_3,
    "stable-diffusion-3-controlnet": dit_families.stable_diffusion_3_controlnet,
    "pixart-sigma": dit_families.pixart_sigma,
    "sana": dit_families.sana,
    "auraflow": dit_families.auraflow,
    "flux": dit_families.flux,
    "flux-control": dit_families.flux_control,
    "flux-controlnet": dit_families.flux_controlnet,
    "chroma": dit_families.chroma,
    "lumina": dit_families.lumina,
    "lumina2": dit_families.lumina2,
    "cogview3": dit_families.cogview3,
    "cogview4": dit_families.cogview4,
    "cogview4-control": dit_families.cogview4_control,
    "hunyuan": dit_families.hunyuan,
    "kandinsky3": unet_families.kandinsky3,
    "if": unet_families.deepfloyd_if,
}
