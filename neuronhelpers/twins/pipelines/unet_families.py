"""Text-to-image twins whose denoiser is a UNet: Stable Diffusion 1.x / XL (with controlnets), LCM, DeepFloyd IF
(pixel space), Kandinsky 2.x (an unCLIP prior, then a MoVQ decoder), Kandinsky 3, Wuerstchen and Stable Cascade.
Each function returns the family's components by name (see the package's docstring for the linked widths)."""

from __future__ import annotations

from neuronhelpers.twins.pipelines.parts import (
    IMAGE_SIZE,
    LATENT,
    PIXEL_SIZE,
    TEXT,
    _clip,
    _movq,
    _part,
    _parts,
    _sd_scheduler,
    _t5,
    _vae,
)
from neuronhelpers.twins.tokenizers import (
    clip_tokenizer,
    t5_tokenizer,
    xlm_roberta_tokenizer,
)


def _sd_unet_kwargs(cross: int = TEXT, **extra) -> dict:
    return {"sample_size": LATENT, "in_channels": 4, "out_channels": 4, "layers_per_block": 1,
            "block_out_channels": (16, 32), "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D"),
            "up_block_types": ("CrossAttnUpBlock2D", "UpBlock2D"), "cross_attention_dim": cross,
            "attention_head_dim": 8, "norm_num_groups": 8, **extra}


def _controlnet_kwargs(unet_kwargs: dict) -> dict:
    drop = ("sample_size", "out_channels", "up_block_types", "time_cond_proj_dim")
    kwargs = {k: v for k, v in unet_kwargs.items() if k not in drop}
    return {**kwargs, "conditioning_embedding_out_channels": (8, 16)}  # the control image downsampled twice


def stable_diffusion() -> dict:
    from diffusers import UNet2DConditionModel

    tok = clip_tokenizer()
    return _parts(vae=_vae, text_encoder=(_clip, tok), tokenizer=tok, scheduler=_sd_scheduler,
                  unet=lambda: UNet2DConditionModel(**_sd_unet_kwargs()))


def stable_diffusion_controlnet() -> dict:
    from diffusers import ControlNetModel

    parts = stable_diffusion()
    parts["controlnet"] = _part("controlnet", ControlNetModel, **_controlnet_kwargs(_sd_unet_kwargs()))
    return parts


def lcm() -> dict:
    from diffusers import LCMScheduler, UNet2DConditionModel

    tok = clip_tokenizer()
    return _parts(vae=_vae, text_encoder=(_clip, tok), tokenizer=tok, scheduler=LCMScheduler,
                  unet=lambda: UNet2DConditionModel(**_sd_unet_kwargs(time_cond_proj_dim=TEXT)))


def _sdxl_unet_kwargs() -> dict:
    # the added time embedding: 6 size / crop numbers of addition_time_embed_dim each, and the pooled text (TEXT)
    return _sd_unet_kwargs(cross=2 * TEXT, use_linear_projection=True, addition_embed_type="text_time",
                           addition_time_embed_dim=8, projection_class_embeddings_input_dim=6 * 8 + TEXT,
                           transformer_layers_per_block=(1, 1))


def _sdxl_base() -> dict:
    from diffusers import EulerDiscreteScheduler

    tok = clip_tokenizer()
    return _parts(vae=_vae, text_encoder=(_clip, tok), text_encoder_2=(_clip, tok, True), tokenizer=tok,
                  tokenizer_2=tok,
                  scheduler=lambda: EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                                           beta_schedule="scaled_linear", timestep_spacing="leading"))


def stable_diffusion_xl() -> dict:
    from diffusers import UNet2DConditionModel

    return {**_sdxl_base(), "unet": _part("unet", UNet2DConditionModel, **_sdxl_unet_kwargs())}


def stable_diffusion_xl_controlnet() -> dict:
    from diffusers import ControlNetModel

    return {**stable_diffusion_xl(),
            "controlnet": _part("controlnet", ControlNetModel, **_controlnet_kwargs(_sdxl_unet_kwargs()))}


def stable_diffusion_xl_controlnet_union() -> dict:
    from diffusers import ControlNetUnionModel

    kwargs = _controlnet_kwargs(_sdxl_unet_kwargs())
    return {**stable_diffusion_xl(),
            "controlnet": _part("controlnet", ControlNetUnionModel, **kwargs, num_control_type=6,
                                num_trans_channel=16, num_trans_head=2, num_trans_layer=1, num_proj_channel=16)}



def kandinsky3() -> dict:
    from diffusers import DDPMScheduler, Kandinsky3UNet

    tok = t5_tokenizer()
    # the pipeline sizes latents by a MoVQ scale of 8 (ceil(size / 64) * 8): a MoVQ that upsamples 8 times, 64 px
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok), movq=(_movq, 4, 64),
        scheduler=lambda: DDPMScheduler(beta_start=0.00085, beta_end=0.012, steps_offset=1,
                                        beta_schedule="squaredcos_cap_v2", clip_sample=True, thresholding=False),
        # (the text pooled into the time embedding: cross_attention_dim == time_embedding_dim)
        unet=lambda: Kandinsky3UNet(in_channels=4, time_embedding_dim=16, groups=4, attention_head_dim=8,
                                    layers_per_block=2, block_out_channels=(32, 64), cross_attention_dim=16,
                                    encoder_hid_dim=TEXT))


def deepfloyd_if() -> dict:
    from diffusers import DDPMScheduler, UNet2DConditionModel

    tok = t5_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok),
        scheduler=lambda: DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2",
                                        variance_type="learned_range", thresholding=True,
                                        dynamic_thresholding_ratio=0.95, sample_max_value=1.0, clip_sample=True),
        unet=lambda: UNet2DConditionModel(
            sample_size=PIXEL_SIZE, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"),
            mid_block_type="UNetMidBlock2DSimpleCrossAttn",
            up_block_types=("SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"), in_channels=3, out_channels=6,
            cross_attention_dim=TEXT, encoder_hid_dim=TEXT, attention_head_dim=8, addition_embed_type="text",
            addition_embed_type_num_heads=2, cross_attention_norm="group_norm", resnet_time_scale_shift="scale_shift",
            act_fn="gelu", norm_num_groups=8))


def _kandinsky_prior() -> dict:
    """The unCLIP prior stage of Kandinsky 2.x: a PriorTransformer from CLIP text to CLIP image embeddings."""
    from diffusers import PriorTransformer, UnCLIPScheduler
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    def prior():
        model = PriorTransformer(num_attention_heads=2, attention_head_dim=16, embedding_dim=TEXT, num_layers=1)
        # the checkpoint's image-embedding statistics: a std of ones, so post-processing does not zero the embedding
        model.clip_std.data.fill_(1.0)
        return model

    tok = clip_tokenizer()
    return _parts(
        prior_prior=prior, prior_text_encoder=(_clip, tok, True), prior_tokenizer=tok,
        # the prior's negative embedding is the image encoder's embedding of a blank image of its own size
        prior_image_encoder=lambda: CLIPVisionModelWithProjection(CLIPVisionConfig(
            hidden_size=TEXT, projection_dim=TEXT, intermediate_size=2 * TEXT, num_attention_heads=4,
            num_hidden_layers=2, image_size=IMAGE_SIZE, patch_size=8)),
        prior_image_processor=lambda: CLIPImageProcessor(crop_size=IMAGE_SIZE, size=IMAGE_SIZE),
        prior_scheduler=lambda: UnCLIPScheduler(variance_type="fixed_small_log", prediction_type="sample",
                                                num_train_timesteps=1000, clip_sample=True, clip_sample_range=10.0))


def _kandinsky_unet(**extra):
    from diffusers import UNet2DConditionModel

    # out_channels twice the latents': a mean and a variance
    return UNet2DConditionModel(**{
        "sample_size": LATENT, "in_channels": 4, "out_channels": 8,
        "down_block_types": ("ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"),
        "up_block_types": ("SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"),
        "mid_block_type": "UNetMidBlock2DSimpleCrossAttn", "block_out_channels": (16, 32), "layers_per_block": 1,
        "cross_attention_dim": TEXT, "attention_head_dim": 8, "resnet_time_scale_shift": "scale_shift",
        "class_embed_type": None, "norm_num_groups": 8, **extra})


def _kandinsky_scheduler():
    from diffusers import DDIMScheduler

    return DDIMScheduler(num_train_timesteps=1000, beta_schedule="linear", beta_start=0.00085, beta_end=0.012,
                         clip_sample=False, set_alpha_to_one=False, steps_offset=1, prediction_type="epsilon",
                         thresholding=False)


def kandinsky22() -> dict:
    from diffusers import DDPMScheduler

    return {**_kandinsky_prior(), **_parts(
        movq=_movq, scheduler=lambda: DDPMScheduler(beta_schedule="linear", beta_start=0.00085, beta_end=0.012,
                                                    clip_sample=False, steps_offset=1),
        unet=lambda: _kandinsky_unet(addition_embed_type="image", encoder_hid_dim=TEXT,
                                     encoder_hid_dim_type="image_proj"))}


def kandinsky() -> dict:
    from diffusers.pipelines.kandinsky.text_encoder import MCLIPConfig, MultilingualCLIP

    tok = xlm_roberta_tokenizer()

    def text_encoder():
        config = MCLIPConfig(transformerDimSize=TEXT, imageDimSize=TEXT, vocab_size=len(tok), hidden_size=TEXT,
                             intermediate_size=2 * TEXT, num_attention_heads=4, num_hidden_layers=2,
                             max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                             bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        return MultilingualCLIP(config)

    return {**_kandinsky_prior(), **_parts(
        text_encoder=text_encoder, tokenizer=tok, movq=_movq, scheduler=_kandinsky_scheduler,
        unet=lambda: _kandinsky_unet(addition_embed_type="text_image", encoder_hid_dim=TEXT,
                                     encoder_hid_dim_type="text_image_proj"))}


def _paella_vq():
    """Wuerstchen's and Stable Cascade's PaellaVQModel: 4 latent channels, upsampling 4 times."""
    from diffusers.pipelines.deprecated.wuerstchen import PaellaVQModel

    return PaellaVQModel(levels=2, bottleneck_blocks=1, embed_dim=16, latent_channels=4, num_vq_embeddings=8)


EFFNET = 16  # channels of the prior's image embedding (Wuerstchen's and Stable Cascade's "effnet" latents)


def wuerstchen() -> dict:
    from diffusers import DDPMWuerstchenScheduler
    from diffusers.pipelines.deprecated.wuerstchen import WuerstchenDiffNeXt, WuerstchenPrior

    tok = clip_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_clip, tok), prior_tokenizer=tok, prior_text_encoder=(_clip, tok),
        scheduler=DDPMWuerstchenScheduler, prior_scheduler=DDPMWuerstchenScheduler, vqgan=_paella_vq,
        prior_prior=lambda: WuerstchenPrior(c_in=EFFNET, c=32, c_cond=TEXT, c_r=8, depth=2, nhead=2, dropout=0.0),
        decoder=lambda: WuerstchenDiffNeXt(
            c_in=4, c_out=4, c_r=8, patch_size=1, c_cond=TEXT, c_hidden=[16, 32], nhead=[-1, 2], blocks=[1, 1],
            level_config=["CT", "CTA"], inject_effnet=[False, True], effnet_embd=EFFNET, clip_embd=TEXT,
            dropout=0.0))


def cascade() -> dict:
    from diffusers import DDPMWuerstchenScheduler, StableCascadeUNet

    tok = clip_tokenizer()
    return _parts(
        tokenizer=tok, text_encoder=(_clip, tok, True), prior_tokenizer=tok, prior_text_encoder=(_clip, tok, True),
        scheduler=DDPMWuerstchenScheduler, prior_scheduler=DDPMWuerstchenScheduler, vqgan=_paella_vq,
        prior_prior=lambda: StableCascadeUNet(
            in_channels=EFFNET, out_channels=EFFNET, conditioning_dim=32, block_out_channels=(32, 32),
            num_attention_heads=(2, 2), down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1),
            switch_level=(False,), clip_image_in_channels=TEXT, clip_text_in_channels=TEXT,
            clip_text_pooled_in_channels=TEXT, dropout=(0.0, 0.0)),
        decoder=lambda: StableCascadeUNet(
            in_channels=4, out_channels=4, conditioning_dim=32, block_out_channels=(16, 32),
            num_attention_heads=(-1, 2), down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1),
            down_blocks_repeat_mappers=(1, 1), up_blocks_repeat_mappers=(1, 1),
            block_types_per_layer=(("SDCascadeResBlock", "SDCascadeTimestepBlock"),
                                   ("SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock")),
            switch_level=None, clip_text_pooled_in_channels=TEXT, effnet_in_channels=EFFNET,
            pixel_mapper_in_channels=EFFNET, dropout=(0.0, 0.0)))


