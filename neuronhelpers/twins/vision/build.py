"""Tiny twins of vision-language models: generic, for every model type transformers maps to
AutoModelForImageTextToText (called by twins.py, which checks each twin runs and remembers failures).

A twin is built from transformers' own metadata, not from a per-family builder:

1. config   ``AutoConfig.for_model(model_type)``; every config in the tree is shrunk by its role
            (text: a config with a vocabulary; vision: everything else), per-layer lists are resized
            and layer indices are remapped into the shrunk depth.
2. parts    tokenizer: a byte-level BPE trained locally (neuronhelpers.twins.build' corpus), with whatever
            named tokens the processor asks for; image / video processors and feature extractors
            from the auto mappings (PIL backend first), synced to the shrunk vision config.
3. processor  the processor class from PROCESSOR_MAPPING_NAMES (or the model's own module, or the
            processor of a model type sharing the model class); its ``__init__`` keyword arguments
            are filled from the config by name.
4. ids      every ``*_token_id`` / ``*_token_index`` in the config tree is pointed at the token the
            processor or tokenizer names (a fresh special token when neither does).
5. probe    the processor's prompt is run through the model once: a "features and tokens do not
            match" error resizes the processor's image sequence length to the model's feature count.

``VLM_OVERRIDES`` holds the few per-family corrections, each with a one-line reason. Taught in notebook 06.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import warnings
from pathlib import Path

from neuronhelpers.twins.build import _LOGIT_SCALE as LOGIT_SCALE
from neuronhelpers.twins.build import MAX_TWIN_PARAMETERS as MAX_PARAMS
from neuronhelpers.twins.build import SEED

from neuronhelpers.twins.build import _CHAT_TEMPLATE, _SET_EVEN_IF_UNSET, TEXT_SHRINK  # noqa: E402 - shared with the text twins

VISION_SHRINK = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "image_size": 32,
    "patch_size": 8,
    # other spellings
    "depth": 2,
    "embed_dim": 32,
    "num_heads": 2,
    "num_layers": 2,
    "d_model": 32,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "head_dim": 16,
    "num_blocks": 2,  # conformer blocks (phi4_multimodal's audio encoder)
    # image tokenizers (VQ-VAE) of models that also generate images (janus, chameleon, emu3)
    "base_channels": 32,  # (GroupNorm of 32 groups)
    "latent_channels": 32,
    "num_res_blocks": 1,
    "num_embeddings": 64,
    "codebook_size": 64,
}
# Vision attributes that must equal the text width (the tower projects into the language model).
TO_TEXT_WIDTH = ("out_hidden_size", "text_hidden_size", "output_hidden_size")

# Per-family corrections: the generic rules cannot infer these. Keys: "config" (top-level attributes),
# "text" / "vision" (sub-config attributes), "image_processor", "processor" (init kwargs), "why".
VLM_OVERRIDES: dict[str, dict] = {
    "glm_ocr": {"processor_class": "Glm4vProcessor",
                "why": "no processor is mapped; the model's own docstring example loads a GLM-4.1V (Glm4vProcessor) processor"},
    "cohere_compass": {"text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
                       "why": "the default text config has no per-layer-type rope_parameters (checkpoints carry them)"},
    "deepseek_ocr2": {"text": {"mlp_layer_types": ["dense", "sparse"]},
                      "vision": {"downsample_channels": [32, 64], "image_size": 384},
                      "image_processor": {"size": {"height": 384, "width": 384}, "tile_size": 384},
                      "why": "the default text config leaves mlp_layer_types unset (checkpoints list dense/sparse per layer); the "
                             "SAM neck's last width is the Qwen2 encoder's hidden size (896 in checkpoints); its learned queries "
                             "are fixed at 12x12 (768 px / patch 16 / 4): the twin's 384 px / patch 8 / 4 gives 12x12"},
    "qwen4_exp": {"text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 64,
                           "indexer_compress_ratio": 4},
                  "why": "the default text config leaves the QSA indexer (on the indexed-attention layers) unset"},
    "dots3_note": {"text": {"qk_rope_head_dim": 4}, "image_processor": {"temporal_patch_size": 1},
                   "why": "its sliding layers need head_dim == qk_nope + qk_rope (256 = 192 + 64): all three shrunk by 1/16; "
                          "its tower embeds single frames (Conv2d), so the borrowed Qwen2-VL processor patches one frame"},
    "granite4_vision": {"config": {"deepstack_layer_map": [[-1, 0], [-2, 1]], "spatial_target_layers": [0, 1, 0, 1],
                                   "downsample_rate": "1/2"},
                        "vision": {"hidden_size": 64},
                        "why": "default leaves deepstack_layer_map/downsample_rate unset; its Q-Former has vision_hidden // 64 heads"},
    "deepseek_vl_hybrid": {"image_processor": {"high_res_size": {"height": 32, "width": 32}},
                           "why": "the high-resolution (SAM) branch has its own image size, which the generic sizing does not know"},
    "ernie4_5_vl_moe": {"video_processor": {"draw_on_frames": False},
                        "why": "its video processor draws timestamps with a font it downloads; the twin (images only) does not draw"},
    "aria": {"vision": {"image_size": 980, "patch_size": 14},
             "why": "its projector takes exactly 1225 or 4900 patches (490 / 980 px over patch 14), and its processor always "
                    "resizes to max_image_size 980: the twin keeps that geometry"},
    "instructblipvideo": {"skip": True, "why": "InstructBLIP-Video takes 4-frame videos only (its processor writes 4 x "
                          "num_query_tokens video tokens for any input): a single image cannot drive it"},
    "emu3": {"codebook": {"format": "<|visual token {:06d}|>"}, "extra_tokens": ["<|extra_200|>"],
             "tokens": {"image_token": "<image>"},
             "vision": {"channel_multiplier": [1, 1, 1, 2], "hidden_size": 64},
             "image_processor": {"min_pixels": 64 * 64, "max_pixels": 64 * 64},
             "why": "its vocabulary_map (the checkpoint's tokenizer vocabulary) names one <|visual token N|> per VQ code, <image> and "
                    "<|extra_200|> as the end of an image row; its VQ-VAE keeps its 4 stages at half the widths, attention at "
                    "the last (hidden_size = base * 2); images of 512x512 at least are resized to the 64x64 test image"},
    "chameleon": {"codebook": {"format": "IMGIMG{}Z", "digits": "ABCDEFGHIJ"},
                  "why": "its vocabulary_map (the checkpoint's tokenizer vocabulary) names one IMGIMG<code in letters>Z token "
                         "per VQ code"},
    "perception_lm": {"vision": {"architecture": "vit_pe_core_tiny_patch16_384",
                                 "model_args": {"embed_dim": 32, "depth": 2, "num_heads": 2, "img_size": [32, 32]}},
                      "processor": {"patch_size": 16, "pooling_ratio": 1},
                      "image_processor": {"tile_size": 32, "max_num_tiles": 1},
                      "why": "its default vision tower is a resnet50 placeholder without the model_args the projector reads; "
                             "checkpoints use timm's Perception Encoder (vit_pe_core), here tiny, with the processor's patch "
                             "size and pooling ratio matching the tower's"},
    "gemma3n": {"skip": True, "why": "its vision tower is timm's mobilenetv5_300m_enc (294M parameters), chosen by name; timm "
                "builds it from a fixed block list that model_args cannot shrink"},
    "mllama": {"image_processor": {"max_image_tiles": 4}, "vision": {"vision_output_dim": 192},
               "why": "its tower adds tile embeddings for max_num_tiles (4, fixed by its aspect ratios), so the processor pads to 4 "
                      "tiles; vision_output_dim = hidden_size * (1 + 5 tapped layers) (7680 = 1280 * 6)"},
    "janus": {"vision": {"channel_multiplier": [1, 1, 1, 1, 2]},
              "why": "its image-generation VQ-VAE (unused by image-text-to-text) keeps its 5 stages at a quarter of the widths"},
    "step3p7": {"text": {"sliding_window": 512, "layer_types": ["full_attention", "sliding_attention"]},
                "why": "the default leaves sliding_window unset and all layers full, yet the model always builds the sliding mask "
                       "and sizes sliding-attention heads (num_sliding_attention_heads): checkpoints mix both"},
    "molmo2": {"image_processor": {"overlap_margins": [1, 1]},
               "why": "its crops overlap by 4 patches a side (of 27-patch crops): the twin's 4-patch crops overlap by 1"},
    "llama4": {"vision": {"intermediate_size": 128},
               "why": "its pixel-shuffle MLP reads intermediate_size = hidden_size / pixel_shuffle_ratio ** 2 (5632 = 1408 * 4)"},
    "cohere2_vision": {"image_processor": {"patch_size": 2},
                       "why": "its processor writes image_processor.patch_size ** 2 tokens per tile: the tower's 32 / 8 / 2 per side"},
    "qwen2_vl": {"vision": {"hidden_size": 64},
                 "why": "Qwen2VLVisionConfig.hidden_size is the merger's output width (= text width); embed_dim is the tower's"},
}

PROMPT = "Describe this image in one sentence."


class TwinError(Exception):
    """A twin cannot be built; the message is one line saying why."""


# ---------------------------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------------------------

_BPE = None


def _trained_bpe():
    global _BPE
    if _BPE is None:
        from neuronhelpers.twins.build import trained_bpe

        _BPE = trained_bpe().to_str()
    from tokenizers import Tokenizer

    return Tokenizer.from_str(_BPE)


def make_tokenizer(named: dict[str, str], extra: list[str]):
    """The twin tokenizer: trained BPE, the usual specials, ``named`` token attributes and ``extra`` tokens."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=_trained_bpe(),
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        unk_token="<|pad|>",
        extra_special_tokens=dict(named),
    )
    tokens = [t for t in dict.fromkeys(list(named.values()) + list(extra)) if t]
    tok.add_special_tokens({"extra_special_tokens": tokens}, replace_extra_special_tokens=False)
    return tok


def _token_for(name: str) -> str:
    """A fresh special token for an attribute name: image_token -> <|image|>."""
    base = re.sub(r"_(token|token_id|token_index|id|index)$", "", name)
    return f"<|{base}|>"


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------


def _sub_configs(config):
    from transformers import PretrainedConfig

    out = []
    for key in list(getattr(config, "sub_configs", {}) or {}):
        sub = getattr(config, key, None)
        if isinstance(sub, PretrainedConfig):
            out.append((key, sub))
    return out


def walk_configs(config, path="config"):
    """Every config in the tree, as (path, config, role); role is 'text' or 'vision'."""
    yield path, config, _role(path, config)
    for key, sub in _sub_configs(config):
        yield from walk_configs(sub, f"{path}.{key}")


def _role(path, config):
    name = path.rsplit(".", 1)[-1]
    if any(w in name for w in ("vision", "vq", "audio", "perceiver", "qformer", "adapter", "sam", "protein", "high_res")):
        return "vision"
    if name == "encoder" and not hasattr(config, "vocab_size"):
        return "vision"
    if hasattr(config, "vocab_size") or "text" in name or "decoder" in name:
        return "text"
    return "vision"


def _has(config, key):
    return key in config.__dict__ or key in getattr(config, "attribute_map", {}) or (
        key in getattr(type(config), "__dataclass_fields__", {})
    )


_DERIVED: dict = {}


def derived(cls) -> tuple[set, set]:
    """What the config class computes in its constructor rather than takes: attributes that are not fields
    (deepseek's head_dim = qk_rope_head_dim), and fields whose default (None, "auto") the constructor replaces
    (xlnet's d_head = d_model // n_head, jamba's mamba_dt_rank). A twin sets the sizes they come from and lets the constructor derive them."""
    if cls not in _DERIVED:
        import dataclasses

        fields = {f.name: f.default for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        try:
            default = cls()
            stored = {v for k, v in getattr(cls, "attribute_map", {}).items() if k in fields}  # a field kept under another name
            extra = {k for k in default.__dict__ if not k.startswith("_") and k not in fields and k not in stored} if fields else set()
            filled = {k for k, d in fields.items() if d is not dataclasses.MISSING and isinstance(d, (type(None), int, float, str))
                      and k in default.__dict__ and not _same(default.__dict__[k], d)}
            _DERIVED[cls] = (extra, filled)
        except Exception:
            _DERIVED[cls] = (set(), set())
    return _DERIVED[cls]


def snapshot(config) -> dict:
    """Each config's values in the tree (by id), to tell later which ones a shrink changed."""
    from transformers import PretrainedConfig

    return {id(sub): {k: copy.deepcopy(v) for k, v in sub.__dict__.items() if not isinstance(v, PretrainedConfig)}
            for path, sub, role in walk_configs(config)}


def rebuilt(config, original: dict | None = None, keep=frozenset()):
    """The config constructed again from its values (each config's own derivations re-run, as loading will).
    Derived values the shrink did not change itself (``original``: the snapshot before it; ``keep``: names set
    on purpose) are left out, so the constructor derives them from the shrunk sizes instead of keeping them stale."""
    original = original or {}

    def clean(sub, data):
        extra, filled = derived(type(sub))
        before = original.get(id(sub), {})
        unchanged = {k for k in extra | filled if k in before and _same(before[k], sub.__dict__.get(k))} - set(keep)
        for key in extra - set(keep) if before else ():
            data.pop(key, None)
        fields = {f.name: f.default for f in __import__("dataclasses").fields(type(sub))} if filled else {}
        for key in filled & unchanged:
            if key in data:
                data[key] = fields[key]
        for key, part in _sub_configs(sub):
            if isinstance(data.get(key), dict):
                clean(part, data[key])
        return data

    return type(config).from_dict(clean(config, config.to_dict()))


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


def _get(config, key, default=None):
    """getattr that tolerates per-layer attributes refusing global access (gemma4's head_dim)."""
    try:
        return getattr(config, key, default)
    except Exception:
        return config.__dict__.get(key, default)


def _layer_count(config):
    for key in ("num_hidden_layers", "depth", "num_layers", "n_layer", "encoder_layers", "decoder_layers"):
        value = _get(config, key) if _has(config, key) else None
        if isinstance(value, int):
            return value
    return None


def shrink(config, table: dict, overrides: dict | None = None) -> None:
    """Shrink a config in place: set each attribute it has, then keep per-layer lists consistent."""
    overrides = overrides or {}
    before = _layer_count(config)
    lists = {k: v for k, v in config.__dict__.items() if isinstance(v, (list, tuple)) and v and not k.startswith("_")}
    dicts = {k: v for k, v in config.__dict__.items() if isinstance(v, dict) and v and not k.startswith("_")}
    snapshot = {k: config.__dict__.get(k) for k in ("num_attention_heads", "num_key_value_heads", "num_heads", "num_kv_heads")}
    layer_count_keys = [k for k in ("num_hidden_layers", "depth", "num_layers", "n_layer", "encoder_layers", "decoder_layers")
                        if k in {**table, **overrides}]
    after_planned = next(({**table, **overrides}[k] for k in layer_count_keys if _has(config, k)), before)
    table = dict(table)
    kinds = len(set(map(str, lists.get("layer_types", [])))) if len(lists.get("layer_types", [])) == before else 0
    if kinds > (after_planned or 0) and not any(k in overrides for k in layer_count_keys):
        # keep one layer of every kind the architecture mixes (conv, sliding, full, ...)
        for k in layer_count_keys:
            table[k] = kinds
        after_planned = kinds
    shared = config.__dict__.get("num_kv_shared_layers")
    if isinstance(shared, int) and 0 < shared < (before or 0) and not any(k in overrides for k in layer_count_keys):
        # the last layers reuse the KV of earlier layers of their kind: a layer of every kind computes KV, one reuses it
        for k in layer_count_keys:
            table[k] = 2 * max(kinds, 1)
        after_planned = 2 * max(kinds, 1)
    for key, value in {**table, **overrides}.items():
        current = _get(config, key) if _has(config, key) else None
        if isinstance(current, int) and not isinstance(current, bool) and current == 0 and key not in overrides:
            continue  # a size of 0 switches its feature off (NoPE: no rotary dims): the twin keeps it off
        if key in overrides or (_has(config, key) and getattr(type(config), "attribute_map", {}).get(key, key) not in derived(type(config))[0] and (
                current is not None or key in _SET_EVEN_IF_UNSET)):
            current = config.__dict__.get(key)
            if key in overrides and isinstance(value, dict) and hasattr(current, "to_dict"):
                for name, item in value.items():  # an override of a nested config's attributes
                    setattr(current, name, copy.deepcopy(item))
                continue
            if key not in overrides and isinstance(current, (list, tuple)) and isinstance(value, int) and current:
                # a per-layer list (one width per layer) or a per-stage list (patch sizes, widths)
                n = after_planned if before and len(current) == before else len(current)
                value = type(current)([value] * n)
            try:
                setattr(config, key, copy.deepcopy(value))
            except Exception:
                pass
    for heads, kv in (("num_attention_heads", "num_key_value_heads"), ("num_heads", "num_kv_heads"), ("num_attention_heads", "num_kv_heads")):
        h0, k0 = snapshot.get(heads), snapshot.get(kv)
        if kv not in overrides and isinstance(h0, int) and (k0 == h0) and isinstance(config.__dict__.get(heads), int):
            try:
                setattr(config, kv, config.__dict__[heads])  # multi-head attention stays multi-head
            except Exception:
                pass
    after = _layer_count(config)
    if before and after and before != after:
        for key, value in _ints(config).items():
            if key in overrides or key in table:
                continue
            if key.startswith(("first_k", "num_dense")):  # leading dense layers: at least one later layer stays MoE
                setattr(config, key, min(value, after - 1))
            elif key == "num_kv_shared_layers":  # layers reusing earlier layers' KV: keep some of each (or all)
                setattr(config, key, after if value >= before else min(value, after // 2))
        for key, value in lists.items():
            if key in overrides or key in table:
                continue
            _resize_layer_list(config, key, list(value), before, after)
        old_types = lists.get("layer_types")
        new_types = config.__dict__.get("layer_types")
        for key, value in dicts.items():
            if key in overrides or key in table:
                continue
            _resize_layer_dict(config, key, value, before, after, old_types, new_types)


def shrink_any(config, table, overrides=None):
    """shrink(), also for heterogeneous configs (per_layer_config overrides keyed by layer index): the overrides
    are cleared, the config shrunk, then the overrides moved onto new layers of the same type and scaled."""
    if not getattr(config, "is_heterogeneous", False):
        shrink(config, table, overrides)
        return
    per_layer = {int(k): dict(v) for k, v in (config.to_dict().get("per_layer_config") or {}).items()}
    globals_before = {k: config._getattr_without_heterogeneous_validation(k) for k in table if _has(config, k)}
    old_types = list(config.__dict__.get("layer_types") or [])
    before = _layer_count(config)
    config.per_layer_config = None
    shrink(config, table, overrides)
    after = _layer_count(config)
    new_types = list(config.__dict__.get("layer_types") or [])
    moved = {}
    for j in range(after):
        for i in sorted(per_layer):
            if i < before and (not old_types or not new_types or old_types[i] == new_types[j]) and (old_types or i == j):
                moved[j] = per_layer[i]
                break
    scaled = {}
    for j, layer in moved.items():
        out = {}
        for key, value in layer.items():
            g_old, g_new = globals_before.get(key), config.__dict__.get(key)
            if isinstance(value, int) and isinstance(g_old, int) and isinstance(g_new, int) and g_old:
                value = max(1, round(g_new * value / g_old))
            out[key] = value
        scaled[j] = out
    if scaled:
        config.per_layer_config = scaled


def _resize_layer_dict(config, key, value, before, after, old_types, new_types):
    """A dict keyed by layer index (per-layer overrides): keep entries for layers of the same kind."""
    try:
        index = {int(k): k for k in value}
    except (TypeError, ValueError):
        return
    if not index or not all(0 <= i < before for i in index):
        return
    keep_str = all(isinstance(k, str) for k in value)
    new = {}
    if old_types and new_types and len(old_types) == before:
        for j in range(after):
            for i in sorted(index):
                if old_types[i] == new_types[j]:
                    new[str(j) if keep_str else j] = value[index[i]]
                    break
    else:
        new = {(str(i) if keep_str else i): value[index[i]] for i in sorted(index) if i < after}
    try:
        setattr(config, key, new)
    except Exception:
        pass


def _resize_layer_list(config, key, value, before, after):
    if len(value) == before:
        # one entry per layer: keep every kind the architecture mixes, in order of appearance
        kinds = list(dict.fromkeys(json.dumps(v, sort_keys=True, default=str) for v in value))
        if len(kinds) <= after:
            order = [json.loads(k) for k in kinds]
            # keep the original pattern's start, then cycle kinds so each appears
            new = [order[i % len(order)] for i in range(after)]
            if key == "layer_types" or len(kinds) > 1:
                setattr(config, key, new)
            else:
                setattr(config, key, value[:after])
        else:
            setattr(config, key, value[:after])
        return
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value) and ("layer" in key or "index" in key or "indexes" in key or "indices" in key or "idx" in key):
        if all(-before <= v < before for v in value):
            new = []
            for v in value:
                nv = min(v, after - 1) if v >= 0 else max(v, -after)
                new.append(nv)
            setattr(config, key, new if isinstance(value, list) else tuple(new))


def _remap_vision_layer_refs(config, before, ov):
    """Top-level references to vision layers (vision_feature_layer(s), ...) clamped into the shrunk tower."""
    after = _layer_count(vision_config(config))
    if not (before and after) or before == after:
        return
    pinned = set(ov.get("config", {}))

    def fit(v):
        if isinstance(v, bool) or not isinstance(v, int) or not (-before - 1 <= v <= before):
            return v
        return min(v, after) if v >= 0 else max(v, -after - 1)

    for key, value in list(config.__dict__.items()):
        if "layer" not in key or key in pinned or key.startswith("_"):
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(config, key, fit(value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            setattr(config, key, type(value)(fit(v) for v in value))
    # an adapter's own reference to the tower's layers (molmo2's adapter_config.vision_feature_layer)
    tower = vision_config(config)
    for path, sub, role in walk_configs(config):
        if sub is config or sub is tower:
            continue
        for key, value in list(sub.__dict__.items()):
            if "feature_layer" not in key or key.startswith("_"):
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(sub, key, min(fit(value), after - 1))
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
                setattr(sub, key, type(value)(min(fit(v), after - 1) for v in value))


def _split(total, parts):
    base = [total // parts] * parts
    for i in range(total - sum(base)):
        base[-1 - i] += 1
    return base


def _sections(total, original):
    """``total`` split into as many sections as ``original``; sections that were equal stay equal (ernie stacks its
    height and width sections), in proportion to the original where the even split would break that."""
    even = _split(total, len(original))
    if all(even[i] == even[j] for i in range(len(original)) for j in range(len(original)) if original[i] == original[j]):
        return even
    whole = sum(original) or 1
    ideal = [total * v / whole for v in original]
    out = [int(x) for x in ideal]
    left = total - sum(out)
    groups = {}
    for i, v in enumerate(original):
        groups.setdefault(v, []).append(i)
    for v, idx in sorted(groups.items(), key=lambda g: -(ideal[g[1][0]] - out[g[1][0]])):
        if 0 < len(idx) <= left:
            for i in idx:
                out[i] += 1
            left -= len(idx)
    out[-1] += left
    return out


def _modeling_default(config, pattern):
    """A list of ints the modeling file next to the config's class falls back to (``pattern``'s group), or None."""
    import sys

    path = getattr(sys.modules.get(type(config).__module__), "__file__", "") or ""
    try:
        m = re.search(pattern, Path(path.replace("configuration_", "modeling_")).read_text())
    except OSError:
        return None
    return [int(v) for v in m.group(1).split(",") if v.strip()] if m else None


def _modeling_mentions(config, word):
    """Whether the modeling file next to the config's class reads ``word`` (e.g. a rope default it falls back to)."""
    import sys

    module = sys.modules.get(type(config).__module__)
    path = getattr(module, "__file__", "") or ""
    modeling = Path(path.replace("configuration_", "modeling_"))
    try:
        return modeling != Path(path) and word in modeling.read_text()
    except OSError:
        return False


def _fix_rope(config):
    """Multimodal rope splits head_dim/2 frequencies into sections: resize them to the shrunk head_dim."""
    head_dim = _get(config, "head_dim") or 16
    wants_mrope = "mrope_section" in (getattr(type(config), "ignore_keys_at_rope_validation", None) or ()) or _modeling_mentions(config, "mrope_section")
    rope = _get(config, "rope_parameters")
    if not isinstance(rope, dict) or not rope:
        return
    nested = [v for v in rope.values() if isinstance(v, dict)]
    for params in nested or [rope]:
        factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0)
        half = int(head_dim * factor) // 2
        section = params.get("mrope_section")
        if isinstance(section, list) and section:
            params["mrope_section"] = _sections(half, section)
        elif wants_mrope:  # the modeling code's own default sections (ernie's [22, 22, 20]) when it names one
            default = _modeling_default(config, r'mrope_section", \[([\d, ]+)\]')
            params["mrope_section"] = _sections(half, default) if default else _split(half, 3)
    config.rope_parameters = rope


# Config attributes that say how many tokens one image becomes: set to the patch count of the shrunk tower.
_TOKENS_PER_IMAGE = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens", "image_seq_len", "tokens_per_image")


def _fit_tokens_per_image(config):
    vc = vision_config(config)
    size, patch = _image_size(vc), getattr(vc, "patch_size", None)
    if not (size and isinstance(patch, int)):
        return
    patches = (size // patch) ** 2
    for path, sub, role in walk_configs(config):
        for key in _TOKENS_PER_IMAGE:
            if key in sub.__dict__ and isinstance(getattr(sub, key), int):
                setattr(sub, key, patches)


_WIDTH_WORDS = {"hidden", "intermediate", "dim", "ffn", "mlp", "channels", "channel", "proj", "projection", "projector", "width",
                "embed", "model", "inner", "size"}
_NOT_WIDTH = {"image", "img", "patch", "vocab", "position", "positions", "window", "token", "tokens", "seq", "sampling",
              "resolution", "num", "max", "min", "codebook", "offset", "topk", "seed", "chunk", "scale", "extent",
              "floor", "len", "head", "lora", "rank", "id", "layers", "heads", "experts", "rate", "kernel", "stride",
              "group", "groups", "batch", "cache", "merge", "temporal", "spatial", "pool", "pooling", "query", "queries",
              "bins", "mel", "fft", "hop", "block", "step", "step"}
# Width attributes that the shrink tables set; their original values define the old -> new width links.
_LINK_KEYS = ("hidden_size", "intermediate_size", "d_model", "embed_dim", "ffn_hidden_size", "n_inner", "d_ff",
              "encoder_ffn_dim", "decoder_ffn_dim", "moe_intermediate_size", "shared_expert_intermediate_size")


def _is_width(key):
    words = set(key.lower().split("_"))
    if words & _NOT_WIDTH:
        return False
    return bool(words & _WIDTH_WORDS) and key not in ("size",) or key in ("d_model", "d_ff", "n_inner", "n_embd")


def _ints(config):
    return {k: v for k, v in config.__dict__.items() if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_")}


def build_config(model_type: str, ov: dict, text_table: dict | None = None, text_twin: bool = False):
    """AutoConfig.for_model, every config in the tree shrunk by its role, widths kept consistent (the text
    twins' config too: ``text_table``, and the family's overrides as ``ov["text"]``)."""
    text_table = TEXT_SHRINK if text_table is None else text_table
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, **ov.get("config", {}))
    for key, spec in (getattr(config, "sub_configs", {}) or {}).items():
        # an optional vision tower the default config leaves out (gemma4): the twin has one
        cls = getattr(spec, "config_class", spec)
        if "vision" in key and config.__dict__.get(key) is None and isinstance(cls, type):
            setattr(config, key, cls())
    original = snapshot(config)
    _ORIG_IMAGE_SIZE["size"] = _image_size(vision_config(config))
    _ORIG_IMAGE_SIZE["patch"] = _get(vision_config(config), "patch_size")
    orig_vision_depth = _layer_count(vision_config(config))
    tree = list(walk_configs(config))
    before = {path: _ints(sub) for path, sub, role in tree}
    main_text = config.get_text_config() if hasattr(config, "get_text_config") else config
    text_hidden_before = getattr(main_text, "hidden_size", None)

    top_is_text = text_twin or _has(config, "vocab_size") and (_has(config, "hidden_size") or _has(config, "d_model")) and (
        "text_config" not in (getattr(config, "sub_configs", {}) or {})
    )
    for path, sub, role in tree:
        if role == "text" and (path != "config" or top_is_text) and (_has(sub, "hidden_size") or _has(sub, "d_model") or sub is config and text_twin):
            shrink_any(sub, text_table, ov.get("text"))
            _fix_rope(sub)
    text_hidden = getattr(main_text, "hidden_size", None) or text_table.get("hidden_size", TEXT_SHRINK["hidden_size"])
    for path, sub, role in tree:
        if role == "vision" and path != "config":
            shrink_any(sub, VISION_SHRINK, ov.get("vision"))

    # width links: an attribute that held a shrunk width (in its own config, else the text model's,
    # else any tower's) takes that width's new value; a vision attribute that held the text width
    # (an output projection into the language model) takes the new text width.
    links = {}
    for path, sub, role in tree:
        for key in _LINK_KEYS:
            old, new = before[path].get(key), _ints(sub).get(key)
            if old and new and old != new:
                links.setdefault(path, {})[old] = new
    text_links = {}
    for path, sub, role in tree:
        if sub is main_text:
            text_links = links.get(path, {})
    any_links = {}
    for path in links:
        for old, new in links[path].items():
            any_links.setdefault(old, new)
    pinned = set()
    for (path, sub, role) in tree:
        for key, new_value in (ov.get("vision", {}) if role == "vision" else ov.get("text", {}) if role == "text" else {}).items():
            pinned.add((path, key))
    for path, sub, role in tree:
        now = _ints(sub)
        for key, old in before[path].items():
            into_text = key.endswith(("_dim", "_hidden_size")) and now.get(key) == old and not (
                set(key.split("_")) & _NOT_WIDTH - {"image", "token"})  # (janus: image_token_embed_dim)
            if (path, key) in pinned or not (_is_width(key) or into_text and role == "vision") or old < 16:
                continue
            if role == "vision" and path != "config" and text_hidden_before and old == text_hidden_before and key != "intermediate_size":
                # a vision width equal to the text width stays equal (pix2struct's decoder attends to the encoder's width)
                setattr(sub, key, text_hidden)
                continue
            if now.get(key) != old:
                continue  # already shrunk by the tables
            new = links.get(path, {}).get(old) or text_links.get(old) or any_links.get(old)
            if new is None and old >= 256:
                new = 2 * text_hidden  # a projector / adapter width with no link: small
            if new is not None:
                try:
                    setattr(sub, key, new)
                except Exception:
                    pass
        for key, value in list(sub.__dict__.items()):
            # per-stage width lists (downsample_channels, ...): each element linked or made small
            if (path, key) in pinned or not _is_width(key) or not isinstance(value, (list, tuple)) or not value:
                continue
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in value) or max(value) < 256:
                continue
            new = [links.get(path, {}).get(v) or text_links.get(v) or any_links.get(v) or (2 * text_hidden if v >= 256 else v)
                   for v in value]
            try:
                setattr(sub, key, type(value)(new))
            except Exception:
                pass
    if not top_is_text and "hidden_size" in config.__dict__ and (config.__dict__.get("hidden_size") or 0) > text_hidden:
        config.hidden_size = text_hidden  # a composite config's hidden_size mirrors its language model
    for path, sub, role in tree:
        if role == "vision" and path != "config":
            for key in TO_TEXT_WIDTH:
                if key in sub.__dict__ and (path, key) not in pinned:
                    setattr(sub, key, text_hidden)
    if vision_config(config) is not config:  # (a text-only config has no tower to refer to)
        _fit_tokens_per_image(config)
        _remap_vision_layer_refs(config, orig_vision_depth, ov)
    size = _image_size(vision_config(config))
    for path, sub, role in tree:
        if isinstance(sub.__dict__.get("image_grid_pinpoints"), list) and size and _ORIG_IMAGE_SIZE.get("size"):
            sub.image_grid_pinpoints = _scale_pinpoints(sub.image_grid_pinpoints, size / _ORIG_IMAGE_SIZE["size"])
    for key, value in ov.get("config", {}).items():
        setattr(config, key, value)
    # a round trip re-runs each config's own derivations (per-layer types, mirrored widths) as loading will
    pinned_keys = {k for part in ("config", "text", "vision") for k in ov.get(part, {})}
    return rebuilt(config, original, pinned_keys)


def text_configs(config):
    """The configs that own a vocabulary (language model side)."""
    out = [sub for path, sub, role in walk_configs(config) if role == "text" and _has(sub, "vocab_size")]
    if _has(config, "vocab_size") and config not in out:
        out.append(config)
    return out


def set_vocab(config, size):
    """Every vocabulary of the language side (vocab_size, and per-layer-input vocabularies) is the twin tokenizer's."""
    for sub in text_configs(config):
        for key, value in list(sub.__dict__.items()):
            if "vocab_size" in key and isinstance(value, int) and not isinstance(value, bool) and (key == "vocab_size" or value >= size):
                setattr(sub, key, size)


def sync_vocab(config, tok):
    """set_vocab to the tokenizer's size; a config that carries the tokenizer's vocabulary itself (chameleon's and
    emu3's vocabulary_map, which maps image codes to tokens) gets the twin tokenizer's."""
    set_vocab(config, len(tok))
    for path, sub, role in walk_configs(config):
        if "vocabulary_map" in sub.__dict__:
            sub.vocabulary_map = tok.get_vocab()


def codebook_tokens(config, spec: dict) -> list[str]:
    """One token per image code (``spec``: the token's ``format``, and ``digits`` that spell the code's digits)."""
    size = next((v for path, sub, role in walk_configs(config) for k in ("codebook_size", "num_embeddings")
                 if isinstance(v := sub.__dict__.get(k), int) and not isinstance(v, bool)), 0)
    digits = spec.get("digits")
    return [spec["format"].format("".join(digits[int(c)] for c in str(i)) if digits else i) for i in range(size)]


def vision_config(config):
    for path, sub, role in walk_configs(config):
        if role == "vision" and path != "config" and "vision" in path:
            return sub
    for path, sub, role in walk_configs(config):
        if role == "vision" and path != "config":
            return sub
    return config


# ---------------------------------------------------------------------------------------------
# image / video processors, feature extractors
# ---------------------------------------------------------------------------------------------


def _stems(model_type):
    """qwen2_5_omni_thinker -> [qwen2_5_omni_thinker, qwen2_5_omni, qwen2_5, qwen2]: shorter names of one family."""
    parts = re.split(r"([_-])", model_type)
    out = []
    for i in range(len(parts), 0, -2):
        out.append("".join(parts[:i]))
    return out


def related_types(model_type, config):
    """Model types whose auto-mapping entries a twin may borrow, nearest first: the type itself, types sharing
    its model class or processor class, its sub-configs' types, then shorter names of the same family."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES as MODELS
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    out = [model_type]
    model_class = MODELS.get(model_type)
    out += [t for t, c in MODELS.items() if c == model_class]
    proc = VLM_OVERRIDES.get(model_type, {}).get("processor_class") or PROCESSOR_MAPPING_NAMES.get(model_type)
    if proc:
        out += [t for t, c in PROCESSOR_MAPPING_NAMES.items() if c == proc]
    subs = [getattr(sub, "model_type", None) for path, sub, role in walk_configs(config) if path != "config"]
    subs = [t for t in subs if t]
    out += subs
    for t in [model_type] + subs:
        out += _stems(t)[1:]
    return [t for t in dict.fromkeys(out) if len(t) > 2]


def _mapped(mapping: dict, model_type: str, config):
    """An entry of an auto mapping for the model type, else for the nearest related type."""
    for t in related_types(model_type, config):
        if mapping.get(t):
            return mapping[t]
    return None


def _pick(entry):
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, (list, tuple)):
        return [e for e in entry if e]
    if isinstance(entry, dict):
        return [entry[k] for k in ("pil", "slow", "torchvision", "fast") if entry.get(k)] + [
            v for k, v in entry.items() if v and k not in ("pil", "slow", "torchvision", "fast")
        ]
    return []


def _image_size(vc):
    size = getattr(vc, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return size if isinstance(size, int) else None


# Image processor switches that make one image one view (no tiles, crops, slices or thumbnails).
ONE_VIEW = {
    "do_image_splitting": False,
    "crop_to_patches": False,
    "split_image": False,
    "slice_mode": False,
    "max_slice_nums": 1,
    "do_pan_and_scan": False,
    "use_thumbnail": False,
    "max_image_tiles": 1,
    "max_crops": 1,
}
_ORIG_IMAGE_SIZE: dict = {}


def _scale_pinpoints(pinpoints, factor):
    return [[max(1, round(v * factor)) for v in pair] for pair in pinpoints]


def _as_dict(value):
    """A size attribute as a plain dict of its set fields (SizeDict keeps unset ones as None)."""
    if value is None or isinstance(value, (int, float)):
        return value
    if hasattr(value, "keys"):
        return {k: value[k] for k in value.keys() if value[k] is not None}
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if v is not None and not k.startswith("_")}
    return value


def image_processor_kwargs(ip, config, ov_ip: dict) -> dict:
    """Init kwargs that size an image (or video) processor to the shrunk vision config."""
    vc = vision_config(config)
    size = _image_size(vc)
    kwargs = {}
    if size:
        for attr in ("size", "crop_size", "max_image_size"):
            cur = _as_dict(getattr(ip, attr, None))
            if isinstance(cur, dict) and cur:
                if any(isinstance(v, int) and v > 8192 for v in cur.values()):
                    continue  # a pixel budget (min/max pixels), not an edge
                kwargs[attr] = {k: (size if isinstance(v, int) else v) for k, v in cur.items()}
            elif isinstance(cur, int):
                kwargs[attr] = size
    patch, old_patch = _get(vc, "patch_size"), _ORIG_IMAGE_SIZE.get("patch")
    cur = _as_dict(getattr(ip, "size", None))
    merge = _get(vc, "spatial_merge_size") or 1
    for unit in (1, merge) if not size and isinstance(patch, int) and isinstance(old_patch, int) and isinstance(cur, dict) and cur else ():
        if all(v == old_patch * unit for v in cur.values()):
            # a processor that cuts images into patches (or merged patches) of the tower's size (inkling)
            kwargs["size"] = {k: patch * unit for k in cur}
    for attr, source in (("patch_size", "patch_size"), ("encoder_patch_size", "patch_size"), ("vision_patch_size", "patch_size"),
                         ("merge_size", "spatial_merge_size"),
                         ("temporal_patch_size", "temporal_patch_size")):
        if getattr(ip, attr, None) is not None and getattr(vc, source, None) is not None:
            value = getattr(vc, source)
            cur = _as_dict(getattr(ip, attr))
            if isinstance(cur, dict):
                value = {k: value for k in cur}
            kwargs[attr] = value
    for attr, value in ONE_VIEW.items():
        if getattr(ip, attr, None) is not None:
            kwargs[attr] = value
    pinpoints = getattr(ip, "image_grid_pinpoints", None)
    if size and pinpoints and _ORIG_IMAGE_SIZE.get("size"):
        kwargs["image_grid_pinpoints"] = _scale_pinpoints(pinpoints, size / _ORIG_IMAGE_SIZE["size"])
    if hasattr(ip, "image_seq_length") and ip.image_seq_length is None or isinstance(getattr(ip, "image_seq_length", None), int):
        kwargs["image_seq_length"] = _patches(config) or 16  # read by some processors; the probe corrects it
    if size:
        for attr in ("tile_size", "scale_resolution"):
            if isinstance(getattr(ip, attr, None), int):
                kwargs[attr] = size
    kwargs.update(ov_ip)
    return kwargs


def sync_image_processor(cls, config, ov_ip: dict):
    """Build an image (or video) processor, then rebuild it sized to the shrunk vision config."""
    ip = cls(**ov_ip) if ov_ip else cls()
    kwargs = image_processor_kwargs(ip, config, ov_ip)
    if not kwargs:
        return ip
    try:
        ip = cls(**kwargs)
    except TypeError:
        pass
    for key, value in kwargs.items():
        if _as_dict(getattr(ip, key, None)) != value:
            setattr(ip, key, value)
    return ip


def build_image_processor(model_type, config, ov):
    from transformers.models.auto.image_processing_auto import (
        IMAGE_PROCESSOR_MAPPING_NAMES,
        get_image_processor_class_from_name,
    )

    names = _pick(_mapped(IMAGE_PROCESSOR_MAPPING_NAMES, model_type, config))
    errors = []
    for name in names:
        try:
            cls = get_image_processor_class_from_name(name)
            if cls is None:
                raise ImportError(f"{name} not found")
            return sync_image_processor(cls, config, ov.get("image_processor", {}))
        except Exception as exc:  # try the next backend
            errors.append(f"{name}: {type(exc).__name__}: {_first_line(exc)}")
    if errors:
        raise TwinError("image processor: " + "; ".join(errors))
    return None


def build_video_processor(model_type, config, ov):
    from transformers.models.auto.video_processing_auto import (
        VIDEO_PROCESSOR_MAPPING_NAMES,
        video_processor_class_from_name,
    )

    from neuronhelpers.verdict.causes import module_installed

    if not module_installed("torchvision"):
        # transformers maps no video processor then, which would read as the twin's failure: it is a missing package
        raise ModuleNotFoundError(f"No module named 'torchvision' ({model_type}'s processor takes a video processor, "
                                  "and transformers' video processors need it)", name="torchvision")
    for name in _pick(_mapped(VIDEO_PROCESSOR_MAPPING_NAMES, model_type, config)):
        cls = video_processor_class_from_name(name)
        if cls is not None:
            return sync_image_processor(cls, config, ov.get("video_processor", {}))
    return None


def build_feature_extractor(model_type, config, ov):
    from transformers.models.auto.feature_extraction_auto import (
        FEATURE_EXTRACTOR_MAPPING_NAMES,
        feature_extractor_class_from_name,
    )

    for name in _pick(_mapped(FEATURE_EXTRACTOR_MAPPING_NAMES, model_type, config)):
        cls = feature_extractor_class_from_name(name)
        if cls is not None:
            return cls()
    return None


# ---------------------------------------------------------------------------------------------
# processor
# ---------------------------------------------------------------------------------------------


def processor_class(model_type, config):
    import importlib

    from transformers.models.auto.configuration_auto import model_type_to_module_name
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name
    from transformers.processing_utils import ProcessorMixin

    ov = VLM_OVERRIDES.get(model_type, {})
    if ov.get("processor_class"):
        return processor_class_from_name(ov["processor_class"])
    if PROCESSOR_MAPPING_NAMES.get(model_type):
        return processor_class_from_name(PROCESSOR_MAPPING_NAMES[model_type])
    # a processor class defined in the model's own module
    try:
        module = importlib.import_module(f"transformers.models.{model_type_to_module_name(model_type)}")
        for attr in dir(module):
            obj = getattr(module, attr)
            if isinstance(obj, type) and issubclass(obj, ProcessorMixin) and obj is not ProcessorMixin:
                return obj
    except Exception:
        pass
    name = _mapped(PROCESSOR_MAPPING_NAMES, model_type, config)
    return processor_class_from_name(name) if name else None


def _config_value(config, name):
    """A value named ``name`` anywhere in the config tree (top level first, then vision, then text)."""
    configs = [config] + [sub for path, sub, role in walk_configs(config) if role == "vision" and path != "config"]
    configs += [sub for path, sub, role in walk_configs(config) if role == "text" and path != "config"]
    for c in configs:
        if _has(c, name):
            value = _get(c, name)
            if value is not None:
                return value
    return None


_SEQ_NAMES = ("image_seq_length", "image_seq_len", "num_image_tokens", "tokens_per_image", "mm_tokens_per_image")


def processor_kwargs(cls, config, ov):
    """Init keyword arguments of the processor class, filled from the config by name."""
    sig = inspect.signature(cls.__init__)
    kwargs = {}
    for name, param in sig.parameters.items():
        if name in ("self", "chat_template") or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        if name in cls.get_attributes():
            continue
        value = _config_value(config, name)
        if value is not None and not isinstance(value, (dict,)) and not hasattr(value, "to_dict"):
            kwargs[name] = value
        elif name in _SEQ_NAMES and param.default is None:
            kwargs[name] = _patches(config) or 16  # a first guess; the probe corrects it
        elif name in ("img_size", "image_size", "tile_size") and _image_size(vision_config(config)):
            kwargs[name] = _image_size(vision_config(config))  # the edge the processor counts patches over
    kwargs.update(ov.get("processor", {}))
    return kwargs


def _patches(config):
    vc = vision_config(config)
    size, patch = _image_size(vc), _get(vc, "patch_size")
    return (size // patch) ** 2 if size and isinstance(patch, int) and patch else None


def _missing_attr(exc):
    m = re.search(r"(?:has no|missing required) attribute '?(\w+)'?", str(exc))
    return m.group(1) if m else None


def build_processor(model_type, config, parts, named, extra, ov, seq_len=None, placeholder=None):
    """Construct the processor; tokenizer attributes it asks for are added and it is built again."""
    cls = processor_class(model_type, config)
    if cls is None:
        raise TwinError("no processor class: none mapped, in the model's module, or for a sub-config")
    attrs = cls.get_attributes()
    for _ in range(12):
        tok = make_tokenizer(named, extra)
        args = {}
        for attr in attrs:
            if attr in ("tokenizer", "qformer_tokenizer"):
                args[attr] = tok
            elif attr in parts and parts[attr] is not None:
                args[attr] = parts[attr]
            else:
                raise TwinError(f"processor {cls.__name__} needs a '{attr}' the twin cannot build")
        kwargs = processor_kwargs(cls, config, ov)
        if seq_len is not None:
            for name in _SEQ_NAMES:
                if name in inspect.signature(cls.__init__).parameters:
                    kwargs[name] = seq_len
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                processor = cls(**args, **kwargs)
        except (AttributeError, ValueError) as exc:
            missing = _missing_attr(exc)
            if missing and missing.endswith("_id") and missing[:-3] not in named:
                missing = missing[:-3]
            if missing and (missing.endswith("_token") or missing.endswith("_tokens")) and missing not in named:
                named[missing] = _token_for(missing)
                continue
            raise
        except KeyError as exc:
            # the processor looks a token up in the vocabulary: add it
            token = exc.args[0] if exc.args else None
            if isinstance(token, str) and token and token not in extra and not token.isidentifier():
                extra.append(token)
                continue
            raise
        # tokens the processor read from the tokenizer and found missing (getattr(tokenizer, "x_token", None))
        unset = [k for k, v in vars(processor).items() if k.endswith("_token") and not k.startswith("_") and v is None
                 and k not in named]
        if unset:
            for key in unset:
                named[key] = _token_for(key)
            continue
        # every token string the processor uses must be a single special token of the tokenizer
        wanted = []
        for key, value in vars(processor).items():
            if key.endswith("_token") and value and (isinstance(value, str) or hasattr(value, "content")):
                wanted.append(str(value))
        new = [t for t in wanted if t not in extra and t not in named.values() and tok.convert_tokens_to_ids(t) in (None, tok.unk_token_id)]
        if new:
            extra.extend(new)
            continue
        processor.chat_template = _chat_template(processor, placeholder)
        return processor
    raise TwinError("processor construction did not settle (tokenizer attributes keep changing)")


def _chat_template(processor, placeholder=None):
    if placeholder is None:
        placeholder = str(getattr(processor, "image_token", None) or "")
    return _CHAT_TEMPLATE.replace("IMAGE_PLACEHOLDER", placeholder)


_PAIRS = (("start", "end"), ("begin", "end"), ("boi", "eoi"), ("bos", "eos"), ("open", "close"))


def placeholder_candidates(processor):
    """What the prompt may put where the image goes, as the processor names it, most likely first:
    its image token; the image token between a start / end pair of its tokens; nothing (it inserts itself)."""
    image = getattr(processor, "image_token", None)
    image = str(image) if image else None
    out = [str(v) for k, v in sorted(vars(processor).items()) if "placeholder" in k and isinstance(v, str) and v]
    out += [image] if image else []
    if image:
        tokens = {}
        for owner in (processor.tokenizer, processor):
            for key in dir(owner) if owner is processor else list(getattr(owner, "_special_tokens_map", {}) or {}) + list(
                    (getattr(owner, "extra_special_tokens", None) or {}) if isinstance(getattr(owner, "extra_special_tokens", None), dict) else {}):
                if key.endswith("_token") and not key.startswith("_"):
                    try:
                        value = getattr(owner, key)
                    except Exception:
                        continue
                    if value and (isinstance(value, str) or hasattr(value, "content")) and str(value) != image:
                        tokens.setdefault(key, str(value))
        for key, value in tokens.items():
            if not any(w in key for w in ("image", "img", "vision", "boi", "visual")):
                continue
            for a, b in _PAIRS:
                if a in key and key.replace(a, b) in tokens:
                    out.append(value + image + tokens[key.replace(a, b)])
    out.append("")
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------------------------------------
# token ids
# ---------------------------------------------------------------------------------------------

_TOKEN_ID = re.compile(r"^(\w+?)_(id|index)$")
_PLAIN = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "pad_token": "pad_token_id", "unk_token": "unk_token_id"}


def _safe(owner, key):
    try:
        return getattr(owner, key, None)
    except Exception:
        return None


def _lookup_token_id(tok, processor, base, named):
    """The id the tokenizer or processor gives ``base`` (e.g. image_token): the tokenizer's named token first
    (gemma3 keeps the expanded soft token there), then the processor's id, then token strings."""
    def valid(i):
        return isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(tok) and i != tok.unk_token_id

    def id_of(value):
        if value and (isinstance(value, str) or hasattr(value, "content")):
            i = tok.convert_tokens_to_ids(str(value))
            return i if valid(i) else None
        return None

    if base in named:
        return id_of(named[base])
    for candidate in (_safe(processor, base + "_id"), id_of(_safe(processor, base)), id_of(_safe(tok, base))):
        if valid(candidate):
            return candidate
    return None


def wire_token_ids(config, processor, named, extra):
    """Point every *_token_id / *_token_index of the config tree at a token of the twin's vocabulary.

    Returns True when tokens had to be added to the tokenizer (the processor must then be rebuilt)."""
    tok = processor.tokenizer
    added = False
    for path, sub, role in walk_configs(config):
        keys = [k for k in list(sub.__dict__) + list(getattr(sub, "attribute_map", {})) if not k.startswith("_")]
        for key in dict.fromkeys(keys):
            current = sub.__dict__.get(key)
            if key.endswith("_token_ids") and isinstance(current, (list, tuple)) and current and all(
                    isinstance(v, int) for v in current) and max(current) >= len(tok):
                # a list of special token ids from the real vocabulary: one fresh token each
                fresh = [f"<|{key[:-4]}_{i}|>" for i in range(len(current))]
                new = [t for t in fresh if t not in extra]
                if new:
                    extra.extend(new)
                    added = True
                    tok.add_special_tokens({"extra_special_tokens": new}, replace_extra_special_tokens=False)
                setattr(sub, key, type(current)(tok.convert_tokens_to_ids(t) for t in fresh))
                continue
            m = _TOKEN_ID.match(key)
            if not m or not m.group(1).endswith("token"):
                continue
            base = m.group(1)
            current = _get(sub, key)
            if isinstance(current, (list, tuple, dict)):
                continue
            if base in ("bos_token", "eos_token", "pad_token", "unk_token"):
                if current is not None or base != "unk_token":
                    setattr(sub, key, getattr(tok, _PLAIN[base]))
                continue
            if base == "decoder_start_token":
                setattr(sub, key, tok.bos_token_id)
                continue
            token_id = _lookup_token_id(tok, processor, base, named)
            if token_id is None:
                fresh = _token_for(base)
                if fresh not in extra:
                    extra.append(fresh)
                    added = True
                tok.add_special_tokens({"extra_special_tokens": [fresh]}, replace_extra_special_tokens=False)
                token_id = tok.convert_tokens_to_ids(fresh)
            try:
                setattr(sub, key, token_id)
            except Exception:
                pass
    return added


# ---------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------


def _first_line(exc):
    """One line: the message's first line, joined with the next when it only introduces it (ends with ':')."""
    text = [l.strip() for l in str(exc).strip().splitlines() if l.strip()]
    line = text[0] if text else ""
    if line.endswith(":") and len(text) > 1:
        line = f"{line} {text[1]}"
    return line[:300]


def test_image():
    """The recipe's test image (a PIL 64x64 gradient), so the probe sees what the eager check will."""
    from neuronhelpers.run.recipes.transformers_generate import test_image as recipe_image

    return recipe_image()


def prompt_inputs(processor):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor(text=text, images=[test_image()], return_tensors="pt")


def generate(model, processor, new_tokens=4):
    import torch

    inputs = prompt_inputs(processor)
    dtype = next(model.parameters()).dtype  # floats in the model's dtype, as the recipe passes them
    inputs = {k: (v.to(dtype) if hasattr(v, "is_floating_point") and v.is_floating_point() else v) for k, v in inputs.items()}
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
    seq = out.sequences if hasattr(out, "sequences") else out
    prompt_len = inputs["input_ids"].shape[1] if "input_ids" in inputs else 0
    if getattr(model.config, "is_encoder_decoder", False):
        return seq.shape[1] - 1  # decoder starts from the start token
    return seq.shape[1] - prompt_len


_MISMATCH = re.compile(r"tokens:?\s*(?:tensor\()?(\d+)\)?,?\s*features:?\s*(?:tensor\()?(\d+)")


def _make_model(config):
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(SEED)
    model = AutoModelForImageTextToText.from_config(config)
    model.eval()
    return model


_BRACKETED = re.compile(r"<[^<>\s]{1,48}>|\[[A-Z][A-Z0-9_]{1,30}\]|<\|[^|\s]{1,40}\|>")


def _expansion(processor, placeholder):
    """The text the processor makes of the prompt (placeholders expanded), and its input ids."""
    captured = {}
    original = processor.get_text_with_replacements

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        captured["text"] = out[0]
        return out

    processor.get_text_with_replacements = spy
    try:
        inputs = prompt_inputs(processor)
    finally:
        del processor.get_text_with_replacements
    text = captured.get("text")
    return (text[0] if isinstance(text, list) and text else text or ""), inputs


def _unknown_tokens(text, tok):
    """Bracketed token strings in the expanded prompt that the vocabulary lacks (they would be split into bytes)."""
    vocab = tok.get_vocab()
    return [t for t in dict.fromkeys(_BRACKETED.findall(text)) if t not in vocab]


def _image_token_keys(config):
    out = []
    for path, sub, role in walk_configs(config):
        for key in list(sub.__dict__) + list(getattr(sub, "attribute_map", {})):  # (molmo2: image_token_id -> image_patch_id)
            if re.fullmatch(r"image_token_(id|index)", key):
                out.append((sub, key))
    return out


def _probe(model, processor, model_type, config, parts, named, extra, ov):
    """Try the placeholder candidates; repair what the model's own errors point at. Returns
    (model, processor, error or None)."""
    import torch

    first_error = None
    for placeholder in placeholder_candidates(processor):
        seq_len = None
        trial = build_processor(model_type, config, parts, named, extra, ov, placeholder=placeholder)
        for attempt in range(6):
            inputs = None
            try:
                text, inputs = _expansion(trial, placeholder)
                unknown = _unknown_tokens(text, trial.tokenizer)
                if unknown:  # tokens the processor writes but the vocabulary lacks
                    extra.extend(unknown)
                    trial = build_processor(model_type, config, parts, named, extra, ov, seq_len=seq_len, placeholder=placeholder)
                    if wire_token_ids(config, trial, named, extra):
                        trial = build_processor(model_type, config, parts, named, extra, ov, seq_len=seq_len, placeholder=placeholder)
                    sync_vocab(config, trial.tokenizer)
                    model = _make_model(config)
                    continue
                generate(model, trial)
                return model, trial, None
            except Exception as exc:
                error = f"{type(exc).__name__}: {_first_line(exc)}"
                asked = re.search(r"tokenizer does not have an? `(\w+_token)`", str(exc))
                if asked and asked.group(1) not in named:  # the processor asks the tokenizer for a named token
                    named[asked.group(1)] = _token_for(asked.group(1))
                    trial = build_processor(model_type, config, parts, named, extra, ov, seq_len=seq_len, placeholder=placeholder)
                    wire_token_ids(config, trial, named, extra)
                    sync_vocab(config, trial.tokenizer)
                    model = _make_model(config)
                    continue
                missing = re.search(r"'(\w+)' object has no attribute '(\w+_token_(?:id|index))'", str(exc))
                if missing:  # the model reads a token id its default config lacks
                    for path, sub, role in walk_configs(config):
                        if type(sub).__name__ == missing.group(1):
                            base = missing.group(2).rsplit("_", 1)[0]
                            fresh = _token_for(base)
                            if fresh not in extra:
                                extra.append(fresh)
                            trial = build_processor(model_type, config, parts, named, extra, ov, seq_len=seq_len, placeholder=placeholder)
                            setattr(sub, missing.group(2), trial.tokenizer.convert_tokens_to_ids(fresh))
                            sync_vocab(config, trial.tokenizer)
                            model = _make_model(config)
                            break
                    continue
                m = _MISMATCH.search(str(exc))
                if not m:
                    break
                tokens, features = int(m.group(1)), int(m.group(2))
                width = model.config.get_text_config().hidden_size
                if features > 256 and features % width == 0:
                    features //= width  # some models report the feature numel
                if tokens == 0 and inputs is not None:
                    # the config's image token is not what the processor repeats: point it there
                    ids = inputs["input_ids"][0].tolist()
                    specials = set(trial.tokenizer.added_tokens_decoder) - {
                        trial.tokenizer.bos_token_id, trial.tokenizer.eos_token_id, trial.tokenizer.pad_token_id}
                    counts = {i: ids.count(i) for i in set(ids) if i in specials}
                    keys = _image_token_keys(config)
                    if not counts or not keys:
                        break
                    best = max(counts, key=lambda i: (counts[i], i))
                    for sub, key in keys:
                        setattr(sub, key, best)
                    model = _make_model(config)
                    continue
                if inputs is not None and features != tokens:
                    # another of the processor's tokens is repeated once per feature (llama4's <|patch|>, where
                    # <|image|> only marks the place): the model's image token is that one
                    ids = inputs["input_ids"][0].tolist()
                    specials = set(trial.tokenizer.added_tokens_decoder) - {
                        trial.tokenizer.bos_token_id, trial.tokenizer.eos_token_id, trial.tokenizer.pad_token_id}
                    repeated = [i for i in set(ids) if i in specials and ids.count(i) == features]
                    keys = _image_token_keys(config)
                    if len(repeated) == 1 and keys and not all(_get(sub, key) == repeated[0] for sub, key in keys):
                        for sub, key in keys:
                            setattr(sub, key, repeated[0])
                        model = _make_model(config)
                        continue
                if features == tokens:
                    break  # not a sequence length problem
                has_seq = any(isinstance(getattr(trial, n, None), int) for n in _SEQ_NAMES)
                if hasattr(trial, "num_additional_image_tokens") and not has_seq:
                    ov = {**ov, "processor": {**ov.get("processor", {}),
                          "num_additional_image_tokens": trial.num_additional_image_tokens + features - tokens}}
                else:
                    current = next((getattr(trial, n) for n in _SEQ_NAMES if isinstance(getattr(trial, n, None), int)), None)
                    if current is None:
                        current = getattr(trial.image_processor, "image_seq_length", None)
                    # the processor may repeat its sequence per view (tiles): scale it by features / tokens
                    if isinstance(current, int) and current and (current * features) % tokens == 0:
                        seq_len = current * features // tokens
                    else:
                        seq_len = features
                trial = build_processor(model_type, config, parts, named, extra, ov, seq_len=seq_len, placeholder=placeholder)
                if seq_len is not None:
                    if hasattr(trial.image_processor, "image_seq_length"):
                        trial.image_processor.image_seq_length = seq_len
                    for name in _SEQ_NAMES:
                        if hasattr(trial, name):
                            setattr(trial, name, seq_len)
        first_error = first_error or (trial, error)
    trial, error = first_error
    return model, trial, error


def build_vlm_twin(model_type: str, folder) -> Path:
    """Build the tiny twin of ``model_type`` into ``folder``; raise TwinError (one line) when it cannot."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _build(model_type, Path(folder))
    except TwinError:
        raise
    except Exception as exc:
        raise TwinError(f"{type(exc).__name__}: {_first_line(exc)}") from exc
    finally:
        hf_logging.set_verbosity(verbosity)


def _check_model_class(model_type):
    """Refuse model classes run.py cannot drive: no image input, or no generate()."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    cls = getattr(transformers, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type], None)
    if cls is None:
        return
    params = inspect.signature(cls.forward).parameters
    if not any(w in p for p in params for w in ("pixel", "patches", "image")) and not hasattr(cls, "get_image_features"):
        raise TwinError(f"{cls.__name__}.forward takes no image input (no pixel_values): listed in the image-text-to-text "
                        "mapping but not an image-text model")
    if not hasattr(cls, "generate"):
        raise TwinError(f"{cls.__name__} has no generate(): not a text generator (run.py cannot drive it)")


def _build(model_type, folder):
    import torch

    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    if model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        raise TwinError(f"{model_type} is not an image-text-to-text model type")
    ov = VLM_OVERRIDES.get(model_type, {})
    if ov.get("skip"):
        raise TwinError(ov["why"])
    _check_model_class(model_type)
    config = build_config(model_type, ov)
    parts = {
        "image_processor": build_image_processor(model_type, config, ov),
    }
    cls = processor_class(model_type, config)
    attrs = cls.get_attributes() if cls else []
    if "video_processor" in attrs:
        parts["video_processor"] = build_video_processor(model_type, config, ov)
    if "feature_extractor" in attrs:
        parts["feature_extractor"] = build_feature_extractor(model_type, config, ov)
    named: dict[str, str] = dict(ov.get("tokens", {}))
    extra: list[str] = list(ov.get("extra_tokens", [])) + (codebook_tokens(config, ov["codebook"]) if ov.get("codebook") else [])
    processor = build_processor(model_type, config, parts, named, extra, ov)
    if wire_token_ids(config, processor, named, extra):
        processor = build_processor(model_type, config, parts, named, extra, ov)
        wire_token_ids(config, processor, named, extra)
    tok = processor.tokenizer
    sync_vocab(config, tok)
    model = _make_model(config)
    n_params = sum(p.numel() for p in model.parameters())
    if n_params > MAX_PARAMS:
        raise TwinError(f"config cannot be shrunk below {MAX_PARAMS/1e6:.0f}M parameters: {n_params/1e6:.1f}M")

    # probe: choose where the prompt puts the image (from the processor's own tokens), and fit the
    # processor's image sequence length to the model's feature count
    model, processor, probe_error = _probe(model, processor, model_type, config, parts, named, extra, ov)
    tok = processor.tokenizer
    n_params = sum(p.numel() for p in model.parameters())

    with torch.no_grad():
        head = model.get_output_embeddings()
        if head is not None and getattr(head, "weight", None) is not None:
            head.weight.mul_(LOGIT_SCALE)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tok.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
