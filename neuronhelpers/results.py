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
    ("generate_s", pa.float64(), "seconds of a warm, compiled generate of 32 tokens"),
    ("wall_s", pa.float64(), "wall time of the whole run process, compilation included"),
    ("ttft_s", pa.float64(), "time to first token of the warm generate"),
    ("decode_tokens_per_s", pa.float64(), "tokens per second after the first, warm"),
    ("peak_memory_bytes", pa.int64(), "peak device memory (the largest over ranks when sharded)"),
    ("peak_memory_per_rank", pa.list_(pa.int64()), "peak device memory of each rank"),
    ("tokens", pa.list_(pa.int32()), "the generated token ids"),
    ("text", pa.string(), "the generated text"),
    ("reference_tokens", pa.list_(pa.int32()), "the CPU eager reference's token ids"),
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
    return pa.Table.from_pylist([new_row(**row) if set(row) != set(COLUMN_NAMES) else row for row in rows], schema=SCHEMA)
