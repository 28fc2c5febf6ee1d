"""Where compiled graphs are cached, per backend and compiler version, for every run (run.py included).

The compiler version is part of the cache's address (``<backend>/<compiler>-<version>``): graphs
compiled by another version are never picked up silently.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .backends import Backend

# Where prebuilt caches are published (a Hub bucket holding one folder per compiler version).
DEFAULT_BUCKET = os.environ.get("NEURONHELPERS_CACHE_BUCKET", "neuronhelpers/compile-cache")


def neuronhelpers_home() -> Path:
    return Path(os.environ.get("NEURONHELPERS_HOME") or Path.home() / ".cache" / "neuronhelpers")


def cache_key(compiler: str, version: str | None) -> str:
    """The versioned folder name of a cache: neuronxcc-<version> on Trainium, inductor-<torch version> elsewhere."""
    name = "neuronxcc" if compiler == "neuronx-cc" else compiler
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{name}-{version or 'unknown'}")


def cache_dir(backend: Backend) -> Path:
    """The compile cache folder for this backend and the installed compiler version.

    An explicitly set environment variable (e.g. TORCH_NEURONX_NEFF_CACHE_DIR) wins.
    """
    from .versions import compiler_for

    explicit = os.environ.get(backend.cache_env)
    if explicit:
        return Path(explicit)
    return neuronhelpers_home() / "compile-cache" / backend.name / cache_key(*compiler_for(backend))


def cache_env(backend: Backend) -> dict[str, str]:
    """Environment variables that point a run at the compile cache."""
    return {backend.cache_env: str(cache_dir(backend))}


def sync_command(compiler: str, compiler_version: str | None, *, bucket: str = DEFAULT_BUCKET) -> str:
    """The shell command that copies the prebuilt cache for one compiler version (shown per model)."""
    key = cache_key(compiler, compiler_version)
    if compiler == "neuronx-cc":
        target = "${TORCH_NEURONX_NEFF_CACHE_DIR:-/tmp/neff_cache}"
    else:
        target = "${TORCHINDUCTOR_CACHE_DIR:-~/.cache/neuronhelpers/compile-cache/cpu/" + key + "}"
    return f"hf buckets sync hf://buckets/{bucket}/{key} {target}"
