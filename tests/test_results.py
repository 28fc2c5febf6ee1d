"""The row schema and the vocabulary it is checked against."""

import pytest

from neuronhelpers.store import schema as results
from neuronhelpers.core import vocab


def test_seed_columns_exist():
    for name in ("model_id", "neuronx_cc", "library", "library_version", "neuron_cores", "result", "error"):
        assert name in results.COLUMN_NAMES


def test_a_row_becomes_a_table_with_the_schema():
    row = results.new_row(model_id="tiny/llama", result="PASS", verification="exact", neuron_cores=1, tokens=[1, 2])
    table = results.rows_to_table([row])
    assert table.schema == results.SCHEMA
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
        results.rows_to_table([results.new_row(model_id="m", **values)])


def test_unknown_column_is_refused():
    with pytest.raises(KeyError, match="not result columns: colour"):
        results.new_row(colour="blue")
