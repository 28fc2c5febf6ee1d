"""Rows and view tables, as pure functions over DataFrames: the results normalised (rows from other tools
included), the rows of one version pair (each model's newest), each view's table with its twin hints, the name
filter and sorting."""

from __future__ import annotations

import pandas as pd

from neuronhelpers.analysis.agreement import model_twin_rows, trainium_rows
from neuronhelpers.analysis.answers import ANSWER_COLUMNS, Answers
from neuronhelpers.core import vocab
from neuronhelpers.core.versions import NEURON_COMPILER
from neuronhelpers.core.vocab import EXCLUDED, FAIL, PASS
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.store.dataset import LAST_ATTEMPT, PAIR_COLUMNS, newest_per_model
from neuronhelpers.store.schema import ran_on_labels

VIEWS = ("Selected", "Trending", "Downloads", "Architectures")
RANKED_VIEWS = ("Trending", "Downloads")
TASKS = tuple(vocab.TASKS)
DEFAULT_LIBRARY = vocab.TRANSFORMERS
# What the table shows for a model without a row at these versions. Not a result: a row whose result is
# vocab.UNTESTED (no verdict could be reached) shows as "UNTESTED (<reason>)".
NO_ROW = "untested"

# Measured columns: (table column, row column, scale, decimals shown).
MEASURES = [
    ("cores", "neuron_cores", None, 0),
    ("wall time (s)", "wall_s", 1, 1),
    ("compile (s)", "compile_s", 1, 1),
    ("generate (s)", "generate_s", 1, 2),
    ("decode (tok/s)", "decode_tokens_per_s", 1, 1),
    ("speed-up (x)", "speedup", 1, 2),
    ("peak memory (GiB)", "peak_memory_bytes", 2**30, 2),
]
DECIMALS = {column: decimals for column, _, _, decimals in MEASURES if decimals}
THOUSANDS = ("downloads",)
RAN_ON = "ran on"  # the table's column for what a row ran on (schema.ran_on: Trainium, CPU twin, ...)
TESTED = "tested"  # the day a row's run finished
TABLE_COLUMNS = ["model", "task", "architecture", "result", RAN_ON, "evidence", *[m[0] for m in MEASURES], "failed at",
                 TESTED, "note"]
# The row columns a view table reads, and those the answer for an untested model reads (analysis/answers.py).
VIEW_COLUMNS = ["model_id", "task", "model_type", "twin_of", "result", "stage", "error", "cause", "weights", "evidence",
                "declared_fullgraph", "backend", "library", "timestamp", *[m[1] for m in MEASURES],
                *[c for c in ANSWER_COLUMNS if c not in ("model_id", "task", "twin_of", "result", "stage", "cause",
                                                         "library")]]
# The Architectures view's column for the models of the architecture measured on Trainium (analysis/agreement).
ON_TRAINIUM = "on Trainium"
# The Architectures view's column for transformers' own claim (_can_compile_fullgraph) beside the measured verdict.
DECLARED = "declares fullgraph"
RESULT_ORDER = {PASS: 0, FAIL: 1, vocab.UNTESTED: 2, NO_ROW: 3, EXCLUDED: 4}


# ----------------------------------------------------------------------------------------------
# Rows: normalised, and the rows of one version pair
# ----------------------------------------------------------------------------------------------


def normalise_results(df: pd.DataFrame) -> pd.DataFrame:
    """The rows with every result column present (null where a file lacked it) and the compiler version
    filled from ``neuronx_cc`` where a file written by another tool only carries that. Unchanged when nothing
    is missing (no copy)."""
    from neuronhelpers.store.schema import COLUMN_NAMES

    missing = [c for c in COLUMN_NAMES if c not in df.columns]
    fill = "neuronx_cc" in df.columns and ("compiler_version" not in df.columns or
                                           bool((df["compiler_version"].isna() & df["neuronx_cc"].notna()).any()))
    if not missing and not fill:
        return df
    out = df.copy()
    for column in missing:
        out[column] = None
    if fill:
        fill = out["compiler_version"].isna() & out["neuronx_cc"].notna()
        out.loc[fill, "compiler_version"] = out.loc[fill, "neuronx_cc"]
        out.loc[fill & out["compiler"].isna(), "compiler"] = NEURON_COMPILER
    return out


def _version_key(value: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(str(value).split("+")[0]), str(value))
    except InvalidVersion:
        return (0, None, str(value))


def versions_available(df: pd.DataFrame, column: str, *, library: str | None = None) -> list[str]:
    """Distinct versions in a column, newest first (of one library's rows when ``library`` is given)."""
    if column not in df:
        return []
    values = df[column] if library is None else df.loc[df["library"] == library, column]
    return sorted(values.dropna().unique(), key=_version_key, reverse=True)


def newest_pair(df: pd.DataFrame, *, library: str | None = None) -> tuple[str, str] | None:
    """The newest (compiler version, library version) pair that has rows (of one library when given); None
    when there is none."""
    df = normalise_results(df)
    if library is not None:
        df = df[df["library"] == library]
    pairs = df[["compiler_version", "library_version"]].dropna().drop_duplicates()
    if pairs.empty:
        return None
    best = max(pairs.itertuples(index=False), key=lambda p: (_version_key(p[0]), _version_key(p[1])))
    return str(best[0]), str(best[1])


def rows_for_versions(df: pd.DataFrame, compiler_version: str | None, library_version: str | None,
                      library: str | None = None, *, columns: list[str] | None = None) -> pd.DataFrame:
    """The rows of one (compiler version, library version) pair; the newest row per model.

    With ``library``, the library version applies to that library's rows only: rows of other libraries
    (another task's) keep their newest row. ``columns`` limits the columns returned (VIEW_COLUMNS is what
    ``view_table`` reads).
    """
    out = normalise_results(df)
    mask = pd.Series(True, index=out.index)
    if compiler_version:
        mask &= out["compiler_version"] == compiler_version
    if library_version:
        same = out["library_version"] == library_version
        mask &= same if library is None else (same | (out["library"] != library))
    # Order and deduplicate on the narrow columns the rule reads, then take the wide rows (run.py, packages, ...) once.
    narrow = [c for c in ["model_id", "timestamp", "result", "stage", *PAIR_COLUMNS] if c in out.columns]
    keys = newest_per_model(out.loc[mask.to_numpy(), narrow])
    chosen = out.loc[keys.index, columns] if columns else out.loc[keys.index]
    if LAST_ATTEMPT in keys:  # a verdict that stands beside a newer attempt with no verdict says so
        chosen = chosen.assign(**{LAST_ATTEMPT: keys[LAST_ATTEMPT].to_numpy()})
    return chosen


# ----------------------------------------------------------------------------------------------
# Results as the table shows them
# ----------------------------------------------------------------------------------------------


def result_label(result, stage=None) -> str:
    """A row's result as the table shows it: UNTESTED carries its reason ("UNTESTED (twin)"); no row is NO_ROW."""
    if result is None or (not isinstance(result, str) and pd.isna(result)):
        return NO_ROW
    if result == vocab.UNTESTED and isinstance(stage, str) and stage:
        return f"{vocab.UNTESTED} ({stage})"
    return str(result)


def result_kind(label: str) -> str:
    """The result a label stands for: PASS, FAIL, EXCLUDED, UNTESTED (a row), NO_ROW, or the label itself for a
    value outside the vocabulary."""
    return str(label).split(" (", 1)[0]


# The verdicts an untested Hub id is hinted with: its own twin's, else its architecture twin's (analysis/answers.py).
TwinVerdicts = Answers


# ----------------------------------------------------------------------------------------------
# View tables
# ----------------------------------------------------------------------------------------------


def _notes(merged: pd.DataFrame, kind: pd.Series) -> pd.Series:
    """An exclusion's or an UNTESTED row's reason is its error; a FAIL without a note shows its cause."""
    reason = kind.isin([EXCLUDED, vocab.UNTESTED])
    note = pd.Series([_join(n, e) if r else n
                      for n, e, r in zip(merged["note"].fillna(""), merged["error"].fillna(""), reason, strict=True)],
                     index=merged.index, dtype=object)
    return note.where(~(kind.eq(FAIL) & note.eq("")), merged["cause"].fillna(merged["error"]).fillna(""))


def _table_from(ids: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Join a list of model ids (with 'task', 'architecture', 'note') to their rows; ids without a row say so."""
    needed = [c for c in VIEW_COLUMNS if c != "twin_of"]
    merged = ids.merge(rows[needed], on="model_id", how="left", suffixes=("", "_row"))
    result = pd.Series([result_label(r, s) for r, s in zip(merged["result"], merged["stage"], strict=True)],
                       index=merged.index, dtype=object)
    kind = result.map(result_kind)
    ran = kind.isin([PASS, FAIL]) | ~kind.isin([*RESULT_ORDER])  # a value outside the vocabulary: shown as recorded
    has_row = kind.ne(NO_ROW)
    table = {"model": merged["model_id"],
             "task": merged["task"].astype(object).fillna(merged["task_row"].astype(object)).fillna(""),
             "architecture": merged["architecture"].astype(object).fillna(
                 merged["model_type"].astype(object)).fillna(""),
             "result": result,
             RAN_ON: [label if r else "" for label, r in zip(ran_on_labels(merged), has_row, strict=True)],
             "evidence": merged["evidence"].astype(object).where(ran, "").fillna("")}
    for column, source, scale, decimals in MEASURES:
        values = pd.to_numeric(merged[source], errors="coerce").where(ran)
        table[column] = values.astype("Int64") if scale is None else (values / scale).round(decimals)
    table["failed at"] = merged["stage"].where(kind.eq(FAIL), "").fillna("")
    table[TESTED] = pd.to_datetime(merged["timestamp"], utc=True, errors="coerce").dt.strftime("%Y-%m-%d").fillna("")
    table["cause"] = merged["cause"].fillna("")
    table[DECLARED] = [_declared_word(v) for v in merged["declared_fullgraph"]]
    table["note"] = _notes(merged, kind)
    # A real copy from the shelf stands for the Hub model: its row is the model's result, its weights said beside it.
    shelf = merged["weights"].fillna("").astype(str).str.startswith(f"{vocab.WEIGHTS_SHELF}:")
    table["note"] = [_join(w, n) if s else n
                     for w, n, s in zip(merged["weights"].fillna(""), table["note"], shelf, strict=True)]
    return pd.DataFrame(table)


def _declared_word(value) -> str:
    """'yes' / 'no' for transformers' _can_compile_fullgraph as the row recorded it; '' where the row has none (a
    row from before the column, another library, or a class that does not say)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    return "yes" if bool(value) else "no"


def _join(first: str, second: str) -> str:
    """Two notes as one ('a; b'), without repeating one that is already there."""
    if not second or second in first:
        return first
    return f"{first}; {second}" if first else second


def _ranked(rankings: pd.DataFrame | None, view: str) -> pd.DataFrame:
    columns = ["view", "task", "rank", "model_id", "model_type", "downloads", "trending_score"]
    ranked = rankings if rankings is not None else pd.DataFrame(columns=columns)
    ranked = ranked.reindex(columns=list(dict.fromkeys([*ranked.columns, *columns])))
    return ranked[ranked["view"] == view.lower()].sort_values(["task", "rank"], kind="stable").reset_index(drop=True)


def _selected_table(rows: pd.DataFrame, _rankings, _view, _trainium) -> tuple[pd.DataFrame, list[str]]:
    ids = pd.DataFrame([{"model_id": e.model_id, "task": e.task, "architecture": e.model_type,
                         "note": e.excluded or ""} for e in SELECTED])
    table = _table_from(ids, rows)
    # Deliberate exclusions are part of the list, whether or not a row recorded them: nothing ran.
    excluded = pd.Series([bool(e.excluded) for e in SELECTED], index=table.index)
    # the list's reason, and a row's own where one recorded the model excluded too (the published dataset's)
    table.loc[excluded, "note"] = [_join(note if kind == EXCLUDED else "", reason) for note, reason, kind in
                                   zip(table.loc[excluded, "note"], ids.loc[excluded, "note"],
                                       table.loc[excluded, "result"].map(result_kind), strict=False)]
    table.loc[excluded, "result"] = EXCLUDED
    for column, *_ in MEASURES:
        table.loc[excluded, column] = pd.NA
    table.loc[excluded, ["failed at", "evidence"]] = ""
    return table, list(TABLE_COLUMNS)


def _ranked_table(rows: pd.DataFrame, rankings, view: str, _trainium) -> tuple[pd.DataFrame, list[str]]:
    ranked = _ranked(rankings, view)
    ids = pd.DataFrame({"model_id": ranked["model_id"], "task": ranked["task"],
                        "architecture": ranked["model_type"], "note": ""})
    table = _table_from(ids, rows)
    table.insert(0, "rank", pd.to_numeric(ranked["rank"], errors="coerce").astype("Int64"))
    table.insert(2, "downloads", pd.to_numeric(ranked["downloads"], errors="coerce").astype("Int64"))
    return table, ["rank", "model", "downloads", *TABLE_COLUMNS[1:]]


def _architectures_table(rows: pd.DataFrame, _rankings, _view,
                         trainium: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    # the architecture twins (a model twin answers for its model: the hints and the Trainium column read it)
    twin_rows = rows[rows["twin_of"].notna() & ~model_twin_rows(rows)].sort_values("model_id").reset_index(drop=True)
    ids = pd.DataFrame({"model_id": twin_rows["model_id"], "task": twin_rows["task"],
                        "architecture": twin_rows["twin_of"], "note": "twin of " + twin_rows["twin_of"]})
    columns = list(TABLE_COLUMNS)
    columns.insert(columns.index("note"), "cause")
    columns.insert(columns.index("evidence") + 1, DECLARED)
    table = _table_from(ids, rows)
    if not trainium.empty:
        columns.insert(columns.index(RAN_ON) + 1, ON_TRAINIUM)
        answers = Answers(rows)
        table[ON_TRAINIUM] = [_on_trainium(trainium, a, lib, result_kind(r), answers)
                              for a, lib, r in zip(twin_rows["twin_of"], twin_rows["library"], table["result"],
                                                   strict=False)]
    return table, columns


def _on_trainium(trainium: pd.DataFrame, architecture: str, library: str, twin_result: str,
                 answers: Answers) -> str:
    """The models of an architecture measured on Trainium (same library), each with its result, and whether the
    twins here say the same, each model's own twin where it has one: 'twins agree with 2 of 3 (own twin for 1; the
    architecture twin alone: 1 of 3): Qwen/Qwen3-0.6B PASS, ...'."""
    same = trainium[(trainium["model_type"] == architecture) & (trainium["library"] == library)]
    same = same[same["result"].isin([PASS, FAIL])]
    if same.empty:
        return ""
    listed = ", ".join(f"{m} {r}" for m, r in zip(same["model_id"], same["result"], strict=True))
    if twin_result not in (PASS, FAIL):
        return listed
    own = [answers.by_model.get(m) for m in same["model_id"]]
    predicted = [o.result if o is not None and o.result in (PASS, FAIL) else twin_result for o in own]
    agree = sum(p == r for p, r in zip(predicted, same["result"], strict=True))
    alone = int((same["result"] == twin_result).sum())
    owned = sum(o is not None and o.result in (PASS, FAIL) for o in own)
    if not owned:
        return f"twin agrees with {alone} of {len(same)}: {listed}"
    return (f"twins agree with {agree} of {len(same)} (own twin for {owned}; the architecture twin alone: {alone} of "
            f"{len(same)}): {listed}")


def _with_twin_hints(table: pd.DataFrame, twins: TwinVerdicts) -> pd.DataFrame:
    """An untested model gets its own twin's verdict (else its architecture twin's), labelled, as a hint in its note,
    never as its result."""
    untested = table["result"].eq(NO_ROW)
    hints = [twins.hint(a, t, m) if u else ""
             for m, a, t, u in zip(table["model"], table["architecture"], table["task"], untested, strict=True)]
    table["note"] = [_join(n, h) for n, h in zip(table["note"], hints, strict=True)]
    return table


_VIEW_TABLES = {"Selected": _selected_table, "Trending": _ranked_table, "Downloads": _ranked_table,
                "Architectures": _architectures_table}


def view_table(view: str, df: pd.DataFrame, rankings: pd.DataFrame | None = None, *, task: str | None = None,
               name: str = "", compiler_version: str | None = None, library_version: str | None = None,
               library: str | None = None, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table a view shows: one row per model, filtered by task and a case-insensitive name substring.

    ``library`` is the library the library version belongs to (default: the task's; without a task the
    version applies to every row). ``rows`` are ``rows_for_versions``' answer when the caller has it.
    Columns: TABLE_COLUMNS, with 'rank' and 'downloads' in Trending and Downloads and 'cause' in Architectures (and
    ON_TRAINIUM, where ``df`` holds rows measured on Trainium).
    """
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    if library is None and task:
        library = vocab.LIBRARY_FOR_TASK.get(task)
    if rows is None:
        rows = rows_for_versions(df, compiler_version, library_version, library)
    trainium = trainium_rows(df) if view == "Architectures" else None
    table, columns = _VIEW_TABLES[view](rows, rankings, view, trainium)
    if view != "Architectures":
        table = _with_twin_hints(table, TwinVerdicts(rows))
    if task:
        table = table[table["task"].eq(task)]
    return filter_by_name(table[columns], name)


def filter_by_evidence(table: pd.DataFrame, level: str) -> pd.DataFrame:
    """The rows whose verdict stands on this level of evidence (vocab.EVIDENCE); all rows for ''."""
    if level:
        table = table[table["evidence"] == level]
    return table.reset_index(drop=True)


def filter_by_name(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """The rows whose model id contains ``name`` (case-insensitive, not a pattern)."""
    if name:
        table = table[table["model"].str.contains(name, case=False, regex=False)]
    return table.reset_index(drop=True)


def sort_table(table: pd.DataFrame, column: str | None, ascending: bool = True) -> pd.DataFrame:
    """The table sorted by one column (results in their vocabulary order, text case-insensitively); empty
    cells last either way. ``column=None`` keeps the view's own order."""
    if not column:
        return table
    if column not in table:
        raise ValueError(f"no column {column!r} to sort by: choose one of {', '.join(table.columns)}")
    values = table[column]
    if column == "result":
        key = values.map(lambda v: RESULT_ORDER.get(result_kind(v), len(RESULT_ORDER)))  # ties keep the view's order
    elif pd.api.types.is_numeric_dtype(values):
        key = values
    else:
        key = values.astype("string").str.lower().replace("", pd.NA)
    order = key.sort_values(ascending=ascending, na_position="last", kind="stable").index
    return table.loc[order].reset_index(drop=True)
