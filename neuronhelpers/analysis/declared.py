"""Declared against measured: what transformers says a model class compiles (``_can_compile_fullgraph``) beside what
the catalog measured (PASS, or FAIL at compile or run), counted over a version pair (``neuronhelpers causes``,
notebook 05).
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.analysis.agreement import architecture_twin_rows
from neuronhelpers.core import vocab
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.verdict.declared import declared_fullgraph

# What "measured" means for the flag: a PASS captured the forward as one graph; a FAIL at compile or at run of the
# compiled graph did not. Other FAILs (load, mismatch, oom, ...) say nothing about capturing.
_MEASURED = {vocab.STAGE_COMPILE: False, vocab.STAGE_RUN: False}


def measured_fullgraph(result, stage) -> bool | None:
    if result == vocab.PASS:
        return True
    if result == vocab.FAIL:
        return _MEASURED.get(stage)
    return None


def declared_vs_measured(df: pd.DataFrame) -> pd.DataFrame:
    """One row per transformers architecture with a verdict: declared (the row's ``declared_fullgraph``, else the
    installed transformers'), measured, and whether they disagree. Architecture twins only, one row per architecture
    and task."""
    rows = architecture_twin_rows(df)
    rows = rows[(rows.library == vocab.TRANSFORMERS) & rows.result.isin([vocab.PASS, vocab.FAIL])]
    out = []
    # Pass one version pair (select_pair): with several, each architecture's newest row of any pair stands.
    for row in newest_per_model(rows, ["model_type", "task"]).itertuples(index=False):
        recorded = getattr(row, "declared_fullgraph", None)
        declared = bool(recorded) if isinstance(recorded, (bool, int)) and recorded == recorded else \
            declared_fullgraph(row.model_type, row.task)
        measured = measured_fullgraph(row.result, row.stage)
        out.append({"model_type": row.model_type, "task": row.task, "declared": declared, "measured": measured,
                    "result": row.result, "stage": row.stage,
                    "disagree": declared is not None and measured is not None and declared != measured})
    return pd.DataFrame(out, columns=["model_type", "task", "declared", "measured", "result", "stage", "disagree"])


def disagreement_line(frame: pd.DataFrame) -> str:
    """'declared _can_compile_fullgraph disagrees with the measured verdict for N of M architectures: ...'."""
    known = frame[frame.declared.notna() & frame.measured.notna()]
    said_yes = known[(known.declared == True) & (known.measured == False)]  # noqa: E712 - object columns
    said_no = known[(known.declared == False) & (known.measured == True)]  # noqa: E712
    return (f"transformers' _can_compile_fullgraph disagrees with the measured verdict for "
            f"{len(said_yes) + len(said_no)} of {len(known)} architectures: {len(said_yes)} declared True fail to "
            f"compile or run compiled, {len(said_no)} declared False pass")
