"""Token wiring of a vision-language twin: every ``*_token_id`` / ``*_token_index`` of the config tree pointed at the
token the processor or tokenizer names (a fresh special token when neither does), lists of special token ids given
one fresh token each, and the VQ codebook tokens some models name in their vocabulary.
"""

from __future__ import annotations

import re

from neuronhelpers.twins.configs import get, try_setattr, walk_configs
from neuronhelpers.twins.tokenizers import token_for
from neuronhelpers.twins.vision.processors import safe_getattr

_TOKEN_ID = re.compile(r"^(\w+?)_(id|index)$")
_PLAIN = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "pad_token": "pad_token_id",
          "unk_token": "unk_token_id"}


def codebook_tokens(config, spec: dict) -> list[str]:
    """One token per image code (``spec``: the token's ``format``, and ``digits`` that spell the code's digits)."""
    size = next((v for path, sub, role in walk_configs(config) for k in ("codebook_size", "num_embeddings")
                 if isinstance(v := sub.__dict__.get(k), int) and not isinstance(v, bool)), 0)
    digits = spec.get("digits")
    return [spec["format"].format("".join(digits[int(c)] for c in str(i)) if digits else i) for i in range(size)]


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
    for candidate in (safe_getattr(processor, base + "_id"), id_of(safe_getattr(processor, base)),
                      id_of(safe_getattr(tok, base))):
        if valid(candidate):
            return candidate
    return None


def _wire_id_list(sub, key, current, tok, extra) -> bool:
    """A list of special token ids from the real vocabulary: one fresh token each. True when tokens were added."""
    fresh = [f"<|{key[:-4]}_{i}|>" for i in range(len(current))]
    new = [t for t in fresh if t not in extra]
    if new:
        extra.extend(new)
        tok.add_special_tokens({"extra_special_tokens": new}, replace_extra_special_tokens=False)
    setattr(sub, key, type(current)(tok.convert_tokens_to_ids(t) for t in fresh))
    return bool(new)


def _wire_id(sub, key, base, tok, processor, named, extra) -> bool:
    """One ``<base>_id`` attribute pointed at its token. True when a token was added."""
    if base in _PLAIN:
        if get(sub, key) is not None or base != "unk_token":
            setattr(sub, key, getattr(tok, _PLAIN[base]))
        return False
    if base == "decoder_start_token":
        setattr(sub, key, tok.bos_token_id)
        return False
    added = False
    token_id = _lookup_token_id(tok, processor, base, named)
    if token_id is None:
        fresh = token_for(base)
        if fresh not in extra:
            extra.append(fresh)
            added = True
        tok.add_special_tokens({"extra_special_tokens": [fresh]}, replace_extra_special_tokens=False)
        token_id = tok.convert_tokens_to_ids(fresh)
    try_setattr(sub, key, token_id)
    return added


def wire_token_ids(config, processor, named, extra):
    """Point every *_token_id / *_token_index of the config tree at a token of the twin's vocabulary.

    Returns True when tokens had to be added to the tokenizer (the processor must then be rebuilt)."""
    tok = processor.tokenizer
    added = False
    for _path, sub, _role in walk_configs(config):
        keys = [k for k in list(sub.__dict__) + list(getattr(sub, "attribute_map", {})) if not k.startswith("_")]
        for key in dict.fromkeys(keys):
            current = sub.__dict__.get(key)
            if key.endswith("_token_ids") and isinstance(current, (list, tuple)) and current and all(
                    isinstance(v, int) for v in current) and max(current) >= len(tok):
                added = _wire_id_list(sub, key, current, tok, extra) or added
                continue
            m = _TOKEN_ID.match(key)
            if not m or not m.group(1).endswith("token") or isinstance(get(sub, key), (list, tuple, dict)):
                continue
            added = _wire_id(sub, key, m.group(1), tok, processor, named, extra) or added
    return added


def image_token_keys(config):
    """(config, attribute) of every image token id in the tree (molmo2: image_token_id -> image_patch_id)."""
    out = []
    for _path, sub, _role in walk_configs(config):
        for key in list(sub.__dict__) + list(getattr(sub, "attribute_map", {})):
            if re.fullmatch(r"image_token_(id|index)", key):
                out.append((sub, key))
    return out
