"""Render run.py from the shared scaffold and the library's recipe, and its requirements.txt.

The loading / compile / generate logic lives only here in ``recipes/`` (the scaffold every run.py shares, and one
recipe per library); this module joins them into one self-contained script in reading order and fills in the
model's parameters. The harness runs exactly the rendered file (with its measuring around the file's own functions)
and keeps its text in the row. Taught in notebook 02.
"""

from __future__ import annotations

import re
from importlib import resources

from neuronhelpers.core import vocab
from neuronhelpers.core.backends import Backend
from neuronhelpers.core.parameters import check_parameters, recipe_parameters
from neuronhelpers.core.versions import distribution_version
from neuronhelpers.core.vocab import LIBRARY_FOR_TASK

# Each library's recipe file in recipes/ (which library tests a task: vocab.LIBRARY_FOR_TASK).
RECIPE_FILES = {vocab.TRANSFORMERS: "transformers_generate.py",
                vocab.SENTENCE_TRANSFORMERS: "sentence_transformers_encode.py",
                vocab.DIFFUSERS: "diffusers_pipeline.py"}
SCAFFOLD_FILE = "scaffold.py"
_MAIN = 'if __name__ == "__main__":\n'  # the last lines of every run.py; a remedy's block goes just before

_PARAMS_BLOCK = re.compile(r"(# --- parameters \(rendered\) ---\n).*?(\n# --- end parameters ---)", re.S)
_BANNER = re.compile(r"^# ---- (.+?) -*$", re.M)
_DROP = "# render: drop"
# A line kept only in a sharded run.py, or only in a one-core one (the marker itself is not rendered).
_ONLY = re.compile(r"\s*# render: (sharded|one core) only$")
# What a one-core run.py says where the sharded launcher would be.
ONE_CORE_NOTE = ("# ---- sharded launch " + "-" * 88 + "\n"
                 "# This run.py runs on one core: its plan fits one. A model planned on several gets the launcher "
                 "(one\n# process per core, no torchrun): neuronhelpers render MODEL --cores N\n")


def recipe_source(name: str) -> str:
    return resources.files("neuronhelpers.recipes").joinpath(name).read_text()


def _plan_lines(text: str, sharded: bool) -> str:
    """The lines for this plan: ``# render: drop`` lines gone, a ``sharded only`` / ``one core only`` line kept (its
    marker removed) where the plan is that."""
    kept = []
    for line in text.splitlines():
        if line.rstrip().endswith(_DROP):
            continue
        only = _ONLY.search(line)
        if only and (only.group(1) == "sharded") != sharded:
            continue
        kept.append(line[:only.start()] if only else line)
    return "\n".join(kept) + "\n"


def _sections(text: str, sharded: bool = False) -> tuple[str, list[tuple[str, str]]]:
    """(the text before the first banner, [(section name, section text with its banner)]), for this plan."""
    text = _plan_lines(text, sharded)
    marks = list(_BANNER.finditer(text))
    preamble = text[: marks[0].start()] if marks else text
    sections = [(m.group(1), text[m.start(): marks[i + 1].start() if i + 1 < len(marks) else len(text)].rstrip() + "\n")
                for i, m in enumerate(marks)]
    return preamble, sections


def _for_plan(name: str, sharded: bool, task: str | None) -> bool:
    """Whether a recipe section belongs in this run.py: ``loading: <task>`` only for that task, ``loading: sharded``
    only where the plan shards (``task`` None: every task)."""
    if not name.startswith("loading: "):
        return True
    kind = name.split(": ", 1)[1]
    return sharded if kind == "sharded" else task is None or kind == task


def template_text(library: str = vocab.TRANSFORMERS, sharded: bool = True, task: str | None = None) -> str:
    """The run.py of a library with an empty parameters block: scaffold and recipe in reading order. Rendered for one
    plan, it holds only what that plan runs: the sharded launcher and loading where it shards (a one-core file says
    how to render one), the loading of its ``task`` alone; the defaults give every part."""
    _, scaffold = _sections(recipe_source(SCAFFOLD_FILE), sharded)
    docstring, recipe = _sections(recipe_source(RECIPE_FILES[library]), sharded)
    shared = dict(scaffold)
    own = [(name, body) for name, body in recipe if name != "helpers" and _for_plan(name, sharded, task)]
    helpers = [body for name, body in recipe if name == "helpers"]
    # The scaffold's helpers follow the recipe's under the one "helpers" banner.
    banner, scaffold_helpers = shared["helpers"].split("\n", 1)
    scaffold_helpers = scaffold_helpers.lstrip("\n")
    if not helpers:
        scaffold_helpers = f"{banner}\n{scaffold_helpers}"
    # The one-core note only where a plan could shard: the libraries whose recipe loads sharded.
    shards = any(name == "loading: sharded" for name, _ in recipe)
    launch = [shared["sharded launch"]] if sharded else [ONE_CORE_NOTE] if shards else []
    parts = [docstring.strip() + "\n", shared["imports"], shared["parameters"], shared["main"],
             shared["the Trainium contract"], *(body for _, body in own), *launch, *helpers, scaffold_helpers,
             _MAIN + '    sys.exit(main(sys.argv[1:]))\n']
    return "\n\n".join(part.strip("\n") + "\n" for part in parts)


def recipe_params(model, backend: Backend, *, dtype: str | None = None, trust_remote_code: bool = False,
                  revision: str | None = None, cores: int = 1, parallelism: str = vocab.NO_PARALLELISM) -> dict:
    """The parameters that make the template this model's run.py (``model``: a resolved ``models.resolve.ModelRef``:
    its id, path and task)."""
    if (cores > 1) != (parallelism != vocab.NO_PARALLELISM):
        raise ValueError(f"{cores} core(s) with parallelism '{parallelism}' is not a plan")
    return recipe_parameters(task=model.task, given={
        "model_id": model.model_id, "model_path": model.path, "backend": backend.name, "device": backend.device,
        "compile_backend": backend.compile_backend, "dtype": dtype or backend.dtype, "cores": cores,
        "parallelism": parallelism, "dist_backend": backend.dist_backend,
        "trust_remote_code": bool(trust_remote_code), "revision": revision})


def render_run_py(params: dict) -> str:
    """The standalone run.py for these parameters (see ``recipe_params``; each declared in core/parameters.py)."""
    check_parameters(params)
    block = "PARAMS = {\n" + "".join(f"    {key!r}: {value!r},\n" for key, value in params.items()) + "}"
    template = template_text(params.get("library", vocab.TRANSFORMERS), sharded=params.get("cores", 1) > 1,
                             task=params.get("task"))
    text, count = _PARAMS_BLOCK.subn(lambda m: m.group(1) + block + m.group(2), template, count=1)
    if count != 1:
        raise RuntimeError("recipes/scaffold.py lost its parameters block")
    if params.get("remedy"):  # one change, and only where a remedy is asked for: the unmodified file is unchanged
        from neuronhelpers.recipes.remedies import remedy_block

        head, main = text.rsplit(_MAIN, 1)
        text = f"{head}{remedy_block(params['remedy'])}\n\n{_MAIN}{main}"
    return text


def params_of_run_py(text: str) -> dict:
    """Read the parameters back out of a rendered run.py (a literal, never executed)."""
    import ast

    match = _PARAMS_BLOCK.search(text)
    if not match:
        raise ValueError("not a neuronhelpers run.py: no parameters block")
    block = text[match.end(1) : match.start(2)]
    return ast.literal_eval(block.split("=", 1)[1].strip())


def render_requirements(backend: Backend, task: str) -> str:
    """requirements.txt: what to pip install on top of the Neuron SDK (or next to torch elsewhere)."""
    def pin(name):
        version = distribution_version(name)
        # A local build label (torch's "+cpu") is not on PyPI: pin the public release.
        return f"{name}=={version.split('+')[0]}" if version else name

    # torchvision is built against one torch: it travels with torch (processors with a video processor need it).
    with_vision = task == vocab.IMAGE_TEXT_TO_TEXT and distribution_version("torchvision")
    torch_family = ["torch"] + (["torchvision"] if with_vision else [])
    lines = []
    if backend.name == "neuron":
        lines.append("# Neuron SDK (preinstalled on the Neuron Deep Learning AMI / container): "
                     + ", ".join(pin(n) for n in (*torch_family, "torch-neuronx", "neuronx-cc")))
    else:
        lines += [pin(n) for n in torch_family]
    lines += [pin(LIBRARY_FOR_TASK[task])] if LIBRARY_FOR_TASK[task] != vocab.TRANSFORMERS else []
    lines += [pin("transformers"), pin("accelerate"), pin("safetensors"), pin("tokenizers")]
    if task == vocab.IMAGE_TEXT_TO_TEXT:
        lines.append(pin("pillow"))
    return "\n".join(lines) + "\n"
