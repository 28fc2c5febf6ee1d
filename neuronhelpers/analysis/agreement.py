"""Twins against real checkpoints: does a random-weight twin's verdict say what the real model's does?

Every architecture verdict rests on a tiny twin. Where a real checkpoint of the same architecture ran in the same
version pair (the shelf's copies offline, a Hub checkpoint where the Hub is reachable), the two rows can be put side
by side: same library, same compiler and library versions, same ``model_type``. ``twin_agreement`` pairs them and
says whether the verdicts (PASS / FAIL, and for a FAIL its stage) agree; ``agreement_line`` is the one sentence
``neuronhelpers causes`` and notebook 05 print, each disagreement named.

The published dataset holds verdicts measured on Trainium: ``trainium_agreement`` puts each model tested there beside
its architecture's twin in the catalog, and ``trainium_agreement_line`` says how often the twin predicted it.
"""

from __future__ import annotations

import pandas as pd

from neuronhelpers.core.vocab import (
    ANSWER_ARCHITECTURE_TWIN,
    ANSWER_MODEL_TWIN,
    EXCLUDED,
    FAIL,
    PASS,
    WEIGHTS_TWIN,
)
from neuronhelpers.store.dataset import newest_per_model, version_pairs
from neuronhelpers.store.example import is_example
from neuronhelpers.store.schema import measured_on_trainium, weights_kinds
from neuronhelpers.twins.own import twin_id_for


def model_twin_rows(rows: pd.DataFrame) -> pd.Series:
    """Which rows are model twins' (built from a model's own config: ``twin_from`` set, twins/own.py)."""
    if "twin_from" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["twin_from"].notna() & rows["twin_of"].notna()


def architecture_twin_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The architecture twins' rows (``tiny/<model_type>``, from the default config): one per architecture, what
    counts, causes and release steps are about (a model twin answers for its model)."""
    if "twin_of" not in rows:
        return rows.iloc[0:0]
    return rows[rows["twin_of"].notna() & ~model_twin_rows(rows)]

PAIR = ["library", "compiler_version", "library_version"]
COLUMNS = ["model_id", "weights", "model_type", "compiler", *PAIR, "result", "stage", "twin_model", "twin_result",
           "twin_stage", "agree"]


def _verdict(result, stage) -> str:
    """What is compared: PASS, or FAIL with its stage (a compile failure and a mismatch are different findings)."""
    return f"{result} at {stage}" if result == FAIL else str(result)


def twin_agreement(df: pd.DataFrame) -> pd.DataFrame:
    """One row per real checkpoint with a verdict (PASS or FAIL) whose architecture has a twin row with a verdict in
    the same version pair: the real row's result and stage, the twin's, and whether they agree."""
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.assign(weights_kind=weights_kinds(df.get("weights"), df["model_id"]), own=model_twin_rows(df))
    judged = newest_per_model(df[df.result.isin([PASS, FAIL]) & df.model_type.notna()],
                              ["model_id", "weights_kind", *PAIR])
    twins = judged[judged.weights_kind == WEIGHTS_TWIN]
    real = judged[judged.weights_kind != WEIGHTS_TWIN]
    out = []
    for row in real.itertuples(index=False):
        pair = ((twins.library == row.library) & (twins.compiler_version == row.compiler_version)
                & (twins.library_version == row.library_version))
        # the model's own twin where it has one (built from its config), else its architecture's
        same = twins[pair & (twins.model_id == twin_id_for(row.model_id))]
        if same.empty:
            same = twins[pair & (twins.model_type == row.model_type) & ~twins.own]
        if same.empty:
            continue
        twin = same.sort_values("model_id").iloc[0]  # one twin per architecture and library; sorted, to be stable
        agree = _verdict(row.result, row.stage) == _verdict(twin.result, twin.stage)
        out.append({"model_id": row.model_id, "weights": getattr(row, "weights", None), "model_type": row.model_type,
                    "compiler": getattr(row, "compiler", None) or "compiler", **{c: getattr(row, c) for c in PAIR},
                    "result": row.result, "stage": row.stage,
                    "twin_model": twin.model_id, "twin_result": twin.result, "twin_stage": twin.stage, "agree": agree})
    return pd.DataFrame(out, columns=COLUMNS).sort_values(["compiler_version", "library_version", "model_id"],
                                                            ignore_index=True)


def agreement_line(frame: pd.DataFrame) -> str:
    """'twins agree with N of M real checkpoints', then each disagreement: the model, its verdict, the twin's (each
    real checkpoint's own twin where one ran, else its architecture's)."""
    if frame.empty:
        return ("twins agree with 0 of 0 real checkpoints: no real checkpoint ran beside its twin in these rows "
                "(make sweep-shelf)")
    pairs = len(frame[PAIR].drop_duplicates())
    counted = "real checkpoints" if pairs == 1 else f"real-checkpoint rows (one per checkpoint and pair, {pairs} pairs)"
    own = int(frame["twin_model"].isin([twin_id_for(m) for m in frame["model_id"]]).sum())
    line = f"twins agree with {int(frame.agree.sum())} of {len(frame)} {counted}" + (
        f" ({own} of them against their own twin)" if own else "")
    differ = frame[~frame.agree]
    if differ.empty:
        return line
    named = "; ".join(f"{r.model_id} {_verdict(r.result, r.stage)} but {r.twin_model} "
                      f"{_verdict(r.twin_result, r.twin_stage)} ({r.library} {r.library_version}, {r.compiler} "
                      f"{r.compiler_version})"
                      for r in differ.itertuples(index=False))
    return f"{line}; they differ on {named}"


# ------------------------------------------------------------------------------------------------
# Twins against Trainium: the published dataset's verdicts beside the catalog's twins
# ------------------------------------------------------------------------------------------------

TRAINIUM_COLUMNS = ["model_id", "model_type", "library", "neuronx_cc", "library_version", "result", "error",
                    "twin_model", "twin_pair", "twin_result", "twin_cause", "agree", "twin_kind", "architecture_agree"]
OUTSIDE_COLUMNS = ["model_id", "result", "why"]
# Why a Trainium row stays outside the count, in the order the line names them.
OUTSIDE_EXCLUDED = "excluded"
OUTSIDE_NO_VERDICT = "no verdict on Trainium"
OUTSIDE_UNKNOWN = "architecture unknown"
OUTSIDE_NO_TWIN = "no twin verdict"


def trainium_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows measured on Trainium under Hub ids (backend neuron, Hub weights), each model's newest."""
    if df.empty or "backend" not in df:
        return df.iloc[0:0]
    weights = df["weights"] if "weights" in df else [None] * len(df)
    mask = [measured_on_trainium(b, w, m) for b, w, m in zip(df["backend"], weights, df["model_id"], strict=True)]
    return newest_per_model(df[mask])


def _twin_rows(catalog: pd.DataFrame) -> pd.DataFrame:
    """The catalog's twin rows (each twin's newest per version pair)."""
    if catalog.empty or "twin_of" not in catalog:
        return catalog.iloc[0:0]
    twins = catalog[catalog["twin_of"].notna()]
    return newest_per_model(twins, ["model_id", *PAIR])


def _pair_for(twins: pd.DataFrame, library_version) -> tuple | None:
    """The catalog pair a Trainium row is compared in: the one with its library version (the newest compiler of
    those), else the newest pair of the library."""
    pairs = version_pairs(twins)
    same = [p for p in pairs if p[2] == library_version]
    return (same or pairs or [None])[0]


def trainium_agreement(trainium: pd.DataFrame, catalog: pd.DataFrame,
                       architecture=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each model tested on Trainium (its newest row) beside its architecture's twin in the catalog: same library,
    the catalog pair with the same library version if there is one, else the newest; results compared (a Trainium row
    has no stage). Returns (compared, outside): ``outside`` holds the models left out of the count and why (excluded,
    no verdict, architecture unknown, no twin verdict). ``architecture`` (model_id -> model_type or None) is asked
    for a row whose architecture the row does not say (the Hub's config, where reachable)."""
    twins, compared, outside = _twin_rows(catalog), [], []
    own = twins[model_twin_rows(twins)]
    twins = twins[~model_twin_rows(twins)]
    for row in trainium_rows(trainium).sort_values("model_id").itertuples(index=False):
        model_type = row.model_type if isinstance(row.model_type, str) else (architecture(row.model_id)
                                                                               if architecture else None)
        why = (OUTSIDE_EXCLUDED if row.result == EXCLUDED else OUTSIDE_NO_VERDICT if row.result not in (PASS, FAIL)
               else OUTSIDE_UNKNOWN if not model_type else None)
        same = twins[(twins["twin_of"] == model_type) & (twins["library"] == row.library)] if not why else twins
        pair = None if why else _pair_for(same, row.library_version)
        twin = (same[(same["compiler_version"] == pair[1]) & (same["library_version"] == pair[2])]
                .sort_values("model_id").head(1) if pair else same.iloc[0:0])
        if not why and (twin.empty or twin.iloc[0]["result"] not in (PASS, FAIL)):
            why = OUTSIDE_NO_TWIN
        architecture_result = None if why else twin.iloc[0]["result"]
        mine = own[own["model_id"] == twin_id_for(row.model_id)] if pair else own.iloc[0:0]
        mine = mine[(mine["compiler_version"] == pair[1]) & (mine["library_version"] == pair[2])
                    & mine["result"].isin([PASS, FAIL])] if not mine.empty else mine
        if not mine.empty:  # the model's own twin answers for it, in the same pair
            twin, why = mine.head(1), None
        if why:
            outside.append({"model_id": row.model_id, "result": row.result, "why": why})
            continue
        twin = twin.iloc[0]
        compared.append({"model_id": row.model_id, "model_type": model_type, "library": row.library,
                         "neuronx_cc": row.neuronx_cc, "library_version": row.library_version, "result": row.result,
                         "error": row.error, "twin_model": twin["model_id"],
                         "twin_pair": f"{twin['compiler']} {pair[1]}, {pair[0]} {pair[2]}",
                         "twin_result": twin["result"], "twin_cause": twin.get("cause"),
                         "agree": row.result == twin["result"], "twin_kind": ANSWER_MODEL_TWIN if not mine.empty
                         else ANSWER_ARCHITECTURE_TWIN,
                         "architecture_agree": None if architecture_result is None
                         else row.result == architecture_result})
    compared = pd.DataFrame(compared, columns=TRAINIUM_COLUMNS)
    compared.attrs["example"] = "runner" in trainium and is_example(trainium["runner"])
    return compared, pd.DataFrame(outside, columns=OUTSIDE_COLUMNS)


def _first_line(value) -> str:
    return str(value).splitlines()[0] if isinstance(value, str) and value else "no error recorded"


def trainium_agreement_line(compared: pd.DataFrame, outside: pd.DataFrame) -> str:
    """'twins agree with N of M models tested on Trainium', each disagreement named (the model, its Trainium result
    and error, the twin's result and cause), then the models outside the count, grouped by why; prefixed with a
    warning where the Trainium rows are neuronhelpers' made-up example (``trainium_agreement`` notes it)."""
    prefix = "example rows, made up (not measurements): " if compared.attrs.get("example") else ""
    if compared.empty and outside.empty:
        return f"{prefix}no rows measured on Trainium to hold the twins against"
    line = f"{prefix}twins agree with {int(compared['agree'].sum())} of {len(compared)} models tested on Trainium"
    owned = compared[compared["twin_kind"] == ANSWER_MODEL_TWIN]
    if not owned.empty:  # each model's own twin where one ran; what the architecture twins alone would have said
        alone = compared["architecture_agree"].dropna()
        line += (f" ({len(owned)} by their own twin; the architecture twins alone agree with "
                 f"{int(alone.astype(bool).sum())} of {len(alone)})")
    differ = compared[~compared["agree"].astype(bool)]
    if not differ.empty:
        line += "; they differ on " + "; ".join(
            f"{r.model_id} (Trainium {r.result}" + (f": {_first_line(r.error)}" if r.result == FAIL else "")
            + f"; twin {r.twin_model} {r.twin_result}" + (f": {r.twin_cause}" if r.twin_result == FAIL and
                                                          isinstance(r.twin_cause, str) else "")
            + f", {r.twin_pair})" for r in differ.itertuples(index=False))
    if not outside.empty:
        groups = [f"{len(g)} {why} ({', '.join(g['model_id'])})" for why, g in outside.groupby("why", sort=False)]
        line += "; outside the count: " + ", ".join(groups)
    return line
