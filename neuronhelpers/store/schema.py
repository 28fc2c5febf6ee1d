"""The result row: its schema (defined once, here), the resume key, and how a row is checked against the vocabulary.

Reading and writing rows as a Parquet dataset is ``dataset.py``. Taught in notebooks 02 (a row) and 03 (the
vocabulary a row is checked against).
"""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.versions import MEASURING_VERSION

HARNESS_VERSION = MEASURING_VERSION  # which measuring made a row's figures (core/versions)

_KEPT = "a column of the published dataset, kept as it reads there"

# (name, type, description). The dataset card's column table is generated from this list.
COLUMNS = [
    ("model_id", pa.string(), "Hub id of the model, or tiny/<model_type> for a tiny twin (never the real model)"),
    ("task", pa.string(), "the task the model was tested on (see Tasks)"),
    ("model_type", pa.string(), "transformers model_type (the architecture)"),
    ("twin_of", pa.string(), "for a tiny twin: the architecture it stands in for; null for real checkpoints"),
    ("twin_from", pa.string(), "for a model twin (tiny/<org>--<name>): the Hub id or folder whose own config.json "
     "built it, its sizes shrunk; null for an architecture twin (built from the architecture's default config) and "
     "for real checkpoints"),
    ("config_digest", pa.string(), "for a model twin: sha256 of the config.json that built it"),
    ("config_changes", pa.string(), "for a model twin: the fields the shrink changed (`field before->after`, `; ` "
     "between); every other field is the model's own"),
    ("config_source", pa.string(), "for a model twin: where its config.json was read: `hub:org/name@commit` (the Hub "
     "or its cache), `github:owner/repo@commit:path` (a public copy the package's corpus holds; not the Hub itself), "
     "`package:...` (a file a registry package ships), `shelf:...` or `folder:...`; `unknown: ...` where a row "
     "recorded only its config's digest and no copy at hand matches it"),
    ("config_form", pa.string(), "for a model twin: the form its config was found in: `json file`, `python literal` "
     "(re-serialized from a Python dict), `json string` (inside another file) or `package file`"),
    ("config_id_inferred", pa.bool_(), "for a model twin: true where the copy of its config does not name the Hub id "
     "and it was inferred from a file, folder or variable name"),
    ("config_corroboration", pa.string(), "for a model twin whose own config turns its architecture's verdict: "
     "`corroborated` (a second public copy has the same deciding field, named) or `uncorroborated` (no second copy "
     "found, or one with another value), with what was seen; null where no second copy was looked for"),
    ("weights", pa.string(), "where the weights came from: `hub` (the Hub checkpoint), `shelf: ...` (a real checkpoint "
     "a registry package ships, e.g. a GGUF dequantized to float32: evidence, not the Hub checkpoint's result, and "
     "never published), `twin: random` (a tiny twin) or `folder` (a local folder)"),
    ("revision", pa.string(), "the Hub commit of a Hub checkpoint, the package==version of a shelf copy, or `files:` "
     "and a digest of a twin's or folder's config and tokenizer files"),
    ("result", pa.string(), "PASS, FAIL, EXCLUDED or UNTESTED (see Results)"),
    ("stage", pa.string(), "where a FAIL happened (see Stages), or why a row is UNTESTED (see Untested reasons); "
     "null on PASS"),
    ("cause", pa.string(), "for a FAIL or UNTESTED row: a short, stable signature of the root cause (exception type, "
     "the deepest transformers or torch frame, the guard that kept failing), shared by every model that failed "
     "for the same reason"),
    ("error", pa.string(), "the exception and the first line of its message (the cause to read first), or the "
     "exclusion / untested reason"),
    ("traceback", pa.string(), "the full error output of the failed process"),
    ("parameters", pa.int64(), "parameter count (safetensors headers, Hub metadata, or estimated from the config)"),
    ("neuron_cores", pa.int32(), "cores (ranks) the model was sharded over; null when it was not run"),
    ("parallelism", pa.string(), "none, tp, ep or tp+ep; null when it was not run"),
    ("backend", pa.string(), "neuron, cuda or cpu"),
    ("compiler", pa.string(), "neuronx-cc on Trainium; inductor elsewhere"),
    ("compiler_version", pa.string(), "version of that compiler (torch's version for inductor)"),
    ("neuronx_cc", pa.string(), "neuronx-cc version (null when the run did not use the Neuron compiler)"),
    ("library", pa.string(), "the modeling library: transformers, sentence-transformers or diffusers"),
    ("library_version", pa.string(), "its version"),
    ("torch", pa.string(), "torch version"),
    ("torch_neuronx", pa.string(), "torch-neuronx version, where installed"),
    ("neuron_sdk", pa.string(), "the Neuron SDK release the run used, where the installed Neuron packages or the "
     "container say it"),
    ("dtype", pa.string(), "dtype of the weights and activations in the run and its reference"),
    ("load_s", pa.float64(), "seconds in from_pretrained and moving the model to the device"),
    ("compile_s", pa.float64(), "first generate call minus a warm one: the cost of compilation"),
    ("cache_hit", pa.bool_(), "the run found its compiled graphs in the compile cache (it compiled nothing new)"),
    ("retraced", pa.bool_(), "the run traced the model with dynamo (false: a warm cache gave it the traced graph too)"),
    ("generate_s", pa.float64(), "seconds of the warm, compiled call: generate 32 tokens, encode the batch, or "
     "draw the image"),
    ("wall_s", pa.float64(), "wall time of the whole run process, compilation included, and the eager comparison "
     "where one ran (see Device eager)"),
    ("ttft_s", pa.float64(), "time to first token of the warm generate"),
    ("decode_tokens_per_s", pa.float64(), "tokens per second after the first, warm"),
    ("peak_memory_bytes", pa.int64(), "peak device memory (the largest over ranks when sharded)"),
    ("peak_memory_per_rank", pa.list_(pa.int64()), "peak device memory of each rank"),
    ("tokens", pa.list_(pa.int32()), "the generated token ids"),
    ("text", pa.string(), "the generated text"),
    ("reference_tokens", pa.list_(pa.int32()), "the CPU eager reference's token ids"),
    ("reference_cached", pa.bool_(), "the reference came from the local reference cache (same checkpoint files, "
     "dtype, prompt, torch and transformers: the reference does not depend on the compiler)"),
    ("verification", pa.string(), "how a PASS was established (see Verification)"),
    ("judge", pa.string(), "for a run judged without a CPU reference: the judge that read the text (a Hub model as "
     "id@revision, a local model folder, or 'lexical')"),
    ("first_divergence", pa.int32(), "index of the first token that differs from the reference"),
    ("divergence_margin", pa.float64(), "reference top-1/top-2 logit margin at the first divergence"),
    ("tolerance", pa.float64(), "for embeddings and images: the largest difference from the CPU reference accepted"),
    ("max_abs_diff", pa.float64(), "for embeddings and images: the largest absolute difference from the CPU reference"),
    ("min_cosine", pa.float64(), "for embeddings: the lowest cosine similarity to the CPU reference over the batch"),
    ("psnr_db", pa.float64(), "for images: peak signal-to-noise ratio against the CPU reference image (dB)"),
    ("output_digest", pa.list_(pa.float64()), "for embeddings and images: means over parts of the output (each "
     "sentence's vector in 8 slices, the image in 8x8 tiles per channel), which `neuronhelpers rerun` compares within "
     "`tolerance`"),
    ("items_per_s", pa.float64(), "warm throughput: sentences per second (embeddings) or denoising steps per "
     "second (images)"),
    ("step_s", pa.float64(), "for images: seconds per warm denoising step"),
    ("image_s", pa.float64(), "for images: seconds for one warm image"),
    ("evidence", pa.string(), "the level of evidence behind the verdict (see Evidence): how a PASS was checked, or "
     "for a FAIL whether the device ran the model eagerly"),
    ("device_eager", pa.string(), "whether the model ran eagerly (nothing compiled) on the same device: `ran`, "
     "`failed: <why>` or `not tried: <why>` (see Device eager)"),
    ("eager_decode_tokens_per_s", pa.float64(), "the same generate() eagerly, in the same process right after the "
     "warm compiled call: tokens per second after the first"),
    ("eager_items_per_s", pa.float64(), "for embeddings: sentences per second of the same batch encoded eagerly"),
    ("eager_image_s", pa.float64(), "for images: seconds for the same image drawn eagerly"),
    ("speedup", pa.float64(), "compiled over eager, measured back to back in one process: decode tokens per second, "
     "sentences per second, or image time"),
    ("eager_equals_compiled", pa.bool_(), "the eager generate() wrote the same tokens as the compiled one"),
    ("remedies", pa.string(), "for a FAIL swept with `--remedies`: the remedies its cause's ladder tried, in order, as "
     "JSON (each: the change, its result, stage and cause, compile seconds, recompiles and whether they grew with "
     "every generated token, graphs, graph breaks, peak memory); beside the verdict, never as it: `result` is the "
     "unmodified recipe's"),
    ("check_sensitive", pa.bool_(), "the check can fail: the same model with its middle block perturbed, run eagerly, "
     "did not pass against the reference (see Sensitivity); null where not measured"),
    ("perturbation", pa.string(), "what was perturbed for `check_sensitive` and what it changed (tokens changed, or "
     "the largest difference against the tolerance), or why it was not measured"),
    ("graph_breaks", pa.int32(), "graph breaks dynamo counted (0 under fullgraph=True, where a break is an error: 1)"),
    ("unique_graphs", pa.int32(), "graphs dynamo compiled (torch._dynamo.utils.counters)"),
    ("recompiles", pa.int32(), "recompilations dynamo logged (each with a guard that failed)"),
    ("prompt_tokens", pa.int32(), "text generation: the prompt's length in tokens, as generate() was given it (an "
     "image-text model's with its image tokens); null for the other libraries and where the run failed"),
    ("symbolic_shapes", pa.list_(pa.string()), "the symbols dynamo traced the compiled graphs with: a size or int made "
     "symbolic, or a data-dependent value (unbacked); empty when every shape was static, as Trainium compiles them; "
     "null where not measured"),
    ("fallback_ops", pa.list_(pa.string()), "on neuron: the ops torch-neuronx ran on the CPU instead of the device"),
    ("declared_fullgraph", pa.bool_(), "what the installed transformers declares for the model class "
     "(`_can_compile_fullgraph`), beside what was measured"),
    # The published dataset's own columns that have no counterpart above (see PUBLISHED_COLUMNS): kept as read.
    ("runner", pa.string(), _KEPT + " (not documented publicly: shown, never interpreted; null in rows neuronhelpers "
     "writes)"),
    ("notes", pa.string(), _KEPT + " (not documented publicly: shown, never interpreted; null in rows neuronhelpers "
     "writes)"),
    ("hbm_capacity_gb", pa.float64(), _KEPT + " (device memory capacity, read as GiB; null in rows neuronhelpers "
     "writes)"),
    ("cpu_match", pa.string(), _KEPT + " (it appears to record the comparison with a CPU run; its values are not "
     "documented publicly, so they are shown as recorded and never read as a verification)"),
    ("english", pa.string(), _KEPT + " (it appears to record the judge's reading of the text; shown as recorded and "
     "never read as a verification)"),
    (vocab.TRANSFORMERS, pa.string(), "transformers version, where installed (whatever the row's library)"),
    ("accelerate", pa.string(), "accelerate version, where installed"),
    ("nki", pa.string(), "NKI (Neuron Kernel Interface) version, where installed"),
    ("python", pa.string(), "Python version"),
    ("neuron_driver", pa.string(), "Neuron driver (kernel module) version, where a Neuron device is present"),
    ("packages", pa.string(), "every installed distribution, pip-freeze form"),
    ("run_py", pa.string(), "the exact run.py that ran"),
    ("requirements", pa.string(), "requirements.txt for the run.py"),
    ("harness_version", pa.string(), "version of the measuring around run.py that made the row's figures "
     "(the recipe itself is the run_py text)"),
    ("timestamp", pa.timestamp("us", tz="UTC"), "when the run finished"),
]
SCHEMA = pa.schema([pa.field(name, typ) for name, typ, _ in COLUMNS])
COLUMN_NAMES = [name for name, _, _ in COLUMNS]

# ------------------------------------------------------------------------------------------------
# The published dataset's layout (settings.dataset_repo(), as its Hub viewer lists it): how its columns read as ours.
# ------------------------------------------------------------------------------------------------

# Its `*_gb` columns are read as GiB (2**30 bytes): the Neuron docs state device memory in GiB ("approximately 24 GiB
# of HBM per rank"); the published dataset does not say which unit it means.
PUBLISHED_GB = 2**30
SAME = "the same"
PUBLISHED_CORES = "tp"  # the published name of `neuron_cores` (a column name, not the parallelism `tp`)
KEPT = "kept under its own name"
# (published column, its type as the Hub's viewer lists it, our column it reads into, how). Every published column is
# here, in the published order; the card's mapping table is this list. ``store/published.py`` converts both ways.
PUBLISHED_COLUMNS = [
    ("model_id", pa.string(), "model_id", SAME),
    ("library", pa.string(), "library", SAME),
    (PUBLISHED_CORES, pa.int32(), "neuron_cores", "the same count under our name: the cores (ranks) the model was "
     "sharded over"),
    ("runner", pa.string(), "runner", KEPT),
    ("result", pa.string(), "result", "the same, except that a row with an `exclusion` reads EXCLUDED"),
    ("notes", pa.string(), "notes", KEPT),
    ("error", pa.string(), "error", "the same (on an excluded row it follows the exclusion)"),
    ("exclusion", pa.string(), "error", "a non-empty exclusion makes the row EXCLUDED, the exclusion its reason in "
     "`error` (the recorded result and error follow it, so nothing is lost)"),
    ("wall_s", pa.int32(), "wall_s", "the same seconds (whole seconds there)"),
    ("hbm_peak_gb", pa.float64(), "peak_memory_bytes", "GiB to bytes"),
    ("hbm_capacity_gb", pa.float64(), "hbm_capacity_gb", KEPT + " (GiB)"),
    ("cpu_match", pa.string(), "cpu_match", KEPT),
    ("english", pa.string(), "english", KEPT),
    ("neuronx_cc", pa.string(), "neuronx_cc", "the same; it is also the row's `compiler_version`, with `compiler` "
     "neuronx-cc and `backend` neuron"),
    ("library_version", pa.string(), "library_version", SAME),
    (vocab.TRANSFORMERS, pa.string(), vocab.TRANSFORMERS, SAME),
    ("accelerate", pa.string(), "accelerate", SAME),
    ("torch_neuronx", pa.string(), "torch_neuronx", SAME),
    ("torch", pa.string(), "torch", SAME),
    ("nki", pa.string(), "nki", SAME),
    ("python", pa.string(), "python", SAME),
    ("neuron_driver", pa.string(), "neuron_driver", SAME),
    ("tested_at", pa.timestamp("ms", tz="UTC"), "timestamp",
     "the same instant (milliseconds there, microseconds here)"),
    ("run_py", pa.string(), "run_py", SAME),
]
PUBLISHED_SCHEMA = pa.schema([pa.field(name, typ) for name, typ, _, _ in PUBLISHED_COLUMNS])
PUBLISHED_NAMES = [name for name, _, _, _ in PUBLISHED_COLUMNS]
# The published columns whose value changes on the way into ours (``published.from_published`` converts them); every
# other one is copied as it is under our column's name.
PUBLISHED_CONVERTED = ("exclusion", "hbm_peak_gb")
# Published names for one of our columns under another name with the same value (`tp`, `tested_at`): a frame read
# with ``load_results`` carries them too, so a query written for the published files works on ours.
ALIASES = {published: ours for published, _, ours, _ in PUBLISHED_COLUMNS
           if published != ours and published not in PUBLISHED_CONVERTED}


def cast_column(column, typ: pa.DataType, name: str = "") -> pa.Array | pa.ChunkedArray:
    """A column read from a file in the type the schema gives it, taking the variants other tools write: a float count
    (NaN or null where missing; a fraction is refused), a time as ISO text (UTC where it names no zone), a column
    typed null, a result in lower case. Raises ValueError naming the column and the value it cannot take."""
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), typ)
    if pa.types.is_integer(typ) and pa.types.is_floating(column.type):
        column = pc.if_else(pc.is_nan(column), pa.scalar(None, column.type), column)
        whole = pc.equal(pc.floor(column), column)
        if not pc.all(pc.or_kleene(whole, pc.is_null(column))).as_py():
            odd = column.filter(pc.invert(pc.fill_null(whole, True)))[0].as_py()
            raise ValueError(f"column {name or '?'} holds {odd}, not a whole number")
    if pa.types.is_timestamp(typ) and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pa.array([_iso_time(text, name) for text in column.to_pylist()], pa.timestamp("us", tz="UTC"))
    if name == "result" and pa.types.is_string(column.type):
        column = pa.array([v.upper() if isinstance(v, str) and v.upper() in vocab.RESULTS else v
                           for v in column.to_pylist()], pa.string())
    return column.cast(typ, safe=not pa.types.is_timestamp(typ))  # finer time units are truncated, not refused


def _iso_time(text, name):
    if text is None or not str(text).strip():
        return None
    try:
        value = _dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"column {name or '?'} holds {text!r}, not an ISO time") from None
    return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)


def new_row(**values) -> dict:
    """A row with every column present (null where not given); unknown columns are an error."""
    unknown = set(values) - set(COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not result columns: {', '.join(sorted(unknown))}")
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(values)
    row.setdefault("harness_version", HARNESS_VERSION)
    if row["harness_version"] is None:
        row["harness_version"] = HARNESS_VERSION
    if row["timestamp"] is None:
        row["timestamp"] = _dt.datetime.now(_dt.timezone.utc)
    return row


class RowRefused(UserError, vocab.VocabularyError):
    """A row that breaks a rule of the schema: one line naming the row and the rule (nothing was written)."""


def validate_row(row: dict, *, published: bool = False) -> None:
    """The rules every row we write keeps, wherever it is written (raise vocab.VocabularyError naming the rule): a
    model id; result, stage, verification, evidence and library in the vocabulary; a verification for PASS, a stage
    for FAIL, an untested reason for UNTESTED. ``published``: the published dataset's rules too (a Hub id measured on
    Trainium, with its neuronx-cc version)."""
    model = row.get("model_id")
    if not isinstance(model, str) or not model.strip():
        raise vocab.VocabularyError(f"a row without a model_id (result {row.get('result')!r})")
    for kind in ("result", "stage", "verification", "evidence", "library"):
        vocab.check_value(kind, row.get(kind))
    result, stage = row.get("result"), row.get("stage")
    if result == vocab.FAIL and stage not in vocab.STAGES:
        raise vocab.VocabularyError(f"row for {model!r} is FAIL without a stage" if not stage
                                    else f"row for {model!r} is FAIL with the untested reason {stage!r} as its stage")
    if result == vocab.UNTESTED and stage not in vocab.UNTESTED_STAGES:
        raise vocab.VocabularyError(f"row for {model!r} is UNTESTED without a reason in `stage` "
                                    f"(one of {', '.join(vocab.UNTESTED_STAGES)})")
    if result == vocab.PASS and not row.get("verification"):
        raise vocab.VocabularyError(f"row for {model!r} is PASS without a verification")
    source = row.get("config_source")
    if not _missing(row.get("twin_from")) and model.startswith("tiny/") and not (isinstance(source, str)
                                                                                  and source.strip()):
        raise vocab.VocabularyError(f"row for {model!r} is a model twin without config_source (where the config that "
                                    "built it was read: twins/own.py source_for_digest finds it from config_digest)")
    if published:
        if result not in (vocab.PASS, vocab.FAIL):
            raise vocab.VocabularyError(f"row for {model!r} is {result}, not a verdict")
        where = ran_on(row.get("backend"), row.get("weights"), model)
        if where != vocab.RAN_ON_TRAINIUM:  # what to do instead, in words a contributor can act on
            device = vocab.RAN_ON_DEVICE.get(row.get("backend"), "")
            why = ("only a Hub checkpoint measured there is a verdict: run it by its Hub id on the trn2"
                   if device == vocab.RAN_ON_TRAINIUM else
                   f"a {device or 'non-Trainium'} row is not a Trainium verdict: run a Hub model on a trn2 and "
                   "contribute that row")
            raise vocab.VocabularyError(f"row for {model!r} ran on {where}, not Trainium ({why})")
        if not vocab.is_hub_id(model) or model.startswith("tiny/"):
            raise vocab.VocabularyError(f"row for {model!r} is not under a Hub id (org/name)")
        if not isinstance(row.get("neuronx_cc"), str) or not row["neuronx_cc"].strip():
            raise vocab.VocabularyError(f"row for {model!r} names no neuronx_cc version")


def checked_rows(rows: list[dict], *, published: bool = False) -> list[dict]:
    """Rows ready to write: every column present (``new_row``), a timestamp given as ISO text read as a time (UTC
    where it names no zone), and each row held to ``validate_row``. The first row that breaks a rule raises
    RowRefused naming it and the rule, before anything is written."""
    out = []
    for number, row in enumerate(rows, 1):
        label = f"row {number} of {len(rows)} ({row.get('model_id')!r})"
        unknown = set(row) - set(COLUMN_NAMES)
        if unknown:
            raise RowRefused(f"{label} has columns the schema does not: {', '.join(sorted(unknown))}; nothing was "
                             "written")
        row = new_row(**row)
        text = row["timestamp"]
        if isinstance(text, str):
            try:
                row["timestamp"] = _iso_time(text, "timestamp")
            except ValueError:
                row["timestamp"] = None
            if row["timestamp"] is None:  # not a time, or blank: a row's time is required
                raise RowRefused(f"{label}: timestamp {text!r} is not an ISO time; nothing was written")
        try:
            validate_row(row, published=published)
        except vocab.VocabularyError as exc:
            named = str(exc).startswith("row for ")  # the rule's message names the model already
            raise RowRefused(f"{f'row {number} of {len(rows)}' if named else label} refused: {exc}; nothing was "
                             "written") from None
        out.append(row)
    return out


# A row is "already recorded" (a sweep skips the model) when these match: the model as resolved (a local
# folder by its absolute path), the versions that ran it, and the planned core count.
RESUME_KEY = ("model_id", "weights", "backend", "compiler", "compiler_version", "library", "library_version",
              "neuron_cores")


def weights_kind(weights, model_id) -> str:
    """hub, shelf, twin or folder: the part of `weights` the resume key holds (rows written before the column
    existed are twins when their model_id says so, else Hub checkpoints)."""
    if isinstance(weights, str) and weights:
        return weights.split(":", 1)[0]
    return vocab.WEIGHTS_TWIN if isinstance(model_id, str) and model_id.startswith("tiny/") else vocab.WEIGHTS_HUB


def ran_on(backend, weights, model_id) -> str:
    """What a row ran on, in words (vocab.RAN_ON): 'Trainium' for a Hub checkpoint on a neuron backend, else the
    device and 'twin' or 'real checkpoint' ('CPU twin', 'CPU real checkpoint', a shelf copy on Trainium 'Trainium
    real checkpoint')."""
    backend = backend if isinstance(backend, str) and backend else None  # NaN from a pandas column is no backend
    device = vocab.RAN_ON_DEVICE.get(backend, backend or "unknown device")
    kind = weights_kind(weights, model_id)
    twin = kind == vocab.WEIGHTS_TWIN
    if device == vocab.RAN_ON_TRAINIUM and kind == vocab.WEIGHTS_HUB:  # a shelf or folder copy is not the Hub's
        return device
    return f"{device} {vocab.RAN_ON_TWIN if twin else vocab.RAN_ON_REAL}"


def measured_on_trainium(backend, weights, model_id) -> bool:
    """A Hub checkpoint measured on Trainium: what the published dataset holds (and the only rows it takes)."""
    return ran_on(backend, weights, model_id) == vocab.RAN_ON_TRAINIUM


def ran_on_labels(rows) -> list[str]:
    """``ran_on`` of each row of a frame (model_id, backend and, where it has one, weights)."""
    weights = rows["weights"] if "weights" in rows else [None] * len(rows)
    return [ran_on(b, w, m) for b, w, m in zip(rows["backend"], weights, rows["model_id"], strict=True)]


def weights_kinds(weights, model_ids) -> list[str]:
    """``weights_kind`` of each row, from a column of weights (None when the rows have no such column) and model ids."""
    model_ids = list(model_ids)
    weights = [None] * len(model_ids) if weights is None else list(weights)
    return [weights_kind(w, m) for w, m in zip(weights, model_ids, strict=False)]


def resume_key(row: dict) -> tuple:
    """The one resume key of a row (or of a planned run, which carries the same columns): a shelf row and a Hub row
    of one model in one version pair live side by side."""
    def value(name):
        if name == "weights":
            return weights_kind(row.get("weights"), row.get("model_id"))
        return None if _missing(row.get(name)) else row.get(name)

    return tuple(value(name) for name in RESUME_KEY)


def _missing(value) -> bool:
    """None, NaN, or pandas' NA (a nullable integer column's missing count)."""
    if value is None or isinstance(value, (str, bytes)):
        return value is None
    try:
        return bool(value != value)  # NaN is the one value unequal to itself
    except TypeError:  # pd.NA: its truth is ambiguous, and it is missing
        return True


def replaces(new_key: tuple, old_key: tuple) -> bool:
    """Does a new row replace an old one? Same key; or the same model and versions where either row was not
    run (no core count: EXCLUDED or UNTESTED), so a verdict replaces a non-verdict and the other way round."""
    if new_key == old_key:
        return True
    return new_key[:-1] == old_key[:-1] and (new_key[-1] is None or old_key[-1] is None)


def rows_to_table(rows: list[dict]) -> pa.Table:
    for row in rows:
        validate_row(row)
    return pa.Table.from_pylist([_complete(row) for row in rows], schema=SCHEMA)


def _complete(row: dict) -> dict:
    """The row with every column present (as ``new_row`` makes it)."""
    return row if set(row) == set(COLUMN_NAMES) else new_row(**row)
