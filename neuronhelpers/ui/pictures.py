"""Three pictures where people would rather look than read, each drawn from the package's own data so it stays true:
a trn2 chip, its cores and their memory (``core.topology``); the compile path of ``torch.compile`` on Trainium beside
the one this machine runs (``core.backends``, ``core.versions``); and how an answer for a Hub id is chosen, best
first (``vocab.ANSWERS``, the order ``analysis/answers.py`` applies). Lessons 01, 02 and 04 show them; the book with
them.
"""

from __future__ import annotations

from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.topology import DEFAULT_LNC, HBM_BYTES_PER_CHIP, PHYSICAL_CORES_PER_CHIP, Topology

TRN2_48XL_CHIPS = 16  # a trn2.48xlarge's Trainium2 chips (AWS: 16 chips, 8 physical NeuronCores each)
# TorchNeuron's compile path as AWS's documentation draws it ("TorchDynamo → AOT Autograd → StableHLO → neuronx-cc →
# NEFF", torch/compile/index.html, read 2026-12-05); inductor's as PyTorch's (Dynamo, AOTAutograd, Inductor).
NEURON_STAGES = ("AOT Autograd", "StableHLO", "neuronx-cc", "NEFF")
INDUCTOR_STAGES = ("AOT Autograd", "inductor", "C++ / Triton kernels")
BOX = {"boxstyle": "round,pad=0.4", "linewidth": 1.0}


def _axes(ax, size):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=size)
    ax.set_axis_off()
    return ax


def _box(ax, x, y, text, color, **kw):
    return ax.text(x, y, text, ha="center", va="center", fontsize=kw.pop("fontsize", 8),
                   bbox={**BOX, "facecolor": color, "edgecolor": "#555555"}, **kw)


def _arrow(ax, start, end):
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": "#555555"})


def trn2_chip(lnc: int = DEFAULT_LNC, ax=None):
    """One trn2 chip: its physical NeuronCores, grouped into logical cores by LNC, each with its share of the chip's
    HBM; and how many such chips (and logical cores) a trn2.48xlarge has."""
    chip, instance = Topology(1, lnc), Topology(TRN2_48XL_CHIPS, lnc)
    ax = _axes(ax, (7.5, 2.8))
    ax.set_xlim(0, PHYSICAL_CORES_PER_CHIP + 0.5)
    ax.set_ylim(-1.2, 2.6)
    for logical in range(chip.cores_per_chip):
        left = logical * lnc + 0.25
        ax.add_patch(_rectangle(left, 0.9, lnc - 0.1, 1.2, "#d9ead3"))
        ax.text(left + (lnc - 0.1) / 2, 1.85, f"logical core {logical}", ha="center", fontsize=8)
        for physical in range(lnc):
            _box(ax, left + 0.45 + physical * 0.9, 1.3, f"core {logical * lnc + physical}", "#ffffff", fontsize=7)
        _box(ax, left + (lnc - 0.1) / 2, 0.35, f"{chip.bytes_per_core / 1024**3:.0f} GiB HBM", "#fce5cd", fontsize=7)
    ax.text(0.25, 2.35, f"one Trainium2 chip, LNC={lnc}: {PHYSICAL_CORES_PER_CHIP} physical NeuronCores as "
            f"{chip.cores_per_chip} logical cores, {HBM_BYTES_PER_CHIP / 1024**3:.0f} GiB of HBM", fontsize=9,
            weight="bold")
    ax.text(0.25, -0.6, f"x {TRN2_48XL_CHIPS} chips in a trn2.48xlarge: {instance.cores} logical cores of "
            f"{instance.bytes_per_core / 1024**3:.0f} GiB. The planner shards a model over the fewest that hold it.",
            fontsize=8)
    return ax


def _rectangle(x, y, width, height, color):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((x, y - height / 2), width, height, boxstyle="round,pad=0.02", facecolor=color,
                          edgecolor="#888888")


def compile_path(ax=None):
    """``torch.compile`` on Trainium and on this machine: dynamo traces Python into a graph (where a graph break or a
    recompile past the limit is a FAIL at compile), then each backend's compiler, and where its output is cached."""
    from neuronhelpers.core.versions import compiler_for

    ax = _axes(ax, (10, 2.8))
    ax.set_xlim(-0.5, 11.5)
    ax.set_ylim(-0.2, 3.4)
    _box(ax, 0.6, 1.6, "model.forward\n(Python)", "#ffffff")
    _box(ax, 2.4, 1.6, "TorchDynamo\ngraph + guards", "#fff2cc")
    _arrow(ax, (1.25, 1.6), (1.75, 1.6))
    ax.text(2.4, 0.45, "graph break or\nrecompile limit:\nFAIL at compile", ha="center", fontsize=7, color="#990000")
    rows = ((2.7, "neuron", NEURON_STAGES, "#d9ead3"), (0.5, "cpu", INDUCTOR_STAGES, "#cfe2f3"))
    for y, name, stages, color in rows:
        backend = get_backend(name)
        compiler = compiler_for(backend)[0]
        _arrow(ax, (3.05, 1.6), (3.75, y))
        x = 4.4
        for stage in stages:
            _box(ax, x, y, stage, color)
            if stage is not stages[-1]:
                _arrow(ax, (x + 0.8, y), (x + 1.2, y))
            x += 2.0
        label = "Trainium" if name == "neuron" else "this machine (CPU)"
        ax.text(3.8, y + 0.45, f"{label}: backend={backend.compile_backend!r}, compiler {compiler}; cached in "
                f"${backend.cache_env}", fontsize=7)
    return ax


def answer_ladder(ax=None):
    """How the answer for a Hub id is chosen: the first of these that has a row, best first (vocab.ANSWERS)."""
    import textwrap

    kinds = list(vocab.ANSWERS)
    ax = _axes(ax, (9, 0.9 + 0.75 * len(kinds)))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, len(kinds) - 0.5)
    colors = ("#d9ead3", "#cfe2f3", "#fff2cc", "#fce5cd")
    for i, kind in enumerate(kinds):
        y = len(kinds) - 1 - i
        _box(ax, 1.4, y, kind, colors[i % len(colors)], fontsize=8)
        ax.text(2.9, y, textwrap.fill(vocab.ANSWERS[kind], 95), va="center", fontsize=7)
        if i + 1 < len(kinds):
            _arrow(ax, (1.4, y - 0.25), (1.4, y - 0.75))
            ax.text(1.5, y - 0.5, "none? then", fontsize=6, color="#555555")
    ax.text(0.2, -0.5, "The answer line names which one answered, and its version pair.", fontsize=7)
    return ax
