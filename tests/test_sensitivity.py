"""A PASS that can fail: twins whose tokens depend on their layers, the perturbed run the measuring makes, and how a
row records whether its check caught it (issue 37)."""

from __future__ import annotations

import pytest
import torch
from conftest import result_row

from neuronhelpers.core import vocab
from neuronhelpers.run.perturb import middle_block, perturbed, perturbed_outputs
from neuronhelpers.store import card, dataset
from neuronhelpers.ui import explorer
from neuronhelpers.ui.explorer.detail import render_detail_html
from neuronhelpers.verdict.evidence import evidence_level
from neuronhelpers.verdict.verify import check_sensitivity

PARAMS = {"library": vocab.TRANSFORMERS, "dtype": "float32"}


def _twin_model(model_type: str, *, decisive: bool):
    """The causal LM a text twin of ``model_type`` is built from (its shrunk config and the twins' tokenizer), with
    the twins' weights (``decisive``) or transformers' own initialisation with the head tied (as before issue 37)."""
    from transformers import AutoModelForCausalLM

    from neuronhelpers.twins.shrink import text_config
    from neuronhelpers.twins.specs import SEED, twin_spec
    from neuronhelpers.twins.tokenizers import text_tokenizer
    from neuronhelpers.twins.weights import decisive_weights, untie_output_head

    tok = text_tokenizer()
    spec = twin_spec(model_type)
    config = text_config(spec.model_type, tok, spec.overrides)
    if decisive:
        untie_output_head(config)
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config).eval()
    if decisive:
        decisive_weights(model, SEED)
    return model, tok


def _tokens(model, tok) -> list[int]:
    inputs = tok("Write a short story about a robot who learns to paint.", return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                             pad_token_id=tok.pad_token_id)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


@pytest.mark.parametrize("model_type", ["gpt2", "bloom", "gemma"])
def test_a_twins_tokens_depend_on_its_middle_layer(model_type):
    """gpt2 (Conv1D), bloom and gemma tied their head to the embeddings and wrote one token 32 times; with the twins'
    weights the head is their own, the tokens vary, and a 10 % change to the middle layer changes them."""
    model, tok = _twin_model(model_type, decisive=True)
    head, embeddings = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    assert head.data_ptr() != embeddings.data_ptr()
    tokens = _tokens(model, tok)
    assert len(set(tokens)) >= 8, tokens
    with perturbed(middle_block(model)[1], vocab.PERTURBATION_SIZE[vocab.TRANSFORMERS]):
        assert _tokens(model, tok) != tokens
    assert _tokens(model, tok) == tokens  # the weights came back exactly


def test_the_old_twin_weights_wrote_one_token_and_missed_the_same_change():
    """The failure this guards against, kept visible: the tied, scaled head of before echoes one token and the same
    perturbation goes unseen."""
    model, tok = _twin_model("gpt2", decisive=False)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(20.0)  # the old LOGIT_SCALE, through the tied embeddings
    tokens = _tokens(model, tok)
    assert len(set(tokens)) == 1
    with perturbed(middle_block(model)[1], vocab.PERTURBATION_SIZE[vocab.TRANSFORMERS]):
        assert _tokens(model, tok) == tokens


def test_the_middle_block_is_in_the_largest_stack_and_the_weights_are_restored_after_an_error():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.small = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
            self.layers = torch.nn.ModuleList([torch.nn.Linear(8, 8) for _ in range(5)])

    model = Model()
    name, block = middle_block(model)
    assert name == "layers.2" and block is model.layers[2]
    before = block.weight.detach().clone()
    out = perturbed_outputs(model, 0.1, lambda: (_ for _ in ()).throw(RuntimeError("device lost")))
    assert out == {"not_measured": "the perturbed run failed: RuntimeError: device lost"}
    assert torch.equal(block.weight, before)
    seen = perturbed_outputs(model, 0.1, lambda: {"changed": not torch.equal(model.layers[2].weight, before)})
    assert seen == {"layer": "layers.2", "size": 0.1, "changed": True}
    with pytest.raises(ValueError, match="no stack of repeated blocks"):
        middle_block(torch.nn.Linear(2, 2))


def test_check_sensitivity_uses_the_runs_own_rule():
    reference = {"tokens": [1, 2, 3, 4], "top_ids": [[1, 9]] * 4, "top_logits": [[5.0, 1.0]] * 4}
    caught = check_sensitivity(PARAMS, {"layer": "model.layers.1", "size": 0.1, "tokens": [1, 2, 7, 8]}, reference)
    assert caught["check_sensitive"] is True
    assert caught["perturbation"] == "model.layers.1 shifted by 10% noise: 2 of 4 tokens changed: caught"
    same = check_sensitivity(PARAMS, {"layer": "h.1", "size": 0.1, "tokens": [1, 2, 3, 4]}, reference)
    assert same["check_sensitive"] is False and same["perturbation"].endswith("0 of 4 tokens changed: not caught")
    tied = {**reference, "top_logits": [[5.0, 4.9995]] * 4, "top_ids": [[1, 2, 3, 4, 8]] * 4}
    near = check_sensitivity(PARAMS, {"layer": "h.1", "size": 0.1, "tokens": [1, 2, 3, 8]}, tied)
    assert near["check_sensitive"] is False and "near tie" in near["perturbation"]  # the rule's near-tie passes it
    skipped = check_sensitivity(PARAMS, {"not_measured": "sharded over 4 ranks"}, reference)
    assert skipped == {"check_sensitive": None, "perturbation": "not measured: sharded over 4 ranks"}
    assert check_sensitivity(PARAMS, None, reference) == {"check_sensitive": None, "perturbation": None}
    embeddings = {"library": vocab.SENTENCE_TRANSFORMERS, "dtype": "float32"}
    moved = check_sensitivity(embeddings, {"layer": "0.model.encoder.layer.1", "size": 0.1,
                                           "embeddings": [[1.0, 0.5]]}, {"embeddings": [[1.0, 0.0]]})
    assert moved["check_sensitive"] is True and "max abs difference 0.5 (tolerance 0.0001)" in moved["perturbation"]


def test_an_insensitive_pass_is_never_called_exact_and_the_card_and_detail_say_so(tmp_path):
    assert evidence_level({"result": "PASS", "verification": "exact", "check_sensitive": False}) == \
        vocab.EVIDENCE_INSENSITIVE
    assert evidence_level({"result": "PASS", "verification": "exact", "check_sensitive": True}) == vocab.EVIDENCE_EXACT
    assert evidence_level({"result": "PASS", "verification": "exact"}) == vocab.EVIDENCE_EXACT  # not measured
    text = card.render_card()
    assert "## Sensitivity (can the check fail?)" in text and "transformers 10%" in text
    assert "`insensitive_check`" in text
    dataset.append_rows(tmp_path, [result_row("tiny/gpt2", check_sensitive=False, evidence="insensitive_check",
                                              perturbation="h.1 shifted by 10% noise: 0 of 32 tokens changed")])
    html = render_detail_html(explorer.model_detail(dataset.load_results(tmp_path), "tiny/gpt2"))
    assert "a perturbed model passed it too" in html and "0 of 32 tokens changed" in html
