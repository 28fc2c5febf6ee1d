"""The corpus of real configs shipped in the package: verbatim copies of Hub models' published config files
(``config.json``, and ``modules.json`` / ``model_index.json`` where the model needs them), one folder per model
(``neuronhelpers/data/configs/<org>--<name>/``), each with ``SOURCE.json``: where every file was copied from (the
public repository, path and commit that hold it, or a registry package), when it was read, its sha256 and the form it
was found in. A model with no readable config has a SOURCE.json with no files and a note saying why (gated on the Hub,
no public copy found).

Offline, a model twin (own.py) is built from the corpus; ``tests/test_model_twins.py`` checks each file against its
recorded sha256 and provenance. A leaf: reads files only.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

SOURCE_FILE = "SOURCE.json"
# "org/name" <-> "org--name": the Hub forbids "--" in a repository name, so the folder name reads back uniquely.
SEPARATOR = "--"


def corpus_root() -> Path:
    return Path(str(resources.files("neuronhelpers") / "data" / "configs"))


def folder_name(model_id: str) -> str:
    return model_id.replace("/", SEPARATOR, 1)


def model_id_of(name: str) -> str | None:
    """The Hub id a twin or folder name ``org--name`` stands for, or None when it is not of that form."""
    org, sep, rest = name.partition(SEPARATOR)
    return f"{org}/{rest}" if sep and org and rest and SEPARATOR not in rest else None


@lru_cache(maxsize=1)
def records() -> dict[str, dict]:
    """Every corpus entry's SOURCE.json, by Hub id (models with and without a readable config)."""
    out = {}
    root = corpus_root()
    for source in sorted(root.glob(f"*/{SOURCE_FILE}")) if root.is_dir() else ():
        record = json.loads(source.read_text())
        record["folder"] = str(source.parent)
        out[record["model_id"]] = record
    return out


def corpus_ids(readable: bool = True) -> list[str]:
    """The Hub ids of the corpus (those with a config.json, unless ``readable`` is False)."""
    return [mid for mid, record in records().items() if not readable or "config.json" in record.get("files", {})]


def corpus_files(model_id: str) -> dict[str, bytes] | None:
    """A corpus model's files (relative path -> bytes), or None when the corpus has no config for it."""
    record = records().get(model_id)
    if not record or "config.json" not in record.get("files", {}):
        return None
    folder = Path(record["folder"])
    return {name: (folder / name).read_bytes() for name in record["files"]}


def corpus_task(model_id: str) -> str | None:
    """The task a corpus entry records where its files alone do not say it (an embedding model whose modules.json
    no public copy holds: its config names a causal LM), else None."""
    return (records().get(model_id) or {}).get("task")


def why_missing(model_id: str) -> str | None:
    """The corpus's note for a model it lists without a config (gated, no public copy), else None."""
    record = records().get(model_id)
    if record and "config.json" not in record.get("files", {}):
        return record.get("note") or "no public copy of its config was found"
    return None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
