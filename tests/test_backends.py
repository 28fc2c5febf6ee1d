"""Backend choice and version detection."""

import pytest

from neuronhelpers.core import versions
from neuronhelpers.core.backends import detect_backend, get_backend
from neuronhelpers.core.errors import UserError


def _rendered_parameters(backend_name: str) -> dict:
    """The parameters block of the run.py rendered for a twin on this backend, read back as run.py reads it."""
    import ast

    from neuronhelpers.models.resolve import ModelRef
    from neuronhelpers.recipes import render

    ref = ModelRef(model_id="tiny/llama", path="/nonexistent/tiny-llama", task="text-generation", model_type="llama")
    source = render.render_run_py(render.recipe_params(ref, get_backend(backend_name), cores=2, parallelism="tp"))
    params = next(node for node in ast.parse(source).body if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", "") == "PARAMS")
    return ast.literal_eval(params.value)


def test_a_neuron_run_py_uses_neuron_for_device_compiler_and_process_group():
    params = _rendered_parameters("neuron")
    assert (params["device"], params["compile_backend"], params["dist_backend"]) == ("neuron", "neuron", "neuron")


def test_cpu_and_cuda_run_py_compile_with_inductor_over_their_process_group_backends():
    assert [(p["device"], p["compile_backend"], p["dist_backend"])
            for p in map(_rendered_parameters, ("cpu", "cuda"))] \
        == [("cpu", "inductor", "gloo"), ("cuda", "inductor", "nccl")]


def test_the_neuron_compile_cache_is_torch_neuronx_own_folder(monkeypatch):
    """The cache a neuron run is pointed at is the variable and default folder torch-neuronx reads (DESIGN 2e)."""
    from neuronhelpers.run.compile_cache import cache_env

    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR", raising=False)
    assert cache_env(get_backend("neuron")) == {"TORCH_NEURONX_NEFF_CACHE_DIR": "/tmp/neff_cache"}


@pytest.mark.machine("cpu")
def test_a_cpu_machine_detects_cpu(monkeypatch):
    monkeypatch.delenv("NEURONHELPERS_BACKEND", raising=False)
    assert detect_backend() == "cpu"  # no neuron device, no GPU
    assert get_backend("auto").name == "cpu"
    assert versions.core_versions()["torch-neuronx"] is None


@pytest.mark.machine("cuda")
def test_a_gpu_machine_detects_cuda(monkeypatch):
    monkeypatch.delenv("NEURONHELPERS_BACKEND", raising=False)
    assert detect_backend() == "cuda" and get_backend("auto").compile_backend == "inductor"


@pytest.mark.machine("neuron")
def test_a_trn2_detects_neuron_and_its_compiler(monkeypatch):
    monkeypatch.delenv("NEURONHELPERS_BACKEND", raising=False)
    assert detect_backend() == "neuron"
    assert versions.core_versions()["torch-neuronx"] is not None
    compiler, version = versions.compiler_for(get_backend("auto"))
    assert compiler == "neuronx-cc" and version


def test_environment_can_force_a_backend(monkeypatch):
    monkeypatch.setenv("NEURONHELPERS_BACKEND", "neuron")
    assert detect_backend() == "neuron"


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(UserError, match="unknown backend 'tpu'"):
        get_backend("tpu")


def test_versions_name_the_compiler_and_every_package():
    import torch

    assert versions.compiler_for(get_backend("cpu")) == ("inductor", torch.__version__.split("+")[0])
    assert versions.compiler_for(get_backend("neuron"))[0] == "neuronx-cc"
    frozen = versions.installed_packages().splitlines()
    assert any(line.startswith("transformers==") for line in frozen)
    assert frozen == sorted(frozen, key=lambda line: line.split("==")[0].lower())


def test_the_neuron_sdk_release_comes_from_the_environment_or_torch_neuronx(monkeypatch):
    monkeypatch.setenv("NEURON_SDK_VERSION", "2.33.0")
    assert versions.neuron_sdk_release() == "2.33.0"
    monkeypatch.delenv("NEURON_SDK_VERSION")
    monkeypatch.setattr(versions, "distribution_version", lambda name: "2.14.3.0" if name == "torch-neuronx" else None)
    assert versions.neuron_sdk_release() == "2.33.0"  # TorchNeuron 2.14.3 ships with Neuron 2.33.0
    monkeypatch.setattr(versions, "distribution_version", lambda name: "2.14.3.1" if name == "torch-neuronx" else None)
    assert versions.neuron_sdk_release() == "2.34.0"  # a fourth-component release: 2.34's, not 2.33.0
    monkeypatch.setattr(versions, "distribution_version", lambda name: "2.14.3.2" if name == "torch-neuronx" else None)
    assert versions.neuron_sdk_release() is None  # a release not in the table is not guessed
    monkeypatch.setattr(versions, "distribution_version", lambda name: None)
    assert versions.neuron_sdk_release() is None
