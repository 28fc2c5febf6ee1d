"""What a verdict stands on: the level of evidence of a row, and the eager run on the device beside it.

A PASS is as strong as its check (``exact`` > ``near_tie`` > ``within_tolerance`` > ``judged``); a FAIL says whether
the device ran the model eagerly (the compiler is the obstacle), failed eagerly too, or was not tried, or that the
CPU reference failed before the device ran at all. The words are
``vocab.EVIDENCE`` and ``vocab.DEVICE_EAGER``; the card explains both. ``speedup`` is compiled over eager, measured
back to back in one run.py process (never across runs: on a busy machine rates swing tenfold minutes apart).
"""

from __future__ import annotations

from neuronhelpers.core import vocab

_PASS_LEVEL = {vocab.EXACT: vocab.EVIDENCE_EXACT, vocab.NEAR_TIE: vocab.EVIDENCE_NEAR_TIE,
               vocab.WITHIN_TOLERANCE: vocab.EVIDENCE_WITHIN_TOLERANCE, vocab.JUDGE_LM: vocab.EVIDENCE_JUDGED,
               vocab.JUDGE_LEXICAL: vocab.EVIDENCE_JUDGED}


def eager_word(device_eager) -> str | None:
    """``ran``, ``failed`` or ``not tried``: the word before a ``device_eager`` value's reason."""
    if not isinstance(device_eager, str) or not device_eager:
        return None
    return device_eager.split(":", 1)[0].strip()


def evidence_level(row: dict) -> str | None:
    """The row's level of evidence (None for EXCLUDED and UNTESTED rows: no verdict, no evidence)."""
    if row.get("result") == vocab.PASS:
        if row.get("check_sensitive") is False:  # the check passed a deliberately perturbed model too
            return vocab.EVIDENCE_INSENSITIVE
        return _PASS_LEVEL.get(row.get("verification"))
    if row.get("result") == vocab.FAIL:
        word, stage = eager_word(row.get("device_eager")), row.get("stage")
        if stage == vocab.STAGE_REFERENCE:  # the CPU reference failed first: the device never ran, eager or compiled
            return vocab.EVIDENCE_REFERENCE_FAILED
        if (word == vocab.DEVICE_EAGER_RAN and stage == vocab.STAGE_MISMATCH
                and row.get("eager_equals_compiled") is True):
            return vocab.EVIDENCE_EAGER_SAME_TOKENS
        return {vocab.DEVICE_EAGER_RAN: vocab.EVIDENCE_EAGER_RAN,
                vocab.DEVICE_EAGER_FAILED: vocab.EVIDENCE_EAGER_FAILED}.get(word, vocab.EVIDENCE_EAGER_UNKNOWN)
    return None


def verdict_words(result, stage=None, verification=None, check_sensitive=None) -> str:
    """A verdict as a person reads it, saying whether a PASS's check could have failed: 'PASS (exact, the check could
    fail)', 'PASS (exact; the check could not have failed)', 'PASS (exact)' where that was not measured, 'FAIL at
    compile', 'UNTESTED (twin)'. The run's one-line summary, the answer and the explorer's hints all say it so."""
    if result == vocab.PASS:
        how = verification if isinstance(verification, str) and verification else None
        if check_sensitive is True:
            return f"{vocab.PASS} ({how + ', ' if how else ''}the check could fail)"
        if check_sensitive is False:
            return f"{vocab.PASS} ({how + '; ' if how else ''}the check could not have failed)"
        return f"{vocab.PASS} ({how})" if how else vocab.PASS
    if result == vocab.FAIL:
        return f"{vocab.FAIL} at {stage}" if isinstance(stage, str) and stage else vocab.FAIL
    if result == vocab.UNTESTED and isinstance(stage, str) and stage:
        return f"{vocab.UNTESTED} ({stage})"
    return str(result)


def could_not_fail(result, evidence) -> bool:
    """A PASS whose check could not have failed (evidence ``insensitive_check``): counted apart from the others, never
    in a pass rate."""
    return result == vocab.PASS and evidence == vocab.EVIDENCE_INSENSITIVE


def could_not_fail_count(results, evidence=None) -> int:
    """How many of these rows are a PASS whose check could not have failed (``evidence`` None: no row records one)."""
    if evidence is None:
        return 0
    return int(sum(could_not_fail(r, e) for r, e in zip(results, evidence, strict=True)))


def speedup(row: dict) -> float | None:
    """Compiled over eager from one run's figures: decode rate (text), sentences per second (embeddings), image time
    (images); None without both figures."""
    def number(name):
        value = row.get(name)
        return float(value) if isinstance(value, (int, float)) and value == value and value > 0 else None

    pairs = ((number("decode_tokens_per_s"), number("eager_decode_tokens_per_s")),
             (number("items_per_s") if row.get("task") == vocab.FEATURE_EXTRACTION else None,
              number("eager_items_per_s")),
             (number("eager_image_s"), number("image_s")))
    for fast, slow in pairs:
        if fast and slow:
            return round(fast / slow, 3)
    return None


def eager_columns(payload: dict) -> dict:
    """The row's eager and dynamo columns from a device run's JSON (what the measuring around run.py recorded,
    nothing derived but the ratio)."""
    eager, dynamo = payload.get("eager") or {}, payload.get("dynamo") or {}
    columns = {key: eager.get(key) for key in ("device_eager", "eager_decode_tokens_per_s", "eager_items_per_s",
                                                "eager_image_s", "eager_equals_compiled")}
    columns.update({key: dynamo.get(key) for key in ("graph_breaks", "unique_graphs", "recompiles", "symbolic_shapes",
                                                 "fallback_ops")})
    columns["declared_fullgraph"] = payload.get("declared_fullgraph")
    return columns


def counts_as_passed(record: dict) -> bool:
    """A remedy record that counts as the model running with it: a PASS that neither changes the computation nor
    exceeds its limit. The one rule the answers (run/remedies.py), `causes` and the card read."""
    return record["result"] == vocab.PASS and not record.get("changes_computation") and not record.get("not_applicable")


def check_could_not_fail(record: dict) -> bool:
    """A remedy's PASS whose check could not have failed (its perturbed run gave the same output): said apart."""
    return record.get("check_sensitive") is False
