"""Tiny twins: real transformers architectures with shrunk dimensions, built offline.

A twin stands in for a Hub checkpoint in tests and offline sweeps. It is the architecture's real
config class and modeling code, with small dimensions, random weights from a fixed seed, and a
tokenizer (plus image processor / processor for vision-language models) built locally. It is saved
with ``save_pretrained`` and loaded back with ``from_pretrained``, so it exercises exactly the code
path that decides whether an architecture compiles. A twin is addressed as ``tiny/<model_type>``.

Adding a text architecture whose config shrinks generically is one line in ``TEXT_TWINS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

TWIN_PREFIX = "tiny/"
SEED = 0
# Bumped when the way twins are built changes, so cached twins are rebuilt.
TWIN_FORMAT = 3

TEXT_GENERATION = "text-generation"
IMAGE_TEXT_TO_TEXT = "image-text-to-text"

# Shrunk text dimensions (sliding windows keep each architecture's default, as its checkpoints do). Only attributes a config already has are set (attribute maps such as
# gpt2's n_embd -> hidden_size are honoured by setattr), so one table serves every architecture.
TEXT_SHRINK = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "ffn_hidden_size": 128,  # falcon
    "n_inner": 128,  # gpt2
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "query_pre_attn_scalar": 16,
    # mixture of experts
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "max_window_layers": 2,
}
VISION_SHRINK = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "projection_dim": 32,
    "image_size": 32,
    "patch_size": 8,
}


@dataclass(frozen=True)
class TwinSpec:
    """One twin: its transformers model_type, task, and config overrides beyond the generic shrink."""

    model_type: str
    task: str = TEXT_GENERATION
    overrides: dict = field(default_factory=dict)

    @property
    def model_id(self) -> str:
        return TWIN_PREFIX + self.model_type


# The list is data: a text architecture that shrinks generically is one line here.
TEXT_TWINS = [
    TwinSpec("llama"),
    # Mistral-7B-v0.3 and later disable the sliding window that MistralConfig still defaults to (v0.1's 4096).
    TwinSpec("mistral", overrides={"sliding_window": None}),
    TwinSpec("qwen2"),
    TwinSpec("qwen3"),
    TwinSpec("gemma2"),
    TwinSpec("gemma3_text"),
    TwinSpec("phi3"),
    TwinSpec("granite"),
    TwinSpec("olmo2"),
    TwinSpec("smollm3"),
    TwinSpec("gpt2"),
    TwinSpec("gpt_neox"),
    TwinSpec("falcon"),
    TwinSpec("starcoder2"),
    TwinSpec("qwen3_moe"),
    TwinSpec("mixtral"),
]
VLM_TWINS = [
    TwinSpec("llava", IMAGE_TEXT_TO_TEXT),
    TwinSpec("qwen2_vl", IMAGE_TEXT_TO_TEXT),
    TwinSpec("gemma3", IMAGE_TEXT_TO_TEXT),
    TwinSpec("idefics3", IMAGE_TEXT_TO_TEXT),
    TwinSpec("paligemma", IMAGE_TEXT_TO_TEXT),
]
TWINS = {spec.model_type: spec for spec in TEXT_TWINS + VLM_TWINS}

# Tokenizer: a byte-level BPE trained on this text, so decoded output reads as (broken) English.
_CORPUS = """\
The quick brown fox jumps over the lazy dog. A model that runs on Trainium must load, compile and
generate. Every result is recorded as a row of an open dataset, and anyone can reproduce it.
The weather today is mild and the river runs quietly past the old mill. Children walk to school
while the baker opens his shop. She said that the answer was in the book on the table.
We measure the time to first token and the number of tokens per second after compilation.
Write a short story about a robot who learns to paint the sea at night under a bright moon.
Describe this image in one sentence. What colours do you see, and what shapes are there?
In the morning the market fills with people who buy bread, fruit, fish and fresh flowers.
"""
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
# Placeholder tokens the vision-language processors look for, added to every twin tokenizer.
VISION_TOKENS = [
    "<image>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
]
# Where each family puts the image in the prompt (what its processor expands).
_IMAGE_PLACEHOLDER = {
    "llava": "<image>",
    "qwen2_vl": "<|vision_start|><|image_pad|><|vision_end|>",
    "gemma3": "<start_of_image>",
    "idefics3": "<image>",
    "paligemma": "",  # its processor puts the image tokens in front of the prompt itself
}
_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}IMAGE_PLACEHOLDER{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Random init gives near-uniform logits; scaling the output head makes greedy choices decisive, so a
# twin's tokens test the compiled numerics rather than ties between equally likely tokens.
_LOGIT_SCALE = 20.0


def twin_home() -> Path:
    """Where built twins are cached (``NEURONHELPERS_HOME``/twins, default ~/.cache/neuronhelpers)."""
    base = os.environ.get("NEURONHELPERS_HOME") or os.path.join(Path.home(), ".cache", "neuronhelpers")
    return Path(base) / "twins"


def is_twin_id(model_id: str) -> bool:
    return model_id.startswith(TWIN_PREFIX)


def twin_spec(model_id_or_type: str) -> TwinSpec:
    model_type = model_id_or_type[len(TWIN_PREFIX) :] if is_twin_id(model_id_or_type) else model_id_or_type
    try:
        return TWINS[model_type]
    except KeyError:
        raise UserError(
            f"unknown twin '{model_id_or_type}': no tiny twin for model_type '{model_type}'; "
            f"choose one of {', '.join(TWIN_PREFIX + t for t in sorted(TWINS))}"
        ) from None


def _spec_digest(spec: TwinSpec) -> str:
    import transformers

    blob = json.dumps(
        [TWIN_FORMAT, spec.model_type, spec.task, spec.overrides, TEXT_SHRINK, VISION_SHRINK, transformers.__version__],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def twin_path(model_id_or_type: str) -> Path:
    """The folder a twin is (or will be) saved in; built checkpoints are keyed by spec and library version."""
    spec = twin_spec(model_id_or_type)
    return twin_home() / f"{spec.model_type}-{_spec_digest(spec)}"


def build_twin(model_id_or_type: str, *, force: bool = False) -> Path:
    """Build (or reuse) the twin and return the folder ``from_pretrained`` loads it from.

    The folder is written under a temporary name and renamed into place, so a half-built twin is
    never seen by another process.
    """
    spec = twin_spec(model_id_or_type)
    dest = twin_path(spec.model_type)
    if dest.is_dir() and (dest / "config.json").is_file() and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.model_type}-", dir=dest.parent))
    try:
        _write_twin(spec, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(
            f"tiny twin '{spec.model_id}' did not build with the installed transformers: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return dest


def _build_tokenizer(model_type: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=480,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS.splitlines(), trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        # The attributes vision processors read (tokenizer.image_token, boi_token, ...).
        extra_special_tokens={
            "image_token": _image_token(model_type),
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "vision_start_token": "<|vision_start|>",
            "vision_end_token": "<|vision_end|>",
            "video_token": "<|video_pad|>",
            "fake_image_token": "<fake_token_around_image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    )
    tok.add_special_tokens({"additional_special_tokens": VISION_TOKENS})
    tok.chat_template = _CHAT_TEMPLATE.replace("IMAGE_PLACEHOLDER", _IMAGE_PLACEHOLDER.get(model_type, ""))
    return tok


def _image_token(model_type: str) -> str:
    return {"qwen2_vl": "<|image_pad|>", "gemma3": "<image_soft_token>"}.get(model_type, "<image>")


def _shrink(config, table: dict, overrides: dict | None = None) -> None:
    """Shrink a config in place: set each attribute it has, then keep per-layer lists consistent."""
    for key, value in {**table, **(overrides or {})}.items():
        if hasattr(config, key) or key in (overrides or {}):
            try:
                setattr(config, key, value)
            except AttributeError:  # a derived, read-only property (e.g. falcon's head_dim)
                pass
    layers = getattr(config, "num_hidden_layers", None)
    layer_types = getattr(config, "layer_types", None)
    if layers and isinstance(layer_types, list) and layer_types:
        # Keep every kind of layer the architecture mixes (e.g. sliding and full attention).
        kinds = list(dict.fromkeys(layer_types))
        config.layer_types = [kinds[i % len(kinds)] for i in range(layers)]


def _text_config(model_type: str, tok, overrides: dict | None = None):
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    _shrink(config, TEXT_SHRINK, overrides)
    config.vocab_size = len(tok)
    for name, token_id in (("bos_token_id", tok.bos_token_id), ("eos_token_id", tok.eos_token_id), ("pad_token_id", tok.pad_token_id)):
        if hasattr(config, name):
            setattr(config, name, token_id)
    return config


def _vision_config(config) -> None:
    _shrink(config, VISION_SHRINK)


def _write_twin(spec: TwinSpec, folder: Path) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    # Default configs warn about their own placeholder token ids (replaced below): keep the build quiet.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        _write_twin_files(spec, folder)
    finally:
        hf_logging.set_verbosity(verbosity)


def _write_twin_files(spec: TwinSpec, folder: Path) -> None:
    import torch

    tok = _build_tokenizer(spec.model_type)
    if spec.task == TEXT_GENERATION:
        from transformers import AutoModelForCausalLM

        config = _text_config(spec.model_type, tok, spec.overrides)
        torch.manual_seed(SEED)
        model = AutoModelForCausalLM.from_config(config)
        processor = None
    else:
        from transformers import AutoModelForImageTextToText

        config, processor = _VLM_BUILDERS[spec.model_type](tok)
        torch.manual_seed(SEED)
        model = AutoModelForImageTextToText.from_config(config)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(_LOGIT_SCALE)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    if processor is not None:
        processor.save_pretrained(folder)
    (folder / "TWIN.json").write_text(
        json.dumps({"twin_of": spec.model_type, "task": spec.task, "seed": SEED, "format": TWIN_FORMAT}, indent=1)
    )


def _llava(tok):
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    vision = CLIPVisionConfig()
    _vision_config(vision)
    patches = (vision.image_size // vision.patch_size) ** 2
    config = LlavaConfig(
        text_config=_text_config("llama", tok).to_dict(),
        vision_config=vision.to_dict(),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_seq_length=patches,
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": vision.image_size}, crop_size={"height": vision.image_size, "width": vision.image_size}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=vision.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=tok.chat_template,
    )
    return config, processor


def _qwen2_vl(tok):
    from transformers import Qwen2VLConfig, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    text = _text_config("qwen2_vl_text", tok)
    # mrope splits head_dim/2 rotary frequencies over (time, height, width).
    text.rope_parameters = {**(text.rope_parameters or {}), "rope_type": "default", "mrope_section": [2, 3, 3]}
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": text.hidden_size, "num_heads": 2, "patch_size": 14,
              "spatial_merge_size": 2, "temporal_patch_size": 2}
    config = Qwen2VLConfig(
        text_config=text.to_dict(),
        vision_config=vision,
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"),
    )
    side = 56  # 4x4 patches of 14 -> 4 image tokens after the 2x2 merge
    image_processor = Qwen2VLImageProcessorPil(
        size={"shortest_edge": side * side, "longest_edge": side * side}, patch_size=14, merge_size=2, temporal_patch_size=2
    )
    try:
        processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tok, chat_template=tok.chat_template)
    except AttributeError:
        # transformers cannot construct Qwen2VLProcessor without torchvision (its video processor registry is
        # a placeholder). Save the parts a real checkpoint has, so the twin exists and a run reports the
        # failure at load, exactly as the real model would here.
        processor = _SavedParts(image_processor, {"processor_class": "Qwen2VLProcessor"})
    return config, processor


class _SavedParts:
    """Stands where a processor object cannot be built: saves its image processor and processor_config.json."""

    def __init__(self, image_processor, processor_config: dict):
        self.image_processor, self.processor_config = image_processor, processor_config

    def save_pretrained(self, folder) -> None:
        self.image_processor.save_pretrained(folder)
        (Path(folder) / "processor_config.json").write_text(json.dumps(self.processor_config, indent=1))


def _gemma3(tok):
    from transformers import Gemma3Config, Gemma3Processor, SiglipVisionConfig
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    vision = SiglipVisionConfig()
    _vision_config(vision)
    text = _text_config("gemma3_text", tok)
    tokens_per_image = 4  # 4x4 patches pooled 2x2
    config = Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        mm_tokens_per_image=tokens_per_image,
        boi_token_index=tok.convert_tokens_to_ids("<start_of_image>"),
        eoi_token_index=tok.convert_tokens_to_ids("<end_of_image>"),
        image_token_index=tok.convert_tokens_to_ids("<image_soft_token>"),
    )
    image_processor = Gemma3ImageProcessorPil(size={"height": vision.image_size, "width": vision.image_size})
    processor = Gemma3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_length=tokens_per_image, chat_template=tok.chat_template
    )
    return config, processor


def _idefics3(tok):
    from transformers import Idefics3Config, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    vision = {**VISION_SHRINK}
    vision.pop("projection_dim")
    scale_factor = 2
    config = Idefics3Config(
        text_config=_text_config("llama", tok).to_dict(),
        vision_config=vision,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        scale_factor=scale_factor,
    )
    seq_len = (vision["image_size"] // vision["patch_size"]) ** 2 // scale_factor**2
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": vision["image_size"]},
        max_image_size={"longest_edge": vision["image_size"]},
    )
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_len=seq_len, chat_template=tok.chat_template
    )
    return config, processor


def _paligemma(tok):
    from transformers import PaliGemmaConfig, PaliGemmaProcessor, SiglipVisionConfig
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    vision = SiglipVisionConfig()
    _vision_config(vision)
    text = _text_config("gemma", tok)
    tokens = (vision.image_size // vision.patch_size) ** 2
    vision.projection_dim = text.hidden_size
    config = PaliGemmaConfig(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        projection_dim=text.hidden_size,
    )
    config.vision_config.num_image_tokens = tokens
    image_processor = SiglipImageProcessorPil(size={"height": vision.image_size, "width": vision.image_size})
    image_processor.image_seq_length = tokens
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tok, chat_template=tok.chat_template)
    return config, processor


_VLM_BUILDERS = {"llava": _llava, "qwen2_vl": _qwen2_vl, "gemma3": _gemma3, "idefics3": _idefics3, "paligemma": _paligemma}


# ----------------------------------------------------------------------------------------------
# Deliberately broken copies of a twin, for teaching and tests: each fails in a known way.
# ----------------------------------------------------------------------------------------------

BREAKAGES = {
    "perturbed": "one weight matrix shifted: runs, but its tokens differ from the unperturbed reference (mismatch)",
    "bad_config": "config.json names an activation transformers does not have: from_pretrained fails (load)",
    "no_tokenizer": "tokenizer files removed: refused before any run, with a one-line error",
}


def broken_twin(model_id_or_type: str, dest: str | Path, how: str) -> Path:
    """Copy a twin to ``dest`` and break it as ``how`` says (see BREAKAGES). Returns ``dest``."""
    if how not in BREAKAGES:
        raise UserError(f"unknown breakage '{how}': choose one of {', '.join(BREAKAGES)}")
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(build_twin(model_id_or_type), dest)
    if how == "perturbed":
        from safetensors.torch import load_file, save_file

        weights = load_file(dest / "model.safetensors")
        name = next(k for k in sorted(weights) if k.endswith("mlp.down_proj.weight") and ".1." in k)
        weights[name] = weights[name] + 0.5 * weights[name].abs().max()
        save_file(weights, dest / "model.safetensors", metadata={"format": "pt"})
    elif how == "bad_config":
        config = json.loads((dest / "config.json").read_text())
        config["hidden_act"] = "no_such_activation"
        (dest / "config.json").write_text(json.dumps(config, indent=1))
    else:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            (dest / name).unlink(missing_ok=True)
    return dest
