"""The Selected list: popular Hub models the catalog tracks, with their task and architecture.

A model deliberately left out carries its reason: "not a priority yet", or "incompatible: ...".
Offline, a sweep of this list runs the tiny twin of each architecture instead (see twins.py); a
twin's row is labelled as a twin and never stands in for the real model.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import IMAGE_TEXT_TO_TEXT as ITT
from .vocab import TEXT_GENERATION as TG

NOT_A_PRIORITY = "not a priority yet"


@dataclass(frozen=True)
class Selected:
    model_id: str
    task: str
    model_type: str
    excluded: str | None = None  # the reason, when deliberately left out


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
    Selected("openai/gpt-oss-20b", TG, "gpt_oss", excluded=NOT_A_PRIORITY),
    Selected("deepseek-ai/DeepSeek-V3", TG, "deepseek_v3",
             excluded="incompatible: 671B parameters need far more than 16 cores"),
    Selected("microsoft/Phi-4-multimodal-instruct", ITT, "phi4_multimodal",
             excluded="incompatible: needs trust_remote_code (its code lives in the checkpoint)"),
]


def selected_twins() -> list[str]:
    """The twins that stand in for the Selected list offline: one per architecture, in list order."""
    from .twins import architectures

    known = {spec.model_type for spec in architectures()}
    seen = []
    for entry in SELECTED:
        if entry.excluded is None and entry.model_type in known and f"tiny/{entry.model_type}" not in seen:
            seen.append(f"tiny/{entry.model_type}")
    return seen
