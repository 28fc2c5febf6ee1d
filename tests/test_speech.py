"""automatic-speech-recognition: which mapped types are speech-to-text, the recipe's synthetic clip, and tiny speech
twins that build, load through the recipe and compile to the reference's tokens."""

from types import SimpleNamespace

import pytest
from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

from neuronhelpers.core import vocab
from neuronhelpers.core.protocol import PROMPTS, TASK_INPUTS
from neuronhelpers.recipes import transformers_generate
from neuronhelpers.twins import build, speech

ASR = vocab.AUTOMATIC_SPEECH_RECOGNITION


def spec(model_type):
    return SimpleNamespace(model_type=model_type, task=ASR, overrides={})


def params(folder, **more):
    return {"model_id": "tiny/x", "model_path": str(folder), "task": ASR, "library": vocab.TRANSFORMERS,
            "backend": "cpu", "device": "cpu", "compile_backend": "inductor", "dtype": "float32", "cores": 1,
            "parallelism": vocab.NO_PARALLELISM, "max_new_tokens": 32, "prompt": PROMPTS[ASR],
            "trust_remote_code": False, "revision": None, "top_k": vocab.NEAR_TIE_TOP_K, **TASK_INPUTS[ASR], **more}


def test_the_task_is_in_the_vocabulary_and_tested_by_transformers():
    assert ASR in vocab.TASKS and vocab.LIBRARY_FOR_TASK[ASR] == vocab.TRANSFORMERS
    vocab.check_value("task", ASR)
    assert PROMPTS[ASR] is None  # the clip alone, no text prompt


def test_speech_types_covers_the_installed_mapping_and_gives_a_reason_for_each_non_speech_to_text_type():
    types = speech.speech_types()
    assert list(types) == list(MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)
    assert all(reason is None or (isinstance(reason, str) and len(reason) > 20) for reason in types.values())
    for model_type in ("whisper", "speech_to_text", "moonshine", "speecht5", "kyutai_speech_to_text"):
        if model_type in types:
            assert types[model_type] is None, model_type  # kyutai's audio codec is an input, not an output
    for model_type in ("dia", "pop2piano", "vibevoice"):  # speech synthesis, piano notes: audio out
        if model_type in types:
            assert types[model_type], model_type


def test_a_non_speech_to_text_type_is_refused_with_its_reason(tmp_path):
    with pytest.raises(ValueError, match="not speech-to-text: .*audio"):
        speech.write_speech_twin(spec("dia"), tmp_path)


def test_the_synthetic_clip_is_deterministic_and_sized_by_the_sampling_rate():
    first, again = transformers_generate.test_audio(16000, 2.0), transformers_generate.test_audio(16000, 2.0)
    assert first.shape == (32000,) and str(first.dtype) == "float32"
    assert (first == again).all() and float(abs(first).max()) <= 1.0 and float(first.std()) > 0.01
    assert transformers_generate.test_audio(24000, 0.5).shape == (12000,)


def test_new_tokens_start_after_the_decoder_prompt_of_an_encoder_decoder():
    import torch

    encoder_decoder = SimpleNamespace(config=SimpleNamespace(is_encoder_decoder=True))
    decoder_only = SimpleNamespace(config=SimpleNamespace(is_encoder_decoder=False))
    out = torch.tensor([[7, 8, 9, 10, 11]])
    as_output = SimpleNamespace(sequences=out)  # generate()'s output object (return_dict_in_generate)
    assert transformers_generate.new_tokens(encoder_decoder, as_output, {"input_features": None}) == [8, 9, 10, 11]
    assert transformers_generate.new_tokens(encoder_decoder, out, {"decoder_input_ids": torch.zeros(1, 3)}) == [10, 11]
    assert transformers_generate.new_tokens(decoder_only, out, {"input_ids": torch.zeros(1, 2)}) == [9, 10, 11]
    # audio alone to a decoder-only model: its output starts with the one start token generate() makes
    assert transformers_generate.new_tokens(decoder_only, out, {"input_values": None}) == [8, 9, 10, 11]
    assert transformers_generate.generated_tokens(decoder_only, out, 2) == [9, 10, 11]  # the text recipe's call


@pytest.fixture(scope="module")
def whisper_twin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-whisper")
    speech.write_speech_twin(spec("whisper"), folder)
    return folder


@pytest.mark.slow
def test_a_whisper_twin_builds_loads_through_the_recipe_and_generates(whisper_twin):
    import json

    build.check_transformers_twin_runs(spec("whisper"), whisper_twin)
    model, tokenizer, inputs = transformers_generate.load(params(whisper_twin), "cpu")
    assert set(inputs) >= {"input_features"} and "input_ids" not in inputs
    generation = json.loads((whisper_twin / "generation_config.json").read_text())
    vocabulary = len(tokenizer)
    assert generation["decoder_start_token_id"] == tokenizer.convert_tokens_to_ids("<|startoftranscript|>")
    assert all(i < vocabulary for i in generation["begin_suppress_tokens"] + generation["suppress_tokens"])
    prompt_tokens = list(generation["lang_to_id"].values()) + list(generation["task_to_id"].values())
    assert all(i < vocabulary for i in prompt_tokens + [generation["no_timestamps_token_id"]])
    assert sum(p.numel() for p in model.parameters()) <= build.MAX_TWIN_PARAMETERS


@pytest.mark.slow
def test_the_compiled_generate_of_a_whisper_twin_equals_the_reference_tokens(whisper_twin):
    reference = transformers_generate.reference_run(params(whisper_twin))
    device = transformers_generate.device_run(params(whisper_twin))
    assert reference["ok"] and device["ok"], (reference.get("error"), device.get("error"))
    assert len(reference["tokens"]) == 32 and device["tokens"] == reference["tokens"]
    assert device["warm_equals_cold"] and device["prompt_tokens"] == 0
