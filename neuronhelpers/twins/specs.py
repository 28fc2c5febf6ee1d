"""What twins exist: one ``TwinSpec`` per architecture of the installed transformers for the catalog's tasks
(enumerated from its auto mappings, causal LM and image-text-to-text: no hand list), plus the twins of the other
libraries (sentence-transformers, diffusers); how they are named (``tiny/<model_type>``), and the constants every
builder shares. A leaf: imports nothing of the package beyond core and the override table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from neuronhelpers.core.errors import UserError
from neuronhelpers.core.vocab import (
    AUTOMATIC_SPEECH_RECOGNITION,
    DIFFUSERS,
    FEATURE_EXTRACTION,
    IMAGE_TEXT_TO_TEXT,
    TEXT_GENERATION,
    TEXT_TO_IMAGE,
)
from neuronhelpers.twins.overrides import text_overrides

TWIN_PREFIX = "tiny/"
SEED = 0
# Bumped when the way twins are built changes, so cached twins are rebuilt.
TWIN_FORMAT = 5
# A twin must stay tiny: it is built, compiled and run for every architecture on two CPU cores.
MAX_TWIN_PARAMETERS = 3_000_000

# Types whose twins wrote exactly the same 32 tokens as another type's (measured on the catalog swept 2026-12-04, the
# test in tests/test_sensitivity.py holds it): type -> (the type it computes like, why). The card lists them, so a row
# of one never reads as separate evidence for the other.
SAME_COMPUTATION = {
    "gpt-sw3": ("gpt2", "GPT-SW3 checkpoints run transformers' GPT-2 model classes"),
    "cosmos3_omni": ("qwen3_vl", "its language side is Qwen3-VL's (modular_cosmos3_omni imports it)"),
    "glm46v": ("glm4v", "GLM-4.6V is GLM-4V's model classes (modular_glm46v imports them)"),
    "glmga": ("glm4v", "the same text stack as GLM-4V at twin size"),
    "glm4_moe_lite": ("deepseek_v3", "DeepSeek-V3's latent attention and routed experts (modular_glm4_moe_lite)"),
    "hunyuan_v1_dense": ("qwen3", "a Llama-style stack with query/key norms, as Qwen3's, at twin size"),
    "internlm3": ("mistral", "a Llama-style stack, as Mistral's without its window, at twin size"),
    "iquestcoder": ("mistral", "a Llama-style stack, as Mistral's without its window, at twin size"),
    "apertus1p5_text": ("apertus", "Apertus 1.5's text model is Apertus's classes (modular_apertus1p5, transformers "
                        "5.24)"),
    "ernie4_5_moe": ("ernie4_5", "its layer 1 is a mixture of experts, yet it wrote the dense twin's tokens: not yet "
                     "understood, so its PASS says no more than ernie4_5's"),
}

LIBRARY_TASKS = (FEATURE_EXTRACTION, TEXT_TO_IMAGE)
# The names of the library twins: tiny/st-<model_type> (a sentence-transformers model around that transformers
# architecture), tiny/t2i-<key> (the diffusers text-to-image family AutoPipelineForText2Image names <key>).
EMBEDDING_PREFIX, PIPELINE_PREFIX = "st-", "t2i-"
# A speech-recognition twin: tiny/asr-<model_type> (whisper is also a causal-LM type, whose twin is tiny/whisper).
SPEECH_PREFIX = "asr-"
# Decoders the Hub's embedding models are built on (last-token pooling, left padding): qwen3 (Qwen3-Embedding, the
# Selected list's and the rankings snapshot's one decoder), qwen2 (gte-Qwen2), mistral (e5-mistral, SFR-Embedding),
# gemma3_text (EmbeddingGemma, bidirectional with mean pooling: libraries.py). Every other sentence-transformers twin is
# an encoder (mean pooling).
EMBEDDING_DECODERS = ("qwen3", "qwen2", "mistral", "gemma3_text")


@dataclass(frozen=True)
class TwinSpec:
    """One twin: its transformers model_type, task, and config overrides beyond the generic shrink."""

    model_type: str
    task: str = TEXT_GENERATION
    overrides: dict = field(default_factory=dict)
    name: str | None = None  # the twin's name when it differs from model_type (twins of other libraries)
    # a model twin's config and where it came from (own.py: JSON of twin_from, files, read, digest); None for the
    # architecture's twin
    own: str | None = None

    @property
    def model_id(self) -> str:
        return TWIN_PREFIX + (self.name or self.model_type)

    @property
    def key(self) -> str:
        return self.name or self.model_type


def _mappings() -> tuple[dict, dict]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def speech_specs() -> list[TwinSpec]:
    """One speech-recognition twin per type transformers maps to AutoModelForSpeechSeq2Seq (twins/speech.py says
    which of them are not speech-to-text, and why)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

    return [TwinSpec(t, AUTOMATIC_SPEECH_RECOGNITION, name=SPEECH_PREFIX + t)
            for t in sorted(MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)]


@lru_cache(maxsize=1)
def embedding_types() -> tuple[str, ...]:
    """The transformers architectures a sentence-transformers twin is built on: every text encoder the installed
    transformers maps to AutoModelForMaskedLM (a type with a vision or audio sub-config is not a text encoder),
    then EMBEDDING_DECODERS."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    def text_only(model_type):
        subs = getattr(AutoConfig.for_model(model_type), "sub_configs", {}) or {}
        return not any(name.startswith(("vision", "audio")) for name in subs)

    return tuple(sorted(t for t in MODEL_FOR_MASKED_LM_MAPPING_NAMES if text_only(t))) + EMBEDDING_DECODERS


@lru_cache(maxsize=1)
def pipeline_families() -> dict[str, str]:
    """Every text-to-image family of the installed diffusers: AutoPipelineForText2Image's key -> pipeline class name.

    Read from the source of diffusers' auto pipelines module rather than imported: importing the mapping imports
    every pipeline (about ten seconds), and this list is read wherever a twin is named. The literal mapping, and the
    families diffusers adds to it when an optional package is present (kolors, with sentencepiece): they are
    counted whether or not the package is here, so that their rows say what they need.
    """
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(DIFFUSERS)
    if spec is None or not spec.submodule_search_locations:
        return {}
    source = Path(spec.submodule_search_locations[0]) / "pipelines" / "auto_pipeline.py"
    tree = ast.parse(source.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "AUTO_TEXT2IMAGE_PIPELINES_MAPPING"
                                                 for t in node.targets)):
            families = {pair.elts[0].value: pair.elts[1].id for pair in node.value.args[0].elts}
            return {**families, **_added_families(tree)}
    raise RuntimeError(f"{source} no longer defines AUTO_TEXT2IMAGE_PIPELINES_MAPPING as a literal")


def _added_families(tree) -> dict[str, str]:
    """``AUTO_TEXT2IMAGE_PIPELINES_MAPPING["key"] = Class`` statements (under an optional package's guard)."""
    import ast

    added = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and getattr(target.value, "id", None)
                        == "AUTO_TEXT2IMAGE_PIPELINES_MAPPING" and isinstance(target.slice, ast.Constant)):
                    added[target.slice.value] = node.value.id
    return added


def pipeline_family(pipeline_class: str) -> str:
    """A diffusers pipeline's architecture, as the catalog names it: its AutoPipelineForText2Image key
    (StableDiffusionXLPipeline -> stable-diffusion-xl); a class no key maps keeps its own name."""
    by_class = {name: key for key, name in pipeline_families().items()}
    return by_class.get(pipeline_class, pipeline_class)


def library_twin_specs() -> list[TwinSpec]:
    """The twins of the other libraries (TwinSpec with a ``name``), in a stable order: one sentence-transformers
    twin per embedding architecture, one diffusers twin per text-to-image family."""
    specs = [TwinSpec(t, FEATURE_EXTRACTION, text_overrides(t), name=EMBEDDING_PREFIX + t) for t in embedding_types()]
    return specs + [TwinSpec(key, TEXT_TO_IMAGE, name=PIPELINE_PREFIX + key) for key in pipeline_families()]


def architectures(task: str | None = None) -> list[TwinSpec]:
    """Every architecture of the installed transformers for the catalog's tasks, one twin spec each.

    A model type mapped for image-text-to-text is tested as such (its causal-LM mapping, where it has one,
    points at the same multimodal class); the rest of the causal-LM mapping is text-generation. A vision-language
    twin's corrections are read from the override table by its builder, so its spec carries none.
    """
    causal, vision = _mappings()
    specs = [TwinSpec(t, IMAGE_TEXT_TO_TEXT) for t in vision]
    specs += [TwinSpec(t, TEXT_GENERATION, text_overrides(t)) for t in causal if t not in vision]
    specs.sort(key=lambda spec: spec.model_type)
    specs += speech_specs()  # speech recognition (transformers' speech seq2seq)
    specs += library_twin_specs()  # sentence-transformers and diffusers twins
    return [spec for spec in specs if task is None or spec.task == task]


def mapped_tasks(model_type: str) -> list[str]:
    """The catalog tasks whose auto mapping lists this model type (a type can be in both)."""
    causal, vision = _mappings()
    return [task for task, mapping in ((TEXT_GENERATION, causal), (IMAGE_TEXT_TO_TEXT, vision))
            if model_type in mapping]


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


class TwinError(Exception):
    """A twin cannot be built; the message is one line saying why."""
