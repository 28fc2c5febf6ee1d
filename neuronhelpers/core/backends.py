"""Which backend runs a model: neuron (Trainium), cuda, or cpu, and what each one means.

The backend is a parameter of every run; the same code path serves all three. ``detect_backend``
picks ``neuron`` when a neuron device is present, else ``cuda``, else ``cpu``; ``--backend`` overrides.

Taught in notebook 02.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronhelpers.core.errors import UserError


@dataclass(frozen=True)
class Backend:
    name: str
    device: str  # torch device type
    compile_backend: str  # torch.compile(backend=...)
    dist_backend: str  # torch.distributed process-group backend
    dtype: str  # default dtype of the device run (the reference uses the same)
    memory_source: str  # how peak device memory is measured (documented in the card)
    cache_env: str  # environment variable that locates the compiled-graph cache
    bytes_per_core: int | None  # memory of one core/device for the planner (None: configurable budget)


GiB = 1024**3

BACKENDS = {
    "neuron": Backend(
        name="neuron",
        device="neuron",
        compile_backend="neuron",
        dist_backend="neuron",
        dtype="bfloat16",
        memory_source="torch.neuron.max_memory_allocated() after torch.neuron.synchronize()",
        cache_env="TORCH_NEURONX_NEFF_CACHE_DIR",
        bytes_per_core=24 * GiB,  # trn2 at the default LNC=2 (96 GiB HBM per chip over 4 logical cores); the planner
        # reads NEURON_LOGICAL_NC_CONFIG (core/topology.py)
    ),
    "cuda": Backend(
        name="cuda",
        device="cuda",
        compile_backend="inductor",
        dist_backend="nccl",
        dtype="bfloat16",
        memory_source="torch.cuda.max_memory_allocated()",
        cache_env="TORCHINDUCTOR_CACHE_DIR",
        bytes_per_core=None,
    ),
    "cpu": Backend(
        name="cpu",
        device="cpu",
        compile_backend="inductor",
        dist_backend="gloo",
        dtype="float32",
        memory_source="peak resident memory of the run's process (getrusage ru_maxrss)",
        cache_env="TORCHINDUCTOR_CACHE_DIR",
        bytes_per_core=None,
    ),
}


def neuron_device_present() -> bool:
    """True when the Neuron driver exposes a device: read from /dev, never by asking torch-neuronx (a launching
    process must not start the runtime, which reserves every core for itself; see core/topology.py)."""
    from neuronhelpers.core.topology import neuron_device_present as present

    return present()


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
