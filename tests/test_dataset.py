"""The results dataset: atomic version-pair files, schema unification, bad files skipped by name, the card."""

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import result_row
from neuronhelpers import card, results, vocab
from neuronhelpers.errors import UserError


def row(model_id, result="PASS", **overrides):
    return result_row(model_id, result, **overrides)


def test_one_file_per_version_pair_and_the_seed_query(tmp_path):
    results.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B"), row("tiny/llama")])
    results.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B", "FAIL", compiler_version="2.14.0")])
    results.append_rows(tmp_path, [row("Qwen/Qwen3-0.6B", library_version="5.24.0")])
    files = sorted(os.listdir(tmp_path / "data"))
    assert files == ["inductor-2.13.0__transformers-5.23.0.parquet", "inductor-2.13.0__transformers-5.24.0.parquet",
                     "inductor-2.14.0__transformers-5.23.0.parquet"]
    df = pd.read_parquet(tmp_path / "data")  # plain pandas
    view = df[df.model_id == "Qwen/Qwen3-0.6B"][["neuronx_cc", "library", "library_version", "neuron_cores", "result"]]
    assert len(view) == 3 and sorted(view.result) == ["FAIL", "PASS", "PASS"]
    assert len(results.load_results(tmp_path)) == 4


def test_rewriting_a_row_replaces_it_and_leaves_no_temp_files(tmp_path):
    results.append_rows(tmp_path, [row("m1"), row("m2")])
    results.append_rows(tmp_path, [row("m1", "FAIL")])
    df = results.load_results(tmp_path)
    assert sorted(df.model_id) == ["m1", "m2"]
    assert df.set_index("model_id").loc["m1", "result"] == "FAIL"
    assert [n for n in os.listdir(tmp_path / "data") if n.startswith(".")] == []


def test_older_files_without_newer_columns_read_as_null(tmp_path):
    table = results.rows_to_table([row("old/model")]).drop_columns(["ttft_s", "decode_tokens_per_s"])
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "old.parquet")
    results.append_rows(tmp_path, [row("new/model", ttft_s=0.5)])
    df = results.load_results(tmp_path).set_index("model_id")
    assert pd.isna(df.loc["old/model", "ttft_s"]) and df.loc["new/model", "ttft_s"] == 0.5


def test_truncated_and_foreign_files_are_named_and_skipped(tmp_path):
    results.append_rows(tmp_path, [row("good/model")])
    data = tmp_path / "data"
    good = next(data.iterdir())
    (data / "truncated.parquet").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    pq.write_table(pa.table({"city": ["Lyon"], "population": [500000]}), data / "foreign.parquet")
    with pytest.warns(results.DatasetWarning) as caught:
        df = results.load_results(tmp_path)
    messages = " ".join(str(w.message) for w in caught)
    assert "truncated.parquet" in messages and "foreign.parquet" in messages
    assert list(df.model_id) == ["good/model"]
    assert {os.path.basename(name) for name, _ in df.attrs["skipped"]} == {"truncated.parquet", "foreign.parquet"}


def test_a_file_with_an_unknown_result_value_is_skipped_with_the_value(tmp_path):
    bad = results.new_row(model_id="x", result="PASS", verification="exact")
    table = pa.Table.from_pylist([{**bad, "result": "SORTA"}], schema=results.SCHEMA)
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "bad.parquet")
    with pytest.warns(results.DatasetWarning, match="bad.parquet.*unknown result value 'SORTA'"):
        df = results.load_results(tmp_path)
    assert df.empty


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no results dataset at"):
        results.load_results(tmp_path / "nope")


def test_card_explains_every_vocabulary_value_and_column():
    text = card.render_card()
    assert text.startswith("---\nlicense: apache-2.0")
    for value in [*vocab.RESULTS, *vocab.STAGES, *vocab.VERIFICATIONS, *results.COLUMN_NAMES]:
        assert f"`{value}`" in text, value
    assert "path: data/*.parquet" in text
