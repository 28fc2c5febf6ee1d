"""Render run.py from the shared scaffold and the library's recipe, and its requirements.txt.

The loading / compile / generate logic lives only here in ``recipes/`` (the scaffold every run.py shares, and one
recipe per library, each a program its tests and the twins import); this module joins their sections into one
self-contained script in reading order, choosing whole sections for the model's plan, and fills in its PARAMS (a
remedy tried after a FAIL is one more entry there). No line is rewritten or dropped by a marker. The harness runs
exactly the rendered file (with its measuring around the file's own functions) and keeps its text in the row. Taught
in notebook 02.
"""

from __future__ import annotations

import ast
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
_MAIN = 'if __name__ == "__main__":\n'  # the last lines of every run.py

_BANNER = re.compile(r"^# ---- (.+?) -*$", re.M)
_EMPTY_PARAMS = re.compile(r"^PARAMS = \{\}.*$", re.M)  # the scaffold's parameters line, filled per model
# What a one-core run.py says where the sharded launcher would be.
ONE_CORE_NOTE = ("# ---- sharded launch " + "-" * 88 + "\n"
                 "# One core: this model's plan fits one. Sharded (one process per core, no torchrun): "
                 "neuronhelpers render MODEL --cores N\n")


def recipe_source(name: str) -> str:
    return resources.files("neuronhelpers.recipes").joinpath(name).read_text()


def _sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(the file's docstring, [(section name, section text with its banner)]): a recipe file is a program whose
    sections start at banner comments; what stands before the first banner but the docstring (the file's own imports,
    for the package) is not run.py's (run.py has one imports section, the scaffold's)."""
    marks = list(_BANNER.finditer(text))
    head = ast.parse(text[: marks[0].start()] if marks else text).body
    docstring = ""
    if head and isinstance(head[0], ast.Expr) and isinstance(head[0].value, ast.Constant):
        docstring = "\n".join(text.splitlines()[: head[0].end_lineno]) + "\n"
    sections = [(m.group(1), text[m.start(): marks[i + 1].start() if i + 1 < len(marks) else len(text)].rstrip() + "\n")
                for i, m in enumerate(marks)]
    return docstring, sections


def _for_plan(name: str, sharded: bool, task: str | None) -> bool:
    """Whether a recipe section belongs in this run.py: ``loading: <task>`` only for that task, ``loading: sharded``
    only where the plan shards (``task`` None: every task)."""
    if not name.startswith("loading: "):
        return True
    kind = name.split(": ", 1)[1]
    return sharded if kind == "sharded" else task is None or kind == task


def template_text(library: str = vocab.TRANSFORMERS, sharded: bool = True, task: str | None = None,
                  twin: bool = False, shelf: bool = False) -> str:
    """The run.py of a library with an empty parameters block: scaffold and recipe in reading order, whole sections
    chosen for one plan. It holds only what that plan runs: the sharded launcher and loading where it shards (a
    one-core file says how to render one), the loading of its ``task`` alone, the twin's folder for a ``twin``
    (twins/rerun.py), the shelf copy's for a ``shelf`` row (models/shelf.py); the defaults give every part but those
    two."""
    _, scaffold = _sections(recipe_source(SCAFFOLD_FILE))
    docstring, recipe = _sections(recipe_source(RECIPE_FILES[library]))
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
    parts = [docstring.strip() + "\n", shared["imports"], shared["parameters"], *([shared["the twin"]] if twin else []),
             *([shared["the shelf copy"]] if shelf else []),
             shared["main"],
             shared["the Trainium contract"], *(body for _, body in own), *launch, *helpers, scaffold_helpers,
             _MAIN + '    sys.exit(main(sys.argv[1:]))\n']
    return "\n\n".join(part.strip("\n") + "\n" for part in parts)


def recipe_params(model, backend: Backend, *, dtype: str | None = None, trust_remote_code: bool = False,
                  revision: str | None = None, cores: int = 1, parallelism: str = vocab.NO_PARALLELISM) -> dict:
    """The parameters that make the template this model's run.py (``model``: a resolved ``models.resolve.ModelRef``:
    its id, path and task)."""
    if (cores > 1) != (parallelism != vocab.NO_PARALLELISM):
        raise ValueError(f"{cores} core(s) with parallelism '{parallelism}' is not a plan")
    # a twin found again by its id: run.py names it so, with its files' digest, and builds it where it runs
    # a twin or a shelf copy found again by its id: run.py names it so, with its files' digest, and finds (a twin:
    # builds) it where it runs
    if model.twin_digest:
        found = {"model_path": model.model_id,
                 "twin_files": {"digest": model.twin_digest, "built_by": model.twin_built_by}}
    elif model.shelf_digest:
        found = {"model_path": model.model_id,
                 "shelf_files": {"digest": model.shelf_digest, "made_by": model.shelf_made_by}}
    else:
        found = {"model_path": model.path}
    return recipe_parameters(task=model.task, given={
        "model_id": model.model_id, **found, "backend": backend.name, "device": backend.device,
        "compile_backend": backend.compile_backend, "dtype": dtype or backend.dtype, "cores": cores,
        "parallelism": parallelism, "dist_backend": backend.dist_backend,
        "trust_remote_code": bool(trust_remote_code), "revision": revision})


def params_line(name: str, value) -> str:
    """One parameter as run.py's PARAMS holds it (a remedy's whole entry is one such line)."""
    return f"    {name!r}: {value!r},"


def render_run_py(params: dict) -> str:
    """The standalone run.py for these parameters (see ``recipe_params``; each declared in core/parameters.py)."""
    check_parameters(params)
    block = "PARAMS = {\n" + "".join(params_line(key, value) + "\n" for key, value in params.items()) + "}"
    template = template_text(params.get("library", vocab.TRANSFORMERS), sharded=params.get("cores", 1) > 1,
                             task=params.get("task"), twin="twin_files" in params, shelf="shelf_files" in params)
    text, count = _EMPTY_PARAMS.subn(lambda m: block, template, count=1)
    if count != 1:
        raise RuntimeError("recipes/scaffold.py lost its parameters line (PARAMS = {})")
    return text


def params_of_run_py(text: str) -> dict:
    """Read the parameters back out of a rendered run.py: its ``PARAMS = {...}`` literal, never executed."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"not a neuronhelpers run.py: not Python ({exc.msg}, line {exc.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PARAMS"]:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                break
    raise ValueError("not a neuronhelpers run.py: no parameters block (a PARAMS = {...} literal)")


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
