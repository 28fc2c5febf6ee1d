"""The one override table of the twins: one schema, every field read by the builders, every entry with its reason,
a family fixed once (its text-only model type takes the entry's text attributes)."""

import ast
import dataclasses
from pathlib import Path

import pytest
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
)

from neuronhelpers.twins import overrides
from neuronhelpers.twins.overrides import NO_OVERRIDE, OVERRIDES, Override, override, reason, text_overrides
from neuronhelpers.twins.specs import TwinError, embedding_types, twin_spec

TWINS = Path(overrides.__file__).parent
FIELDS = [f.name for f in dataclasses.fields(Override)]


def _override_reads() -> set[str]:
    """Attributes read from an Override anywhere in the twins package: ``ov.x``, ``entry.x``, ``state.ov.x``,
    ``override(t).x``."""
    read = set()
    for path in TWINS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            value = node.value
            if (isinstance(value, ast.Name) and value.id in ("ov", "entry")) or (
                    isinstance(value, ast.Attribute) and value.attr == "ov") or (
                    isinstance(value, ast.Call) and getattr(value.func, "id", None) == "override"):
                read.add(node.attr)
    return read


def test_every_field_of_the_schema_is_read_by_the_builders_and_documented():
    assert set(FIELDS) <= _override_reads(), set(FIELDS) - _override_reads()
    for name in FIELDS:
        assert f"``{name}``" in overrides.__doc__, name


def test_every_entry_names_a_mapped_architecture_sets_something_and_says_why():
    # the sentence-transformers twins' encoders take their entries from the same table
    mapped = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES) | \
        set(embedding_types())
    for model_type, entry in OVERRIDES.items():
        assert isinstance(entry, Override) and model_type in mapped, model_type
        assert len(entry.why) > 20 and "\n" not in entry.why, model_type
        assert entry != Override(entry.why), f"{model_type}: an entry that sets nothing"
        if entry.text_twin:  # the family's text-only type: a causal LM of its own, with no entry of its own
            assert entry.text_twin in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and entry.text_twin not in OVERRIDES
            assert entry.text, model_type


@pytest.mark.parametrize("family", ["cohere_compass", "qwen4_exp", "dots3_note"])
def test_a_family_is_fixed_once_for_its_vision_and_its_text_twin(family):
    entry = OVERRIDES[family]
    assert twin_spec(entry.text_twin).overrides == entry.text  # the text twin's spec (and digest) carries them
    assert twin_spec(family).overrides == {}  # a vision-language spec carries none: its builder reads the table
    assert reason(entry.text_twin) == entry.why


def test_text_overrides_are_what_a_text_twin_spec_holds():
    assert text_overrides("jamba") == OVERRIDES["jamba"].text
    assert text_overrides("musicgen") == {"no_twin": True}
    assert text_overrides("llama") == {} and override("llama") is NO_OVERRIDE


def test_no_twin_is_refused_with_its_reason_by_both_writers(tmp_path):
    from neuronhelpers.twins.text import write_text_twin
    from neuronhelpers.twins.vision.build import build_vlm_twin

    with pytest.raises(ValueError, match="not a text generator on its own: MusicgenForCausalLM generates audio"):
        write_text_twin(twin_spec("musicgen"), tmp_path)
    with pytest.raises(TwinError, match="mobilenetv5_300m_enc"):
        build_vlm_twin("gemma3n", tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_table_is_data_not_state():
    entry = OVERRIDES["emu3"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.why = "changed"
    assert isinstance(entry.extra_tokens, tuple)


DSA_FAMILIES = {"deepseek_v32": "text", "glm_moe_dsa": "text", "axk2": "text", "mistral_large4": "vision"}


@pytest.mark.parametrize("model_type", sorted(DSA_FAMILIES))
def test_a_dsa_twin_indexer_selects_every_key_as_checkpoints_do_under_the_protocol(model_type):
    """Checkpoints keep index_topk 2048, above the prompt + 32 tokens: the indexer selects every key. A shrunk top-k
    (the generic 8) made the twin pick among exact ReLU-zero score ties that the reference's dynamic cache and the
    recipe's static cache break differently (a mismatch that was no compiler's)."""
    from neuronhelpers.twins.shrink import TEXT_SHRINK, build_config, shrunk_config

    assert text_overrides(model_type) == {"index_topk": 2048} == OVERRIDES[model_type].text
    if DSA_FAMILIES[model_type] == "text":
        config = shrunk_config(model_type, TEXT_SHRINK, text_overrides(model_type))
    else:
        config = build_config(model_type, override(model_type)).get_text_config()
    assert config.hidden_size == TEXT_SHRINK["hidden_size"]  # still a twin: shrunk everywhere else
    assert config.index_n_heads == TEXT_SHRINK["index_n_heads"]  # and its indexer still built (and run)
    assert config.index_topk >= config.max_position_embeddings, (config.index_topk, config.max_position_embeddings)


def test_glm5_next_keeps_the_generic_indexer_sizes():
    """glm5_next (pooled indexer) passes with the generic sizes; its index_topk must stay a multiple of index_kpool."""
    from neuronhelpers.twins.shrink import TEXT_SHRINK, build_config

    assert "glm5_next" not in OVERRIDES
    text = build_config("glm5_next", override("glm5_next")).get_text_config()
    assert text.index_topk == TEXT_SHRINK["index_topk"] and text.index_topk % text.index_kpool == 0
