"""The probe: the processor's prompt run through the model once (``generate``), for each place the prompt may put
the image, and the build repaired where the model's own error points. Each repair is a named rule (``REPAIRS``): a
pattern of the error text and the function that applies it; ``tests/test_twin_probe.py`` feeds each rule the error
it matches.

- ``named_token``        "tokenizer does not have a `x_token`": the processor asks the tokenizer for a named token
- ``token_id_attribute`` "'XConfig' object has no attribute 'x_token_id'": the model reads a token id its default
                         config lacks
- ``image_token_unused`` "tokens: 0, features: N": the config's image token is not the one the processor repeats
- ``repeated_token``     "tokens: T, features: N": another of the processor's tokens is repeated once per feature
- ``sequence_length``    "tokens: T, features: N": the processor's image sequence length is resized to the features
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable

from neuronhelpers.core.errors import first_line
from neuronhelpers.twins.configs import get, sync_vocab, walk_configs
from neuronhelpers.twins.overrides import Override
from neuronhelpers.twins.specs import SEED
from neuronhelpers.twins.tokenizers import token_for
from neuronhelpers.twins.vision.processors import SEQ_NAMES, build_processor, placeholder_candidates
from neuronhelpers.twins.vision.tokens import image_token_keys, wire_token_ids

PROMPT = "Describe this image in one sentence."
_ATTEMPTS = 6
_BRACKETED = re.compile(r"<[^<>\s]{1,48}>|\[[A-Z][A-Z0-9_]{1,30}\]|<\|[^|\s]{1,40}\|>")
_MISMATCH = re.compile(r"tokens:?\s*(?:tensor\()?(\d+)\)?,?\s*features:?\s*(?:tensor\()?(\d+)")
RETRY, GIVE_UP = "retry", "give up"  # a rule's outcome: run the prompt again, or try the next placeholder


def test_image():
    """The recipe's test image (a PIL 64x64 gradient), so the probe sees what the eager check will."""
    from neuronhelpers.recipes.transformers_generate import test_image as recipe_image

    return recipe_image()


def prompt_inputs(processor):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return processor(text=text, images=[test_image()], return_tensors="pt")


def generate(model, processor, new_tokens=4):
    import torch

    inputs = prompt_inputs(processor)
    dtype = next(model.parameters()).dtype  # floats in the model's dtype, as the recipe passes them
    inputs = {k: (v.to(dtype) if hasattr(v, "is_floating_point") and v.is_floating_point() else v)
              for k, v in inputs.items()}
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, do_sample=False)
    seq = out.sequences if hasattr(out, "sequences") else out
    prompt_len = inputs["input_ids"].shape[1] if "input_ids" in inputs else 0
    if getattr(model.config, "is_encoder_decoder", False):
        return seq.shape[1] - 1  # decoder starts from the start token
    return seq.shape[1] - prompt_len


def make_model(config):
    import torch
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(SEED)
    model = AutoModelForImageTextToText.from_config(config)
    model.eval()
    return model


def _expansion(processor):
    """The text the processor makes of the prompt (placeholders expanded), and its input ids."""
    captured = {}
    original = processor.get_text_with_replacements

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        captured["text"] = out[0]
        return out

    processor.get_text_with_replacements = spy
    try:
        inputs = prompt_inputs(processor)
    finally:
        del processor.get_text_with_replacements
    text = captured.get("text")
    return (text[0] if isinstance(text, list) and text else text or ""), inputs


def unknown_tokens(text, tok):
    """Bracketed token strings in the expanded prompt that the vocabulary lacks (they would be split into bytes)."""
    vocab = tok.get_vocab()
    return [t for t in dict.fromkeys(_BRACKETED.findall(text)) if t not in vocab]


@dataclass
class ProbeState:
    """One build's probe: what the repairs change (config, tokens, override, model) and the current trial (placeholder,
    sequence length, processor, the last inputs). Passed to every rule; lives for one build only."""

    model_type: str
    config: object
    parts: dict
    named: dict
    extra: list
    ov: Override
    model: object = None
    placeholder: str | None = None
    seq_len: int | None = None
    trial: object = None
    inputs: object = None

    def rebuild(self):
        """The processor built again for the current placeholder and sequence length."""
        self.trial = build_processor(self.model_type, self.config, self.parts, self.named, self.extra, self.ov,
                                     seq_len=self.seq_len, placeholder=self.placeholder)

    def remake_model(self):
        self.model = make_model(self.config)

    def resync(self):
        """The config's vocabularies synced to the trial's tokenizer, and the model made again from the config."""
        sync_vocab(self.config, self.trial.tokenizer)
        self.remake_model()

    def special_ids(self) -> set:
        tok = self.trial.tokenizer
        return set(tok.added_tokens_decoder) - {tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}


@dataclass(frozen=True)
class Repair:
    """A probe repair: the error ``pattern`` it matches and ``apply(state, match)`` -> RETRY, GIVE_UP, or None (it
    does not apply after all: the next rule is tried)."""

    name: str
    pattern: re.Pattern
    apply: Callable
    why: str


def _named_token(state: ProbeState, match):
    token = match.group(1)
    if token in state.named:
        return None
    state.named[token] = token_for(token)
    state.rebuild()
    wire_token_ids(state.config, state.trial, state.named, state.extra)
    state.resync()
    return RETRY


def _token_id_attribute(state: ProbeState, match):
    cls, attribute = match.group(1), match.group(2)
    for _path, sub, _role in walk_configs(state.config):
        if type(sub).__name__ == cls:
            fresh = token_for(attribute.rsplit("_", 1)[0])
            if fresh not in state.extra:
                state.extra.append(fresh)
            state.rebuild()
            setattr(sub, attribute, state.trial.tokenizer.convert_tokens_to_ids(fresh))
            state.resync()
            break
    return RETRY


def counts(state: ProbeState, match) -> tuple[int, int]:
    """(image tokens, image features) of a mismatch error; a feature numel (some models report it) counted in
    features."""
    tokens, features = int(match.group(1)), int(match.group(2))
    width = state.model.config.get_text_config().hidden_size
    if features > 256 and features % width == 0:
        features //= width
    return tokens, features


def _image_token_unused(state: ProbeState, match):
    tokens, features = counts(state, match)
    if tokens != 0 or state.inputs is None:
        return None
    ids = state.inputs["input_ids"][0].tolist()
    specials = state.special_ids()
    repeated = {i: ids.count(i) for i in set(ids) if i in specials}
    keys = image_token_keys(state.config)
    if not repeated or not keys:
        return GIVE_UP
    best = max(repeated, key=lambda i: (repeated[i], i))
    for sub, key in keys:
        setattr(sub, key, best)
    state.remake_model()
    return RETRY


def _repeated_token(state: ProbeState, match):
    tokens, features = counts(state, match)
    if state.inputs is None or features == tokens:
        return None
    ids = state.inputs["input_ids"][0].tolist()
    specials = state.special_ids()
    repeated = [i for i in set(ids) if i in specials and ids.count(i) == features]
    keys = image_token_keys(state.config)
    if len(repeated) == 1 and keys and not all(get(sub, key) == repeated[0] for sub, key in keys):
        for sub, key in keys:
            setattr(sub, key, repeated[0])
        state.remake_model()
        return RETRY
    return None


def _sequence_length(state: ProbeState, match):
    tokens, features = counts(state, match)
    if features == tokens:
        return GIVE_UP  # not a sequence length problem
    trial = state.trial
    has_seq = any(isinstance(getattr(trial, n, None), int) for n in SEQ_NAMES)
    if hasattr(trial, "num_additional_image_tokens") and not has_seq:
        extra_tokens = trial.num_additional_image_tokens + features - tokens
        state.ov = dataclasses.replace(state.ov, processor={**state.ov.processor,
                                                            "num_additional_image_tokens": extra_tokens})
    else:
        current = next((getattr(trial, n) for n in SEQ_NAMES if isinstance(getattr(trial, n, None), int)), None)
        if current is None:
            current = getattr(trial.image_processor, "image_seq_length", None)
        # the processor may repeat its sequence per view (tiles): scale it by features / tokens
        state.seq_len = current * features // tokens if isinstance(current, int) and current and (
            current * features) % tokens == 0 else features
    state.rebuild()
    if state.seq_len is not None:
        if hasattr(state.trial.image_processor, "image_seq_length"):
            state.trial.image_processor.image_seq_length = state.seq_len
        for name in SEQ_NAMES:
            if hasattr(state.trial, name):
                setattr(state.trial, name, state.seq_len)
    return RETRY


REPAIRS: list[Repair] = [
    Repair("named_token", re.compile(r"tokenizer does not have an? `(\w+_token)`"), _named_token,
           "the processor asks the tokenizer for a named token: the tokenizer gets one"),
    Repair("token_id_attribute", re.compile(r"'(\w+)' object has no attribute "
                                            r"'(\w+_token_(?:id|index))'"), _token_id_attribute,
           "the model reads a token id its default config lacks: a fresh token, its id set on that config"),
    Repair("image_token_unused", _MISMATCH, _image_token_unused,
           "no image token in the prompt: the config's image token points at the special token the processor "
           "repeats most"),
    Repair("repeated_token", _MISMATCH, _repeated_token,
           "another special token is repeated once per feature (llama4's <|patch|>, where <|image|> only marks "
           "the place): the model's image token is that one"),
    Repair("sequence_length", _MISMATCH, _sequence_length,
           "the processor writes a different number of image tokens than the tower gives features: its sequence length "
           "(or its additional image tokens) resized"),
]


def repair(state: ProbeState, error_text: str) -> str:
    """The outcome of the first rule that matches ``error_text`` and applies: RETRY or GIVE_UP (no rule applies)."""
    for rule in REPAIRS:
        match = rule.pattern.search(error_text)
        if match:
            outcome = rule.apply(state, match)
            if outcome is not None:
                return outcome
    return GIVE_UP


def _attempt(state: ProbeState):
    """One run of the prompt: None when it generated; else the error text. Unknown tokens the processor writes are
    added first (then the processor, token ids and model are made again and the attempt ends without an error)."""
    state.inputs = None
    try:
        text, state.inputs = _expansion(state.trial)
        unknown = unknown_tokens(text, state.trial.tokenizer)
        if unknown:  # tokens the processor writes but the vocabulary lacks
            state.extra.extend(unknown)
            state.rebuild()
            if wire_token_ids(state.config, state.trial, state.named, state.extra):
                state.rebuild()
            state.resync()
            return RETRY
        generate(state.model, state.trial)
        return None
    except Exception as exc:  # noqa: BLE001 - the model's or processor's own error is the probe's evidence: returned
        return first_line(exc, name=True), str(exc)


def probe(state: ProbeState):
    """Try the placeholder candidates; repair what the model's own errors point at. Returns (model, processor,
    error or None): the first placeholder's last error when none generated."""
    first_error = None
    for placeholder in placeholder_candidates(state.trial):
        state.placeholder, state.seq_len = placeholder, None
        state.rebuild()
        error = "the probe did not settle (the prompt's tokens kept changing)"
        for _ in range(_ATTEMPTS):
            outcome = _attempt(state)
            if outcome is None:
                return state.model, state.trial, None
            if outcome == RETRY:
                continue
            error, text = outcome
            if repair(state, text) == GIVE_UP:
                break
        first_error = first_error or (state.trial, error)
    trial, error = first_error
    return state.model, trial, error
