"""Tiny twins of the libraries beyond transformers: sentence-transformers (feature-extraction) and diffusers
(text-to-image). Real library classes with shrunk configs and random weights, built offline like the
transformers twins (the orchestrator, twins/build.py, lists them from specs.library_twin_specs and builds and checks
them through ``write_twin`` and ``check_twin_runs`` here).

- ``tiny/st-<type>``   a SentenceTransformer around transformers' ``<type>``: every text encoder transformers maps to
                       masked LM (WordPiece tokenizer, mean pooling, Normalize), and the embedding decoders
                       (specs.EMBEDDING_DECODERS: byte-level BPE padding on the left, last-token pooling, Normalize,
                       the layout of Qwen3-Embedding); the base model from the same generic shrink as text twins
- ``tiny/t2i-<key>``   the diffusers text-to-image family AutoPipelineForText2Image names ``<key>``: its own pipeline
                       class around tiny components (twins/pipelines/)

Every tokenizer is trained on a few lines of English (no download) and saved as the library's real tokenizer class
(twins/tokenizers.py). A twin counts only when it loads back through the recipe's own loader and runs eagerly (an
encode, a 2-step pipeline call). Like every twin, a built one is recognised by its TWIN.json, written by the
orchestrator last; its deliberately wrong copy (``perturbed_twin``, for notebook 03 and the tests) is made by
twins/broken.py. Taught in notebook 02.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from neuronhelpers.core.parameters import local_parameters
from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_TO_IMAGE
from neuronhelpers.twins.overrides import reason
from neuronhelpers.twins.own import base_config, own_overrides, own_table
from neuronhelpers.twins.pipelines import IMAGE_SIZE, parameter_count, write_pipeline_twin
from neuronhelpers.twins.shrink import TEXT_SHRINK, shrunk_config
from neuronhelpers.twins.specs import (
    EMBEDDING_DECODERS,
    LIBRARY_TASKS,
    MAX_TWIN_PARAMETERS,
    SEED,
    library_twin_specs,
)
from neuronhelpers.twins.text import check_size
from neuronhelpers.twins.tokenizers import bert_tokenizer, qwen_tokenizer

__all__ = ["LIBRARY_TASKS", "IMAGE_SIZE", "SEQUENCE_LENGTH", "library_twin_specs", "write_twin", "check_twin_runs"]

SEQUENCE_LENGTH = 128  # position embeddings of the text twins (the recipe pads to fewer)


def write_twin(spec, folder: Path) -> None:
    """Build the twin ``spec`` names and save it into ``folder`` with the library's own save methods."""
    import torch

    torch.manual_seed(SEED)
    with quiet_libraries(diffusers=spec.task == TEXT_TO_IMAGE):
        if spec.task == FEATURE_EXTRACTION:
            _st_model(spec, Path(folder))
        else:
            write_pipeline_twin(spec.model_type, Path(folder))


def _run_eagerly(spec, params):
    """(output, expected shape, parameter count) of one eager run through the recipe's own loader."""
    if spec.task == FEATURE_EXTRACTION:
        from neuronhelpers.recipes.sentence_transformers_encode import encode, load

        model = load(params, "cpu")
        parameters = sum(p.numel() for p in model.parameters())
        return encode(model, params), (2, model.get_embedding_dimension()), parameters
    from neuronhelpers.recipes.diffusers_pipeline import draw, image_size, load

    model = load(params, "cpu")
    parameters = parameter_count(model)
    params["prompt"] = "A robot paints the sea."
    size = image_size(model, params)  # the family's native size (32 px; Kandinsky 3: 64)
    return draw(model, params), (3, size, size), parameters


def check_twin_runs(spec, folder: Path) -> None:
    """The twin loads back through the recipe's own loader and runs eagerly: an encode of two sentences, or a
    2-step pipeline call; it must also stay tiny. A twin that cannot do this is refused (TwinUnavailable)."""
    import torch

    try:
        # two sentences of 16 tokens, or a 2-step image: the recipe's own call, smaller than the test's
        params = local_parameters(folder, spec.task, seed=SEED, steps=2, image_size=None, sequence_length=16,
                                  prompt=["A robot paints the sea.", "The river runs."])
        with quiet_libraries(diffusers=spec.task == TEXT_TO_IMAGE):
            out, expected, parameters = _run_eagerly(spec, params)
        if parameters > MAX_TWIN_PARAMETERS:
            raise ValueError(f"the shrunk model still has {parameters:,} parameters (more than "
                             f"{MAX_TWIN_PARAMETERS:,})")
        if tuple(out.shape) != expected:
            raise ValueError(f"the eager run returned shape {tuple(out.shape)}, not {expected}")
        if not torch.isfinite(out).all():
            raise ValueError("the eager run returned non-finite values")
    except Exception as exc:  # not swallowed: marked with the step that failed, then raised again
        exc.twin_step = "eager check"
        raise


# ----------------------------------------------------------------------------------------------
# The twins.
# ----------------------------------------------------------------------------------------------

# EmbeddingGemma (google/embeddinggemma-300m, a gemma3_text): bidirectional attention, mean pooling, then two Dense
# layers without bias or activation (768 -> 3072 -> 768) before Normalize, as its model card and modules describe.
EMBEDDING_GEMMA = "gemma3_text"


def _output_width(model, tokenizer) -> int:
    """The width of the model's last hidden state, read from one forward pass: the pooling's dimension (Reformer's
    output concatenates its two reversible streams, twice ``hidden_size``)."""
    import torch

    with torch.no_grad():
        return int(model(**tokenizer("A robot paints.", return_tensors="pt")).last_hidden_state.shape[-1])


def _sentence_transformer(folder: Path, model, tokenizer, pooling: str, dense: tuple[int, ...] = ()) -> None:
    """Save a transformers model and tokenizer, wrap them as a SentenceTransformer (Transformer module, pooling, the
    ``dense`` widths as bias-free linear layers, Normalize) and save that into ``folder``: modules.json, the
    transformer at the root, the other modules beside."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    width = _output_width(model.eval(), tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        modules = [Transformer(tmp), Pooling(width, pooling)]
        for out in dense:
            modules.append(Dense(width, out, bias=False, activation_function=torch.nn.Identity()))
            width = out
        st = SentenceTransformer(modules=[*modules, Normalize()], device="cpu")
        st.save(str(folder))


def _st_model(spec, folder: Path) -> None:
    """A sentence-transformers model around ``spec.model_type``: the architecture's base model (AutoModel) from the
    same generic shrink as the transformers twins, random weights; an encoder with a WordPiece tokenizer and mean
    pooling, a decoder (EMBEDDING_DECODERS) with a byte-level BPE padding on the left and last-token pooling, except
    EmbeddingGemma's gemma3_text (bidirectional, mean pooling, two Dense layers)."""
    from transformers import AutoModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    if spec.overrides.get("no_twin"):
        raise ValueError(f"not a sentence encoder on its own: {reason(spec.model_type)}")
    decoder = spec.model_type in EMBEDDING_DECODERS
    gemma = spec.model_type == EMBEDDING_GEMMA
    tok = qwen_tokenizer(SEQUENCE_LENGTH) if decoder else bert_tokenizer(SEQUENCE_LENGTH)
    token_ids = {"vocab_size": len(tok), "pad_token_id": tok.pad_token_id}
    if decoder:
        token_ids.update(eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    base = base_config(spec)  # a model twin's own config (own.py): its pooling stays the architecture twin's
    if base is None:
        config = shrunk_config(spec.model_type, TEXT_SHRINK, spec.overrides, **token_ids)
    else:
        config = shrunk_config(spec.model_type, own_table(spec), own_overrides(spec, spec.overrides), base, **token_ids)
    for key, value in token_ids.items():  # a default config that leaves them None (esm) takes them too
        if getattr(config, key, None) is None:
            setattr(config, key, value)
    base = MODEL_MAPPING_NAMES[spec.model_type]
    if isinstance(base, (list, tuple)):  # AutoModel maps two classes (funnel: full and base): the first, by name
        config.architectures = [base[0]]
    if gemma:
        config.use_bidirectional_attention = True
    check_size(AutoModel, config)
    pooling = "mean" if gemma or not decoder else "lasttoken"
    dense = (4 * config.hidden_size, config.hidden_size) if gemma else ()
    _sentence_transformer(folder, AutoModel.from_config(config), tok, pooling, dense)
