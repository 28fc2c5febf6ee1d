"""Version detection: the one place that says which torch, transformers, Neuron packages and compiler ran.

Taught in notebook 02 (what a row records) and 06 (releases side by side).
"""

from __future__ import annotations

import platform
from importlib import metadata

from neuronhelpers.core.backends import Backend
from neuronhelpers.core.vocab import DIFFUSERS, SENTENCE_TRANSFORMERS, TRANSFORMERS

__version__ = "0.2.0"  # neuronhelpers' own version, the one source: pyproject reads it

# The version of the measuring around run.py (run/measure.py with run/instruments.py and verdict/perturb.py), the
# rows' harness_version: bumped when those files change (tests/test_measure.py fails until it is), never by a change
# to the recipe, which a row identifies by its run.py's code. 0.2.0 was the package version, when run.py held the
# measuring itself.
MEASURING_VERSION = "0.5.3"
# The measuring version that last changed what each library's rows hold: a row of that version or later (up to
# today's) is what today's measuring would make, so a change to one library's measuring stales that library's rows
# alone. 0.5.2: sentence-transformers and diffusers measure eagerly after the compiled calls, not before them (an
# eager call first built z-image's rope table, which the compiled run then found built: a PASS where run.py alone
# FAILs); the transformers path is unchanged. 0.5.3: a model with no stack of blocks to perturb is "not measured"
# again rather than a raise inside the compile step (0.5.2's); no 0.5.2 row met it, so the rows stand.
MEASURING_SINCE = {TRANSFORMERS: "0.5.1", SENTENCE_TRANSFORMERS: "0.5.2", DIFFUSERS: "0.5.2"}


def measuring_is_todays(harness_version: str | None, library: str | None) -> bool:
    """Whether a row's measuring (its ``harness_version``) is what today's measuring makes for its library."""
    def key(version: str) -> tuple:
        return tuple(int(part) for part in version.split("."))

    if not harness_version:
        return False
    since = MEASURING_SINCE.get(library or TRANSFORMERS, MEASURING_VERSION)
    try:
        return key(since) <= key(harness_version) <= key(MEASURING_VERSION)
    except ValueError:  # not a version this package wrote (a hand-edited row): never today's
        return False

NEURON_COMPILER = "neuronx-cc"  # the compiler on Trainium (its distribution's name, as rows record it)

# Distributions whose versions identify a result (besides the full freeze kept in every row).
CORE_PACKAGES = ("torch", "transformers", "accelerate", "torch-neuronx", "neuronx-cc", "huggingface-hub")


def distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def core_versions() -> dict[str, str | None]:
    return {name: distribution_version(name) for name in CORE_PACKAGES}


def installed_packages() -> str:
    """Every installed distribution in pip-freeze form (name==version), sorted, one per line."""
    seen = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return "\n".join(seen[key] for key in sorted(seen))


def compiler_for(backend: Backend) -> tuple[str, str | None]:
    """(compiler, version) that compiles graphs on this backend: neuronx-cc on Trainium, inductor (torch's)
    elsewhere."""
    if backend.name == "neuron":
        return NEURON_COMPILER, distribution_version(NEURON_COMPILER)
    torch = distribution_version("torch")
    # The compiler is the same for torch's CPU and CUDA builds ("2.14.1+cu130", "2.13.0+cpu"): the public release.
    return "inductor", torch.split("+")[0] if torch else None


def library_version(library: str = TRANSFORMERS) -> str | None:
    return distribution_version(library)


# The Neuron SDK release that ships each torch-neuronx (TorchNeuron) release, from the release notes: "Neuron Component
# Release Notes" (TorchNeuron 2.14.3.0 and 2.13.3.0 are Neuron 2.33.0) and torch-neuronx's GitHub release v2.34.0
# ("torch-neuronx 2.13.3.1 and 2.14.3.1 (Neuron 2.34.0 Release)", 2026-11-30). Keyed by the whole version: three
# components would misname 2.34's fourth-component releases 2.33.0. A release not listed here is not guessed:
# NEURON_SDK_VERSION names it.
TORCH_NEURONX_SDK = {"2.14.3.1": "2.34.0", "2.13.3.1": "2.34.0", "2.14.3.0": "2.33.0", "2.13.3.0": "2.33.0"}


def neuron_sdk_release() -> str | None:
    """The Neuron SDK release in use: NEURON_SDK_VERSION where the container or the user sets it, else the
    release that ships the installed torch-neuronx; None where no Neuron package is installed."""
    import os

    explicit = os.environ.get("NEURON_SDK_VERSION")
    if explicit:
        return explicit
    installed = distribution_version("torch-neuronx")
    if not installed:
        return None
    release = ".".join((installed.split("+")[0].split(".") + ["0"])[:4])  # "2.14.3" reads as 2.14.3.0
    return TORCH_NEURONX_SDK.get(release)


def neuron_driver_version() -> str | None:
    """The Neuron driver's version, as its kernel module reports it; None where no driver is loaded."""
    try:
        with open("/sys/module/neuron/version") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def version_columns(backend: Backend, library: str) -> dict:
    """The row columns that say what a result was tested with: backend, compiler and its version (``neuronx_cc``
    too on Trainium), the library and its version, torch, torch-neuronx, the Neuron SDK, and the package versions the
    published dataset records (transformers, accelerate, nki, Python, the Neuron driver). Every row builder
    (a run, an UNTESTED or an EXCLUDED row) takes them from here."""
    compiler, compiler_version = compiler_for(backend)
    core = core_versions()
    return dict(backend=backend.name, compiler=compiler, compiler_version=compiler_version,
                neuronx_cc=core[NEURON_COMPILER] if compiler == NEURON_COMPILER else None,
                library=library, library_version=library_version(library), torch=core["torch"],
                torch_neuronx=core["torch-neuronx"], neuron_sdk=neuron_sdk_release(),
                # the published dataset's per-package columns (store/schema.PUBLISHED_COLUMNS)
                transformers=core[TRANSFORMERS], accelerate=core["accelerate"], nki=distribution_version("nki"),
                python=platform.python_version(), neuron_driver=neuron_driver_version())
