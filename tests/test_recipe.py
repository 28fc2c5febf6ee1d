"""run.py is rendered from the one template, is self-contained, and configures each backend as documented."""

import py_compile
import sys

import pytest

from conftest import imported_modules
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.protocol import MAX_NEW_TOKENS
from neuronhelpers.models.resolve import ModelRef
from neuronhelpers.recipes import render

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
    """Self-contained: torch, transformers and pillow (the test image); a sharded file also torch_neuronx, which a
    neuron rank imports before its process group (the Neuron SDK ships it; on other devices that line never runs)."""
    one_core = render.render_run_py(render.recipe_params(VLM, get_backend("cpu")))
    assert imported_modules(one_core) - set(sys.stdlib_module_names) == {"torch", "transformers", "PIL"}
    sharded = render.render_run_py(render.recipe_params(VLM, get_backend("cpu"), cores=2, parallelism="tp"))
    assert imported_modules(sharded) - set(sys.stdlib_module_names) == {"torch", "transformers", "PIL", "torch_neuronx"}


# The line budgets a rendered run.py keeps (issue 55: none grows past what it was before its recipe became a program
# and a twin's run.py learned to build its twin), for a Hub model's file and a twin's alike.
BUDGETS = {"text-generation": 299, "sharded": 400, "image-text-to-text": 310, "feature-extraction": 215,
           "text-to-image": 400, "automatic-speech-recognition": 361}
BUDGETED = {"text-generation": "qwen3", "image-text-to-text": "llava", "feature-extraction": "bert",
            "text-to-image": "flux", "automatic-speech-recognition": "whisper"}


def test_a_one_core_run_py_holds_only_what_its_model_runs():
    """No launcher, no sharded loading, no other task's loading; the note says how to render the sharded file; the
    sharded text-generation file adds the launcher and its loading only. Each within its line budget on neuron, a
    twin's file (which names its twin and builds it) and a shelf copy's (which names its files and finds them) too."""
    neuron = get_backend("neuron")
    text = render.render_run_py(render.recipe_params(TEXT, neuron))
    for absent in ("def sharded_run(", "def rank_main(", "def sharding_kwargs(", "def test_image(", "def test_audio(",
                   "def load_image_text_to_text(", "render: ", "twin_folder"):
        assert absent not in text, absent
    assert "neuronhelpers render MODEL --cores N" in text
    sharded = render.render_run_py(render.recipe_params(TEXT, neuron, cores=2, parallelism="tp"))
    assert "def sharded_run(" in sharded and "def sharding_kwargs(" in sharded and "def test_image(" not in sharded
    for task, model_type in BUDGETED.items():
        for twin in (None, "0" * 64):
            ref = ModelRef(f"tiny/{model_type}", f"/twins/{model_type}", task, model_type, twin_digest=twin,
                           twin_built_by=twin and "neuronhelpers 0.2.0, torch 2.14.1, transformers 5.23.0")
            lines = len(render.render_run_py(render.recipe_params(ref, neuron)).splitlines())
            assert lines <= BUDGETS[task], (task, twin, lines)
            if task == "text-generation":
                lines = len(render.render_run_py(render.recipe_params(ref, neuron, cores=2, parallelism="tp"))
                            .splitlines())
                assert lines <= BUDGETS["sharded"], ("sharded", twin, lines)
        shelf = ModelRef("org/real", "/shelf/org--real", task, model_type, shelf_digest="0" * 64,
                         shelf_made_by="neuronhelpers checkpoints --install org/real (shelf: gguf Q4_K_M from a 1.0.0, "
                         "dequantized to float32)")
        lines = len(render.render_run_py(render.recipe_params(shelf, neuron)).splitlines())
        assert lines <= BUDGETS[task], (task, "shelf copy", lines)


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


def _memory_stand_in(name, calls, peak):
    """A stand-in for torch.accelerator or torch.neuron (same two calls as torch.cuda) that records its calls; ``peak``
    an exception class makes the read raise it, as a torch without that device does."""
    def max_memory_allocated(device=None):
        calls.append((name, "max", device))
        if isinstance(peak, type):
            raise peak(f"{name} keeps no statistics for {device}")
        return peak

    return type(f"{name}StandIn", (), {
        "synchronize": staticmethod(lambda device=None: calls.append((name, "synchronize", device))),
        "max_memory_allocated": staticmethod(max_memory_allocated)})


def test_on_neuron_peak_memory_is_read_through_torch_accelerator_first(monkeypatch):
    """Neuron 2.34's torch.accelerator memory functions work on Neuron: one code path for cuda and neuron. Rank r of a
    sharded run reads neuron:r, synchronised first (pending work counts); torch.neuron is not asked."""
    import torch

    calls = []
    monkeypatch.setattr(torch, "accelerator", _memory_stand_in("accelerator", calls, 456))
    monkeypatch.setattr(torch, "neuron", _memory_stand_in("neuron", calls, 123), raising=False)
    run_py = rendered_namespace(render.recipe_params(TEXT, get_backend("neuron")))
    assert run_py["peak_memory_bytes"]("neuron:1") == 456
    assert calls == [("accelerator", "synchronize", "neuron:1"), ("accelerator", "max", "neuron:1")]


@pytest.mark.parametrize("accelerator_peak", [RuntimeError, 0], ids=["refuses the device", "keeps no statistics"])
def test_on_torch_neuronx_2_33_peak_memory_falls_back_to_torch_neuron(monkeypatch, accelerator_peak):
    """The old call is kept: where torch.accelerator refuses the neuron device (as CPU torch does here) or answers 0
    (a source without statistics: a device that ran a model never peaks at 0), torch.neuron's allocator is read."""
    import torch

    calls = []
    monkeypatch.setattr(torch, "accelerator", _memory_stand_in("accelerator", calls, accelerator_peak))
    monkeypatch.setattr(torch, "neuron", _memory_stand_in("neuron", calls, 123), raising=False)
    run_py = rendered_namespace(render.recipe_params(TEXT, get_backend("neuron")))
    assert run_py["peak_memory_bytes"]("neuron:1") == 123
    assert calls[-2:] == [("neuron", "synchronize", "neuron:1"), ("neuron", "max", "neuron:1")]


def test_a_device_without_memory_statistics_has_no_peak_not_the_hosts(monkeypatch):
    """With neither source answering, the peak is unknown (None): the host's resident memory is not device memory.
    On the CPU it is the figure."""
    import torch

    calls = []
    monkeypatch.setattr(torch, "accelerator", _memory_stand_in("accelerator", calls, 0))
    monkeypatch.setattr(torch, "neuron", _memory_stand_in("neuron", calls, NotImplementedError), raising=False)
    run_py = rendered_namespace(render.recipe_params(TEXT, get_backend("neuron")))
    assert run_py["peak_memory_bytes"]("neuron:0") is None
    assert run_py["peak_memory_bytes"]("cpu") > 0 and ("accelerator", "max", "cpu") not in calls


@pytest.mark.slow
def test_the_device_run_generates_32_greedy_tokens_with_a_static_cache_under_fullgraph_compile(monkeypatch, tmp_path):
    """The recipe's protocol with the measuring around it, observed on a real twin: what generate() was asked for
    (cold and warm compiled, then the eager comparison's calls), and what it returned."""
    import transformers

    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.run import measure

    seen = []
    real_generate = transformers.GenerationMixin.generate

    def recording_generate(self, *args, **kwargs):
        seen.append(kwargs)
        return real_generate(self, *args, **kwargs)

    monkeypatch.setattr(transformers.GenerationMixin, "generate", recording_generate)
    params = render.recipe_params(resolve_model("tiny/qwen3"), get_backend("cpu"))
    (tmp_path / "run.py").write_text(render.render_run_py(params))
    run_py = measure.load_run_py(str(tmp_path / "run.py"))
    assert params["model_path"] == "tiny/qwen3" and run_py.PARAMS["model_path"] != params["model_path"]  # its folder
    params = run_py.PARAMS
    measure.instrument(run_py, params, sharded=False)
    result = run_py.device_run(params)
    assert result["ok"], result.get("error")
    # cold and warm compiled, then the same call eagerly (disable_compile) for the speed-up, in the same process:
    # where the warm call is quick, eager calls alternate with compiled ones
    rounds = measure.TIMING_ROUNDS if result["timings"]["generate_s"] < measure.QUICK_CALL_S else 1
    assert len(result["tokens"]) == params["max_new_tokens"] and result["warm_equals_cold"]
    eager_after_warm = [True, False] * (rounds - 1) + [True]
    # and last, once more eagerly with the decoder's middle block perturbed: can the check fail?
    assert [kwargs.get("disable_compile", False) for kwargs in seen] == [False, False] + eager_after_warm + [True]
    assert result["perturbed"]["layer"] == "model.layers.1" and len(result["perturbed"]["tokens"]) == MAX_NEW_TOKENS
    assert result["eager"]["device_eager"] == "ran" and result["eager"]["eager_equals_compiled"]
    for kwargs in seen:
        config = kwargs["compile_config"]
        assert kwargs["cache_implementation"] == "static"
        assert (config.fullgraph, config.dynamic, config.mode, config.backend) == (True, False, "default", "inductor")
        assert kwargs["do_sample"] is False and kwargs["max_new_tokens"] == kwargs["min_new_tokens"] == MAX_NEW_TOKENS
    assert result["retraced"] is True  # a cold process traced the model
    timings = result["timings"]
    assert timings["compile_s"] == pytest.approx(timings["first_call_s"] - timings["generate_s"])  # cold minus warm


@pytest.mark.slow
def test_run_py_alone_prints_the_text_then_one_json_line_with_the_recipes_figures_only(tmp_path):
    """`python3 run.py` as a user runs it: the recipe's own result (tokens, timings, peak memory), the text printed
    before the JSON line, none of the measuring's figures."""
    import json
    import subprocess

    from neuronhelpers.models.resolve import resolve_model

    params = render.recipe_params(resolve_model("tiny/llama"), get_backend("cpu"))
    (tmp_path / "run.py").write_text(render.render_run_py(params))
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    result = json.loads(lines[-1])
    assert proc.returncode == 0 and result["ok"], result.get("error")
    assert result["text"] in proc.stdout[: proc.stdout.rindex(lines[-1])]  # printed for a person first
    assert len(result["tokens"]) == MAX_NEW_TOKENS and result["peak_memory_bytes"] > 0
    assert set(result["timings"]) == {"load_s", "first_call_s", "generate_s", "compile_s"}
    assert not {"dynamo", "eager", "recompile_reasons", "compile_cache"} & set(result)


def test_run_py_reads_top_down_parameters_main_device_run_loading_reference_launcher_helpers():
    text = render.render_run_py(render.recipe_params(TEXT, get_backend("cpu"), cores=2, parallelism="tp"))
    order = [text.index(marker) for marker in ("PARAMS = {", "def main(", "def pin_neuron_contract(", "def device_run(",
                                               "def load(", "def reference_run(", "def sharded_run(", "def emit(")]
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


def test_run_py_carries_the_process_helpers_exactly_as_core_holds_them():
    """The parent-death signal, the out-of-memory words and the visible-cores parser have one source (core/processes);
    the scaffold run.py carries is a copy of it, character for character."""
    import inspect

    from neuronhelpers.core import processes
    from neuronhelpers.recipes import scaffold

    for name in ("die_with_parent", "parse_visible_cores"):
        assert inspect.getsource(getattr(scaffold, name)) == inspect.getsource(getattr(processes, name)), name
    assert scaffold.MEMORY_WORDS == processes.MEMORY_WORDS


def test_run_pys_parameters_are_declared_once_and_every_one_the_recipes_read_is_declared():
    """core/parameters.py is the one declaration: every PARAMS key a recipe reads is in it, a rendered run.py holds
    exactly the declared parameters of its library and task in the declared order, and an undeclared name or a value
    of another type is refused in one line before anything is rendered."""
    import re
    from importlib import resources

    from neuronhelpers.core.parameters import BY_NAME, PARAMETERS, local_parameters

    read = set()
    for name in [*render.RECIPE_FILES.values(), render.SCAFFOLD_FILE]:
        text = resources.files("neuronhelpers.recipes").joinpath(name).read_text()
        read |= set(re.findall(r"params(?:\[|\.get\()\"(\w+)\"", text))
    assert read and read <= set(BY_NAME), read - set(BY_NAME)
    for task in ("text-generation", "feature-extraction", "text-to-image", "automatic-speech-recognition"):
        params = render.recipe_params(ModelRef("org/m", "org/m", task, None), get_backend("cpu"))
        assert list(params) == [p.name for p in PARAMETERS if p.name in params]  # the declared order
        assert render.params_of_run_py(render.render_run_py(params)) == params
    with pytest.raises(ValueError, match="run.py has no parameter colour"):
        render.render_run_py({**params, "colour": "blue"})
    with pytest.raises(ValueError, match="run.py's parameter cores is '2', not int"):
        render.render_run_py({**params, "cores": "2"})
    assert local_parameters("/tmp/twin", "text-to-image", steps=2)["steps"] == 2
    with pytest.raises(ValueError, match="no parameter step"):
        local_parameters("/tmp/twin", "text-to-image", step=2)
