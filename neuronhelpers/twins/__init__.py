"""Tiny twins: real transformers (and sentence-transformers, diffusers) architectures with shrunk
dimensions and random weights, built offline, one per architecture, plus deliberately broken copies.

    specs.py        TwinSpec, the twins there are (transformers' auto mappings + the library twins), tiny/<name>
    overrides.py    the one table of per-family corrections (Override), each with its reason
    tokenizers.py   the corpus, chat template and trained BPE; the text, vision-language and library tokenizers
    configs.py      reading a config tree: roles, derived attributes, rebuilt configs, vocabularies
    shrink.py       TEXT_SHRINK, VISION_SHRINK and the one shrink of every transformers twin's config
    layers.py       per-layer lists, indices and overrides kept consistent with the shrunk depth
    widths.py       linked widths, multimodal rope sections, tokens per image
    text.py         the text-generation twin writer
    vision/         image-text-to-text twins: images.py (image / video processors), processors.py, tokens.py (token
                    wiring), probe.py (the prompt through the model, named repair rules), build.py (the writer)
    libraries.py    sentence-transformers and diffusers twins: writer and eager check
    broken.py       deliberately broken copies (perturbed weights, a bad config, no tokenizer)
    build.py        the orchestrator: build_twin (isolated child, cache, remembered failures), the registry of
                    writers and eager checks by task, TWIN.json, ``python -m neuronhelpers.twins.build``

Taught in notebooks 02 (a twin), 03 (broken copies) and 05 (one twin per architecture). Importing this package
imports neither torch nor transformers.
"""

from neuronhelpers.twins.build import (
    TWIN_PREFIX,
    TwinSpec,
    TwinUnavailable,
    architectures,
    broken_twin,
    build_twin,
    is_twin_id,
    known_twin,
    perturbed_twin,
    twin_path,
    twin_spec,
)

__all__ = ["build_twin", "twin_spec", "architectures", "TwinSpec", "TwinUnavailable", "broken_twin", "perturbed_twin",
           "is_twin_id", "twin_path", "known_twin", "TWIN_PREFIX"]
