"""A workshop day on trn2 instances, prepared: what to do the day before, and what a Run All of each lesson would do
on a trn2 in class, cell by cell, with its worst case, prepared and not. Worked out by reading the lessons' cells and
their guards (``workshop.trn2_cell``), not run: this project's CI has no trn2. The compile estimates are
``day.TRN2_COMPILES``'s, each with its source; the marks are the lessons' own (a test holds every trn2 cell and every
section named here to the lessons). The teacher's guide shows both (ui/pages.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronhelpers.core.settings import HOME_ENV, NEFF_CACHE_DIR
from neuronhelpers.ui import day
from neuronhelpers.ui.workshop import IN_CLASS_TIMEOUT_S, PREPARING_TIMEOUT_S, size_line

# Read on 2026-12-05 (the pages' own dates, where they carry one).
READ_ON = "2026-12-05"
SETUP_GUIDE = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/archive/tensorflow/tensorflow-neuronx/setup/"
               "tensorflow-update-u22.html")
TORCHNEURON_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
TORCHNEURON_COMPILE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/index.html"
MIN_ROOT_VOLUME_GB = 512

BACKEND_NAME = (
    f"AWS's documentation calls the backend these lessons use **TorchNeuron**: \"the open-source native PyTorch "
    f"backend for AWS Trainium\", selected with `torch.compile(model, backend=\"neuron\")`, and marks it **beta** "
    f"(\"TorchNeuron is in public beta for the Neuron 2.33 release\", on trn2 and trn3; <{TORCHNEURON_HOME}>, page "
    f"modified 2026-09-01, read {READ_ON}). Its package is `torch-neuronx`, the same name as the older PyTorch/XLA "
    "integration: a search for `torch-neuronx` finds the XLA-era documentation first, so search for TorchNeuron. "
    f"Its compile path, as AWS draws it: TorchDynamo → AOT Autograd → StableHLO → neuronx-cc → NEFF "
    f"(<{TORCHNEURON_COMPILE}>). On CPU the same `torch.compile` call runs inductor, PyTorch's own compiler, in "
    "neuronx-cc's place: every compiler version a lesson shows says which of the two it is.")


# Sizes a download fetches: parameters x 2 bytes (bfloat16), as the lessons print them.
QWEN3_SMALL_BYTES = 1_500_000_000
QWEN3_MOE_BYTES = 61_000_000_000
LLAMA_70B_BYTES = 141_000_000_000


def preparation_markdown() -> str:
    """The day before, on each trn2: instance, disk, caches that survive a reboot, token, the preparation run."""
    prep = ("cd notebooks && for n in 02_run_single_model 04_sharded_tp_ep 06_publishing; do\n"
            "  ../.venv/bin/papermill $n.ipynb /tmp/prepared-$n.ipynb -p RUN_ON_TRN2 True -p PREPARING True "
            "-p FETCH_FROM_HUB True\ndone")
    return "\n".join([
        "Each step says why; the lessons' real-model cells are behind their own switch, `PREPARING` (in 02, 04 and "
        "06), which is on only for this run. On the day it is off: a real model runs only if this run left its "
        f"weights in the Hugging Face cache, and stops after {IN_CLASS_TIMEOUT_S // 60} minutes "
        "(`workshop.trn2_timeout`); nothing is downloaded in class.",
        "",
        f"1. **Instance and disk.** A trn2 (a trn2.48xlarge runs every cell; 02 and 06 fit a trn2.3xlarge) from "
        f"the Neuron Deep Learning AMI, which has torch-neuronx. AWS's Neuron set-up pages say to give a trn2's root "
        f"volume at least {MIN_ROOT_VOLUME_GB} GB (<{SETUP_GUIDE}>, read {READ_ON}). What lands on it: the venv "
        f"and the shelf (a few GB), Qwen3-0.6B ({size_line(QWEN3_SMALL_BYTES)}), Qwen3-30B-A3B "
        f"({size_line(QWEN3_MOE_BYTES)}), Llama-3.3-70B only with access ({size_line(LLAMA_70B_BYTES)}), and "
        "the compile cache.",
        "2. **The set-up as typed** on the start page: `make demo`, `make lab`, `make book`.",
        f"3. **A compile cache that survives a reboot.** torch-neuronx keeps its NEFFs in `{NEFF_CACHE_DIR}` by "
        "default, and `/tmp` is emptied when the instance restarts. Before anything compiles, add "
        "`export TORCH_NEURONX_NEFF_CACHE_DIR=$HOME/neff_cache` to `~/.bashrc` and open a new shell (neuronhelpers "
        f"and `cache sync` follow the variable; its twins and CPU references live under `${HOME_ENV}`, in the home "
        "folder already). Then `.venv/bin/neuronhelpers cache sync` (the prebuilt cache, where one is published).",
        "4. **A Hub token, for the gated model only** (04's homework): accept Llama-3.3-70B-Instruct's license on "
        "its Hub page, then `hf auth login` in the shell that starts Jupyter. Never paste a token into a notebook.",
        f"5. **The preparation run**, with the network (at most {PREPARING_TIMEOUT_S // 60} minutes per real "
        "model; Qwen3-30B-A3B is the long one):\n```bash\n" + prep + "\n```\nThen Run All of every lesson once "
        "with `RUN_ON_TRN2 = True`: the twins' graphs land in the compile cache too.",
        "6. **Check**: `.venv/bin/neuronhelpers doctor` (every line OK), `hf cache scan` (Qwen3-0.6B and "
        "Qwen3-30B-A3B listed), `df -h ~` (room left), and reboot once to see the compile cache still there "
        "(`ls $TORCH_NEURONX_NEFF_CACHE_DIR`).",
        "7. **On the day**: `export HF_HUB_OFFLINE=1`, then `make lab`. In each lesson set `RUN_ON_TRN2 = True`; "
        "leave `PREPARING` and `FETCH_FROM_HUB` off.",
    ])


@dataclass(frozen=True)
class Step:
    """One section of a lesson that does something on a trn2 that it does not do on CPU in seconds: its twin
    compiles (``compiles``: the (lesson, cell) of ``day.TRN2_COMPILES``) or a real model's run (``real``)."""

    lesson: str
    section: str  # the heading's title, as the lesson writes it
    compiles: str | None  # the TRN2_COMPILES cell, or None
    real: str | None = None  # the real model a trn2_cell runs

    @property
    def mark(self) -> str | None:
        return next((s.mark for s in day.sections(self.lesson) if s.title.startswith(self.section)), None)

    def estimate(self) -> day.Trn2Compile | None:
        return next((r for r in day.TRN2_COMPILES if (r.lesson, r.cell) == (self.lesson, self.compiles)), None)

    def worst_minutes(self, prepared: bool) -> float:
        """The longest this section holds the kernel in class: a real model prepared is bounded by the in-class
        timeout and, not prepared, skipped; a twin's compiles are cache hits when prepared, else each graph's
        highest estimate (ranks compile at once)."""
        if self.real:
            return IN_CLASS_TIMEOUT_S / 60 if prepared else 0.0
        estimate = self.estimate()
        return 0.0 if prepared or estimate is None else estimate.graphs * estimate.minutes[1]


RUN_ALL = (
    Step("01", "Load the dataset", "load the dataset"),
    Step("02", "Run it", "run it (cold)"),
    Step("02", "A real checkpoint", "a real checkpoint"),
    Step("02", "On a trn2", "on a trn2", real="Qwen/Qwen3-0.6B"),
    Step("02", "Other libraries", "other libraries"),
    Step("03", "Broken runs", "broken runs"),
    Step("04", "Run both", "run both"),
    Step("04", "On a trn2: the real Qwen3-30B-A3B", "the real Qwen3-30B-A3B", real="Qwen/Qwen3-30B-A3B"),
    Step("04", "A gated model", "a gated model", real="meta-llama/Llama-3.3-70B-Instruct"),
    Step("05", "One architecture, live", "one architecture, live"),
    Step("06", "A release sweep", "a release sweep"),
    Step("06", "Contribute a row", None, real="Qwen/Qwen3-0.6B"),  # 02's graphs: compiled there
)


def run_all_markdown() -> str:
    """The worked-out Run All on a trn2 (RUN_ON_TRN2 on, PREPARING and FETCH_FROM_HUB off), per section, with the
    worst case prepared and not, and the totals."""
    lines = ["Worked out by reading each cell and its guard, **not run** (no trn2 here). `RUN_ON_TRN2 = True`, "
             "`PREPARING` and `FETCH_FROM_HUB` off, as on the day. Every other cell does on a trn2 what it does here, "
             "in the seconds the plan states. Minutes are worst cases: a twin's compiles at each graph's highest "
             "estimate (the table below); a real model at the in-class timeout.", "",
             "| lesson | section (mark) | on a trn2 | worst case, prepared (min) | worst case, not prepared (min) |",
             "| --- | --- | --- | --- | --- |"]
    for step in RUN_ALL:
        estimate = step.estimate()
        if step.real:
            compiled = (f" ({estimate.compiles} compiles at {estimate.minutes[0]:g}-{estimate.minutes[1]:g} min each, "
                        "estimated)" if estimate else " (02's graphs)")
            what = (f"`{step.real}` runs from the Hugging Face cache and the compile cache the preparation "
                    f"filled{compiled}; not prepared, the cell skips and says why (nothing is downloaded in class)")
        else:
            what = f"{estimate.run}: {estimate.compiles} neuronx-cc compiles; prepared, cache hits"
        lines.append(f"| {step.lesson} | {step.section} (*{step.mark}*) | {what} | {step.worst_minutes(True):g} | "
                     f"{step.worst_minutes(False):g} |")
    for label, keep in (("in class", lambda s: s.mark == day.IN_CLASS), ("Run All", lambda s: True)):
        steps = [s for s in RUN_ALL if keep(s)]
        lines.append(f"| all | {label} | | {sum(s.worst_minutes(True) for s in steps):g} | "
                     f"{sum(s.worst_minutes(False) for s in steps):g} |")
    return "\n".join(lines)
