"""The Selected list: popular Hub models the catalog tracks, with their task and architecture.

A model deliberately left out carries its reason: "not a priority yet", or "incompatible: ...".
Offline, a sweep of this list runs the tiny twin of each architecture instead (see neuronhelpers.twins); a
twin's row is labelled as a twin and never stands in for the real model.

Taught in notebook 01 (the Selected view).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from neuronhelpers.core.vocab import FEATURE_EXTRACTION as FE
from neuronhelpers.core.vocab import IMAGE_TEXT_TO_TEXT as ITT
from neuronhelpers.core.vocab import TEXT_GENERATION as TG
from neuronhelpers.core.vocab import TEXT_TO_IMAGE as T2I

NOT_A_PRIORITY = "not a priority yet"


@dataclass(frozen=True)
class Selected:
    model_id: str
    task: str
    model_type: str
    excluded: str | None = None  # the reason, when deliberately left out
    parameters: int | None = None  # published parameter count (all components of a pipeline), for planning offline
    cores: int | None = None  # the planner's cores on a trn2 in bfloat16, computed from ``parameters``


SELECTED = [
    Selected("Qwen/Qwen3-0.6B", TG, "qwen3"),
    Selected("Qwen/Qwen3-1.7B", TG, "qwen3"),
    Selected("Qwen/Qwen3-8B", TG, "qwen3"),
    Selected("Qwen/Qwen2.5-7B-Instruct", TG, "qwen2"),
    Selected("meta-llama/Llama-3.2-1B-Instruct", TG, "llama"),
    Selected("meta-llama/Llama-3.1-8B-Instruct", TG, "llama"),
    Selected("meta-llama/Llama-3.3-70B-Instruct", TG, "llama"),
    Selected("mistralai/Mistral-7B-Instruct-v0.3", TG, "mistral"),
    Selected("google/gemma-2-2b-it", TG, "gemma2"),
    Selected("google/gemma-3-1b-it", TG, "gemma3_text"),
    Selected("microsoft/Phi-3.5-mini-instruct", TG, "phi3"),
    Selected("ibm-granite/granite-3.3-2b-instruct", TG, "granite"),
    Selected("allenai/OLMo-2-1124-7B-Instruct", TG, "olmo2"),
    Selected("HuggingFaceTB/SmolLM3-3B", TG, "smollm3"),
    Selected("HuggingFaceTB/SmolLM2-135M-Instruct", TG, "llama"),  # on the shelf (models.shelf): runs offline
    Selected("google/gemma-3-270m", TG, "gemma3_text"),  # on the shelf
    Selected("openai-community/gpt2", TG, "gpt2"),
    Selected("EleutherAI/pythia-1b", TG, "gpt_neox"),
    Selected("tiiuae/falcon-7b-instruct", TG, "falcon"),
    Selected("bigcode/starcoder2-3b", TG, "starcoder2"),
    Selected("Qwen/Qwen3-30B-A3B", TG, "qwen3_moe"),
    Selected("mistralai/Mixtral-8x7B-Instruct-v0.1", TG, "mixtral"),
    Selected("llava-hf/llava-1.5-7b-hf", ITT, "llava"),
    Selected("Qwen/Qwen2-VL-2B-Instruct", ITT, "qwen2_vl"),
    Selected("google/gemma-3-4b-it", ITT, "gemma3"),
    Selected("HuggingFaceM4/Idefics3-8B-Llama3", ITT, "idefics3"),
    Selected("google/paligemma2-3b-mix-224", ITT, "paligemma"),
    # sentence-transformers (feature-extraction); model_type is the transformer module's. Counts: the Hub's
    # safetensors metadata of each model.
    Selected("sentence-transformers/all-MiniLM-L6-v2", FE, "bert", parameters=22_713_216),
    Selected("sentence-transformers/all-mpnet-base-v2", FE, "mpnet", parameters=109_486_464),
    Selected("BAAI/bge-m3", FE, "xlm-roberta", parameters=567_754_752),
    Selected("Qwen/Qwen3-Embedding-0.6B", FE, "qwen3", parameters=595_776_512),
    # diffusers (text-to-image); model_type is the pipeline's family (its AutoPipelineForText2Image key). Counts:
    # every component summed.
    # unet 859.5M + vae 83.7M + CLIP text encoder 123.1M + safety checker 304.3M
    Selected("stable-diffusion-v1-5/stable-diffusion-v1-5", T2I, "stable-diffusion", parameters=1_370_575_023),
    # unet 2567.5M + CLIP-L 123.1M + OpenCLIP-bigG text encoder 694.7M + vae 83.7M
    Selected("stabilityai/stable-diffusion-xl-base-1.0", T2I, "stable-diffusion-xl", parameters=3_468_837_867),
    # PixArt-Sigma transformer 611.3M + T5-XXL encoder 4762.3M + vae 83.7M
    Selected("PixArt-alpha/PixArt-Sigma-XL-2-1024-MS", T2I, "pixart-sigma", parameters=5_457_317_127),
    # FLUX transformer 11901.4M + CLIP-L 123.1M + T5-XXL encoder 4762.3M + vae 83.8M: more than one core holds
    Selected("black-forest-labs/FLUX.1-schnell", T2I, "flux", parameters=16_870_599_139),
    Selected("openai/gpt-oss-20b", TG, "gpt_oss", excluded=NOT_A_PRIORITY),
    Selected("deepseek-ai/DeepSeek-V3", TG, "deepseek_v3",
             excluded="incompatible: 671B parameters need far more than 16 cores"),
    Selected("microsoft/Phi-4-multimodal-instruct", ITT, "phi4_multimodal",
             excluded="incompatible: needs trust_remote_code (its code lives in the checkpoint)"),
]


def planned(entry: Selected) -> Selected:
    """The entry with the planner's decision from its published parameter count: its cores on a trn2 in bfloat16,
    or EXCLUDED with the planner's reason when no core count holds it."""
    if entry.parameters is None or entry.excluded:
        return entry
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.plan.cores import core_bytes, plan_cores

    neuron = get_backend("neuron")
    plan = plan_cores(None, entry.parameters, dtype=neuron.dtype, core_memory=core_bytes(neuron),
                      source="published parameter count")
    return replace(entry, cores=plan.cores, excluded=plan.excluded)


SELECTED = [planned(entry) for entry in SELECTED]


def twin_for(entry: Selected) -> str | None:
    """The twin that stands in for a Selected model offline (its architecture's), or None."""
    from neuronhelpers.twins.specs import LIBRARY_TASKS, architectures

    for spec in architectures():
        if spec.model_type == entry.model_type and (entry.task not in LIBRARY_TASKS or spec.task == entry.task):
            return spec.model_id
    return None


def selected_twins() -> list[str]:
    """The twins that stand in for the Selected list offline: one per architecture, in list order."""
    seen = []
    for entry in SELECTED:
        twin = twin_for(entry) if entry.excluded is None else None
        if twin and twin not in seen:
            seen.append(twin)
    return seen
