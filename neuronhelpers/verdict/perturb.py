"""Can a run's check fail? The model once more, eagerly, with one block in its middle perturbed.

A PASS says the compiled output matched the CPU reference. That proves something only where a wrong computation
would not have matched: a twin that writes one token 32 times matches whatever its layers compute. So the measuring
(run/measure.py) runs the model a last time with every weight of one block shifted by Gaussian noise of
``vocab.PERTURBATION_SIZE`` (relative to that weight's mean absolute value), restores the weights, and hands the
output to the harness, which checks it against the unperturbed reference with the run's own rule
(verdict/verify.check_sensitivity). The block is the middle one of the model's largest stack of repeated blocks (the
``nn.ModuleList`` holding the most parameters: decoder layers, encoder layers, a denoiser's blocks), so the rule is
the same for every architecture and library; for generate() the model is its decoder (``decoder_or_model``), the
part whose compiled step writes the tokens. The noise is drawn on the CPU from a fixed seed: the same change on
every device. The twin builder uses the same change to choose a generating twin's weights (twins/weights.py).
"""

from __future__ import annotations

from contextlib import contextmanager

from neuronhelpers.core.errors import first_line

PERTURBATION_SEED = 0


def middle_block(root) -> tuple[str, object]:
    """(its name, the block): the middle block of ``root``'s largest stack of repeated blocks."""
    import torch

    best = None
    for name, module in root.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module):
            count = sum(p.numel() for p in module.parameters())
            if count and (best is None or count > best[0]):
                best = (count, name, module)
    if best is None:
        raise ValueError(f"{type(root).__name__} has no stack of repeated blocks to perturb")
    _, name, stack = best
    index = len(stack) // 2
    return (f"{name}.{index}" if name else str(index)), stack[index]


def decoder_or_model(model):
    """Where generate() computes its tokens: the model's decoder (``get_decoder()``: a causal LM's stack, a vision-
    language model's language model, a speech model's text decoder, the part generate() compiles), where it holds a
    stack of blocks; else the whole model. The largest stack of a whole vision-language or speech model can be an
    image-generation decoder or an audio codec that generate() never runs."""
    import torch

    find = getattr(model, "get_decoder", None)
    try:
        decoder = find() if callable(find) else None
    except (AttributeError, NotImplementedError, TypeError):  # a class without one: the whole model is perturbed
        decoder = None
    if isinstance(decoder, torch.nn.Module) and any(
            isinstance(m, torch.nn.ModuleList) and len(m) for m in decoder.modules()):
        return decoder
    return model


@contextmanager
def perturbed(block, size: float, seed: int = PERTURBATION_SEED):
    """Inside the block, every floating-point weight of ``block`` is shifted by noise of ``size`` times its mean
    absolute value; on leaving, the original values are copied back exactly."""
    import torch

    saved = [(p, p.detach().clone()) for p in block.parameters() if p.is_floating_point()]
    generator = torch.Generator().manual_seed(seed)
    try:
        with torch.no_grad():
            for weight, original in saved:
                scale = size * float(original.abs().float().mean())
                noise = torch.randn(weight.shape, generator=generator, dtype=torch.float32) * scale
                weight.add_(noise.to(weight.device, weight.dtype))
        yield
    finally:
        with torch.no_grad():
            for weight, original in saved:
                weight.copy_(original)


def perturbed_outputs(root, size: float, call, within=None) -> dict:
    """``call()`` (the library's outputs as its run.py reports them: tokens, embeddings, an image) with the middle
    block of ``within`` (default ``root``, a module inside it) perturbed: {"layer" (its name in ``root``), "size",
    **outputs}, or {"not_measured": why}."""
    return outputs_with(perturbation_target(root, within), size, call)


def perturbation_target(root, within=None) -> tuple[str, object] | dict:
    """(the name in ``root`` of the middle block of ``within``'s largest stack, the block), or {"not_measured": why}
    where there is none. Taken before compiling where the outputs are drawn after it: a compiled wrapper adds a level
    (``_orig_mod``) to the names. Never raises: a model without a stack of blocks is a model the check cannot probe,
    not a failed run."""
    try:
        layer, block = middle_block(root if within is None else within)
        if within is not None and within is not root:
            prefix = next(name for name, module in root.named_modules() if module is within)
            layer = f"{prefix}.{layer}" if prefix else layer
    except Exception as exc:  # noqa: BLE001 - the check's sensitivity is evidence, never the verdict
        return _not_measured(exc)
    return layer, block


def outputs_with(target: tuple[str, object] | dict, size: float, call) -> dict:
    """``call()`` with ``target``'s block perturbed (``perturbation_target``): {"layer", "size", **outputs}, or
    {"not_measured": why} (the target's own, or the call's failure)."""
    if isinstance(target, dict):
        return target
    layer, block = target
    try:
        with perturbed(block, size):
            outputs = call()
    except Exception as exc:  # noqa: BLE001 - the check's sensitivity is evidence, never the verdict
        return _not_measured(exc)
    return {"layer": layer, "size": size, **outputs}


def _not_measured(exc: Exception) -> dict:
    return {"not_measured": f"the perturbed run failed: {first_line(exc, limit=200, name=True)}"}
