"""Verification: exact match, near-tie at the first divergence, and mismatch."""

from neuronhelpers.verdict.verify import compare_tokens, first_divergence


def reference(tokens, margins, second=None):
    top_ids = [[t, (second[i] if second else t + 1), 0, 1, 2] for i, t in enumerate(tokens)]
    top_logits = [[10.0, 10.0 - m, 1.0, 0.5, 0.1] for m in margins]
    return {"tokens": tokens, "top_ids": top_ids, "top_logits": top_logits}


def test_identical_tokens_pass_exact():
    v = compare_tokens([5, 6, 7], reference([5, 6, 7], [3, 3, 3]), "float32")
    assert (v.result, v.verification, v.stage, v.first_divergence) == ("PASS", "exact", None, None)


def test_divergence_on_a_near_tie_passes_as_near_tie():
    # position 1: reference margin 0.1 (< bf16 tolerance 0.25) and the device took the runner-up (7)
    v = compare_tokens([5, 7, 9], reference([5, 6, 8], [3, 0.1, 3]), "bfloat16")
    assert (v.result, v.verification, v.first_divergence) == ("PASS", "near_tie", 1)
    assert abs(v.divergence_margin - 0.1) < 1e-9


def test_divergence_with_a_clear_margin_is_a_mismatch():
    v = compare_tokens([5, 7, 9], reference([5, 6, 8], [3, 2.0, 3]), "bfloat16")
    assert (v.result, v.stage, v.first_divergence) == ("FAIL", "mismatch", 1)
    assert "token 1 is 7" in v.error and "margin 2" in v.error


def test_near_tie_requires_the_device_token_in_the_reference_top_k():
    v = compare_tokens([5, 99, 9], reference([5, 6, 8], [3, 0.01, 3]), "bfloat16")
    assert (v.result, v.stage) == ("FAIL", "mismatch")


def test_tolerance_depends_on_dtype():
    ref = reference([5, 6], [3, 0.1])
    assert compare_tokens([5, 7], ref, "bfloat16").result == "PASS"
    assert compare_tokens([5, 7], ref, "float32").result == "FAIL"


def test_first_divergence_counts_a_short_run():
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
