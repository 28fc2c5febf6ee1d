"""Bad input: each gets a one-line error that names it and says what to do, a non-zero exit, no traceback."""

import json
import shutil

import pytest

from conftest import run_cli
from neuronhelpers.core.errors import UserError
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.twins import build


@pytest.mark.slow
def test_twin_resolves_to_a_labelled_ref():
    ref = resolve_model("tiny/qwen3")
    assert (ref.model_id, ref.task, ref.twin_of, ref.is_twin) == ("tiny/qwen3", "text-generation", "qwen3", True)
    assert resolve_model("tiny/llava").task == "image-text-to-text"


@pytest.mark.slow
def test_local_folder_resolves_with_task_from_its_model_type():
    ref = resolve_model(str(build.build_twin("gemma3")))
    assert (ref.task, ref.model_type, ref.twin_of) == ("image-text-to-text", "gemma3", None)


@pytest.mark.slow
def test_a_relative_folder_resolves_to_the_absolute_path_that_run_py_loads(twin_copy, monkeypatch):
    """run.py runs in another working directory: the path it loads must be the one the row names."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.recipes import render

    monkeypatch.chdir(twin_copy.parent)
    ref = resolve_model("ckpt")
    assert ref.model_id == ref.path == str(twin_copy.resolve())
    params = render.params_of_run_py(render.render_run_py(render.recipe_params(ref, get_backend("cpu"))))
    assert params["model_path"] == params["model_id"] == str(twin_copy.resolve())


@pytest.mark.slow
def test_cli_run_of_a_relative_folder_passes_without_reaching_for_the_hub(twin_copy):
    """`neuronhelpers run ckpt` from the folder's parent, offline: the same PASS as the absolute path, quickly
    (before the fix: FAIL at load after ~48 s of retrying the Hub with 'ckpt' as a repo id)."""
    import subprocess
    import sys
    import time

    from conftest import ROOT

    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "neuronhelpers", "run", "ckpt", "--json"], cwd=twin_copy.parent,
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    row = json.loads(proc.stdout)
    assert (row["result"], row["verification"]) == ("PASS", "exact"), row["error"]
    assert row["model_id"] == str(twin_copy.resolve())
    assert f"'model_path': '{twin_copy.resolve()}'" in row["run_py"]
    assert time.monotonic() - start < 120


def test_unknown_model_id_format():
    with pytest.raises(UserError, match="unknown model 'not a model'"):
        resolve_model("not a model")


def test_hub_id_not_cached_offline_says_what_to_do():
    with pytest.raises(UserError, match="not in the local Hugging Face cache.*hf download nobody/nothing"):
        resolve_model("nobody/nothing")


def test_folder_without_config(tmp_path):
    with pytest.raises(UserError, match="has no config.json"):
        resolve_model(str(tmp_path))


@pytest.fixture
def twin_copy(tmp_path):
    dest = tmp_path / "ckpt"
    shutil.copytree(build.build_twin("llama"), dest)
    return dest


def test_checkpoint_without_tokenizer(twin_copy):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (twin_copy / name).unlink(missing_ok=True)
    with pytest.raises(UserError, match="has no tokenizer.*tokenizer.save_pretrained"):
        resolve_model(str(twin_copy))


def test_model_needing_remote_code_is_refused_unless_trusted(twin_copy):
    config = json.loads((twin_copy / "config.json").read_text())
    config.update(model_type="my_secret_arch", auto_map={"AutoConfig": "modeling.MyConfig"})
    (twin_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="needs trust_remote_code.*--trust-remote-code"):
        resolve_model(str(twin_copy))
    assert resolve_model(str(twin_copy), trust_remote_code=True).model_type == "my_secret_arch"


def test_unknown_architecture_without_remote_code(twin_copy):
    config = json.loads((twin_copy / "config.json").read_text())
    config["model_type"] = "llama99"
    (twin_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="model_type 'llama99'.*upgrade transformers"):
        resolve_model(str(twin_copy))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny/nope", "nobody/nothing", "??"])
def test_cli_bad_model_is_one_line_exit_2_no_traceback(model):
    proc = run_cli("run", model)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuronhelpers: error:") and model in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_cli_verbose_shows_the_traceback():
    proc = run_cli("--verbose", "run", "tiny/nope")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
