"""The answer for a Hub id (analysis/answers.py) and a model's own config against its architecture's: which row
answers, how the two kinds of twin are compared, and the fields ``causes --isolate`` tries (sweep/isolate.py)."""

from __future__ import annotations

import pandas as pd

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
    assert found.line() == f"model twin tiny/microsoft--Phi-3.5-mini-instruct: FAIL at compile: {RECOMPILE}"
    assert answers.answer("microsoft/Phi-3-mini-4k-instruct", "phi3").line() == "architecture twin tiny/phi3: PASS"
    assert answers.answer("nobody/unknown", None) is None


def test_a_models_own_config_changing_its_verdict_is_counted_and_named():
    effects = own_config_effects(rows(), {PHI: {"field": "sliding_window", "runs": 1}})
    assert list(effects.model_id) == [PHI, "Qwen/Qwen3-8B"]
    assert list(effects.differs) == [True, False]
    line = own_config_line(effects)
    assert line.startswith("a model's own config changes its architecture's verdict for 1 of 2 models: ")
    assert f"{PHI} FAIL at compile (architecture twin PASS; field: sliding_window)" in line
    unnamed = own_config_line(own_config_effects(rows()))
    assert "field: not yet looked for" in unnamed


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
