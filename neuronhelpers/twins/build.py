"""Tiny twins: real transformers architectures with shrunk dimensions, built offline, one per architecture.

A twin stands in for a Hub checkpoint in tests and offline sweeps. It is the architecture's real
config class and modeling code, with small dimensions, random weights from a fixed seed, and a
tokenizer (plus image processor / processor for vision-language models) built locally. It is saved
with ``save_pretrained`` and loaded back with ``from_pretrained``, so it exercises exactly the code
path that decides whether an architecture compiles. A twin is addressed as ``tiny/<model_type>``.

The architectures are enumerated from transformers' own auto mappings (causal LM and
image-text-to-text) of the installed release: no hand list. A family that needs more than the generic
shrink has a data entry in ``TWIN_OVERRIDES`` with a one-line reason. A twin counts only when it runs
eagerly after loading back (a forward pass and a few greedy tokens); when it cannot be built or does not
run, ``build_twin`` raises ``TwinUnavailable`` with the reason, and the catalog records the architecture
as UNTESTED, never FAIL. Taught in notebook 02 and the architecture catalog notebook.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.core.errors import UserError
from neuronhelpers.core.vocab import IMAGE_TEXT_TO_TEXT, TEXT_GENERATION

TWIN_PREFIX = "tiny/"
SEED = 0
# Bumped when the way twins are built changes, so cached twins are rebuilt.
TWIN_FORMAT = 4
# A twin must stay tiny: it is built, compiled and run for every architecture on two CPU cores.
MAX_TWIN_PARAMETERS = 3_000_000


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
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    # multi-head latent attention (deepseek family)
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    # partial rotary embeddings sized for head_dim 16
    "rotary_dim": 8,
    # encoder-decoder families used as decoders (bart, marian, pegasus, ...)
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    # state-space and linear-attention layers
    "state_size": 8,
    "ssm_state_size": 8,
    "mamba_d_state": 8,
    "mamba_n_heads": 4,
    "mamba_head_dim": 16,
    "mamba_expand": 2,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_heads": 4,
    "linear_head_dim": 16,
    "mamba_d_head": 32,
    "mamba_d_ssm": 128,  # falcon_h1: mamba_n_heads * mamba_d_head
    "mamba_n_groups": 1,
    "n_groups": 1,
    "time_step_rank": 8,
    # other names of the same sizes
    "dim_model": 64,
    "dim_ff": 128,
    "dim_head": 16,
    "num_heads": 4,
    "num_layers": 2,
    "expert_ffn_hidden_size": 64,
    "zero_expert_num": 2,
    "moe_topk": 2,
    "qk_head_dim": 16,
    "index_n_heads": 2,
    "index_head_dim": 16,
    "index_topk": 8,
    "index_kpool": 4,  # glm5_next: index_topk is a multiple of it
    "num_decoder_layers": 2,
    "d_ff": 128,
    "d_kv": 16,
    "encoder_hash_byte_group_vocab": 64,  # blt: hashed byte n-gram embeddings
}


@dataclass(frozen=True)
class TwinSpec:
    """One twin: its transformers model_type, task, and config overrides beyond the generic shrink."""

    model_type: str
    task: str = TEXT_GENERATION
    overrides: dict = field(default_factory=dict)
    name: str | None = None  # the twin's name when it differs from model_type (twins of other libraries)

    @property
    def model_id(self) -> str:
        return TWIN_PREFIX + (self.name or self.model_type)

    @property
    def key(self) -> str:
        return self.name or self.model_type


# Families that need more than the generic shrink: (config overrides, the one-line reason).
TWIN_OVERRIDES: dict[str, tuple[dict, str]] = {
    "mistral": ({"sliding_window": None},
                "Mistral-7B-v0.3 and later disable the sliding window that MistralConfig still defaults to (v0.1's 4096)"),
    "gpt_neo": ({"attention_types": [[["global", "local"], 1]]},
                "its layer pattern is a (pattern, repeats) pair: one global and one local layer"),
    "jamba": ({"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1},
              "its attention and expert layers are placed by period and offset: one of each in two layers"),
    "bamba": ({"attn_layer_indices": [1]}, "its default config has no attention layer; real checkpoints place some"),
    "granitemoehybrid": ({"layer_types": ["mamba", "attention"]},
                         "its default config has no attention layer; real checkpoints mix mamba and attention"),
    "mamba2": ({"num_heads": 8}, "Mamba2 needs num_heads * head_dim == expand * hidden_size (8 * 16 == 2 * 64)"),
    "zaya": ({"num_experts_per_tok": 1}, "ZAYA supports one expert per token only"),
    "reformer": ({"is_decoder": True, "axial_pos_embds_dim": [32, 32]},
                 "ReformerModelWithLMHead generates only as a decoder; its axial position sizes must sum to hidden_size"),
    "recurrent_gemma": ({"block_types": ["recurrent", "attention"]},
                        "its block pattern repeats every three layers: keep one recurrent and one attention block"),
    "longcat_flash": ({"head_dim": 8}, "its rope runs over head_dim, which checkpoints set equal to qk_rope_head_dim"),
    "cohere_compass_text": ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
                            "the default config has no per-layer-type rope_parameters (checkpoints carry them)"),
    "dbrx": ({"attn_config": {"rope_theta": 500000.0, "clip_qkv": 8}},
             "the attention reads attn_config rope_theta and clip_qkv, which checkpoints carry and the default leaves out"),
    "lfm2_moe": ({"layer_types": ["conv", "full_attention"]},
                 "the default config leaves layer_types unset; checkpoints mix conv and full-attention layers"),
    "dots3_note_text": ({"qk_rope_head_dim": 4},
                        "its sliding layers need head_dim == qk_nope + qk_rope (256 = 192 + 64): all three shrunk by 1/16"),
    "xlstm": ({"hidden_size": 128, "embedding_dim": 128},
              "its state cache rounds qk_dim = hidden_size * qk_dim_factor (0.5) up to a multiple of 64 and its layers do not: "
              "a width of 128 keeps them equal, as 4096 does in checkpoints"),
    "zamba": ({"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]},
              "its shared transformer block is tied across the hybrid layers (every 6th in checkpoints): two keep the tie"),
    # architectures mapped to causal LM that cannot generate text alone: no twin, UNTESTED with this reason
    "musicgen": ({"no_twin": True}, "MusicgenForCausalLM generates audio codebook tokens (output modality audio), not text"),
    "musicgen_melody": ({"no_twin": True},
                        "MusicgenMelodyForCausalLM generates audio codebook tokens (output modality audio), not text"),
    "gemma4_assistant": ({"no_twin": True}, "a speculative-decoding drafter: its forward needs the target model's inputs_embeds "
                         "and shared KV states (generate(assistant_model=...)), so it does not generate alone"),
    "gemma4_unified_assistant": ({"no_twin": True}, "a speculative-decoding drafter: its forward needs the target model's "
                                 "inputs_embeds and shared KV states (generate(assistant_model=...)), so it does not generate alone"),
    "qwen4_exp_text": ({"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 64,
                        "indexer_compress_ratio": 4},
                       "the default config leaves the QSA indexer (on the indexed-attention layers) unset"),
}


def _mappings() -> tuple[dict, dict]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def architectures(task: str | None = None) -> list[TwinSpec]:
    """Every architecture of the installed transformers for the catalog's tasks, one twin spec each.

    A model type mapped for image-text-to-text is tested as such (its causal-LM mapping, where it has one,
    points at the same multimodal class); the rest of the causal-LM mapping is text-generation.
    """
    from neuronhelpers.twins.libraries import library_twin_specs

    causal, vision = _mappings()
    specs = [TwinSpec(t, IMAGE_TEXT_TO_TEXT, TWIN_OVERRIDES.get(t, ({}, ""))[0]) for t in vision]
    specs += [TwinSpec(t, TEXT_GENERATION, TWIN_OVERRIDES.get(t, ({}, ""))[0]) for t in causal if t not in vision]
    specs.sort(key=lambda spec: spec.model_type)
    specs += library_twin_specs()  # sentence-transformers and diffusers twins
    return [spec for spec in specs if task is None or spec.task == task]


def mapped_tasks(model_type: str) -> list[str]:
    """The catalog tasks whose auto mapping lists this model type (a type can be in both)."""
    causal, vision = _mappings()
    return [task for task, mapping in ((TEXT_GENERATION, causal), (IMAGE_TEXT_TO_TEXT, vision)) if model_type in mapping]


class TwinUnavailable(UserError):
    """No tiny twin of this architecture can be built and run here: the architecture is UNTESTED, not FAILED."""

    def __init__(self, spec: TwinSpec, reason: str, cause: str, stage: str = "twin"):
        super().__init__(f"no tiny twin of '{spec.key}' could be built here: {reason}")
        self.spec, self.reason, self.cause, self.stage = spec, reason, cause, stage


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
    """Where built twins are cached (``NEURONHELPERS_HOME``/twins)."""
    from neuronhelpers.core.settings import home

    return home() / "twins"


def is_twin_id(model_id: str) -> bool:
    return model_id.startswith(TWIN_PREFIX)


def twin_spec(model_id_or_type: str) -> TwinSpec:
    """The spec of ``tiny/<model_type>`` for any architecture the installed transformers maps to a catalog task."""
    model_type = model_id_or_type[len(TWIN_PREFIX) :] if is_twin_id(model_id_or_type) else model_id_or_type
    for spec in architectures():
        if spec.key == model_type:
            return spec
    from difflib import get_close_matches

    close = get_close_matches(model_type, [s.key for s in architectures()], n=3)
    hint = f"did you mean {', '.join(TWIN_PREFIX + c for c in close)}?" if close else \
        "`neuronhelpers twins --all` lists every architecture"
    raise UserError(f"unknown twin '{model_id_or_type}': transformers maps no text-generation or image-text-to-text "
                    f"architecture named '{model_type}'; {hint}") from None


def _spec_digest(spec: TwinSpec) -> str:
    """What a built twin (or a remembered failure) depends on: the spec, this builder's code, the transformers and
    torch releases. Any change builds the twin anew."""
    import torch
    import transformers

    here = Path(__file__).parent  # the builders' code: every module of the twins package
    builder = hashlib.sha256(b"".join(path.read_bytes() for path in sorted(here.rglob("*.py")))).hexdigest()
    blob = json.dumps([TWIN_FORMAT, spec.key, spec.model_type, spec.task, spec.overrides, builder,
                       transformers.__version__, torch.__version__.split("+")[0]], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def twin_path(model_id_or_type: str) -> Path:
    """The folder a twin is (or will be) saved in; built checkpoints are keyed by spec and library version."""
    spec = twin_spec(model_id_or_type)
    return twin_home() / f"{spec.key}-{_spec_digest(spec)}"


BUILD_TIMEOUT_S = 300.0
BUILD_MEMORY_BYTES = 16 * 2**30  # address space: torch alone maps ~4 GiB, and each thread reserves malloc arenas


def build_twin(model_id_or_type: str, *, force: bool = False, isolated: bool = True) -> Path:
    """Build (or reuse) the twin and return the folder ``from_pretrained`` loads it from.

    The build runs in a child process (``isolated``) with a timeout and a memory limit: building runs the
    architecture's own code, and a crash, hang or runaway allocation there must cost one architecture, not
    the sweep. The folder is written under a temporary name, checked (it must load back and run eagerly),
    then renamed into place, so a half-built or broken twin is never seen by another process. When the
    twin cannot be built or does not run, ``TwinUnavailable`` says why; the failure is remembered next to
    the twins (keyed like the twin) so the next sweep does not pay for it again (``force`` retries).
    """
    spec = twin_spec(model_id_or_type)
    dest = twin_path(spec.key)
    failed = _unavailable_marker(dest)
    if not force:
        known = known_twin(spec)
        if known is not None:
            return known
    if isolated:
        return _build_in_child(spec, force)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key}-", dir=dest.parent))
    try:
        _write_twin(spec, tmp)
        check_twin_runs(spec, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
        failed.unlink(missing_ok=True)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        unavailable = _unavailable(spec, exc)
        tmp_failed = failed.with_name(f".{failed.name}.{os.getpid()}")
        tmp_failed.write_text(json.dumps({"reason": unavailable.reason, "cause": unavailable.cause,
                                          "stage": unavailable.stage}))
        os.replace(tmp_failed, failed)
        raise unavailable from exc
    return dest


def _unavailable_marker(dest: Path) -> Path:
    return dest.with_name(dest.name + ".unavailable.json")


def known_twin(spec: TwinSpec) -> Path | None:
    """The built twin's folder; raises TwinUnavailable when building it failed before; None when never tried."""
    dest = twin_path(spec.key)
    if (dest / "TWIN.json").is_file():  # written last, into a folder renamed into place only once checked
        return dest
    marker = _unavailable_marker(dest)
    if marker.is_file():
        known = json.loads(marker.read_text())
        raise TwinUnavailable(spec, known["reason"], known["cause"], known.get("stage", "twin"))
    return None


def _build_in_child(spec: TwinSpec, force: bool) -> Path:
    """Build in a child process (``python -m neuronhelpers.twins.build build``); read the outcome from disk."""
    from neuronhelpers.run.process import execute

    args = ["build", spec.key] + (["--force"] if force else [])
    outcome = execute(None, args, module="neuronhelpers.twins.build", timeout=BUILD_TIMEOUT_S,
                      memory_limit_bytes=BUILD_MEMORY_BYTES)
    found = known_twin(spec)  # the child wrote the twin, or the reason it could not
    if found is not None:
        return found
    if outcome.timed_out:
        why, cause = f"the build did not finish within {BUILD_TIMEOUT_S:g} s", "twin build: timeout"
    elif outcome.signal_name:
        why, cause = f"the build crashed ({outcome.signal_name})", f"twin build: crashed ({outcome.signal_name})"
    else:
        last = (outcome.stderr.strip().splitlines() or [f"exit status {outcome.returncode}"])[-1][:300]
        why, cause = f"the build failed: {last}", "twin build: failed without a reason"
    raise TwinUnavailable(spec, why, cause)


def _unavailable(spec: TwinSpec, exc: Exception) -> TwinUnavailable:
    """Why a twin could not be built or run, in words and as a cause signature."""
    import traceback

    from neuronhelpers.verdict.causes import missing_package, normalise

    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    reason = f"{type(exc).__name__}: {message[:300]}" if message else type(exc).__name__
    package = missing_package(reason, "".join(traceback.format_exception(exc)))
    if package:
        return TwinUnavailable(spec, f"it needs the package '{package}', which is not installed here ({reason})",
                               f"missing package: {package}", stage="dependency")
    step = getattr(exc, "twin_step", "build")
    return TwinUnavailable(spec, f"{step} failed: {reason}",
                           f"twin {step}: {type(exc).__name__}: {normalise(message)[:100]}")


def check_twin_runs(spec: TwinSpec, folder: Path) -> None:
    """The twin loads back with from_pretrained and runs eagerly: a forward pass and 4 greedy tokens.

    A twin that cannot do this would make any failure of the compiled run meaningless, so it is not a twin.
    """
    import torch

    from neuronhelpers.twins import libraries as library_twins
    from neuronhelpers.run.recipes.transformers_generate import generated_tokens, load

    if spec.task in library_twins.LIBRARY_TASKS:
        return library_twins.check_twin_runs(spec, folder)
    try:
        params = {"model_path": str(folder), "task": spec.task, "trust_remote_code": False, "revision": None,
                  "parallelism": "none", "prompt": "Describe this image in one sentence." if spec.task == IMAGE_TEXT_TO_TEXT
                  else "Write a short story about a robot who learns to paint."}
        model, tokenizer, inputs = load(params, "cpu", torch.float32)
        parameters = sum(p.numel() for p in model.parameters())
        if parameters > MAX_TWIN_PARAMETERS:
            raise ValueError(f"the shrunk model still has {parameters:,} parameters (more than {MAX_TWIN_PARAMETERS:,})")
        with torch.inference_mode():
            model(**inputs)
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            out = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=pad)
        new = generated_tokens(model, out, inputs["input_ids"].shape[1])
        if len(new) != 4:
            raise ValueError(f"generate() returned {len(new)} new tokens, not 4")
    except Exception as exc:
        exc.twin_step = "eager check"
        raise


def trained_bpe():
    """The twins' byte-level BPE, trained on the corpus above (the same for every twin)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
    return bpe


def _build_tokenizer(model_type: str | None = None):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=trained_bpe(),
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
    )
    tok.chat_template = _CHAT_TEMPLATE.replace("IMAGE_PLACEHOLDER", "")
    return tok


# Sizes a config may leave unset (None) when the architecture can run without them, but which a twin sets so
# that the feature they size (experts, for one) is built and tested.
_SET_EVEN_IF_UNSET = {"n_routed_experts", "num_experts_per_tok", "n_shared_experts", "head_dim", "num_key_value_heads",
                      "num_kv_heads", "intermediate_size", "n_inner"}


def shrunk_config(model_type: str, table: dict, overrides: dict | None = None, **fixed):
    """The architecture's own config built small, by the one shrink machinery of text and vision-language twins
    (``vlm_twins.build_config``): every size in ``table`` the config has, nested sub-configs shrunk by their role,
    per-layer lists, patterns and per-layer overrides cut to the new depth keeping every kind of layer, layer
    indices clamped, linked widths kept equal, derived sizes derived again; then the family's ``overrides`` and the
    ``fixed`` values (token ids; ``vocab_size`` is every vocabulary of the language side)."""
    from neuronhelpers.twins.vision.build import build_config, set_vocab, text_configs

    config = build_config(model_type, {"text": dict(overrides or {})}, text_table=table, text_twin=True)
    fixed = dict(fixed)
    if "vocab_size" in fixed:
        set_vocab(config, fixed.pop("vocab_size"))
    for sub in text_configs(config) or [config]:
        for key, value in fixed.items():
            if key in sub.__dict__ or key in getattr(sub, "attribute_map", {}):
                setattr(sub, key, value)
    return type(config).from_dict(config.to_dict())  # validated as loading will


def _text_config(model_type: str, tok, overrides: dict | None = None):
    token_ids = {"vocab_size": len(tok), "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
                 "pad_token_id": tok.pad_token_id}
    return shrunk_config(model_type, TEXT_SHRINK, overrides, **token_ids)


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


def _check_size(auto_class, config) -> None:
    """Refuse a config that did not shrink before any memory is spent on it (counted on the meta device)."""
    import torch

    with torch.device("meta"):
        parameters = sum(p.numel() for p in auto_class.from_config(config).parameters())
    if parameters > MAX_TWIN_PARAMETERS:
        raise ValueError(f"the shrunk config still has {parameters:,} parameters (more than {MAX_TWIN_PARAMETERS:,}): "
                         "a size this architecture names differently was not shrunk")


def _write_twin_files(spec: TwinSpec, folder: Path) -> None:
    import torch

    from neuronhelpers.twins import libraries as library_twins

    if spec.task in library_twins.LIBRARY_TASKS:
        return library_twins.write_twin(spec, folder)
    if spec.overrides.get("no_twin"):
        raise ValueError(f"not a text generator on its own: {TWIN_OVERRIDES[spec.model_type][1]}")
    tok = _build_tokenizer(spec.model_type)
    if spec.task == TEXT_GENERATION:
        from transformers import AutoModelForCausalLM

        config = _text_config(spec.model_type, tok, spec.overrides)
        _check_size(AutoModelForCausalLM, config)
        torch.manual_seed(SEED)
        model = AutoModelForCausalLM.from_config(config)
        processor = None
    else:
        from neuronhelpers.twins.vision.build import build_vlm_twin

        build_vlm_twin(spec.model_type, folder)  # model, tokenizer and processor, generic from transformers
        _write_twin_json(spec, folder)
        return
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(_LOGIT_SCALE)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    _write_twin_json(spec, folder)


def _write_twin_json(spec: TwinSpec, folder: Path) -> None:
    (folder / "TWIN.json").write_text(
        json.dumps({"twin_of": spec.model_type, "task": spec.task, "seed": SEED, "format": TWIN_FORMAT}, indent=1)
    )


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


def main(argv: list[str] | None = None) -> int:
    """``python -m neuronhelpers.twins.build build MODEL_TYPE [--force]``: build one twin in this process."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "build":
        print("usage: python -m neuronhelpers.twins.build build MODEL_TYPE [--force]", file=sys.stderr)
        return 2
    try:
        print(build_twin(argv[1], force="--force" in argv, isolated=False))
    except TwinUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
