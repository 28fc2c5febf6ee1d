"""Text-to-image twins whose denoiser is a diffusion transformer fed by CLIP, T5 or Gemma encoders: Stable
Diffusion 3 (with a controlnet), PixArt-alpha / -sigma, Sana, AuraFlow, FLUX (control, controlnet), Chroma,
Lumina / Lumina 2, CogView 3 / 4, Hunyuan-DiT. Each function returns the family's components by name."""

from __future__ import annotations

from neuronhelpers.twins.pipelines.parts import (
    IMAGE_SIZE,
    LATENT,
    TEXT,
    _clip,
    _decoder_lm,
    _flow,
    _flow_vae,
    _gemma2,
    _part,
    _parts,
    _t5,
    _vae,
    _vae8,
)
from neuronhelpers.twins.tokenizers import (
    bert_tokenizer,
    clip_tokenizer,
    gemma_tokenizer,
    glm_tokenizer,
    t5_tokenizer,
)


def _sd3_transformer_kwargs() -> dict:
    # joint attention: two CLIPs side by side (2 * TEXT) padded to the T5's width (2 * TEXT); pooled: both CLIPs
    return {"sample_size": LATENT, "patch_size": 2, "in_channels": 4, "out_channels": 4, "num_layers": 2,
            "attention_head_dim": 8, "num_attention_heads": 4, "caption_projection_dim": TEXT,
            "joint_attention_dim": 2 * TEXT, "pooled_projection_dim": 2 * TEXT, "pos_embed_max_size": LATENT // 2}


def stable_diffusion_3() -> dict:
    from diffusers import SD3Transformer2DModel

    clip, t5 = clip_tokenizer(), t5_tokenizer()
    return _parts(transformer=lambda: SD3Transformer2DModel(**_sd3_transformer_kwargs()), scheduler=_flow,
                  vae=_flow_vae, text_encoder=(_clip, clip, True), tokenizer=clip, text_encoder_2=(_clip, clip, True),
                  tokenizer_2=clip, text_encoder_3=(_t5, t5, 2 * TEXT), tokenizer_3=t5)


def stable_diffusion_3_controlnet() -> dict:
    from diffusers import SD3ControlNetModel

    kwargs = {k: v for k, v in _sd3_transformer_kwargs().items() if k != "sample_size"}
    return {**stable_diffusion_3(),
            "controlnet": _part("controlnet", SD3ControlNetModel, **{**kwargs, "num_layers": 1})}


def pixart_sigma() -> dict:
    """PixArt-Sigma's transformer (PixArt-alpha shares it: see SHARES)."""
    from diffusers import DPMSolverMultistepScheduler, PixArtTransformer2DModel

    tok = t5_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok), vae=_vae, scheduler=DPMSolverMultistepScheduler,
        transformer=lambda: PixArtTransformer2DModel(
            sample_size=LATENT, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=4,
            caption_channels=TEXT, in_channels=4, out_channels=8, cross_attention_dim=TEXT, attention_bias=True,
            activation_fn="gelu-approximate", num_embeds_ada_norm=1000, norm_type="ada_norm_single",
            norm_elementwise_affine=False, norm_eps=1e-6))


def sana() -> dict:
    from diffusers import AutoencoderDC, FlowMatchEulerDiscreteScheduler, SanaTransformer2DModel

    tok = gemma_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_gemma2, tok),
        scheduler=lambda: FlowMatchEulerDiscreteScheduler(shift=3.0),
        vae=lambda: AutoencoderDC(
            in_channels=3, latent_channels=4, attention_head_dim=2,
            encoder_block_types=("ResBlock", "EfficientViTBlock"),
            decoder_block_types=("ResBlock", "EfficientViTBlock"), encoder_block_out_channels=(8, 8),
            decoder_block_out_channels=(8, 8), encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
            encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1), downsample_block_type="conv",
            upsample_block_type="interpolate", decoder_norm_types="rms_norm", decoder_act_fns="silu",
            scaling_factor=0.41407),
        transformer=lambda: SanaTransformer2DModel(
            patch_size=1, in_channels=4, out_channels=4, num_layers=2, num_attention_heads=2, attention_head_dim=8,
            num_cross_attention_heads=2, cross_attention_head_dim=8, cross_attention_dim=16, caption_channels=TEXT,
            sample_size=LATENT))


def auraflow() -> dict:
    from diffusers import AuraFlowTransformer2DModel

    tok = t5_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok, TEXT, True), vae=_vae, scheduler=_flow,
        transformer=lambda: AuraFlowTransformer2DModel(
            sample_size=LATENT, patch_size=2, in_channels=4, num_mmdit_layers=1, num_single_dit_layers=1,
            attention_head_dim=8, num_attention_heads=4, caption_projection_dim=TEXT, joint_attention_dim=TEXT,
            out_channels=4, pos_embed_max_size=64))


def _flux_transformer(in_channels: int = 16, **extra):
    from diffusers import FluxTransformer2DModel

    # packed 2x2 patches of 4 latent channels; rope axes (4, 6, 6) make up the head width 16
    return FluxTransformer2DModel(**{"patch_size": 1, "in_channels": in_channels, "out_channels": 16,
                                     "num_layers": 1, "num_single_layers": 1, "attention_head_dim": 16,
                                     "num_attention_heads": 2, "joint_attention_dim": TEXT,
                                     "pooled_projection_dim": TEXT, "guidance_embeds": True,
                                     "axes_dims_rope": [4, 6, 6], **extra})


def flux() -> dict:
    clip, t5 = clip_tokenizer(), t5_tokenizer()
    return _parts(scheduler=_flow, vae=_flow_vae, text_encoder=(_clip, clip), tokenizer=clip,
                  text_encoder_2=(_t5, t5), tokenizer_2=t5, transformer=_flux_transformer)


def flux_control() -> dict:
    # the control image's packed latents are concatenated to the noise's: twice the input channels
    return {**flux(), "transformer": _part("transformer", _flux_transformer, 32)}


def flux_controlnet() -> dict:
    from diffusers import FluxControlNetModel

    return {**flux(), "controlnet": _part(
        "controlnet", FluxControlNetModel, patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=TEXT, pooled_projection_dim=TEXT,
        guidance_embeds=True, axes_dims_rope=[4, 6, 6])}


def chroma() -> dict:
    from diffusers import ChromaTransformer2DModel

    tok = t5_tokenizer()
    return _parts(
        scheduler=_flow, vae=_flow_vae, text_encoder=(_t5, tok), tokenizer=tok,
        transformer=lambda: ChromaTransformer2DModel(
            patch_size=1, in_channels=16, out_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=TEXT, axes_dims_rope=[4, 6, 6], approximator_hidden_dim=32,
            approximator_layers=1, approximator_num_channels=16))


def lumina2() -> dict:
    from diffusers import Lumina2Transformer2DModel

    tok = gemma_tokenizer()
    return _parts(
        scheduler=_flow, text_encoder=(_gemma2, tok), tokenizer=tok,
        # the pipeline fixes vae_scale_factor at 8: a VAE that upsamples 8 times, 4x4 latents
        vae=lambda: _vae8(use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035),
        transformer=lambda: Lumina2Transformer2DModel(
            sample_size=IMAGE_SIZE // 8, patch_size=2, in_channels=4, hidden_size=32, num_layers=2,
            num_refiner_layers=1,
            num_attention_heads=2, num_kv_heads=2, multiple_of=16, norm_eps=1e-5, scaling_factor=1.0,
            axes_dim_rope=[8, 4, 4], cap_feat_dim=TEXT))


def lumina() -> dict:
    from diffusers import LuminaNextDiT2DModel
    from transformers import GemmaConfig, GemmaForCausalLM

    tok = gemma_tokenizer()
    return _parts(
        scheduler=_flow, vae=_vae8, tokenizer=tok,  # the pipeline fixes vae_scale_factor at 8, as Lumina 2's
        text_encoder=lambda: _decoder_lm(GemmaForCausalLM, GemmaConfig, tok),
        transformer=lambda: _pad_token_zeroed(LuminaNextDiT2DModel(
            sample_size=IMAGE_SIZE // 8, patch_size=2, in_channels=4, hidden_size=32, num_layers=2,
            num_attention_heads=2,
            num_kv_heads=2, multiple_of=16, norm_eps=1e-5, learn_sigma=True, qk_norm=True, cross_attention_dim=TEXT,
            scaling_factor=1.0)))


def _pad_token_zeroed(transformer):
    """LuminaNextDiT2DModel allocates ``pad_token`` with torch.empty and never initialises it: it held whatever the
    allocator reused, so tiny/t2i-lumina was other files on every build (2026-12-07). Zeros, the same everywhere."""
    import torch

    with torch.no_grad():
        transformer.pad_token.zero_()
    return transformer


def cogview3() -> dict:
    from diffusers import CogVideoXDDIMScheduler, CogView3PlusTransformer2DModel

    tok = t5_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok), vae=_vae, scheduler=CogVideoXDDIMScheduler,
        transformer=lambda: CogView3PlusTransformer2DModel(
            patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=4, out_channels=4,
            text_embed_dim=TEXT, time_embed_dim=16, condition_dim=4, pos_embed_max_size=LATENT, sample_size=LATENT))


def _cogview4(in_channels: int) -> dict:
    from diffusers import CogView4Transformer2DModel, FlowMatchEulerDiscreteScheduler
    from transformers import GlmConfig, GlmModel

    tok = glm_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=lambda: _decoder_lm(GlmModel, GlmConfig, tok), vae=_vae,
        scheduler=lambda: FlowMatchEulerDiscreteScheduler(base_shift=0.25, max_shift=0.75, base_image_seq_len=256,
                                                          use_dynamic_shifting=True, time_shift_type="linear"),
        transformer=lambda: CogView4Transformer2DModel(
            patch_size=2, in_channels=in_channels, num_layers=2, attention_head_dim=8, num_attention_heads=4,
            out_channels=4, text_embed_dim=TEXT, time_embed_dim=16, condition_dim=4, sample_size=LATENT))


def cogview4() -> dict:
    return _cogview4(4)


def cogview4_control() -> dict:
    return _cogview4(8)  # the control image's latents are concatenated to the noise's


def hunyuan() -> dict:
    from diffusers import DDPMScheduler, HunyuanDiT2DModel

    bert, t5 = bert_tokenizer(77), t5_tokenizer()
    from transformers import BertConfig, BertModel

    # the pipeline sizes its rope grid by a VAE scale of 8: a VAE that upsamples 8 times (4x4 latents)
    vae = _part("vae", _vae, block_out_channels=(8, 8, 16, 16), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4)
    return _parts(
        vae=vae, scheduler=DDPMScheduler, tokenizer=bert, tokenizer_2=t5, text_encoder_2=(_t5, t5),
        text_encoder=lambda: BertModel(BertConfig(vocab_size=len(bert), hidden_size=TEXT, num_hidden_layers=2,
                                                  num_attention_heads=4, intermediate_size=2 * TEXT,
                                                  max_position_embeddings=128, pad_token_id=bert.pad_token_id)),
        transformer=lambda: HunyuanDiT2DModel(
            sample_size=IMAGE_SIZE // 8, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=3,
            in_channels=4, cross_attention_dim=TEXT, cross_attention_dim_t5=TEXT, pooled_projection_dim=16,
            hidden_size=24, activation_fn="gelu-approximate"))


