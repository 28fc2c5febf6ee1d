"""Decide a run's result from its tokens and the CPU reference's tokens and logits.

Identical tokens: PASS, verification ``exact``. Otherwise the first divergence is found; if the
reference was nearly tied there (top-1/top-2 margin under the dtype's tolerance) and the device's
token is among the reference's top-k, PASS with ``near_tie``; else FAIL at stage ``mismatch``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import FAIL, NEAR_TIE_MARGIN, NEAR_TIE_TOP_K, PASS


@dataclass
class Verdict:
    result: str
    stage: str | None
    verification: str | None
    first_divergence: int | None = None
    divergence_margin: float | None = None
    error: str | None = None


def first_divergence(device: list[int], reference: list[int]) -> int | None:
    for index, (a, b) in enumerate(zip(device, reference)):
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
        return Verdict(PASS, None, "exact")
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
            return Verdict(PASS, None, "near_tie", index, margin)
    else:
        device_token = None
    detail = f"token {index} is {device_token}, the CPU reference has {ref_tokens[index] if index < len(ref_tokens) else 'nothing'}"
    if margin is not None:
        detail += f" (reference top-1/top-2 margin {margin:.4g}, near-tie tolerance {tolerance:g})"
    return Verdict(FAIL, "mismatch", None, index, margin, f"tokens diverge from the CPU reference: {detail}")
