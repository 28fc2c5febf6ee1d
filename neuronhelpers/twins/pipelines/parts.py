"""The parts every text-to-image twin is assembled from: the linked widths (``TEXT``, ``IMAGE_SIZE``, ...), a
component built or refused in one line naming it (``_part``, ``_parts``), text encoders, autoencoders and
schedulers."""

from __future__ import annotations

import inspect

IMAGE_SIZE = 32  # pixels a latent twin draws natively
PIXEL_SIZE = 32  # pixels of a pixel-space twin (DeepFloyd IF)
LATENT = IMAGE_SIZE // 2  # latent side under a VAE that upsamples twice
TEXT = 32  # every text encoder's hidden width


# ---- building one component ----------------------------------------------------------------------------

def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def _part(name: str, build, *args, **kwargs):
    """One component built, or a one-line error that names it and its class."""
    try:
        return build(*args, **kwargs)
    except Exception as exc:
        cls = getattr(build, "__name__", str(build))
        raise ValueError(f"component '{name}' ({cls}): {_one_line(exc)}") from exc


def _parts(**builders) -> dict:
    """``name=(builder, args...)`` -> {name: component}, each built through _part in order."""
    out = {}
    for name, spec in builders.items():
        if _builder(spec):
            out[name] = _part(name, spec)
        elif isinstance(spec, tuple) and spec and _builder(spec[0]):
            out[name] = _part(name, spec[0], *spec[1:])
        else:
            out[name] = spec
    return out


def _builder(spec) -> bool:
    """A function or a class (a tokenizer instance is callable too, but is a component already)."""
    return isinstance(spec, type) or inspect.isfunction(spec)


# ---- text encoders -----------------------------------------------------------------------------------------

def _clip(tok, projection: bool = False, hidden: int = TEXT):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                            num_attention_heads=4, projection_dim=hidden, max_position_embeddings=77,
                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(config)


def _t5(tok, width: int = TEXT, umt5: bool = False):
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

    config_cls, model_cls = (UMT5Config, UMT5EncoderModel) if umt5 else (T5Config, T5EncoderModel)
    config = config_cls(vocab_size=len(tok), d_model=width, d_kv=8, d_ff=2 * width, num_layers=2, num_heads=width // 8,
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                        decoder_start_token_id=tok.pad_token_id)
    return model_cls(config)


def _decoder_lm(model_cls, config_cls, tok, **extra):
    """A decoder-only language model as a text encoder (Gemma, Glm, Qwen3, ...): two layers, TEXT wide."""
    config = config_cls(**{"vocab_size": len(tok), "hidden_size": TEXT, "intermediate_size": 2 * TEXT,
                           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "head_dim": TEXT // 4, "max_position_embeddings": 1024,
                           "pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id,
                           "eos_token_id": tok.eos_token_id, **extra})
    return model_cls(config)


def _gemma2(tok):
    from transformers import Gemma2Config, Gemma2Model

    return _decoder_lm(Gemma2Model, Gemma2Config, tok, sliding_window=64)


# ---- autoencoders ------------------------------------------------------------------------------------------

def _vae(latent: int = 4, **extra):
    """An AutoencoderKL that upsamples latents twice (vae_scale_factor 2): 16x16 latents -> 32x32 RGB."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(**{"block_out_channels": (8, 16), "in_channels": 3, "out_channels": 3,
                            "latent_channels": latent, "down_block_types": ("DownEncoderBlock2D",) * 2,
                            "up_block_types": ("UpDecoderBlock2D",) * 2, "layers_per_block": 1,
                            "norm_num_groups": 8, "sample_size": IMAGE_SIZE, **extra})


def _vae8(latent: int = 4, **extra):
    """An AutoencoderKL that upsamples 8 times, for pipelines that fix vae_scale_factor at 8 whatever the VAE (Lumina,
    Lumina 2): 4x4 latents -> 32x32 RGB."""
    return _vae(latent, **{"block_out_channels": (8, 8, 8, 8), "down_block_types": ("DownEncoderBlock2D",) * 4,
                           "up_block_types": ("UpDecoderBlock2D",) * 4, **extra})


def _flow_vae(latent: int = 4):
    """The flow families' AutoencoderKL: no quant convs, a shift and scale of the latents."""
    return _vae(latent, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035)


def _qwen_vae():
    """AutoencoderKLQwenImage (a causal 3D VAE run on one frame): 4 latent channels, upsampling 4 times."""
    from diffusers import AutoencoderKLQwenImage

    vae = AutoencoderKLQwenImage(base_dim=16, z_dim=4, dim_mult=[1, 2, 2], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    return _native_size(vae)


def _native_size(vae, size: int = IMAGE_SIZE):
    """The twin's native image size recorded as the VAE's ``sample_size`` (where the recipe reads a decoder's native
    size), for a VAE class that has no such argument: its pipeline would otherwise draw at its full-size default
    (1024 px or more). Saved in config.json and kept on loading (diffusers warns that the class does not take it)."""
    if "sample_size" not in vae.config:
        vae.register_to_config(sample_size=size)
    return vae


def _movq(levels: int = 2, size: int = IMAGE_SIZE):
    """A VQModel (Kandinsky's MoVQ) that upsamples 2 ** (levels - 1) times, attention at the lowest resolution."""
    from diffusers import VQModel

    # (its spatial norms group channels by 32)
    return VQModel(block_out_channels=(32,) * levels,
                   down_block_types=("DownEncoderBlock2D",) * (levels - 1) + ("AttnDownEncoderBlock2D",),
                   up_block_types=("AttnUpDecoderBlock2D",) + ("UpDecoderBlock2D",) * (levels - 1),
                   in_channels=3, latent_channels=4, layers_per_block=1, norm_num_groups=8, norm_type="spatial",
                   num_vq_embeddings=12, out_channels=3, vq_embed_dim=4, sample_size=size)


# ---- schedulers --------------------------------------------------------------------------------------------

def _sd_scheduler():
    """Stable Diffusion 1.x's own PNDM settings."""
    from diffusers import PNDMScheduler

    return PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True,
                         set_alpha_to_one=False, steps_offset=1)


def _flow():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler()


