"""A vision-language twin's processor: the class (PROCESSOR_MAPPING_NAMES, the model's own module, or the processor
of a related type), its ``__init__`` keyword arguments filled from the config by name, and the tokenizer grown until
the processor settles (every token it asks for or writes is a special token of the twin's vocabulary); and where
the prompt may put the image, as the processor names it.
"""

from __future__ import annotations

import inspect
import logging
import re
import warnings

from neuronhelpers.core.errors import first_line
from neuronhelpers.twins.configs import get, has, image_size, vision_config, walk_configs
from neuronhelpers.twins.overrides import override
from neuronhelpers.twins.specs import TwinError
from neuronhelpers.twins.tokenizers import chat_template, make_tokenizer, token_for
from neuronhelpers.twins.vision.images import mapped, patches

log = logging.getLogger("neuronhelpers.twins")

# Processor attributes (and init arguments) that say how many tokens one image becomes.
SEQ_NAMES = ("image_seq_length", "image_seq_len", "num_image_tokens", "tokens_per_image", "mm_tokens_per_image")
_PAIRS = (("start", "end"), ("begin", "end"), ("boi", "eoi"), ("bos", "eos"), ("open", "close"))
_SETTLE_ROUNDS = 12


def safe_getattr(owner, key):
    """getattr, or None when the attribute refuses to be read (a tokenizer property of a token it lacks); logged."""
    try:
        return getattr(owner, key, None)
    except Exception as exc:  # noqa: BLE001 - tokenizer and processor properties raise what they like: recorded
        log.debug("%s.%s cannot be read: %s", type(owner).__name__, key, first_line(exc, name=True))
        return None


def _own_processor_class(model_type):
    """A processor class defined in the model's own module, or None."""
    import importlib

    from transformers.models.auto.configuration_auto import model_type_to_module_name
    from transformers.processing_utils import ProcessorMixin

    try:
        module = importlib.import_module(f"transformers.models.{model_type_to_module_name(model_type)}")
        for attr in dir(module):
            obj = getattr(module, attr)
            if isinstance(obj, type) and issubclass(obj, ProcessorMixin) and obj is not ProcessorMixin:
                return obj
    except Exception as exc:  # noqa: BLE001 - the module or a lazy name does not import (ImportError, RuntimeError)
        log.debug("transformers.models for %s has no importable processor: %s", model_type, first_line(exc, name=True))
    return None


def processor_class(model_type, config):
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name

    ov = override(model_type)
    if ov.processor_class:
        return processor_class_from_name(ov.processor_class)
    if PROCESSOR_MAPPING_NAMES.get(model_type):
        return processor_class_from_name(PROCESSOR_MAPPING_NAMES[model_type])
    own = _own_processor_class(model_type)
    if own is not None:
        return own
    name = mapped(PROCESSOR_MAPPING_NAMES, model_type, config)
    return processor_class_from_name(name) if name else None


def _config_value(config, name):
    """A value named ``name`` anywhere in the config tree (top level first, then vision, then text)."""
    configs = [config] + [sub for path, sub, role in walk_configs(config) if role == "vision" and path != "config"]
    configs += [sub for path, sub, role in walk_configs(config) if role == "text" and path != "config"]
    for c in configs:
        if has(c, name):
            value = get(c, name)
            if value is not None:
                return value
    return None


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
        elif name in SEQ_NAMES and param.default is None:
            kwargs[name] = patches(config) or 16  # a first guess; the probe corrects it
        elif name in ("img_size", "image_size", "tile_size") and image_size(vision_config(config)):
            kwargs[name] = image_size(vision_config(config))  # the edge the processor counts patches over
    kwargs.update(ov.processor)
    return kwargs


def _missing_attr(exc):
    m = re.search(r"(?:has no|missing required) attribute '?(\w+)'?", str(exc))
    return m.group(1) if m else None


def _processor_args(cls, attrs, parts, tok) -> dict:
    """The processor's parts: the twin's tokenizer, and the image / video processor or feature extractor built."""
    args = {}
    for attr in attrs:
        if attr in ("tokenizer", "qformer_tokenizer"):
            args[attr] = tok
        elif attr in parts and parts[attr] is not None:
            args[attr] = parts[attr]
        else:
            raise TwinError(f"processor {cls.__name__} needs a '{attr}' the twin cannot build")
    return args


def _asked_for(exc, named, extra) -> bool:
    """The processor's constructor failed for a token it looks up: name it (or add it); False when it is not that."""
    if isinstance(exc, KeyError):
        # the processor looks a token up in the vocabulary: add it
        token = exc.args[0] if exc.args else None
        if isinstance(token, str) and token and token not in extra and not token.isidentifier():
            extra.append(token)
            return True
        return False
    missing = _missing_attr(exc)
    if missing and missing.endswith("_id") and missing[:-3] not in named:
        missing = missing[:-3]
    if missing and (missing.endswith("_token") or missing.endswith("_tokens")) and missing not in named:
        named[missing] = token_for(missing)
        return True
    return False


def _tokens_to_add(processor, tok, named, extra) -> bool:
    """Tokens the processor read from the tokenizer and found missing, and token strings it uses that are no single
    special token of the tokenizer: added to ``named`` / ``extra``; True when any was."""
    unset = [k for k, v in vars(processor).items() if k.endswith("_token") and not k.startswith("_") and v is None
             and k not in named]
    if unset:
        for key in unset:
            named[key] = token_for(key)
        return True
    wanted = [str(value) for key, value in vars(processor).items()
              if key.endswith("_token") and value and (isinstance(value, str) or hasattr(value, "content"))]
    new = [t for t in wanted if t not in extra and t not in named.values()
           and tok.convert_tokens_to_ids(t) in (None, tok.unk_token_id)]
    extra.extend(new)
    return bool(new)


def build_processor(model_type, config, parts, named, extra, ov, seq_len=None, placeholder=None):
    """Construct the processor; tokenizer attributes it asks for are added and it is built again."""
    cls = processor_class(model_type, config)
    if cls is None:
        raise TwinError("no processor class: none mapped, in the model's module, or for a sub-config")
    attrs = cls.get_attributes()
    for _ in range(_SETTLE_ROUNDS):
        tok = make_tokenizer(named, extra)
        args = _processor_args(cls, attrs, parts, tok)
        kwargs = processor_kwargs(cls, config, ov)
        if seq_len is not None:
            for name in SEQ_NAMES:
                if name in inspect.signature(cls.__init__).parameters:
                    kwargs[name] = seq_len
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                processor = cls(**args, **kwargs)
        except (AttributeError, ValueError, KeyError) as exc:  # a token the processor asks for: add it and retry
            if _asked_for(exc, named, extra):
                continue
            raise
        if _tokens_to_add(processor, tok, named, extra):
            continue
        processor.chat_template = _chat_template(processor, placeholder)
        return processor
    raise TwinError("processor construction did not settle (tokenizer attributes keep changing)")


def _chat_template(processor, placeholder=None):
    if placeholder is None:
        placeholder = str(getattr(processor, "image_token", None) or "")
    return chat_template(placeholder)


def _named_tokens(processor, image):
    """The processor's (and its tokenizer's) named tokens other than the image token: attribute -> token string."""
    tokens = {}
    tokenizer = processor.tokenizer
    extras = getattr(tokenizer, "extra_special_tokens", None)
    for owner in (tokenizer, processor):
        keys = dir(owner) if owner is processor else list(getattr(owner, "_special_tokens_map", {}) or {}) + list(
            extras if isinstance(extras, dict) else {})
        for key in keys:
            if key.endswith("_token") and not key.startswith("_"):
                value = safe_getattr(owner, key)
                if value and (isinstance(value, str) or hasattr(value, "content")) and str(value) != image:
                    tokens.setdefault(key, str(value))
    return tokens


def placeholder_candidates(processor):
    """What the prompt may put where the image goes, as the processor names it, most likely first:
    its image token; the image token between a start / end pair of its tokens; nothing (it inserts itself)."""
    image = getattr(processor, "image_token", None)
    image = str(image) if image else None
    out = [str(v) for k, v in sorted(vars(processor).items()) if "placeholder" in k and isinstance(v, str) and v]
    out += [image] if image else []
    if image:
        tokens = _named_tokens(processor, image)
        for key, value in tokens.items():
            if not any(w in key for w in ("image", "img", "vision", "boi", "visual")):
                continue
            for a, b in _PAIRS:
                if a in key and key.replace(a, b) in tokens:
                    out.append(value + image + tokens[key.replace(a, b)])
    out.append("")
    return list(dict.fromkeys(out))
