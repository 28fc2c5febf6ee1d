"""The one table of per-family corrections to the generic twin build: ``OVERRIDES[model_type] = Override(...)``.

The generic rules (shrink every size a config has, size the processors from the shrunk tower, wire every token id,
probe the prompt through the model) cover most architectures; an entry says what they cannot infer, and why.

Schema (every field but ``why`` is optional; each is read by the builders, which ``tests/test_twin_overrides.py``
checks):

- ``why``              one line: what the real checkpoints do that the default config does not (required)
- ``config``           top-level config attributes, passed to ``AutoConfig.for_model`` and set again after the shrink
- ``text``             attributes of the language-model config(s), applied by the shrink (a text twin's own config)
- ``vision``           attributes of the vision-side configs (towers, VQ-VAEs, adapters), applied by the shrink
- ``image_processor``  init keyword arguments of the image processor (after the generic sizing)
- ``video_processor``  init keyword arguments of the video processor
- ``processor``        init keyword arguments of the processor
- ``processor_class``  the processor class to use when transformers maps none to the model type
- ``tokens``           named tokenizer tokens (attribute -> token string), e.g. ``image_token``
- ``extra_tokens``     further special tokens the tokenizer must hold
- ``codebook``         one token per VQ code: ``format`` (a str.format pattern) and optional ``digits`` that spell them
- ``no_twin``          no twin can be built: the architecture is UNTESTED with ``why`` as the reason
- ``text_twin``        the family's text-only model type (mapped to causal LM on its own): its text twin takes ``text``
                       too, so a family is fixed in one entry

A text twin's ``TwinSpec.overrides`` (part of its digest) is ``text_overrides(model_type)``: the ``text`` attributes,
plus ``{"no_twin": True}`` for an architecture without a twin.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Override:
    """One family's corrections (see the module docstring for each field)."""

    why: str
    config: dict = field(default_factory=dict)
    text: dict = field(default_factory=dict)
    vision: dict = field(default_factory=dict)
    image_processor: dict = field(default_factory=dict)
    video_processor: dict = field(default_factory=dict)
    processor: dict = field(default_factory=dict)
    processor_class: str | None = None
    tokens: dict = field(default_factory=dict)
    extra_tokens: tuple = ()
    codebook: dict = field(default_factory=dict)
    no_twin: bool = False
    text_twin: str | None = None


NO_OVERRIDE = Override(why="")

# DSA (DeepSeek-V3.2 sparse attention): checkpoints keep index_topk at 2048 (the config default), more keys than the
# protocol's prompt + MAX_NEW_TOKENS reach, so the lightning indexer (still run: scores, top-k, mask) selects every key.
# The generic shrink's 8 made the twin choose 8 of ~40-70 keys, and with random weights 11-31% of rows tie exactly (ReLU
# zeros) at the 8th score; topk breaks those ties by the tensor's width, so the reference's dynamic cache and the
# recipe's static cache (eager or compiled alike) attended different keys. 2048 is above the twin's
# max_position_embeddings (512): no reachable length selects fewer keys than it has.
_DSA_TOPK = {"index_topk": 2048}
_DSA = ("checkpoints' DSA indexer keeps index_topk 2048, above the protocol's prompt + 32 tokens, so it "
        "selects every key; a shrunk top-k picks among exact ReLU-zero score ties that a dynamic and a static cache "
        "break differently")

_DRAFTER = ("a speculative-decoding drafter: its forward needs the target model's inputs_embeds and shared KV states "
            "(generate(assistant_model=...)), so it does not generate alone")

OVERRIDES: dict[str, Override] = {
    # ---- text-generation families ---------------------------------------------------------------------------
    # sentence-transformers encoders (tiny/st-<type>; their text attributes shape the encoder the same way)
    "xmod": Override("X-MOD routes every layer through a per-language adapter: checkpoints are used with a default "
                     "language set, which its config leaves unset", text={"default_language": "en_XX"}),
    "funnel": Override("Funnel-Transformer's depth is its block_sizes (4+4+4 layers by default), not "
                       "num_hidden_layers", text={"block_sizes": [1, 1], "num_decoder_layers": 1}),
    "tapas": Override("TAPAS encodes tables: its token_type_ids carry 7 kinds of segment (row, column, rank...) that "
                      "a sentence tokenizer does not produce", no_twin=True),
    "perceiver": Override("PerceiverModel reads raw bytes through a latent array (inputs=, not input_ids=): "
                          "sentence-transformers' Transformer module cannot feed it", no_twin=True),
    "neomme": Override("NeoMME is multimodal without a vision sub-config: its processor needs an image processor "
                       "that a text checkpoint does not carry", no_twin=True),
    "mistral": Override("Mistral-7B-v0.3 and later disable the sliding window that MistralConfig still defaults to "
                        "(v0.1's 4096)",
                        text={"sliding_window": None}),
    "gpt_neo": Override("its layer pattern is a (pattern, repeats) pair: one global and one local layer",
                        text={"attention_types": [[["global", "local"], 1]]}),
    "jamba": Override("its attention and expert layers are placed by period and offset: one of each in two layers",
                      text={"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
                            "expert_layer_offset": 1}),
    "bamba": Override("its default config has no attention layer; real checkpoints place some",
                      text={"attn_layer_indices": [1]}),
    "granitemoehybrid": Override("its default config has no attention layer; real checkpoints mix mamba and attention",
                                 text={"layer_types": ["mamba", "attention"]}),
    "mamba2": Override("Mamba2 needs num_heads * head_dim == expand * hidden_size (8 * 16 == 2 * 64)",
                       text={"num_heads": 8}),
    "zaya": Override("ZAYA supports one expert per token only", text={"num_experts_per_tok": 1}),
    "granitemoeshared": Override("its default config has no shared expert (shared_intermediate_size 0), the one "
                                 "thing it adds to granitemoe: its twin computed granitemoe's 32 tokens; checkpoints "
                                 "set one", text={"shared_intermediate_size": 64}),
    "reformer": Override("ReformerModelWithLMHead generates only as a decoder; its axial position sizes must sum "
                         "to hidden_size",
                         text={"is_decoder": True, "axial_pos_embds_dim": [32, 32]}),
    "recurrent_gemma": Override("its block pattern repeats every three layers: keep one recurrent and one "
                                "attention block",
                                text={"block_types": ["recurrent", "attention"]}),
    "longcat_flash": Override("its rope runs over head_dim, which checkpoints set equal to qk_rope_head_dim",
                              text={"head_dim": 8}),
    "dbrx": Override("the attention reads attn_config rope_theta and clip_qkv, which checkpoints carry and the "
                     "default leaves out",
                     text={"attn_config": {"rope_theta": 500000.0, "clip_qkv": 8}}),
    "lfm2_moe": Override("the default config leaves layer_types unset; checkpoints mix conv and full-attention layers",
                         text={"layer_types": ["conv", "full_attention"]}),
    "xlstm": Override("its state cache rounds qk_dim = hidden_size * qk_dim_factor (0.5) up to a multiple of 64 "
                      "and its layers do not: a width of 128 keeps them equal, as 4096 does in checkpoints",
                      text={"hidden_size": 128, "embedding_dim": 128}),
    "zamba": Override("its shared transformer block is tied across the hybrid layers (every 6th in checkpoints): two "
                      "keep the tie",
                      text={"num_hidden_layers": 4,
                            "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]}),
    "deepseek_v32": Override(_DSA, text=dict(_DSA_TOPK)),
    "glm_moe_dsa": Override(_DSA, text=dict(_DSA_TOPK)),
    "axk2": Override(_DSA, text=dict(_DSA_TOPK)),
    # architectures mapped to causal LM that cannot generate text alone: no twin, UNTESTED with this reason
    "musicgen": Override("MusicgenForCausalLM generates audio codebook tokens (output modality audio), not text",
                         no_twin=True),
    "musicgen_melody": Override("MusicgenMelodyForCausalLM generates audio codebook tokens (output modality "
                                "audio), not text",
                                no_twin=True),
    "gemma4_assistant": Override(_DRAFTER, no_twin=True),
    "gemma4_unified_assistant": Override(_DRAFTER, no_twin=True),
    # ---- image-text-to-text families (and, with text_twin, their text-only model types) -----------------------
    "cohere_compass": Override("the default text config has no per-layer-type rope_parameters (checkpoints carry them)",
                               text={"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                            "rope_theta": 10000.0}}},
                               text_twin="cohere_compass_text"),
    "qwen4_exp": Override("the default text config leaves the QSA indexer (on the indexed-attention layers) unset",
                          text={"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16,
                                "indexer_budget": 64, "indexer_compress_ratio": 4},
                          text_twin="qwen4_exp_text"),
    "dots3_note": Override("its sliding layers need head_dim == qk_nope + qk_rope (256 = 192 + 64): all three "
                           "shrunk by 1/16; its tower embeds single frames (Conv2d), so the borrowed Qwen2-VL "
                           "processor patches one frame",
                           text={"qk_rope_head_dim": 4}, image_processor={"temporal_patch_size": 1},
                           text_twin="dots3_note_text"),
    "glm_ocr": Override("no processor is mapped; the model's own docstring example loads a GLM-4.1V "
                        "(Glm4vProcessor) processor",
                        processor_class="Glm4vProcessor"),
    "deepseek_ocr2": Override("the default text config leaves mlp_layer_types unset (checkpoints list dense/sparse per "
                              "layer); the SAM neck's last width is the Qwen2 encoder's hidden size (896 in "
                              "checkpoints); its learned queries are fixed at 12x12 (768 px / patch 16 / 4): the "
                              "twin's 384 px / patch 8 / 4 gives 12x12",
                              text={"mlp_layer_types": ["dense", "sparse"]},
                              vision={"downsample_channels": [32, 64], "image_size": 384},
                              image_processor={"size": {"height": 384, "width": 384}, "tile_size": 384}),
    "granite4_vision": Override("default leaves deepstack_layer_map/downsample_rate unset; its Q-Former has "
                                "vision_hidden // 64 heads",
                                config={"deepstack_layer_map": [[-1, 0], [-2, 1]],
                                        "spatial_target_layers": [0, 1, 0, 1], "downsample_rate": "1/2"},
                                vision={"hidden_size": 64}),
    "deepseek_vl_hybrid": Override("the high-resolution (SAM) branch has its own image size, which the generic sizing "
                                   "does not know",
                                   image_processor={"high_res_size": {"height": 32, "width": 32}}),
    "ernie4_5_vl_moe": Override("its video processor draws timestamps with a font it downloads; the twin (images only) "
                                "does not draw",
                                video_processor={"draw_on_frames": False}),
    "aria": Override("its projector takes exactly 1225 or 4900 patches (490 / 980 px over patch 14), and its "
                     "processor always resizes to max_image_size 980: the twin keeps that geometry",
                     vision={"image_size": 980, "patch_size": 14}),
    "instructblipvideo": Override("InstructBLIP-Video takes 4-frame videos only (its processor writes 4 x "
                                  "num_query_tokens video tokens for any input): a single image cannot drive it",
                                  no_twin=True),
    "emu3": Override("its vocabulary_map (the checkpoint's tokenizer vocabulary) names one <|visual token N|> per VQ "
                     "code, <image> and <|extra_200|> as the end of an image row; its VQ-VAE keeps its 4 stages at "
                     "half the widths, attention at the last (hidden_size = base * 2); images of 512x512 at least are "
                     "resized to the 64x64 test image",
                     codebook={"format": "<|visual token {:06d}|>"}, extra_tokens=("<|extra_200|>",),
                     tokens={"image_token": "<image>"},
                     vision={"channel_multiplier": [1, 1, 1, 2], "hidden_size": 64},
                     image_processor={"min_pixels": 64 * 64, "max_pixels": 64 * 64}),
    "chameleon": Override("its vocabulary_map (the checkpoint's tokenizer vocabulary) names one IMGIMG<code in "
                          "letters>Z token per VQ code", codebook={"format": "IMGIMG{}Z", "digits": "ABCDEFGHIJ"}),
    "perception_lm": Override("its default vision tower is a resnet50 placeholder without the model_args the "
                              "projector reads; checkpoints use timm's Perception Encoder (vit_pe_core), here tiny, "
                              "with the processor's patch size and pooling ratio matching the tower's",
                              vision={"architecture": "vit_pe_core_tiny_patch16_384",
                                      "model_args": {"embed_dim": 32, "depth": 2, "num_heads": 2,
                                                     "img_size": [32, 32]}},
                              processor={"patch_size": 16, "pooling_ratio": 1},
                              image_processor={"tile_size": 32, "max_num_tiles": 1}),
    "gemma3n": Override("its vision tower is timm's mobilenetv5_300m_enc (294M parameters), chosen by name; timm "
                        "builds it from a fixed block list that model_args cannot shrink", no_twin=True),
    "mllama": Override("its tower adds tile embeddings for max_num_tiles (4, fixed by its aspect ratios), so the "
                       "processor pads to 4 tiles; vision_output_dim = hidden_size * (1 + 5 tapped layers) "
                       "(7680 = 1280 * 6)",
                       image_processor={"max_image_tiles": 4}, vision={"vision_output_dim": 192}),
    "janus": Override("its image-generation VQ-VAE (unused by image-text-to-text) keeps its 5 stages at a quarter "
                      "of the widths",
                      vision={"channel_multiplier": [1, 1, 1, 1, 2]}),
    "step3p7": Override("the default leaves sliding_window unset and all layers full, yet the model always builds "
                        "the sliding mask and sizes sliding-attention heads (num_sliding_attention_heads): "
                        "checkpoints mix both",
                        text={"sliding_window": 512, "layer_types": ["full_attention", "sliding_attention"]}),
    "molmo2": Override("its crops overlap by 4 patches a side (of 27-patch crops): the twin's 4-patch crops "
                       "overlap by 1",
                       image_processor={"overlap_margins": [1, 1]}),
    "llama4": Override("its pixel-shuffle MLP reads intermediate_size = hidden_size / pixel_shuffle_ratio ** 2 "
                       "(5632 = 1408 * 4)",
                       vision={"intermediate_size": 128}),
    "cohere2_vision": Override("its processor writes image_processor.patch_size ** 2 tokens per tile: the tower's 32 / "
                               "8 / 2 per side",
                               image_processor={"patch_size": 2}),
    "mistral_large4": Override(_DSA, text=dict(_DSA_TOPK)),
    "qwen2_vl": Override("Qwen2VLVisionConfig.hidden_size is the merger's output width (= text width); embed_dim "
                         "is the tower's",
                         vision={"hidden_size": 64}),
}

_BY_TEXT_TWIN = {entry.text_twin: entry for entry in OVERRIDES.values() if entry.text_twin}


def override(model_type: str) -> Override:
    """The family's corrections for an image-text-to-text (or any) model type; NO_OVERRIDE when it has none."""
    return OVERRIDES.get(model_type, NO_OVERRIDE)


def text_overrides(model_type: str) -> dict:
    """A text twin's config overrides (its ``TwinSpec.overrides``): the entry's ``text`` attributes, or those of the
    family whose ``text_twin`` it is; ``{"no_twin": True}`` added for an architecture without a twin."""
    entry = OVERRIDES.get(model_type) or _BY_TEXT_TWIN.get(model_type) or NO_OVERRIDE
    return {**entry.text, **({"no_twin": True} if entry.no_twin and entry is OVERRIDES.get(model_type) else {})}


def reason(model_type: str) -> str:
    """The entry's one-line reason (for a text-only type, its family's)."""
    return (OVERRIDES.get(model_type) or _BY_TEXT_TWIN.get(model_type) or NO_OVERRIDE).why
