"""Every twin in the list builds offline and loads back with from_pretrained (no compile)."""

import importlib.util
import json

import pytest
import torch
import transformers

from neuronhelpers import twins
from neuronhelpers.errors import UserError

HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


def test_twin_list_covers_the_required_architectures():
    text = {s.model_type for s in twins.TEXT_TWINS}
    vlm = {s.model_type for s in twins.VLM_TWINS}
    required = {"llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3", "granite", "olmo2",
                "smollm3", "gpt2", "gpt_neox", "falcon", "starcoder2", "qwen3_moe", "mixtral"}
    assert required <= text
    assert {"llava", "gemma3"} <= vlm and vlm & {"qwen2_vl", "qwen2_5_vl"} and vlm & {"idefics3", "smolvlm"}
    assert len(vlm) >= 4


def test_unknown_twin_names_the_choices():
    with pytest.raises(UserError, match="unknown twin 'tiny/nope'.*tiny/qwen3"):
        twins.twin_spec("tiny/nope")


def test_twin_is_cached_and_reused():
    first = twins.build_twin("tiny/llama")
    stamp = (first / "config.json").stat().st_mtime_ns
    assert twins.build_twin("tiny/llama") == first
    assert (first / "config.json").stat().st_mtime_ns == stamp
    assert json.loads((first / "TWIN.json").read_text())["twin_of"] == "llama"


def _load_processor_or_tokenizer(spec, path):
    if spec.task == twins.IMAGE_TEXT_TO_TEXT:
        return transformers.AutoProcessor.from_pretrained(path)
    return transformers.AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("model_type", sorted(twins.TWINS))
def test_twin_builds_and_loads(model_type):
    spec = twins.TWINS[model_type]
    path = twins.build_twin(model_type)
    config = transformers.AutoConfig.from_pretrained(path)
    assert config.model_type == model_type
    auto = transformers.AutoModelForImageTextToText if spec.task == twins.IMAGE_TEXT_TO_TEXT else transformers.AutoModelForCausalLM
    model = auto.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) < 2_000_000, "a twin must stay tiny"
    tok = transformers.AutoTokenizer.from_pretrained(path)
    ids = tok("The quick brown fox", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape[-1] == model.config.get_text_config().vocab_size
    assert torch.isfinite(logits).all()
    if model_type == "qwen2_vl" and not HAS_TORCHVISION:
        # Known limitation of transformers: Qwen2VLProcessor (its video processor) needs torchvision.
        with pytest.raises(ImportError, match="(?i)torchvision"):
            _load_processor_or_tokenizer(spec, path)
    else:
        _load_processor_or_tokenizer(spec, path)
