"""Causes ranked across rows: which failure signatures (``verdict.causes``) block the most architectures.

``rank_causes`` orders causes by how many architectures they block (``neuronhelpers causes``); a row without a cause
(the published dataset's) is counted under its error's signature. Taught in notebooks 03 and 05.
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.analysis.agreement import model_twin_rows
from neuronhelpers.core.vocab import FAIL, NOT_THE_COMPILER, PASS, UNTESTED
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
