"""The package's shape, read from its source: no import cycle, leaves that stay leaves, modules and functions small
enough to read, every setting read in one place and the vocabulary spelled in one place.

Each check prints what it found when it fails, so the message says which import or line to change.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "neuronhelpers"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


# The two arrows up, by design, not edges of the package's graph: a twin's or a shelf copy's run.py (the scaffold's
# "the twin" and "the shelf copy" sections, rendered only for those rows) asks neuronhelpers for the folder of the
# files it names; the package never takes these paths (docs/design.md section 3).
RUN_PY_ARROWS = {("neuronhelpers.recipes.scaffold", "neuronhelpers.twins.rerun"),
                 ("neuronhelpers.recipes.scaffold", "neuronhelpers.models.shelf")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at the top or inside a function (a lazy import is still an edge)."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {c for c in candidates if c in modules and c != name and (name, c) not in RUN_PY_ARROWS}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each an import circle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    assert len(graph) > 40  # the walk saw the package
    found = cycles(graph)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} import edges, cycles: {found or 'none'}")
    assert found == [], f"import circles: {found}"


def test_core_imports_nothing_of_the_package_beyond_core():
    upward = {(m, d) for m, deps in import_graph().items() if m.startswith("neuronhelpers.core")
              for d in deps if not d.startswith("neuronhelpers.core")}
    assert upward == set(), f"core must stay a leaf: {sorted(upward)}"


# The stages of the data flow, bottom up (docs/design.md, section 2): each may import only the stages listed before it.
# plan imports only core (the Selected list is planned from its published parameter counts); process needs only
# core (the parent-death signal is core/processes.py, of which run.py carries a copy).
LAYERS = ["core", "plan", "process", "recipes", "verdict", "twins", "models", "store", "run", "analysis", "sweep",
          "ui", "cli"]
FACADE = {"neuronhelpers", "neuronhelpers.__main__"}  # the top-level names hand every stage's functions on


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a stage to one listed after it in LAYERS (an arrow that runs back up), and every module
    outside a stage that is not the facade."""
    found = []
    for module, deps in sorted(graph.items()):
        if module in FACADE or module == "neuronhelpers.data":
            continue
        stage = _stage(module)
        if stage is None:
            found.append(f"{module} belongs to no stage of {LAYERS}")
            continue
        allowed = set(LAYERS[: LAYERS.index(stage) + 1])
        found += [f"{module} -> {dep}" for dep in sorted(deps) if dep not in FACADE and _stage(dep) not in allowed]
    return found


def test_the_layer_finder_finds_an_arrow_back_up():
    graph = {"neuronhelpers.core.vocab": {"neuronhelpers.store.schema"}, "neuronhelpers.store.schema": set(),
             "neuronhelpers.odd": set()}
    assert layer_violations(graph) == ["neuronhelpers.core.vocab -> neuronhelpers.store.schema",
                                       "neuronhelpers.odd belongs to no stage of " + str(LAYERS)]


def test_each_stage_imports_only_the_stages_below_it():
    """The table of allowed imports: LAYERS. A new import that runs back up (say store -> run) fails here, named."""
    found = layer_violations(import_graph())
    assert found == [], "imports that run back up the stages:\n" + "\n".join(found)


def test_twin_builders_never_import_the_orchestrator():
    """twins build from leaves (specs, tokenizers) through shrink to the builders; only build.py orchestrates (and
    rerun.py, which builds nothing, asks it for a twin a run.py names)."""
    graph = import_graph()
    orchestrator, above = "neuronhelpers.twins.build", {"neuronhelpers.twins.build", "neuronhelpers.twins.rerun"}
    offenders = sorted(m for m, deps in graph.items()
                       if m.startswith("neuronhelpers.twins.") and m not in above and orchestrator in deps)
    assert offenders == [], f"builders importing {orchestrator}: {offenders}"


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_modules_and_functions_stay_readable():
    long_modules, long_functions = [], []
    for name, path in _modules().items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        for fn in _functions(ast.parse(text)):
            length = fn.end_lineno - fn.lineno + 1
            if length > MAX_FUNCTION_LINES:
                long_functions.append(f"{name}.{fn.name}: {length} lines")
    assert long_modules == [], f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
    assert long_functions == [], f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _strings(path: Path):
    """(line, text) of every string constant of a module that is not a docstring."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_every_neuronhelpers_variable_is_read_and_described_in_settings():
    """settings.py names each variable with its default; no other module names one to read it (they call settings;
    prose and a shell command shown to users may still mention one)."""
    import re

    from neuronhelpers.core import settings

    named = {}
    for name, path in _modules().items():
        for line, text in _strings(path):
            if re.fullmatch(r"NEURONHELPERS_[A-Z_]+", text):
                named.setdefault(text, set()).add(f"{name}:{line}")
    elsewhere = {var: sorted(w for w in where if not w.startswith("neuronhelpers.core.settings:"))
                 for var, where in named.items()}
    elsewhere = {var: where for var, where in elsewhere.items() if where}
    assert elsewhere == {}, f"read these through neuronhelpers.core.settings: {elsewhere}"
    assert set(named) == set(settings.VARIABLES), \
        f"described but never named, or the reverse: {set(named) ^ set(settings.VARIABLES)}"
    assert all(v.what for v in settings.VARIABLES.values())
    app = PACKAGE / "ui" / "app" / "explorer.ipynb"
    assert "NEURONHELPERS_" not in app.read_text(), "the app notebook should call settings, not read the variable"


# Vocabulary words that are also package or module names: these modules spell them as such (a distribution to look up,
# a module to import or preload, a folder a traceback passes through), never as a row's value.
PACKAGE_NAMES = {
    ("neuronhelpers.core.versions", "transformers"), ("neuronhelpers.process.forkserver", "transformers"),
    ("neuronhelpers.run.reference", "transformers"), ("neuronhelpers.recipes.render", "transformers"),
    ("neuronhelpers.verdict.causes", "transformers"), ("neuronhelpers.models.rankings", "diffusers"),
    ("neuronhelpers.core.quiet", "diffusers"), ("neuronhelpers.models.shelf", "transformers"),
    ("neuronhelpers.core.quiet", "transformers"),
}
# Vocabulary words that are also a column's name in the published dataset's layout (its cores are `tp`): spelled once,
# as a column name, in the schema's mapping table.
PACKAGE_NAMES |= {("neuronhelpers.store.schema", "tp")}
# The workshop's glossary defines the word "twin" (a term, not the untested stage).
PACKAGE_NAMES |= {("neuronhelpers.ui.workshop", "twin")}
# Words too common to police (a sub-command named run, a timings key named compile, a cause named timeout).
COMMON = {"run", "load", "compile", "reference", "timeout", "none"}


def test_the_vocabulary_is_spelled_only_in_vocab():
    """Stages, untested reasons, verifications, parallelism, libraries, tasks and results are constants in
    core/vocab.py; elsewhere code names the constant. run.py is the exception (self-contained): see the next test."""
    from neuronhelpers.core import vocab

    words = (set(vocab.STAGES) | set(vocab.UNTESTED_STAGES) | set(vocab.VERIFICATIONS) | set(vocab.PARALLELISMS)
             | set(vocab.LIBRARIES) | set(vocab.TASKS) | set(vocab.RESULTS)) - COMMON
    found = []
    for name, path in _modules().items():
        if name in ("neuronhelpers.core.vocab",) or name.startswith("neuronhelpers.recipes"):
            continue
        for line, text in _strings(path):
            if text in words and (name, text) not in PACKAGE_NAMES:
                found.append(f"{name}:{line}: {text!r}")
    assert found == [], "use the core/vocab.py constant: " + "; ".join(found)


@pytest.mark.parametrize("library", ["transformers", "sentence-transformers", "diffusers"])
def test_every_word_a_rendered_run_py_can_write_is_in_the_vocabulary(library):
    """run.py is self-contained, so its recipes spell stages as literals: each must be one the dataset accepts."""
    import re

    from neuronhelpers.core import vocab
    from neuronhelpers.recipes import render

    source = render.template_text(library)  # every part: the sharded launcher and each task's loading
    stages = set(re.findall(r"""\bstage = ["'](\w+)["']""", source))
    stages |= set(re.findall(r"""failed\(exc, ["'](\w+)["']""", source))
    assert stages, "the stage pattern no longer matches the recipes: update this test"
    assert stages <= set(vocab.STAGES) | set(vocab.UNTESTED_STAGES), stages - set(vocab.STAGES)


def test_the_top_level_names_resolve_and_shadow_no_subpackage():
    import subprocess
    import sys

    import neuronhelpers

    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert not set(neuronhelpers.EXPORTS) & subpackages, set(neuronhelpers.EXPORTS) & subpackages
    missing = [name for name in neuronhelpers.EXPORTS if getattr(neuronhelpers, name, None) is None]
    assert missing == [], f"top-level names that do not resolve: {missing}"
    for name in neuronhelpers.EXPORTS:  # each is named in the package docstring, the lessons' index
        assert name in neuronhelpers.__doc__, name
    # importing the package is light: a notebook's first cell does not pay for torch
    light = subprocess.run([sys.executable, "-c", "import sys, neuronhelpers; print('torch' in sys.modules)"],
                           capture_output=True, text=True, check=True)
    assert light.stdout.strip() == "False"


# Files a docstring or comment may name that are not this repository's: what a run writes, a checkpoint's own files,
# and the transformers sources a cause is traced to.
NAMED_ELSEWHERE = {"run.py", "reference_run.py", "requirements.txt", "TWIN.json", "model_index.json", "config.json",
                   "README.md", "modules.json", "PROVENANCE.json", "cache_utils.py", "file.py"}


def _documentation(path: Path) -> str:
    """A module's docstrings (module, classes, functions) and comments: where it names other modules and files."""
    source = path.read_text()
    nodes = [node for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    docs = [ast.get_docstring(node) or "" for node in nodes]
    return "\n".join(docs + [line for line in source.splitlines() if line.strip().startswith("#")])


def stale_names() -> list[str]:
    """Every module, attribute or file a package docstring or comment names that does not exist: a dotted
    ``neuronhelpers.x.y`` that resolves to no module (or no name in it), ``module.function`` with a module name the
    package no longer has, a ``file.py`` found nowhere in the repository."""
    import re

    modules = _modules()
    names = {name: set(re.findall(r"^(?:def|class) (\w+)|^(\w+) *[:=]", path.read_text(), re.M)) for name, path in
             modules.items()}
    names = {name: {a or b for a, b in found} for name, found in names.items()}
    defined = {n for found in names.values() for n in found}
    basenames = {name.split(".")[-1] for name in modules}
    files = {p.name for p in PACKAGE.parent.rglob("*") if p.is_file() and not {".git", ".venv"} & set(p.parts)}
    found = []
    for module, path in modules.items():
        text = _documentation(path)
        for dotted in re.findall(r"\bneuronhelpers(?:\.\w+)+", text):
            parts = dotted.split(".")
            k = max((k for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in modules), default=0)
            rest = parts[k:]
            if k == 0 or len(rest) > 1 or (rest and rest[0] not in names[".".join(parts[:k])]):
                found.append(f"{module}: {dotted}")
        for first, attr in re.findall(r"``?([a-z_]+)\.(\w+)", text):
            if first not in basenames and attr in defined and not attr.startswith("__"):
                found.append(f"{module}: {first}.{attr} (module {first} is not in the package)")
        named_files = re.findall(r"(?<![\w.])([\w-]+\.(?:py|csv|ipynb|sh|txt|json))\b", text)
        found += [f"{module}: {name}" for name in named_files if name not in files and name not in NAMED_ELSEWHERE]
    return sorted(set(found))


def test_every_module_and_file_a_docstring_names_exists():
    """Docstrings name modules and files by the names they have now (not runner.execute, not results.py)."""
    found = stale_names()
    assert found == [], "names in docstrings and comments that do not exist:\n" + "\n".join(found)


def module_aliases(root: Path = PACKAGE.parent) -> list[str]:
    """Every package module imported under another name, in the package, the tests, the benchmarks and the notebooks:
    a module keeps its own name (``parent_name`` only where two modules of one name meet in one file)."""
    import json
    import re

    modules = set(_modules())
    sources = [(p, p.read_text()) for folder in ("neuronhelpers", "tests", "bench", "scripts")
               for p in (root / folder).rglob("*.py")]
    sources += [(p, "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"]))
                for p in (root / "notebooks").glob("*.ipynb")]
    found = []
    for path, text in sources:
        for package, name, alias in re.findall(r"from (neuronhelpers[\w.]*) import (\w+) as (\w+)", text):
            if f"{package}.{name}" in modules and alias not in (name, f"{package.split('.')[-1]}_{name}"):
                found.append(f"{path.relative_to(root)}: {package}.{name} as {alias}")
    return found


def test_no_module_is_imported_under_a_name_it_does_not_have():
    found = module_aliases()
    assert found == [], "modules imported under another name:\n" + "\n".join(found)

