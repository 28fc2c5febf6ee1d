"""The rule that keeps a verdict in sight: an attempt that reached no verdict (an UNTESTED row of an attempt stage,
``vocab.ATTEMPT_STAGES``: the machine or the model's files failed) never hides an older PASS or FAIL of the same
model and version pair. ``dataset.newest_per_model``, which every view uses, applies it (docs/design.md section 6a).
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.core import vocab

PAIR_COLUMNS = ("compiler_version", "library", "library_version")
LAST_ATTEMPT = "last_attempt"  # the column newest_per_model adds: an attempt that stands beside an older verdict



def verdicts_before_attempts(df, key: list[str]):
    """The frame (in time order) without the attempts that came after a verdict of the same model and pair, that
    verdict carrying the last of them in ``LAST_ATTEMPT``."""
    group = [*key, *(c for c in PAIR_COLUMNS if c in df.columns and c not in key)]
    attempt = [vocab.is_attempt(r, s) for r, s in zip(df["result"], df["stage"], strict=True)]
    verdict = df["result"].isin([vocab.PASS, vocab.FAIL]).to_numpy()
    if not (any(attempt) and verdict.any()):
        return df
    last_verdict: dict = {}  # group -> position of its newest verdict so far (the frame is in time order)
    hidden, words = [False] * len(df), [None] * len(df)
    if LAST_ATTEMPT in df:
        words = [w if isinstance(w, str) else None for w in df[LAST_ATTEMPT].tolist()]
    for position, values in enumerate(df[group].astype(object).itertuples(index=False, name=None)):
        values = tuple(None if pd.isna(v) else v for v in values)
        if verdict[position]:
            last_verdict[values] = position
        elif attempt[position] and values in last_verdict:
            hidden[position] = True
            words[last_verdict[values]] = attempt_words(df.iloc[position])
    if not any(hidden):
        return df
    out = df.copy()
    out[LAST_ATTEMPT] = pd.Series(words, index=out.index, dtype=object)
    return out[[not h for h in hidden]]


def attempt_words(row) -> str:
    """An attempt as the views show it beside the verdict it did not replace: its stage, its date, its error."""
    when = row.get("timestamp")
    date = pd.Timestamp(when).strftime("%Y-%m-%d") if when is not None and not pd.isna(when) else "undated"
    error = row.get("error")
    return f"{row['stage']}, {date}" + (f": {str(error)[:160]}" if isinstance(error, str) and error else "")
