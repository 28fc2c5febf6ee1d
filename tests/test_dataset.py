"""The results dataset: atomic version-pair files, schema unification, bad files skipped by name, the card."""

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import result_row
from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.store import card, dataset, schema


def row(model_id, result="PASS", **overrides):
    return result_row(model_id, result, **overrides)


def test_one_file_per_version_pair_and_the_seed_query(tmp_path):
    dataset.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B"), row("tiny/llama")])
    dataset.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B", "FAIL", compiler_version="2.14.0")])
    dataset.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B", library_version="5.24.0")])
    files = sorted(os.listdir(tmp_path / "data"))
    assert files == ["inductor-2.13.0__transformers-5.23.0.parquet", "inductor-2.13.0__transformers-5.24.0.parquet",
                     "inductor-2.14.0__transformers-5.23.0.parquet"]
    df = pd.read_parquet(tmp_path / "data")  # plain pandas
    view = df[df.model_id == "Qwen/Qwen3-0.6B"][["neuronx_cc", "library", "library_version", "neuron_cores", "result"]]
    assert len(view) == 3 and sorted(view.result) == ["FAIL", "PASS", "PASS"]
    assert len(dataset.load_results(tmp_path)) == 4


def test_rewriting_a_row_replaces_it_and_leaves_no_temp_files(tmp_path):
    dataset.append_rows(tmp_path, [row("m1"), row("m2")])
    dataset.append_rows(tmp_path, [row("m1", "FAIL")])
    df = dataset.load_results(tmp_path)
    assert sorted(df.model_id) == ["m1", "m2"]
    assert df.set_index("model_id").loc["m1", "result"] == "FAIL"
    assert [n for n in os.listdir(tmp_path / "data") if n.startswith(".")] == []


def test_older_files_without_newer_columns_read_as_null(tmp_path):
    table = schema.rows_to_table([row("old/model")]).drop_columns(["ttft_s", "decode_tokens_per_s"])
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "old.parquet")
    dataset.append_rows(tmp_path, [row("new/model", ttft_s=0.5)])
    df = dataset.load_results(tmp_path).set_index("model_id")
    assert pd.isna(df.loc["old/model", "ttft_s"]) and df.loc["new/model", "ttft_s"] == 0.5


def test_truncated_and_foreign_files_are_named_and_skipped(tmp_path):
    dataset.append_rows(tmp_path, [row("good/model")])
    data = tmp_path / "data"
    good = next(data.iterdir())
    (data / "truncated.parquet").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    pq.write_table(pa.table({"city": ["Lyon"], "population": [500000]}), data / "foreign.parquet")
    with pytest.warns(dataset.DatasetWarning) as caught:
        df = dataset.load_results(tmp_path)
    messages = " ".join(str(w.message) for w in caught)
    assert "truncated.parquet" in messages and "foreign.parquet" in messages
    assert list(df.model_id) == ["good/model"]
    assert {os.path.basename(name) for name, _ in df.attrs["skipped"]} == {"truncated.parquet", "foreign.parquet"}


def test_a_file_with_an_unknown_result_value_is_kept_and_named_in_one_warning(tmp_path):
    bad = schema.new_row(model_id="x", result="PASS", verification="exact")
    table = pa.Table.from_pylist([{**bad, "result": "SORTA"}, {**bad, "model_id": "y", "result": "SORTA"}],
                                 schema=schema.SCHEMA)
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "bad.parquet")
    with pytest.warns(dataset.DatasetWarning, match="bad.parquet holds values outside .*result 'SORTA'") as caught:
        df = dataset.load_results(tmp_path)
    assert len(caught) == 1  # one warning per file, not per row
    assert sorted(df.model_id) == ["x", "y"] and set(df.result) == {"SORTA"}  # nothing recorded is hidden
    assert [name.endswith("bad.parquet") for name, _ in df.attrs["off_vocabulary"]] == [True]


def test_a_file_with_only_the_published_columns_reads_with_the_rest_null(tmp_path):
    """Another tool's results file, carrying only the published catalog's seed columns."""
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"model_id": ["Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B"],
                             "neuronx_cc": ["2.21.0", "2.21.0"], "library": ["transformers"] * 2,
                             "library_version": ["4.57.1"] * 2, "neuron_cores": [1, 4], "result": ["PASS", "FAIL"],
                             "error": [None, "RuntimeError: boom"]}), tmp_path / "data" / "published.parquet")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid foreign file reads without a warning
        df = dataset.load_results(tmp_path).set_index("model_id")
    # our columns, then the published names of two of them (tp is neuron_cores, tested_at the timestamp)
    assert list(df.columns) == [c for c in schema.COLUMN_NAMES if c != "model_id"] + list(schema.ALIASES)
    assert df.loc["meta-llama/Llama-3.1-8B", "neuron_cores"] == 4 and df.loc["Qwen/Qwen3-0.6B", "result"] == "PASS"
    assert df.loc["meta-llama/Llama-3.1-8B", "tp"] == 4
    # a row naming a neuronx-cc version ran on Trainium: the pickers and diff place it by compiler
    assert set(df["backend"]) == {"neuron"} and set(df["compiler"]) == {"neuronx-cc"}
    assert set(df["compiler_version"]) == {"2.21.0"}
    assert df["wall_s"].isna().all() and df["run_py"].isna().all()


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no results dataset at"):
        dataset.load_results(tmp_path / "nope")


def test_card_explains_every_vocabulary_value_and_column():
    text = card.render_card()
    assert text.startswith("---\nlicense: apache-2.0")
    for value in [*vocab.RESULTS, *vocab.STAGES, *vocab.UNTESTED_STAGES, *vocab.VERIFICATIONS, *vocab.TASKS,
                  *schema.COLUMN_NAMES]:
        assert f"`{value}`" in text, value
    assert "path: data/*.parquet" in text


def test_one_newest_row_rule_puts_rows_without_a_timestamp_oldest():
    """Views, plots and diff share store.dataset.newest_per_model: a row without a timestamp never hides a dated one."""
    import pandas as pd

    from neuronhelpers.store.dataset import newest_per_model
    from neuronhelpers.store.diff import diff_results

    old = pd.DataFrame({"model_id": ["m", "m"], "result": ["PASS", "FAIL"], "error": [None, "boom"],
                        "stage": [None, "run"],
                        "wall_s": [10.0, 10.0], "peak_memory_bytes": [1, 1],
                        "timestamp": [pd.Timestamp("2026-01-02", tz="UTC"), pd.NaT]})
    assert newest_per_model(old)["result"].tolist() == ["PASS"]
    new = old.assign(result=["PASS", "PASS"], error=[None, None], stage=[None, None])
    assert diff_results(old, new).empty  # the dated PASS is the newest on both sides: nothing changed
