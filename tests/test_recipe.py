"""run.py is rendered from the one template, is self-contained, and configures each backend as documented."""

import ast
import py_compile
import sys

import pytest

from neuronhelpers import recipe
from neuronhelpers.backends import get_backend
from neuronhelpers.models import ModelRef

TEXT = ModelRef("tiny/qwen3", "/twins/qwen3", "text-generation", "qwen3", twin_of="qwen3")
VLM = ModelRef("tiny/llava", "/twins/llava", "image-text-to-text", "llava", twin_of="llava")


def test_rendered_run_py_carries_the_models_parameters(tmp_path):
    params = recipe.recipe_params(TEXT, get_backend("cpu"))
    text = recipe.render_run_py(params)
    assert recipe.params_of_run_py(text) == params
    path = tmp_path / "run.py"
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)


def test_rendered_run_py_imports_only_stdlib_torch_and_transformers():
    text = recipe.render_run_py(recipe.recipe_params(VLM, get_backend("cpu")))
    modules = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    assert modules - set(sys.stdlib_module_names) == {"torch", "transformers"}


def test_neuron_backend_renders_neuron_device_compiler_and_bf16():
    params = recipe.recipe_params(TEXT, get_backend("neuron"))
    assert (params["device"], params["compile_backend"], params["dtype"]) == ("neuron", "neuron", "bfloat16")
    text = recipe.render_run_py(params)
    assert "'compile_backend': 'neuron'" in text
    # torch.neuron's allocator statistics are what the run reports as peak memory on Trainium.
    assert "torch.neuron.max_memory_allocated()" in text and "torch.neuron.synchronize()" in text


def test_recipe_protocol_static_cache_fullgraph_32_greedy_tokens():
    params = recipe.recipe_params(TEXT, get_backend("cpu"))
    assert params["max_new_tokens"] == 32
    text = recipe.render_run_py(params)
    for needle in ('cache_implementation="static"', "fullgraph=True", "dynamic=False", '"do_sample": False'):
        assert needle in text, needle


def test_remote_code_is_off_unless_asked():
    assert recipe.recipe_params(TEXT, get_backend("cpu"))["trust_remote_code"] is False
    assert recipe.recipe_params(TEXT, get_backend("cpu"), trust_remote_code=True)["trust_remote_code"] is True


def test_requirements_pin_the_installed_versions():
    import transformers

    cpu = recipe.render_requirements(get_backend("cpu"), "text-generation")
    assert f"transformers=={transformers.__version__}" in cpu.splitlines()
    assert any(line.startswith("torch==") and "+" not in line for line in cpu.splitlines())
    neuron = recipe.render_requirements(get_backend("neuron"), "image-text-to-text")
    # On Trainium torch comes with the Neuron SDK: it is named in a comment, not reinstalled.
    assert not any(line.startswith("torch") for line in neuron.splitlines())
    assert "torch-neuronx" in neuron.splitlines()[0] and neuron.splitlines()[0].startswith("#")
    assert any(line.startswith("pillow") for line in neuron.splitlines())


def test_parameters_block_is_required():
    with pytest.raises(ValueError, match="no parameters block"):
        recipe.params_of_run_py("print('hello')")
