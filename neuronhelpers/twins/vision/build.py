"""Tiny twins of vision-language models: generic, for every model type transformers maps to
AutoModelForImageTextToText (called by the orchestrator, twins/build.py, which checks each twin runs and remembers
failures).

A twin is built from transformers' own metadata, not from a per-family builder:

1. config   ``AutoConfig.for_model(model_type)``; every config in the tree is shrunk by its role
            (text: a config with a vocabulary; vision: everything else), per-layer lists are resized
            and layer indices are remapped into the shrunk depth (twins/shrink.py).
2. parts    tokenizer: a byte-level BPE trained locally (twins/tokenizers.py), with whatever named tokens the
            processor asks for; image / video processors and feature extractors from the auto mappings (PIL
            backend first), synced to the shrunk vision config (images.py).
3. processor  the processor class from PROCESSOR_MAPPING_NAMES (or the model's own module, or the
            processor of a model type sharing the model class); its ``__init__`` keyword arguments
            are filled from the config by name (processors.py).
4. ids      every ``*_token_id`` / ``*_token_index`` in the config tree is pointed at the token the
            processor or tokenizer names (a fresh special token when neither does) (tokens.py).
5. probe    the processor's prompt is run through the model once; named repair rules fix what its errors point
            at, e.g. a "features and tokens do not match" error resizes the processor's image sequence length
            (probe.py). A twin whose probe still fails is not saved: TwinError with the probe's error.

The few per-family corrections are entries of the one override table (twins/overrides.py). Taught in notebook 05.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import replace
from pathlib import Path

from neuronhelpers.core.errors import first_line
from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.twins.configs import geometry, sync_vocab
from neuronhelpers.twins.overrides import override
from neuronhelpers.twins.own import base_config, own_overrides, own_table
from neuronhelpers.twins.shrink import default_config, own_keys, shrink_config
from neuronhelpers.twins.specs import MAX_TWIN_PARAMETERS, SEED, TwinError
from neuronhelpers.twins.vision.images import build_feature_extractor, build_image_processor, build_video_processor
from neuronhelpers.twins.vision.probe import ProbeState, make_model, probe
from neuronhelpers.twins.vision.processors import build_processor, processor_class
from neuronhelpers.twins.vision.tokens import codebook_tokens, wire_token_ids
from neuronhelpers.twins.weights import decisive_weights, untie_output_head

__all__ = ["TwinError", "build_vlm_twin", "write_vlm_twin"]


def build_vlm_twin(model_type: str, folder, spec=None) -> Path:
    """Build the tiny twin of ``model_type`` (of a model's own config: ``spec``, a model twin's) into ``folder``;
    raise TwinError (one line) when it cannot."""
    with quiet_libraries():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _build(model_type, Path(folder), spec)
        except TwinError:
            raise
        except Exception as exc:  # any failure of the architecture's own code: one line, the cause kept as __cause__
            raise TwinError(first_line(exc, name=True)) from exc


def write_vlm_twin(spec, folder: Path) -> None:
    """The writer of image-text-to-text twins (the orchestrator's registry calls it with the spec)."""
    build_vlm_twin(spec.model_type, folder, spec)


def _check_model_class(model_type):
    """Refuse model classes run.py cannot drive: no image input, or no generate()."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    cls = getattr(transformers, MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type], None)
    if cls is None:
        return
    params = inspect.signature(cls.forward).parameters
    if not any(w in p for p in params for w in ("pixel", "patches", "image")) and not hasattr(
            cls, "get_image_features"):
        raise TwinError(f"{cls.__name__}.forward takes no image input (no pixel_values): listed in the "
                        "image-text-to-text mapping but not an image-text model")
    if not hasattr(cls, "generate"):
        raise TwinError(f"{cls.__name__} has no generate(): not a text generator (run.py cannot drive it)")


def _parts(model_type, config, ov, original):
    """The processor's parts other than the tokenizer: image processor, and the video processor or feature extractor
    when the processor class takes one."""
    parts = {"image_processor": build_image_processor(model_type, config, ov, original)}
    cls = processor_class(model_type, config)
    attrs = cls.get_attributes() if cls else []
    if "video_processor" in attrs:
        parts["video_processor"] = build_video_processor(model_type, config, ov, original)
    if "feature_extractor" in attrs:
        parts["feature_extractor"] = build_feature_extractor(model_type, config, ov)
    return parts


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _assemble(model_type, ov, spec=None):
    """Config, parts, tokens, processor and model, wired together (before the probe)."""
    base = base_config(spec) if spec is not None else None  # a model twin's own config (own.py)
    table = None
    if base is not None:
        ov = replace(ov, text=own_overrides(spec, ov.text),
                     config={k: v for k, v in ov.config.items() if k not in base})
        table = own_table(spec)
    config = default_config(model_type, ov, base)
    original = geometry(config)  # the default tower's geometry, which the processors' defaults were made for
    config = shrink_config(config, ov, table, keep=own_keys(base))
    untie_output_head(config)
    parts = _parts(model_type, config, ov, original)
    named: dict[str, str] = dict(ov.tokens)
    extra: list[str] = list(ov.extra_tokens) + (codebook_tokens(config, ov.codebook) if ov.codebook else [])
    processor = build_processor(model_type, config, parts, named, extra, ov)
    if wire_token_ids(config, processor, named, extra):
        processor = build_processor(model_type, config, parts, named, extra, ov)
        wire_token_ids(config, processor, named, extra)
    sync_vocab(config, processor.tokenizer)
    model = make_model(config)
    if _count(model) > MAX_TWIN_PARAMETERS:
        raise TwinError(f"config cannot be shrunk below {MAX_TWIN_PARAMETERS/1e6:.0f}M parameters: "
                        f"{_count(model)/1e6:.1f}M")
    return ProbeState(model_type, config, parts, named, extra, ov, model=model, trial=processor)


def _build(model_type, folder, spec=None):
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    if model_type not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        raise TwinError(f"{model_type} is not an image-text-to-text model type")
    ov = override(model_type)
    if ov.no_twin:
        raise TwinError(ov.why)
    _check_model_class(model_type)
    state = _assemble(model_type, ov, spec)
    # probe: choose where the prompt puts the image (from the processor's own tokens), and fit the
    # processor's image sequence length to the model's feature count
    model, processor, probe_error = probe(state)
    if probe_error:  # the prompt never ran through the model: no twin is saved, the architecture is UNTESTED (twin)
        failed = TwinError(probe_error)
        failed.twin_step = "probe"  # the reason reads "probe failed: <the model's error>"
        raise failed
    tok = processor.tokenizer
    decisive_weights(model, SEED)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tok.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
