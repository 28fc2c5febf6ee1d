"""The twins package's shape: small modules and functions, leaves first with no import cycle (builders never import
the orchestrator), a light package import, one registry of builders by task, one quiet switch, one TWIN.json writer."""

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import neuronhelpers.twins
from neuronhelpers.twins import build

TWINS = Path(neuronhelpers.twins.__file__).parent
MODULES = sorted(TWINS.rglob("*.py"))
BUILDERS = ("text", "libraries", "vision.build", "vision.images", "vision.processors", "vision.tokens", "vision.probe",
            "shrink", "layers", "widths", "configs", "tokenizers", "specs", "overrides", "broken")


def _name(path: Path) -> str:
    parts = path.relative_to(TWINS.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """neuronhelpers.twins modules imported anywhere in the file (inside functions too)."""
    names = {_name(p) for p in MODULES}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in names else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {n for n in out if n in names} - {_name(path)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TWINS)))
def test_every_module_is_under_500_lines_and_every_function_at_most_60(path):
    source = path.read_text()
    assert len(source.splitlines()) < 500
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= 60, f"{node.name} has {node.end_lineno - node.lineno + 1} lines"


def test_no_import_cycle_and_no_builder_imports_the_orchestrator():
    graph = {_name(p): _imports(p) for p in MODULES}
    for builder in BUILDERS:
        assert "neuronhelpers.twins.build" not in graph[f"neuronhelpers.twins.{builder}"], builder
    done, active = set(), []

    def visit(module):
        assert module not in active, f"import cycle: {' -> '.join(active + [module])}"
        if module in done:
            return
        active.append(module)
        for target in graph[module]:
            visit(target)
        active.pop()
        done.add(module)

    for module in graph:
        visit(module)


def test_importing_the_package_imports_neither_torch_nor_transformers():
    code = ("import sys, neuronhelpers.twins, neuronhelpers.twins.build; "
            "print(sorted(m for m in ('torch', 'transformers', 'diffusers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(neuronhelpers.twins.__all__) <= set(dir(neuronhelpers.twins))


def test_every_task_has_a_writer_and_an_eager_check():
    tasks = {spec.task for spec in build.architectures()}
    assert tasks == set(build.WRITERS) == set(build.EAGER_CHECKS)


def test_quiet_libraries_silences_and_restores():
    from transformers.utils import logging as hf_logging

    from neuronhelpers.core.quiet import quiet_libraries

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    st_level = logging.getLogger("sentence_transformers").level
    with quiet_libraries():
        assert hf_logging.get_verbosity() == logging.ERROR and not hf_logging.is_progress_bar_enabled()
        assert logging.getLogger("sentence_transformers").level == logging.ERROR
        assert logging.getLogger("diffusers").level == logging.ERROR
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()) == (verbosity, bars)
    assert logging.getLogger("sentence_transformers").level == st_level


def test_one_way_to_be_quiet_and_one_writer_of_twin_json():
    sources = {p: p.read_text() for p in MODULES}
    writers = [p.name for p, s in sources.items() if '"TWIN.json").write' in s or "TWIN_RECORD).write" in s]
    assert writers == ["build.py"]
    assert not any("set_verbosity_error" in s or "disable_progress_bar" in s for s in sources.values())


def test_no_exception_is_swallowed_without_its_reason():
    """A broad handler records why (a debug log line, an error kept, or the exception raised again); a narrow one
    says in a comment what it expects. No handler is a bare ``pass``."""
    for path in MODULES:
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ExceptHandler):
                continue
            where = f"{path.name}:{node.lineno}"
            assert node.type is not None, f"{where}: a bare except"
            assert "#" in lines[node.lineno - 1] or isinstance(node.body[-1], ast.Raise), (
                f"{where}: no comment says why")
            assert not all(isinstance(stmt, ast.Pass) for stmt in node.body) or "#" in lines[node.lineno - 1], where
            if getattr(node.type, "id", None) == "Exception":
                body = ast.unparse(node)
                assert any(w in body for w in ("log.debug", "raise", "append", "return (first_line")), (
                    f"{where}: not recorded")


def test_a_refused_setting_is_logged_with_its_reason(caplog):
    from neuronhelpers.twins.configs import try_setattr

    class Config:
        @property
        def head_dim(self):
            return 16

    with caplog.at_level(logging.DEBUG, logger="neuronhelpers.twins"):
        assert try_setattr(Config(), "head_dim", 8) is False
    assert "Config.head_dim = 8 refused: AttributeError" in caplog.text
