"""The reference cache: a CPU reference is reused only for the same checkpoint files, dtype, prompt and versions."""

import os

import pytest

from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.recipes import render
from neuronhelpers.run import reference
from neuronhelpers.run.harness import run_model
from neuronhelpers.twins import build


def test_the_key_follows_the_checkpoint_and_the_parameters(tmp_path):
    path = build.broken_twin("llama", tmp_path / "llama", "perturbed")  # a private copy we may touch
    params = render.recipe_params(resolve_model(str(path)), get_backend("cpu"))
    key = reference.reference_key(params)
    assert key == reference.reference_key(dict(params))
    assert key != reference.reference_key({**params, "dtype": "bfloat16"})
    assert key != reference.reference_key({**params, "prompt": "Another prompt."})
    # the compiler does not enter the key: a new compiler release reuses the reference
    assert key == reference.reference_key({**params, "backend": "neuron", "compile_backend": "neuron"})
    weights = path / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert key != reference.reference_key(params)
    assert reference.reference_key({**params, "model_path": "not-a-folder-or-cached-hub-id"}) is None


@pytest.mark.slow
def test_a_second_run_reuses_the_reference(tmp_path, monkeypatch, isolated_home):
    from neuronhelpers.run.compile_cache import cache_dir

    warm = cache_dir(get_backend("cpu"))  # the session's compile cache, to keep this quick
    monkeypatch.setenv("NEURONHELPERS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(warm))
    first = run_model("tiny/qwen2")
    second = run_model("tiny/qwen2")
    assert (first["reference_cached"], second["reference_cached"]) == (False, True)
    assert first["reference_tokens"] == second["reference_tokens"] and second["result"] == "PASS"
    assert len(list((tmp_path / "home" / "reference-cache").glob("*.json"))) == 1
