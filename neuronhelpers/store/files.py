"""The dataset's files as files: listed, written by atomic rename, read whole through one open handle.

A writer renames a finished file into place (``write_table_atomic``), so a reader never sees half a file; a reader
opens a file once and reads all of it from that handle (``read_table``), so a file renamed over it meanwhile is read
whole as it was (pyarrow reading by path may open it again and mix the two). ``dataset.py`` reads and writes rows
through these.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pyarrow as pa


def write_table_atomic(table: pa.Table, path) -> None:
    """Write a Parquet file under a temporary name, then rename: readers never see a partial file."""
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        # mkstemp makes the file private (0600): the replaced file keeps its own mode, a new one the mode a plain
        # write would give it, so a dataset folder stays readable by the others who share or serve it
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_table(path, filesystem=None) -> pa.Table:
    """A Parquet file read whole through one open handle: a file renamed over it meanwhile (a writer's atomic
    replace) leaves this handle on the file it opened, so the read never mixes two files. Retried once."""
    import pyarrow.parquet as pq

    if filesystem is not None:
        return pq.read_table(path, filesystem=filesystem)
    for attempt in (1, 2):
        try:
            with open(path, "rb") as handle:
                return pq.read_table(handle)
        except (OSError, pa.ArrowInvalid):  # a file replaced while it was opened: once more, then the error
            if attempt == 2:
                raise


def with_metadata_of(table: pa.Table, original: pa.Table) -> pa.Table:
    """``table`` with ``original``'s schema metadata (the Hub's `huggingface` features) where it has the same columns:
    a description of other columns would misdescribe it."""
    metadata = original.schema.metadata
    if metadata and table.column_names == original.column_names:
        return table.replace_schema_metadata(metadata)
    return table


def read_schema(path) -> pa.Schema:
    """A Parquet file's schema, through one open handle (``read_table``'s reason)."""
    import pyarrow.parquet as pq

    with open(path, "rb") as handle:
        return pq.read_schema(handle)


def parquet_files(folder) -> list[Path]:
    """The Parquet files of a local dataset folder, sorted (hidden files and folders, e.g. temporary ones, left out)."""
    return [Path(p) for p in list_parquet(str(folder))[1]] if os.path.isdir(folder) else []


def list_parquet(path: str):
    """(filesystem, [file paths]) for a local folder or an hf://datasets/... path."""
    if path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        fs = HfFileSystem()
        return fs, sorted(p for p in fs.glob(path.rstrip("/") + "/**/*.parquet"))
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".parquet") and not n.startswith(".")]
    return None, files
