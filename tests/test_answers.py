"""The answer for a Hub id (analysis/answers.py) and a model's own config against its architecture's: which row
answers, how the two kinds of twin are compared, and the fields ``causes --isolate`` tries (sweep/isolate.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from conftest import result_row
from neuronhelpers.analysis.agreement import trainium_agreement, trainium_agreement_line, twin_agreement
from neuronhelpers.analysis.answers import Answers, own_config_effects, own_config_line
from neuronhelpers.analysis.causes import rank_causes
from neuronhelpers.core import vocab
from neuronhelpers.store import schema
from neuronhelpers.sweep.isolate import candidate_fields, set_back

PHI = "microsoft/Phi-3.5-mini-instruct"
RECOMPILE = "FailOnRecompileLimitHit: cumulative_length_int"


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=schema.COLUMN_NAMES)


def rows():
    return frame([
        result_row("tiny/phi3", twin_of="phi3", model_type="phi3"),
        result_row("tiny/microsoft--Phi-3.5-mini-instruct", "FAIL", twin_of="phi3", model_type="phi3",
                   twin_from=PHI, cause=RECOMPILE),
        result_row("tiny/qwen3", twin_of="qwen3", model_type="qwen3"),
        result_row("tiny/Qwen--Qwen3-8B", twin_of="qwen3", model_type="qwen3", twin_from="Qwen/Qwen3-8B"),
        result_row("Qwen/Qwen3-8B", "FAIL", model_type="qwen3", backend="neuron", compiler="neuronx-cc",
                   neuronx_cc="2.20", weights="hub"),
    ])


def test_the_answer_is_the_trainium_row_else_the_model_twin_else_the_architecture_twin():
    answers = Answers(rows())
    assert answers.answer("Qwen/Qwen3-8B", "qwen3").kind == vocab.ANSWER_TRAINIUM
    found = answers.answer(PHI, "phi3")
    assert (found.kind, found.model_id, found.result) == (vocab.ANSWER_MODEL_TWIN,
                                                          "tiny/microsoft--Phi-3.5-mini-instruct", "FAIL")
    pair = "inductor 2.13.0, transformers 5.23.0"
    assert found.line() == (f"model twin tiny/microsoft--Phi-3.5-mini-instruct ({pair}): FAIL at compile: {RECOMPILE}; "
                            f"architecture twin tiny/phi3 in the same pair: PASS (exact)")
    assert answers.answer("microsoft/Phi-3-mini-4k-instruct", "phi3").line() == \
        f"architecture twin tiny/phi3 ({pair}): PASS (exact)"
    assert answers.answer("nobody/unknown", None) is None
    # asked by a twin's own id (plan tiny/...): a model twin answers as its Hub id, an architecture twin as itself
    assert answers.answer("tiny/microsoft--Phi-3.5-mini-instruct").line() == found.line()
    assert answers.answer("tiny/phi3").line() == f"architecture twin tiny/phi3 ({pair}): PASS (exact)"
    assert answers.answer("tiny/no_such_type") is None


def test_a_model_twin_answers_from_the_newest_pair_that_holds_it_beside_that_pairs_architecture_twin():
    """The one rule (docs/design.md): a newer pair without the model's own twin does not hide it; the architecture
    twin compared is the same pair's, and the answer names the pair."""
    newer = dict(compiler_version="2.14.1", library_version="5.24.0")
    both = pd.concat([rows(), frame([result_row("tiny/phi3", "FAIL", twin_of="phi3", model_type="phi3", **newer)])])
    found = Answers(both).answer(PHI, "phi3")
    assert (found.kind, found.pair) == (vocab.ANSWER_MODEL_TWIN, "inductor 2.13.0, transformers 5.23.0")
    assert found.architecture.model_id == "tiny/phi3" and found.architecture.result == "PASS"  # 2.13.0's, not 2.14.1's
    alone = Answers(both).answer("microsoft/Phi-3-mini-4k-instruct", "phi3")  # no own twin: the newest pair's
    assert (alone.kind, alone.result, alone.pair) == (vocab.ANSWER_ARCHITECTURE_TWIN, "FAIL",
                                                      "inductor 2.14.1, transformers 5.24.0")
    # where another pair of the same rows passes the same twin, the FAIL says so: a lookup, not a run
    assert alone.line().endswith("; the same twin passes with inductor 2.13.0, transformers 5.23.0")
    assert found.elsewhere is None  # a FAIL that no other pair passes says nothing of the kind
    newest_own = pd.concat([both, frame([result_row("tiny/microsoft--Phi-3.5-mini-instruct", twin_of="phi3",
                                                    model_type="phi3", twin_from=PHI, **newer)])])
    found = Answers(newest_own).answer(PHI, "phi3")
    assert (found.result, found.architecture.result) == ("PASS", "FAIL")  # both from 2.14.1 now


def test_the_answer_says_whose_copy_of_the_config_it_stands_on_and_what_it_could_not_check():
    """A model twin's answer says where its config came from (the row's config_* columns), that it was not checked
    against the Hub, whether a second copy agrees, and that a FAIL on use_cache: false rests on a file not seen."""
    yi = "01-ai/Yi-1.5-6B-Chat"
    cause = ("NotCompiled: generate() ran the forward eagerly: its config sets use_cache: false, so nothing was "
             "compiled; pass use_cache=True to generate()")
    table = frame([result_row("tiny/llama", twin_of="llama", model_type="llama"),
                   result_row("tiny/01-ai--Yi-1.5-6B-Chat", "FAIL", twin_of="llama", model_type="llama", twin_from=yi,
                              cause=cause, config_source="github:Girafboy/pytorchKQI@4adb1da:llms/x/config.json",
                              config_form="python literal", config_id_inferred=True,
                              config_corroboration="uncorroborated: use_cache seen in this copy only")])
    line = Answers(table).answer(yi, "llama").line()
    assert ("its own twin, from a copy of its config (GitHub Girafboy/pytorchKQI@4adb1da; re-serialized from a Python "
            "literal; the Hub id inferred from a file, folder or variable name; not checked against the Hub; "
            "uncorroborated: use_cache seen in this copy only)") in line
    assert "generate() reads use_cache from the checkpoint's generation_config.json, of which no copy was found" in line
    hub = frame([result_row("tiny/acme--m", twin_of="llama", model_type="llama", twin_from="acme/m",
                            config_source="hub:acme/m@abc1234", config_form="json file")])
    assert "from its config as the Hub has it (acme/m@abc1234)" in Answers(hub).answer("acme/m", "llama").line()


def test_a_pass_says_whether_its_check_could_have_failed():
    from neuronhelpers.verdict.evidence import verdict_words

    assert verdict_words("PASS", None, "exact", True) == "PASS (exact, the check could fail)"
    assert verdict_words("PASS", None, "exact", False) == "PASS (exact; the check could not have failed)"
    assert verdict_words("PASS", None, "exact", None) == "PASS (exact)"
    assert verdict_words("FAIL", "compile") == "FAIL at compile"
    assert verdict_words("UNTESTED", "twin") == "UNTESTED (twin)"
    insensitive = Answers(frame([result_row("tiny/aria", twin_of="aria", model_type="aria", check_sensitive=False)]))
    assert insensitive.answer("x/y", "aria").verdict == "PASS (exact; the check could not have failed)"


def test_a_models_own_config_changing_its_verdict_is_counted_and_named():
    effects = own_config_effects(rows(), {PHI: {"field": "sliding_window", "runs": 1}})
    assert list(effects.model_id) == [PHI, "Qwen/Qwen3-8B"]
    assert list(effects.differs) == [True, False]
    line = own_config_line(effects)
    assert line.startswith("a model's own config changes its architecture's verdict for 1 of 2 models: ")
    assert f"{PHI} FAIL at compile (architecture twin PASS; field: sliding_window)" in line
    unnamed = own_config_line(own_config_effects(rows()))
    assert "field: not yet looked for" in unnamed


def test_a_static_cache_mismatch_is_ranked_apart_from_the_compilers_causes():
    """A mismatch that transformers' static cache shows on CPU with nothing compiled is not counted as the compiler's:
    ``rank_causes`` marks it (``causes`` lists it apart), and the harness gives it that cause only where the CPU
    static-cache tokens are the device's."""
    from neuronhelpers.run.harness import static_cache_blame

    table = frame([result_row("tiny/bert", "FAIL", twin_of="bert", model_type="bert", stage="mismatch",
                              cause=vocab.CAUSE_STATIC_CACHE),
                   result_row("tiny/opt", "FAIL", twin_of="opt", model_type="opt", stage="mismatch",
                              cause="tokens diverge from the CPU reference")])
    ranked = rank_causes(table).set_index("cause")
    assert bool(ranked.at[vocab.CAUSE_STATIC_CACHE, "not_the_compiler"]) is True
    assert bool(ranked.at["tokens diverge from the CPU reference", "not_the_compiler"]) is False
    row = {"tokens": [5, 6, 7], "error": "tokens diverge from the CPU reference: token 0 is 5"}
    assert static_cache_blame(row, [5, 6, 7])["cause"] == vocab.CAUSE_STATIC_CACHE
    assert static_cache_blame(row, [5, 6, 8]) == {} and static_cache_blame(row, None) == {}


def test_causes_count_architectures_from_architecture_twins_only():
    """A model twin's FAIL does not make its architecture 'blocked' in the ranking (it answers for its model)."""
    assert rank_causes(rows()[rows().model_id.str.startswith("tiny/")]).empty


def test_the_trainium_comparison_reads_each_models_own_twin_where_one_exists():
    catalog = rows().iloc[:4]
    trainium = rows().iloc[4:]
    compared, outside = trainium_agreement(trainium, catalog)
    assert compared.iloc[0]["twin_model"] == "tiny/Qwen--Qwen3-8B"
    assert compared.iloc[0]["twin_kind"] == vocab.ANSWER_MODEL_TWIN
    assert "1 by their own twin; the architecture twins alone agree with 0 of 1" in trainium_agreement_line(
        compared, outside)


def test_a_real_checkpoint_is_compared_with_its_own_twin_where_it_has_one():
    real = result_row(PHI, "FAIL", model_type="phi3", weights="shelf: test", cause=RECOMPILE)
    frame_ = frame([*rows().iloc[:2].to_dict("records"), real])
    compared = twin_agreement(frame_)
    assert list(compared.twin_model) == ["tiny/microsoft--Phi-3.5-mini-instruct"] and compared.agree.all()


def test_isolation_tries_the_window_first_and_sets_it_back_to_the_default():
    config = {"model_type": "phi3", "hidden_size": 3072, "sliding_window": 262144, "rope_theta": 10000.0,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
              "attention_bias": False, "architectures": ["Phi3ForCausalLM"]}
    fields = candidate_fields(config)
    assert fields[0] == "sliding_window" and "hidden_size" not in fields and "architectures" not in fields
    assert fields.index("rope_scaling") < len(fields)
    assert set_back(config, "sliding_window")["sliding_window"] is None
    assert "rope_scaling" not in set_back(config, "rope_scaling")


def test_isolation_starts_from_the_architecture_twins_config_not_the_bare_default():
    """MistralConfig defaults to a 4096-token window, but mistral's architecture twin has none (its override, as
    Mistral-7B-v0.3 on): Mistral-7B-v0.1's own 4096 window is a difference to try, and setting it back removes it."""
    config = {"model_type": "mistral", "sliding_window": 4096, "rope_theta": 10000.0, "hidden_size": 4096}
    assert candidate_fields(config)[0] == "sliding_window"
    assert set_back(config, "sliding_window")["sliding_window"] is None


# ---- one answer everywhere ---------------------------------------------------------------------------------------

CATALOG = "catalog"
_CLI_LOOP = """
import sys
from neuronhelpers.cli.main import main
for model in sys.argv[1:]:
    print("@@", model, flush=True)
    main(["plan", model, "--backend", "cpu", "--results", "catalog"])
    sys.stdout.flush()
"""


@pytest.mark.slow
def test_every_interface_gives_the_selected_and_ranked_models_the_same_answer():
    """The Selected list and the packaged rankings sample, through each interface's own output: the lines `plan`
    prints, and the explorer's table as it opens (the newest pair; a model without a row carries its answer as a hint).
    Each says the answer of the one rule (result, stage, what it stands on, pair)."""
    import subprocess
    import sys

    from conftest import ROOT
    from neuronhelpers.models.known import known_architectures
    from neuronhelpers.models.rankings import load_rankings
    from neuronhelpers.models.selected import SELECTED
    from neuronhelpers.store.dataset import load_results
    from neuronhelpers.twins.own import corpus_twins, twin_id_for
    from neuronhelpers.ui.explorer import NO_ROW, newest_pair, result_kind, view_table

    catalog = load_results(CATALOG)
    rankings = load_rankings()
    known = known_architectures()

    # A Selected exclusion is the Selected list's own statement (shown as EXCLUDED), and a ranking whose Hub model_type
    # names no architecture of transformers (phi4mm) has no twin to hint with: both are left out here.
    excluded = {e.model_id for e in SELECTED if e.excluded}
    hub_types = dict(zip(rankings.model_id, rankings.model_type, strict=True))
    models = sorted(m for m in {e.model_id for e in SELECTED} | set(rankings.model_id) if m not in excluded
                    and hub_types.get(m, known.get(m, (None, None))[1]) == known.get(m, (None, None))[1])
    expected = {}
    answers = Answers(catalog)
    for model in models:
        task, model_type = known.get(model, (None, None))
        found = answers.answer(model, model_type, task)
        if found is not None:
            expected[model] = found.line()
    assert len(expected) >= 0.8 * len(models) and len(expected) >= 30, "most of these models have an answer here"
    twinned = set(corpus_twins()[0])  # a model whose corpus config makes a twin is answered by it (or a real run)
    for model, line in expected.items():
        if twin_id_for(model) in twinned:
            assert line.startswith((vocab.ANSWER_MODEL_TWIN, vocab.ANSWER_SHELF, vocab.ANSWER_TRAINIUM)), line

    compiler_version, library_version = newest_pair(catalog, library=vocab.TRANSFORMERS)
    shown = {}
    for view in ("Selected", "Trending", "Downloads"):
        table = view_table(view, catalog, rankings, compiler_version=compiler_version,
                           library_version=library_version, library=vocab.TRANSFORMERS)
        shown.update({m: (r, n) for m, r, n in zip(table["model"], table["result"], table["note"], strict=True)
                      if m in expected})
    for model, line in expected.items():
        result, note = shown.get(model, ("", ""))
        if result_kind(result) == NO_ROW:  # no row of its own in the view: the answer is its hint
            assert line in note, (model, line, note)
        else:  # its own row (a real checkpoint: shelf or Trainium) is the view's result, as it is the answer's
            found = answers.answer(model, *reversed(known.get(model, (None, None))))
            assert found.kind in (vocab.ANSWER_SHELF, vocab.ANSWER_TRAINIUM) and result_kind(result) == found.result

    proc = subprocess.run([sys.executable, "-c", _CLI_LOOP, *expected], capture_output=True, text=True, cwd=ROOT,
                          timeout=1800, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    printed = {}
    for block in proc.stdout.split("@@ ")[1:]:
        model, _, rest = block.partition("\n")
        printed[model] = next((x for x in rest.splitlines() if x.startswith("answer in")), "")
    for model, line in expected.items():
        assert printed.get(model) == f"answer in {CATALOG}/: {line}", (model, printed.get(model))


@pytest.mark.slow
def test_the_catalog_is_found_from_any_working_directory_and_its_absence_is_said(tmp_path, monkeypatch):
    """`plan` and `repro` read the catalog beside the package when ./catalog is not there (issue 57), and say in one
    line why there is no answer where there is no catalog at all."""
    import subprocess
    import sys

    from neuronhelpers.core.settings import catalog_dir, no_catalog_words

    monkeypatch.chdir(tmp_path)
    assert catalog_dir() == Path(__file__).resolve().parents[1] / "catalog" and catalog_dir("x") == Path("x")
    assert "pass --results FOLDER" in no_catalog_words(None)
    plan = subprocess.run([sys.executable, "-m", "neuronhelpers", "plan", "microsoft/Phi-3.5-mini-instruct"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert plan.returncode == 0 and plan.stdout.startswith(f"answer in {catalog_dir()}/: model twin "), plan.stdout
    repro = subprocess.run([sys.executable, "-m", "neuronhelpers", "repro", "tiny/mistralai--Mistral-7B-v0.1"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert repro.returncode == 0 and repro.stdout.startswith(f"read {catalog_dir()}/: its row of "), repro.stdout
    assert (tmp_path / "repro_mistralai--Mistral-7B-v0.1.py").exists()
    elsewhere = subprocess.run([sys.executable, "-m", "neuronhelpers", "plan", "microsoft/Phi-3.5-mini-instruct",
                                "--results", str(tmp_path / "none")], capture_output=True, text=True, timeout=300)
    assert elsewhere.stdout.splitlines()[0] == (f"no answer from a catalog: no results dataset at '{tmp_path}/none': "
                                                "give a folder of Parquet files (--results)")
    # causes reads ./results unless given one: where it is missing, one line names it and where the catalog is
    causes = subprocess.run([sys.executable, "-m", "neuronhelpers", "causes"], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert causes.returncode == 2 and causes.stderr.strip().splitlines() == [
        f"neuronhelpers: error: no results folder at 'results' (causes reads ./results, a sweep's --out, unless given "
        f"one); the committed catalog is {catalog_dir()}: `neuronhelpers causes {catalog_dir()}`"], causes.stderr
    # NEURONHELPERS_CATALOG names another catalog: read where none is named, and named where it is missing
    from neuronhelpers.core.settings import CATALOG_ENV

    monkeypatch.setenv(CATALOG_ENV, str(tmp_path / "elsewhere"))
    assert catalog_dir() == tmp_path / "elsewhere" and catalog_dir("x") == Path("x")
    assert no_catalog_words(None) == (f"no results dataset at '{tmp_path}/elsewhere' ({CATALOG_ENV}): point it at a "
                                      "catalog folder")
