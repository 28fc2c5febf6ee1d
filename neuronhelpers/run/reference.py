"""A local cache of CPU reference results.

The reference (run.py --reference: CPU, eager) depends only on the checkpoint's files, the dtype, the
prompt, the token count and the torch / transformers versions, never on the compiler. A sweep for a
new compiler release therefore reuses it instead of loading and running every model on the CPU again.
The key covers all of those (and the recipe's text), so any change to them runs the reference anew.

Taught in notebook 03.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.code_identity import code_digest
from neuronhelpers.core.parameters import DEVICE_ONLY
from neuronhelpers.core.settings import home
from neuronhelpers.core.versions import distribution_version
from neuronhelpers.recipes.render import template_text


def reference_dir() -> Path:
    return home() / "reference-cache"


def checkpoint_identity(path: str) -> str | None:
    """What identifies a checkpoint's content: file names, sizes and mtimes of a local folder, or the
    commit of a Hub snapshot in the local HF cache. None when it cannot be told (then nothing is cached)."""
    if os.path.isdir(path):
        entries = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                stat = os.stat(os.path.join(root, name))
                entries.append((os.path.relpath(os.path.join(root, name), path), stat.st_size, stat.st_mtime_ns))
        return hashlib.sha256(json.dumps([os.path.abspath(path), entries]).encode()).hexdigest()
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # noqa: BLE001 - not a Hub id
        return None
    return f"hub:{path}@{Path(cached).parent.name}" if isinstance(cached, str) else None


def recipe_identity(library: str) -> str:
    """What the library's run.py executes, for every plan (sharded and one core), comments and docstrings aside
    (core/code_identity.py): a comment edit keeps every cached reference."""
    return code_digest(template_text(library)) + code_digest(template_text(library, sharded=False))


def reference_key(params: dict) -> str | None:
    # a twin or a shelf copy named by its id: its files' digest says what it is
    twin, shelf = params.get("twin_files"), params.get("shelf_files")
    identity = f"twin:{twin['digest']}" if twin else f"shelf:{shelf['digest']}" if shelf else checkpoint_identity(
        params["model_path"])
    if identity is None:
        return None
    library = params.get("library", vocab.TRANSFORMERS)
    blob = {
        "checkpoint": identity,
        # not where and how the device run happens, nor a remedy (a change to the device's run only: a remedy run is
        # checked against the unmodified model's reference): core/parameters.py DEVICE_ONLY; nor where the checkpoint
        # is or what makes a twin's or shelf copy's files (the checkpoint identity above says what they are)
        "params": {k: v for k, v in params.items()
                   if k not in (*DEVICE_ONLY, "model_path", "twin_files", "shelf_files")},
        "torch": distribution_version("torch"),
        "transformers": distribution_version("transformers"),
        "library": [library, distribution_version(library)],
        "recipe": recipe_identity(library),
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:32]


def cached_reference(key: str | None) -> dict | None:
    if key is None:
        return None
    path = reference_dir() / f"{key}.json"
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return payload if payload.get("ok") and payload.get("mode") == vocab.STAGE_REFERENCE else None


def store_reference(key: str | None, payload: dict) -> None:
    if key is None or not payload.get("ok"):
        return
    folder = reference_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(payload))
    os.replace(tmp, folder / f"{key}.json")
