"""What a verdict stands on (issue 23): the eager run on the same device beside the compiled one, the speed-up measured
back to back, dynamo's own figures, the level of evidence, and transformers' declared fullgraph beside the measured."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import result_row, run_cli
from neuronhelpers.core import vocab
from neuronhelpers.verdict.evidence import eager_word, evidence_level, speedup

# ---- the level of evidence --------------------------------------------------------------------------------

@pytest.mark.parametrize("verification, level", [("exact", "exact"), ("near_tie", "near_tie"),
                                                 ("within_tolerance", "within_tolerance"), ("judge_lm", "judged"),
                                                 ("judge_lexical", "judged")])
def test_a_pass_stands_on_its_check(verification, level):
    assert evidence_level({"result": "PASS", "verification": verification}) == level


@pytest.mark.parametrize("device_eager, level", [
    ("ran", "compiled_failed_eager_ran"),
    ("failed: load: OSError: x", "eager_failed_too"), ("not tried: sharded over 4 ranks", "eager_not_tried"),
    (None, "eager_not_tried")])
def test_a_fail_says_whether_the_device_ran_the_model_eagerly(device_eager, level):
    assert evidence_level({"result": "FAIL", "stage": "compile", "device_eager": device_eager}) == level
    assert level in vocab.EVIDENCE


def test_a_mismatch_the_eager_run_repeats_is_not_blamed_on_the_compiler():
    """The eager generate on the device wrote the compiled run's tokens: the difference from the CPU reference is
    the device's (or its static cache's); a failed reference says nothing about the device."""
    row = {"result": "FAIL", "stage": "mismatch", "device_eager": "ran"}
    assert evidence_level({**row, "eager_equals_compiled": True}) == "eager_wrote_the_same"
    assert evidence_level({**row, "eager_equals_compiled": False}) == "compiled_failed_eager_ran"
    assert evidence_level({"result": "FAIL", "stage": "reference", "device_eager": "ran"}) == "reference_failed"
    assert evidence_level({"result": "FAIL", "stage": "reference"}) == "reference_failed"


def test_no_verdict_no_evidence_and_every_level_is_explained():
    assert evidence_level({"result": "UNTESTED"}) is None and evidence_level({"result": "EXCLUDED"}) is None
    assert vocab.PASS_EVIDENCE_ORDER == ["exact", "near_tie", "within_tolerance", "judged", "insensitive_check"]
    assert all(vocab.EVIDENCE[level] for level in vocab.EVIDENCE)


def test_speedup_is_compiled_over_eager_from_one_rows_figures():
    assert speedup({"decode_tokens_per_s": 30.0, "eager_decode_tokens_per_s": 20.0}) == 1.5
    assert speedup({"task": "feature-extraction", "items_per_s": 90.0, "eager_items_per_s": 30.0}) == 3.0
    assert speedup({"task": "text-to-image", "image_s": 2.0, "eager_image_s": 5.0}) == 2.5
    assert speedup({"decode_tokens_per_s": 30.0}) is None and speedup({"decode_tokens_per_s": float("nan"),
                                                                        "eager_decode_tokens_per_s": 3.0}) is None


def test_eager_bounds_skip_sharded_runs_and_models_above_the_parameter_bound(monkeypatch):
    """The measuring's bounds (run.measure.eager_not_tried), read from the setting in the run's own process."""
    from neuronhelpers.core import settings
    from neuronhelpers.run.measure import eager_not_tried

    monkeypatch.setenv(settings.EAGER_MAX_ENV, "3e9")
    assert eager_not_tried({"cores": 4}, True, 10).startswith("sharded over 4 ranks")
    assert "8B parameters, above the 3B bound" in eager_not_tried({"cores": 1}, False, 8_000_000_000)
    assert eager_not_tried({"cores": 1}, False, 135_000_000) is None
    monkeypatch.setenv(settings.EAGER_MAX_ENV, str(10**6))
    assert "2M parameters, above the 1M bound" in eager_not_tried({"cores": 1}, False, 2_000_000)
    monkeypatch.setenv(settings.EAGER_MAX_ENV, "0")
    assert "turned off" in eager_not_tried({"cores": 1}, False, 10)


def test_a_bad_eager_bound_is_a_one_line_error(monkeypatch):
    from neuronhelpers.core import settings
    from neuronhelpers.core.errors import UserError

    for raw in ("many", "inf"):
        monkeypatch.setenv(settings.EAGER_MAX_ENV, raw)
        with pytest.raises(UserError, match="NEURONHELPERS_EAGER_MAX_PARAMETERS"):
            settings.eager_max_parameters()


def test_the_measurings_device_eager_words_are_the_vocabularys():
    """The measuring spells its words itself: they must be the vocabulary's, or evidence_level misreads them."""
    from neuronhelpers.run import measure

    text = Path(measure.__file__).read_text()
    for word in ('"device_eager": f"not tried:', '"device_eager": f"failed:', '"device_eager": "ran"'):
        assert word in text, word
    assert {eager_word(w) for w in ("ran", "failed: x", "not tried: y")} == set(vocab.DEVICE_EAGER)


# ---- declared against measured ----------------------------------------------------------------------------

def test_declared_fullgraph_is_read_from_the_installed_transformers_classes():
    import transformers

    from neuronhelpers.verdict.declared import declared_fullgraph

    assert declared_fullgraph("llama", "text-generation") is bool(transformers.LlamaForCausalLM._can_compile_fullgraph)
    assert declared_fullgraph("bert", "text-generation") is bool(transformers.BertLMHeadModel._can_compile_fullgraph)
    assert declared_fullgraph("no-such-type", "text-generation") is None
    assert declared_fullgraph("llama", "feature-extraction") is None  # sentence-transformers: not transformers' flag


def test_declared_vs_measured_counts_both_ways_of_disagreeing(tmp_path):
    from neuronhelpers.analysis.declared import declared_vs_measured, disagreement_line
    from neuronhelpers.store import dataset

    rows = [result_row("tiny/a", model_type="a", twin_of="a", declared_fullgraph=True),  # agree
            result_row("tiny/b", "FAIL", model_type="b", twin_of="b", declared_fullgraph=True),  # compile: disagree
            result_row("tiny/c", model_type="c", twin_of="c", declared_fullgraph=False),  # passes anyway: disagree
            result_row("tiny/d", "FAIL", model_type="d", twin_of="d", stage="mismatch", declared_fullgraph=True)]
    dataset.append_rows(tmp_path, rows)
    frame = declared_vs_measured(dataset.load_results(tmp_path))
    assert sorted(frame[frame.disagree].model_type) == ["b", "c"]
    assert disagreement_line(frame).startswith("transformers' _can_compile_fullgraph disagrees with the measured "
                                               "verdict for 2 of 3 architectures: 1 declared True fail")
    proc = run_cli("causes", str(tmp_path), "--pair", "2.13.0,5.23.0")
    assert "Declared vs measured: transformers' _can_compile_fullgraph disagrees" in proc.stdout, proc.stderr


# ---- diff: what an unchanged verdict stands on ------------------------------------------------------------

def test_diff_reports_lower_evidence_a_new_graph_break_a_new_fallback_op_and_a_fallen_speedup():
    from neuronhelpers.store.diff import SPEEDUP_MARGIN, diff_results

    old = pd.DataFrame([result_row("m/a", evidence="exact"), result_row("m/b", graph_breaks=0),
                        result_row("m/c", fallback_ops=["aten::sort"]), result_row("m/d", speedup=2.0),
                        result_row("m/e", speedup=2.0)])
    new = pd.DataFrame([result_row("m/a", evidence="judged"), result_row("m/b", graph_breaks=1),
                        result_row("m/c", fallback_ops=["aten::sort", "aten::topk"]),
                        result_row("m/d", speedup=2.0 * (1 - SPEEDUP_MARGIN) - 0.01),
                        result_row("m/e", speedup=2.0 * (1 - SPEEDUP_MARGIN) + 0.01)])
    changes = diff_results(old, new)
    got = {(r.model_id, str(r.change)) for r in changes.itertuples()}
    assert got == {("m/a", "lower evidence"), ("m/b", "new graph break"), ("m/c", "new fallback op"),
                   ("m/d", "speed-up fell")}
    assert changes[changes.model_id == "m/c"].new_cause.iloc[0] == "aten::topk"


# ---- the explorer -----------------------------------------------------------------------------------------

def test_the_explorer_shows_and_filters_by_evidence():
    from neuronhelpers.ui.explorer import model_detail, render_detail_html
    from neuronhelpers.ui.explorer.frames import filter_by_evidence, view_table

    df = pd.DataFrame([result_row("Qwen/Qwen3-0.6B", model_type="qwen3", evidence="exact", speedup=1.31,
                                  device_eager="ran", eager_decode_tokens_per_s=20.0, graph_breaks=0, unique_graphs=1),
                       result_row("google/gemma-2-2b-it", "FAIL", model_type="gemma2",
                                  evidence="compiled_failed_eager_ran", device_eager="ran")])
    table = view_table("Selected", df)
    shown = filter_by_evidence(table, "compiled_failed_eager_ran")
    assert list(shown.model) == ["google/gemma-2-2b-it"] and len(filter_by_evidence(table, "")) == len(table)
    assert table.set_index("model").at["Qwen/Qwen3-0.6B", "speed-up (x)"] == 1.31
    html = render_detail_html(model_detail(df, "Qwen/Qwen3-0.6B"))
    assert "1.31x" in html and "20.0 tokens/s" in html and "exact" in html


# ---- real runs --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_compiled_pass_carries_its_eager_rate_speedup_and_graph_figures(tmp_path):
    """tiny/llama through the harness: the eager generate ran in the same process, its tokens equal the compiled ones,
    and the speed-up is exactly the ratio of the two recorded rates."""
    from neuronhelpers.run.harness import run_model

    row = run_model("tiny/llama", workdir=tmp_path / "run")
    assert (row["result"], row["evidence"], row["device_eager"]) == ("PASS", "exact", "ran"), row.get("error")
    assert row["eager_equals_compiled"] and row["eager_decode_tokens_per_s"] > 0
    assert row["speedup"] == round(row["decode_tokens_per_s"] / row["eager_decode_tokens_per_s"], 3)
    assert (row["graph_breaks"], row["recompiles"]) == (0, 0) and row["unique_graphs"] >= 1
    assert row["declared_fullgraph"] is True


@pytest.mark.slow
def test_a_compile_failure_says_the_device_ran_the_model_eagerly(tmp_path):
    """tiny/gemma2 fails at compile (the sliding-window recompile limit); run.py --eager then runs it on the device
    with the same static cache, so the row says the compiler is the obstacle, with dynamo's recompile count."""
    from neuronhelpers.run.harness import run_model

    row = run_model("tiny/gemma2", workdir=tmp_path / "run")
    assert (row["result"], row["stage"]) == ("FAIL", "compile"), row.get("error")
    assert row["device_eager"] == "ran" and row["evidence"] == "compiled_failed_eager_ran"
    assert (tmp_path / "run" / "eager.stdout.txt").is_file()  # a fresh run.py --eager, with the static cache
    assert row["recompiles"] >= 8 and row["declared_fullgraph"] is True  # declared True, measured not


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny/llama", "tiny/st-bert"])
def test_the_measurings_eager_run_runs_the_model_on_the_device_with_nothing_compiled(tmp_path, model):
    """`python -m neuronhelpers.run.measure run.py --eager` (what the harness runs after a compiled failure): the
    file's own loader and call, ok with nothing compiled."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.recipes import render

    params = render.recipe_params(resolve_model(model), get_backend("cpu"))
    script = tmp_path / "run.py"
    script.write_text(render.render_run_py(params))
    proc = subprocess.run([sys.executable, "-m", "neuronhelpers.run.measure", str(script), "--eager"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    payload = json.loads(proc.stdout.strip().splitlines()[-1])
    assert payload["ok"] and payload["mode"] == "eager", payload.get("error")
    assert payload["model_id"] == model and "dynamo" not in payload  # nothing compiled, nothing measured


@pytest.mark.slow
def test_a_mismatch_the_static_cache_causes_on_cpu_is_not_blamed_on_the_compiler(tmp_path):
    """tiny/bert (an encoder run as a causal LM, is_decoder left as its checkpoints have it) writes other tokens with
    the static cache than with the dynamic cache the reference uses, on CPU with nothing compiled: the row stays FAIL at
    mismatch with the static-cache cause. The CPU rendering a device other than CPU would run (run.py --eager on CPU)
    writes those same tokens."""
    from neuronhelpers.run import harness

    row = harness.run_model("tiny/bert", workdir=tmp_path / "run")
    assert (row["result"], row["stage"], row["cause"]) == ("FAIL", "mismatch", vocab.CAUSE_STATIC_CACHE), row["error"]
    assert row["eager_equals_compiled"] is True and "not the compiler" in row["error"]
    planned = harness.prepare_run("tiny/bert")
    run = harness._RunFolder.write(planned, tmp_path / "again", None)
    checks = harness._Checks(600, None, None, None, None, None)
    tokens = harness._static_cache_tokens_on_cpu(planned, run, {**row, "eager_equals_compiled": None}, checks)
    assert tokens == row["tokens"]
    assert (tmp_path / "again" / "static_cache_cpu.stdout.txt").is_file()
