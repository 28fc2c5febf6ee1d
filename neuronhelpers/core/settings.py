"""Defaults that more than one stage uses, defined once: the home folder, timeouts, and the published artefacts.

Every default can be changed by an environment variable (named next to it) or a command-line option.

Taught in notebook 05 (the published artefacts).
"""

from __future__ import annotations

import os
from pathlib import Path

# Where twins, compile caches, reference results, rankings snapshots and run folders live.
HOME_ENV = "NEURONHELPERS_HOME"


def home() -> Path:
    """``NEURONHELPERS_HOME``, default ``~/.cache/neuronhelpers``."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".cache" / "neuronhelpers")


# How long a model's device run, and its CPU reference, may take before it is stopped.
DEFAULT_TIMEOUT_S = 900.0
REFERENCE_TIMEOUT_S = 600.0

# The published catalog: the results dataset and the bucket of prebuilt Neuron compile caches (one
# neuronxcc-<version> folder per compiler version), synced where torch-neuronx looks by default.
DEFAULT_DATASET = os.environ.get("NEURONHELPERS_DATASET", "aws-neuron/torch-neuronx-model-support")
DEFAULT_CACHE_BUCKET = os.environ.get("NEURONHELPERS_CACHE_BUCKET", "aws-neuron/torch-neuronx-neff-cache")
NEFF_CACHE_DIR = "/tmp/neff_cache"  # torch-neuronx's default TORCH_NEURONX_NEFF_CACHE_DIR
