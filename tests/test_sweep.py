"""The sweep: every outcome classified, rows written as they finish, resumable after kill -9."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, resumed_results
from neuronhelpers.store import dataset
from neuronhelpers.sweep.local import cpu_slots, sweep_models

FAULTS = Path(__file__).parent / "faults"


@pytest.fixture(scope="module")
def warm_llama():
    """tiny/llama compiled once, so the healthy model of the fault sweep finishes well inside its timeout on a
    busy machine: the fault test is about isolation, not compile speed."""
    from neuronhelpers.run.harness import run_model

    assert run_model("tiny/llama")["result"] == "PASS"


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["fork", "spawn"])
def test_injected_faults_become_classified_rows_and_the_sweep_finishes(tmp_path, monkeypatch, launcher, warm_llama):
    """The same faults under the pre-imported fork server and with a fresh Python per run."""
    from neuronhelpers.process import tree

    faults = {"tiny/gpt2": "segfault", "tiny/gpt_neox": "hang", "tiny/falcon": "oom", "tiny/granite": "compile"}
    monkeypatch.setenv("PYTHONPATH", str(FAULTS))
    monkeypatch.setenv("NH_TEST_FAULTS", json.dumps(faults))
    monkeypatch.setenv(tree.FORK_SERVER_ENV, "1" if launcher == "fork" else "0")
    tree.reset_fork_server()  # a new server, started with this environment
    launched = []
    real_execute = tree.execute
    monkeypatch.setattr("neuronhelpers.run.harness.execute",
                        lambda *a, **k: launched.append(real_execute(*a, **k)) or launched[-1])
    models = [*faults, "tiny/llama"]
    start = time.monotonic()
    rows = sweep_models(models, tmp_path, timeout=60, jobs=2, memory_limit_bytes=6 * 2**30, progress=False)
    assert time.monotonic() - start < 240
    assert {o.launcher for o in launched} == {launcher}
    got = {r["model_id"]: r for r in rows}
    assert set(got) == set(models)
    assert (got["tiny/gpt2"]["result"], got["tiny/gpt2"]["stage"]) == ("FAIL", "run")
    assert "SIGSEGV" in got["tiny/gpt2"]["error"]
    assert (got["tiny/gpt_neox"]["stage"], got["tiny/gpt_neox"]["error"]) == (
        "timeout", "no result within 60 s; the run was stopped")
    assert got["tiny/falcon"]["stage"] == "oom", got["tiny/falcon"]["error"]
    assert got["tiny/granite"]["stage"] == "compile" and "injected fault" in got["tiny/granite"]["error"]
    assert (got["tiny/llama"]["result"], got["tiny/llama"]["verification"]) == ("PASS", "exact"), (
        got["tiny/llama"]["error"])
    # every row was written to the dataset, intact
    df = dataset.load_results(tmp_path).set_index("model_id")
    assert sorted(df.index) == sorted(models)
    assert df.loc["tiny/llama", "result"] == "PASS" and len(df.loc["tiny/llama", "tokens"]) == 32


@pytest.mark.slow
def test_a_second_sweep_runs_nothing_for_a_relative_folder_and_a_model_planned_on_two_cores(tmp_path, monkeypatch):
    """The resume key is the one the row carries (resolved folder path, planned cores): nothing is run twice."""
    import shutil

    from neuronhelpers.run.harness import plan_run
    from neuronhelpers.twins import build

    shutil.copytree(build.build_twin("qwen2"), tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)
    # A per-core budget that holds two thirds of tiny/llama's weights: the planner needs two cores (TP).
    weights = plan_run("tiny/llama", backend="cpu").plan.weight_bytes
    monkeypatch.setenv("NEURONHELPERS_CORE_GIB", str(weights / 1.5 / 0.8 / 2**30))
    assert plan_run("tiny/llama", backend="cpu").plan.cores == 2
    out = tmp_path / "out"
    first = sweep_models(["ckpt", "tiny/llama"], out, progress=False)
    got = {r["model_id"]: r for r in first}
    assert set(got) == {str(tmp_path / "ckpt"), "tiny/llama"}
    assert got["tiny/llama"]["neuron_cores"] == 2 and got["tiny/llama"]["result"] == "PASS", got["tiny/llama"]["error"]
    before = dataset.load_results(out).set_index("model_id")["timestamp"].to_dict()

    assert sweep_models(["ckpt", "tiny/llama"], out, progress=False) == []  # both recognised as recorded
    after = dataset.load_results(out).set_index("model_id")["timestamp"].to_dict()
    assert after == before and len(after) == 2


def test_a_verdict_replaces_an_untested_row_of_the_same_model_and_versions(tmp_path):
    from conftest import result_row

    dataset.append_rows(tmp_path, [result_row("tiny/x", "UNTESTED", stage="twin", error="no twin", neuron_cores=None)])
    dataset.append_rows(tmp_path, [result_row("tiny/x", "PASS")])
    df = dataset.load_results(tmp_path)
    assert list(df.result) == ["PASS"]  # one row per model and versions: the verdict


@pytest.mark.slow
def test_bad_input_in_a_list_is_one_line_and_no_row(tmp_path, capsys):
    rows = sweep_models(["nobody/not-cached", "tiny/nope", "tiny/qwen2"], tmp_path, progress=False)
    assert [r["model_id"] for r in rows] == ["tiny/qwen2"]
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("skipped nobody/not-cached: model 'nobody/not-cached' is not in the local")
               for line in err)
    assert any(line.startswith("skipped tiny/nope: unknown twin") for line in err)
    assert list(dataset.load_results(tmp_path).model_id) == ["tiny/qwen2"]


def _stray_processes(marker: str) -> list[int]:
    """Processes started with the marker in their environment: runs, their fork server and its children."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in environ and int(pid) != os.getpid() and state != "Z":
            pids.append(int(pid))
    return pids


def warm_cache():
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.run.compile_cache import cache_dir

    return cache_dir(get_backend("cpu"))


@pytest.mark.slow
def test_kill_9_mid_sweep_then_rerun_keeps_finished_rows_and_runs_only_the_rest(tmp_path, isolated_home):
    home = tmp_path / "home"
    out = tmp_path / "out"
    env = {**os.environ, "NEURONHELPERS_HOME": str(home),
           "TORCHINDUCTOR_CACHE_DIR": str(warm_cache())}  # reuse the warm cache
    models = ["tiny/llama", "tiny/qwen2", "tiny/smollm3"]
    cmd = [sys.executable, "-m", "neuronhelpers", "sweep", *models, "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "data").is_dir() and len(dataset.load_results(out)) >= 1:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    first = dataset.load_results(out)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(1)
    assert _stray_processes(str(home)) == [], "a run outlived the killed sweep"
    assert 1 <= len(first) < len(models)

    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    resumed_results(out, models, first, rerun.stdout)
    assert f"sweeping {len(models)} models" in rerun.stdout


@pytest.mark.slow
def test_ctrl_c_stops_a_sweep_at_once_and_records_nothing_for_the_run_it_cut_short(tmp_path, isolated_home):
    """Before, Ctrl-C on a sweep went on through every model left: each run has its own session, so the terminal's
    SIGINT reached none of them, and the pool waited for them all; only then did it say "interrupted". Now the run in
    flight (here one that hangs) is killed at once, no row is written for it, and the rows written stay."""
    home = tmp_path / "home"
    out = tmp_path / "out"
    env = {**os.environ, "NEURONHELPERS_HOME": str(home), "TORCHINDUCTOR_CACHE_DIR": str(warm_cache()),
           "PYTHONPATH": str(FAULTS), "NH_TEST_FAULTS": json.dumps({"tiny/gpt_neox": "hang"})}
    models = ["tiny/llama", "tiny/gpt_neox", "tiny/qwen2"]
    cmd = [sys.executable, "-m", "neuronhelpers", "sweep", *models, "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and not (
            (out / "data").is_dir() and len(dataset.load_results(out)) >= 1):
        time.sleep(0.5)
    time.sleep(3)  # tiny/gpt_neox is running now: its reference, or its device run that hangs
    assert proc.poll() is None, proc.communicate()[0][-2000:]
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    said = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and time.monotonic() - start < 60, said[-2000:]
    assert "interrupted: 1 model(s) in flight stopped and not recorded" in said and "once more" not in said
    assert list(dataset.load_results(out).model_id) == ["tiny/llama"]
    time.sleep(1)
    assert _stray_processes(str(home)) == [], "a run outlived the interrupted sweep"


def test_cpu_slots_are_disjoint():
    slots = cpu_slots(2) if len(os.sched_getaffinity(0)) >= 2 else [set()]
    if len(slots) == 2:
        assert not (slots[0] & slots[1]) and slots[0] and slots[1]
    assert cpu_slots(1) == [None]


def test_neuron_jobs_get_disjoint_core_ranges():
    from neuronhelpers.sweep.local import neuron_slots

    assert neuron_slots(4, total_cores=16) == ["0-3", "4-7", "8-11", "12-15"]
    assert neuron_slots(16, total_cores=16)[:3] == ["0", "1", "2"]
    assert neuron_slots(1) == [None]


def test_too_many_jobs_is_a_clear_error():
    from neuronhelpers.core.errors import UserError

    with pytest.raises(UserError, match="--jobs 999 is more than"):
        cpu_slots(999)


def test_the_sweeps_closing_table_shows_this_environments_version_pair_only(tmp_path, capsys):
    """A folder swept by several releases holds the same model under each: the table after a sweep lists the row of
    the installed compiler and library only (before, every pair's row, unlabelled)."""
    from types import SimpleNamespace

    from conftest import result_row
    from neuronhelpers.cli.commands_run import _summarise
    from neuronhelpers.core import versions
    from neuronhelpers.core.backends import get_backend

    backend = get_backend("cpu")
    mine = dict(compiler_version=versions.compiler_for(backend)[1],
                library_version=versions.library_version("transformers"))
    dataset.append_rows(tmp_path, [result_row("tiny/llama", "PASS", **mine),
                                   result_row("tiny/llama", "FAIL", compiler_version="0.0.1", library_version="4.0.0"),
                                   result_row("tiny/other", "PASS", **mine)])
    _summarise(["tiny/llama"], [], SimpleNamespace(out=str(tmp_path)), backend, include_excluded=False)
    out = capsys.readouterr().out
    assert "0 run now, 1 recorded: 1 PASS" in out and "FAIL" not in out.split("Next:")[0]


def test_a_stale_re_sweep_runs_again_only_rows_todays_package_would_not_make(tmp_path):
    """``sweep --stale`` (issue 40): a row whose run_py is today's rendering and whose measuring is today's counts as
    recorded; one made by an older measuring, or whose run_py's code is not today's rendering, is run again; so an
    interrupted re-sweep resumes where it stopped."""
    from neuronhelpers.core import vocab
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import ModelRef
    from neuronhelpers.recipes import render
    from neuronhelpers.store import schema
    from neuronhelpers.sweep.local import STALE, SweepLog

    cpu = get_backend("cpu")

    def row(name, *, run_py=None, harness=schema.HARNESS_VERSION):
        ref = ModelRef(f"tiny/{name}", f"/twins/{name}", vocab.TEXT_GENERATION, name, twin_of=name)
        text = render.render_run_py(render.recipe_params(ref, cpu)) if run_py is None else run_py
        return schema.new_row(model_id=ref.model_id, task=ref.task, backend="cpu", compiler="inductor",
                              compiler_version="2.14.1", library=vocab.TRANSFORMERS, library_version="5.23.0",
                              neuron_cores=1, result=vocab.PASS, verification="exact", run_py=text,
                              harness_version=harness)

    today = row("qwen3")
    older = row("llama", harness="0.2.0")
    edited = row("gpt2")
    edited["run_py"] = edited["run_py"].replace('"fullgraph": True', '"fullgraph": False')  # its code, not a comment
    dataset.append_rows(tmp_path, [today, older, edited])
    keys = {r["model_id"]: schema.resume_key(r) for r in (today, older, edited)}
    stale = SweepLog(tmp_path, cpu, 3, rerun=STALE, progress=False)
    assert stale.done == {keys["tiny/qwen3"]}
    assert SweepLog(tmp_path, cpu, 3, rerun=False, progress=False).done == set(keys.values())
    assert SweepLog(tmp_path, cpu, 3, rerun=True, progress=False).done == set()


def test_the_demo_runs_its_handful_here_and_answers_the_rest_from_the_catalogs_rows_of_this_pair(tmp_path):
    """Issue 57, item 1: `make demo` runs a handful of twins cold and answers the rest of the Selected list from the
    committed catalog. Its handful runs even where the catalog has it; a model the catalog has only under another
    release runs here too; `demo --all` runs everything and reads no catalog."""
    from conftest import result_row
    from neuronhelpers.core import versions
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.sweep.demo import DEMO_TWINS, demo_split

    backend = get_backend("cpu")
    mine = dict(compiler_version=versions.compiler_for(backend)[1],
                library_version=versions.library_version("transformers"))
    handful = DEMO_TWINS[0]
    dataset.append_rows(tmp_path, [result_row(handful, "PASS", **mine),
                                   result_row("tiny/qwen2", "FAIL", **mine),
                                   result_row("tiny/phi3", "PASS", compiler_version="0.0.1", library_version="4.0.0")])
    models = [handful, "tiny/qwen2", "tiny/phi3", "tiny/absent"]
    run_here, answered, catalog = demo_split(models, backend, catalog=tmp_path)
    assert run_here == [handful, "tiny/phi3", "tiny/absent"] and catalog == tmp_path
    assert answered[["model_id", "result"]].values.tolist() == [["tiny/qwen2", "FAIL"]]
    run_here, answered, catalog = demo_split(models, backend, everything=True, catalog=tmp_path)
    assert (run_here, len(answered), catalog) == (models, 0, None)
    run_here, answered, catalog = demo_split(models, backend, catalog=tmp_path / "none")
    assert (run_here, len(answered), catalog) == (models, 0, None)


def test_the_demo_says_each_phase_in_minutes_the_total_and_when_the_first_verdict_appeared():
    import datetime as dt

    from neuronhelpers.sweep.demo import first_verdict_at, phases_line

    began = 1_000_000.0
    rows = [{"timestamp": dt.datetime.fromtimestamp(began + s, dt.timezone.utc)} for s in (200.4, 141.0)]
    assert first_verdict_at(rows) == began + 141.0 and first_verdict_at([{"timestamp": None}]) is None
    line = phases_line([("set-up", 120.0), ("twins", 95.2), ("shelf", 61.0)], began, first_verdict_at(rows),
                       now=began + 290)
    assert line == ("make demo: set-up 2:00, twins 1:35, shelf 1:01; 4:50 in all; the first verdict 2:21 after it "
                    "began")


def test_a_sweep_asked_for_verdicts_says_each_models_verdict_as_its_row_is_written(tmp_path, capsys):
    """The demo's sweep prints a line per model as its row is written, so the first verdict is on screen at once;
    other sweeps keep to the progress bar."""
    from conftest import result_row
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.sweep.local import SweepLog

    for verdicts, expected in ((True, "tiny/qwen2: FAIL at compile"), (False, "")):
        log = SweepLog(tmp_path / str(verdicts), get_backend("cpu"), 1, rerun=False, progress=False,
                       verdicts=verdicts)
        log.end("tiny/qwen2", result_row("tiny/qwen2", "FAIL"))
        err = capsys.readouterr().err
        assert (expected in err) if expected else err == "", err
