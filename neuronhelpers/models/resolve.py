"""Model specs: turn what a person typed (a twin, a local folder, a Hub id) into something run.py can load.

Every check here runs before any process is started, so bad input becomes a one-line error naming
the model and what to do, not a traceback from deep inside a run.

Taught in notebook 02.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.integrity import check_checkpoint, read_json
from neuronhelpers.core.network import hub_reachable
from neuronhelpers.core.vocab import (
    FEATURE_EXTRACTION,
    IMAGE_TEXT_TO_TEXT,
    TASKS,
    TEXT_GENERATION,
    TEXT_TO_IMAGE,
    is_hub_id,
)
from neuronhelpers.models.shelf import copy_entry as shelf_copy_entry
from neuronhelpers.models.shelf import shelved
from neuronhelpers.twins import build
from neuronhelpers.twins.corpus import PROVENANCE_KEYS, model_id_of
from neuronhelpers.twins.rerun import twin_entry
from neuronhelpers.twins.specs import pipeline_family

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer_config.json")
_PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


@dataclass(frozen=True)
class ModelRef:
    """A model ready to run: the id its row carries, the path from_pretrained loads, and what it is."""

    model_id: str
    path: str
    task: str
    model_type: str | None
    twin_of: str | None = None  # the architecture a tiny twin stands in for
    weights: str | None = None  # where the weights come from: hub, shelf: ..., twin: random, folder
    revision: str | None = None  # the Hub commit, the shelf's package==version, or a twin's files digest
    twin_from: str | None = None  # a model twin's: the Hub id or folder whose own config built it (twins/own.py)
    config_digest: str | None = None  # ... that config's sha256
    config_changes: str | None = None  # ... and the fields the shrink changed
    config_source: tuple | None = None  # ... and where it came from: (column, value) pairs (corpus.PROVENANCE_KEYS)
    twin_digest: str | None = None  # a twin found again by its id anywhere: its files' digest (twins/rerun.py) ...
    twin_built_by: str | None = None  # ... and the neuronhelpers, torch and transformers that build those files
    shelf_digest: str | None = None  # a shelf copy found again by its Hub id anywhere: its files' digest ...
    shelf_made_by: str | None = None  # ... and the command that makes those files (models/shelf.py copy_entry)

    @property
    def is_twin(self) -> bool:
        return self.twin_of is not None


TWIN_WEIGHTS = f"{vocab.WEIGHTS_TWIN}: random"
# The files that say what a checkpoint is (not its weights): a twin's or a folder's revision is their digest.
_IDENTITY_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "chat_template.jinja", "preprocessor_config.json",
                   "processor_config.json", "modules.json", "model_index.json")


def files_digest(folder: str | Path) -> str:
    """A short sha256 of a checkpoint folder's config and tokenizer files (top level and one level down), never of
    this package's source code: the same files give the same revision on any machine and release of ours."""
    import hashlib

    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.glob("*") if p.is_file()) + sorted(folder.glob("*/*")):
        if path.is_file() and path.name in _IDENTITY_FILES:
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return "files:" + digest.hexdigest()[:12]


def is_local_path(model_id: str) -> bool:
    """A row's model_id that names a folder (an absolute path), not a Hub id or a twin."""
    return os.path.isabs(model_id) or model_id.startswith(("./", "../", "~"))


def task_for_model_type(model_type: str | None, architectures: list | None = None) -> str:
    """The task a checkpoint is tested for: image-text-to-text for a vision-language type; speech recognition when
    its saved class is the one AutoModelForSpeechSeq2Seq maps (whisper is a causal-LM type too); else
    text-generation."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return IMAGE_TEXT_TO_TEXT
    if model_type in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES and \
            MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES[model_type] in (architectures or []):
        return vocab.AUTOMATIC_SPEECH_RECOGNITION
    return TEXT_GENERATION


def resolve_model(model: str, *, task: str | None = None, trust_remote_code: bool = False,
                  twin: bool = False) -> ModelRef:
    """Resolve ``tiny/<model_type>``, a model twin ``tiny/<org>--<name>``, a local checkpoint folder, or a Hub id;
    with ``twin``, a Hub id's or folder's own twin (its config, shrunk: twins/own.py). Raise UserError when it cannot
    run."""
    model = model.strip()
    if twin and not build.is_twin_id(model):
        if not (os.path.isdir(model) or is_hub_id(model)):
            raise UserError(f"--twin needs a Hub id (org/name) or a folder holding a config.json, not '{model}'")
        return _twin_ref(build.model_twin(model))
    if build.is_twin_id(model):
        return _twin_ref(build.twin_spec(model))
    if os.path.isdir(model):
        # The row and the rendered run.py both name the absolute folder: run.py runs in another working
        # directory, where a relative path would send from_pretrained to the Hub instead.
        folder = Path(model).resolve()
        ref = _checked(model, folder, task, trust_remote_code, model_id=str(folder), path=str(folder))
        return replace(ref, weights=vocab.WEIGHTS_FOLDER, revision=files_digest(folder))
    if is_hub_id(model):
        copy = None if hub_reachable() else shelved(model)
        if copy is not None:  # offline, and the shelf has it: its folder runs under the Hub id
            folder, record = copy
            ref = _checked(model, folder, task, trust_remote_code, model_id=model, path=str(folder))
            files = shelf_copy_entry(model, record)
            return replace(ref, weights=record["weights"], revision=record["revision"], shelf_digest=files["digest"],
                           shelf_made_by=files["made_by"])
        folder = _hub_snapshot(model)
        ref = _checked(model, folder, task, trust_remote_code, model_id=model, path=model)
        return replace(ref, weights=vocab.WEIGHTS_HUB,
                       revision=folder.name if folder.parent.name == "snapshots" else None)
    raise UserError(
        f"unknown model '{model}': give a Hub id (org/name), a local checkpoint folder, or a tiny twin such "
        "as tiny/qwen3"
    )


def _twin_ref(spec) -> ModelRef:
    """A built twin as a ModelRef: an architecture twin, or a model twin with whose config built it (TWIN.json)."""
    path = build.build_twin(spec)
    record = json.loads((path / "TWIN.json").read_text())
    # a twin's run.py names it by id and files, built again where it runs; a folder's twin has only its folder
    files = twin_entry(path) if spec.own is None or model_id_of(spec.key) is not None else {}
    return ModelRef(spec.model_id, str(path), spec.task, spec.model_type, twin_of=spec.model_type,
                    twin_digest=files.get("digest"), twin_built_by=files.get("built_by"),
                    weights=TWIN_WEIGHTS, revision=files_digest(path), twin_from=record.get("twin_from"),
                    config_digest=record.get("config_digest"), config_changes=record.get("config_changes"),
                    config_source=tuple((key, record.get(key)) for key in PROVENANCE_KEYS)
                    if record.get("twin_from") else None)


def _hub_snapshot(repo_id: str) -> Path:
    """The config and tokenizer files of a Hub model: from the local cache, or fetched when the Hub is reachable."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    patterns = ["config.json", *_TOKENIZER_FILES, *_PROCESSOR_FILES, "special_tokens_map.json", "chat_template.*",
                *_LIBRARY_FILES]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except GatedRepoError:
        raise UserError(f"model '{repo_id}' is gated: accept its license on the Hub and log in "
                        "(hf auth login)") from None
    except RepositoryNotFoundError:
        raise UserError(f"model '{repo_id}' was not found on the Hub: check the id (and your token for "
                        "private models)") from None
    except LocalEntryNotFoundError:
        raise UserError(
            f"model '{repo_id}' is not in the local Hugging Face cache and the Hub cannot be reached: "
            f"download it where there is network (hf download {repo_id}), run a twin (tiny/<model_type>), or a real "
            "checkpoint from the shelf (`neuronhelpers checkpoints`)"
        ) from None
    except OSError as exc:
        raise UserError(f"model '{repo_id}' could not be fetched from the Hub ({type(exc).__name__}): "
                        "check the network") from None


# What tells a sentence-transformers model (modules.json) or a diffusers pipeline (model_index.json) from a plain
# transformers checkpoint, and the configs and tokenizers of their modules / components (in subfolders).
_LIBRARY_FILES = ("modules.json", "model_index.json", "sentence_bert_config.json", "config_sentence_transformers.json",
                  "*/config.json", "*/scheduler_config.json", *(f"*/{name}" for name in _TOKENIZER_FILES),
                  "*/special_tokens_map.json")


def library_of_folder(folder: Path) -> str:
    """Which library a checkpoint folder is for: diffusers (model_index.json), sentence-transformers (modules.json),
    else transformers."""
    if (folder / "model_index.json").is_file():
        return vocab.DIFFUSERS
    if (folder / "modules.json").is_file():
        return vocab.SENTENCE_TRANSFORMERS
    return vocab.TRANSFORMERS


def _checked(model: str, folder: Path, task: str | None, trust_remote_code: bool, *, model_id: str,
             path: str | None = None) -> ModelRef:
    """What a local folder holds, checked before anything runs: its files whole (core.integrity: a file cut short or
    unparseable raises DamagedFile, which a sweep records as UNTESTED (input)), then what it is."""
    check_checkpoint(folder)
    library = library_of_folder(folder)
    if library == vocab.DIFFUSERS:
        return _checked_pipeline(model, folder, task, trust_remote_code, model_id=model_id, path=path)
    if library == vocab.SENTENCE_TRANSFORMERS:
        return _checked_sentence_transformer(model, folder, task, trust_remote_code, model_id=model_id, path=path)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise UserError(f"'{model}' has no config.json: point at a transformers checkpoint folder "
                        "(save_pretrained output)")
    config = read_json(config_file)
    model_type = config.get("model_type")
    _check_remote_code(model, config, trust_remote_code)
    task = task or task_for_model_type(model_type, config.get("architectures"))
    if task not in TASKS:
        raise UserError(f"unknown task '{task}' for '{model}': choose one of {', '.join(TASKS)}")
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        raise UserError(
            f"'{model}' has no tokenizer (none of {', '.join(_TOKENIZER_FILES)}): save one with "
            "tokenizer.save_pretrained into that folder"
        )
    if task in (IMAGE_TEXT_TO_TEXT, vocab.AUTOMATIC_SPEECH_RECOGNITION) and \
            not any((folder / name).is_file() for name in _PROCESSOR_FILES):
        raise UserError(f"'{model}' is an {task} model without a processor: save one with processor.save_pretrained")
    return ModelRef(model_id, path or str(folder), task, model_type)


def _checked_sentence_transformer(model: str, folder: Path, task: str | None, trust_remote_code: bool, *, model_id: str,
                                  path: str | None) -> ModelRef:
    """A sentence-transformers folder: modules.json, and a first module holding a transformers config and tokenizer."""
    modules = read_json(folder / "modules.json")
    if not isinstance(modules, list) or not modules:
        raise UserError(f"'{model}': modules.json lists no modules; re-save the model with SentenceTransformer.save")
    custom = [m.get("type", "") for m in modules if not str(m.get("type", "")).startswith("sentence_transformers.")]
    if custom and not trust_remote_code:
        raise UserError(f"'{model}' needs trust_remote_code: its module {custom[0]} lives in the checkpoint, not in "
                        f"sentence-transformers; read that code, then rerun with --trust-remote-code if you trust it")
    first = folder / (modules[0].get("path") or "")
    if not (first / "config.json").is_file():
        raise UserError(f"'{model}': its first module ({modules[0].get('type')}) has no transformers config.json: "
                        "only models built on a Transformer module are tested")
    config = read_json(first / "config.json")
    _check_remote_code(model, config, trust_remote_code)
    if not any((first / name).is_file() for name in _TOKENIZER_FILES):
        raise UserError(f"'{model}' has no tokenizer (none of {', '.join(_TOKENIZER_FILES)}) beside its "
                        "transformer module")
    return ModelRef(model_id, path or str(folder), _library_task(model, task, FEATURE_EXTRACTION),
                    config.get("model_type"))


def _checked_pipeline(model: str, folder: Path, task: str | None, trust_remote_code: bool, *, model_id: str,
                      path: str | None) -> ModelRef:
    """A diffusers pipeline folder: model_index.json naming a diffusers pipeline class, a denoiser and a tokenizer."""
    index = read_json(folder / "model_index.json")
    pipeline = index.get("_class_name") if isinstance(index, dict) else None
    if not isinstance(pipeline, str) and not trust_remote_code:
        raise UserError(f"'{model}' needs trust_remote_code: its pipeline class {pipeline} lives in the "
                        "checkpoint, not in diffusers; read that code, then rerun with --trust-remote-code if "
                        "you trust it")
    components = {name: value for name, value in index.items() if not name.startswith("_")
                  and isinstance(value, list) and len(value) == 2 and value[0]}
    # a denoiser (combined pipelines hold a prior and a decoder) and something that reads the prompt
    if not any(name.split("_")[-1] in ("transformer", "unet", "decoder", "prior") for name in components):
        raise UserError(f"'{model}': {pipeline} has no denoiser (unet, transformer, prior or decoder component): "
                        "not a text-to-image pipeline")
    if not any("tokenizer" in name or name == "processor" for name in components):
        raise UserError(f"'{model}': {pipeline} has no tokenizer or processor component: not a text-to-image "
                        "pipeline")
    missing = [name for name in components if not (folder / name).is_dir()]
    if missing and os.path.isabs(path or str(folder)):  # a local folder must hold its components (the Hub fetches them)
        raise UserError(f"'{model}' lacks the component folder(s) {', '.join(missing)} that model_index.json names")
    model_type = pipeline_family(pipeline)  # its AutoPipeline key, as its twin tiny/t2i-<key> is named
    return ModelRef(model_id, path or str(folder), _library_task(model, task, TEXT_TO_IMAGE), model_type)


def _library_task(model: str, task: str | None, expected: str) -> str:
    if task not in (None, expected):
        raise UserError(f"'{model}' is a {expected} model (by its files), not {task}")
    return expected


def _check_remote_code(model: str, config: dict, trust_remote_code: bool) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config.get("model_type")
    needs_remote = "auto_map" in config and model_type not in CONFIG_MAPPING_NAMES
    if model_type is None:
        raise UserError(f"'{model}': config.json has no model_type, so transformers cannot tell its architecture")
    if model_type not in CONFIG_MAPPING_NAMES and not needs_remote:
        raise UserError(
            f"'{model}' has model_type '{model_type}', which the installed transformers does not know: upgrade "
            "transformers"
        )
    if needs_remote and not trust_remote_code:
        raise UserError(
            f"'{model}' needs trust_remote_code: its modeling code lives in the checkpoint, not in transformers; "
            f"read that code, then rerun with --trust-remote-code if you trust it"
        )
