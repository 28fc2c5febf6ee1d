"""A small dataset in the published layout, made up for lessons and tests: never a measurement.

Offline nothing of the published dataset can be read, so notebooks 01 and 05 and the tests use this example to show
how its files read, how rows join them and how twins compare with Trainium verdicts. It is laid out exactly as the
published dataset's viewer lists it (two files, one without `exclusion`, like the published ones), with values that
do not survive a careless conversion (`hbm_peak_gb` 17.3, timestamps in milliseconds). Every row says in `runner` and
`notes` that it is an example, and no row whose `runner` says so is ever published or contributed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa

from neuronhelpers.core import vocab
from neuronhelpers.core.versions import NEURON_COMPILER
from neuronhelpers.store import schema

EXAMPLE_RUNNER = "neuronhelpers-example"
EXAMPLE_NOTE = "made up by neuronhelpers for lessons and tests: not a measurement"
# Two files, named as the example's own pattern: data/neuronx_cc-<version>/<library>-<version>.parquet.
OLDER = ("2.22.12471.0", "4.57.6")
NEWER = ("2.23.6484.0", "5.23.0")
_COMPILE_ERROR = "RuntimeError: neuronx-cc failed: example error, not a measurement"
# (model_id, tp, result, error, exclusion, wall_s, hbm_peak_gb, cpu_match, english, day of December 2026)
_ROWS = {
    OLDER: [
        ("Qwen/Qwen3-0.6B", 1, vocab.PASS, None, None, 388, 2.4, "True", None, 1),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", 1, vocab.PASS, None, None, 201, 0.7, "True", None, 1),
        ("openai-community/gpt2", 1, vocab.PASS, None, None, 190, 0.9, "True", None, 1),
        ("google/gemma-3-1b-it", 1, vocab.FAIL, _COMPILE_ERROR, None, 611, None, None, None, 1),
    ],
    NEWER: [
        ("Qwen/Qwen3-0.6B", 1, vocab.PASS, None, None, 402, 2.4, "True", None, 2),
        ("meta-llama/Llama-3.1-8B-Instruct", 2, vocab.PASS, None, None, 1433, 17.3, None, "True", 2),
        ("google/gemma-2-2b-it", 1, vocab.FAIL, _COMPILE_ERROR, None, 702, None, None, None, 2),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 8, vocab.FAIL, _COMPILE_ERROR, None, 2290, 21.9, None, None, 2),
        ("example-org/unknown-architecture-1B", 1, vocab.PASS, None, None, 350, 2.0, "True", None, 2),
        ("deepseek-ai/DeepSeek-V3", None, None, None, "too large: needs more than 16 cores", None, None, None, None, 2),
    ],
}


def example_rows(pair: tuple[str, str]) -> pa.Table:
    """One example file's table, in the published columns and types (the older file without `exclusion`)."""
    neuronx_cc, library_version = pair
    records = []
    for model_id, tp, result, error, exclusion, wall, peak, cpu_match, english, day in _ROWS[pair]:
        tested = dt.datetime(2026, 12, day, 9, 30, 15, 123000, tzinfo=dt.timezone.utc)
        records.append({"model_id": model_id, "library": vocab.TRANSFORMERS, schema.PUBLISHED_CORES: tp,
                        "runner": EXAMPLE_RUNNER,
                        "result": result, "notes": EXAMPLE_NOTE, "error": error, "exclusion": exclusion,
                        "wall_s": wall, "hbm_peak_gb": peak, "hbm_capacity_gb": 24.0 if tp else None,
                        "cpu_match": cpu_match, "english": english, "neuronx_cc": neuronx_cc,
                        "library_version": library_version, vocab.TRANSFORMERS: library_version,
                        "accelerate": "1.15.0", "torch_neuronx": "2.14.3.0", "torch": "2.14.0", "nki": None,
                        "python": "3.12.11", "neuron_driver": "2.25.4.0", "tested_at": tested, "run_py": None})
    table = pa.Table.from_pylist(records, schema=schema.PUBLISHED_SCHEMA)
    return table.drop_columns(["exclusion"]) if pair == OLDER else table


def example_file(pair: tuple[str, str]) -> str:
    return f"data/neuronx_cc-{pair[0]}/{vocab.TRANSFORMERS}-{pair[1]}.parquet"


def write_published_example(folder) -> Path:
    """Write the example dataset (two Parquet files in the published layout) into ``folder``; returns the folder."""
    import pyarrow.parquet as pq

    folder = Path(folder)
    for pair in (OLDER, NEWER):
        path = folder / example_file(pair)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(example_rows(pair), path)
    return folder


def example_trainium_row() -> dict:
    """A made-up Trainium row in our columns, as a trn2 run would record it (a Hub id on the neuron backend, its run.py
    the recipe's own rendering), marked as the example in `runner` and `notes`: what ``contribute --dry-run --against``
    the local example shows a pull request would carry where there is no trn2. It is never sent anywhere."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import ModelRef
    from neuronhelpers.recipes import render

    model_id = "HuggingFaceTB/SmolLM2-135M-Instruct"  # in the older example file only: the row joins the newer one
    backend = get_backend("neuron")
    ref = ModelRef(model_id=model_id, path=model_id, task=vocab.TEXT_GENERATION, model_type="llama", weights="hub")
    return schema.new_row(
        model_id=model_id, task=vocab.TEXT_GENERATION, model_type="llama", weights="hub", result=vocab.PASS,
        verification=vocab.EXACT, backend=backend.name, compiler=NEURON_COMPILER, compiler_version=NEWER[0],
        neuronx_cc=NEWER[0], library=vocab.TRANSFORMERS, library_version=NEWER[1], neuron_cores=1,
        parallelism=vocab.NO_PARALLELISM, wall_s=198.0, peak_memory_bytes=int(0.7 * 2**30), torch_neuronx="2.14.3.0",
        python="3.12.11", runner=EXAMPLE_RUNNER, notes=EXAMPLE_NOTE,
        timestamp=dt.datetime(2026, 12, 3, 9, 30, 15, 123000, tzinfo=dt.timezone.utc),
        run_py=render.render_run_py(render.recipe_params(ref, backend)))


def is_example(runners) -> bool:
    """Whether any of these `runner` values marks a made-up example row."""
    return any(r == EXAMPLE_RUNNER for r in runners)
