"""The one shrink machinery of every transformers twin, text and vision-language: the architecture's own config
(``AutoConfig.for_model``), every config in its tree shrunk by its role (text: ``TEXT_SHRINK``, vision:
``VISION_SHRINK``), only the sizes a config has; per-layer lists, patterns and per-layer overrides cut to the new
depth keeping every kind of layer (layers.py), linked widths kept equal and rope sections resized (widths.py),
derived sizes derived again by a round trip; then the family's override (overrides.py).
"""

from __future__ import annotations

import copy

from neuronhelpers.twins.configs import (
    derived,
    geometry,
    get,
    has,
    ints,
    layer_count,
    rebuilt,
    scale_pinpoints,
    set_vocab,
    snapshot,
    text_configs,
    try_setattr,
    vision_config,
    walk_configs,
)
from neuronhelpers.twins.layers import move_per_layer_config, remap_vision_layer_refs, resize_per_layer
from neuronhelpers.twins.overrides import NO_OVERRIDE, Override
from neuronhelpers.twins.widths import fit_tokens_per_image, fix_rope, link_widths, vision_to_text_width

# Shrunk text dimensions (sliding windows keep each architecture's default, as its checkpoints do). Only attributes a
# config already has are set (attribute maps such as gpt2's n_embd -> hidden_size are honoured by setattr), so one
# table serves every architecture.
TEXT_SHRINK = {
    "hidden_size": 64, "intermediate_size": 128, "ffn_hidden_size": 128,  # falcon
    "n_inner": 128,  # gpt2
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "num_kv_heads": 2, "head_dim": 16,
    "max_position_embeddings": 512, "query_pre_attn_scalar": 16,
    # mixture of experts
    "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64, "decoder_sparse_step": 1, "mlp_only_layers": [], "max_window_layers": 2,
    "n_routed_experts": 4, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    # multi-head latent attention (deepseek family)
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    # partial rotary embeddings sized for head_dim 16
    "rotary_dim": 8,
    # encoder-decoder families used as decoders (bart, marian, pegasus, ...)
    "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
    # state-space and linear-attention layers
    "state_size": 8, "ssm_state_size": 8, "mamba_d_state": 8, "mamba_n_heads": 4, "mamba_head_dim": 16,
    "mamba_expand": 2,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_heads": 4, "linear_head_dim": 16, "mamba_d_head": 32,
    "mamba_d_ssm": 128,  # falcon_h1: mamba_n_heads * mamba_d_head
    "mamba_n_groups": 1, "n_groups": 1, "time_step_rank": 8,
    # other names of the same sizes
    "dim_model": 64, "dim_ff": 128, "dim_head": 16, "num_heads": 4, "num_layers": 2, "expert_ffn_hidden_size": 64,
    "zero_expert_num": 2, "moe_topk": 2, "qk_head_dim": 16, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 8,
    "index_kpool": 4,  # glm5_next: index_topk is a multiple of it
    "num_decoder_layers": 2, "d_ff": 128, "d_kv": 16,
    "encoder_hash_byte_group_vocab": 64,  # blt: hashed byte n-gram embeddings
}
VISION_SHRINK = {
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 2, "image_size": 32, "patch_size": 8,
    # other spellings
    "depth": 2, "embed_dim": 32, "num_heads": 2, "num_layers": 2, "d_model": 32, "encoder_layers": 2,
    "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "head_dim": 16,
    "num_blocks": 2,  # conformer blocks (phi4_multimodal's audio encoder)
    # image tokenizers (VQ-VAE) of models that also generate images (janus, chameleon, emu3)
    "base_channels": 32,  # (GroupNorm of 32 groups)
    "latent_channels": 32, "num_res_blocks": 1, "num_embeddings": 64, "codebook_size": 64,
}
# Sizes a config may leave unset (None) when the architecture can run without them, but which a twin sets so
# that the feature they size (experts, for one) is built and tested.
SET_EVEN_IF_UNSET = {"n_routed_experts", "num_experts_per_tok", "n_shared_experts", "head_dim", "num_key_value_heads",
                     "num_kv_heads", "intermediate_size", "n_inner"}
_LAYER_COUNT_KEYS = ("num_hidden_layers", "depth", "num_layers", "n_layer", "encoder_layers", "decoder_layers")
_HEADS = (("num_attention_heads", "num_key_value_heads"), ("num_heads", "num_kv_heads"),
          ("num_attention_heads", "num_kv_heads"))


def _planned_depth(config, table, overrides, before, lists):
    """The table (with the depth it will set) and the depth the shrink plans: the table's, or one layer of every kind
    the architecture mixes (conv, sliding, full, ...), or twice that when the last layers reuse earlier layers' KV."""
    wanted = {**table, **overrides}
    count_keys = [k for k in _LAYER_COUNT_KEYS if k in wanted]
    planned = next((wanted[k] for k in count_keys if has(config, k)), before)
    table = dict(table)
    kinds = len(set(map(str, lists.get("layer_types", [])))) if len(lists.get("layer_types", [])) == before else 0
    pinned_depth = any(k in overrides for k in count_keys)
    if kinds > (planned or 0) and not pinned_depth:
        for k in count_keys:
            table[k] = kinds
        planned = kinds
    shared = config.__dict__.get("num_kv_shared_layers")
    if isinstance(shared, int) and 0 < shared < (before or 0) and not pinned_depth:
        # a layer of every kind computes KV, one reuses it
        for k in count_keys:
            table[k] = 2 * max(kinds, 1)
        planned = 2 * max(kinds, 1)
    return table, planned


def _settable(config, key, current, overrides) -> bool:
    """Whether the shrink sets ``key``: an override always; a table size when the config has it, does not derive it,
    and has a value (or it is a size a twin sets even if unset)."""
    if key in overrides:
        return True
    return has(config, key) and (
        getattr(type(config), "attribute_map", {}).get(key, key) not in derived(type(config))[0]) and (
        current is not None or key in SET_EVEN_IF_UNSET)


def _set_sizes(config, table, overrides, before, planned):
    for key, value in {**table, **overrides}.items():
        current = get(config, key) if has(config, key) else None
        if isinstance(current, int) and not isinstance(current, bool) and current == 0 and key not in overrides:
            continue  # a size of 0 switches its feature off (NoPE: no rotary dims): the twin keeps it off
        if not _settable(config, key, current, overrides):
            continue
        current = config.__dict__.get(key)
        if key in overrides and isinstance(value, dict) and hasattr(current, "to_dict"):
            for name, item in value.items():  # an override of a nested config's attributes
                setattr(current, name, copy.deepcopy(item))
            continue
        if key not in overrides and isinstance(current, (list, tuple)) and isinstance(value, int) and current:
            # a per-layer list (one width per layer) or a per-stage list (patch sizes, widths)
            n = planned if before and len(current) == before else len(current)
            value = type(current)([value] * n)
        try_setattr(config, key, copy.deepcopy(value))


def shrink(config, table: dict, overrides: dict | None = None) -> None:
    """Shrink a config in place: set each attribute it has, then keep per-layer lists consistent."""
    overrides = overrides or {}
    before = layer_count(config)
    lists = {k: v for k, v in config.__dict__.items() if isinstance(v, (list, tuple)) and v and not k.startswith("_")}
    dicts = {k: v for k, v in config.__dict__.items() if isinstance(v, dict) and v and not k.startswith("_")}
    heads_before = {k: config.__dict__.get(k)
                    for k in ("num_attention_heads", "num_key_value_heads", "num_heads", "num_kv_heads")}
    table, planned = _planned_depth(config, table, overrides, before, lists)
    _set_sizes(config, table, overrides, before, planned)
    for heads, kv in _HEADS:
        h0, k0 = heads_before.get(heads), heads_before.get(kv)
        if kv not in overrides and isinstance(h0, int) and (k0 == h0) and isinstance(config.__dict__.get(heads), int):
            try_setattr(config, kv, config.__dict__[heads])  # multi-head attention stays multi-head
    after = layer_count(config)
    if before and after and before != after:
        resize_per_layer(config, table, overrides, lists, dicts, before, after, ints(config))


def shrink_any(config, table, overrides=None):
    """shrink(), also for heterogeneous configs (per_layer_config overrides keyed by layer index): the overrides
    are cleared, the config shrunk, then the overrides moved onto new layers of the same type and scaled."""
    if not getattr(config, "is_heterogeneous", False):
        shrink(config, table, overrides)
        return
    per_layer = {int(k): dict(v) for k, v in (config.to_dict().get("per_layer_config") or {}).items()}
    globals_before = {k: config._getattr_without_heterogeneous_validation(k) for k in table if has(config, k)}
    old_types = list(config.__dict__.get("layer_types") or [])
    before = layer_count(config)
    config.per_layer_config = None
    shrink(config, table, overrides)
    after = layer_count(config)
    new_types = list(config.__dict__.get("layer_types") or [])
    scaled = move_per_layer_config(per_layer, before, after, old_types, new_types, globals_before, config)
    if scaled:
        config.per_layer_config = scaled


def default_config(model_type: str, ov: Override = NO_OVERRIDE, base: dict | None = None):
    """``AutoConfig.for_model`` with the family's top-level attributes, and the optional vision tower a default config
    leaves out (gemma4) added: the twin has one. With ``base`` (a model's own config.json, read as loading reads it)
    the model's config instead, the family's attributes only where it leaves them unset (a model twin: own.py)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if base is not None:
        return CONFIG_MAPPING[model_type].from_dict({**copy.deepcopy(ov.config), **copy.deepcopy(base)})
    config = AutoConfig.for_model(model_type, **copy.deepcopy(ov.config))
    for key, spec in (getattr(config, "sub_configs", {}) or {}).items():
        cls = getattr(spec, "config_class", spec)
        if "vision" in key and config.__dict__.get(key) is None and isinstance(cls, type):
            setattr(config, key, cls())
    return config


def _shrink_tree(config, tree, ov: Override, text_table, text_twin):
    """Every config of the tree shrunk by its role; returns whether the top config is the language model itself."""
    top_is_text = text_twin or has(config, "vocab_size") and (
        has(config, "hidden_size") or has(config, "d_model")) and (
        "text_config" not in (getattr(config, "sub_configs", {}) or {})
    )
    for path, sub, role in tree:
        if role == "text" and (path != "config" or top_is_text) and (
                has(sub, "hidden_size") or has(sub, "d_model") or sub is config and text_twin):
            shrink_any(sub, text_table, ov.text)
            fix_rope(sub)
    return top_is_text


def shrink_config(config, ov: Override = NO_OVERRIDE, text_table: dict | None = None, text_twin: bool = False,
                  keep: frozenset = frozenset()):
    """The default ``config`` shrunk (see the module docstring); returns the config rebuilt as loading will (``keep``:
    names a model's own config sets, never derived again from class defaults)."""
    text_table = TEXT_SHRINK if text_table is None else text_table
    original, before_geometry = snapshot(config), geometry(config)
    orig_vision_depth = layer_count(vision_config(config))
    tree = list(walk_configs(config))
    before = {path: ints(sub) for path, sub, role in tree}
    main_text = config.get_text_config() if hasattr(config, "get_text_config") else config
    text_hidden_before = getattr(main_text, "hidden_size", None)
    top_is_text = _shrink_tree(config, tree, ov, text_table, text_twin)
    text_hidden = getattr(main_text, "hidden_size", None) or text_table.get("hidden_size", TEXT_SHRINK["hidden_size"])
    for path, sub, role in tree:
        if role == "vision" and path != "config":
            shrink_any(sub, VISION_SHRINK, ov.vision)
    pinned = {(path, key) for path, sub, role in tree for key in (ov.vision if role == "vision" else ov.text)}
    link_widths(tree, before, main_text, text_hidden_before, text_hidden, pinned)
    if not top_is_text and "hidden_size" in config.__dict__ and (config.__dict__.get("hidden_size") or 0) > text_hidden:
        config.hidden_size = text_hidden  # a composite config's hidden_size mirrors its language model
    vision_to_text_width(tree, text_hidden, pinned)
    if vision_config(config) is not config:  # (a text-only config has no tower to refer to)
        fit_tokens_per_image(config)
        remap_vision_layer_refs(config, orig_vision_depth, set(ov.config))
    size = geometry(config).size
    for _path, sub, _role in tree:
        if isinstance(sub.__dict__.get("image_grid_pinpoints"), list) and size and before_geometry.size:
            sub.image_grid_pinpoints = scale_pinpoints(sub.image_grid_pinpoints, size / before_geometry.size)
    for key, value in ov.config.items():
        setattr(config, key, copy.deepcopy(value))
    # a round trip re-runs each config's own derivations (per-layer types, mirrored widths) as loading will
    return rebuilt(config, original, set(ov.config) | set(ov.text) | set(ov.vision) | set(keep))


def build_config(model_type: str, ov: Override = NO_OVERRIDE, text_table: dict | None = None, text_twin: bool = False,
                 base: dict | None = None):
    """AutoConfig.for_model (or a model's own config, ``base``), every config in the tree shrunk by its role, widths
    kept consistent (the text twins' config too: ``text_table``, and the family's overrides as ``ov.text``)."""
    return shrink_config(default_config(model_type, ov, base), ov, text_table, text_twin, own_keys(base))


def own_keys(base: dict | None) -> frozenset:
    """The names a model's own config sets (top level and its sub-configs'): its values, not derived defaults."""
    if not base:
        return frozenset()
    names = set(base).union(*(v for v in base.values() if isinstance(v, dict) and "model_type" in v))
    # rope_theta and rope_scaling are read into rope_parameters at load: derived from the model's values, not defaults
    return frozenset(names | {"rope_parameters"})


def shrunk_config(model_type: str, table: dict, overrides: dict | None = None, base: dict | None = None, **fixed):
    """A text twin's config: the architecture's own config (or the model's, ``base``) built small by ``build_config``
    with ``table`` and the family's ``overrides`` (its text attributes); then the ``fixed`` values (token ids;
    ``vocab_size`` is every vocabulary of the language side)."""
    config = build_config(model_type, Override(why="", text=dict(overrides or {})), text_table=table, text_twin=True,
                          base=base)
    fixed = dict(fixed)
    if "vocab_size" in fixed:
        set_vocab(config, fixed.pop("vocab_size"))
    for sub in text_configs(config) or [config]:
        for key, value in fixed.items():
            if key in sub.__dict__ or key in getattr(sub, "attribute_map", {}):
                setattr(sub, key, value)
    return type(config).from_dict(config.to_dict())  # validated as loading will


def text_config(model_type: str, tok, overrides: dict | None = None, table: dict | None = None,
                base: dict | None = None):
    """A text twin's config, its token ids and vocabulary those of ``tok`` (``table`` and ``base``: a model twin's)."""
    token_ids = {"vocab_size": len(tok), "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
                 "pad_token_id": tok.pad_token_id}
    return shrunk_config(model_type, TEXT_SHRINK if table is None else table, overrides, base, **token_ids)
