"""The Trainium instance as its device files and NEURON_LOGICAL_NC_CONFIG describe it, read without the runtime.

"By default, Neuron Runtime initializes all the cores present in the system and reserves them for the current
process"; "Once a NeuronCore is reserved for a process, it cannot be used by another process at all". Whether
``torch.neuron.device_count()`` starts the runtime is not documented, so a process that only launches runs (the
harness, a sweep, ``doctor``, a notebook kernel) never calls it: presence, chips and cores come from the driver's
device files (one ``/dev/neuron<N>`` per chip) and the logical-core setting, and memory per core from the documented
trn2 topology ("On Trn2, each chip has 8 physical NeuronCores. With LNC=2 (default), these are grouped into 4
Logical NeuronCores"; "Trainium2 devices contain four 24GB HBM banks"). Taught in notebook 04.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
DEFAULT_LNC = 2
PHYSICAL_CORES_PER_CHIP = 8  # trn2
HBM_BYTES_PER_CHIP = 96 * 1024**3  # trn2: four 24 GB banks
_DEVICE = re.compile(r"neuron\d+")


@dataclass(frozen=True)
class Topology:
    """What an instance offers: Neuron chips, the logical-core setting, and so cores and memory per core."""

    chips: int
    lnc: int = DEFAULT_LNC

    @property
    def cores_per_chip(self) -> int:
        return PHYSICAL_CORES_PER_CHIP // self.lnc

    @property
    def cores(self) -> int:
        return self.chips * self.cores_per_chip

    @property
    def bytes_per_core(self) -> int:
        return HBM_BYTES_PER_CHIP // self.cores_per_chip

    def describe(self) -> str:
        if not self.chips:
            return "no Neuron devices (/dev/neuron*)"
        return (f"{self.chips} Neuron chip{'s' if self.chips != 1 else ''}, LNC={self.lnc}: {self.cores} logical cores "
                f"of {self.bytes_per_core / 1024**3:.0f} GiB ({self.cores_per_chip} per chip)")


def logical_core_config(environ=None) -> int:
    """NEURON_LOGICAL_NC_CONFIG ("LNC can only be set to 1 or 2"), default 2 on trn2."""
    raw = (environ if environ is not None else os.environ).get(LNC_ENV, "").strip()
    if raw in ("1", "2"):
        return int(raw)
    return DEFAULT_LNC


def one_chip(environ=None) -> Topology:
    """One trn2 chip at this process's LNC: the planner's memory per core and cores per chip."""
    return Topology(1, logical_core_config(environ))


def neuron_chips(dev_dir: str | Path | None = None) -> int:
    """How many Neuron chips the driver exposes (``/dev/neuron0`` ... one device file per chip; the folder is
    NEURONHELPERS_DEVICE_DIR's where set)."""
    if dev_dir is None:
        from neuronhelpers.core.settings import device_dir

        dev_dir = device_dir()
    try:
        return sum(1 for entry in os.listdir(dev_dir) if _DEVICE.fullmatch(entry))
    except OSError:
        return 0


def neuron_topology(dev_dir: str | Path | None = None, environ=None) -> Topology:
    return Topology(neuron_chips(dev_dir), logical_core_config(environ))


def neuron_device_present(dev_dir: str | Path | None = None) -> bool:
    """True when the Neuron driver exposes a device; nothing is imported and no runtime is started."""
    return neuron_chips(dev_dir) > 0
