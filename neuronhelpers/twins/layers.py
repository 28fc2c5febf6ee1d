"""Per-layer attributes kept consistent with a shrunk depth: lists with one entry per layer (layer types, per-layer
widths), layer indices clamped into the new depth, dicts keyed by layer index (per-layer overrides) and references
of a model to its vision tower's layers. Used by the shrink (shrink.py).
"""

from __future__ import annotations

import json

from neuronhelpers.twins.configs import layer_count, try_setattr, vision_config, walk_configs

INDEX_WORDS = ("layer", "index", "indexes", "indices", "idx")  # names of per-layer index lists (own.py reads it too)


def layer_period(values: list) -> int:
    """The shortest period of a per-layer list (gemma3's five sliding layers then one full: 6); its length when it
    does not repeat."""
    for period in range(1, len(values) + 1):
        if all(values[i] == values[i % period] for i in range(len(values))):
            return period
    return len(values)


def resize_layer_list(config, key, value, before, after):
    """A list attribute after the depth went from ``before`` to ``after`` layers."""
    if len(value) == before:
        if 1 < after < before and all(value[i] == value[i % after] for i in range(before)):
            setattr(config, key, value[:after])  # a repeating pattern the new depth holds whole: kept as it is
            return
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
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value) and any(w in key for w in INDEX_WORDS):
        if all(-before <= v < before for v in value):
            new = [min(v, after - 1) if v >= 0 else max(v, -after) for v in value]
            setattr(config, key, new if isinstance(value, list) else tuple(new))


def resize_layer_dict(config, key, value, before, after, old_types, new_types):
    """A dict keyed by layer index (per-layer overrides): keep entries for layers of the same kind."""
    try:
        index = {int(k): k for k in value}
    except (TypeError, ValueError):  # keys that are not layer indices: not a per-layer dict, left as it is
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
    try_setattr(config, key, new)


def resize_per_layer(config, table, overrides, lists, dicts, before, after, counts):
    """Everything sized by the depth, once it changed: leading dense layers, shared-KV layers, per-layer lists and
    dicts (``lists``, ``dicts``: the config's values before the shrink; ``counts``: its int attributes now)."""
    for key, value in counts.items():
        if key in overrides or key in table:
            continue
        if key.startswith(("first_k", "num_dense")):  # leading dense layers: at least one later layer stays MoE
            setattr(config, key, min(value, after - 1))
        elif key == "num_kv_shared_layers":  # layers reusing earlier layers' KV: keep some of each (or all)
            setattr(config, key, after if value >= before else min(value, after // 2))
    for key, value in lists.items():
        if key in overrides or key in table:
            continue
        resize_layer_list(config, key, list(value), before, after)
    old_types = lists.get("layer_types")
    new_types = config.__dict__.get("layer_types")
    for key, value in dicts.items():
        if key in overrides or key in table:
            continue
        resize_layer_dict(config, key, value, before, after, old_types, new_types)


def move_per_layer_config(per_layer, before, after, old_types, new_types, globals_before, config):
    """A heterogeneous config's per-layer overrides (by layer index) moved onto the new layers of the same type, their
    sizes scaled as the global sizes were."""
    moved = {}
    for j in range(after):
        for i in sorted(per_layer):
            if i < before and (not old_types or not new_types or old_types[i] == new_types[j]) and (
                    old_types or i == j):
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
    return scaled


def remap_vision_layer_refs(config, before, pinned_keys):
    """Top-level references to vision layers (vision_feature_layer(s), ...) clamped into the shrunk tower
    (``pinned_keys``: top-level attributes the family's override sets, left alone)."""
    after = layer_count(vision_config(config))
    if not (before and after) or before == after:
        return

    def fit(v):
        if isinstance(v, bool) or not isinstance(v, int) or not (-before - 1 <= v <= before):
            return v
        return min(v, after) if v >= 0 else max(v, -after - 1)

    for key, value in list(config.__dict__.items()):
        if "layer" not in key or key in pinned_keys or key.startswith("_"):
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(config, key, fit(value))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            setattr(config, key, type(value)(fit(v) for v in value))
    # an adapter's own reference to the tower's layers (molmo2's adapter_config.vision_feature_layer)
    tower = vision_config(config)
    for _path, sub, _role in walk_configs(config):
        if sub is config or sub is tower:
            continue
        for key, value in list(sub.__dict__.items()):
            if "feature_layer" not in key or key.startswith("_"):
                continue
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(sub, key, min(fit(value), after - 1))
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
                setattr(sub, key, type(value)(min(fit(v), after - 1) for v in value))
