"""The writer of automatic-speech-recognition twins: the architecture's own speech-to-text class
(``AutoModelForSpeechSeq2Seq``) from its shrunk config (shrink.py), random weights from the fixed seed drawn as a
text twin's (weights.py: an output head of its own), the trained BPE tokenizer with the family's special tokens
(tokenizers.py), the family's own feature extractor and processor classes, all saved with ``save_pretrained`` so that
``AutoProcessor.from_pretrained`` and ``AutoModelForSpeechSeq2Seq.from_pretrained`` load the folder back.

Which mapped types are speech-to-text at all (``speech_types``) is read from each model class, not from a hand list
(see its docstring). A family that needs more than the generic shrink has an entry in ``FAMILY_FIXES`` with a
one-line reason; a type no twin can be built for is refused by ``write_speech_twin`` with a one-line reason.

An audio-language model (its processor takes a text prompt with audio tokens: qwen3_asr, granite_speech, ...) gets
the family's audio tokens in its tokenizer and config, and a chat template that renders an audio item where the
family's real template puts its audio placeholder (``audio_chat_template``): the recipe asks for a transcription
through it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.twins.configs import log, walk_configs
from neuronhelpers.twins.own import base_config, own_overrides, own_table
from neuronhelpers.twins.shrink import TEXT_SHRINK, shrunk_config
from neuronhelpers.twins.specs import SEED
from neuronhelpers.twins.text import check_size
from neuronhelpers.twins.weights import decisive_weights, untie_output_head

# The text table, plus the names speech encoder-decoders give their sizes (encoder and decoder counted apart, the
# convolutional front end, the text positions). The audio positions keep each architecture's default unless the
# family ties them to its feature extractor (FAMILY_FIXES).
SPEECH_SHRINK = {
    **TEXT_SHRINK,
    "encoder_num_hidden_layers": 2, "decoder_num_hidden_layers": 2, "encoder_num_attention_heads": 4,
    "decoder_num_attention_heads": 4, "encoder_num_key_value_heads": 4, "decoder_num_key_value_heads": 4,
    "encoder_hidden_size": 64, "decoder_hidden_size": 64,
    "max_target_positions": 64, "max_text_positions": 64,
    "conv_channels": 64,  # speech_to_text's convolutional subsampler
    "conv_dim": 32,  # wav2vec2-style feature encoders (speecht5): one width per conv layer
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4,
    "speech_encoder_layers": 2, "speech_encoder_attention_heads": 4, "speech_encoder_intermediate_size": 128,
    "speech_decoder_prenet_units": 32, "speech_decoder_postnet_units": 32, "speaker_embedding_dim": 32,
    "t2u_encoder_layers": 1, "t2u_decoder_layers": 1, "t2u_encoder_attention_heads": 4,
    "t2u_decoder_attention_heads": 4, "t2u_encoder_ffn_dim": 128, "t2u_decoder_ffn_dim": 128,
    "t2u_vocab_size": 64, "unit_embed_dim": 64, "unit_hifi_gan_vocab_size": 64, "upsample_initial_channel": 32,
}

# Whisper's encoder takes exactly 2 x max_source_positions mel frames, which its feature extractor pads to
# (chunk_length seconds): both are cut to this many seconds (the default is 30 s, 1500 positions).
WHISPER_SECONDS = 2
HOP_LENGTH = 160


@dataclass(frozen=True)
class SpeechFix:
    """What a family needs beyond the generic shrink: config attributes, feature extractor arguments, the processor
    class its checkpoints use where transformers maps none to the type; and why."""

    why: str
    config: dict = field(default_factory=dict)
    extractor: dict = field(default_factory=dict)
    processor: str | None = None
    extractor_class: str | None = None  # where transformers maps no feature extractor to the type
    tokens: tuple = ()  # special tokens the family's processor writes into the prompt
    start: str | None = None  # the token the decoder starts from (else the tokenizer's bos)
    derived: Callable | None = None  # config -> attributes computed from the shrunk config
    after: dict = field(default_factory=dict)  # attributes set after the shrink (a sub-config's as a dict): the
    # shrink's overrides reach the language model only, and it sizes the audio side by its vision table
    named: dict = field(default_factory=dict)  # tokenizer attribute -> token, where the processor reads them
    token_ids: dict = field(default_factory=dict)  # config attribute -> the token whose id it holds
    audio_item: str | None = None  # an audio-language model: what its chat template renders an audio item as
    system: str | None = None  # the system turn its template opens with when the conversation has none
    pair: tuple = ()  # a composite of any encoder and decoder: the (encoder, decoder) types the twin joins
    no_twin: bool = False  # no twin can be built: ``why`` says why
    needs: str | None = None  # the package the twin needs first: while it is missing the row is UNTESTED (dependency),
    # as for every missing package (vocab.UNTESTED_DEPENDENCY), not (twin)


NO_FIX = SpeechFix(why="")
# Fun-ASR-Nano's instruction before the audio: "语音转写：" (transcribe the speech), "语音转写成英文：" (into English)
FUN_ASR_REQUEST = "\u8bed\u97f3\u8f6c\u5199{% if language %}\u6210{{ language }}{% endif %}\uff1a"
QWEN3_ASR_TOKENS = {"audio_bos_token": "<|audio_start|>", "audio_token": "<|audio_pad|>",
                    "audio_eos_token": "<|audio_end|>"}  # in the order its template writes them
VIBEVOICE_TOKENS = {"audio_bos_token_id": "<|object_ref_start|>", "audio_token_id": "<|box_start|>",
                    "audio_eos_token_id": "<|object_ref_end|>"}  # (Qwen2's object-ref and box tokens)
GRANITE_FIX = SpeechFix("its LoRA adapter needs peft and files the twin has not (the model runs without it); the "
                        "q-former projector cross-attends the encoder's width; the model card's prompt opens with the "
                        "audio token", after={"has_lora_adapter": False},
                        derived=lambda c: {"projector_config": {"encoder_hidden_size": c.encoder_config.hidden_dim}},
                        tokens=("<|audio|>",), token_ids={"audio_token_id": "<|audio|>"}, audio_item="<|audio|>")
COHERE_PROMPT = ("\u2581", "<|startofcontext|>", "<|startoftranscript|>", "<|emo:undefined|>", "<|en|>", "<|pnc|>",
                 "<|nopnc|>", "<|noitn|>", "<|notimestamp|>", "<|nodiarize|>")
FAMILY_FIXES = {
    "whisper": SpeechFix("the encoder's positions are tied to the feature extractor's padded length (30 s by default)",
                         config={"max_source_positions": WHISPER_SECONDS * 16000 // HOP_LENGTH // 2},
                         extractor={"chunk_length": WHISPER_SECONDS}),
    "cohere_asr": SpeechFix("its processor builds a decoder prompt of its own special tokens, the first one the start",
                            tokens=COHERE_PROMPT, start=COHERE_PROMPT[0]),
    "kyutai_speech_to_text": SpeechFix("the audio padding and start tokens are the last rows of the embedding and of "
                                       "a codebook, which the shrink resizes; the codec's upsampling is grouped by "
                                       "its width, and its convolutions and quantizer widths are sized apart",
                                       config={"codec_config": {"upsample_groups": 32, "num_filters": 8,
                                                                "codebook_dim": 32,
                                                                "vector_quantization_hidden_dimension": 32}},
                                       derived=lambda c: {"audio_pad_token_id": c.vocab_size
                                                          + c.num_codebooks * c.codebook_vocab_size,
                                                          "audio_bos_token_id": c.codebook_vocab_size - 1}),
    "moonshine_streaming": SpeechFix("the decoder reads num_key_value_heads, which the config class does not declare "
                                     "(checkpoints carry it in config.json); no feature extractor is mapped to the "
                                     "type: it takes the raw waveform, as moonshine's Wav2Vec2FeatureExtractor does",
                                     config={"num_key_value_heads": 4}, extractor_class="Wav2Vec2FeatureExtractor"),
    "fun_asr_nano": SpeechFix("its adaptor's FFN must be a quarter of the language model's width and the shrink makes "
                              "audio-side FFNs 64 wide, so the language model is 256 wide; 20 of the encoder's 70 "
                              "layers predict timestamps (1 of 2 here); the prompt asks for the transcription in "
                              "Chinese before the audio", config={"hidden_size": 256},
                              after={"audio_config": {"num_timestamp_prediction_layers": 1},
                                     "adaptor_config": {"projector_hidden_size": 64}},
                              tokens=("<|object_ref_start|>",), token_ids={"audio_token_id": "<|object_ref_start|>"},
                              audio_item=FUN_ASR_REQUEST + "<|object_ref_start|>",
                              system="You are a helpful assistant."),
    "qwen3_asr": SpeechFix("its processor reads the audio tokens from the tokenizer; the audio projector's output is "
                           "the language model's width; its template always opens with a (context) system turn",
                           derived=lambda c: {"audio_config": {"output_dim": c.text_config.hidden_size}},
                           named=QWEN3_ASR_TOKENS, tokens=("<asr_text>",),
                           token_ids={"audio_token_id": QWEN3_ASR_TOKENS["audio_token"]},
                           audio_item="".join(QWEN3_ASR_TOKENS.values()), system=""),
    "granite_speech": GRANITE_FIX,
    # the plus variant concatenates chosen encoder layers' outputs with the last one before the projector: the twin
    # keeps one (its first of two), or it would be granite_speech's twin under another name
    "granite_speech_plus": SpeechFix(
        GRANITE_FIX.why + "; the projector reads the last encoder layer concatenated with the first",
        after={**GRANITE_FIX.after, "encoder_config": {"cat_hidden_layers": [0]}},
        derived=lambda c: {"projector_config": {"encoder_hidden_size": 2 * c.encoder_config.hidden_dim}},
        tokens=GRANITE_FIX.tokens, token_ids=GRANITE_FIX.token_ids, audio_item=GRANITE_FIX.audio_item),
    "vibevoice_asr": SpeechFix("its audio tokenizers' seven conv stages are 3 to 8 blocks deep and double 32 filters "
                               "to 2048 (one block each from 2 filters here, the same 3200-sample hop); its template "
                               "puts the clip's duration and the keys to transcribe after the audio",
                               after={key: {"num_filters": 2, "depths": [1] * 7} for key in (
                                   "acoustic_tokenizer_encoder_config", "semantic_tokenizer_encoder_config")},
                               tokens=tuple(VIBEVOICE_TOKENS.values()),
                               token_ids=VIBEVOICE_TOKENS, audio_item="".join(VIBEVOICE_TOKENS.values())
                               + "\nThis is a <|AUDIO_DURATION|> seconds audio, please transcribe it with these keys: "
                               "Start time, End time, Speaker ID, Content",
                               system="You are a helpful assistant that transcribes audio input into text output in "
                                      "JSON format."),
    "voxtral": SpeechFix("its processor builds the prompt with mistral-common's tokenizer (a tekken.json read by "
                         "MistralCommonBackend), not installed here: mistral-common 1.13 pins numpy<2.4 on Python 3.11 "
                         "and pulls LGPL pycountry and soxr; a twin needs it and a tiny tekken tokenizer",
                         no_twin=True, needs="mistral-common"),
    "speech-encoder-decoder": SpeechFix("a composite of any speech encoder and any text decoder, named by each "
                                        "checkpoint, with no processor of its own: the twin is transformers' own "
                                        "example pair, a wav2vec2 encoder and a BERT decoder, with Wav2Vec2Processor",
                                        pair=("wav2vec2", "bert"), processor="Wav2Vec2Processor",
                                        extractor_class="Wav2Vec2FeatureExtractor"),
    "seamless_m4t_v2": SpeechFix("its checkpoints use the v1 processor (transformers maps none to the type)",
                                 processor="SeamlessM4TProcessor"),
}

# The config attributes an encoder's input width (mel bins per frame) goes by.
MEL_BIN_KEYS = ("num_mel_bins", "input_feat_per_channel", "num_mel_filters")

# Whisper's special tokens, by the generation config attribute that names them (its generate() reads these).
WHISPER_TOKENS = {"eos": "<|endoftext|>", "decoder_start": "<|startoftranscript|>", "language": "<|en|>",
                  "transcribe": "<|transcribe|>", "translate": "<|translate|>", "no_timestamps": "<|notimestamps|>",
                  "prev": "<|startofprev|>"}


def speech_types() -> dict[str, str | None]:
    """Every model_type of transformers' speech-seq2seq mapping: None when it is speech-to-text, else why not.

    The rule, read from the mapped class itself: it is speech-to-text when the class declares text among its
    ``output_modalities`` and its ``generate`` returns token ids, not audio. Two signs of audio out: the class
    declares no text output (``output_modalities`` without "text": dia writes audio codebooks, pop2piano piano
    notes), or the generation mixin of its own family returns an output with an ``audio`` field (vibevoice's
    diffusion head synthesises speech while its tokens only trigger it). Audio among the inputs (kyutai's codec) does
    not count: such a class declares "audio" as an output too, but its generate still writes text.
    """
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

    out = {}
    for model_type, class_name in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES.items():
        try:
            cls = getattr(transformers, class_name)
        except Exception as exc:  # noqa: BLE001 - a class needing a missing package: the build will name the package
            log.debug("speech type %s: %s not importable (%s)", model_type, class_name, exc)
            out[model_type] = None
            continue
        outputs = tuple(getattr(cls, "output_modalities", None) or ("text",))
        if "text" not in outputs:
            out[model_type] = f"{class_name} generates {' and '.join(outputs)}, not text"
        elif _generates_audio(cls):
            out[model_type] = f"{class_name}.generate synthesises speech (an output with audio): text-to-speech"
        else:
            out[model_type] = None
    return out


def _generates_audio(cls) -> bool:
    """Whether the family's own generation code (a GenerationMixin subclass in the model's package: its generation
    mixin, or the model class itself) defines an output with an ``audio`` field."""
    import dataclasses
    import sys

    from transformers import GenerationMixin
    from transformers.utils import ModelOutput

    package = cls.__module__.rsplit(".", 1)[0]
    owners = {klass.__module__ for klass in cls.__mro__
              if issubclass(klass, GenerationMixin) and klass.__module__.startswith(package + ".")}
    for name in owners:
        module = sys.modules.get(name)
        for value in vars(module).values() if module else ():
            if isinstance(value, type) and issubclass(value, ModelOutput) and dataclasses.is_dataclass(value) and \
                    "audio" in {f.name for f in dataclasses.fields(value)}:
                return True
    return False


def speech_tokenizer(model_type: str):
    """The trained BPE with pad / bos / eos, and the family's own special tokens (Whisper's, cohere_asr's prompt, an
    audio-language model's audio tokens, named where its processor reads them from the tokenizer)."""
    from neuronhelpers.twins.tokenizers import make_tokenizer

    fix = FAMILY_FIXES.get(model_type, NO_FIX)
    extra = list(WHISPER_TOKENS.values()) if model_type == "whisper" else []
    return make_tokenizer(dict(fix.named), extra + list(fix.tokens))


def audio_chat_template(audio_item: str, system: str | None = None) -> str:
    """The twins' chat turns (tokenizers.CHAT_TEMPLATE's) with each audio item rendered as ``audio_item``, opened by a
    ``system`` turn when the conversation has none; a ``language`` item is ``language`` there (fun_asr_nano's)."""
    opening = "" if system is None else (
        "{% if messages[0]['role'] != 'system' %}<|im_start|>system\n" + system + "<|im_end|>\n{% endif %}")
    return opening + (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% set language = message['content'] | selectattr('type', 'equalto', 'language') | map(attribute='language')"
        " | first %}{% for part in message['content'] %}{% if part['type'] == 'audio' %}" + audio_item
        + "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def write_speech_twin(spec, folder: Path) -> None:
    """Build the speech-to-text twin ``spec`` names and save model, tokenizer, feature extractor and processor into
    ``folder``."""
    import torch
    from transformers import AutoModelForSpeechSeq2Seq

    why_not = speech_types().get(spec.model_type, f"'{spec.model_type}' is not in the speech-seq2seq mapping")
    if why_not:
        raise ValueError(f"not speech-to-text: {why_not}")
    fix = FAMILY_FIXES.get(spec.model_type, NO_FIX)
    if fix.needs and importlib.util.find_spec(fix.needs.replace("-", "_")) is None:
        raise ImportError(f"{spec.model_type} requires the {fix.needs} library but it was not found in your "
                          f"environment: {fix.why}")
    if fix.no_twin:
        raise ValueError(f"no twin of '{spec.model_type}': {fix.why}")
    extractor_class, processor_class = _processor_classes(spec.model_type, fix)
    tok = speech_tokenizer(spec.model_type)
    start_token = WHISPER_TOKENS["decoder_start"] if spec.model_type == "whisper" else fix.start
    start = tok.convert_tokens_to_ids(start_token) if start_token else tok.bos_token_id
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    base = base_config(spec)  # a model twin's own config (own.py), else the architecture's default
    if fix.pair and base is not None:
        raise ValueError("a model twin is built from one config; this family joins an encoder and a decoder config")
    if fix.pair:  # each part shrunk on its own, joined as the checkpoints join them
        from transformers import SpeechEncoderDecoderConfig

        encoder = shrunk_config(fix.pair[0], SPEECH_SHRINK)
        decoder = shrunk_config(fix.pair[1], SPEECH_SHRINK, spec.overrides, vocab_size=len(tok), **ids)
        config = SpeechEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder, decoder_start_token_id=start,
                                                                         **ids)
    else:
        overrides = {**fix.config, **spec.overrides}
        table = SPEECH_SHRINK
        if base is not None:
            overrides, table = own_overrides(spec, overrides), own_table(spec, SPEECH_SHRINK)
        config = shrunk_config(spec.model_type, table, overrides, base, vocab_size=len(tok),
                               decoder_start_token_id=start, **ids)
    config = _after_shrink(config, fix, tok)
    untie_output_head(config)
    _consistent_token_lists(config, len(tok))
    check_size(AutoModelForSpeechSeq2Seq, config)
    torch.manual_seed(SEED)
    model = AutoModelForSpeechSeq2Seq.from_config(config)
    decisive_weights(model, SEED)
    _generation_config(model, tok, spec.model_type, start)
    processor = _processor(extractor_class, processor_class, config, tok, fix)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def _after_shrink(config, fix: SpeechFix, tok):
    """The config with the family's attributes the shrink cannot set (``after``, ``derived``), its token ids, and the
    tokenizer's pad / bos / eos where the top config names its own (a composite's, not its language model's)."""
    data = config.to_dict()
    ids = {key: getattr(tok, key) for key in ("pad_token_id", "bos_token_id", "eos_token_id")
           if data.get(key) is not None}
    tokens = {key: tok.convert_tokens_to_ids(token) for key, token in fix.token_ids.items()}
    for changes in (ids, tokens, fix.after, fix.derived(config) if fix.derived else {}):
        data = _merged(data, changes)
    return type(config).from_dict(data)


def _merged(data: dict, changes: dict) -> dict:
    """``data`` with ``changes``; a dict of changes updates the sub-config's dict of the same name."""
    out = dict(data)
    for key, value in changes.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _consistent_token_lists(config, vocab_size: int) -> None:
    """Token id lists a default config carries for the real vocabulary (Whisper's suppressed tokens) keep only ids
    the tiny vocabulary has."""
    for key in ("suppress_tokens", "begin_suppress_tokens"):
        value = config.__dict__.get(key)
        if isinstance(value, list):
            setattr(config, key, [i for i in value if isinstance(i, int) and i < vocab_size])


def _generation_config(model, tok, model_type: str, start: int) -> None:
    """The generation config's token ids are the tokenizer's; Whisper's prompt tokens are the twin's own."""
    gc = model.generation_config
    gc.decoder_start_token_id = start
    gc.bos_token_id, gc.eos_token_id, gc.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    if model_type == "whisper":
        ids = {name: tok.convert_tokens_to_ids(token) for name, token in WHISPER_TOKENS.items()}
        gc.eos_token_id = gc.pad_token_id = ids["eos"]
        gc.bos_token_id = ids["eos"]
        gc.no_timestamps_token_id = ids["no_timestamps"]
        gc.prev_sot_token_id = ids["prev"]
        gc.lang_to_id = {WHISPER_TOKENS["language"]: ids["language"]}
        gc.task_to_id = {"transcribe": ids["transcribe"], "translate": ids["translate"]}
        gc.is_multilingual = True
        gc.forced_decoder_ids = None
        gc.suppress_tokens = []
        gc.begin_suppress_tokens = [ids["eos"]]
        gc.max_length = model.config.max_target_positions


def _processor_classes(model_type: str, fix: SpeechFix):
    """The family's feature extractor and processor classes; refused when the processor cannot take the clip alone."""
    import transformers
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    extractor_name = fix.extractor_class or FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)
    processor_name = fix.processor or PROCESSOR_MAPPING_NAMES.get(model_type)
    if not extractor_name or not processor_name:
        raise ValueError(f"transformers names no {'feature extractor' if not extractor_name else 'processor'} "
                         f"class for '{model_type}'")
    processor_class = getattr(transformers, processor_name)
    if "text" in _required_arguments(processor_class.__call__) and fix.audio_item is None:
        raise ValueError(f"{processor_name} needs a text prompt with audio tokens (an audio-language model), and "
                         "FAMILY_FIXES gives no chat template rendering its audio items")
    return getattr(transformers, extractor_name), processor_class


def _processor(extractor_class, processor_class, config, tok, fix: SpeechFix):
    """The family's own feature extractor (default-constructed, its mel bins those of the config where tied),
    wrapped with the tokenizer in the family's processor class (with the chat template of an audio-language model).
    """
    extractor = extractor_class(**fix.extractor)
    mel_bins = next((sub.__dict__[key] for _path, sub, _role in walk_configs(config) for key in MEL_BIN_KEYS
                     if isinstance(sub.__dict__.get(key), int)), None)
    if getattr(extractor, "feature_size", 1) > 1 and mel_bins and mel_bins != extractor.feature_size:
        # an extractor of mel features whose bins the encoder's input width is tied to (not a raw waveform's)
        extractor = extractor_class(**{**fix.extractor, "feature_size": mel_bins})
    if fix.audio_item is None:
        return processor_class(feature_extractor=extractor, tokenizer=tok)
    # positional: granite names its feature extractor audio_processor
    return processor_class(extractor, tok, chat_template=audio_chat_template(fix.audio_item, fix.system))


def _required_arguments(function) -> set[str]:
    import inspect

    return {p.name for p in inspect.signature(function).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"}
