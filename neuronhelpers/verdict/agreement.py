"""Twins against real checkpoints: does a random-weight twin's verdict say what the real model's does?

Every architecture verdict rests on a tiny twin. Where a real checkpoint of the same architecture ran in the same
version pair (the shelf's copies offline, a Hub checkpoint where the Hub is reachable), the two rows can be put side
by side: same library, same compiler and library versions, same ``model_type``. ``twin_agreement`` pairs them and
says whether the verdicts (PASS / FAIL, and for a FAIL its stage) agree; ``agreement_line`` is the one sentence
``neuronhelpers causes`` and notebook 06 print, each disagreement named.
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.core.vocab import FAIL, PASS, WEIGHTS_TWIN
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.store.schema import weights_kinds

PAIR = ["library", "compiler_version", "library_version"]
COLUMNS = ["model_id", "weights", "model_type", *PAIR, "result", "stage", "twin_model", "twin_result", "twin_stage",
           "agree"]


def _verdict(result, stage) -> str:
    """What is compared: PASS, or FAIL with its stage (a compile failure and a mismatch are different findings)."""
    return f"{result} at {stage}" if result == FAIL else str(result)


def twin_agreement(df: pd.DataFrame) -> pd.DataFrame:
    """One row per real checkpoint with a verdict (PASS or FAIL) whose architecture has a twin row with a verdict in
    the same version pair: the real row's result and stage, the twin's, and whether they agree."""
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.assign(weights_kind=weights_kinds(df.get("weights"), df["model_id"]))
    judged = newest_per_model(df[df.result.isin([PASS, FAIL]) & df.model_type.notna()],
                              ["model_id", "weights_kind", *PAIR])
    twins = judged[judged.weights_kind == WEIGHTS_TWIN]
    real = judged[judged.weights_kind != WEIGHTS_TWIN]
    out = []
    for row in real.itertuples(index=False):
        same = twins[(twins.model_type == row.model_type) & (twins.library == row.library)
                     & (twins.compiler_version == row.compiler_version) & (twins.library_version == row.library_version)]
        if same.empty:
            continue
        twin = same.sort_values("model_id").iloc[0]  # one twin per architecture and library; sorted, to be stable
        agree = _verdict(row.result, row.stage) == _verdict(twin.result, twin.stage)
        out.append({"model_id": row.model_id, "weights": getattr(row, "weights", None), "model_type": row.model_type,
                    **{c: getattr(row, c) for c in PAIR}, "result": row.result, "stage": row.stage,
                    "twin_model": twin.model_id, "twin_result": twin.result, "twin_stage": twin.stage, "agree": agree})
    return pd.DataFrame(out, columns=COLUMNS).sort_values(["compiler_version", "library_version", "model_id"],
                                                            ignore_index=True)


def agreement_line(frame: pd.DataFrame) -> str:
    """'twins agree with N of M real checkpoints', then each disagreement: the model, its verdict, the twin's."""
    if frame.empty:
        return ("twins agree with 0 of 0 real checkpoints: no real checkpoint ran beside its twin in these rows "
                "(make sweep-shelf)")
    pairs = len(frame[PAIR].drop_duplicates())
    counted = "real checkpoints" if pairs == 1 else f"real-checkpoint rows (one per checkpoint and pair, {pairs} pairs)"
    line = f"twins agree with {int(frame.agree.sum())} of {len(frame)} {counted}"
    differ = frame[~frame.agree]
    if differ.empty:
        return line
    named = "; ".join(f"{r.model_id} {_verdict(r.result, r.stage)} but {r.twin_model} {_verdict(r.twin_result, r.twin_stage)}"
                      f" ({r.library} {r.library_version}, compiler {r.compiler_version})"
                      for r in differ.itertuples(index=False))
    return f"{line}; they differ on {named}"
