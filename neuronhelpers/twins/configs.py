"""Reading a transformers config tree: every config in it with its role (text or vision), the attributes a config
has or derives in its constructor, a config rebuilt as loading will, the language side's vocabularies, and
``try_setattr`` (a config may refuse a value; the reason is logged, never lost). A leaf of the shrink machinery.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from functools import lru_cache
from typing import NamedTuple

from neuronhelpers.core.errors import first_line

log = logging.getLogger("neuronhelpers.twins")

_LAYER_COUNT_KEYS = ("num_hidden_layers", "depth", "num_layers", "n_layer", "encoder_layers", "decoder_layers")


def try_setattr(config, key: str, value) -> bool:
    """setattr, or False when the config refuses the value: the attribute keeps what it had and the reason is logged
    (debug level, logger ``neuronhelpers.twins``). A twin sets sizes by name on every config that has them; config
    classes validate in setters and properties (read-only derived sizes, strict-dataclass checks) and raise what
    they like, so any exception means "this config keeps its own value"."""
    try:
        setattr(config, key, value)
        return True
    except Exception as exc:  # noqa: BLE001 - the config's own validation, of any type: recorded below
        log.debug("%s.%s = %r refused: %s", type(config).__name__, key, value, first_line(exc, name=True))
        return False


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
    if any(w in name for w in ("vision", "vq", "audio", "perceiver", "qformer", "adapter", "sam", "protein",
                               "high_res")):
        return "vision"
    if name == "encoder" and not hasattr(config, "vocab_size"):
        return "vision"
    if hasattr(config, "vocab_size") or "text" in name or "decoder" in name:
        return "text"
    return "vision"


def has(config, key):
    return key in config.__dict__ or key in getattr(config, "attribute_map", {}) or (
        key in getattr(type(config), "__dataclass_fields__", {})
    )


@lru_cache(maxsize=None)
def derived(cls) -> tuple[frozenset, frozenset]:
    """What the config class computes in its constructor rather than takes: attributes that are not fields
    (deepseek's head_dim = qk_rope_head_dim), and fields whose default (None, "auto") the constructor replaces
    (xlnet's d_head = d_model // n_head, jamba's mamba_dt_rank). A twin sets the sizes they come from and lets the
    constructor derive them. A class that cannot be built with its defaults derives nothing we can know."""
    fields = {f.name: f.default for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    try:
        default = cls()
    except Exception as exc:  # noqa: BLE001 - the class's own validation of its defaults (any type): recorded below
        log.debug("%s() cannot be built with its defaults (%s): no derived attributes", cls.__name__,
                  first_line(exc, name=True))
        return frozenset(), frozenset()
    stored = {v for k, v in getattr(cls, "attribute_map", {}).items() if k in fields}  # a field kept under another name
    extra = ({k for k in default.__dict__ if not k.startswith("_") and k not in fields and k not in stored}
             if fields else set())
    filled = {k for k, d in fields.items()
              if d is not dataclasses.MISSING and isinstance(d, (type(None), int, float, str))
              and k in default.__dict__ and not same(default.__dict__[k], d)}
    return frozenset(extra), frozenset(filled)


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
        unchanged = {k for k in extra | filled if k in before and same(before[k], sub.__dict__.get(k))} - set(keep)
        for key in extra - set(keep) if before else ():
            data.pop(key, None)
        fields = {f.name: f.default for f in dataclasses.fields(type(sub))} if filled else {}
        for key in filled & unchanged:
            if key in data:
                data[key] = fields[key]
        for key, part in _sub_configs(sub):
            if isinstance(data.get(key), dict):
                clean(part, data[key])
        return data

    return type(config).from_dict(clean(config, config.to_dict()))


def same(a, b):
    """a == b as one bool; False for values whose == is elementwise or refuses (arrays, tensors)."""
    try:
        return bool(a == b)
    except Exception as exc:  # noqa: BLE001 - an elementwise == (arrays, tensors) has no one truth value: recorded
        log.debug("cannot compare %s with %s: %s", type(a).__name__, type(b).__name__, first_line(exc, name=True))
        return False


def get(config, key, default=None):
    """getattr that tolerates per-layer attributes refusing global access (gemma4's head_dim)."""
    try:
        return getattr(config, key, default)
    except Exception as exc:  # noqa: BLE001 - transformers' AmbiguousGlobalPerLayerAttributeError (a RuntimeError)
        log.debug("%s.%s has no global value (%s): the stored one is read", type(config).__name__, key,
                  first_line(exc, name=True))
        return config.__dict__.get(key, default)


def layer_count(config):
    for key in _LAYER_COUNT_KEYS:
        value = get(config, key) if has(config, key) else None
        if isinstance(value, int):
            return value
    return None


def ints(config):
    return {k: v for k, v in config.__dict__.items()
            if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_")}


def image_size(vc):
    size = getattr(vc, "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[0]
    return size if isinstance(size, int) else None


def vision_config(config):
    for path, sub, role in walk_configs(config):
        if role == "vision" and path != "config" and "vision" in path:
            return sub
    for path, sub, role in walk_configs(config):
        if role == "vision" and path != "config":
            return sub
    return config


def text_configs(config):
    """The configs that own a vocabulary (language model side)."""
    out = [sub for path, sub, role in walk_configs(config) if role == "text" and has(sub, "vocab_size")]
    if has(config, "vocab_size") and config not in out:
        out.append(config)
    return out


def set_vocab(config, size):
    """Every vocabulary of the language side (vocab_size, and per-layer-input vocabularies) is the twin tokenizer's."""
    for sub in text_configs(config):
        for key, value in list(sub.__dict__.items()):
            if "vocab_size" in key and isinstance(value, int) and not isinstance(value, bool) and (
                    key == "vocab_size" or value >= size):
                setattr(sub, key, size)


def sync_vocab(config, tok):
    """set_vocab to the tokenizer's size; a config that carries the tokenizer's vocabulary itself (chameleon's and
    emu3's vocabulary_map, which maps image codes to tokens) gets the twin tokenizer's."""
    set_vocab(config, len(tok))
    for _path, sub, _ in walk_configs(config):
        if "vocabulary_map" in sub.__dict__:
            sub.vocabulary_map = tok.get_vocab()


class Geometry(NamedTuple):
    """The vision tower's image edge and patch size (of the default config, before the shrink)."""

    size: int | None
    patch: int | None


def geometry(config) -> Geometry:
    vc = vision_config(config)
    return Geometry(image_size(vc), get(vc, "patch_size"))


def scale_pinpoints(pinpoints, factor):
    return [[max(1, round(v * factor)) for v in pair] for pair in pinpoints]
