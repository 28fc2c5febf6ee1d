"""run.py is rendered from the one template, is self-contained, and configures each backend as documented."""

import py_compile
import sys

import pytest

from conftest import imported_modules
from neuronhelpers.recipes import render
from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import ModelRef

TEXT = ModelRef("tiny/qwen3", "/twins/qwen3", "text-generation", "qwen3", twin_of="qwen3")
VLM = ModelRef("tiny/llava", "/twins/llava", "image-text-to-text", "llava", twin_of="llava")


def test_rendered_run_py_carries_the_models_parameters(tmp_path):
    params = render.recipe_params(TEXT, get_backend("cpu"))
    text = render.render_run_py(params)
    assert render.params_of_run_py(text) == params
    path = tmp_path / "run.py"
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)


def test_rendered_run_py_imports_only_stdlib_torch_transformers_and_pillow():
    """Self-contained: torch, transformers and pillow (the test image), and torch_neuronx, which a neuron rank imports
    before its process group (the Neuron SDK ships it; on other devices that line never runs)."""
    text = render.render_run_py(render.recipe_params(VLM, get_backend("cpu")))
    modules = imported_modules(text)
    assert modules - set(sys.stdlib_module_names) == {"torch", "transformers", "PIL", "torch_neuronx"}


def rendered_namespace(params: dict) -> dict:
    """The rendered run.py's functions, loaded as a module would be (not run as __main__)."""
    import runpy
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(render.render_run_py(params))
    return runpy.run_path(handle.name, run_name="rendered_run_py")


def test_neuron_backend_renders_neuron_device_compiler_and_bf16():
    params = render.recipe_params(TEXT, get_backend("neuron"))
    rendered = render.params_of_run_py(render.render_run_py(params))
    assert (rendered["device"], rendered["compile_backend"], rendered["dist_backend"], rendered["dtype"]) == (
        "neuron", "neuron", "neuron", "bfloat16")


def test_on_neuron_peak_memory_is_read_from_the_neuron_allocator_after_a_sync(monkeypatch):
    """What run.py does on Trainium, checked against a stand-in for torch.neuron that records the calls: rank r of a
    sharded run uses neuron:r, so its peak is read for that device (torch.neuron mirrors torch.cuda's API)."""
    import torch

    calls = []
    neuron = type("NeuronStandIn", (), {
        "synchronize": staticmethod(lambda device=None: calls.append(("synchronize", device))),
        "max_memory_allocated": staticmethod(lambda device=None: calls.append(("max", device)) or 123)})
    monkeypatch.setattr(torch, "neuron", neuron, raising=False)
    run_py = rendered_namespace(render.recipe_params(TEXT, get_backend("neuron")))
    assert run_py["peak_memory_bytes"]("neuron:1") == 123
    assert calls == [("synchronize", "neuron:1"), ("max", "neuron:1")]  # synchronised first: pending work counts


def test_the_device_run_generates_32_greedy_tokens_with_a_static_cache_under_fullgraph_compile(monkeypatch):
    """The recipe's protocol, observed on a real twin: what generate() was asked for, and what it returned."""
    import transformers

    from neuronhelpers.models.resolve import resolve_model

    seen = []
    real_generate = transformers.GenerationMixin.generate

    def recording_generate(self, *args, **kwargs):
        seen.append(kwargs)
        return real_generate(self, *args, **kwargs)

    monkeypatch.setattr(transformers.GenerationMixin, "generate", recording_generate)
    params = render.recipe_params(resolve_model("tiny/qwen3"), get_backend("cpu"))
    result = rendered_namespace(params)["device_run"](params)
    assert result["ok"], result.get("error")
    # cold and warm compiled, then the same call eagerly (disable_compile) for the speed-up, in the same process:
    # where the warm call is quick, three eager calls alternate with compiled ones
    rounds = 3 if result["timings"]["generate_s"] < 2.0 else 1
    assert len(result["tokens"]) == 32 and result["warm_equals_cold"]
    assert [kwargs.get("disable_compile", False) for kwargs in seen] == [False, False] + [True, False] * (rounds - 1) + [True]
    assert result["eager"]["device_eager"] == "ran" and result["eager"]["eager_equals_compiled"]
    for kwargs in seen:
        config = kwargs["compile_config"]
        assert kwargs["cache_implementation"] == "static"
        assert (config.fullgraph, config.dynamic, config.mode, config.backend) == (True, False, "default", "inductor")
        assert kwargs["do_sample"] is False and kwargs["max_new_tokens"] == kwargs["min_new_tokens"] == 32
    assert result["retraced"] is True  # a cold process traced the model


def test_run_py_reads_top_down_parameters_main_device_run_loading_reference_launcher_helpers():
    text = render.render_run_py(render.recipe_params(TEXT, get_backend("cpu")))
    order = [text.index(marker) for marker in ("PARAMS = {", "def main(", "def device_run(", "def load(",
                                               "def reference_run(", "def sharded_run(", "def emit(")]
    assert order == sorted(order)
    assert "render: drop" not in text and "from .scaffold" not in text


def test_remote_code_is_off_unless_asked():
    assert render.recipe_params(TEXT, get_backend("cpu"))["trust_remote_code"] is False
    assert render.recipe_params(TEXT, get_backend("cpu"), trust_remote_code=True)["trust_remote_code"] is True


def test_requirements_pin_the_installed_versions():
    import transformers

    cpu = render.render_requirements(get_backend("cpu"), "text-generation")
    assert f"transformers=={transformers.__version__}" in cpu.splitlines()
    assert any(line.startswith("torch==") and "+" not in line for line in cpu.splitlines())
    neuron = render.render_requirements(get_backend("neuron"), "image-text-to-text")
    # On Trainium torch comes with the Neuron SDK: it is named in a comment, not reinstalled.
    assert not any(line.startswith("torch") for line in neuron.splitlines())
    assert "torch-neuronx" in neuron.splitlines()[0] and neuron.splitlines()[0].startswith("#")
    assert any(line.startswith("pillow") for line in neuron.splitlines())


def test_parameters_block_is_required():
    with pytest.raises(ValueError, match="no parameters block"):
        render.params_of_run_py("print('hello')")
