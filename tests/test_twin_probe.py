"""The probe's repair rules, one test each: every rule is fed the error text transformers gives for it (no model is
built: the probe's state is real, its processor and model rebuilds are recorded instead)."""

import dataclasses
import re

import pytest
import torch
import transformers

from neuronhelpers.twins.overrides import Override
from neuronhelpers.twins.vision import probe
from neuronhelpers.twins.vision.probe import GIVE_UP, REPAIRS, RETRY, ProbeState, repair

# The error each rule repairs, as the model or processor raises it.
EXAMPLES = {
    "named_token": "Audio inputs were provided, but the tokenizer does not have an `audio_token` defined.",
    "token_id_attribute": "'LlavaConfig' object has no attribute 'video_token_id'",
    "image_token_unused": "Image features and image tokens do not match, tokens: 0, features: 16",
    "repeated_token": "Image features and image tokens do not match, tokens: 1, features: 3",
    "sequence_length": "Image features and image tokens do not match, tokens: 4, features: 16",
}


class FakeTokenizer:
    bos_token_id, eos_token_id, pad_token_id = 1, 2, 0
    added_tokens_decoder = {0: "<|pad|>", 1: "<|bos|>", 2: "<|eos|>", 7: "<|image|>", 9: "<|patch|>"}

    def convert_tokens_to_ids(self, token):
        return 77


class FakeProcessor:
    def __init__(self, **attrs):
        self.tokenizer = FakeTokenizer()
        self.image_processor = type("ImageProcessor", (), {"image_seq_length": None})()
        self.__dict__.update(attrs)


@dataclasses.dataclass
class RecordedState(ProbeState):
    """The probe's state with its rebuilds recorded: the processor rebuilt as ``next_trial``, no model made."""

    calls: list = dataclasses.field(default_factory=list)
    next_trial: object = None

    def rebuild(self):
        self.calls.append(("rebuild", self.seq_len, dict(self.ov.processor)))
        self.trial = self.next_trial or FakeProcessor()

    def remake_model(self):
        self.calls.append("remake_model")

    def resync(self):
        self.calls.append("resync")


def _state(config=None, inputs=None, trial=None, **kwargs):
    config = config or transformers.LlavaConfig()
    model = type("Model", (), {"config": config})()
    return RecordedState("llava", config, {}, {}, [], Override(why=""), model=model, trial=trial or FakeProcessor(),
                         inputs=inputs, **kwargs)


def test_every_rule_has_a_name_a_reason_and_an_example_it_matches():
    assert [rule.name for rule in REPAIRS] == list(EXAMPLES)
    for rule in REPAIRS:
        assert len(rule.why) > 20 and isinstance(rule.pattern, re.Pattern)
        assert rule.pattern.search(EXAMPLES[rule.name]), rule.name
    assert repair(_state(), "RuntimeError: shapes cannot be multiplied") == GIVE_UP  # no rule: the next placeholder


def test_named_token_gives_the_tokenizer_the_token_the_processor_asks_for(monkeypatch):
    wired = []
    monkeypatch.setattr(probe, "wire_token_ids", lambda config, trial, named, extra: wired.append(dict(named)))
    state = _state()
    assert repair(state, EXAMPLES["named_token"]) == RETRY
    assert state.named == {"audio_token": "<|audio|>"} and wired == [{"audio_token": "<|audio|>"}]
    assert [c if isinstance(c, str) else c[0] for c in state.calls] == ["rebuild", "resync"]
    # already named: the rule does not apply (nor does any other), so the probe gives up on this placeholder
    assert repair(state, EXAMPLES["named_token"]) == GIVE_UP


def test_token_id_attribute_sets_a_fresh_token_on_the_config_that_lacks_it():
    state = _state()
    assert repair(state, EXAMPLES["token_id_attribute"]) == RETRY
    assert state.extra == ["<|video|>"] and state.config.video_token_id == 77  # FakeTokenizer's id for it
    assert [c if isinstance(c, str) else c[0] for c in state.calls] == ["rebuild", "resync"]


def test_image_token_unused_points_the_image_token_at_the_token_the_processor_repeats():
    state = _state(inputs={"input_ids": torch.tensor([[1, 9, 9, 9, 7, 5, 2]])})
    assert repair(state, EXAMPLES["image_token_unused"]) == RETRY
    assert state.config.image_token_id == 9 and state.calls == ["remake_model"]
    # no special token in the prompt at all: nothing to point at
    assert repair(_state(inputs={"input_ids": torch.tensor([[3, 4, 5]])}), EXAMPLES["image_token_unused"]) == GIVE_UP


def test_repeated_token_makes_the_token_repeated_once_per_feature_the_image_token():
    config = transformers.LlavaConfig(image_token_id=7)
    state = _state(config=config, inputs={"input_ids": torch.tensor([[1, 7, 9, 9, 9, 2]])})
    assert repair(state, EXAMPLES["repeated_token"]) == RETRY
    assert config.image_token_id == 9 and state.calls == ["remake_model"]


def test_sequence_length_resizes_the_processors_image_sequence_to_the_features():
    state = _state(trial=FakeProcessor(image_seq_length=4), next_trial=FakeProcessor(image_seq_length=4))
    assert repair(state, EXAMPLES["sequence_length"]) == RETRY
    assert state.seq_len == 16 and state.calls == [("rebuild", 16, {})]
    assert state.trial.image_seq_length == 16 and state.trial.image_processor.image_seq_length == 16
    # a processor that counts additional image tokens instead: the override's processor kwargs grow by the difference
    state = _state(trial=FakeProcessor(num_additional_image_tokens=1))
    assert repair(state, EXAMPLES["sequence_length"]) == RETRY
    assert state.ov.processor == {"num_additional_image_tokens": 13} and state.seq_len is None
    # as many tokens as features: not a sequence-length problem
    assert repair(_state(), "Image features and image tokens do not match, tokens: 16, features: 16") == GIVE_UP


def test_a_feature_numel_is_counted_in_features():
    state = _state(config=transformers.LlavaConfig(text_config={"hidden_size": 64}))
    assert probe.counts(state, probe._MISMATCH.search("tokens: 4, features: 1024")) == (4, 16)


def test_mismatch_rules_without_the_prompts_inputs_fall_through_to_the_sequence_length():
    state = _state(trial=FakeProcessor(image_seq_length=4), inputs=None)
    assert repair(state, EXAMPLES["repeated_token"]) == RETRY  # tokens 1, features 3: 4 tokens per view * 3
    assert state.seq_len == 12 and state.calls == [("rebuild", 12, {})]


def test_a_twin_whose_probe_failed_is_not_saved_and_says_why(monkeypatch, tmp_path):
    """Before, the probe's error was dropped and the twin saved anyway (it then failed its eager check, or worse,
    passed it with the image ignored); now the probe's verdict is the twin's: UNTESTED (twin), "probe failed"."""
    from neuronhelpers.twins import build
    from neuronhelpers.twins.specs import TwinError
    from neuronhelpers.twins.vision import build as vision_build

    monkeypatch.setattr(vision_build, "_assemble", lambda model_type, ov, spec=None: None)
    monkeypatch.setattr(vision_build, "probe", lambda state: (None, None, "ValueError: 2 image tokens for 1 image"))
    with pytest.raises(TwinError, match="2 image tokens for 1 image") as caught:
        vision_build.build_vlm_twin("llava", tmp_path / "twin")
    assert caught.value.twin_step == "probe" and not (tmp_path / "twin").exists()
    unavailable = build._unavailable(build.twin_spec("llava"), caught.value)
    assert unavailable.stage == "twin" and unavailable.reason.startswith("probe failed: TwinError: ValueError")
    assert unavailable.cause.startswith("twin probe: ")
