"""The writer of text-generation twins: the architecture's own causal-LM class from its shrunk config (shrink.py),
random weights from the fixed seed drawn so that its tokens depend on the computation (weights.py), the trained BPE
tokenizer (tokenizers.py), saved with ``save_pretrained``.
"""

from __future__ import annotations

from pathlib import Path

from neuronhelpers.twins.overrides import reason
from neuronhelpers.twins.own import base_config, own_overrides, own_table
from neuronhelpers.twins.shrink import text_config
from neuronhelpers.twins.specs import MAX_TWIN_PARAMETERS, SEED
from neuronhelpers.twins.tokenizers import text_tokenizer
from neuronhelpers.twins.weights import decisive_weights, untie_output_head


def check_size(auto_class, config) -> None:
    """Refuse a config that did not shrink before any memory is spent on it (counted on the meta device)."""
    import torch

    with torch.device("meta"):
        parameters = sum(p.numel() for p in auto_class.from_config(config).parameters())
    if parameters > MAX_TWIN_PARAMETERS:
        raise ValueError(f"the shrunk config still has {parameters:,} parameters (more than {MAX_TWIN_PARAMETERS:,}): "
                         "a size this architecture names differently was not shrunk")


def write_text_twin(spec, folder: Path) -> None:
    """Build the text twin ``spec`` names (its ``overrides``: the family's text attributes) and save it into
    ``folder``."""
    import torch
    from transformers import AutoModelForCausalLM

    if spec.overrides.get("no_twin"):
        raise ValueError(f"not a text generator on its own: {reason(spec.model_type)}")
    tok = text_tokenizer()
    base = base_config(spec)  # a model twin's own config (own.py), else the architecture's default
    if base is None:
        config = text_config(spec.model_type, tok, spec.overrides)
    else:
        config = text_config(spec.model_type, tok, own_overrides(spec, spec.overrides), own_table(spec), base)
    untie_output_head(config)
    check_size(AutoModelForCausalLM, config)
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config)
    decisive_weights(model, SEED)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
