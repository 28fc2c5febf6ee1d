"""Fill ``config_source`` (and the other config_* columns) of model-twin rows written before rows carried it (issue
54, part 7): each such row's ``config_digest`` is matched against the corpus's copy of its model's config, then the
shelf's (twins/own.py ``source_for_digest``); a row no copy matches gets an ``unknown:`` source that says so. Every
other column and row is kept as it is. Rerunning changes nothing.

    python scripts/fill_config_source.py [catalog/data]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from neuronhelpers.store.files import write_table_atomic
from neuronhelpers.twins.corpus import PROVENANCE_KEYS
from neuronhelpers.twins.own import UNKNOWN_SOURCE, source_for_digest


def fill_table(table: pa.Table) -> tuple[pa.Table, Counter]:
    """The table with every model-twin row's missing config_* columns filled, and a count of where they came from."""
    columns = {key: table.column(key).to_pylist() for key in PROVENANCE_KEYS}
    counts = Counter()
    for i, (model, twin_from, digest) in enumerate(zip(table.column("model_id").to_pylist(),
                                                       table.column("twin_from").to_pylist(),
                                                       table.column("config_digest").to_pylist(), strict=True)):
        if not twin_from or not model.startswith("tiny/"):
            continue
        if columns["config_source"][i]:
            counts["had one"] += 1
            continue
        found = source_for_digest(twin_from, digest)
        for key in PROVENANCE_KEYS:
            columns[key][i] = found.get(key)
        source = found["config_source"]
        counts["unknown" if source.startswith(UNKNOWN_SOURCE) else source.split(":")[0]] += 1
    for key, values in columns.items():
        index = table.column_names.index(key)
        table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    return table, counts


def main(folder: str = "catalog/data") -> None:
    for path in sorted(Path(folder).glob("*.parquet")):
        table = pq.read_table(path)
        if "twin_from" not in table.column_names:
            continue
        filled, counts = fill_table(table)
        if not filled.equals(table):
            write_table_atomic(filled, path)
        print(f"{path.name}: model-twin rows {sum(counts.values())}; " +
              (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))


if __name__ == "__main__":
    main(*sys.argv[1:])
