"""Where compiled graphs are cached, per backend and compiler version, for every run (run.py included).

The compiler version is part of the cache's address (``<backend>/<compiler>-<version>``): graphs
compiled by another version are never picked up silently.

Taught in notebook 02 (a warm cache) and 05 (publishing and syncing caches).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from neuronhelpers.core.backends import Backend
from neuronhelpers.core.settings import DEFAULT_CACHE_BUCKET, NEFF_CACHE_DIR, home

DEFAULT_BUCKET = DEFAULT_CACHE_BUCKET  # where prebuilt caches are published: one folder per compiler version


def cache_key(compiler: str, version: str | None) -> str:
    """The versioned folder name of a cache: neuronxcc-<version> on Trainium, inductor-<torch version> elsewhere."""
    name = "neuronxcc" if compiler == "neuronx-cc" else compiler
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{name}-{version or 'unknown'}")


def cache_dir(backend: Backend) -> Path:
    """The compile cache folder for this backend and the installed compiler version.

    An explicitly set environment variable (e.g. TORCH_NEURONX_NEFF_CACHE_DIR) wins. On Trainium the default
    is torch-neuronx's own (/tmp/neff_cache, whose entries the compiler keys by its version, and where the
    published caches are synced); inductor's cache is not keyed by torch version, so elsewhere each version
    gets its own folder.
    """
    from neuronhelpers.core.versions import compiler_for

    explicit = os.environ.get(backend.cache_env)
    if explicit and os.path.abspath(explicit) != _torch_default(backend.cache_env):
        return Path(explicit)
    if backend.name == "neuron":
        return Path(NEFF_CACHE_DIR)
    return home() / "compile-cache" / backend.name / cache_key(*compiler_for(backend))


def _torch_default(variable: str) -> str | None:
    """torch writes its own default into TORCHINDUCTOR_CACHE_DIR once inductor runs in a process: that value
    was nobody's choice, so it must not override the versioned address."""
    if variable != "TORCHINDUCTOR_CACHE_DIR":
        return None
    import getpass
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def cache_env(backend: Backend) -> dict[str, str]:
    """Environment variables that point a run at the compile cache."""
    return {backend.cache_env: str(cache_dir(backend))}


def sync_command(compiler: str, compiler_version: str | None, *, bucket: str = DEFAULT_BUCKET) -> str:
    """The shell command that copies the prebuilt cache for one compiler version (shown per model)."""
    key = cache_key(compiler, compiler_version)
    if compiler == "neuronx-cc":
        target = "${TORCH_NEURONX_NEFF_CACHE_DIR:-" + NEFF_CACHE_DIR + "}"
    else:
        # where this package keeps the cache on the reader's machine (their NEURONHELPERS_HOME), not on ours
        target = "${TORCHINDUCTOR_CACHE_DIR:-${NEURONHELPERS_HOME:-~/.cache/neuronhelpers}/compile-cache/cpu/" + key + "}"
    return f"hf buckets sync hf://buckets/{bucket}/{key} {target}"


# ------------------------------------------------------------------------------------------------
# Sync and publish: a cache travels as <root>/<compiler>-<version>/ with a manifest, through fsspec
# (a local folder, or hf://buckets/<namespace>/<name> through huggingface_hub's HfFileSystem).
# ------------------------------------------------------------------------------------------------

MANIFEST = "neuronhelpers-cache.json"


def _fs(url: str):
    import fsspec

    if "://" not in url:
        url = os.path.abspath(url)
    elif url.startswith("hf://"):
        from neuronhelpers.core.errors import UserError
        from neuronhelpers.core.network import hub_endpoint, hub_reachable

        if not hub_reachable():  # say so in one line, before huggingface_hub's offline error
            raise UserError(f"cannot reach the Hub ({hub_endpoint()}) for {url}: go online, or give a local folder "
                            "(`neuronhelpers cache sync FOLDER`)")
    return fsspec.core.url_to_fs(url)


def current_key(backend: Backend) -> str:
    from neuronhelpers.core.versions import compiler_for

    return cache_key(*compiler_for(backend))


def manifest_for(backend: Backend, files: int) -> dict:
    import datetime as dt

    from neuronhelpers.core.versions import compiler_for, distribution_version

    compiler, version = compiler_for(backend)
    return {"backend": backend.name, "compiler": compiler, "compiler_version": version,
            "torch": distribution_version("torch"), "key": cache_key(compiler, version), "files": files,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def publish_cache(dest: str, backend: Backend) -> tuple[str, int]:
    """Upload the local cache of the current compiler version to ``dest``/<compiler>-<version>/."""
    import json

    from neuronhelpers.core.errors import UserError

    local = cache_dir(backend)
    files = [p for p in local.rglob("*") if p.is_file()] if local.is_dir() else []
    if not files:
        raise UserError(f"the local compile cache {local} is empty: run a model or a sweep first, then publish")
    fs, root = _fs(dest)
    target = f"{root.rstrip('/')}/{current_key(backend)}"
    fs.makedirs(target, exist_ok=True)
    fs.put(f"{local}/", f"{target}/", recursive=True)
    with fs.open(f"{target}/{MANIFEST}", "w") as handle:
        handle.write(json.dumps(manifest_for(backend, len(files)), indent=1))
    return f"{dest.rstrip('/')}/{current_key(backend)}", len(files)


def available_caches(source: str) -> list[str]:
    """The compiler versions a cache source holds (folders with a manifest)."""
    fs, root = _fs(source)
    try:
        entries = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries if fs.exists(f"{e.rstrip('/')}/{MANIFEST}"))


def sync_cache(source: str, backend: Backend) -> tuple[Path, int]:
    """Fill the local cache for the current compiler version from ``source``; refuse any other version."""
    import json

    from neuronhelpers.core.errors import UserError

    key = current_key(backend)
    fs, root = _fs(source)
    root = root.rstrip("/")
    candidates = [root] if fs.exists(f"{root}/{MANIFEST}") else [f"{root}/{key}"]
    folder = candidates[0]
    if not fs.exists(f"{folder}/{MANIFEST}"):
        others = available_caches(source)
        if others:
            raise UserError(f"the cache at {source} holds {', '.join(others)}; this machine compiles with {key}. "
                            "A cache of another compiler version is never used: sync the matching one, or let the "
                            "first runs compile (they fill the local cache)")
        raise UserError(f"no compile cache at {source}: publish one with `neuronhelpers cache publish`")
    with fs.open(f"{folder}/{MANIFEST}") as handle:
        manifest = json.loads(handle.read())
    if manifest.get("key") != key:
        raise UserError(f"the cache at {source} was compiled by {manifest.get('key')}; this machine compiles with "
                        f"{key}. A cache of another compiler version is never used")
    local = cache_dir(backend)
    local.mkdir(parents=True, exist_ok=True)
    fs.get(f"{folder}/", f"{local}/", recursive=True)
    (local / MANIFEST).unlink(missing_ok=True)
    return local, sum(1 for p in local.rglob("*") if p.is_file())


def cache_files(backend: Backend) -> set[str]:
    """Relative paths of the files in the local cache (to tell whether a run added compiled graphs)."""
    local = cache_dir(backend)
    return {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()} if local.is_dir() else set()
