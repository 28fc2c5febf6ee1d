"""A vision-language twin's image processor, video processor and feature extractor: the classes transformers maps to
the model type (or to the nearest related type: same model class, same processor, a sub-config's type, a shorter
name of the family), PIL backend first, rebuilt sized to the shrunk vision config.
"""

from __future__ import annotations

import re

from neuronhelpers.core.errors import first_line
from neuronhelpers.twins.configs import Geometry, get, image_size, scale_pinpoints, vision_config, walk_configs
from neuronhelpers.twins.overrides import override
from neuronhelpers.twins.specs import TwinError

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
_PATCH_ATTRS = (("patch_size", "patch_size"), ("encoder_patch_size", "patch_size"), ("vision_patch_size", "patch_size"),
                ("merge_size", "spatial_merge_size"), ("temporal_patch_size", "temporal_patch_size"))


def _stems(model_type):
    """qwen2_5_omni_thinker -> [qwen2_5_omni_thinker, qwen2_5_omni, qwen2_5, qwen2]: shorter names of one family."""
    parts = re.split(r"([_-])", model_type)
    return ["".join(parts[:i]) for i in range(len(parts), 0, -2)]


def related_types(model_type, config):
    """Model types whose auto-mapping entries a twin may borrow, nearest first: the type itself, types sharing
    its model class or processor class, its sub-configs' types, then shorter names of the same family."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES as MODELS
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    out = [model_type]
    model_class = MODELS.get(model_type)
    out += [t for t, c in MODELS.items() if c == model_class]
    proc = override(model_type).processor_class or PROCESSOR_MAPPING_NAMES.get(model_type)
    if proc:
        out += [t for t, c in PROCESSOR_MAPPING_NAMES.items() if c == proc]
    subs = [getattr(sub, "model_type", None) for path, sub, role in walk_configs(config) if path != "config"]
    subs = [t for t in subs if t]
    out += subs
    for t in [model_type] + subs:
        out += _stems(t)[1:]
    return [t for t in dict.fromkeys(out) if len(t) > 2]


def mapped(mapping: dict, model_type: str, config):
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


def _as_dict(value):
    """A size attribute as a plain dict of its set fields (SizeDict keeps unset ones as None)."""
    if value is None or isinstance(value, (int, float)):
        return value
    if hasattr(value, "keys"):
        return {k: value[k] for k in value.keys() if value[k] is not None}
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if v is not None and not k.startswith("_")}
    return value


def patches(config):
    """The shrunk tower's patch count per image (a first guess at an image's token count)."""
    vc = vision_config(config)
    size, patch = image_size(vc), get(vc, "patch_size")
    return (size // patch) ** 2 if size and isinstance(patch, int) and patch else None


def _edge_kwargs(ip, size, vc, original: Geometry) -> dict:
    """Edges: the processor's sizes set to the shrunk image edge, or to the shrunk patch (a processor that cuts
    images into patches, or merged patches, of the tower's size: inkling)."""
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
    patch, old_patch = get(vc, "patch_size"), original.patch
    cur = _as_dict(getattr(ip, "size", None))
    merge = get(vc, "spatial_merge_size") or 1
    for unit in ((1, merge) if not size and isinstance(patch, int) and isinstance(old_patch, int)
                 and isinstance(cur, dict) and cur else ()):
        if all(v == old_patch * unit for v in cur.values()):
            kwargs["size"] = {k: patch * unit for k in cur}
    return kwargs


def image_processor_kwargs(ip, config, ov_ip: dict, original: Geometry) -> dict:
    """Init kwargs that size an image (or video) processor to the shrunk vision config (``original``: the default
    config's tower geometry, which the processor's own defaults were made for)."""
    vc = vision_config(config)
    size = image_size(vc)
    kwargs = _edge_kwargs(ip, size, vc, original)
    for attr, source in _PATCH_ATTRS:
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
    if size and pinpoints and original.size:
        kwargs["image_grid_pinpoints"] = scale_pinpoints(pinpoints, size / original.size)
    if hasattr(ip, "image_seq_length") and ip.image_seq_length is None or isinstance(
            getattr(ip, "image_seq_length", None), int):
        kwargs["image_seq_length"] = patches(config) or 16  # read by some processors; the probe corrects it
    if size:
        for attr in ("tile_size", "scale_resolution"):
            if isinstance(getattr(ip, attr, None), int):
                kwargs[attr] = size
    kwargs.update(ov_ip)
    return kwargs


def sync_image_processor(cls, config, ov_ip: dict, original: Geometry):
    """Build an image (or video) processor, then rebuild it sized to the shrunk vision config."""
    ip = cls(**ov_ip) if ov_ip else cls()
    kwargs = image_processor_kwargs(ip, config, ov_ip, original)
    if not kwargs:
        return ip
    try:
        ip = cls(**kwargs)
    except TypeError:  # an init that takes some of these only as attributes: they are set one by one below
        pass
    for key, value in kwargs.items():
        if _as_dict(getattr(ip, key, None)) != value:
            setattr(ip, key, value)
    return ip


def build_image_processor(model_type, config, ov, original: Geometry):
    from transformers.models.auto.image_processing_auto import (
        IMAGE_PROCESSOR_MAPPING_NAMES,
        get_image_processor_class_from_name,
    )

    names = _pick(mapped(IMAGE_PROCESSOR_MAPPING_NAMES, model_type, config))
    errors = []
    for name in names:
        try:
            cls = get_image_processor_class_from_name(name)
            if cls is None:
                raise ImportError(f"{name} not found")
            return sync_image_processor(cls, config, ov.image_processor, original)
        except Exception as exc:  # noqa: BLE001 - try the next backend; each one's reason is kept for the error below
            errors.append(f"{name}: {first_line(exc, name=True)}")
    if errors:
        raise TwinError("image processor: " + "; ".join(errors))
    return None


def build_video_processor(model_type, config, ov, original: Geometry):
    from transformers.models.auto.video_processing_auto import (
        VIDEO_PROCESSOR_MAPPING_NAMES,
        video_processor_class_from_name,
    )

    from neuronhelpers.verdict.causes import module_installed

    if not module_installed("torchvision"):
        # transformers maps no video processor then, which would read as the twin's failure: it is a missing package
        raise ModuleNotFoundError(f"No module named 'torchvision' ({model_type}'s processor takes a video processor, "
                                  "and transformers' video processors need it)", name="torchvision")
    for name in _pick(mapped(VIDEO_PROCESSOR_MAPPING_NAMES, model_type, config)):
        cls = video_processor_class_from_name(name)
        if cls is not None:
            return sync_image_processor(cls, config, ov.video_processor, original)
    return None


def build_feature_extractor(model_type, config, ov):
    from transformers.models.auto.feature_extraction_auto import (
        FEATURE_EXTRACTOR_MAPPING_NAMES,
        feature_extractor_class_from_name,
    )

    for name in _pick(mapped(FEATURE_EXTRACTOR_MAPPING_NAMES, model_type, config)):
        cls = feature_extractor_class_from_name(name)
        if cls is not None:
            return cls()
    return None
