"""The workshop, defined once: the lessons in the order they are taught, the 90-minute plan, what to skip when late,
the glossary, and the guards that keep a Run All safe on any machine (a laptop, a trn2, a room without network).

The start page and the teacher's guide are written from here and from ``ui/pages.py`` (a test fails when a
committed page differs), the book's contents follow :data:`LESSON_ORDER`, and each notebook's "What's next" names
the lesson after it (:func:`next_lesson`).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core.vocab import EXACT, EXCLUDED, NEAR_TIE, UNTESTED
from neuronhelpers.ui import day

NOTEBOOKS_DIR = day.NOTEBOOKS_DIR
START_PAGE = "00_start_here"

# The lessons by number, numbered in the order they are taught (the next file is the next lesson): the concepts 03
# defines (the verdict, evidence) come before 04's sharded runs, and 06 (release managers) closes the day.
LESSON_ORDER = ("00", "01", "02", "03", "04", "05", "06")
TITLES = {"00": "Start here", "01": "Explore the results dataset", "02": "Run a single model",
          "03": "Validation: how a result is decided", "04": "Sharded runs: TP and EP",
          "05": "The architecture catalog", "06": "Publishing a release"}

# A real model's run in class, prepared the day before (weights downloaded, compile cache warm), loads and runs in
# minutes; this bound keeps a cell that was not, or whose cache missed, from holding the kernel longer. The day
# before (PREPARING = True), a run gets the time a first neuronx-cc compile of a large model needs.
IN_CLASS_TIMEOUT_S = 300
PREPARING_TIMEOUT_S = 3600


def trn2_timeout(preparing: bool) -> int:
    """Seconds a real model's run may take: an hour the day before, five minutes in class."""
    return PREPARING_TIMEOUT_S if preparing else IN_CLASS_TIMEOUT_S


# An assumed download rate for the time a fetch would take (a trn2's link is faster, a conference room's slower):
# 50 MB/s, i.e. 400 Mbit/s.
ASSUMED_BYTES_PER_S = 50e6


@dataclass(frozen=True)
class Part:
    """One part of the day: the notebook (or the terminal), what is done live, the minutes stated for explaining on the
    90- and the 120-minute day, and the in-class sections to skip when late, in that order. Everything else (what
    runs in class, its seconds, the exercises and their minutes) comes from the lesson's marks and the measurement
    (:mod:`neuronhelpers.ui.day`)."""

    where: str
    live: str
    explain_min: tuple[int, int]  # on the 90- and the 120-minute day: at least 6 for a lesson
    skip_when_late: tuple[str, ...] = ()

    @property
    def number(self) -> str:
        return self.where[:2]


PLAN = (
    Part("00 start here", "the start page: what the day lets you do, the set-up, and `doctor` (is this machine ready?)",
         (3, 4)),
    Part("01 explore", "the classic query, the explorer (click a model: its `run.py`), the published layout", (9, 10),
         ("Plots",)),
    Part("02 single model", "the plan, `run.py` read top-down, a verified row, `python3 run.py`", (10, 12),
         ("Where the time went, and what a warm cache saves",)),
    Part("03 validation", "exact vs near-tie, one broken run per failure stage, evidence, UNTESTED; a live FAIL read "
         "by the attendees (Ex 2)", (8, 10), ("Untested is not FAIL",)),
    Part("04 sharded", "cores chosen from memory, what each rank holds, a TP and an EP run", (6, 8),
         ("Run both, check against the reference",)),
    Part("05 catalog", "verdicts per pair, root causes, twins against Trainium", (6, 8), ("Why no verdict",)),
    Part("06 publishing", "the diff, the gate, and contributing your own row (a dry run)", (6, 8),
         ("Diff against the previous release",)),
)
DAYS = day.DAYS
WORKSHOP_MINUTES = DAYS[0]


def plan(minutes: int = WORKSHOP_MINUTES, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[day.LessonPlan]:
    """Each part of the day worked out for a day of ``minutes`` (90 or 120), from the lessons in ``notebooks_dir``."""
    which = DAYS.index(minutes)
    return [day.lesson_plan(part.number, minutes, part.explain_min[which], notebooks_dir) if part.number != "00" else
            day.LessonPlan("00", minutes, 0, (), 0, part.explain_min[which], 0, (), 0, 0) for part in PLAN]


def slack_minutes(minutes: int = WORKSHOP_MINUTES) -> int:
    return minutes - sum(p.minutes for p in plan(minutes))


def _exercises(numbers) -> str:
    return ", ".join(f"Ex {n}" for n in numbers) or "-"


def skip_line(part: Part) -> str:
    """"Plots (1 s of cells), then ..." : what to skip when late, each with its measured seconds."""
    return "; ".join(f"{title} ({s:.0f} s of cells)" for title, s in day.skipped_seconds(part.number,
                                                                                       part.skip_when_late)) or "-"


def plan_markdown(minutes: int = WORKSHOP_MINUTES) -> str:
    """The plan of one day as a Markdown table, the minutes running from 0, with the slack left."""
    lines = ["| minutes | notebook | what to do live | exercises in class | cells in class (s) | opening it and the "
             "terminal (s) | exercise (min) | explaining (min) | total (min) | skip when late |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    start = 0
    for part, lesson in zip(PLAN, plan(minutes), strict=True):
        lines.append(f"| {start}-{start + lesson.minutes} | {part.where} | {part.live} | "
                     f"{_exercises(lesson.exercises)} | {lesson.run_s:.0f} | {lesson.friction_s:.0f} | "
                     f"{lesson.exercise_min} | "
                     f"{lesson.explain_min} | {lesson.minutes} | {skip_line(part)} |")
        start += lesson.minutes
    lines.append(f"| {start}-{minutes} | slack | questions, or what ran late | | | | | | {minutes - start} | |")
    return "\n".join(lines)


def homework_markdown() -> str:
    """What each lesson leaves for home on the 90-minute day (the 120-minute day takes some of it into class)."""
    lines = ["| notebook | exercises | cells (s) | about (min) |", "| --- | --- | --- | --- |"]
    for part, lesson in zip(PLAN[1:], plan()[1:], strict=True):
        lines.append(f"| {part.where} | {_exercises(lesson.homework_exercises)} | {lesson.homework_s:.0f} | "
                     f"{lesson.homework_min} |")
    return "\n".join(lines)


def time_line(number: str, plans: dict[int, list[day.LessonPlan]] | None = None) -> str:
    """A lesson's own "| Time |" line, from the plan: its minutes on both days and what is left for home (``plans``:
    both days' plans, when the caller worked them out already)."""
    plans = plans or {m: plan(m) for m in DAYS}
    short, long = (next(p for p in plans[m] if p.number == number) for m in DAYS)
    return (f"| Time | {short.minutes} minutes of the {DAYS[0]}-minute day ({short.run_s:.0f} s of cells, "
            f"{short.exercise_min} of exercises: {_exercises(short.exercises)}, {short.explain_min} of explaining); "
            f"{long.minutes} of the {DAYS[1]}-minute day ({_exercises(long.exercises)}); homework about "
            f"{short.homework_min} minutes ({_exercises(short.homework_exercises)}). From the plan in the teacher's "
            "guide |")


# Each lesson's learning objectives, what to know beforehand and where to read more: three rows of its Prerequisites
# table, written under its time line by ``write_time_lines`` (a test fails when a lesson's rows differ).
FRAMES = {
    "01": ("load results from a folder or the Hub; answer \"does this model run?\" with one pandas query and with "
           "the explorer; say which row and which version pair an answer stands on",
           "pandas: filtering rows and `value_counts`",
           "[pandas user guide](https://pandas.pydata.org/docs/user_guide/index.html)"),
    "02": ("read a `run.py` top-down; run a model and read its verified row; reproduce a row in a terminal and "
           "change one parameter; say what a warm compile cache saves",
           "transformers' `from_pretrained` and `generate`; what `torch.compile` does, roughly",
           "[torch.compile tutorial](https://docs.pytorch.org/tutorials/intermediate/torch_compile_tutorial.html), "
           "[static cache and torch.compile in transformers](https://huggingface.co/docs/transformers/llm_optims), "
           "[torch.compile on Neuron](https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/"
           "index.html)"),
    "03": ("tell PASS, FAIL, EXCLUDED and UNTESTED apart; decide exact, near-tie or mismatch from the logits; read "
           "a FAIL's stage, cause and evidence, and say who must fix it",
           "lesson 02; greedy decoding picks the highest logit at each step",
           "[generation strategies](https://huggingface.co/docs/transformers/generation_strategies)"),
    "04": ("say how many cores a model needs and why; say what each rank holds under TP and EP; read how `run.py` "
           "launches its ranks",
           "lesson 02; attention heads and mixture-of-experts layers",
           "[tensor parallelism in PyTorch](https://docs.pytorch.org/tutorials/intermediate/TP_tutorial.html), "
           "[Trainium best practices](https://awsdocs-neuron.readthedocs-hosted.com/en/latest/training/"
           "best-practices.html)"),
    "05": ("read verdicts per release pair; name what blocks the most architectures; compare a model's own config "
           "with its architecture's; find your own model's answer",
           "lessons 01 to 03",
           "[transformers' auto classes](https://huggingface.co/docs/transformers/model_doc/auto)"),
    "06": ("sweep a release into Parquet files and a card; diff two releases; gate on the expected results; "
           "contribute a row; share a compile cache",
           "lessons 01 and 03",
           "[uploading to the Hub](https://huggingface.co/docs/huggingface_hub/guides/upload), "
           "[Ray Core](https://docs.ray.io/en/latest/ray-core/walkthrough.html)"),
}
FRAME_ROWS = ("You will be able to", "You know", "Read more")


def frame_rows(number: str) -> str:
    """A lesson's three frame rows, as its Prerequisites table shows them."""
    return "\n".join(f"| {name} | {value} |" for name, value in zip(FRAME_ROWS, FRAMES[number], strict=True))


def write_time_lines(notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[Path]:
    """Rewrite each lesson's "| Time |" line from the plan, and its frame rows under it (the lessons' own rows are
    never written by hand)."""
    import nbformat

    plans = {m: plan(m, notebooks_dir) for m in DAYS}  # worked out once, from these lessons' own marks
    written = []
    for path in lesson_paths(notebooks_dir):
        number = path.stem[:2]
        if number not in FRAMES:  # the start page
            continue
        nb = nbformat.read(path, as_version=4)
        first = nb.cells[0]
        kept = "\n".join(line for line in first.source.split("\n")
                         if not line.startswith(tuple(f"| {name} |" for name in FRAME_ROWS)))
        rows = time_line(number, plans) + "\n" + frame_rows(number)
        source = re.sub(r"^\| Time \|.*$", lambda _match, rows=rows: rows, kept, count=1, flags=re.M)
        if source != first.source:
            first.source = source
            nbformat.write(nb, path)
            written.append(path)
    return written


# One trn2 per pair of attendees: public figures, not measured here (no trn2 in this project's CI).
PAIR_VARIANT = (
    "**One trn2 per pair of attendees.** The same plan and the same cells: the twins compile with neuronx-cc instead "
    "of inductor. A first compile \"can take several minutes for large models\" (AWS Neuron docs, "
    "<https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html>); "
    "a twin is tiny, and `.venv/bin/neuronhelpers cache sync` the day before fills the compile cache, so budget the "
    "slack for the first runs of 02 and 04. With `RUN_ON_TRN2 = True` the real models do not fit the day: 04's "
    "Qwen3-30B-A3B downloads about 61 GB and Llama-3.3-70B about 141 GB (20 and 47 minutes at an assumed 50 MB/s), and "
    "AWS's own recipe for a 32B model on a trn2.48xlarge allows 1200 s to compile "
    "(<https://awsdocs-neuron.readthedocs-hosted.com/en/latest/vllm-neuron/docs/tutorials/"
    "tutorial-qwen3-vl-32b.html>): run them the day before, or as homework.")

# Every term the notebooks use before or without defining it, defined once (the start page shows them).
GLOSSARY = {
    "twin": "a real architecture's code with shrunk dimensions and random weights, built locally (`tiny/qwen3`); it "
            "tests whether the architecture compiles, not what a checkpoint writes",
    "shelf": "real Hub checkpoints that registry packages ship (SmolLM2-135M-Instruct, all-MiniLM-L6-v2, "
             "all-mpnet-base-v2, gemma-3-270m), run offline under their Hub ids",
    "trn2": "the AWS Trainium2 instance (trn2.48xlarge: 16 chips, 8 physical NeuronCores each)",
    "NeuronCore": "one compute core of a Trainium chip; a row's `neuron_cores` counts the logical cores it used",
    "LNC": "logical NeuronCore configuration (`NEURON_LOGICAL_NC_CONFIG`): 2 physical cores act as one (the trn2 "
           "default: 4 logical cores of 24 GiB per chip) or 1 (8 of 12 GiB)",
    "NEFF": "the Neuron compiler's output file, one per compiled graph; the compile cache keeps them by compiler "
            "version",
    "compile cache": "compiled graphs kept on disk (NEFFs on a trn2, inductor's kernels on CPU): a warm cache skips "
                     "the compiler",
    "inductor": "PyTorch's own compiler (`torch.compile`'s default backend): what runs here in place of neuronx-cc",
    "dynamo": "the part of `torch.compile` that traces Python into a graph; its guards decide when to recompile",
    "graph break": "a spot dynamo cannot trace; with `fullgraph=True` (the recipe's setting) it is an error, a FAIL at "
                   "compile",
    "recompile": "dynamo compiling the same function again because a guard failed (a Python int that changes each "
                 "step); past the limit it is a FAIL",
    "static cache": "a KV cache allocated once at its full length, so every decode step has the same shapes and "
                    "compiles once",
    "run.py": "the one file a row ran: load, compile, generate, check; every row carries it and its "
              "`requirements.txt`",
    "row": "one outcome: a model, the versions it ran under, its result and why",
    "version pair": "the (compiler version, library version) a row ran under: one Parquet file each",
    "seed columns": "the columns the first published layout had (model_id, result, versions, ...); every later column "
                    "is added beside them",
    "reference": "the same checkpoint run eagerly on CPU in float32: what a compiled run's tokens are compared with",
    "exact / near_tie": "the tokens equal the reference's / they first differ where the reference's top two logits "
                        "were closer than the dtype's tolerance",
    "judge": "for a model too large for a CPU reference: a small language model that reads the text and says whether "
             "it is sound English",
    "remedy": "one change to the recipe (a compiler setting, a generate() argument) that `sweep --remedies` tries "
              "after a FAIL, written into run.py as one more PARAMS entry the recipe reads; recorded beside the "
              "verdict with its cost, never as it",
    "trn2-ready": "a remedy that passed with static shapes, one compiled graph and no recompile, as TorchNeuron "
                  "compiles; beside it 'costly on trn2' (graph breaks, several graphs) and 'not on trn2' (a symbolic "
                  "size or int, or a compile per generated token)",
    "evidence": "what a verdict stands on: exact > near_tie > within_tolerance > judged for a PASS; for a FAIL, "
                "whether the model ran eagerly on the same device",
    "TP": "tensor parallelism: each rank holds a slice of every layer's weights",
    "EP": "expert parallelism: each rank holds some of a mixture-of-experts layer's experts",
    "rank": "one process of a sharded run, on one core",
    "cause": "a short, stable signature of a failure (exception, deepest frame, failing guard) that groups failures "
             "of one origin",
    "gate": "the expected-results check: any change of verdict against `expected/cpu_architectures.csv` fails it",
    "catalog": "the committed verdicts of every architecture's twin (`catalog/`), per version pair",
    "Selected list": "the models the project tests by name (`neuronhelpers.SELECTED`), some EXCLUDED with a reason",
    "GGUF": "llama.cpp's single-file checkpoint format; the shelf converts SmolLM2's GGUF file to a transformers "
            "folder",
    "UNTESTED / EXCLUDED": "no verdict could be reached here (no twin, a missing package, a dead node) / "
                           "deliberately not run",
}
# Where each glossary term is first used and defined in the lessons' Markdown (the combined keys split; "row" is not).
# Markdown, printed lines, tables and plot labels alike (tests/test_notebooks.py holds what the lessons show to it):
# 01 shows rows, so it defines what a row's columns say before 02 and 03 take them apart.
DEFINED_IN = {
    "twin": "01", "shelf": "01", "trn2": "01", "inductor": "01", "run.py": "01", "catalog": "01", "version pair": "01",
    "seed columns": "01", "TP": "01", EXCLUDED: "01", UNTESTED: "01", "cause": "01", "Selected list": "01",
    EXACT: "01", "evidence": "01", "recompile": "01", "GGUF": "01", "static cache": "01", "trn2-ready": "01",
    "NeuronCore": "02", "LNC": "02", "NEFF": "02", "compile cache": "02", "reference": "02",
    NEAR_TIE: "02", "dynamo": "02", "graph break": "02", "rank": "02", "remedy": "02",
    "judge": "03",
    "EP": "04",
    "gate": "05",
}

SETUP = """# the day before, with the network (each machine, or one trn2 per pair):
make demo                       # .venv, torch, the shelf, a sweep of twins (8 GB of disk free)
make book                       # build/book/index.html: every lesson as it ran
make lab                        # installs JupyterLab once, then runs it in this terminal (Ctrl-C ends it)
# the day itself, offline, in a terminal of its own:
export HF_HUB_OFFLINE=1         # nothing is fetched from the Hub; the shelf and twins stand in
.venv/bin/neuronhelpers doctor
make lab"""


def lesson_key(stem: str) -> tuple[int, str]:
    """Sort key of a notebook by teaching order (numbers not in the order go last, in file order)."""
    number = stem[:2]
    return (LESSON_ORDER.index(number) if number in LESSON_ORDER else len(LESSON_ORDER), stem)


def lesson_paths(notebooks_dir: str | Path = NOTEBOOKS_DIR) -> list[Path]:
    """The numbered notebooks of a folder in teaching order."""
    return sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"), key=lambda p: lesson_key(p.stem))


def next_lesson(number: str) -> str | None:
    """The lesson taught after ``number`` ("02" -> "03"), or None after the last."""
    i = LESSON_ORDER.index(number)
    return LESSON_ORDER[i + 1] if i + 1 < len(LESSON_ORDER) else None


def glossary_markdown() -> str:
    rows = "\n".join(f"| {term} | {meaning} |" for term, meaning in GLOSSARY.items())
    return "| term | meaning |\n| --- | --- |\n" + rows


# ---- guards: what a cell may do on this machine -------------------------------------------------------------
def size_line(weight_bytes: int | None) -> str:
    """"61.1 GB, about 20 min at an assumed 50 MB/s" (the rate is an assumption, said as one)."""
    if not weight_bytes:
        return "size unknown here"
    minutes = weight_bytes / ASSUMED_BYTES_PER_S / 60
    takes = f"about {minutes:.0f} min" if minutes >= 1 else "under a minute"
    return f"{weight_bytes / 1e9:.1f} GB, {takes} at an assumed {ASSUMED_BYTES_PER_S / 1e6:.0f} MB/s"


def hub_download_bytes(model_id: str) -> int | None:
    """The bytes a download of the model's weights would fetch, from the Hub's file metadata (an API call, no
    download); None offline or when the Hub does not answer."""
    from neuronhelpers.core.network import hub_reachable

    if not hub_reachable():
        return None
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(model_id, files_metadata=True)
    except Exception:  # noqa: BLE001 - gated, unknown or unreachable: the caller falls back to the planner's count
        return None
    sizes = [s.size or 0 for s in info.siblings or () if s.rfilename.endswith((".safetensors", ".bin"))]
    return sum(sizes) or None


def begin(fetch_from_hub: bool) -> None:
    """A lesson's first step: the FETCH_FROM_HUB switch (off, this process and every run.py it starts are offline:
    the shelf and the twins stand in, nothing is downloaded) and the ``%%solution`` cell magic. Prints one line."""
    from neuronhelpers.core.network import go_offline, hub_status_line

    _register_solution_magic()
    if not fetch_from_hub:
        go_offline()
        print("FETCH_FROM_HUB is False: nothing is downloaded; real models come from the shelf, the rest are twins")
    else:
        print(f"FETCH_FROM_HUB is True: models the shelf lacks are downloaded from the Hub ({hub_status_line()})")


def _register_solution_magic() -> None:
    """``%%solution``: the cell runs only when the notebook's SOLUTIONS is True (else one line says how to run it)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def solution(_line, cell):
        if not shell.user_ns.get("SOLUTIONS"):
            print("solution not run: set SOLUTIONS = True in the parameters (or read it: click to reveal)")
            return
        shell.run_cell(cell, store_history=False).raise_error()

    shell.register_magic_function(solution, magic_kind="cell", magic_name="solution")


def trn2_cell(run_on_trn2: bool, what: str, *, cores: int | None = None, weight_bytes: int | None = None,
              model_id: str | None = None, unless: str | None = None, preparing: bool | None = None) -> bool:
    """Whether a trn2 cell runs here: asked for (RUN_ON_TRN2), a neuron device and torch-neuronx present, enough
    cores, nothing else in the way (``unless``: the reason, e.g. no access to a gated model), the model's weights in
    the local Hugging Face cache or else the Hub reachable (offline, with FETCH_FROM_HUB off, a model never fetched
    is skipped, not failed) and the disk large enough for them. A real model's cell passes ``preparing`` (the
    lesson's PREPARING switch): on the day (False) it runs only from what the preparation left, its weights in the
    local Hugging Face cache, and never downloads in class. Prints one line: what the cell would do (its download's
    size from the Hub's metadata, else the planner's byte count) and why it runs or skips."""
    from neuronhelpers.core.network import hub_reachable, hub_status_line
    from neuronhelpers.core.topology import neuron_device_present, neuron_topology

    size = (hub_download_bytes(model_id) if model_id and run_on_trn2 else None) or weight_bytes
    would = f"{what}{f'; it downloads {size_line(size)}' if size else ''}"
    reasons = []
    if not run_on_trn2:
        reasons.append("RUN_ON_TRN2 is False (set it to True on a trn2 to run it)")
    elif not neuron_device_present():
        reasons.append("no neuron device here")
    elif importlib.util.find_spec("torch_neuronx") is None:
        reasons.append("torch-neuronx is not installed (a Neuron Deep Learning AMI or container has it)")
    elif cores and (topology := neuron_topology()).cores < cores:
        reasons.append(f"it needs {cores} NeuronCores and this instance has {topology.describe()}")
    elif unless:
        reasons.append(unless)
    elif model_id and in_hf_cache(model_id):
        would += " (its weights are in the local Hugging Face cache: nothing is downloaded)"
    elif model_id and preparing is False:
        reasons.append(f"not prepared: {model_id} is not in the local Hugging Face cache, and in class nothing is "
                       "downloaded (run this lesson with PREPARING = True the day before: the teacher's guide)")
    elif (size or model_id) and not hub_reachable():
        missing = f"{model_id} is not in the local Hugging Face cache and " if model_id else ""
        reasons.append(f"{missing}the Hub is {hub_status_line()} (FETCH_FROM_HUB = True fetches)")
    elif size and (free := _free_bytes()) < size * 1.1:
        reasons.append(f"only {free / 1e9:.0f} GB free for the Hugging Face cache")
    if reasons:
        print(f"skipped: {reasons[0]}. This cell runs {would}.")
        return False
    print(f"running: {would}")
    return True


def in_hf_cache(model_id: str) -> bool:
    """Whether the local Hugging Face cache holds the model: its config.json and its weights (one safetensors file,
    or the index of sharded ones), read with huggingface_hub's own lookup (no network)."""
    from huggingface_hub import try_to_load_from_cache

    def cached(filename):
        return isinstance(try_to_load_from_cache(model_id, filename), str)

    return cached("config.json") and (cached("model.safetensors") or cached("model.safetensors.index.json"))


def corpus_weight_bytes(model_id: str, dtype_bytes: int = 2) -> int | None:
    """The bytes of a model's weights in bfloat16, from its config in the corpus shipped with the package (parameters
    estimated from the config: no network), or None when the corpus lacks it."""
    from neuronhelpers.plan.cores import estimate_parameters
    from neuronhelpers.twins.corpus import corpus_root, folder_name

    folder = corpus_root() / folder_name(model_id)
    if not (folder / "config.json").is_file():
        return None
    import transformers

    return estimate_parameters(transformers.AutoConfig.from_pretrained(folder)) * dtype_bytes


def _free_bytes() -> int:
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE)
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free
