"""What transformers declares a model class compiles (``_can_compile_fullgraph``), read for one run's row.

transformers declares per class whether its forward captures as one graph; a user reading the flag alone is misled
where the two disagree. ``declared_fullgraph`` reads the flag from the installed transformers' own classes (the
class an auto mapping names for the architecture and task); ``analysis.declared`` sets it beside the verdicts.
"""

from __future__ import annotations

from functools import lru_cache

from neuronhelpers.core import vocab

_MAPPINGS = {vocab.TEXT_GENERATION: "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
             vocab.IMAGE_TEXT_TO_TEXT: "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
             vocab.AUTOMATIC_SPEECH_RECOGNITION: "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"}


@lru_cache(maxsize=None)
def declared_fullgraph(model_type: str | None, task: str | None) -> bool | None:
    """The installed transformers' ``_can_compile_fullgraph`` of the class its auto mapping names for this architecture
    and task; None when transformers maps none (or its class cannot be imported here)."""
    if not model_type or task not in _MAPPINGS:
        return None
    try:
        import transformers
        from transformers.models.auto import modeling_auto

        name = getattr(modeling_auto, _MAPPINGS[task]).get(model_type)
        cls = getattr(transformers, name, None) if name else None
    except Exception:  # noqa: BLE001 - a class whose module needs a missing package: nothing declared here
        return None
    flag = getattr(cls, "_can_compile_fullgraph", None)
    return bool(flag) if flag is not None else None
