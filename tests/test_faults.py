"""No fault changes the record (issue 54): a damaged file is the model's UNTESTED (input) row, a damaged cache heals,
a fault of our own code stops the sweep with no row, a kill from outside is not the model's memory, and an attempt
that reached no verdict never hides one."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT
from neuronhelpers.core import integrity, vocab
from neuronhelpers.core.errors import HarnessFault, Stopped, harness_fault
from neuronhelpers.process.tree import ProcessOutcome
from neuronhelpers.store import dataset, schema
from neuronhelpers.store.diff import LOST_TO_A_FAULT, check_expected, diff_results
from neuronhelpers.verdict.classify import classify_failure

FAULTS = Path(__file__).parent / "faults"


def _safetensors(path: Path, n: int = 1000) -> Path:
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(n)}, str(path))
    return path


# ---- 1. a model's files checked before they are trusted -------------------------------------------------------


def test_a_cut_short_safetensors_file_is_named_with_both_sizes(tmp_path):
    path = _safetensors(tmp_path / "model.safetensors")
    whole = path.stat().st_size
    integrity.safetensors_header(path)  # whole: read
    with open(path, "r+b") as handle:
        handle.truncate(whole - 100)
    with pytest.raises(integrity.DamagedFile) as caught:
        integrity.safetensors_header(path)
    assert str(caught.value) == f"model.safetensors is {whole - 100:,} bytes; its header promises {whole:,}"
    assert caught.value.cause == "damaged file: model.safetensors cut short"
    with open(path, "r+b") as handle:  # cut inside the header itself: what the sweep once died on (JSONDecodeError)
        handle.truncate(40)
    with pytest.raises(integrity.DamagedFile, match="is 40 bytes; its header alone claims"):
        integrity.safetensors_header(path)


def test_a_checkpoint_check_names_half_a_json_file_and_a_shard_its_index_names(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "hidden')
    with pytest.raises(integrity.DamagedFile, match="config.json is not valid JSON"):
        integrity.check_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "model-1.safetensors"}}))
    with pytest.raises(integrity.DamagedFile) as caught:
        integrity.check_checkpoint(tmp_path)
    assert caught.value.kind == integrity.MISSING and "model-1.safetensors is missing" in str(caught.value)
    _safetensors(tmp_path / "model-1.safetensors")
    integrity.check_checkpoint(tmp_path)  # whole: no error


def test_a_truncated_checkpoint_folder_is_planned_as_untested_input_naming_the_file(tmp_path):
    """Before: the sweep ended in the parent with `JSONDecodeError: Expecting ',' delimiter`, naming neither model nor
    file. After: the model's row, UNTESTED (input), whose error names the file and both sizes."""
    from neuronhelpers.run.harness import prepare_run
    from neuronhelpers.twins import build

    folder = tmp_path / "ckpt"
    shutil.copytree(build.build_twin("llama"), folder)
    weights = folder / "model.safetensors"
    with open(weights, "r+b") as handle:
        handle.truncate(5000)
    row = prepare_run(str(folder), backend="cpu")
    assert isinstance(row, dict), "a damaged folder must not be planned"
    assert (row["result"], row["stage"]) == (vocab.UNTESTED, vocab.UNTESTED_INPUT)
    assert row["model_id"] == str(folder.resolve())
    assert row["error"].startswith("model.safetensors is 5,000 bytes; its header ")
    assert row["cause"] == "damaged file: model.safetensors cut short"
    schema.validate_row(row)


# ---- 2. caches that heal ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_twin_whose_files_differ_from_its_record_is_built_again(capfd):
    """Before: a truncated twin weights file or half a config.json in the cache was trusted and ended the sweep.
    After: known_twin sees the mismatch, the build runs again and says so in one line."""
    from neuronhelpers.twins import build

    spec = build.twin_spec("tiny/qwen2")
    folder = build.build_twin(spec)
    assert build.twin_damage(folder) is None
    config = (folder / "config.json").read_text()
    (folder / "config.json").write_text(config[: len(config) // 2])
    assert "config.json" in build.twin_damage(folder)
    again = build.build_twin(spec)
    assert again == folder and (folder / "config.json").read_text() == config
    assert "does not match its TWIN.json" in capfd.readouterr().err
    with open(folder / "model.safetensors", "r+b") as handle:
        handle.truncate(5000)
    assert "model.safetensors is 5,000 bytes" in build.twin_damage(folder)
    build.build_twin(spec)
    assert build.twin_damage(folder) is None


def test_a_compile_cache_entry_a_run_names_is_set_aside_beside_the_cache(tmp_path, monkeypatch):
    """The NEFF cache goes through the same code as inductor's: a stand-in NEFF named by a failed run's error."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.run.compile_cache import cache_dir, named_entries, set_aside

    be = get_backend("neuron")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff-cache"))
    root = cache_dir(be)
    neff = Path(root) / "neuronxcc-2.33" / "MODULE_123" / "model.neff"
    neff.parent.mkdir(parents=True)
    neff.write_bytes(b"\x00half a neff")
    error = f"RuntimeError: failed to load NEFF from '{neff}': bad magic"
    assert named_entries(error, be) == [neff]
    aside = set_aside(named_entries(error, be), be)
    assert not neff.exists() and (aside / "neuronxcc-2.33" / "MODULE_123" / "model.neff").is_file()
    assert named_entries("RuntimeError: shapes do not match", be) == []
    # a model's own failure inside a compiled kernel names the kernel's file: not a cache that could not be read
    kernel = Path(root) / "en" / "cenay.main.cpp"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("// a whole kernel")
    assert named_entries(f'  File "{kernel}", line 825, in call\nRuntimeError: kernel, {kernel}:56, index out of '
                         "bounds: 0 <= tmp22 < 2068L", be) == []


# ---- 3. a fault of ours is not the model's ------------------------------------------------------------------


def test_harness_fault_draws_the_line_between_our_code_and_the_models():
    ours = 'File "/x/neuronhelpers/twins/build.py", line 3, in f\n'
    theirs = 'File "/x/site-packages/transformers/models/llama/modeling_llama.py", line 9, in forward\n'
    assert harness_fault("ImportError", "ImportError: cannot import name 'MIN_DISTINCT_TOKENS' from "
                         "'neuronhelpers.twins.weights' (/x/weights.py)", "")
    assert harness_fault("ModuleNotFoundError", "No module named 'neuronhelpers.run.gone'", "")
    assert harness_fault("ImportError", "cannot import name 'X' from 'transformers'", ours) is None  # a dependency
    assert harness_fault("NameError", "name 'x' is not defined", f"Traceback:\n  {ours}NameError") is not None
    assert harness_fault("NameError", "name 'x' is not defined", f"Traceback:\n  {ours}  {theirs}") is None
    assert harness_fault("AssertionError", "", 'File "/tmp/run/run.py", line 80, in main\nAssertionError')
    assert harness_fault("RuntimeError", "boom", f"Traceback:\n  {ours}") is None  # a model input may explain it


def _killed(oom_kills):
    return ProcessOutcome(returncode=-9, timed_out=False, wall_s=1.0, stdout="", stderr="", oom_kills=oom_kills)


def test_a_sigkill_is_the_models_memory_only_when_the_kernel_recorded_an_oom_kill():
    """Before: any SIGKILL was FAIL (oom), whoever sent it. After: only with the kernel's oom_kill count risen."""
    assert classify_failure(_killed(1), 60)["result"] == vocab.FAIL
    assert classify_failure(_killed(1), 60)["stage"] == vocab.STAGE_OOM
    outside = classify_failure(_killed(0), 60)
    assert (outside["result"], outside["stage"]) == (vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE)
    assert classify_failure(_killed(None), 60)["result"] == vocab.UNTESTED  # no counter here: not claimed as memory


def test_a_run_that_failed_in_our_code_raises_instead_of_becoming_a_row():
    payload = {"ok": False, "stage": "load", "error_type": "ImportError",
               "error": "ImportError: cannot import name 'MEASURED' from 'neuronhelpers.core.protocol'",
               "traceback": "..."}
    outcome = ProcessOutcome(returncode=1, timed_out=False, wall_s=1.0, stdout="", stderr="", payload=payload)
    with pytest.raises(HarnessFault, match="neuronhelpers.core.protocol"):
        classify_failure(outcome, 60)


def _row(model, result, stage=None, when="2026-12-01", cause=None, **more):
    if result == vocab.PASS:
        more.setdefault("verification", vocab.EXACT)
    return schema.new_row(model_id=model, task=vocab.TEXT_GENERATION, result=result, stage=stage, cause=cause,
                          error=None if result == vocab.PASS else f"{stage}: it failed",
                          timestamp=pd.Timestamp(when, tz="UTC"), compiler="inductor", compiler_version="2.14.1",
                          library=vocab.TRANSFORMERS, library_version="5.23.0", backend="cpu", **more)


def test_three_models_in_a_row_with_the_same_infrastructure_cause_stop_the_sweep(tmp_path):
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.sweep.local import SweepLog

    log = SweepLog(tmp_path, get_backend("cpu"), 5, rerun=True, progress=False)
    same = "infrastructure: worker died 3 times"
    log.end("m1", _row("m1", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, cause=same))
    log.end("m2", _row("m2", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, cause=same))
    log.end("m3", _row("m3", vocab.PASS))  # a verdict between them: the machine works
    log.end("m4", _row("m4", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, cause=same))
    assert log.stopped is None
    log.end("m5", _row("m5", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, cause=same))
    log.end("m6", _row("m6", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, cause=same))
    assert isinstance(log.stopped, Stopped) and same in str(log.stopped)
    assert len(dataset.load_results(tmp_path)) == 6  # every row written stays
    with pytest.raises(Stopped, match="the last 3 models all ended UNTESTED"):
        log.raise_if_stopped()


def test_a_row_that_does_not_fit_on_the_disk_stops_the_sweep_and_keeps_every_row_before(tmp_path):
    """A real file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): writing the row fails with "File too large"."""
    dataset.append_rows(tmp_path, [_row("first", vocab.PASS)])
    before = dataset.load_results(tmp_path)
    script = textwrap.dedent(f"""
        import resource, signal, sys
        import pandas as pd
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from test_faults import _row
        from neuronhelpers.core.backends import get_backend
        from neuronhelpers.sweep.local import SweepLog
        log = SweepLog({str(tmp_path)!r}, get_backend("cpu"), 1, rerun=True, progress=False)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
        log.end("second", _row("second", "PASS", run_py="x" * 100_000))
        print("STOPPED:", log.stopped)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "STOPPED: File too large while writing second's row" in done.stdout, done.stderr[-2000:]
    after = dataset.load_results(tmp_path)
    assert list(after["model_id"]) == list(before["model_id"]) == ["first"]


def test_the_cli_says_a_stop_in_one_line_and_exits_3(tmp_path, capsys, monkeypatch):
    """A harness fault while planning: `neuronhelpers: stopped: ...`, exit status 3, nothing written."""
    from neuronhelpers.cli.main import main

    def half_edited(*args, **kwargs):
        raise ImportError("cannot import name 'MIN_DISTINCT_TOKENS' from 'neuronhelpers.twins.weights'")

    monkeypatch.setattr("neuronhelpers.sweep.local.prepare_run", half_edited)
    assert main(["sweep", "tiny/llama", "tiny/qwen2", "--out", str(tmp_path), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "neuronhelpers: stopped: a fault of neuronhelpers' own code while planning tiny/llama" in err
    assert not list(tmp_path.glob("*.parquet"))


# ---- 4. no verdict hidden by a fault -------------------------------------------------------------------------


def test_an_attempt_never_hides_an_older_verdict_of_the_same_pair_and_a_newer_verdict_still_replaces_it():
    rows = [_row("m", vocab.PASS, when="2026-12-01"),
            _row("m", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, when="2026-12-03"),
            _row("n", vocab.FAIL, "compile", when="2026-12-01", cause="x"),
            _row("n", vocab.UNTESTED, vocab.UNTESTED_INPUT, when="2026-12-02"),
            _row("n", vocab.PASS, when="2026-12-04"),
            _row("o", vocab.UNTESTED, vocab.UNTESTED_TWIN, when="2026-12-05")]
    newest = dataset.newest_per_model(pd.DataFrame(rows)).set_index("model_id")
    assert newest.loc["m", "result"] == vocab.PASS
    assert newest.loc["m", dataset.LAST_ATTEMPT].startswith("infrastructure, 2026-12-03")
    assert newest.loc["n", "result"] == vocab.PASS and pd.isna(newest.loc["n", dataset.LAST_ATTEMPT])
    other_pair = {**_row("m", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, when="2026-12-06"),
                  "library_version": "5.24.0"}
    across = dataset.newest_per_model(pd.DataFrame([rows[0], other_pair]))
    assert list(across["result"]) == [vocab.UNTESTED]  # another pair: its own (newer) row
    from neuronhelpers.analysis.answers import Answers

    twin = [{**row, "model_id": "tiny/llama", "twin_of": "llama", "model_type": "llama", "task": "text-generation"}
            for row in rows[:2]]
    line = Answers(pd.DataFrame(twin)).answer("meta-llama/Llama-3.2-1B", "llama", "text-generation").line()
    assert ": PASS" in line and "(last attempt: infrastructure, 2026-12-03" in line  # the answer says it too


def test_an_attempt_appended_keeps_the_verdict_and_is_retried_without_rerun(tmp_path):
    dataset.append_rows(tmp_path, [_row("m", vocab.PASS), _row("k", vocab.FAIL, "compile", cause="c")])
    assert len(dataset.recorded_keys(tmp_path)) == 2
    dataset.append_rows(tmp_path, [_row("m", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, when="2026-12-02")])
    stored = dataset.load_results(tmp_path)
    assert sorted(stored["result"]) == ["FAIL", "PASS", "UNTESTED"]  # the verdict kept beside the attempt
    keys = dataset.recorded_keys(tmp_path)
    assert schema.resume_key(_row("m", vocab.PASS)) not in keys  # the next sweep runs m again
    assert schema.resume_key(_row("k", vocab.FAIL)) in keys


def test_diff_and_the_gate_count_a_verdict_kept_beside_a_fault_as_lost_to_a_fault():
    old = pd.DataFrame([_row("m", vocab.PASS)])
    new = pd.DataFrame([_row("m", vocab.PASS, when="2026-12-02"),
                        _row("m", vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE, when="2026-12-03")])
    changes = diff_results(old, new)
    assert list(changes["change"].astype(str)) == [LOST_TO_A_FAULT]
    expected = pd.DataFrame([{"model_id": "m", "result": "PASS"}])
    problems, _ = check_expected(expected, new)
    assert problems and LOST_TO_A_FAULT.upper() in problems[0]


# ---- 5. faults injected in real runs ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_sweep_of_a_damaged_folder_and_a_twin_records_the_folder_untested_and_runs_the_twin(tmp_path):
    from neuronhelpers.sweep.local import sweep_models
    from neuronhelpers.twins import build

    folder = tmp_path / "ckpt"
    shutil.copytree(build.build_twin("llama"), folder)
    with open(folder / "model.safetensors", "r+b") as handle:
        handle.truncate(5000)
    rows = sweep_models([str(folder), "tiny/llama"], tmp_path / "out", progress=False)
    got = {r["model_id"]: r for r in rows}
    assert got[str(folder.resolve())]["stage"] == vocab.UNTESTED_INPUT
    assert got["tiny/llama"]["result"] == vocab.PASS


@pytest.mark.slow
def test_a_harness_import_fault_in_the_run_stops_the_sweep_with_no_row(tmp_path, monkeypatch):
    """Before: 'twin build: ImportError: cannot import name ...' was recorded as every model's row. After: the sweep
    stops with a harness-fault line, and the model it hit gets no row (nor does any model after it)."""
    from neuronhelpers.process import tree
    from neuronhelpers.sweep.local import sweep_models

    monkeypatch.setenv("PYTHONPATH", str(FAULTS))
    monkeypatch.setenv("NH_TEST_FAULTS", json.dumps({"tiny/llama": "harness_import"}))
    tree.reset_fork_server()
    try:
        with pytest.raises(HarnessFault, match="neuronhelpers.run.instruments"):
            sweep_models(["tiny/llama", "tiny/qwen2"], tmp_path, progress=False, timeout=120)
    finally:
        monkeypatch.delenv("NH_TEST_FAULTS")
        tree.reset_fork_server()
    assert not list(tmp_path.glob("*.parquet"))


@pytest.mark.slow
def test_a_kill_from_outside_is_run_once_more_and_then_untested_infrastructure(tmp_path, monkeypatch, capfd):
    from neuronhelpers.process import tree
    from neuronhelpers.run.harness import run_model

    monkeypatch.setenv("PYTHONPATH", str(FAULTS))
    monkeypatch.setenv("NH_TEST_FAULTS_DIR", str(tmp_path))
    monkeypatch.setenv("NH_TEST_KILL_AFTER_S", "0.5")
    tree.reset_fork_server()
    try:
        monkeypatch.setenv("NH_TEST_FAULTS", json.dumps({"tiny/llama": "kill_once"}))
        healed = run_model("tiny/llama", timeout=120)
        assert healed["result"] == vocab.PASS, healed["error"]
        assert "running it once more" in capfd.readouterr().err
        monkeypatch.setenv("NH_TEST_FAULTS", json.dumps({"tiny/llama": "kill"}))
        killed = run_model("tiny/llama", timeout=120)
    finally:
        monkeypatch.delenv("NH_TEST_FAULTS")
        tree.reset_fork_server()
    assert (killed["result"], killed["stage"]) == (vocab.UNTESTED, vocab.UNTESTED_INFRASTRUCTURE), killed["error"]
    assert "from outside" in killed["error"]


@pytest.mark.slow
def test_a_damaged_inductor_cache_entry_is_set_aside_and_the_model_passes(tmp_path, monkeypatch):
    """Before: a truncated inductor .py entry made `FAIL at compile: InductorError: ... Failed to import ...`. After:
    the entry the error names is set aside beside the cache, compiled again, PASS. A home of its own: the shared
    cache's entries stay whole for the other tests."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.run.compile_cache import SET_ASIDE_SUFFIX, cache_dir
    from neuronhelpers.run.harness import run_model

    monkeypatch.setenv("NEURONHELPERS_HOME", str(tmp_path))
    assert run_model("tiny/llama", timeout=300)["result"] == vocab.PASS  # the cache holds its entries
    root = Path(cache_dir(get_backend("cpu")))
    entries = sorted((p for p in root.rglob("*.py") if p.stat().st_size > 200), key=lambda p: p.stat().st_mtime)
    assert entries, f"no inductor entries under {root}"
    for entry in entries:
        entry.write_text(entry.read_text()[: entry.stat().st_size // 3])
    row = run_model("tiny/llama", timeout=300)
    assert row["result"] == vocab.PASS, row["error"]
    aside = root.with_name(root.name + SET_ASIDE_SUFFIX)
    assert any(aside.rglob("*.py")), "the damaged entry is kept beside the cache, not deleted"
