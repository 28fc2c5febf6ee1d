"""Settings, defined once: every environment variable the package reads, with its default and what it does, and the
defaults more than one stage uses (the home folder, timeouts, the published artefacts).

Every ``NEURONHELPERS_*`` variable is read here and nowhere else (a test walks the package and fails on a read
elsewhere); a function returns each value when it is needed, never at import time, so a notebook or a test can set
a variable and see it take effect. ``neuronhelpers doctor`` lists them with their current values
(:func:`describe`). Taught in notebook 06 (the published artefacts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None  # None: unset unless given (the description says what happens then)
    what: str


HOME_ENV = "NEURONHELPERS_HOME"
BACKEND_ENV = "NEURONHELPERS_BACKEND"
FORK_SERVER_ENV = "NEURONHELPERS_FORK_SERVER"
JUDGE_MODEL_ENV = "NEURONHELPERS_JUDGE_MODEL"
HUB_UNREACHABLE_ENV = "NEURONHELPERS_HUB_UNREACHABLE"
RESULTS_ENV = "NEURONHELPERS_RESULTS"
CATALOG_ENV = "NEURONHELPERS_CATALOG"
SHELF_ENV = "NEURONHELPERS_SHELF"
EAGER_MAX_ENV = "NEURONHELPERS_EAGER_MAX_PARAMETERS"
DEVICE_DIR_ENV = "NEURONHELPERS_DEVICE_DIR"
INTEGRITY_ENV = "NEURONHELPERS_INTEGRITY_CHECKS"

VARIABLES = {v.name: v for v in (
    Variable(HOME_ENV, "~/.cache/neuronhelpers",
             "where twins, compile caches, CPU references, rankings snapshots and run folders live"),
    Variable(SHELF_ENV, None, "where the shelf of real checkpoints lives (default NEURONHELPERS_HOME/shelf)"),
    Variable(BACKEND_ENV, None, "force a backend (neuron, cuda or cpu) instead of detecting one"),
    Variable("NEURONHELPERS_DATASET", "aws-neuron/torch-neuronx-model-support",
             "the published results dataset (Hub id)"),
    Variable("NEURONHELPERS_CACHE_BUCKET", "aws-neuron/torch-neuronx-neff-cache",
             "the Hub bucket of prebuilt compile caches, one neuronxcc-<version> folder per compiler version"),
    Variable(RESULTS_ENV, "results", "the results folder the explorer app (neuronhelpers app) opens"),
    Variable(CATALOG_ENV, None, "the committed catalog an answer (plan, repro) reads where none is named (default "
             "./catalog, else the clone's beside the installed package)"),
    Variable("NEURONHELPERS_CORE_GIB", "24", "memory of one core in GiB where the backend does not say (cpu, cuda)"),
    Variable("NEURONHELPERS_HOST_GIB", None,
             "host memory a CPU reference may use, in GiB (default: half of this machine's RAM)"),
    Variable("NEURONHELPERS_NEURON_CORES", None, "NeuronCores a local sweep shares out among its parallel jobs "
             "(default: the instance's logical cores, from /dev/neuron* and NEURON_LOGICAL_NC_CONFIG)"),
    Variable(DEVICE_DIR_ENV, "/dev", "where Neuron device files (neuron0, neuron1, ...) are looked "
             "for; a test points it at a folder with a fake one"),
    Variable(EAGER_MAX_ENV, None, "the largest model (in parameters) given an eager run beside its compiled one (the "
             "speed-up; after a failure, whether the device runs it eagerly); 0 turns the eager runs off (default: the "
             "protocol's bound, core/protocol.py EAGER_MAX_PARAMETERS)"),
    Variable(FORK_SERVER_ENV, "1", "0 turns the pre-imported fork server off: every run starts a fresh Python"),
    Variable(INTEGRITY_ENV, "1", "0 turns off the checks of a model's files and of the package's own caches "
             "(core/integrity.py): only to measure what they cost on a warm sweep"),
    Variable(JUDGE_MODEL_ENV, "HuggingFaceTB/SmolLM2-135M-Instruct",
             "the causal LM that judges the text of sharded runs"),
    Variable(HUB_UNREACHABLE_ENV, None, "set by the package when the Hub probe failed and offline mode was "
             "switched on; not for users"),
)}


def value(name: str) -> str | None:
    """The variable's value, or its default (unset and empty count the same)."""
    return os.environ.get(name) or VARIABLES[name].default


def describe() -> list[tuple[str, str, str]]:
    """(name, current value or '(unset)', what it does) for every variable: what ``doctor`` prints."""
    out = []
    for v in VARIABLES.values():
        unset = f"(default {v.default})" if v.default else "(unset)"
        out.append((v.name, os.environ.get(v.name) or unset, v.what))
    return out


def home() -> Path:
    """``NEURONHELPERS_HOME``, default ``~/.cache/neuronhelpers``."""
    return Path(os.path.expanduser(value(HOME_ENV)))


def shelf_home() -> Path:
    """``NEURONHELPERS_SHELF``, default ``NEURONHELPERS_HOME/shelf``: never inside the Hugging Face cache."""
    raw = value(SHELF_ENV)
    return Path(os.path.expanduser(raw)) if raw else home() / "shelf"


# A shelf folder is complete once this file is in it (models/shelf.py writes it last).
SHELF_PROVENANCE = "PROVENANCE.json"


def shelf_model_folder(hub_id: str) -> Path:
    """Where the shelf keeps a Hub model's folder (models/shelf.py installs it; a model twin reads its config)."""
    return shelf_home() / "models" / hub_id.replace("/", "--", 1)


def device_dir() -> Path:
    """``NEURONHELPERS_DEVICE_DIR``, default ``/dev``: where the Neuron driver's device files are looked for."""
    return Path(value(DEVICE_DIR_ENV))


def forced_backend() -> str | None:
    return os.environ.get(BACKEND_ENV) or None


def dataset_repo() -> str:
    return value("NEURONHELPERS_DATASET")


def cache_bucket() -> str:
    return value("NEURONHELPERS_CACHE_BUCKET")


def results_folder() -> str:
    return value("NEURONHELPERS_RESULTS")


CATALOG_NAME = "catalog"


def catalog_dir(given: str | None = None) -> Path | None:
    """The results folder an answer reads: ``given`` where one is named; else ``NEURONHELPERS_CATALOG`` where set;
    else ./catalog where it exists; else the clone's catalog beside the package (installed editable from a clone), so
    an answer does not depend on the working directory; None where there is none."""
    if given:
        return Path(given)
    if value(CATALOG_ENV):
        return Path(os.path.expanduser(value(CATALOG_ENV)))
    for candidate in (Path(CATALOG_NAME), Path(__file__).resolve().parents[2] / CATALOG_NAME):
        if candidate.is_dir():
            return candidate
    return None


def no_catalog_words(given: str | None) -> str:
    """Why no answer was read, in one line: what was looked for, and what to pass."""
    if given:
        return f"no results dataset at '{given}': give a folder of Parquet files (--results)"
    if value(CATALOG_ENV):
        return f"no results dataset at '{value(CATALOG_ENV)}' ({CATALOG_ENV}): point it at a catalog folder"
    return (f"no catalog here (./{CATALOG_NAME}) nor beside the installed package: run from a clone of neuronhelpers, "
            f"set {CATALOG_ENV}, or pass --results FOLDER")


def core_gib() -> float:
    return float(value("NEURONHELPERS_CORE_GIB"))


def host_gib() -> float | None:
    raw = value("NEURONHELPERS_HOST_GIB")
    return float(raw) if raw else None


def neuron_cores() -> int | None:
    raw = value("NEURONHELPERS_NEURON_CORES")
    return int(raw) if raw else None


def fork_server_enabled() -> bool:
    return value(FORK_SERVER_ENV) != "0"


def integrity_checks_enabled() -> bool:
    return value(INTEGRITY_ENV) != "0"


def chosen_judge_model() -> str | None:
    """The judge model a person chose (a failure to load it is then an error, not a fallback), or None."""
    return (os.environ.get(JUDGE_MODEL_ENV) or "").strip() or None


# How long a model's device run, and its CPU reference, may take before it is stopped.
DEFAULT_TIMEOUT_S = 900.0
REFERENCE_TIMEOUT_S = 600.0

# The published catalog: the results dataset and the bucket of prebuilt Neuron compile caches (one
# neuronxcc-<version> folder per compiler version), synced where torch-neuronx looks by default. Read once, at
# import, because they are default argument values (the functions above read the variables afresh).
DEFAULT_DATASET = dataset_repo()
DEFAULT_CACHE_BUCKET = cache_bucket()
NEFF_CACHE_DIR = "/tmp/neff_cache"  # torch-neuronx's default TORCH_NEURONX_NEFF_CACHE_DIR


def eager_max_parameters() -> int:
    """``NEURONHELPERS_EAGER_MAX_PARAMETERS``, default the protocol's bound: the largest model given an eager run."""
    from neuronhelpers.core.errors import UserError
    from neuronhelpers.core.protocol import EAGER_MAX_PARAMETERS

    raw = os.environ.get(EAGER_MAX_ENV)
    try:
        return int(float(raw)) if raw else EAGER_MAX_PARAMETERS
    except (ValueError, OverflowError):
        raise UserError(f"{EAGER_MAX_ENV}={raw!r}: give a number of parameters (0 turns the eager runs off)") from None
