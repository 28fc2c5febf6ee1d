"""Which backend runs a model: neuron (Trainium), cuda, or cpu, and what each one means.

The backend is a parameter of every run; the same code path serves all three. ``detect_backend``
picks ``neuron`` when a neuron device is present, else ``cuda``, else ``cpu``; ``--backend`` overrides.

Taught in notebook 02.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronhelpers.core.errors import UserError

# Presence is read from /dev, never by asking torch-neuronx: a launching process must not start the runtime.
from neuronhelpers.core.topology import neuron_device_present  # noqa: F401 - part of this module's interface


@dataclass(frozen=True)
class Backend:
    name: str
    device: str  # torch device type
    compile_backend: str  # torch.compile(backend=...)
    dist_backend: str  # torch.distributed process-group backend
    dtype: str  # default dtype of the device run (the reference uses the same)
    memory_source: str  # how peak device memory is measured (documented in the card)
    cache_env: str  # environment variable that locates the compiled-graph cache


GiB = 1024**3

BACKENDS = {
    "neuron": Backend(
        name="neuron",
        device="neuron",
        compile_backend="neuron",
        dist_backend="neuron",
        dtype="bfloat16",
        memory_source="torch.accelerator.max_memory_allocated() after a sync (Neuron 2.34), else torch.neuron's (2.33)",
        cache_env="TORCH_NEURONX_NEFF_CACHE_DIR",
    ),
    "cuda": Backend(
        name="cuda",
        device="cuda",
        compile_backend="inductor",
        dist_backend="nccl",
        dtype="bfloat16",
        memory_source="torch.accelerator.max_memory_allocated() after a sync",
        cache_env="TORCHINDUCTOR_CACHE_DIR",
    ),
    "cpu": Backend(
        name="cpu",
        device="cpu",
        compile_backend="inductor",
        dist_backend="gloo",
        dtype="float32",
        memory_source="peak resident memory of the run's process (getrusage ru_maxrss)",
        cache_env="TORCHINDUCTOR_CACHE_DIR",
    ),
}




def detect_backend() -> str:
    from neuronhelpers.core.settings import forced_backend

    forced = forced_backend()
    if forced:
        return get_backend(forced).name
    if neuron_device_present():
        return "neuron"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def get_backend(name: str | None = None) -> Backend:
    """The named backend, or the detected one when name is None or 'auto'."""
    if name in (None, "auto"):
        name = detect_backend()
    try:
        return BACKENDS[name]
    except KeyError:
        raise UserError(f"unknown backend '{name}': choose one of {', '.join(BACKENDS)} (or auto)") from None
