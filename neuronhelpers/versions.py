"""Version detection: the one place that says which torch, transformers, Neuron packages and compiler ran."""

from __future__ import annotations

from importlib import metadata

from .backends import Backend

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
    """(compiler, version) that compiles graphs on this backend: neuronx-cc on Trainium, inductor (torch's) elsewhere."""
    if backend.name == "neuron":
        return "neuronx-cc", distribution_version("neuronx-cc")
    return "inductor", distribution_version("torch")


def library_version(library: str = "transformers") -> str | None:
    return distribution_version(library)
