"""Causes ranked across rows: which failure signatures (``verdict.causes``) block the most architectures.

``rank_causes`` orders causes by how many architectures they block (``neuronhelpers causes``); a row without a cause
(the published dataset's) is counted under its error's signature. Taught in notebooks 03 and 05.
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.analysis.agreement import model_twin_rows
from neuronhelpers.core.vocab import (
    FAIL,
    NOT_ON_TRN2,
    NOT_THE_COMPILER,
    PASS,
    PASS_COULD_NOT_FAIL,
    REMEDY_NOT_APPLICABLE,
    TRN2_COSTLY,
    TRN2_READY,
    UNTESTED,
)
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.verdict.causes import MAX_LENGTH, normalise
from neuronhelpers.verdict.evidence import could_not_fail_count
from neuronhelpers.verdict.upstream import upstream_for


def error_signature(error) -> str | None:
    """The cause of a row that records none (the published dataset's): its error's first line, normalised."""
    return normalise(error.splitlines()[0])[:MAX_LENGTH] if isinstance(error, str) and error.strip() else None


def rank_causes(df: pd.DataFrame, *, results=(FAIL,)) -> pd.DataFrame:
    """Causes ranked by how many architectures (model types) they block, each with its architectures; a row without
    a cause counts under its error's (``error_signature``); ``not_the_compiler`` marks a cause that happens with
    nothing compiled (vocab.NOT_THE_COMPILER), which ``causes`` lists apart. A model twin's row answers for its model,
    not for its architecture, so it is not counted here (analysis/answers.own_config_effects compares the two)."""
    failed = df[df.result.isin(results) & ~model_twin_rows(df)].copy()
    failed["cause"] = failed["cause"].fillna(failed["error"].map(error_signature))
    failed = failed[failed.cause.notna()]
    if failed.empty:
        return pd.DataFrame(columns=["cause", "stage", "architectures", "count", "not_the_compiler"])
    failed["architecture"] = failed["model_type"].fillna(failed["model_id"])
    grouped = failed.groupby("cause").agg(
        stage=("stage", lambda s: ", ".join(sorted(set(s.dropna()))) or "no stage recorded"),
        architectures=("architecture", lambda s: sorted(set(s))),
    ).reset_index()
    grouped["count"] = grouped["architectures"].map(len)
    # a cause shown on CPU with nothing compiled (vocab.NOT_THE_COMPILER) is ranked apart from the compiler's
    grouped["not_the_compiler"] = grouped["cause"].isin(NOT_THE_COMPILER)
    return grouped.sort_values(["count", "cause"], ascending=[False, True]).reset_index(drop=True)


def verdict_counts_line(df: pd.DataFrame) -> str:
    """'300 verdicts (180 PASS whose check could fail, 20 PASS whose check could not have failed, 100 FAIL), 40
    untested': each model's newest row; a pass rate counts only the first kind of PASS."""
    newest = newest_per_model(df) if not df.empty else df
    could_not = could_not_fail_count(newest["result"], newest.get("evidence"))
    passed, failed = int((newest["result"] == PASS).sum()) - could_not, int((newest["result"] == FAIL).sum())
    rate = f"; pass rate {100 * passed / (passed + failed):.0f}% of {passed + failed}" if passed + failed else ""
    return (f"{passed + could_not + failed} verdicts ({passed} PASS whose check could fail, {could_not} PASS whose "
            f"check could not have failed, {failed} FAIL{rate}), {int((newest['result'] == UNTESTED).sum())} untested")


def ranked_lines(ranked: pd.DataFrame, top: int = 10, *, names: int = 8) -> list[str]:
    """``rank_causes`` (or ``untested_reasons``) as the lines the ``causes`` command prints: per cause its count,
    stage, the first ``names`` architectures and the upstream thread that knows it (verdict/upstream.py), and how
    many causes were left out."""
    lines = []
    for row in ranked.head(top).itertuples(index=False):
        shown = ", ".join(row.architectures[:names]) + (", ..." if len(row.architectures) > names else "")
        thread = upstream_for(row.cause)
        lines.append(f"{row.count:4d}  [{row.stage}] {row.cause}\n      {shown}"
                     + (f"\n      {thread.line()}" if thread else ""))
    if len(ranked) > top:
        lines.append(f"      ... and {len(ranked) - top} more causes (--top N)")
    return lines


def untested_reasons(df: pd.DataFrame) -> pd.DataFrame:
    """The UNTESTED rows grouped by reason (stage) and cause."""
    return rank_causes(df, results=(UNTESTED,))


# What a FAIL's remedies came to, per row: the best trn2 word of a PASS, else why none counts.
REMEDY_OUTCOMES = (TRN2_READY, TRN2_COSTLY, NOT_ON_TRN2, "not judged", PASS_COULD_NOT_FAIL, REMEDY_NOT_APPLICABLE,
                   "none")


def remedy_outcomes(df: pd.DataFrame) -> pd.DataFrame:
    """Per cause, the FAILs swept with ``--remedies`` (each model's newest row) by what their remedies came to: the
    best word of a PASS (trn2-ready, costly on trn2, not on trn2; "not judged": recorded before the compiled shapes
    were read), a PASS whose check could not have failed where that is the best there is, else "not applicable"
    (every remedy ruled out by the model's window), else "none"."""
    import json

    from neuronhelpers.run.remedies import passed_records
    from neuronhelpers.verdict.evidence import check_could_not_fail

    newest = newest_per_model(df) if not df.empty else df
    tried = newest[(newest["result"] == FAIL) & newest.get("remedies", pd.Series(dtype=object)).notna()]
    counts: dict[str, dict[str, int]] = {}
    for cause, value in zip(tried["cause"], tried["remedies"], strict=True):
        records = json.loads(value)
        passed = passed_records(records)
        best = passed[0] if passed else None
        outcome = (PASS_COULD_NOT_FAIL if check_could_not_fail(best) else best.get("trn2") or "not judged") if best \
            else REMEDY_NOT_APPLICABLE if records and all(r.get("not_applicable") for r in records) else "none"
        row = counts.setdefault(cause, dict.fromkeys(("rows", *REMEDY_OUTCOMES), 0))
        row["rows"] += 1
        row[outcome] += 1
    frame = pd.DataFrame([{"cause": cause, **row} for cause, row in counts.items()],
                         columns=["cause", "rows", *REMEDY_OUTCOMES])
    return frame.sort_values(["rows", "cause"], ascending=[False, True]).reset_index(drop=True)


def remedy_outcome_lines(outcomes: pd.DataFrame) -> list[str]:
    """``remedy_outcomes`` as the lines ``causes`` prints: per cause its rows and what their remedies came to."""
    return [f"{row['rows']:4d}  {row['cause']}\n      " + ", ".join(
        f"{row[word]} {word}" for word in REMEDY_OUTCOMES if row[word]) for row in outcomes.to_dict("records")]
