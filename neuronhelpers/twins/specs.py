"""What twins exist: one ``TwinSpec`` per architecture of the installed transformers for the catalog's tasks
(enumerated from its auto mappings, causal LM and image-text-to-text: no hand list), plus the twins of the other
libraries (sentence-transformers, diffusers); how they are named (``tiny/<model_type>``), and the constants every
builder shares. A leaf: imports nothing of the package beyond core and the override table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neuronhelpers.core.errors import UserError
from neuronhelpers.core.vocab import FEATURE_EXTRACTION, IMAGE_TEXT_TO_TEXT, TEXT_GENERATION, TEXT_TO_IMAGE
from neuronhelpers.twins.overrides import text_overrides

TWIN_PREFIX = "tiny/"
SEED = 0
# Bumped when the way twins are built changes, so cached twins are rebuilt.
TWIN_FORMAT = 4
# A twin must stay tiny: it is built, compiled and run for every architecture on two CPU cores.
MAX_TWIN_PARAMETERS = 3_000_000
# Random init gives near-uniform logits; scaling the output head makes greedy choices decisive, so a
# twin's tokens test the compiled numerics rather than ties between equally likely tokens.
LOGIT_SCALE = 20.0

LIBRARY_TASKS = (FEATURE_EXTRACTION, TEXT_TO_IMAGE)
# name -> (model_type, task): the architecture a library twin stands in for, and how it is addressed (tiny/<name>).
LIBRARY_TWINS = {
    "st-bert": ("bert", FEATURE_EXTRACTION),
    "st-qwen3": ("qwen3", FEATURE_EXTRACTION),
    "sd-unet": ("unet2d", TEXT_TO_IMAGE),
    "pixart-dit": ("pixart", TEXT_TO_IMAGE),
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


def _mappings() -> tuple[dict, dict]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def library_twin_specs() -> list[TwinSpec]:
    """The twins of the other libraries (TwinSpec with a ``name``), in a stable order."""
    return [TwinSpec(model_type, task, name=name) for name, (model_type, task) in LIBRARY_TWINS.items()]


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
