"""Decide a run's result from its outputs and the CPU reference's, per library.

Generated tokens (transformers): identical tokens are PASS, verification ``exact``. Otherwise the first
divergence is found; if the reference was nearly tied there (top-1/top-2 margin under the dtype's
tolerance) and the device's token is among the reference's top-k, PASS with ``near_tie``; else FAIL at
stage ``mismatch``. Embeddings (sentence-transformers) and images (diffusers) are compared as numbers: ``exact``
when bitwise equal, ``within_tolerance`` when within the bounds in vocab (EMBEDDING_TOLERANCE by dtype,
image_tolerance by backend and dtype), else FAIL at ``mismatch``; the row records the figures either way.
``verify_outputs`` picks the check for the run's library and returns the row columns it decides. Taught in notebook 03.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronhelpers.core import vocab
from neuronhelpers.core.vocab import EMBEDDING_TOLERANCE, FAIL, NEAR_TIE_MARGIN, NEAR_TIE_TOP_K, PASS


@dataclass
class Verdict:
    result: str
    stage: str | None
    verification: str | None
    first_divergence: int | None = None
    divergence_margin: float | None = None
    error: str | None = None


def first_divergence(device: list[int], reference: list[int]) -> int | None:
    for index, (a, b) in enumerate(zip(device, reference, strict=False)):
        if a != b:
            return index
    if len(device) != len(reference):
        return min(len(device), len(reference))
    return None


def compare_tokens(device_tokens: list[int], reference: dict, dtype: str) -> Verdict:
    """Compare device tokens with a reference payload (tokens, top_ids, top_logits per position)."""
    ref_tokens = reference["tokens"]
    index = first_divergence(device_tokens, ref_tokens)
    if index is None:
        return Verdict(PASS, None, vocab.EXACT)
    tolerance = NEAR_TIE_MARGIN.get(dtype, NEAR_TIE_MARGIN["float32"])
    margin = None
    top_ids = reference.get("top_ids") or []
    top_logits = reference.get("top_logits") or []
    if index < len(top_logits) and len(top_logits[index]) >= 2:
        margin = float(top_logits[index][0] - top_logits[index][1])
    if index < len(device_tokens) and index < len(top_ids):
        device_token = device_tokens[index]
        in_top_k = device_token in top_ids[index][:NEAR_TIE_TOP_K]
        if margin is not None and margin < tolerance and in_top_k:
            return Verdict(PASS, None, vocab.NEAR_TIE, index, margin)
    else:
        device_token = None
    detail = (f"token {index} is {device_token}, the CPU reference has "
              f"{ref_tokens[index] if index < len(ref_tokens) else 'nothing'}")
    if margin is not None:
        detail += f" (reference top-1/top-2 margin {margin:.4g}, near-tie tolerance {tolerance:g})"
    return Verdict(FAIL, vocab.STAGE_MISMATCH, None, index, margin, f"tokens diverge from the CPU reference: {detail}")


def verify_tokens(params: dict, payload: dict, reference: dict) -> dict:
    """Row columns for a token-generating run checked against its CPU reference."""
    verdict = compare_tokens(payload["tokens"], reference, params["dtype"])
    columns = dict(reference_tokens=reference["tokens"], result=verdict.result, stage=verdict.stage,
                   verification=verdict.verification, error=verdict.error, first_divergence=verdict.first_divergence,
                   divergence_margin=verdict.divergence_margin)
    if verdict.result == FAIL:
        columns["cause"] = "tokens diverge from the CPU reference"
    return columns


def _graded(exact: bool, within: bool, figures: dict, tolerance: float, what: str, detail: str) -> dict:
    """Row columns for outputs compared as numbers: exact, within the dtype's tolerance, or a mismatch."""
    columns = dict(figures, tolerance=tolerance, stage=None, error=None)
    if exact:
        return dict(columns, result=PASS, verification=vocab.EXACT)
    if within:
        return dict(columns, result=PASS, verification=vocab.WITHIN_TOLERANCE)
    return dict(columns, result=FAIL, verification=None, stage=vocab.STAGE_MISMATCH,
                cause=f"{what} from the CPU reference",
                error=f"{what} from the CPU reference beyond the {detail}")


def verify_embeddings(params: dict, payload: dict, reference: dict) -> dict:
    """Row columns for sentence embeddings checked against the CPU reference's: exact when bitwise equal, else
    within the dtype's tolerance on the largest absolute difference and the lowest cosine similarity."""
    import torch

    bounds = EMBEDDING_TOLERANCE.get(params["dtype"], EMBEDDING_TOLERANCE["float32"])
    device, ref = (torch.tensor(x["embeddings"], dtype=torch.float64) for x in (payload, reference))
    if device.shape != ref.shape:
        return _graded(False, False, {}, bounds["max_abs_diff"], "embeddings differ",
                       f"shape check: {tuple(device.shape)} against the reference's {tuple(ref.shape)}")
    max_abs = float((device - ref).abs().max())
    min_cosine = float(torch.nn.functional.cosine_similarity(device, ref, dim=1).min())
    within = max_abs <= bounds["max_abs_diff"] and min_cosine >= bounds["min_cosine"]
    detail = (f"{params['dtype']} tolerance: max abs difference {max_abs:.3g} (at most {bounds['max_abs_diff']:g}), "
              f"lowest cosine similarity {min_cosine:.6f} (at least {bounds['min_cosine']:g})")
    return _graded(payload["embeddings"] == reference["embeddings"], within,
                   {"max_abs_diff": max_abs, "min_cosine": min_cosine}, bounds["max_abs_diff"], "embeddings differ",
                   detail)


def decode_image(payload: dict):
    """The exact pixel values a diffusers run.py reported: a float32 tensor of ``image_shape``."""
    import base64

    import torch

    raw = bytearray(base64.b64decode(payload["image"]))
    return torch.frombuffer(raw, dtype=torch.float32).reshape(payload["image_shape"])


def verify_image(params: dict, payload: dict, reference: dict) -> dict:
    """Row columns for an image checked against the CPU reference's (same seeded latents): exact when bitwise equal,
    else within the dtype's tolerance on the largest absolute pixel difference and the PSNR."""
    import math

    bounds = vocab.image_tolerance(params.get("backend"), params["dtype"])
    device, ref = decode_image(payload).double(), decode_image(reference).double()
    if device.shape != ref.shape:
        return _graded(False, False, {}, bounds["max_abs_diff"], "the image differs",
                       f"size check: {tuple(device.shape)} against the reference's {tuple(ref.shape)}")
    max_abs = float((device - ref).abs().max())
    mse = float(((device - ref) ** 2).mean())
    psnr = 10 * math.log10(1.0 / mse) if mse > 0 else None  # identical images: no finite PSNR
    within = max_abs <= bounds["max_abs_diff"] and (psnr is None or psnr >= bounds["min_psnr_db"])
    detail = (f"{params['dtype']} tolerance: max abs pixel difference {max_abs:.3g} (at most "
              f"{bounds['max_abs_diff']:g}), PSNR {psnr:.1f} dB (at least "
              f"{bounds['min_psnr_db']:g} dB)" if psnr is not None else "")
    return _graded(payload["image"] == reference["image"], within, {"max_abs_diff": max_abs, "psnr_db": psnr},
                   bounds["max_abs_diff"], "the image differs", detail)


DIGEST_PARTS = 8  # what a row keeps of an embedding or an image: means over this many parts per sentence, per side


def output_digest(library: str, payload: dict) -> list[float] | None:
    """A few numbers of a run's output that the row keeps, so that a rerun is compared with the row within its
    ``tolerance``: means over parts of the output (a mean moves no more than the largest difference does). Each
    sentence's embedding in DIGEST_PARTS slices; an image in DIGEST_PARTS x DIGEST_PARTS tiles per channel. None for
    generated text, whose tokens the row keeps whole."""
    import torch

    if library == vocab.SENTENCE_TRANSFORMERS:
        embeddings = torch.tensor(payload["embeddings"], dtype=torch.float64)
        parts = torch.tensor_split(embeddings, min(DIGEST_PARTS, embeddings.shape[1]), dim=1)
        return torch.stack([part.mean(dim=1) for part in parts], dim=1).flatten().tolist()
    if library == vocab.DIFFUSERS:
        image = decode_image(payload).double()
        planes = image.reshape(-1, *image.shape[-2:])  # (channels, height, width): run.py's images are channels first
        return torch.nn.functional.adaptive_avg_pool2d(planes, DIGEST_PARTS).flatten().tolist()
    return None


def digest_difference(row_digest, again, tolerance: float) -> str | None:
    """How far a rerun's output digest lies from the row's, in words, when farther than ``tolerance``; else None."""
    if row_digest is None or again is None:
        return None
    if len(row_digest) != len(again):
        return f"its output has {len(again)} digest values, the row's {len(row_digest)}"
    largest = max((abs(a - b) for a, b in zip(row_digest, again, strict=True)), default=0.0)
    return None if largest <= tolerance else (f"its output lies {largest:.3g} from the row's (the row's tolerance "
                                             f"{tolerance:g})")


# One check per library's recipe: its name -> (params, device payload, reference payload) -> row columns.
VERIFIERS = {vocab.TRANSFORMERS: verify_tokens, vocab.SENTENCE_TRANSFORMERS: verify_embeddings,
             vocab.DIFFUSERS: verify_image}


def verify_outputs(params: dict, payload: dict, reference: dict) -> dict:
    return VERIFIERS[params.get("library", vocab.TRANSFORMERS)](params, payload, reference)


def check_sensitivity(params: dict, perturbed: dict | None, reference: dict) -> dict:
    """Row columns ``check_sensitive`` and ``perturbation``: the outputs the measuring took with the middle block
    perturbed (verdict/perturb.py), checked against the unperturbed reference by the run's own rule. Caught (a FAIL)
    means the check can fail; passed means it proves little. Both null where nothing was measured."""
    if not perturbed:
        return {"check_sensitive": None, "perturbation": None}
    if "not_measured" in perturbed:
        return {"check_sensitive": None, "perturbation": f"not measured: {perturbed['not_measured']}"[:300]}
    outcome = verify_outputs(params, perturbed, reference)
    caught = outcome["result"] == FAIL
    what = f"{perturbed['layer']} shifted by {perturbed['size']:.0%} noise"
    if "tokens" in perturbed:
        changed = sum(a != b for a, b in zip(perturbed["tokens"], reference["tokens"], strict=False))
        detail = f"{changed} of {len(reference['tokens'])} tokens changed"
        if not caught and changed:
            detail += f", the first at a near tie (margin {outcome['divergence_margin']:.3g})"
        distinct = len(set(reference["tokens"]))
        if distinct < min(vocab.MIN_DISTINCT_TOKENS, len(reference["tokens"])):  # too few to prove much, caught or not
            caught = False
            detail += (f"; the reference writes {distinct} distinct tokens, fewer than {vocab.MIN_DISTINCT_TOKENS}: "
                       "counted as a check that could not have failed")
    else:
        largest = outcome.get("max_abs_diff", float("nan"))
        detail = f"max abs difference {largest:.3g} (tolerance {outcome['tolerance']:g})"
    return {"check_sensitive": caught, "perturbation": f"{what}: {detail}: {'caught' if caught else 'not caught'}"}
