"""The Trainium path held to the platform's documented contract (docs/design.md, section 4), tested without the device.

Each test quotes the rule it holds us to and checks what OUR code does about it: the environment each rank gets,
what a launching process imports, what run.py pins, how the planner and harness treat the cores an instance has.
Nothing here pretends to be torch-neuronx: where a rule can only be checked on Trainium (that the runtime accepts
the environment we give it), the test says so and checks our side of it. Cache sync has its own tests
(tests/test_cache.py).
"""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import ModelRef
from neuronhelpers.recipes import render


def _rendered(tmp_path: Path, backend="neuron", task="text-generation", cores=2, parallelism="tp") -> Path:
    ref = ModelRef(model_id="tiny/llama", path="/nonexistent/tiny-llama", task=task, model_type="llama")
    params = render.recipe_params(ref, get_backend(backend), cores=cores, parallelism=parallelism)
    path = tmp_path / f"run_{backend}.py"
    path.write_text(render.render_run_py(params))
    return path


def _namespace(path: Path) -> dict:
    """The rendered run.py's functions, loaded without running main (run.py guards main with __name__)."""
    import runpy

    return runpy.run_path(str(path), run_name="not_main")


@pytest.mark.parametrize("inherited, expected", [
    ("4-7", ["4", "5"]),        # a local sweep's slot: a range
    ("0,1,2,3", ["0", "1"]),    # a Ray task: Ray sets a list
    ("6,2", ["6", "2"]),        # a list in any order: the rank-th core given
    (None, ["0", "1"]),         # a plain `python3 run.py`: core = local rank
])
def test_each_rank_of_a_sharded_neuron_run_gets_exactly_its_own_core(tmp_path, inherited, expected):
    """torch-neuronx's process group sets NEURON_RT_VISIBLE_CORES = str(local_rank) "only if user hasn't set it" and
    asserts "Attempted to have more than one device per process in distributed setup": a rank must never inherit the
    job's whole range. Its device index is the local rank (the process group calls
    _set_local_device_start_index(local_rank)), so LOCAL_RANK is the rank and run.py places the rank on
    neuron:<rank>."""
    ns = _namespace(_rendered(tmp_path))
    inherited_env = {} if inherited is None else {"NEURON_RT_VISIBLE_CORES": inherited}
    envs = [ns["rank_environment"](rank, 2, 29500, "neuron", inherited_env) for rank in range(2)]
    assert [env["NEURON_RT_VISIBLE_CORES"] for env in envs] == expected
    assert [env["LOCAL_RANK"] for env in envs] == ["0", "1"] and {env["LOCAL_WORLD_SIZE"] for env in envs} == {"2"}
    source = _rendered(tmp_path).read_text()
    assert "f\"{params['device']}:{rank}\"" in source  # device index = local rank, the rule the process group sets


def test_a_slot_with_fewer_cores_than_ranks_is_refused_before_the_process_group(tmp_path):
    ns = _namespace(_rendered(tmp_path))
    with pytest.raises(RuntimeError, match="2 ranks need 2 NeuronCores"):
        ns["rank_environment"](1, 2, 29500, "neuron", {"NEURON_RT_VISIBLE_CORES": "3"})


def test_cpu_and_cuda_ranks_keep_their_visibility_untouched(tmp_path):
    ns = _namespace(_rendered(tmp_path, backend="cpu"))
    env = ns["rank_environment"](1, 2, 29500, "cpu", {"NEURON_RT_VISIBLE_CORES": "4-7"})
    assert "NEURON_RT_VISIBLE_CORES" not in env and env["RANK"] == "1"


def test_the_visible_cores_parser_reads_both_forms_and_the_sweep_writes_one_it_reads(tmp_path):
    from neuronhelpers.recipes.scaffold import parse_visible_cores
    from neuronhelpers.sweep.local import neuron_slots

    assert parse_visible_cores("4-7") == [4, 5, 6, 7] and parse_visible_cores("0,1,2,3") == [0, 1, 2, 3]
    assert parse_visible_cores("0-1,6") == [0, 1, 6] and parse_visible_cores("") is None
    slots = neuron_slots(4, total_cores=64)  # a trn2.48xlarge at LNC=2
    assert [parse_visible_cores(s) for s in slots] == [list(range(i * 16, (i + 1) * 16)) for i in range(4)]


def test_a_rank_imports_torch_neuronx_before_it_joins_the_process_group(tmp_path):
    """The distributed guide starts with `import torch_neuronx  # Registers the Neuron device and distributed
    backend.`, before init_process_group(backend="neuron"). Checked in run.py's source (no device here)."""
    tree = ast.parse(_rendered(tmp_path).read_text())
    rank_main = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "rank_main")
    lines = {}
    for node in ast.walk(rank_main):
        if isinstance(node, ast.Import) and any(a.name == "torch_neuronx" for a in node.names):
            lines["import"] = node.lineno
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "init_process_group":
            lines["init"] = node.lineno
    assert lines["import"] < lines["init"]


def test_run_py_pins_eager_fallback_off_on_neuron(tmp_path, monkeypatch):
    """TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION (default 1): "Set to 0 to fall back to eager execution on a compile
    failure"; "the fallback_execution compile option overrides it". A fallback would run the model eagerly and read
    as a PASS: run.py pins the variable whatever it inherits, and passes fallback_execution=False to the compiler."""
    ns = _namespace(_rendered(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    ns["pin_neuron_contract"]()
    assert os.environ["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] == "1"
    assert ns["compile_options"]("neuron") == {"fallback_execution": False}
    assert ns["compile_options"]("inductor") is None
    from neuronhelpers.twins.tokenizers import text_tokenizer

    params = {"compile_backend": "neuron", "max_new_tokens": 32}
    config = ns["compiled_generation_kwargs"](params, "neuron:0", text_tokenizer())["compile_config"]
    assert (config.backend, config.fullgraph, config.dynamic, config.options) == ("neuron", True, False,
                                                                                  {"fallback_execution": False})
    main = next(n for n in ast.walk(ast.parse(_rendered(tmp_path).read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert "pin_neuron_contract" in ast.unparse(main)  # before any recipe imports torch


@pytest.mark.parametrize("library_task", ["feature-extraction", "text-to-image"])
def test_every_library_recipe_compiles_with_the_pinned_options(tmp_path, library_task):
    source = _rendered(tmp_path, task=library_task, cores=1, parallelism="none").read_text()
    compiles = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
                and ast.unparse(n.func) == "torch.compile"]
    assert compiles and all(any(k.arg == "options" for k in c.keywords) for c in compiles)


def test_a_torch_neuronx_exception_is_classified_by_the_stage_it_happened_in():
    """The Neuron runtime and compiler raise from the same package: an error while generating (after the compiled
    first call) is a run failure, not a compile failure."""
    from neuronhelpers.recipes.scaffold import failed

    def stage(exc, at):
        return failed(exc, at, {})["stage"]

    NeuronError = type("NeuronRuntimeError", (RuntimeError,), {"__module__": "torch_neuronx.runtime"})
    assert stage(NeuronError("nrt_execute failed"), "run") == "run"
    assert stage(NeuronError("neuronx-cc failed"), "compile") == "compile"
    Dynamo = type("Unsupported", (RuntimeError,), {"__module__": "torch._dynamo.exc"})
    assert stage(Dynamo("graph break"), "run") == "compile"  # a recompile while generating is still compile
    assert stage(RuntimeError("HBM out of memory"), "run") == "oom"


def _devices(tmp_path: Path, chips: int) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(chips):
        (dev / f"neuron{i}").touch()
    (dev / "neuronx").touch()  # not a chip
    return dev


@pytest.mark.parametrize("chips, lnc, cores, gib",
                         [(16, "2", 64, 24), (1, "2", 4, 24), (1, "1", 8, 12), (0, "", 0, 24)])
def test_presence_chips_and_cores_come_from_the_device_files_and_the_lnc_setting(tmp_path, chips, lnc, cores, gib):
    """"By default, Neuron Runtime initializes all the cores present in the system and reserves them for the current
    process": a launching process counts /dev/neuron* (one per chip) instead. A trn2.48xlarge has 16 chips and 64
    logical cores at the default LNC=2 ("approximately 24 GiB of HBM per rank"); a trn2.3xlarge 1 chip, 4 cores."""
    from neuronhelpers.core.topology import neuron_device_present, neuron_topology

    dev = _devices(tmp_path, chips)
    topology = neuron_topology(dev, {"NEURON_LOGICAL_NC_CONFIG": lnc})
    assert (topology.chips, topology.cores, topology.bytes_per_core // 2**30) == (chips, cores, gib)
    assert neuron_device_present(dev) is (chips > 0)


def test_a_launching_process_never_imports_torch_neuronx(tmp_path):
    """Whether torch.neuron.device_count() starts the runtime is not documented, and a started runtime keeps every
    core from the runs it launches. A tripwire package named torch_neuronx on the path fails any process that
    imports it; detecting the backend, doctor, planning a model on the neuron backend and sharing out sweep slots
    must all run without touching it."""
    trip = tmp_path / "trip" / "torch_neuronx"
    trip.mkdir(parents=True)
    (trip / "__init__.py").write_text("raise SystemExit('a launching process imported torch_neuronx')\n")
    script = textwrap.dedent("""
        from neuronhelpers.core.backends import detect_backend, neuron_device_present
        from neuronhelpers.cli.doctor import checks
        from neuronhelpers.run.harness import plan_run
        from neuronhelpers.sweep.local import neuron_slots
        from neuronhelpers.twins.build import build_twin
        detect_backend(); neuron_device_present(); checks(); neuron_slots(2, total_cores=8)
        planned = plan_run(str(build_twin("llama")), backend="neuron")
        import sys
        print("clean", planned.plan.cores, "torch_neuronx" in sys.modules)
    """)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "trip"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-3:] == ["clean", "1", "False"]


def test_a_model_planned_on_more_cores_than_its_slot_has_is_untested_infrastructure(tmp_path):
    """A model planned on more cores than the instance or slot has is not the model's failure: UNTESTED
    (infrastructure) with the reason, and nothing is started."""
    from neuronhelpers.run.harness import plan_run, run_model
    from neuronhelpers.twins.build import build_twin

    planned = plan_run(str(build_twin("llama")), backend="neuron", cores=2)
    row = run_model(planned, env={"NEURON_RT_VISIBLE_CORES": "5"}, workdir=tmp_path / "run")
    assert (row["result"], row["stage"]) == ("UNTESTED", "infrastructure")
    assert "planned on 2 NeuronCores" in row["error"] and "NEURON_RT_VISIBLE_CORES=5" in row["error"]
    assert not (tmp_path / "run").exists()  # no run.py written, no process started


def test_the_plan_says_when_tensor_parallelism_crosses_chips():
    """"Keep TP4 within a chip": at LNC=2 a trn2 chip has 4 logical cores, so TP over 8 or 16 spans chips."""
    from neuronhelpers.core.backends import GiB
    from neuronhelpers.plan.cores import Plan, chip_crossing_note

    assert chip_crossing_note(Plan(4, "tp", 60 * GiB, "given", 30_000_000_000, 24 * GiB)) is None
    note = chip_crossing_note(Plan(8, "tp", 120 * GiB, "given", 60_000_000_000, 24 * GiB))
    assert note and "spans 2 chips" in note and "Keep TP4 within a chip" in note


@pytest.mark.parametrize("version, neuron, status", [((3, 11, 7), True, "FAIL"), ((3, 12, 4), True, "OK"),
                                                      ((3, 11, 7), False, "OK"), ((3, 9, 1), False, "FAIL")])
def test_doctor_checks_the_python_torch_neuronx_ships_for_on_a_neuron_machine(version, neuron, status):
    """torch-neuronx 2.13.3 / 2.14.3 (Neuron 2.33) ship for Python 3.12, 3.13 and 3.14 only."""
    from neuronhelpers.cli.doctor import python_check

    result = python_check(neuron, version)
    assert result[0] == status
    if status == "FAIL" and neuron:
        assert "environment-trn2.yml" in result[2]


def test_doctor_short_says_a_machine_without_the_trn2_environment_in_one_line_with_its_fix():
    """On a neuron machine whose Python is not one torch-neuronx ships for and which lacks the Neuron packages, the
    short form (the start page's cell) says one problem with one fix, not three; other failures keep their lines,
    and a single trn2 failure keeps its own."""
    from neuronhelpers.cli.doctor import FAIL, TRN2_FIX, _neuron_checks, python_check, short_lines

    trn2 = [python_check(True, (3, 11, 7)), (FAIL, "torch-neuronx", "not installed (needed on a trn2 only)"),
            (FAIL, "neuronx-cc", "not installed (needed on a trn2 only)")]
    other = (FAIL, "torch>=2.13", "2.12.0")
    assert short_lines([*trn2, other]) == [
        (FAIL, "trn2 environment", f"python 3.11.7, no torch-neuronx, no neuronx-cc: {TRN2_FIX}"), other]
    assert short_lines([trn2[1], other]) == [trn2[1], other]
    assert {what for _, what, _ in _neuron_checks()[1:]} <= {what for _, what, _ in trn2}  # the names it groups


def test_the_trn2_environment_file_uses_a_python_and_index_torch_neuronx_ships_for():
    import yaml

    from conftest import ROOT

    env = yaml.safe_load((ROOT / "environment-trn2.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python.split("=")[1] in ("3.12", "3.13", "3.14")
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "--extra-index-url https://pip.repos.neuron.amazonaws.com" in pip
    assert any(p.startswith("torch-neuronx==") for p in pip)
    assert "environment-trn2.yml" in (ROOT / "README.md").read_text()


def test_the_card_carries_the_published_datasets_metadata():
    import yaml

    from neuronhelpers.store.card import render_card

    front = yaml.safe_load(render_card().split("---")[1])
    assert {"neuron", "trainium", "transformers"} <= set(front["tags"]) and front["license"] == "apache-2.0"
    trainium = pd.DataFrame({"model_id": ["Qwen/Qwen3-0.6B"], "backend": ["neuron"], "weights": ["hub"]})
    assert "# Which Hub models run on AWS Trainium with torch-neuronx\n" in render_card(trainium)
