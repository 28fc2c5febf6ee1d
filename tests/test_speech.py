"""automatic-speech-recognition: which mapped types are speech-to-text, the recipe's synthetic clip, and tiny speech
twins that build, load through the recipe and compile to the reference's tokens."""

from types import SimpleNamespace

import pytest
from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

from neuronhelpers.core import vocab
from neuronhelpers.core.protocol import PROMPTS, TASK_INPUTS
from neuronhelpers.recipes import transformers_generate
from neuronhelpers.twins import build, speech
from neuronhelpers.twins.specs import TwinSpec

ASR = vocab.AUTOMATIC_SPEECH_RECOGNITION


def spec(model_type):
    return TwinSpec(model_type=model_type, task=ASR)


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
    # whisper ties its head to its embeddings; the twin's head is its own, or the twin echoes one token 32 times
    assert len(set(reference["tokens"])) > 4, reference["tokens"]


# ---- audio-language models: the processor takes a text prompt with audio tokens --------------------------------

AUDIO_LANGUAGE = ("qwen3_asr", "granite_speech", "granite_speech_plus", "vibevoice_asr", "fun_asr_nano")


def test_every_audio_language_fix_renders_its_audio_placeholder_once_before_the_instruction():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    content = [{"type": "audio"}, {"type": "text", "text": "Transcribe."}, {"type": "language", "language": "X"}]
    for model_type in AUDIO_LANGUAGE:
        fix = speech.FAMILY_FIXES[model_type]
        assert fix.why and fix.audio_item and set(fix.token_ids.values()) <= set(fix.tokens) | set(fix.named.values())
        template = ImmutableSandboxedEnvironment().from_string(speech.audio_chat_template(fix.audio_item, fix.system))
        text = template.render(messages=[{"role": "user", "content": content}], add_generation_prompt=True)
        audio = fix.token_ids["audio_token_id"]  # the token the processor expands to the clip's length
        assert text.count(audio) == 1 and text.index(audio) < text.index("Transcribe."), model_type
        assert text.endswith("<|im_start|>assistant\n") and (fix.system is None) == ("system" not in text), model_type
        if model_type == "fun_asr_nano":  # its instruction names the language item's language, before the audio
            assert "\u6210X\uff1a<|object_ref_start|>" in text


def test_voxtral_is_refused_naming_mistral_common_as_a_missing_package(tmp_path):
    """A missing package is UNTESTED (dependency) wherever it is found: the builder raises what causes.missing_package
    reads, as voxtral_realtime's processor does."""
    from neuronhelpers.verdict.causes import missing_package

    with pytest.raises(ImportError, match="voxtral requires the mistral-common library") as raised:
        speech.write_speech_twin(spec("voxtral"), tmp_path)
    assert missing_package(str(raised.value)) == "mistral-common"


@pytest.fixture(scope="module")
def audio_language_twins(tmp_path_factory):
    """The two audio-language twins whose feature extractors need no torchaudio (granite's and fun_asr's do)."""
    folders = {}
    for model_type in ("qwen3_asr", "vibevoice_asr"):
        folders[model_type] = tmp_path_factory.mktemp(f"tiny-{model_type}")
        speech.write_speech_twin(spec(model_type), folders[model_type])
    return folders


@pytest.mark.slow
def test_an_audio_language_twin_gets_its_transcription_request_with_its_audio_tokens(audio_language_twins):
    from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor

    for model_type, folder in audio_language_twins.items():
        processor = AutoProcessor.from_pretrained(folder)
        inputs = transformers_generate.speech_inputs(processor, 2.0)
        ids = inputs["input_ids"][0].tolist()
        assert ids.count(processor.audio_token_id) > 1, model_type  # the placeholder, expanded to the clip's length
        assert not set(inputs) & set(processor.unused_input_names), model_type
        model = AutoModelForSpeechSeq2Seq.from_pretrained(folder)
        assert model.config.audio_token_id == processor.audio_token_id, model_type
        assert sum(p.numel() for p in model.parameters()) <= build.MAX_TWIN_PARAMETERS
        prompt = processor.tokenizer.decode(ids)
        expected = {"qwen3_asr": "<|im_start|>assistant\nlanguage English<asr_text>",  # the request forces English
                    "vibevoice_asr": "\nThis is a 2.00 seconds audio, please transcribe"}  # the clip's duration
        assert expected[model_type] in prompt, (model_type, prompt)


@pytest.mark.slow
def test_an_audio_language_twin_generates_eagerly_after_its_prompt(audio_language_twins):
    reference = transformers_generate.reference_run(params(audio_language_twins["vibevoice_asr"], max_new_tokens=4))
    assert reference["ok"], reference.get("error")
    _, _, inputs = transformers_generate.load(params(audio_language_twins["vibevoice_asr"]), "cpu")
    # a decoder-only model: its new tokens are counted after the prompt's input_ids (audio placeholders included)
    assert len(reference["tokens"]) == 4 and transformers_generate.prompt_length(inputs) > 100


@pytest.mark.slow
def test_a_speech_encoder_decoder_twin_joins_its_pair_and_loads_back_with_its_processor(tmp_path):
    from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor

    speech.write_speech_twin(spec("speech-encoder-decoder"), tmp_path)
    processor, model = AutoProcessor.from_pretrained(tmp_path), AutoModelForSpeechSeq2Seq.from_pretrained(tmp_path)
    assert type(processor).__name__ == "Wav2Vec2Processor" and type(model).__name__ == "SpeechEncoderDecoderModel"
    assert (model.config.encoder.model_type, model.config.decoder.model_type) == ("wav2vec2", "bert")
    assert set(transformers_generate.speech_inputs(processor, 1.0)) == {"input_values"}  # the clip alone


@pytest.mark.slow
def test_without_a_transcription_request_the_recipe_falls_back_to_the_chat_template_then_to_the_audio_token(
        audio_language_twins):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(audio_language_twins["qwen3_asr"])
    processor.apply_transcription_request = None  # as a family without one (granite's)
    from_template = processor.tokenizer.decode(transformers_generate.speech_inputs(processor, 1.0)["input_ids"][0])
    assert "<|audio_end|>Transcribe the audio.<|im_end|>\n<|im_start|>assistant\n" in from_template
    processor.chat_template = None  # the audio token and the instruction, in the tokenizer's template (granite's card)
    in_turns = processor.tokenizer.decode(transformers_generate.speech_inputs(processor, 1.0)["input_ids"][0])
    assert "user\n<|audio_pad|>" in in_turns and "<|audio_pad|>Transcribe the audio.<|im_end|>" in in_turns
    processor.tokenizer.chat_template = None  # as plain text
    plain = processor.tokenizer.decode(transformers_generate.speech_inputs(processor, 1.0)["input_ids"][0])
    assert plain.startswith("<|audio_pad|>") and plain.endswith("<|audio_pad|>Transcribe the audio.")
