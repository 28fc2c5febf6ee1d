"""The row schema and the vocabulary it is checked against."""

import pytest

from neuronhelpers.core import vocab
from neuronhelpers.store import schema


def test_the_seed_query_works_on_a_dataset_as_written(tmp_path):
    """DESIGN's query, with plain pandas, on a folder the package wrote: the seed columns exist and hold the row."""
    import pandas as pd

    from conftest import result_row
    from neuronhelpers.store import dataset

    dataset.append_rows(tmp_path, [result_row("Qwen/Qwen3-0.6B"), result_row("tiny/llama", result="FAIL")])
    df = pd.read_parquet(tmp_path / "data")
    seed = df[df.model_id == "Qwen/Qwen3-0.6B"][["neuronx_cc", "library", "library_version", "neuron_cores", "result"]]
    assert seed.drop(columns="neuronx_cc").to_dict("records") == [
        {"library": "transformers", "library_version": "5.23.0", "neuron_cores": 1, "result": "PASS"}]
    assert seed["neuronx_cc"].isna().all()  # an inductor row: no Neuron compiler
    assert "error" in df.columns


def test_a_row_becomes_a_table_with_the_schema():
    row = schema.new_row(model_id="tiny/llama", result="PASS", verification="exact", neuron_cores=1, tokens=[1, 2])
    table = schema.rows_to_table([row])
    assert table.schema == schema.SCHEMA
    assert table.column("tokens").to_pylist() == [[1, 2]]


@pytest.mark.parametrize(
    "values, message",
    [
        ({"result": "MAYBE"}, "unknown result value 'MAYBE'"),
        ({"result": "FAIL", "stage": "exploded"}, "unknown stage value 'exploded'"),
        ({"result": "PASS", "verification": "vibes"}, "unknown verification value 'vibes'"),
        ({"result": "FAIL"}, "FAIL without a stage"),
        ({"result": "PASS"}, "PASS without a verification"),
    ],
)
def test_rows_outside_the_vocabulary_are_refused(values, message):
    with pytest.raises(vocab.VocabularyError, match=message):
        schema.rows_to_table([schema.new_row(model_id="m", **values)])


def test_unknown_column_is_refused():
    with pytest.raises(KeyError, match="not result columns: colour"):
        schema.new_row(colour="blue")
