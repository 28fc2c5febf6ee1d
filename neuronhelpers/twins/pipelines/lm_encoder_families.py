"""Text-to-image twins whose prompt is read by a (vision-)language model: QwenImage (2.5-VL, 3-VL), Z-Image, Ovis,
PRX (T5Gemma), FLUX.2 (Mistral 3, Qwen3), Krea 2, NucleusMoE-Image, Ideogram 4, Helios (UMT5, pyramid). Each
function returns the family's components by name."""

from __future__ import annotations

import importlib.util

from neuronhelpers.twins.pipelines.parts import (
    IMAGE_SIZE,
    LATENT,
    TEXT,
    _decoder_lm,
    _flow,
    _flow_vae,
    _native_size,
    _part,
    _parts,
    _qwen_vae,
    _t5,
    _vae,
)
from neuronhelpers.twins.tokenizers import (
    chat_template,
    gemma_tokenizer,
    qwen_tokenizer,
    t5_tokenizer,
    text_tokenizer,
)


def _qwen_chat_tokenizer():
    """Qwen2Tokenizer with the twins' chat template (<|im_start|> turns), padding on the right like Qwen's own: the
    pipelines that wrap the prompt in a chat template or pad it inside one."""
    tok = qwen_tokenizer(1024)
    tok.chat_template = chat_template()
    tok.padding_side = "right"
    return tok


def _qwen25_vl(tok):
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    # mrope sections of the 8-wide heads' 4 rotary frequencies
    config = Qwen2_5_VLConfig(
        text_config={"hidden_size": TEXT, "intermediate_size": 2 * TEXT, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": len(tok),
                     "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
                     "pad_token_id": tok.pad_token_id},
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": TEXT},
        vocab_size=len(tok))
    return Qwen2_5_VLForConditionalGeneration(config)


def _qwenimage_transformer_kwargs() -> dict:
    # packed 2x2 patches of 4 latent channels; rope axes (8, 4, 4) make up the head width 16
    return {"patch_size": 2, "in_channels": 16, "out_channels": 4, "num_layers": 2, "attention_head_dim": 16,
            "num_attention_heads": 2, "joint_attention_dim": TEXT, "axes_dims_rope": (8, 4, 4)}


def qwenimage() -> dict:
    from diffusers import QwenImageTransformer2DModel

    tok = _qwen_chat_tokenizer()
    return _parts(scheduler=_flow, vae=_qwen_vae, text_encoder=(_qwen25_vl, tok), tokenizer=tok,
                  transformer=lambda: QwenImageTransformer2DModel(**_qwenimage_transformer_kwargs(),
                                                                  guidance_embeds=False))


def qwenimage_controlnet() -> dict:
    from diffusers import QwenImageControlNetModel

    return {**qwenimage(), "controlnet": _part("controlnet", QwenImageControlNetModel,
                                               **{**_qwenimage_transformer_kwargs(), "num_layers": 1})}


def _qwen3(tok, layers: int = 2, causal_lm: bool = False):
    from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3Model

    return _decoder_lm(Qwen3ForCausalLM if causal_lm else Qwen3Model, Qwen3Config, tok, num_hidden_layers=layers)


def _z_image_transformer(**extra):
    from diffusers import ZImageTransformer2DModel

    return ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=32, n_layers=2,
                                    n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True,
                                    cap_feat_dim=TEXT, rope_theta=256.0, t_scale=1000.0, axes_dims=[8, 4, 4],
                                    axes_lens=[256, 32, 32], **extra)


def z_image() -> dict:
    tok = _qwen_chat_tokenizer()
    return _parts(scheduler=_flow, vae=(_flow_vae, 16), text_encoder=(_qwen3, tok), tokenizer=tok,
                  transformer=_z_image_transformer)


def z_image_controlnet() -> dict:
    from diffusers import ZImageControlNetModel

    # the pipeline links the transformer's embedders and refiners into the controlnet (from_transformer)
    return {**z_image(), "controlnet": _part(
        "controlnet", ZImageControlNetModel, control_layers_places=[0], control_in_dim=16, all_patch_size=(2,),
        all_f_patch_size=(1,), dim=32, n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True)}


def z_image_controlnet_inpaint() -> dict:
    from diffusers import ZImageControlNetModel

    # the 2.0 controlnet: its input is the control latents, the mask and the masked image's latents (16 + 1 + 16)
    return {**z_image(), "controlnet": _part(
        "controlnet", ZImageControlNetModel, control_layers_places=[0], control_refiner_layers_places=[0],
        control_in_dim=33, add_control_noise_refiner="control_noise_refiner", all_patch_size=(2,),
        all_f_patch_size=(1,), dim=32, n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True)}


def z_image_omni() -> dict:
    from transformers import Siglip2ImageProcessor, Siglip2VisionConfig, Siglip2VisionModel

    # the SigLIP 2 tower embeds condition images (none for text to image); the transformer projects its features
    return {**z_image(), **_parts(
        transformer=lambda: _z_image_transformer(siglip_feat_dim=16),
        siglip=lambda: Siglip2VisionModel(Siglip2VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                              num_attention_heads=2, num_patches=16, patch_size=8)),
        siglip_processor=lambda: Siglip2ImageProcessor(patch_size=8, max_num_patches=16))}


def ovis() -> dict:
    from diffusers import OvisImageTransformer2DModel

    tok = _qwen_chat_tokenizer()
    return _parts(
        scheduler=_flow, vae=_flow_vae, text_encoder=(_qwen3, tok), tokenizer=tok,
        transformer=lambda: OvisImageTransformer2DModel(
            patch_size=1, in_channels=16, out_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=TEXT, axes_dims_rope=(4, 6, 6)))


def prx() -> dict:
    from diffusers import PRXTransformer2DModel
    from transformers.models.t5gemma.modeling_t5gemma import T5GemmaEncoder, T5GemmaModuleConfig

    if T5GemmaEncoder.config_class.__name__ == "T5GemmaConfig":
        # T5GemmaEncoder is built from (and saves) a T5GemmaModuleConfig, but from_pretrained rebuilds its
        # config_class, a default-sized T5GemmaConfig: the saved weights do not fit
        raise ValueError("component 'text_encoder' (T5GemmaEncoder): cannot be loaded back by from_pretrained in this "
                         "transformers (it saves a t5_gemma_module config; loading rebuilds a default T5GemmaConfig, "
                         "so every weight's size mismatches)")

    tok = gemma_tokenizer(64)

    def text_encoder():
        config = T5GemmaModuleConfig(
            vocab_size=len(tok), hidden_size=TEXT, intermediate_size=2 * TEXT, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
            layer_types=["full_attention"] * 2, query_pre_attn_scalar=8, sliding_window=64, dropout_rate=0.0,
            attention_dropout=0.0, attention_bias=False, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
            attn_logit_softcapping=50.0, final_logit_softcapping=30.0, rope_theta=10000.0,
            pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        return T5GemmaEncoder(config)

    return _parts(
        scheduler=_flow, vae=lambda: _vae(4, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0,
                                          scaling_factor=1.0),
        text_encoder=text_encoder, tokenizer=tok, default_sample_size=LATENT,
        transformer=lambda: PRXTransformer2DModel(patch_size=1, in_channels=4, context_in_dim=TEXT, hidden_size=32,
                                                  mlp_ratio=2.0, num_heads=2, depth=2, axes_dim=[8, 8]))


def _flux2_vae():
    from diffusers import AutoencoderKLFlux2

    return AutoencoderKLFlux2(sample_size=IMAGE_SIZE, in_channels=3, out_channels=3,
                              down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                              block_out_channels=(8, 16), layers_per_block=1, latent_channels=4, norm_num_groups=8,
                              use_quant_conv=False, use_post_quant_conv=False)


def _flux2_transformer(layers: int, guidance: bool):
    from diffusers import Flux2Transformer2DModel

    # the text: hidden states of 3 text-encoder layers stacked (3 * TEXT); 2x2-packed latents (4 * 4 channels)
    return Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=3 * TEXT,
                                   timestep_guidance_channels=256, axes_dims_rope=[4, 4, 4, 4],
                                   guidance_embeds=guidance)


def flux2_klein() -> dict:
    tok = _qwen_chat_tokenizer()
    # the pipeline stacks the hidden states of text-encoder layers 9, 18 and 27: a narrow encoder 28 layers deep
    return _parts(scheduler=_flow, vae=_flux2_vae, text_encoder=(_qwen3, tok, 28, True), tokenizer=tok,
                  transformer=(_flux2_transformer, 1, False))


VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def _qwen_vl_processor():
    """A Qwen3VLProcessor around the chat tokenizer with Qwen-VL's vision tokens (a prompt of text only never uses
    them, but the processor looks them up)."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    tok = _qwen_chat_tokenizer()
    tok.add_tokens(VISION_TOKENS, special_tokens=True)
    return Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                            video_processor=Qwen3VLVideoProcessor(),
                            chat_template=chat_template("<|vision_start|><|image_pad|><|vision_end|>"))


def _qwen3_vl(tok, model: str = "Qwen3VLModel", layers: int = 2):
    import transformers

    ids = {}
    if "<|image_pad|>" in tok.get_vocab():
        ids = {"image_token_id": tok.convert_tokens_to_ids("<|image_pad|>"),
               "video_token_id": tok.convert_tokens_to_ids("<|video_pad|>"),
               "vision_start_token_id": tok.convert_tokens_to_ids("<|vision_start|>"),
               "vision_end_token_id": tok.convert_tokens_to_ids("<|vision_end|>")}
    # mrope sections of the 8-wide heads' 4 rotary frequencies
    config = transformers.Qwen3VLConfig(
        text_config={"hidden_size": TEXT, "intermediate_size": 2 * TEXT, "num_hidden_layers": layers,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": TEXT // 4, "vocab_size": len(tok),
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 1, 1],
                                         "mrope_interleaved": True},
                     "pad_token_id": tok.pad_token_id},
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": TEXT,
                       "deepstack_visual_indexes": [0]},
        vocab_size=len(tok), **ids)
    return getattr(transformers, model)(config)


def krea2() -> dict:
    from diffusers import FlowMatchEulerDiscreteScheduler, Krea2Transformer2DModel

    tok = _qwen_chat_tokenizer()
    return _parts(
        vae=_qwen_vae, text_encoder=(_qwen3_vl, tok), tokenizer=tok,
        text_encoder_select_layers=(0, 1, 2),  # the encoder's 3 hidden states (the checkpoint taps 12 of 37)
        scheduler=lambda: FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                          base_image_seq_len=256, max_image_seq_len=6400),
        transformer=lambda: Krea2Transformer2DModel(
            in_channels=16, num_layers=2, attention_head_dim=8, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, timestep_embed_dim=8, text_hidden_dim=TEXT, num_text_layers=3,
            text_num_attention_heads=2, text_num_key_value_heads=1, text_intermediate_size=32,
            num_layerwise_text_blocks=1, num_refiner_text_blocks=1, axes_dims_rope=(4, 2, 2), rope_theta=1000.0))


def nucleusmoe_image() -> dict:
    from diffusers import NucleusMoEImageTransformer2DModel

    processor = _part("processor", _qwen_vl_processor)
    return {"processor": processor, **_parts(
        scheduler=_flow, vae=_qwen_vae,
        # the pipeline reads the encoder's 8th hidden state from the end: 8 layers
        text_encoder=(_qwen3_vl, processor.tokenizer, "Qwen3VLForConditionalGeneration", 8),
        transformer=lambda: NucleusMoEImageTransformer2DModel(
            patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            joint_attention_dim=TEXT, axes_dims_rope=(8, 4, 4), moe_enabled=False, capacity_factors=[8.0, 8.0]))}


def qwenimage21() -> dict:
    from diffusers import AutoencoderKLQwenImage21, QwenImage21Transformer2DModel

    def vae():
        # the pipeline fixes a VAE scale of 16: four spatial halvings (five levels); 4 latent channels
        return _native_size(AutoencoderKLQwenImage21(
            base_dim=8, decoder_base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1, 1], num_res_blocks=1,
            temperal_downsample=[False, True, True, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4))

    processor = _part("processor", _qwen_vl_processor)
    return {"processor": processor, **_parts(
        scheduler=_flow, vae=vae,
        text_encoder=(_qwen3_vl, processor.tokenizer, "Qwen3VLForConditionalGeneration"),
        transformer=lambda: QwenImage21Transformer2DModel(
            patch_size=1, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            context_in_dim=TEXT, mlp_ratio=2, axes_dims_rope=(8, 4, 4)))}


PIXTRAL_TOKENS = ["[IMG]", "[IMG_BREAK]", "[IMG_END]"]


def _pixtral_processor():
    """A PixtralProcessor (Flux 2's "tokenizer"): the twins' byte-level BPE with Pixtral's image tokens and the chat
    template, and a Pixtral image processor of 8-pixel patches."""
    from transformers import PixtralImageProcessor, PixtralProcessor

    tok = text_tokenizer()
    tok.add_tokens(PIXTRAL_TOKENS, special_tokens=True)
    return PixtralProcessor(image_processor=PixtralImageProcessor(patch_size=8, size={"longest_edge": IMAGE_SIZE}),
                            tokenizer=tok, patch_size=8, spatial_merge_size=1, chat_template=chat_template("[IMG]"),
                            image_token="[IMG]", image_break_token="[IMG_BREAK]", image_end_token="[IMG_END]")


def _mistral3(tok):
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    # the pipeline stacks the hidden states of text layers 10, 20 and 30: a narrow language model 31 layers deep
    config = Mistral3Config(
        text_config={"model_type": "mistral", "vocab_size": len(tok), "hidden_size": TEXT,
                     "intermediate_size": 2 * TEXT, "num_hidden_layers": 31, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "head_dim": TEXT // 4, "max_position_embeddings": 1024,
                     "sliding_window": None, "pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id,
                     "eos_token_id": tok.eos_token_id},
        vision_config={"model_type": "pixtral", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "intermediate_size": 32, "image_size": IMAGE_SIZE, "patch_size": 8, "num_channels": 3,
                       "head_dim": 8},
        image_token_index=tok.convert_tokens_to_ids("[IMG]"), spatial_merge_size=1, vision_feature_layer=-1)
    return Mistral3ForConditionalGeneration(config)


def flux2() -> dict:
    processor = _part("tokenizer", _pixtral_processor)
    return {"tokenizer": processor, **_parts(scheduler=_flow, vae=_flux2_vae,
                                             text_encoder=(_mistral3, processor.tokenizer),
                                             transformer=(_flux2_transformer, 1, True))}


def ideogram4() -> dict:
    from diffusers import Ideogram4Transformer2DModel
    from diffusers.pipelines.ideogram4.pipeline_ideogram4 import QWEN3_VL_ACTIVATION_LAYERS

    tok = _qwen_chat_tokenizer()
    taps = QWEN3_VL_ACTIVATION_LAYERS  # the encoder layers whose hidden states the pipeline concatenates

    def transformer():
        # 2x2-patchified latents (4 * 4 channels); text features: every tapped layer's hidden state side by side;
        # mrope sections of the 16-wide heads' 8 rotary frequencies
        return Ideogram4Transformer2DModel(in_channels=16, num_layers=1, attention_head_dim=16, num_attention_heads=2,
                                           intermediate_size=64, adaln_dim=32, llm_features_dim=len(taps) * TEXT,
                                           mrope_section=(4, 2, 2))

    return _parts(scheduler=_flow, vae=_flux2_vae, tokenizer=tok,
                  # a narrow encoder as deep as the deepest tapped layer
                  text_encoder=(_qwen3_vl, tok, "Qwen3VLModel", max(taps) + 1),
                  transformer=transformer, unconditional_transformer=transformer)


def helios(stages: int = 1) -> dict:
    from diffusers import AutoencoderKLWan, HeliosScheduler, HeliosTransformer3DModel

    if importlib.util.find_spec("ftfy") is None:
        raise ValueError("pipeline Helios: it cleans every prompt with the ftfy package, which is not installed")
    tok = t5_tokenizer()
    # the pyramid variant first denoises latents halved (stages - 1) times: 8 px of latent per stage
    size = IMAGE_SIZE * 2 ** (stages - 1)
    return _parts(
        tokenizer=tok, text_encoder=(_t5, tok, TEXT, True),
        # (gamma: the default 1/3 makes the pyramid's 2x2 block-noise covariance singular, eigenvalue 1 - 3 gamma,
        # which the CPU's Cholesky refuses; the single-stage pipeline never samples it)
        scheduler=lambda: HeliosScheduler(stage_range=[i / stages for i in range(stages + 1)], stages=stages,
                                          use_dynamic_shifting=True, gamma=0.25),
        # a video VAE (8x spatial, 4x temporal compression); rope axes (4, 4, 4) make the transformer's 12-wide heads
        vae=lambda: _native_size(AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                                  temperal_downsample=[False, True, True]), size),
        transformer=lambda: HeliosTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16, out_channels=16,
            text_dim=TEXT, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", rope_dim=(4, 4, 4), has_multi_term_memory_patch=True,
            guidance_cross_attn=True, zero_history_timestep=True, is_amplify_history=False))


def helios_pyramid() -> dict:
    return helios(stages=3)  # the pipeline's three pyramid stages


