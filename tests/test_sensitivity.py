"""A PASS that can fail: twins whose tokens depend on their layers, the perturbed run the measuring makes, and how a
row records whether its check caught it (issue 37)."""

from __future__ import annotations

import pytest
import torch

from conftest import result_row
from neuronhelpers.core import vocab
from neuronhelpers.store import card, dataset
from neuronhelpers.ui import explorer
from neuronhelpers.ui.explorer.detail import render_detail_html
from neuronhelpers.verdict.evidence import evidence_level
from neuronhelpers.verdict.perturb import middle_block, outputs_with, perturbation_target, perturbed, perturbed_outputs
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
    # taken before compiling (sentence-transformers, diffusers): a model with no stack is not measured, never a raise
    # that would fail its compile (measuring 0.5.2 raised there)
    assert perturbation_target(torch.nn.Linear(2, 2)) == {
        "not_measured": "the perturbed run failed: ValueError: Linear has no stack of repeated blocks to perturb"}
    assert outputs_with(perturbation_target(torch.nn.Linear(2, 2)), 0.1, lambda: 1 / 0)["not_measured"]


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
    few = {"tokens": [5, 6] * 16, "top_ids": [[5, 9]] * 32, "top_logits": [[5.0, 1.0]] * 32}
    moved_few = check_sensitivity(PARAMS, {"layer": "h.1", "size": 0.1, "tokens": [5, 7] * 16}, few)
    assert moved_few["check_sensitive"] is False  # 2 distinct tokens of 32: it proves little, though one moved
    assert "writes 2 distinct tokens, fewer than 8" in moved_few["perturbation"]
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
    assert "`gpt-sw3` as `gpt2`" in text and "`flux-kontext` uses `flux`'s" in text
    assert "`insensitive_check`" in text
    dataset.append_rows(tmp_path, [result_row("tiny/gpt2", check_sensitive=False, evidence="insensitive_check",
                                              perturbation="h.1 shifted by 10% noise: 0 of 32 tokens changed")])
    html = render_detail_html(explorer.model_detail(dataset.load_results(tmp_path), "tiny/gpt2"))
    assert "a perturbed model passed it too" in html and "0 of 32 tokens changed" in html
    assert "the decode step; the prompt&#x27;s prefill ran eagerly" in html or \
        "the decode step; the prompt's prefill ran eagerly" in html  # what generate() compiled, said per row


def _output_fingerprint(row) -> tuple | None:
    """What a twin's row says it computed: its tokens (generate), or its figures against the reference and under the
    perturbation (embeddings, images), which two runs share only when they computed the same numbers. None for a row
    whose check is insensitive: its outputs do not depend on its layers, and the row already says so."""
    if row["result"] != vocab.PASS or row["check_sensitive"] is False:
        return None
    if isinstance(row["tokens"], (list, tuple)) or hasattr(row["tokens"], "tolist"):
        return (row["task"], tuple(int(t) for t in row["tokens"]))
    return (row["task"], row["max_abs_diff"], row["psnr_db"], row["min_cosine"], row["perturbation"])


def test_no_two_twins_of_the_committed_catalog_computed_the_same_unless_they_share_one():
    """A variant twin that computed exactly what its base did (granite_speech_plus's 32 tokens, PixArt-Sigma's figures,
    the controlnets with zero outputs) stands for nothing of its own: each must differ, or be declared a shared twin
    (twins.pipelines.SHARES, twins.specs.SAME_COMPUTATION, both listed on the card)."""
    from pathlib import Path

    from packaging.version import Version

    from neuronhelpers.analysis.agreement import architecture_twin_rows
    from neuronhelpers.twins.pipelines import SHARES
    from neuronhelpers.twins.specs import SAME_COMPUTATION

    df = dataset.load_results(Path(__file__).resolve().parents[1] / "catalog")
    since = df["harness_version"].map(lambda v: isinstance(v, str) and Version(v) >= Version("0.4.0"))
    # architecture twins: a model twin whose config differs from its architecture's default only in sizes computes
    # what that architecture's twin does (the shrink makes them one twin), and stands for its model, not a variant
    rows = dataset.newest_per_model(architecture_twin_rows(df[since]),
                                    ["model_id", "compiler_version", "library_version"])
    assert len(rows) > 300  # the current pair, swept since the twins' weights were drawn to be sensitive (0.4.0)
    groups: dict[tuple, list[str]] = {}
    for _, row in rows.iterrows():
        fingerprint = _output_fingerprint(row)
        if fingerprint is not None:
            key = (row["compiler_version"], row["library_version"], *fingerprint)
            groups.setdefault(key, []).append(row["model_id"].removeprefix("tiny/"))

    def base(name):
        key = name.removeprefix("t2i-")
        return SHARES.get(key, SAME_COMPUTATION.get(key, (key,))[0])

    same = [names for names in groups.values() if len({base(name) for name in names}) > 1]
    assert not same, f"twins that computed exactly the same without sharing a twin: {same}"
    # and every declaration still holds (the card would say something false otherwise)
    prints = {row["model_id"].removeprefix("tiny/"): _output_fingerprint(row) for _, row in rows.iterrows()}
    stale = [kind for kind, (other, _) in SAME_COMPUTATION.items()
             if None not in (prints.get(kind), prints.get(other)) and prints[kind] != prints[other]]
    assert not stale, f"declared in SAME_COMPUTATION but computed differently now: {stale}"


@pytest.mark.slow
def test_a_twin_that_settles_on_one_token_gets_embeddings_that_bring_the_input_back(tmp_path):
    """qwen3_moe's twin with the config's own embeddings wrote one token 32 times and missed the perturbation; the
    builder keeps the first embeddings that meet the target and says so in TWIN.json, and a twin that met it with its
    own embeddings is saved unchanged."""
    from neuronhelpers.twins.specs import twin_spec
    from neuronhelpers.twins.text import write_text_twin
    from neuronhelpers.twins.weights import choose_embeddings

    for model_type, std in (("qwen3_moe", 0.3), ("llama", None)):
        folder = tmp_path / model_type
        write_text_twin(twin_spec(model_type), folder)
        before = (folder / "model.safetensors").read_bytes()
        chosen = choose_embeddings(twin_spec(model_type), folder)
        assert chosen["embedding_std"] == std and chosen["perturbation_changes"] is True
        assert chosen["distinct_tokens"] >= vocab.MIN_DISTINCT_TOKENS
        assert ((folder / "model.safetensors").read_bytes() == before) is (std is None)


def test_the_card_counts_pass_whose_check_could_not_fail_apart_per_pair():
    """The card's results table: per version pair, PASS (checks that could fail) and beside it PASS whose check could
    not have failed; the pass rate leaves the second out."""
    import pandas as pd

    from neuronhelpers.store import schema

    rows = pd.DataFrame([result_row("tiny/a", evidence="exact", check_sensitive=True),
                         result_row("tiny/b", evidence="insensitive_check", check_sensitive=False),
                         result_row("tiny/c", "FAIL")], columns=schema.COLUMN_NAMES)
    [counts] = card.result_counts(rows)
    assert (counts["pass"], counts["could_not"], counts["fail"], counts["rate"]) == (1, 1, 1, "50%")
    text = card.render_card(rows)
    assert "| inductor 2.13.0, transformers 5.23.0 | 1 | 1 | 1 | 0 | 0 | 50% |" in text


def test_a_gate_held_at_zero_is_opened_and_nothing_else_is():
    """mllama's cross-attention layers add ``tanh(gate) * layer`` with the gate at 0 in a fresh model: the twin ignored
    the image and a change to that layer changed no token. The twin opens such gates; a bias named after a gate, a gate
    already open and a wider parameter keep their values."""
    from neuronhelpers.twins.weights import open_zero_gates

    model = torch.nn.Module()
    model.cross_attn_attn_gate = torch.nn.Parameter(torch.zeros(1))
    model.gate_bias = torch.nn.Parameter(torch.zeros(1))
    model.tile_gate = torch.nn.Parameter(torch.tensor([0.25]))
    model.wide_gate = torch.nn.Parameter(torch.zeros(4))
    open_zero_gates(model)
    assert model.cross_attn_attn_gate.item() == 1.0 and model.gate_bias.item() == 0.0
    assert model.tile_gate.item() == 0.25 and not model.wide_gate.any()


@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["tiny/jetmoe", "tiny/mllama"])
def test_the_twins_that_barely_spoke_now_write_eight_tokens_a_change_reaches(model_id):
    """jetmoe wrote 2 distinct tokens at every embedding choice of before (the later (std, seed) choices find one) and
    mllama's perturbed middle layer was a cross-attention layer gated at 0 (now open): both twins now write at least
    vocab.MIN_DISTINCT_TOKENS distinct tokens that the measuring's perturbation changes."""
    import json

    from safetensors.torch import load_file

    from neuronhelpers.twins.build import build_twin

    folder = build_twin(model_id)
    chosen = json.loads((folder / "TWIN.json").read_text())["weights"]
    assert chosen["distinct_tokens"] >= vocab.MIN_DISTINCT_TOKENS and chosen["perturbation_changes"] is True, chosen
    gates = {k: v for k, v in load_file(folder / "model.safetensors").items() if k.endswith("cross_attn_attn_gate")}
    assert all(float(v) == 1.0 for v in gates.values()) and (bool(gates) is (model_id == "tiny/mllama"))
