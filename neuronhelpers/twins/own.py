"""A model twin: one Hub model's own config, shrunk in its sizes only, so its verdict is that model's prediction
rather than its architecture's (``tiny/<org>--<name>``; from a local folder, ``tiny/<folder name>``).

The config is read where a user's run would read it: a folder's config.json; a Hub id's through huggingface_hub
(``HF_ENDPOINT`` and offline mode apply; only config files are fetched, never weights), or offline from the Hugging
Face cache, else from the corpus shipped in the package (corpus.py), else from the shelf's installed copy (a real
checkpoint a registry package ships; for a GGUF, the config transformers derived from it). The twin is then built
by the same writers as the architecture twins, from this config instead of the architecture's default
(shrink.default_config's ``base``):

- every field that shapes the graph is kept: sliding windows, ``use_sliding_window``, layer types (the depth is the
  pattern's period when it repeats within ``MAX_PATTERN_LAYERS``, so the pattern survives whole), rope type and
  scaling (per-frequency factor lists resized to the new head), biases, partial rotary, norms, soft-capping, MoE
  routing (top-k, groups, shared experts; experts shrunk but never below the top-k: ``experts_for``);
- only sizes shrink (TEXT_SHRINK / VISION_SHRINK, widths, heads, depth, vocabulary), and the output head is untied
  (weights.py's rule for every twin); ``max_position_embeddings`` is capped at ``MAX_POSITIONS`` (a learned position
  table at that length is still small);
- the tokenizer is the architecture twin's (a model's own 128k-262k vocabulary would break the twins' size limit).

What the shrink changed is recorded (``config_changes``); a change to a field that is not a size means the twin no
longer stands for the model, and it is refused (UNTESTED, the field named), never a silent PASS (``unkept``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import neuronhelpers.twins.corpus as corpus
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import SHELF_PROVENANCE, shelf_model_folder
from neuronhelpers.core.vocab import (
    AUTOMATIC_SPEECH_RECOGNITION,
    FEATURE_EXTRACTION,
    IMAGE_TEXT_TO_TEXT,
    TEXT_GENERATION,
)
from neuronhelpers.twins.layers import INDEX_WORDS
from neuronhelpers.twins.overrides import text_overrides
from neuronhelpers.twins.shrink import TEXT_SHRINK, VISION_SHRINK
from neuronhelpers.twins.specs import TWIN_PREFIX, TwinSpec
from neuronhelpers.twins.widths import is_width

log = logging.getLogger("neuronhelpers.twins")

# Where a model twin's config came from (TWIN.json's "config_read").
READ_FOLDER, READ_HUB, READ_CACHE, READ_CORPUS, READ_SHELF = "folder", "hub", "hub cache", "corpus", "shelf"
# generate() reads use_cache, the token ids and the defaults of decoding from this file, not from config.json: a model
# twin carries the model's own where a copy is at hand (``carry_generation_config``), else save_pretrained's, which
# transformers derives from config.json.
GENERATION_CONFIG = "generation_config.json"
# A repeating layer pattern up to this period is kept whole (gemma3's 5 sliding + 1 full: 6 layers).
MAX_PATTERN_LAYERS = 8
MAX_POSITIONS = 8192
_TOPK = ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts")
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
# The table's entries a model's config decides (routing and per-layer placement), never the twin.
_ROUTING = (*_TOPK, "n_group", "topk_group", "decoder_sparse_step", "mlp_only_layers", "max_window_layers",
            "max_position_embeddings", "zero_expert_num")
# A config's fields that record where and how it was saved, not what the model computes (never a change of the shrink;
# never worth a line in a repro script: analysis/repro.py).
BOOKKEEPING = {"_name_or_path", "transformers_version", "dtype", "torch_dtype", "architectures",
               "output_attentions", "output_hidden_states", "return_dict", "_attn_implementation_autoset",
               "auto_map", "model_type", "id2label", "label2id", "num_labels"}


@dataclass(frozen=True)
class OwnConfig:
    """A model's config as read: who it is (``twin_from``: the Hub id or the absolute folder), the twin's name, the
    config's bytes and where they were read."""

    twin_from: str
    name: str
    files: dict  # relative path -> text (config.json; modules.json / model_index.json where present)
    read: str
    task: str | None = None  # where the files alone do not say it (the corpus's record)
    source: dict | None = None  # where config.json came from, as the row's config_* columns say it (``provenance``)

    @property
    def config(self) -> dict:
        return json.loads(self.files["config.json"])

    @property
    def digest(self) -> str:
        return _digest(self.files["config.json"])


def twin_id_for(source: str) -> str:
    """``tiny/<org>--<name>`` for a Hub id; ``tiny/<folder name>`` for a folder."""
    if os.path.isdir(source):
        return TWIN_PREFIX + Path(source).resolve().name
    return TWIN_PREFIX + corpus.folder_name(source)


def read_own_config(source: str) -> OwnConfig:
    """The config of a folder or a Hub id (see the module docstring for where), or UserError naming what to do."""
    if os.path.isdir(source):
        folder = Path(source).resolve()
        if not (folder / "config.json").is_file():
            raise UserError(f"'{source}' has no config.json: a model twin is built from a transformers config")
        files = {name: (folder / name).read_text() for name in ("config.json", "modules.json", GENERATION_CONFIG)
                 if (folder / name).is_file()}
        return OwnConfig(str(folder), folder.name, files, READ_FOLDER,
                         source=_source(f"folder:{folder}", "json file"))
    files, read, where = _hub_files(source)
    if read == READ_CORPUS:
        return OwnConfig(source, corpus.folder_name(source), files, read, corpus.corpus_task(source),
                         corpus.provenance(source))
    return OwnConfig(source, corpus.folder_name(source), files, read, source=_source(where, "json file"))


def _source(where: str, form: str) -> dict:
    """The config_* columns of a config read from the Hub, its cache, a folder or the shelf: the file itself."""
    return {"config_source": where, "config_form": form, "config_id_inferred": False, "config_corroboration": None}


UNKNOWN_SOURCE = "unknown: "  # the config_source of a model twin row whose config matches no copy at hand


def source_for_digest(twin_from: str, digest: str) -> dict:
    """The config_* columns for a model twin row that recorded only its config's digest: the corpus's copy of
    ``twin_from``'s config, or the shelf's, whichever has that digest (``OwnConfig.digest``); else an ``unknown:``
    source that says nothing at hand matches."""
    shipped = corpus.corpus_files(twin_from)
    if shipped is not None and _digest(shipped["config.json"].decode()) == digest:
        return corpus.provenance(twin_from)
    shelved = _shelf_files(twin_from)
    if shelved is not None and _digest(shelved[0]["config.json"]) == digest:
        return _source(shelved[2], "json file")
    return _source(f"{UNKNOWN_SOURCE}no copy of {twin_from}'s config in the corpus or the shelf has {digest}", None)


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _hub_files(model_id: str) -> tuple[dict, str, str | None]:
    """(files, where read, source: ``hub:org/name@commit`` or ``shelf:...``; None for the corpus: SOURCE.json's)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    from neuronhelpers.core.network import hub_endpoint, hub_reachable

    online = hub_reachable()

    revisions = []

    def fetch(name: str, required: bool) -> str | None:
        try:
            path = Path(hf_hub_download(model_id, name, local_files_only=not online, endpoint=hub_endpoint()))
            if path.parent.parent.name == "snapshots":  # the cache's layout: snapshots/<commit>/<file>
                revisions.append(path.parent.name)
            return path.read_text()
        except LocalEntryNotFoundError:  # (a subclass of EntryNotFoundError: not in the cache, offline)
            return None
        except EntryNotFoundError:  # the repo has no such file: a model without modules.json is no embedding model
            if required:
                raise UserError(f"model '{model_id}' has no config.json on the Hub: a model twin is built from a "
                                "transformers config") from None
            return None
        except GatedRepoError:
            raise UserError(f"model '{model_id}' is gated: its config cannot be read without a token; accept its "
                            "license on the Hub and log in (hf auth login)") from None
        except RepositoryNotFoundError:
            raise UserError(f"model '{model_id}' was not found on the Hub: check the id") from None
        except OSError:  # a broken connection: online it is an error, offline the corpus is asked next
            if online and required:
                raise UserError(f"the config of '{model_id}' could not be fetched from the Hub: check the network"
                                ) from None
            return None

    config = fetch("config.json", required=True)
    if config is not None:
        files = {"config.json": config}
        for name in ("modules.json", GENERATION_CONFIG):
            text = fetch(name, required=False)
            if text:
                files[name] = text
        where = f"hub:{model_id}" + (f"@{revisions[0][:7]}" if revisions else "")
        return files, READ_HUB if online else READ_CACHE, where
    shipped = corpus.corpus_files(model_id)
    if shipped is not None:
        return {name: data.decode() for name, data in shipped.items()}, READ_CORPUS, None
    shelved = _shelf_files(model_id)
    if shelved is not None:
        return shelved
    why = (corpus.why_missing(model_id) or "").split(". ")[0].split(" | ")[0]  # its first sentence: one line
    raise UserError(f"the config of '{model_id}' is not at hand offline (not in the Hugging Face cache"
                    + (f"; the corpus says: {why}" if why else ", nor in the corpus shipped with neuronhelpers")
                    + f"): fetch it where there is network (hf download {model_id} config.json), or give a folder "
                    "holding its config.json")


def _shelf_files(model_id: str) -> tuple[dict, str, str] | None:
    """The config of a real checkpoint from a registry package (models/shelf.py), installed, with the packages it came
    from; None where the shelf holds none."""
    shelf = shelf_model_folder(model_id)
    if not ((shelf / SHELF_PROVENANCE).is_file() and (shelf / "config.json").is_file()):
        return None
    packages = json.loads((shelf / SHELF_PROVENANCE).read_text()).get("packages") or []
    return ({name: (shelf / name).read_text() for name in ("config.json", "modules.json") if (shelf / name).is_file()},
            READ_SHELF, "shelf:" + ",".join(packages))


def model_task(config: dict, files: dict) -> str:
    """The task a model twin is tested for, as a checkpoint of this config is (resolve.task_for_model_type's rule)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    model_type = config.get("model_type")
    if "modules.json" in files:
        return FEATURE_EXTRACTION
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return IMAGE_TEXT_TO_TEXT
    if model_type in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES and \
            MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES[model_type] in (config.get("architectures") or []):
        return AUTOMATIC_SPEECH_RECOGNITION
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        saved = config.get("architectures") or []
        generators = {name.lower() for names in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()
                      for name in ((names,) if isinstance(names, str) else names)}
        # (a class renamed since the checkpoint was saved, PhiMoE -> Phimoe, still ends as a generator's)
        if saved and not any(name.lower() in generators or name.endswith(("ForCausalLM", "LMHeadModel"))
                             for name in saved):  # a classifier or encoder checkpoint of a generating type
            raise UserError(f"this checkpoint is a {saved[0]}, not a text generator of its type: no model twin is "
                            "built for it (a sentence-transformers model needs its modules.json)")
        return TEXT_GENERATION
    raise UserError(f"'{model_type}' is neither a text-generation, image-text-to-text nor speech-recognition "
                    "architecture of the installed transformers: no model twin is built for it")


def twin_task(source: str, config: dict, files: dict, task: str | None = None) -> str:
    """The task a model twin of this config is tested for (``task``: the corpus's record, else ``model_task``), or
    UserError when no twin is built for it (a type the installed transformers does not know, or no task of ours)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config.get("model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        why = ("its modeling code lives in the checkpoint (auto_map): no twin is built from a checkpoint's own code"
               if "auto_map" in config else "the installed transformers does not know it: upgrade transformers")
        raise UserError(f"'{source}' has model_type '{model_type}': {why}")
    return task or model_task(config, files)


def model_twin_spec(source: str) -> TwinSpec:
    """The TwinSpec of a model twin (Hub id or folder): the model's config and where it came from in the spec, so
    the twin's cache key and a build in a child process both carry them."""
    own = read_own_config(source)
    try:
        config = own.config
    except ValueError as exc:
        raise UserError(f"'{source}': config.json is not valid JSON ({exc})") from None
    model_type, task = config.get("model_type"), twin_task(source, config, own.files, own.task)
    return TwinSpec(model_type, task, text_overrides(model_type), name=own.name,
                    own=json.dumps({"twin_from": own.twin_from, "files": own.files, "read": own.read,
                                    "digest": own.digest, "source": own.source}, sort_keys=True))


def corpus_twins() -> tuple[list[str], dict[str, str]]:
    """The twin ids of the corpus models a twin is built for (``sweep --corpus``), and the others with why not (a
    classifier, an encoder without its modules.json, a type no task of ours runs)."""
    ids, skipped = [], {}
    for model_id in corpus.corpus_ids():
        files = {name: data.decode() for name, data in corpus.corpus_files(model_id).items()}
        try:
            twin_task(model_id, json.loads(files["config.json"]), files, corpus.corpus_task(model_id))
        except UserError as exc:  # not a model of a task we test: listed with its reason
            skipped[model_id] = str(exc)
            continue
        ids.append(twin_id_for(model_id))
    return ids, skipped


def own_of(spec: TwinSpec) -> dict | None:
    """What a model twin's spec carries (twin_from, files, read, digest), or None for an architecture twin."""
    return json.loads(spec.own) if spec.own else None


def base_config(spec: TwinSpec) -> dict | None:
    """The model's config.json as a dict, made ready for the shrink (``max_position_embeddings`` capped), or None for
    an architecture twin."""
    own = own_of(spec)
    if own is None:
        return None
    config = json.loads(own["files"]["config.json"])
    for part in (config, *(v for v in config.values() if isinstance(v, dict) and "model_type" in v)):
        value = part.get("max_position_embeddings")
        scaling = part.get("rope_scaling") or part.get("rope_parameters") or {}
        original = scaling.get("original_max_position_embeddings") if isinstance(scaling, dict) else None
        cap = max(MAX_POSITIONS, 2 * original) if isinstance(original, int) else MAX_POSITIONS
        if isinstance(value, int) and value > cap:  # (above the length rope scaling was trained at: scaled still)
            part["max_position_embeddings"] = cap
    return config


def own_overrides(spec: TwinSpec, text: dict) -> dict:
    """The family's text corrections that the model's own config does not decide itself (the model's values win:
    mistral's override turns its default window off, a Mistral checkpoint's config says for itself)."""
    config = json.loads(own_of(spec)["files"]["config.json"])
    own_keys = set(config) | set(config.get("text_config") or {})
    return {key: value for key, value in text.items() if key not in own_keys and key != "no_twin"}


def carry_generation_config(spec: TwinSpec, folder: Path) -> bool:
    """Write the model's own generation_config.json into its twin's folder, where the model twin's config came with
    one: its fields as the model has them, token ids as the twin's config.json has them (remapped into the shrunk
    vocabulary, a change NON_SIZE_CHANGES allows). False where there is none (save_pretrained's derived file stays)."""
    own = own_of(spec)
    if not own or GENERATION_CONFIG not in own["files"]:
        return False
    generation = json.loads(own["files"][GENERATION_CONFIG])
    twin = json.loads((folder / "config.json").read_text())
    twin_text = _text_part(twin)
    for key in [k for k in generation if non_size_change(k) == TOKEN_IDS]:
        value = twin.get(key, twin_text.get(key))
        if value is not None:
            generation[key] = value
        elif isinstance(generation[key], int) and generation[key] >= (twin_text.get("vocab_size") or 0):
            del generation[key]  # an id outside the twin's vocabulary that its config does not remap
    (folder / GENERATION_CONFIG).write_text(json.dumps(generation, indent=2) + "\n")
    return True


def _text_part(config: dict) -> dict:
    return config.get("text_config") or config.get("llm_config") or config


def experts_for(original: int, topk: int, groups: int) -> int:
    """Experts of a model twin: twice the top-k (at least 4) so routing still chooses, a multiple of the expert
    groups, never more than the model has."""
    count = max(4, 2 * topk)
    count = math.ceil(count / groups) * groups
    return min(original, count)


def own_table(spec: TwinSpec, table: dict = TEXT_SHRINK) -> dict:
    """The shrink table of a model twin: ``table`` without the entries its config decides (routing, placement,
    positions), its experts per ``experts_for``, and its depth the layer pattern's period when one repeats."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from neuronhelpers.twins.layers import layer_period

    base = base_config(spec)
    loaded = CONFIG_MAPPING[spec.model_type].from_dict(copy.deepcopy(base))  # its derived lists too (layer_types)
    text = loaded.get_text_config() if hasattr(loaded, "get_text_config") else loaded
    config = {**_text_part(base), **{k: v for k, v in text.__dict__.items() if isinstance(v, (list, int))}}
    out = {key: value for key, value in table.items() if key not in _ROUTING}
    topk = next((config[k] for k in _TOPK if isinstance(config.get(k), int)), 2)
    groups = config.get("n_group") if isinstance(config.get("n_group"), int) and config.get("n_group") else 1
    for key in _EXPERTS:
        if isinstance(config.get(key), int) and config[key] > 0:
            out[key] = experts_for(config[key], topk, groups)
    depth = _depth(config)
    periods = [layer_period(v) for v in config.values()
               if isinstance(v, list) and depth and len(v) == depth and len(v) > 1 and
               len({json.dumps(x, sort_keys=True) for x in v}) > 1]
    period = math.lcm(*periods) if periods else 0
    if 2 < period <= MAX_PATTERN_LAYERS and period < (depth or 0):
        for key in ("num_hidden_layers", "num_layers", "n_layer"):
            if key in out or key in config:
                out[key] = period
    return out


def _depth(config: dict) -> int | None:
    return next((config[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if isinstance(config.get(k), int)),
                None)


# ---- what the shrink changed -----------------------------------------------------------------------------------

def _flat(data, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            out.update(_flat(value, path + "."))
        else:
            out[path] = value
    return out


def normal_form(config: dict) -> dict:
    """A config dict as transformers reads it back (its own normalisation: rope_scaling into rope_parameters, per-layer
    types derived), flattened to dotted keys."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return _flat(CONFIG_MAPPING[config["model_type"]].from_dict(copy.deepcopy(config)).to_dict())


def config_changes(before: dict, after: dict) -> dict:
    """The fields whose values differ between two configs in normal form: key -> (before, after)."""
    b, a = normal_form(before), normal_form(after)
    changes = {}
    for key in sorted(set(b) | set(a)):
        if set(key.split(".")) & BOOKKEEPING or key.startswith("_"):
            continue
        if json.dumps(b.get(key), sort_keys=True, default=str) != json.dumps(a.get(key), sort_keys=True, default=str):
            changes[key] = (b.get(key), a.get(key))
    return changes


_SIZE_NAMES = set(TEXT_SHRINK) | set(VISION_SHRINK) | {
    "max_position_embeddings", "head_dim", "short_factor", "long_factor", "mrope_section",
    "num_key_value_heads", "num_kv_heads", "image_seq_length", "mm_tokens_per_image", "num_image_tokens",
    "image_grid_pinpoints", "vision_feature_layer", "first_k_dense_replace", "num_dense_layers", "rope_dim",
    "scale_factor", "tokens_per_image", *_EXPERTS}


@functools.lru_cache(maxsize=1)
def _size_aliases() -> frozenset:
    """Older configs' own names for sizes (gpt2's ``n_head``, ``n_layer``, ``n_embd``), from each config class's
    ``attribute_map``: a name that maps to a size is a size."""
    from transformers import CONFIG_MAPPING

    aliases = set()
    for model_type in CONFIG_MAPPING.keys():
        try:
            mapping = getattr(CONFIG_MAPPING[model_type], "attribute_map", {}) or {}
        except Exception as exc:  # noqa: BLE001 - a config class that needs an extra package: its aliases go unread
            log.debug("no attribute_map read for %s: %s", model_type, exc)
            continue
        aliases.update(own for canonical, own in mapping.items() if canonical in _SIZE_NAMES)
    return frozenset(aliases)


# The closed list of changes a model twin may make besides sizes, each with its reason. Any other change to a field
# that is not a size refuses the twin (UNTESTED, the field named): it would not compute what the model computes.
# tests/test_model_twins.py holds this list; the README and docs/design.md state it.
TOKEN_IDS = "token ids"
UNTIED_HEAD = "tie_word_embeddings"
EMBEDDING_CACHE = "use_cache (sentence-transformers)"
NON_SIZE_CHANGES = {
    TOKEN_IDS: "remapped into the twin's shrunk vocabulary (the model's ids lie beyond it)",
    UNTIED_HEAD: "the output head untied: a head tied to the embeddings, scaled with them, makes a twin write one "
    "token 32 times (twins/weights.py), a check that could not fail",
    EMBEDDING_CACHE: "sentence-transformers turns use_cache off when it loads any model, whatever the file says",
}


def non_size_change(key: str, task: str | None = None) -> str | None:
    """Which entry of NON_SIZE_CHANGES allows a changed field that is not a size, or None."""
    name = key.rsplit(".", 1)[-1]
    if name.endswith(("_token_id", "_token_index", "_token_ids")):
        return TOKEN_IDS
    if name == "tie_word_embeddings":
        return UNTIED_HEAD
    if name == "use_cache" and task == FEATURE_EXTRACTION:
        return EMBEDDING_CACHE
    return None


def is_size(key: str, old, new) -> bool:
    """Whether a changed field is a size the shrink may change: a table size, a width, a vocabulary, or a per-layer
    list that kept every kind of entry it had."""
    name = key.rsplit(".", 1)[-1]
    if name in _SIZE_NAMES or name in _size_aliases() or is_width(name) or "vocab" in name:
        return True
    if isinstance(old, list) and isinstance(new, list) and len(new) <= len(old):
        kinds = {json.dumps(x, sort_keys=True, default=str) for x in old}
        return {json.dumps(x, sort_keys=True, default=str) for x in new} == kinds or (
            all(isinstance(x, int) and not isinstance(x, bool) for x in old + new) and
            any(word in name for word in INDEX_WORDS))  # layer indices clamped into the new depth
    if name.endswith(("_layers", "_size", "_dim", "_heads", "_channels")) and isinstance(old, int) and \
            isinstance(new, int) and not isinstance(old, bool):
        return True  # a count of layers, a width or heads the shrink sized
    return False


def unkept(changes: dict, task: str | None = None) -> list[str]:
    """The changed fields that are neither sizes nor on the closed list of NON_SIZE_CHANGES: the twin would not compute
    what the model computes."""
    return [key for key, (old, new) in changes.items() if not is_size(key, old, new)
            and non_size_change(key, task) is None]


def describe_changes(changes: dict) -> str:
    """``config_changes`` as a row holds it: ``field old->new`` for each field the shrink changed, ``; `` between."""
    def short(value):
        text = json.dumps(value, default=str)
        return text if len(text) <= 24 else f"[{len(value)} values]" if isinstance(value, list) else text[:21] + "..."

    return "; ".join(f"{key} {short(old)}->{short(new)}" for key, (old, new) in changes.items())
