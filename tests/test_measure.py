"""The recipe and the measuring are apart: run.py holds the recipe alone, the measuring (run/measure.py) wraps the
file's own functions, and the two are versioned apart (a measuring change leaves run.py byte-identical and the rows
it made still contributable)."""

import ast
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import result_row
from neuronhelpers.core import versions, vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import ModelRef
from neuronhelpers.recipes import render
from neuronhelpers.run import measure
from neuronhelpers.store import publish

PACKAGE = Path(__file__).resolve().parents[1] / "neuronhelpers"
MEASURING_FILE = PACKAGE / "run" / "measure.py"
# The measuring is measure.py and the two modules whose code it runs: its instruments and the perturbation (which the
# twin builder also uses to choose a twin's weights).
MEASURING_FILES = (MEASURING_FILE, PACKAGE / "run" / "instruments.py", PACKAGE / "verdict" / "perturb.py")

# The digest of run/measure.py for each MEASURING_VERSION. Changed the measuring? Bump
# core/versions.MEASURING_VERSION and add its digest here (the failing test prints it).
# 0.3.1: speech recognition's tokens are counted by run.py's own new_tokens; 0.3.2: a pipeline's step clock is on its
# final stage's main denoiser and image decoder (vae, movq, vqgan, or none in pixel space); 0.4.0: the perturbed run
# (check_sensitive), the instruments in their own module, and the digest covers all of MEASURING_FILES; 0.4.1:
# generate() perturbs its decoder's middle block (15 twins whose largest stack was a vision tower, a codec or an image
# decoder); 0.4.2: the perturbation moved to verdict/perturb.py (the twin builder uses it too), measuring as 0.4.1;
# 0.4.3: a failed perturbed run says why in core.errors.first_line's words, measuring as 0.4.1 (no row carries it yet);
# 0.5.0: the measuring reads and wraps the recipe module's declared names directly (no proxy), and a remedy is a
# PARAMS entry the recipe reads (issue 55's re-sweep); 0.5.1: the compiled graphs' symbolic inputs and data-dependent
# values (symbolic_shapes, read from dynamo's graph code) and the prompt's length, for a remedy's trn2 word (issue 56);
# 0.5.2: sentence-transformers and diffusers measure eagerly after the compiled calls (versions.MEASURING_SINCE);
# 0.5.3: a model with no stack of blocks is not measured rather than a raise before compiling (rows of 0.5.2 stand)
DIGESTS = {"0.3.0": "aca5d48f4036e481d274138a913c3732b0effba8fa54762ac5ff8fba9f577985",
           "0.3.1": "7248584d1c007ce4e0425bfcdc95a3aa873dc7e238b2242d5a94ce5b4fac7308",
           "0.3.2": "4ac00c65101749215cef908ffaadb46c34049f99c3f3e5154b8b5319814e80bd",
           "0.4.0": "88c2b0fe9122c95725d0f46b53ad01674124781658b3c55528c86e9c5700c437",
           "0.4.1": "127242b968a67cde5d80f030748a19b3b894e82dfbb9496ec3e67c7b6bfa919a",
           "0.4.2": "200e7f290d167e315f3b7f965722b50ac87651f7fb2b644fc6bb42dc8256d5b8",
           "0.4.3": "f4472b54006f914d67ff2250cff2cdaed66ee10d5b471cc5803a2b24bde5bea0",
           "0.4.4": "a980d829de0fd791ec65df460b807d952f0d5acc097c4787e35b8fe590dbc532",
           "0.4.5": "259794cfe8be90090f1551ea602c09f8e8f0af225d69858ce7253afbec7781ce",
           "0.5.0": "b8b8a35ebfdfc5cb177879416b274e08499b8fc0be21174559e7e8c3524ae86a",
           "0.5.1": "0a6a50123b89c80a12aaef30fc17cf74127319430edad38e5a0c8b0103f7736e",
           "0.5.2": "506d10e3f1ca160b61d8250882a70c274b24baf503f0327d2ca43cf985bfe9e7",
           "0.5.3": "5745de940dd1c70580197594822e65ab9e70013ae6765e75dff7ebe21c13aac0"}

MODELS = [ModelRef("tiny/llama", "/twins/llama", "text-generation", "llama"),
          ModelRef("tiny/llava", "/twins/llava", "image-text-to-text", "llava"),
          ModelRef("tiny/st-bert", "/twins/st-bert", "feature-extraction", "bert"),
          ModelRef("tiny/t2i-stable-diffusion", "/twins/t2i-stable-diffusion", "text-to-image",
                   "stable-diffusion")]


def measuring_digest(measure_py: Path = MEASURING_FILE) -> str:
    """One digest over the measuring's files (``measure_py`` standing for run/measure.py)."""
    files = (measure_py, *MEASURING_FILES[1:])
    return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()


def test_the_measuring_version_changes_with_the_measuring():
    digest = measuring_digest()
    assert DIGESTS.get(versions.MEASURING_VERSION) == digest, (
        f"the measuring (run/measure.py, instruments.py, verdict/perturb.py) changed: bump "
        f"core/versions.MEASURING_VERSION (now {versions.MEASURING_VERSION}) and record "
        f"DIGESTS['<new version>'] = '{digest}' in tests/test_measure.py")


@pytest.mark.parametrize("backend", ["cpu", "neuron"])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.task)
def test_run_py_imports_nothing_of_neuronhelpers(model, backend):
    """Not at the top, not in a function, not under a try: the recipe is the whole of run.py."""
    text = render.render_run_py(render.recipe_params(model, get_backend(backend)))
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert not [name for name in imported if name.startswith(("neuronhelpers", "."))], imported
    assert "neuronhelpers.run.measure" not in text and "TokenClock" not in text and "--eager" not in text


def test_a_measuring_change_leaves_run_py_byte_identical_and_its_rows_contributable(tmp_path):
    """A copy of the package whose measuring takes five timing rounds (and a new version) renders the same bytes; a
    row made by an older measuring is still accepted by contribute's check."""
    copy = tmp_path / "neuronhelpers"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    changed = copy / "run" / "measure.py"
    text = changed.read_text()
    assert f"TIMING_ROUNDS = {measure.TIMING_ROUNDS}" in text
    changed.write_text(text.replace(f"TIMING_ROUNDS = {measure.TIMING_ROUNDS}", "TIMING_ROUNDS = 5"))
    (copy / "core" / "versions.py").write_text((copy / "core" / "versions.py").read_text().replace(
        f'MEASURING_VERSION = "{versions.MEASURING_VERSION}"', 'MEASURING_VERSION = "99.0"'))
    script = ("import sys; from neuronhelpers.recipes import render; from neuronhelpers.run import measure; "
              "from neuronhelpers.core.backends import get_backend; from neuronhelpers.models.resolve import ModelRef; "
              "from neuronhelpers.core.versions import MEASURING_VERSION; assert measure.TIMING_ROUNDS == 5; "
              "assert MEASURING_VERSION == '99.0', MEASURING_VERSION; "
              "ref = ModelRef('tiny/llama', '/twins/llama', 'text-generation', 'llama'); "
              "sys.stdout.write(render.render_run_py(render.recipe_params(ref, get_backend('cpu'))))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert measuring_digest(changed) != measuring_digest()  # the measuring did change
    today = render.render_run_py(render.recipe_params(MODELS[0], get_backend("cpu")))
    assert proc.stdout == today  # byte for byte
    older = result_row("tiny/llama", run_py=today, harness_version="0.2.0")
    assert publish.validate_contribution([older])[0]["harness_version"] == "0.2.0"


def test_a_change_to_one_librarys_measuring_stales_that_librarys_rows_alone():
    """0.5.2 changed the measuring of sentence-transformers and diffusers only (their eager calls moved after the
    compiled ones): a transformers row of 0.5.1 is still what today's measuring makes, and `sweep --stale` keeps it; a
    diffusers or sentence-transformers row of 0.5.1 is run again; no row older than its library's last change, and
    none newer than today's measuring or not a version at all, is today's."""
    since = versions.MEASURING_SINCE
    assert set(since) == set(vocab.LIBRARY_FOR_TASK.values())  # every library says when its measuring last changed
    assert (since["transformers"], since["diffusers"], since["sentence-transformers"]) == ("0.5.1", "0.5.2", "0.5.2")
    today = render.render_run_py(render.recipe_params(MODELS[0], get_backend("cpu")))
    assert publish.made_by_todays_recipe(result_row("tiny/llama", run_py=today, harness_version="0.5.1"))
    assert not publish.made_by_todays_recipe(result_row("tiny/llama", run_py=today, harness_version="0.5.0"))
    for library in ("diffusers", "sentence-transformers"):
        assert not versions.measuring_is_todays("0.5.1", library)
        assert versions.measuring_is_todays(versions.MEASURING_VERSION, library)
    for version in ("99.0", "not-a-version", None):
        assert not versions.measuring_is_todays(version, "transformers")


def test_a_tampered_recipe_is_still_refused_whatever_the_measuring():
    today = render.render_run_py(render.recipe_params(MODELS[0], get_backend("cpu")))
    tampered = result_row("tiny/llama", run_py=today.replace('"fullgraph": True', '"fullgraph": False'))
    with pytest.raises(Exception, match="differs from the recipe"):
        publish.validate_contribution([tampered])


def test_the_measuring_wraps_the_files_own_functions(tmp_path):
    """instrument() replaces the recipe's call and device run in the loaded module, nothing else: the recipe's
    loader and its reference stay the file's own."""
    params = render.recipe_params(MODELS[0], get_backend("cpu"))
    path = tmp_path / "run.py"
    path.write_text(render.render_run_py(params))
    module = measure.load_run_py(str(path))
    own = {name: getattr(module, name) for name in ("load", "reference_run", "generate", "device_run")}
    measure.instrument(module, params, sharded=False)
    assert module.load is own["load"] and module.reference_run is own["reference_run"]
    assert module.generate is not own["generate"] and module.device_run is not own["device_run"]


def _names_the_measuring_uses() -> set[str]:
    """Every attribute the measuring reads or sets on a run.py (``module.X``, ``self.module.X``), and the recipe
    calls it wraps by name (``call = "generate"``), from its source."""
    tree = ast.parse(Path(measure.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
                isinstance(node.value, ast.Name) and node.value.id == "module"
                or isinstance(node.value, ast.Attribute) and node.value.attr == "module"):
            names.add(node.attr)
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["call"]:
            names.add(node.value.value)
    return names - {"module", ""}


RENDERED = [(model, backend, cores) for model in MODELS for backend in ("cpu", "neuron")
            for cores in ((1, 2) if model.task in ("text-generation", "image-text-to-text") else (1,))]


@pytest.mark.parametrize("model, backend, cores", RENDERED,
                         ids=[f"{m.model_id}-{b}-{c}" for m, b, c in RENDERED])
def test_every_rendered_run_py_defines_what_it_declares_to_the_measuring(tmp_path, model, backend, cores):
    """Each recipe lists the names the measuring may use (MEASURED, in the recipe); every rendered file defines each
    of them, and the measuring uses no other (a rename on one side fails here, not in a run)."""
    params = render.recipe_params(model, get_backend(backend), cores=cores,
                                  parallelism="tp" if cores > 1 else "none")
    path = tmp_path / "run.py"
    path.write_text(render.render_run_py(params))
    module = measure.load_run_py(str(path))
    assert [name for name in module.MEASURED if not hasattr(module, name)] == ([] if cores > 1 else ["rank_main"])
    declared_somewhere = set()
    for other in MODELS:  # every recipe's list, sharded where it can be
        shards = other.task in ("text-generation", "image-text-to-text")
        text = render.render_run_py(render.recipe_params(other, get_backend("cpu"), cores=2 if shards else 1,
                                                         parallelism="tp" if shards else "none"))
        (tmp_path / "other.py").write_text(text)
        declared_somewhere |= set(measure.load_run_py(str(tmp_path / "other.py")).MEASURED)
    assert _names_the_measuring_uses() <= declared_somewhere, _names_the_measuring_uses() - declared_somewhere


def test_a_run_py_that_breaks_its_declaration_is_refused_in_one_line(tmp_path):
    path = tmp_path / "run.py"
    text = render.render_run_py(render.recipe_params(MODELS[0], get_backend("cpu")))
    path.write_text(text.replace("def generate(model,", "def generate_renamed(model,"))
    with pytest.raises(RuntimeError, match=r"declares generate in MEASURED but defines no such name: render it again"):
        measure.load_run_py(str(path))
    path.write_text(text.replace("MEASURED = (", "UNDECLARED = ("))
    with pytest.raises(RuntimeError, match="declares no MEASURED names: .*render it again"):
        measure.load_run_py(str(path))
