"""Where compiled graphs are cached, per backend, for every run (run.py's subprocess included)."""

from __future__ import annotations

import os
from pathlib import Path

from .backends import Backend


def neuronhelpers_home() -> Path:
    return Path(os.environ.get("NEURONHELPERS_HOME") or Path.home() / ".cache" / "neuronhelpers")


def cache_dir(backend: Backend) -> Path:
    """The compile cache folder: NEFF files on neuron, inductor's cache on cpu and cuda.

    An explicitly set environment variable (e.g. TORCH_NEURONX_NEFF_CACHE_DIR) wins.
    """
    explicit = os.environ.get(backend.cache_env)
    if explicit:
        return Path(explicit)
    return neuronhelpers_home() / "compile-cache" / backend.name


def cache_env(backend: Backend) -> dict[str, str]:
    """Environment variables that point a run at the compile cache."""
    return {backend.cache_env: str(cache_dir(backend))}
