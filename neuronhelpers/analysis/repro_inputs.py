"""What a repro script feeds the model, captured from the recipe's own loading of the twin: the tensors the recipe's
loader made for generate() (text, image, audio), the keyword arguments the sentence-transformers encoder or the
diffusers denoiser received on its first call. ``as_code`` writes them back as Python a script can hold inline:
integers and small tensors exactly, larger floating-point tensors (pixels, audio features, latents) as seeded noise of
the same shape and dtype, since the failures a script shows depend on shapes and integers, not on pixel values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.parameters import local_parameters
from neuronhelpers.core.protocol import MAX_NEW_TOKENS

EXACT_FLOATS = 64  # a floating-point tensor this small is written exactly (a timestep, a scale)
EXACT_INTEGERS = 4096  # an integer or boolean tensor up to this size is written exactly; a larger one cannot be
# The auto class the recipe's loader uses per task (recipes/transformers_generate.py), for the script's from_config.
AUTO_CLASS = {vocab.TEXT_GENERATION: "AutoModelForCausalLM", vocab.IMAGE_TEXT_TO_TEXT: "AutoModelForImageTextToText",
              vocab.AUTOMATIC_SPEECH_RECOGNITION: "AutoModelForSpeechSeq2Seq"}


class Unscriptable(ValueError):
    """An input a script cannot hold inline (the message says which, in one line)."""


@dataclass
class Captured:
    """What the script needs beside the cause: the model's class and config, and what it is called with."""

    library: str
    model_class: str  # transformers: an auto class; diffusers: the denoiser's own class
    config: dict
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    generate: dict = field(default_factory=dict)  # transformers: generate()'s settings besides the inputs


def capture(folder: Path, task: str) -> Captured:
    """Load the twin through its recipe and capture what the compiled part is called with (see the module
    docstring)."""
    library = vocab.LIBRARY_FOR_TASK.get(task, vocab.TRANSFORMERS)
    if library == vocab.SENTENCE_TRANSFORMERS:
        return _sentence_transformers(folder, task)
    if library == vocab.DIFFUSERS:
        return _diffusers(folder, task)
    if task not in AUTO_CLASS:
        raise Unscriptable(f"no script loads a {task} model yet")
    from neuronhelpers.recipes.transformers_generate import generation_kwargs, load

    model, tokenizer, inputs = load(local_parameters(folder, task), "cpu")
    settings = {"pad_token_id": generation_kwargs(tokenizer, MAX_NEW_TOKENS)["pad_token_id"]}
    if task == vocab.AUTOMATIC_SPEECH_RECOGNITION:  # as the recipe asks (compiled_generation_kwargs)
        settings["return_dict_in_generate"] = True
    return Captured(library, AUTO_CLASS[task], model.config.to_dict(), kwargs=dict(inputs), generate=settings)


class _FirstCall(Exception):
    """Raised by the capturing hook once the module's first call is recorded: the rest of the run is not needed."""


def _first_call(module, run) -> tuple[tuple, dict]:
    """(args, kwargs) of ``module``'s first forward while ``run()`` runs. Its ``forward`` itself is wrapped, not
    hooked: sentence-transformers calls ``model.forward`` directly, past the module's hooks."""
    seen = {}

    def first_forward(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        raise _FirstCall

    module.forward = first_forward
    try:
        run()
    except _FirstCall:  # the call was recorded; nothing after it is needed
        pass
    finally:
        del module.forward  # the class's own again
    if not seen:
        raise Unscriptable(f"the recipe never called the {type(module).__name__} it compiles")
    return seen["args"], seen["kwargs"]


def _sentence_transformers(folder: Path, task: str) -> Captured:
    from neuronhelpers.recipes.sentence_transformers_encode import encode, load

    params = local_parameters(folder, task)
    model = load(params, "cpu")
    encoder = model[0].model  # what the recipe compiles (compile_transformer)
    args, kwargs = _first_call(encoder, lambda: encode(model, params))
    return Captured(vocab.SENTENCE_TRANSFORMERS, "AutoModel", encoder.config.to_dict(), args, kwargs)


def _diffusers(folder: Path, task: str) -> Captured:
    from neuronhelpers.recipes.diffusers_pipeline import denoiser_name, draw, load, resolve

    params = local_parameters(folder, task)
    pipe = load(params, "cpu")
    denoiser = resolve(pipe, denoiser_name(pipe))
    args, kwargs = _first_call(denoiser, lambda: draw(pipe, params))
    config = {key: value for key, value in dict(denoiser.config).items() if not key.startswith("_")}
    return Captured(vocab.DIFFUSERS, type(denoiser).__name__, config, args, kwargs)


def _padded(values) -> str:
    """A nested list of integers with each run of 8 or more equal values (padding, an image's placeholder tokens)
    written as ``[v] * n``."""
    if values and isinstance(values[0], list):
        return "[" + ", ".join(_padded(item) for item in values) + "]"
    pieces, literal, start = [], [], 0
    while start < len(values):
        end = start
        while end < len(values) and values[end] == values[start]:
            end += 1
        if end - start >= 8:
            pieces += [repr(literal)] if literal else []
            pieces.append(f"[{values[start]!r}] * {end - start}")
            literal = []
        else:
            literal += values[start:end]
        start = end
    return " + ".join(pieces + ([repr(literal)] if literal else [])) or "[]"


def as_code(value) -> str:
    """``value`` as a Python expression a script can hold (tensors: see the module docstring); Unscriptable where it
    cannot."""
    import torch

    if isinstance(value, torch.Tensor):
        shape, dtype = tuple(value.shape), str(value.dtype)
        if value.is_floating_point():
            if value.numel() <= EXACT_FLOATS:
                return f"torch.tensor({value.tolist()!r}, dtype={dtype})"
            return f"torch.randn({shape}, dtype={dtype})"
        if value.numel() > 1 and bool((value == value.flatten()[0]).all()):  # a mask of ones, a position: one value
            return f"torch.full({shape}, {value.flatten()[0].item()!r}, dtype={dtype})"
        if value.numel() > EXACT_INTEGERS:
            raise Unscriptable(f"an integer input of {value.numel():,} values (shape {shape})")
        return f"torch.tensor({_padded(value.tolist())}, dtype={dtype})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {as_code(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        items = [as_code(item) for item in value]
        if isinstance(value, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise Unscriptable(f"an input of type {type(value).__name__}")
