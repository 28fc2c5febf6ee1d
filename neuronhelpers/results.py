"""The result row: its schema (defined once, here) and how a row is checked against the vocabulary."""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa

from . import vocab

HARNESS_VERSION = "0.1.0"

# (name, type, description). The dataset card's column table is generated from this list.
COLUMNS = [
    ("model_id", pa.string(), "Hub id of the model, or tiny/<model_type> for a tiny twin (never the real model)"),
    ("task", pa.string(), "text-generation or image-text-to-text"),
    ("model_type", pa.string(), "transformers model_type (the architecture)"),
    ("twin_of", pa.string(), "for a tiny twin: the architecture it stands in for; null for real checkpoints"),
    ("result", pa.string(), "PASS, FAIL or EXCLUDED (see Results)"),
    ("stage", pa.string(), "where a FAIL happened (see Stages); null on PASS"),
    ("error", pa.string(), "last meaningful line of the error, or the exclusion reason"),
    ("traceback", pa.string(), "the full error output of the failed process"),
    ("parameters", pa.int64(), "parameter count (safetensors headers, Hub metadata, or estimated from the config)"),
    ("neuron_cores", pa.int32(), "cores (ranks) the model was sharded over"),
    ("parallelism", pa.string(), "none, tp, ep or tp+ep"),
    ("backend", pa.string(), "neuron, cuda or cpu"),
    ("compiler", pa.string(), "neuronx-cc on Trainium; inductor elsewhere"),
    ("compiler_version", pa.string(), "version of that compiler (torch's version for inductor)"),
    ("neuronx_cc", pa.string(), "neuronx-cc version (null when the run did not use the Neuron compiler)"),
    ("library", pa.string(), "the modeling library (transformers)"),
    ("library_version", pa.string(), "its version"),
    ("torch", pa.string(), "torch version"),
    ("torch_neuronx", pa.string(), "torch-neuronx version, where installed"),
    ("dtype", pa.string(), "dtype of the weights and activations in the run and its reference"),
    ("load_s", pa.float64(), "seconds in from_pretrained and moving the model to the device"),
    ("compile_s", pa.float64(), "first generate call minus a warm one: the cost of compilation"),
    ("cache_hit", pa.bool_(), "the run found its compiled graphs in the compile cache (it compiled nothing new)"),
    ("generate_s", pa.float64(), "seconds of a warm, compiled generate of 32 tokens"),
    ("wall_s", pa.float64(), "wall time of the whole run process, compilation included"),
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
    ("first_divergence", pa.int32(), "index of the first token that differs from the reference"),
    ("divergence_margin", pa.float64(), "reference top-1/top-2 logit margin at the first divergence"),
    ("packages", pa.string(), "every installed distribution, pip-freeze form"),
    ("run_py", pa.string(), "the exact run.py that ran"),
    ("requirements", pa.string(), "requirements.txt for the run.py"),
    ("harness_version", pa.string(), "neuronhelpers version that produced the row"),
    ("timestamp", pa.timestamp("us", tz="UTC"), "when the run finished"),
]
SCHEMA = pa.schema([pa.field(name, typ) for name, typ, _ in COLUMNS])
COLUMN_NAMES = [name for name, _, _ in COLUMNS]


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


def validate_row(row: dict) -> None:
    """Raise vocab.VocabularyError when a row's result, stage or verification is not in the vocabulary."""
    vocab.check_value("result", row.get("result"))
    vocab.check_value("stage", row.get("stage"))
    vocab.check_value("verification", row.get("verification"))
    if row.get("result") == vocab.FAIL and not row.get("stage"):
        raise vocab.VocabularyError(f"row for {row.get('model_id')!r} is FAIL without a stage")
    if row.get("result") == vocab.PASS and not row.get("verification"):
        raise vocab.VocabularyError(f"row for {row.get('model_id')!r} is PASS without a verification")


def rows_to_table(rows: list[dict]) -> pa.Table:
    for row in rows:
        validate_row(row)
    return pa.Table.from_pylist([_complete(row) for row in rows], schema=SCHEMA)


def _complete(row: dict) -> dict:
    """The row with every column present (as ``new_row`` makes it)."""
    return row if set(row) == set(COLUMN_NAMES) else new_row(**row)


# ---------------------------------------------------------------------------------------------
# The dataset: one Parquet file per (compiler version, library, library version) pair, under data/.
# ---------------------------------------------------------------------------------------------

DATA_DIR = "data"
# A row is "already recorded" for a sweep when these match (resume key).
RESUME_KEY = ("model_id", "backend", "compiler", "compiler_version", "library", "library_version", "neuron_cores")


def _safe(part) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(part))


def version_pair_file(row: dict) -> str:
    """Relative path of the Parquet file a row belongs to: data/<compiler>-<version>__<library>-<version>.parquet."""
    compiler = f"{row.get('compiler') or 'unknown'}-{row.get('compiler_version') or 'unknown'}"
    library = f"{row.get('library') or 'transformers'}-{row.get('library_version') or 'unknown'}"
    return f"{DATA_DIR}/{_safe(compiler)}__{_safe(library)}.parquet"


def write_table_atomic(table: pa.Table, path) -> None:
    """Write a Parquet file under a temporary name, then rename: readers never see a partial file."""
    import os
    import tempfile
    from pathlib import Path

    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def append_rows(folder, rows: list[dict]) -> list[str]:
    """Add rows to their version-pair files in ``folder`` (read, concatenate, atomic rewrite); returns files touched.

    A row replaces an earlier row with the same resume key, so a rerun (--rerun) never duplicates.
    """
    from pathlib import Path

    import pyarrow.parquet as pq

    folder = Path(folder)
    by_file: dict[str, list[dict]] = {}
    for row in rows:
        by_file.setdefault(version_pair_file(row), []).append(_complete(row))
    for rel, new in by_file.items():
        path = folder / rel
        fresh = rows_to_table(new)
        if path.exists():
            old = conform(pq.read_table(path))
            keys = {tuple(r[k] for k in RESUME_KEY) for r in new}
            mask = [tuple(v) not in keys for v in zip(*(old.column(k).to_pylist() for k in RESUME_KEY))]
            fresh = pa.concat_tables([old.filter(pa.array(mask, type=pa.bool_())), fresh])
        write_table_atomic(fresh, path)
    return sorted(by_file)


def conform(table: pa.Table) -> pa.Table:
    """Cast a table to the current schema: columns it lacks (older harness versions) read as null."""
    columns = []
    for field in SCHEMA:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, type=field.type))
    return pa.Table.from_arrays(columns, schema=SCHEMA)


class DatasetWarning(UserWarning):
    pass


def _list_parquet(path: str):
    """(filesystem, [file paths]) for a local folder or an hf://datasets/... path."""
    import os

    if path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        fs = HfFileSystem()
        files = sorted(p for p in fs.glob(path.rstrip("/") + "/**/*.parquet"))
        return fs, files
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".parquet") and not n.startswith(".")]
    return None, files


def load_results_file(name, *, filesystem=None, validate: bool = True) -> pa.Table:
    """One results Parquet file, conformed to the current schema; raises when it is corrupt, foreign or off-vocabulary."""
    import pyarrow.parquet as pq

    table = pq.read_table(name, filesystem=filesystem) if filesystem else pq.read_table(name)
    missing = [c for c in SEED_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"not a neuronhelpers results file (no {', '.join(missing)} column)")
    table = conform(table)
    if validate:
        for row in table.select(["model_id", "result", "stage", "verification"]).to_pylist():
            vocab.check_value("result", row["result"])
            vocab.check_value("stage", row["stage"])
            vocab.check_value("verification", row["verification"])
    return table


def load_results(path, *, validate: bool = True):
    """Read a results dataset (local folder or hf://datasets/...) into one DataFrame.

    Files written by older harness versions are unified with the current schema (new columns read
    as null). A file that is corrupt, foreign (lacks the seed columns) or holds values outside the
    vocabulary is reported by name (a DatasetWarning; also in ``df.attrs['skipped']``) and skipped.
    """
    import os
    import warnings

    path = str(path)
    if not path.startswith("hf://") and not os.path.isdir(path):
        from .errors import UserError

        raise UserError(f"no results dataset at '{path}': give a folder of Parquet files or an hf://datasets/... path")
    fs, files = _list_parquet(path)
    tables, skipped = [], []
    for name in files:
        try:
            tables.append(load_results_file(name, filesystem=fs, validate=validate))
        except Exception as exc:  # noqa: BLE001 - one bad file must not hide the rest
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            skipped.append((name, reason))
            warnings.warn(f"skipped {name}: {reason}", DatasetWarning, stacklevel=2)
    table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    df = table.to_pandas()
    df.attrs["skipped"] = skipped
    df.attrs["files"] = [f for f in files if f not in {s[0] for s in skipped}]
    return df


SEED_COLUMNS = ("model_id", "neuronx_cc", "library", "library_version", "neuron_cores", "result", "error")


def recorded_keys(folder) -> set[tuple]:
    """Resume keys of the rows already in a local dataset folder (unreadable files contribute none)."""
    import os
    import warnings

    if not os.path.isdir(folder):
        return set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        df = load_results(folder, validate=False)
    if df.empty:
        return set()
    return set(map(tuple, df[list(RESUME_KEY)].astype(object).where(df[list(RESUME_KEY)].notna(), None).values.tolist()))
