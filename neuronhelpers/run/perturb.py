"""Can a run's check fail? The model once more, eagerly, with one block in its middle perturbed.

A PASS says the compiled output matched the CPU reference. That proves something only where a wrong computation
would not have matched: a twin that writes one token 32 times matches whatever its layers compute. So the measuring
(run/measure.py) runs the model a last time with every weight of one block shifted by Gaussian noise of
``vocab.PERTURBATION_SIZE`` (relative to that weight's mean absolute value), restores the weights, and hands the
output to the harness, which checks it against the unperturbed reference with the run's own rule
(verdict/verify.check_sensitivity). The block is the middle one of the model's largest stack of repeated blocks (the
``nn.ModuleList`` holding the most parameters: decoder layers, encoder layers, a denoiser's blocks), so the rule is
the same for every architecture and library. The noise is drawn on the CPU from a fixed seed: the same change on
every device.
"""

from __future__ import annotations

from contextlib import contextmanager

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


def perturbed_outputs(root, size: float, call) -> dict:
    """``call()`` (the library's outputs as its run.py reports them: tokens, embeddings, an image) with the middle
    block of ``root`` perturbed: {"layer", "size", **outputs}, or {"not_measured": why}."""
    try:
        layer, block = middle_block(root)
        with perturbed(block, size):
            outputs = call()
    except Exception as exc:  # noqa: BLE001 - the check's sensitivity is evidence, never the verdict
        reason = str(exc).splitlines()[0][:200] if str(exc) else ""
        return {"not_measured": f"the perturbed run failed: {type(exc).__name__}: {reason}"}
    return {"layer": layer, "size": size, **outputs}
