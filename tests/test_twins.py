"""Tiny twins: one per architecture of the installed transformers, built offline, checked to run eagerly;
an architecture whose twin cannot be built is UNTESTED with its reason, never FAIL."""

import json

import pytest
import torch
import transformers
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
)

from neuronhelpers.core.errors import UserError
from neuronhelpers.models.selected import selected_twins
from neuronhelpers.twins import build
from neuronhelpers.twins.overrides import OVERRIDES, Override, text_overrides


def test_architectures_are_every_causal_lm_and_image_text_to_text_type_of_the_installed_release():
    specs = [s for s in build.architectures() if s.task in (build.TEXT_GENERATION, build.IMAGE_TEXT_TO_TEXT)]
    types = [s.model_type for s in specs]
    assert len(types) == len(set(types))  # one twin per architecture (the library twins reuse model types)
    assert len({s.key for s in build.architectures()}) == len(build.architectures())  # and every twin its own name
    assert set(types) == set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    vision = {s.model_type for s in specs if s.task == build.IMAGE_TEXT_TO_TEXT}
    assert vision == set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    assert [s.model_type for s in build.architectures(build.TEXT_GENERATION)] == sorted(
        set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - vision)


def test_every_override_names_a_real_architecture_and_gives_a_reason():
    known = {s.model_type for s in build.architectures()}
    for model_type, entry in OVERRIDES.items():
        assert model_type in known and entry != Override(entry.why) and len(entry.why) > 20, model_type
        assert entry.text_twin is None or entry.text_twin in known, model_type


def test_unknown_twin_suggests_close_names():
    with pytest.raises(UserError, match="unknown twin 'tiny/lama'.*did you mean tiny/llama"):
        build.twin_spec("tiny/lama")


def test_twin_is_cached_and_reused():
    first = build.build_twin("tiny/llama")
    stamp = (first / "config.json").stat().st_mtime_ns
    assert build.build_twin("tiny/llama") == first
    assert (first / "config.json").stat().st_mtime_ns == stamp
    record = json.loads((first / "TWIN.json").read_text())
    weights = record.pop("weights")  # a generating twin records the embeddings chosen for it (twins/weights.py)
    files = record.pop("files")  # what the build wrote, checked on every use (a damaged twin is built again)
    assert files["config.json"]["size"] == (first / "config.json").stat().st_size and "TWIN.json" not in files
    assert record == {"twin_of": "llama", "name": "llama", "task": build.TEXT_GENERATION, "seed": 0,
                      "format": build.TWIN_FORMAT}
    assert weights["embedding_std"] is None and weights["distinct_tokens"] >= 8 and weights["perturbation_changes"]


def test_a_hybrid_architecture_keeps_every_kind_of_layer_when_shrunk():
    config = build.shrunk_config("gemma3_text", build.TEXT_SHRINK)
    assert config.num_hidden_layers == 2 and set(config.layer_types) == {"sliding_attention", "full_attention"}
    jamba = build.shrunk_config("jamba", build.TEXT_SHRINK, text_overrides("jamba"))
    assert set(jamba.layers_block_type) == {"mamba", "attention"}


def test_a_twin_that_cannot_be_built_is_unavailable_with_its_reason_and_remembered(monkeypatch):
    broken = build.TwinSpec("llama", overrides={"hidden_act": "no_such_activation"})
    monkeypatch.setattr(build, "twin_spec", lambda _: broken)
    with pytest.raises(build.TwinUnavailable) as caught:
        build.build_twin("llama", isolated=False)
    assert caught.value.stage == "twin" and "no_such_activation" in caught.value.reason
    assert caught.value.cause.startswith("twin ")
    monkeypatch.setattr(build, "_write_twin", lambda *a: pytest.fail("built again"))
    with pytest.raises(build.TwinUnavailable):  # remembered next to the twins: no second build
        build.build_twin("llama", isolated=False)


def test_a_sweep_records_an_architecture_without_a_twin_as_untested_never_fail(tmp_path):
    from neuronhelpers.store import dataset
    from neuronhelpers.sweep.local import sweep_models as sweep

    # musicgen is mapped as a causal LM, but its config is an audio model's (text encoder + audio codec):
    # no text-only twin can be built from it with this transformers.
    rows = sweep(["tiny/musicgen"], tmp_path, progress=False)
    assert [(r["result"], r["stage"]) for r in rows] == [("UNTESTED", "twin")], rows[0]["error"]
    assert rows[0]["cause"] and "musicgen" in rows[0]["error"] and rows[0]["neuron_cores"] is None
    assert list(dataset.load_results(tmp_path).result) == ["UNTESTED"]
    assert sweep(["tiny/musicgen"], tmp_path, progress=False) == []  # recorded: a resumed sweep skips it


def _load_processor_or_tokenizer(spec, path):
    if spec.task == build.IMAGE_TEXT_TO_TEXT:
        return transformers.AutoProcessor.from_pretrained(path)
    return transformers.AutoTokenizer.from_pretrained(path)


TRANSFORMERS_TWINS = [m for m in selected_twins()
                      if build.twin_spec(m).task in (build.TEXT_GENERATION, build.IMAGE_TEXT_TO_TEXT)]


@pytest.mark.slow
@pytest.mark.parametrize("model_id", TRANSFORMERS_TWINS)
def test_the_selected_transformers_twins_build_load_back_and_stay_tiny(model_id):
    spec = build.twin_spec(model_id)
    path = build.build_twin(model_id)
    config = transformers.AutoConfig.from_pretrained(path)
    assert config.model_type == spec.model_type
    auto = (transformers.AutoModelForImageTextToText if spec.task == build.IMAGE_TEXT_TO_TEXT
            else transformers.AutoModelForCausalLM)
    model = auto.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) < build.MAX_TWIN_PARAMETERS, "a twin must stay tiny"
    tok = transformers.AutoTokenizer.from_pretrained(path)
    ids = tok("The quick brown fox", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape[-1] == model.config.get_text_config().vocab_size
    assert torch.isfinite(logits).all()
    _load_processor_or_tokenizer(spec, path)


def test_a_video_processor_without_torchvision_is_a_missing_package_not_a_twin_failure(monkeypatch, tmp_path):
    """Found in the torch 2.13.0 catalog (a CPU wheel with no torchvision): Qwen2-VL-family twins were UNTESTED
    (twin) "needs a 'video_processor' the twin cannot build"; the reason is the missing package."""
    from neuronhelpers.twins.vision import build as vision_build
    from neuronhelpers.verdict import causes

    # torchvision is installed here: the one place that asks whether a module is installed is told it is not
    real = causes.module_installed
    monkeypatch.setattr(causes, "module_installed", lambda name: name != "torchvision" and real(name))
    with pytest.raises(Exception) as caught:
        vision_build.build_vlm_twin("qwen2_vl", tmp_path / "twin")
    unavailable = build._unavailable(build.twin_spec("qwen2_vl"), caught.value)
    assert unavailable.stage == "dependency" and unavailable.cause == "missing package: torchvision"
