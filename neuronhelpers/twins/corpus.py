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


# Where a model twin's config came from, as its row says it (the ``config_*`` columns of store/schema.py).
PROVENANCE_KEYS = ("config_source", "config_form", "config_id_inferred", "config_corroboration")


def provenance(model_id: str) -> dict | None:
    """Where the corpus's copy of a model's config.json came from, as a row carries it: ``config_source``
    (``github:owner/repo@commit7:path``, or ``package:name==version:path``), ``config_form`` (how the copy was written
    there: a JSON file, a Python literal, a JSON string, a package file), ``config_id_inferred`` (the source does not
    name the Hub id: it was inferred from a variable or folder name) and ``config_corroboration`` (``corroborated`` or
    ``uncorroborated``, with what was seen, for the models a second copy was looked for; None elsewhere). None
    for a model the corpus holds no config of."""
    record = records().get(model_id)
    copied = (record or {}).get("files", {}).get("config.json")
    if copied is None:
        return None
    if copied.get("repo"):
        source = f"github:{copied['repo']}@{str(copied.get('commit') or '')[:7]}:{copied['path']}"
    else:
        source = f"package:{copied.get('package')}:{copied['path']}"
    corroboration = record.get("corroboration")
    return {"config_source": source, "config_form": copied.get("form"),
            "config_id_inferred": bool(record.get("id_inferred", False)),
            "config_corroboration": corroboration.get("summary") if isinstance(corroboration, dict) else None}
