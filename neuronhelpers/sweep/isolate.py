"""Which field of a model's own config turns its architecture's verdict: ``causes --isolate``.

Where a model twin's verdict differs from its architecture twin's (analysis/answers.own_config_effects), the fields of
the model's config that differ from what its architecture twin starts from (the default config with the family's
overrides; sizes aside: own.is_size) are set back one at a time, in a fixed order (the sliding window and layer
types first, then rope scaling, then the other structural fields, plain numbers last), and the twin of each altered
config is built and run: at most ``MAX_RUNS`` per model. The field (or fields, ``isolate_model``) whose setting back
restores the architecture twin's verdict is named; else "not isolated". The answers land in the dataset folder
(``answers.ISOLATED_FILE``), which ``causes`` and notebook 05 read; the runs' rows are not results of any model and
are not recorded as rows.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import shutil
from pathlib import Path

from neuronhelpers.analysis.answers import ISOLATED_FILE, NOT_ISOLATED, own_config_effects, verdict_text
from neuronhelpers.core.settings import home

MAX_RUNS = 5
# what the catalog's biggest causes turn on: windows and layer kinds, and whether generate() keeps a cache at all
_FIRST = ("sliding", "window", "layer_types", "attention_type", "use_cache")
_BOOKKEEPING = {"_name_or_path", "transformers_version", "torch_dtype", "dtype", "architectures", "auto_map",
                "model_type", "id2label", "label2id", "bos_token_id", "eos_token_id", "pad_token_id",
                "quantization_config", "initializer_range"}


def architecture_config(model_type: str) -> dict:
    """What the architecture twin starts from, before its sizes shrink: the default config with the family's
    overrides (twins/overrides.py: mistral's twin has no sliding window, as Mistral-7B-v0.3 and later)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from neuronhelpers.twins.overrides import NO_OVERRIDE, OVERRIDES

    entry = OVERRIDES.get(model_type, NO_OVERRIDE)
    config = {**CONFIG_MAPPING[model_type]().to_dict(), **copy.deepcopy(entry.config)}
    if isinstance(config.get("text_config"), dict):
        config["text_config"] = {**config["text_config"], **copy.deepcopy(entry.text)}
    else:
        config.update(copy.deepcopy(entry.text))
    return config


def candidate_fields(config: dict) -> list[str]:
    """The fields of ``config`` (top level, and its language model's under ``text_config.``) that differ from what
    the architecture twin starts from (``architecture_config``) and are not sizes, in the order they are tried."""
    from neuronhelpers.twins.own import is_size

    default = architecture_config(config["model_type"])
    found = []
    for prefix, part, base in (("", config, default),
                               ("text_config.", config.get("text_config") or {}, default.get("text_config") or {})):
        for key, value in part.items():
            if key in _BOOKKEEPING or key == "text_config" or isinstance(value, dict) and "model_type" in value:
                continue
            old = base.get(key)
            if json.dumps(value, sort_keys=True, default=str) == json.dumps(old, sort_keys=True, default=str):
                continue
            if is_size(key, old, value) and not any(word in key for word in _FIRST):
                continue
            found.append(prefix + key)

    def order(path):
        key, value = path.rsplit(".", 1)[-1], _get(config, path)
        rank = 0 if any(w in key for w in _FIRST) else 1 if "rope" in key else 3 if isinstance(value, float) else 2
        return rank, path

    return sorted(found, key=order)


def _get(config: dict, path: str):
    part = config
    for name in path.split("."):
        part = part.get(name) if isinstance(part, dict) else None
    return part


def set_back(config: dict, path: str) -> dict:
    """``config`` with the field at ``path`` set to the architecture twin's value (``architecture_config``; removed
    where it has none)."""
    default = architecture_config(config["model_type"])
    out = copy.deepcopy(config)
    *parents, key = path.split(".")
    part, base = out, default
    for name in parents:
        part, base = part[name], base.get(name) or {}
    if key in base:
        part[key] = copy.deepcopy(base[key])
    else:
        part.pop(key, None)
    return out


def isolate_model(model_id: str, architecture_verdict: str, own_cause: str | None = None, *, backend=None,
                  timeout: float = 600.0) -> dict:
    """Set back the model's differing fields one at a time (at most MAX_RUNS runs) until its twin gives
    ``architecture_verdict``; returns {"field", "runs", "tried"} (field: NOT_ISOLATED when none did).

    Two fields may each fail the model at the same stage (Phi-3.5-MoE: its sliding window fails at a recompile,
    its longrope at a data-dependent branch): setting either back alone changes the failure's cause, not the verdict.
    So a field whose setting back changes the cause stays set back, the fields tried before it are tried again (the
    one it masked may be among them), and the answer names every field set back ("rope_scaling + sliding_window")."""
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.run.harness import run_model
    from neuronhelpers.twins.corpus import folder_name
    from neuronhelpers.twins.own import read_own_config

    config = read_own_config(model_id).config
    tried, kept, cause = [], [], own_cause
    work = home() / "isolate"
    queue, passed = candidate_fields(config), []
    while queue and len(tried) < MAX_RUNS:
        path = queue.pop(0)
        trial = set_back(config, path)
        folder = work / f"{folder_name(model_id)}~{len(tried) + 1}-{path}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(trial, indent=2))
        row = run_model(resolve_model(str(folder), twin=True), backend=backend, timeout=timeout)
        tried.append({"field": path, "result": row["result"], "stage": row.get("stage"), "cause": row.get("cause")})
        if verdict_text(row["result"], row.get("stage")) == architecture_verdict:
            return {"field": " + ".join([*kept, path]), "runs": len(tried), "tried": tried}
        if cause is not None and row.get("cause") != cause:  # this field failed it too: keep it set back
            config, cause = trial, row.get("cause")
            kept.append(path)
            queue, passed = passed + queue, []  # a field tried before may have failed behind this one: again
        else:
            passed.append(path)
    return {"field": NOT_ISOLATED, "runs": len(tried), "tried": tried}


def isolate_folder(folder, rows, *, backend=None, progress=None) -> dict:
    """Isolate every model of ``rows`` (one version pair's) whose own twin's verdict differs from its architecture
    twin's; the answers are kept in ``folder``/ISOLATED_FILE (models already answered there are not run again)."""
    path = Path(folder) / ISOLATED_FILE
    known = json.loads(path.read_text()) if path.is_file() else {}
    models = known.get("models", {})
    effects = own_config_effects(rows)
    for record in effects[effects["differs"].astype(bool)].itertuples(index=False):
        if record.model_id in models:
            continue
        models[record.model_id] = isolate_model(record.model_id, verdict_text(record.architecture_result,
                                                                          record.architecture_stage),
                                                record.cause or None, backend=backend)
        if progress:
            progress(record.model_id, models[record.model_id])
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"updated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                   "max_runs": MAX_RUNS, "models": models}, indent=1, sort_keys=True))
        tmp.replace(path)  # after each model: an interrupted isolation keeps what it found
    return models
