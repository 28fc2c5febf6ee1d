"""Sizes that must follow the shrunk ones: widths linked to a shrunk width (a projector's input is the tower's
output), vision widths that feed the language model, multimodal rope sections sized to the shrunk head_dim, and
the number of tokens one image becomes. Used by the shrink (shrink.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from neuronhelpers.twins.configs import get, image_size, ints, try_setattr, vision_config, walk_configs

# Vision attributes that must equal the text width (the tower projects into the language model).
TO_TEXT_WIDTH = ("out_hidden_size", "text_hidden_size", "output_hidden_size")
_WIDTH_WORDS = {"hidden", "intermediate", "dim", "ffn", "mlp", "channels", "channel", "proj", "projection", "projector",
                "width", "embed", "model", "inner", "size"}
_NOT_WIDTH = {"image", "img", "patch", "vocab", "position", "positions", "window", "token", "tokens", "seq", "sampling",
              "resolution", "num", "max", "min", "codebook", "offset", "topk", "seed", "chunk", "scale", "extent",
              "floor", "len", "head", "lora", "rank", "id", "layers", "heads", "experts", "rate", "kernel", "stride",
              "group", "groups", "batch", "cache", "merge", "temporal", "spatial", "pool", "pooling", "query",
              "queries", "bins", "mel", "fft", "hop", "block", "step"}
# Width attributes that the shrink tables set; their original values define the old -> new width links.
_LINK_KEYS = ("hidden_size", "intermediate_size", "d_model", "embed_dim", "ffn_hidden_size", "n_inner", "d_ff",
              "encoder_ffn_dim", "decoder_ffn_dim", "moe_intermediate_size", "shared_expert_intermediate_size")
# Config attributes that say how many tokens one image becomes: set to the patch count of the shrunk tower.
_TOKENS_PER_IMAGE = ("mm_tokens_per_image", "image_seq_length", "num_image_tokens", "image_seq_len", "tokens_per_image")


def is_width(key):
    words = set(key.lower().split("_"))
    if words & _NOT_WIDTH:
        return False
    return bool(words & _WIDTH_WORDS) and key not in ("size",) or key in ("d_model", "d_ff", "n_inner", "n_embd")


def _links(tree, before, main_text):
    """old width -> new width, per config path; the text model's; and any config's (first one wins)."""
    links = {}
    for path, sub, _role in tree:
        for key in _LINK_KEYS:
            old, new = before[path].get(key), ints(sub).get(key)
            if old and new and old != new:
                links.setdefault(path, {})[old] = new
    text_links = {}
    for path, sub, _role in tree:
        if sub is main_text:
            text_links = links.get(path, {})
    any_links = {}
    for path in links:
        for old, new in links[path].items():
            any_links.setdefault(old, new)
    return links, text_links, any_links


def link_widths(tree, before, main_text, text_hidden_before, text_hidden, pinned):
    """An attribute that held a shrunk width (in its own config, else the text model's, else any tower's) takes that
    width's new value; a vision attribute that held the text width (an output projection into the language model)
    takes the new text width; a projector width with no link is made small. ``before``: each config's ints before the
    shrink, by path; ``pinned``: (path, key) pairs the family's override sets."""
    links, text_links, any_links = _links(tree, before, main_text)

    def linked(path, old):
        return links.get(path, {}).get(old) or text_links.get(old) or any_links.get(old)

    for path, sub, role in tree:
        now = ints(sub)
        for key, old in before[path].items():
            into_text = key.endswith(("_dim", "_hidden_size")) and now.get(key) == old and not (
                set(key.split("_")) & _NOT_WIDTH - {"image", "token"})  # (janus: image_token_embed_dim)
            if (path, key) in pinned or not (is_width(key) or into_text and role == "vision") or old < 16:
                continue
            if (role == "vision" and path != "config" and text_hidden_before and old == text_hidden_before
                    and key != "intermediate_size"):
                # a vision width equal to the text width stays equal (pix2struct's decoder attends to the encoder's
                # width)
                setattr(sub, key, text_hidden)
                continue
            if now.get(key) != old:
                continue  # already shrunk by the tables
            new = linked(path, old)
            if new is None and old >= 256:
                new = 2 * text_hidden  # a projector / adapter width with no link: small
            if new is not None:
                try_setattr(sub, key, new)
        for key, value in list(sub.__dict__.items()):
            # per-stage width lists (downsample_channels, ...): each element linked or made small
            if (path, key) in pinned or not is_width(key) or not isinstance(value, (list, tuple)) or not value:
                continue
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in value) or max(value) < 256:
                continue
            try_setattr(sub, key, type(value)(linked(path, v) or (2 * text_hidden if v >= 256 else v) for v in value))


def vision_to_text_width(tree, text_hidden, pinned):
    """Vision attributes that project into the language model take its (shrunk) width."""
    for path, sub, role in tree:
        if role == "vision" and path != "config":
            for key in TO_TEXT_WIDTH:
                if key in sub.__dict__ and (path, key) not in pinned:
                    setattr(sub, key, text_hidden)


def fit_tokens_per_image(config):
    vc = vision_config(config)
    size, patch = image_size(vc), getattr(vc, "patch_size", None)
    if not (size and isinstance(patch, int)):
        return
    patches = (size // patch) ** 2
    for _path, sub, _role in walk_configs(config):
        for key in _TOKENS_PER_IMAGE:
            if key in sub.__dict__ and isinstance(getattr(sub, key), int):
                setattr(sub, key, patches)


# ---- multimodal rope -------------------------------------------------------------------------------------------

def _split(total, parts):
    base = [total // parts] * parts
    for i in range(total - sum(base)):
        base[-1 - i] += 1
    return base


def _sections(total, original):
    """``total`` split into as many sections as ``original``; sections that were equal stay equal (ernie stacks its
    height and width sections), in proportion to the original where the even split would break that."""
    even = _split(total, len(original))
    if all(even[i] == even[j] for i in range(len(original)) for j in range(len(original))
           if original[i] == original[j]):
        return even
    whole = sum(original) or 1
    ideal = [total * v / whole for v in original]
    out = [int(x) for x in ideal]
    left = total - sum(out)
    groups = {}
    for i, v in enumerate(original):
        groups.setdefault(v, []).append(i)
    for _v, idx in sorted(groups.items(), key=lambda g: -(ideal[g[1][0]] - out[g[1][0]])):
        if 0 < len(idx) <= left:
            for i in idx:
                out[i] += 1
            left -= len(idx)
    out[-1] += left
    return out


def _modeling_file(config) -> tuple[Path, Path]:
    """(the config class's file, the modeling file next to it)."""
    path = getattr(sys.modules.get(type(config).__module__), "__file__", "") or ""
    return Path(path), Path(path.replace("configuration_", "modeling_"))


def _modeling_default(config, pattern):
    """A list of ints the modeling file next to the config's class falls back to (``pattern``'s group), or None."""
    try:
        m = re.search(pattern, _modeling_file(config)[1].read_text())
    except OSError:  # no modeling file next to the config (a config-only module): no default to read
        return None
    return [int(v) for v in m.group(1).split(",") if v.strip()] if m else None


def _modeling_mentions(config, word):
    """Whether the modeling file next to the config's class reads ``word`` (e.g. a rope default it falls back to)."""
    path, modeling = _modeling_file(config)
    try:
        return modeling != path and word in modeling.read_text()
    except OSError:  # no modeling file next to the config: it mentions nothing
        return False


# Rope parameters that hold one value per rotary frequency (head_dim * partial_rotary_factor / 2 of them).
_PER_FREQUENCY = ("short_factor", "long_factor")


def _resampled(values: list, n: int) -> list:
    """``n`` of ``values`` spread evenly from the first to the last (a per-frequency list for a smaller head keeps
    its range and its order)."""
    if n == 1:
        return [values[0]]
    return [values[round(i * (len(values) - 1) / (n - 1))] for i in range(n)]


def fix_rope(config):
    """Lists sized by the rotary frequencies, resized to the shrunk head_dim: multimodal rope's sections, longrope's
    per-frequency factors."""
    head_dim = get(config, "head_dim") or 16
    wants_mrope = "mrope_section" in (getattr(type(config), "ignore_keys_at_rope_validation", None) or ()) or (
        _modeling_mentions(config, "mrope_section"))
    rope = get(config, "rope_parameters")
    if not isinstance(rope, dict) or not rope:
        return
    nested = [v for v in rope.values() if isinstance(v, dict)]
    for params in nested or [rope]:
        factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0)
        half = int(head_dim * factor) // 2
        for name in _PER_FREQUENCY:  # longrope's factor per frequency: one per rotary dimension pair
            values = params.get(name)
            if isinstance(values, list) and len(values) > half > 0:
                params[name] = _resampled(values, half)
        section = params.get("mrope_section")
        if isinstance(section, list) and section:
            params["mrope_section"] = _sections(half, section)
        elif wants_mrope:  # the modeling code's own default sections (ernie's [22, 22, 20]) when it names one
            default = _modeling_default(config, r'mrope_section", \[([\d, ]+)\]')
            params["mrope_section"] = _sections(half, default) if default else _split(half, 3)
    config.rope_parameters = rope

