"""The catalog browser: pure functions over DataFrames, and an ipywidgets UI that only wires them.

Views: Selected (the curated list), Trending and Downloads (the Hub's rankings, one task at a time,
tested or not), Architectures (every architecture twin: PASS, FAIL or UNTESTED, with its stage and
cause). Each view opens with a summary (PASS / FAIL / EXCLUDED / untested counts, the pass rate and,
where it helps, a pass-rate-by-family plot). Filters: a name substring, a task (every task of the
vocabulary; the library picker follows the task's library), the compiler version and the library
version (the newest pair by default). The table sorts by any column (click its header) and a model's
name opens its detail: the reproduce command, the Neuron SDK and component versions, timings, the
cause and error, history across versions, requirements.txt and run.py (bounded, with download and
copy), and the compile-cache sync command.

"untested" means no row for the model at these versions; a row whose result is UNTESTED (no verdict
could be reached, for a reason that is not the model's) shows as "UNTESTED (<reason>)". Neither counts
as a FAIL. An untested Hub model shows its architecture twin's verdict as a hint, never as its result.

Rows from other tools (only the published columns) are shown: missing columns are null, the compiler
version falls back to ``neuronx_cc``, and a result outside the vocabulary is kept as it is; the files
holding such values are named once each in a notice.

Every string from a dataset is untrusted: it is escaped before it reaches HTML.
"""

from __future__ import annotations

import base64
import html
import re
import shlex
from functools import lru_cache

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.run.compile_cache import sync_command
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.core.vocab import EXCLUDED, FAIL, PASS

VIEWS = ("Selected", "Trending", "Downloads", "Architectures")
RANKED_VIEWS = ("Trending", "Downloads")
TASKS = tuple(vocab.TASKS)
# The modeling library each task is tested with: the library picker follows the task.
TASK_LIBRARY = {
    vocab.TEXT_GENERATION: "transformers",
    vocab.IMAGE_TEXT_TO_TEXT: "transformers",
    vocab.FEATURE_EXTRACTION: "sentence-transformers",
    vocab.TEXT_TO_IMAGE: "diffusers",
}
DEFAULT_LIBRARY = "transformers"
UNTESTED = "untested"  # no row for the model at these versions (a row with result UNTESTED is vocab.UNTESTED)

# Measured columns: (table column, row column, scale, decimals shown).
MEASURES = [
    ("cores", "neuron_cores", None, 0),
    ("wall time (s)", "wall_s", 1, 1),
    ("compile (s)", "compile_s", 1, 1),
    ("generate (s)", "generate_s", 1, 2),
    ("decode (tok/s)", "decode_tokens_per_s", 1, 1),
    ("peak memory (GiB)", "peak_memory_bytes", 2**30, 2),
]
DECIMALS = {column: decimals for column, _, _, decimals in MEASURES if decimals}
THOUSANDS = ("downloads",)
TABLE_COLUMNS = ["model", "task", "architecture", "result", *[m[0] for m in MEASURES], "failed at", "note"]
# The row columns a view table reads.
VIEW_COLUMNS = ["model_id", "task", "model_type", "twin_of", "result", "stage", "error", "cause", *[m[1] for m in MEASURES]]
RESULT_ORDER = {PASS: 0, FAIL: 1, vocab.UNTESTED: 2, UNTESTED: 3, EXCLUDED: 4}


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
        out.loc[fill & out["compiler"].isna(), "compiler"] = "neuronx-cc"
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
    # Order and deduplicate on two columns, then take the wide rows (run.py, packages, ...) once.
    keys = out.loc[mask.to_numpy(), ["model_id", "timestamp"]]
    keys = keys.sort_values("timestamp", na_position="first", kind="stable").drop_duplicates("model_id", keep="last")
    return out.loc[keys.index, columns] if columns else out.loc[keys.index]


# ----------------------------------------------------------------------------------------------
# View tables
# ----------------------------------------------------------------------------------------------


def result_label(result, stage=None) -> str:
    """A row's result as the table shows it: UNTESTED carries its reason ("UNTESTED (twin)")."""
    if result is None or (not isinstance(result, str) and pd.isna(result)):
        return UNTESTED
    if result == vocab.UNTESTED and isinstance(stage, str) and stage:
        return f"{vocab.UNTESTED} ({stage})"
    return str(result)


def result_kind(label: str) -> str:
    """The result a label stands for: PASS, FAIL, EXCLUDED, UNTESTED (a row), untested (no row), or the label
    itself for a value outside the vocabulary."""
    return str(label).split(" (", 1)[0]


class TwinVerdicts:
    """The architecture twins' rows at the chosen versions, looked up by (task, model_type)."""

    def __init__(self, rows: pd.DataFrame):
        twins = rows[rows["twin_of"].notna()]
        self.by_task, self.by_type = {}, {}
        for record in twins[["model_id", "task", "twin_of", "result", "stage", "cause"]].itertuples(index=False):
            self.by_task[(record.task, record.twin_of)] = record
            self.by_type.setdefault(record.twin_of, record)

    def hint(self, model_type, task=None) -> str:
        """For an untested model: how its architecture's twin did (a hint, never its result)."""
        if not isinstance(model_type, str) or not model_type:
            return ""
        twin = self.by_task.get((task, model_type)) or self.by_type.get(model_type)
        if twin is None:
            return ""
        text = f"architecture twin {twin.model_id}: {result_label(twin.result, twin.stage)}"
        if twin.result == FAIL and isinstance(twin.stage, str):
            text += f" at {twin.stage}"
        if twin.result != PASS and isinstance(twin.cause, str) and twin.cause:
            text += f": {twin.cause}"
        return text


def _table_from(ids: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Join a list of model ids (with 'task', 'architecture', 'note') to their rows; untested ids say so."""
    needed = [c for c in VIEW_COLUMNS if c != "twin_of"]
    merged = ids.merge(rows[needed], on="model_id", how="left", suffixes=("", "_row"))
    result = pd.Series([result_label(r, s) for r, s in zip(merged["result"], merged["stage"])], index=merged.index,
                       dtype=object)
    kind = result.map(result_kind)
    ran = kind.isin([PASS, FAIL]) | ~kind.isin([*RESULT_ORDER])  # a value outside the vocabulary: shown as recorded
    # An exclusion's or an UNTESTED row's reason is its error; a FAIL without a note shows its cause.
    reason = kind.isin([EXCLUDED, vocab.UNTESTED])
    note = pd.Series([_join(n, e) if r else n for n, e, r in zip(merged["note"].fillna(""), merged["error"].fillna(""),
                                                                   reason)], index=merged.index, dtype=object)
    note = note.where(~(kind.eq(FAIL) & note.eq("")), merged["cause"].fillna(merged["error"]).fillna(""))
    table = {"model": merged["model_id"],
             "task": merged["task"].astype(object).fillna(merged["task_row"].astype(object)).fillna(""),
             "architecture": merged["architecture"].astype(object).fillna(merged["model_type"].astype(object)).fillna(""),
             "result": result}
    for column, source, scale, decimals in MEASURES:
        values = pd.to_numeric(merged[source], errors="coerce").where(ran)
        table[column] = values.astype("Int64") if scale is None else (values / scale).round(decimals)
    table["failed at"] = merged["stage"].where(kind.eq(FAIL), "").fillna("")
    table["cause"] = merged["cause"].fillna("")
    table["note"] = note
    return pd.DataFrame(table)


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


def view_table(view: str, df: pd.DataFrame, rankings: pd.DataFrame | None = None, *, task: str | None = None,
               name: str = "", compiler_version: str | None = None, library_version: str | None = None,
               library: str | None = None, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table a view shows: one row per model, filtered by task and a case-insensitive name substring.

    ``library`` is the library the library version belongs to (default: the task's; without a task the
    version applies to every row). ``rows`` are ``rows_for_versions``' answer when the caller has it.
    Columns: TABLE_COLUMNS, with 'rank' and 'downloads' in Trending and Downloads and 'cause' in Architectures.
    """
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    if library is None and task:
        library = TASK_LIBRARY.get(task)
    if rows is None:
        rows = rows_for_versions(df, compiler_version, library_version, library)
    twins = TwinVerdicts(rows)
    columns = list(TABLE_COLUMNS)
    if view == "Selected":
        ids = pd.DataFrame([{"model_id": e.model_id, "task": e.task, "architecture": e.model_type,
                             "note": e.excluded or ""} for e in SELECTED])
        table = _table_from(ids, rows)
        # Deliberate exclusions are part of the list, whether or not a row recorded them: nothing ran.
        excluded = pd.Series([bool(e.excluded) for e in SELECTED], index=table.index)
        table.loc[excluded, "result"] = EXCLUDED
        table.loc[excluded, "note"] = ids.loc[excluded, "note"]
        for column, *_ in MEASURES:
            table.loc[excluded, column] = pd.NA
        table.loc[excluded, "failed at"] = ""
    elif view in RANKED_VIEWS:
        ranked = _ranked(rankings, view)
        ids = pd.DataFrame({"model_id": ranked["model_id"], "task": ranked["task"],
                            "architecture": ranked["model_type"], "note": ""})
        table = _table_from(ids, rows)
        table.insert(0, "rank", pd.to_numeric(ranked["rank"], errors="coerce").astype("Int64"))
        table.insert(2, "downloads", pd.to_numeric(ranked["downloads"], errors="coerce").astype("Int64"))
        columns = ["rank", "model", "downloads", *columns[1:]]
    else:
        twin_rows = rows[rows["twin_of"].notna()].sort_values("model_id")
        ids = pd.DataFrame({"model_id": twin_rows["model_id"], "task": twin_rows["task"],
                            "architecture": twin_rows["twin_of"], "note": "twin of " + twin_rows["twin_of"]})
        table = _table_from(ids.reset_index(drop=True), rows)
        columns.insert(columns.index("note"), "cause")
    if view != "Architectures":
        # An untested model gets its architecture twin's verdict as a hint in its note, never as its result.
        untested = table["result"].eq(UNTESTED)
        hints = [twins.hint(a, t) if u else "" for a, t, u in zip(table["architecture"], table["task"], untested)]
        table["note"] = [_join(n, h) for n, h in zip(table["note"], hints)]
    if task:
        table = table[table["task"].eq(task)]
    return filter_by_name(table[columns], name)


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


def view_summary(table: pd.DataFrame) -> dict:
    """Counts of a view's table by result kind, and the pass rate of its tested models (PASS / (PASS + FAIL)).

    'untested' counts the models without a row and those whose row is UNTESTED ('untested_rows' says how many
    of them have such a row); 'other' counts results outside the vocabulary.
    """
    kinds = table["result"].map(result_kind) if len(table) else pd.Series(dtype=object)
    counts = kinds.value_counts()
    known = {PASS, FAIL, EXCLUDED, UNTESTED, vocab.UNTESTED}
    summary = {
        "models": int(len(table)),
        PASS: int(counts.get(PASS, 0)),
        FAIL: int(counts.get(FAIL, 0)),
        EXCLUDED: int(counts.get(EXCLUDED, 0)),
        UNTESTED: int(counts.get(UNTESTED, 0) + counts.get(vocab.UNTESTED, 0)),
        "untested_rows": int(counts.get(vocab.UNTESTED, 0)),
        "other": int(sum(n for k, n in counts.items() if k not in known)),
    }
    tested = summary[PASS] + summary[FAIL]
    summary["tested"] = tested
    summary["pass_rate"] = summary[PASS] / tested if tested else None
    return summary


def family_pass_rates(table: pd.DataFrame, family: str = "architecture", top: int = 12) -> pd.DataFrame:
    """Per family (a table column: 'architecture' or 'task'): models tested, passed, and the pass rate (%),
    most-tested first."""
    kinds = table["result"].map(result_kind)
    tested = table[kinds.isin([PASS, FAIL])]
    if tested.empty:
        return pd.DataFrame(columns=["family", "tested", "passed", "rate"])
    grouped = tested.assign(passed=kinds.eq(PASS)).groupby(tested[family].replace("", "(unknown)"))
    out = pd.DataFrame({"tested": grouped.size(), "passed": grouped["passed"].sum().astype(int)})
    out["rate"] = out["passed"] / out["tested"] * 100
    out = out.rename_axis("family").reset_index()
    return out.sort_values(["tested", "family"], ascending=[False, True], kind="stable").head(top).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# Detail of one model
# ----------------------------------------------------------------------------------------------


def _text(value) -> str:
    """A dataset cell as text: missing values (None, NaN, NA) become the empty string."""
    if value is None:
        return ""
    try:
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):  # a list or array cell
        pass
    return str(value)


def _missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array cell
        return False


def _number(value):
    return None if _missing(value) else value


def reproduce_command(model_id: str, cores=None, backend: str | None = None) -> str:
    """The one line that reproduces a row: ``neuronhelpers run MODEL`` (--cores N when sharded, --backend for a
    row that ran on cpu or cuda)."""
    parts = ["neuronhelpers", "run", shlex.quote(model_id)]
    cores = _number(cores)
    if cores is not None and int(cores) > 1:
        parts += ["--cores", str(int(cores))]
    if backend in ("cpu", "cuda"):
        parts += ["--backend", backend]
    return " ".join(parts)


def _history(history: pd.DataFrame) -> pd.DataFrame:
    last = history.drop_duplicates(["compiler", "compiler_version", "library", "library_version"], keep="last")
    return pd.DataFrame({
        "compiler": last["compiler"].fillna("") + " " + last["compiler_version"].fillna(""),
        "library": last["library"].fillna("") + " " + last["library_version"].fillna(""),
        "Neuron SDK": last["neuron_sdk"].fillna(""),
        "cores": pd.to_numeric(last["neuron_cores"], errors="coerce").astype("Int64"),
        "result": [result_label(r, s) for r, s in zip(last["result"], last["stage"])],
        "wall time (s)": pd.to_numeric(last["wall_s"], errors="coerce").round(1),
        "compile (s)": pd.to_numeric(last["compile_s"], errors="coerce").round(1),
    }).reset_index(drop=True)


def model_detail(df: pd.DataFrame, model_id: str, *, compiler_version: str | None = None,
                 library_version: str | None = None) -> dict | None:
    """Everything the detail pane shows for one model (None when the dataset has no row for it)."""
    df = normalise_results(df)
    history = df[df["model_id"] == model_id].sort_values("timestamp", na_position="first", kind="stable")
    if history.empty:
        return None
    chosen = rows_for_versions(history, compiler_version, library_version)
    row = (chosen if not chosen.empty else history).iloc[-1]
    def get(column):
        value = row.get(column)
        return None if _missing(value) else value

    failed = get("result") != PASS
    ran = result_kind(result_label(get("result"))) not in (EXCLUDED, vocab.UNTESTED)
    cores = _number(get("neuron_cores")) if ran else None
    memory = _number(get("peak_memory_bytes"))

    def seconds(column, decimals=1):
        value = _number(get(column))
        return None if value is None else f"{value:.{decimals}f} s"

    run = {
        "verification": get("verification"), "judge": get("judge"),
        "cores": None if cores is None else f"{int(cores)} ({get('parallelism') or 'none'})",
        "wall time": seconds("wall_s"), "load": seconds("load_s"), "compile": seconds("compile_s"),
        "warm generate (32 tokens)": seconds("generate_s", 2), "time to first token": seconds("ttft_s", 3),
        "decode": None if _number(get("decode_tokens_per_s")) is None else f"{get('decode_tokens_per_s'):.1f} tokens/s",
        "peak memory": None if memory is None else f"{memory / 2**30:.2f} GiB",
        "compile cache hit": get("cache_hit"), "retraced": get("retraced"),
    }
    return {
        "model_id": model_id,
        "row": row.to_dict(),
        "result_label": result_label(get("result"), get("stage")),
        "history": _history(history),
        "sdk": {"Neuron SDK": get("neuron_sdk") or "not recorded", "backend": get("backend"),
                "compiler": " ".join(_text(v) for v in (get("compiler"), get("compiler_version")) if _text(v)) or None,
                "neuronx-cc": get("neuronx_cc"), "torch": get("torch"), "torch-neuronx": get("torch_neuronx"),
                get("library") or "library": get("library_version"), "dtype": get("dtype")},
        "run": {k: v for k, v in run.items() if _text(v)},
        "reproduce": reproduce_command(model_id, cores, get("backend")),
        "requirements": _text(get("requirements")),
        "run_py": _text(get("run_py")),
        "packages": _text(get("packages")),
        "sync_command": sync_command(get("compiler") or "neuronx-cc", get("compiler_version")),
        "cause": _text(get("cause")) if failed else "",
        "error": _text(get("error")) if failed else "",
        "traceback": _text(get("traceback")) if failed else "",
    }


# ----------------------------------------------------------------------------------------------
# HTML rendering: every value from the dataset goes through html.escape (or pygments, which escapes).
# ----------------------------------------------------------------------------------------------

_STYLE = """<style>
.nh-table{border-collapse:collapse;font-size:13px}.nh-table th,.nh-table td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
.nh-table caption{text-align:left;font-weight:600;padding:4px 0}
.nh-PASS{color:#0a7d28;font-weight:600}.nh-FAIL{color:#b3261e;font-weight:600}.nh-EXCLUDED{color:#8a6d00}
.nh-untested{color:#777}.nh-UNTESTED{color:#6a4ca0;font-weight:600}.nh-other{color:#b35c00;font-weight:600}
.nh-code{background:#f6f8fa;padding:8px;margin:0;overflow:auto;max-height:320px;font-size:12px;white-space:pre}
.nh-scroll{max-height:320px;overflow:auto;border:1px solid #ddd}.nh-scroll pre{margin:0;font-size:12px}
.nh-bar{display:flex;gap:12px;align-items:center;font-size:12px;margin:2px 0}
.nh-bar a,.nh-copy{font-size:12px}.nh-cmd{background:#f6f8fa;padding:3px 8px;font-size:13px}
.nh-notice{background:#fff4e5;border-left:4px solid #b35c00;padding:4px 8px;margin:2px 0;font-size:13px}
.nh-summary{font-size:14px;margin:4px 0}
.nh-download{color:#0645ad;text-decoration:underline}
.nh-explorer .widget-html-content{line-height:1.4}
.nh-grid{border-top:1px solid #ccc;font-size:12px;align-items:stretch;max-width:100%}
.nh-explorer .nh-grid>.jupyter-widgets{width:auto!important;min-width:0!important;max-width:none!important;margin:0!important;
 height:auto!important;box-sizing:border-box}
.nh-explorer .nh-grid>.nh-cells,.nh-explorer .nh-grid>.nh-cells>.widget-html-content{display:contents}
.nh-explorer .nh-grid>.nh-sortbtn{order:-1}
.nh-c{display:flex;align-items:center;line-height:1.35;white-space:normal;padding:2px 6px;font-size:12px;
 border-bottom:1px solid #eee;max-width:32em}
.nh-explorer .nh-grid button.nh-rowbtn{background:none;box-shadow:none;color:#0645ad;text-decoration:underline;text-align:left;
 padding:2px 6px;line-height:1.35;font-size:12px;border:none;border-bottom:1px solid #eee;border-radius:0;white-space:nowrap;
 overflow:visible;text-overflow:clip}
.nh-explorer .nh-grid button.nh-sortbtn{font-weight:600;font-size:12px;min-height:24px;white-space:normal;text-align:left;
 line-height:1.2;padding:2px 6px;background:#f0f0f0;border:none;border-bottom:1px solid #ccc;border-radius:0;box-shadow:none;
 overflow:visible;text-overflow:clip}
</style>"""
# Only in the widget: where the widget renders, the static fallback beside it is hidden.
_WIDGET_STYLE = "<style>.nh-static{display:none}</style>"


def _format(column: str, value) -> str:
    text = _text(value)
    if not text:
        return ""
    if column in DECIMALS and isinstance(value, float):
        return f"{value:.{DECIMALS[column]}f}"
    if column in THOUSANDS:
        return f"{int(value):,}"
    return text


def _result_class(label: str) -> str:
    kind = result_kind(label)
    return f"nh-{kind}" if kind in RESULT_ORDER else "nh-other"


def cell_html(column: str, value) -> str:
    """One table cell's content as HTML (escaped; results coloured)."""
    text = html.escape(_format(column, value))
    return f'<span class="{_result_class(text)}">{text}</span>' if column == "result" and text else text


def render_table_html(table: pd.DataFrame, caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell_html(c, v)}</td>" for c, v in zip(table.columns, row)) + "</tr>"
                   for row in table.itertuples(index=False))
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'{_STYLE}<table class="nh-table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def summary_text(view: str, summary: dict) -> str:
    """'Selected: 28 models · 10 PASS · 3 FAIL · 3 EXCLUDED · 12 untested · pass rate 77% of 13 tested'."""
    parts = [f"{view}: {summary['models']} models", f"{summary[PASS]} PASS", f"{summary[FAIL]} FAIL",
             f"{summary[EXCLUDED]} EXCLUDED"]
    untested = f"{summary[UNTESTED]} untested"
    if summary["untested_rows"]:
        untested += f" ({summary['untested_rows']} with an UNTESTED row)"
    parts.append(untested)
    if summary["other"]:
        parts.append(f"{summary['other']} other results")
    rate = summary["pass_rate"]
    parts.append(f"pass rate {rate * 100:.0f}% of {summary['tested']} tested" if rate is not None else "none tested")
    return " · ".join(parts)


def render_family_svg(rates: pd.DataFrame, family_label: str = "architecture") -> str:
    """A small horizontal bar chart of pass rates per family (title, labelled axis, % ticks); '' when empty."""
    if rates.empty:
        return ""
    label_w, bar_w, row_h, top = 150, 260, 16, 34
    height = top + row_h * len(rates) + 34
    width = label_w + bar_w + 90
    out = [f'<svg class="nh-family" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">',
           f'<text x="0" y="14" font-size="13" font-weight="600">Pass rate by {html.escape(family_label)}</text>']
    for tick in (0, 50, 100):
        x = label_w + bar_w * tick / 100
        out.append(f'<line x1="{x}" y1="{top - 4}" x2="{x}" y2="{top + row_h * len(rates)}" stroke="#ddd"/>'
                   f'<text x="{x}" y="{top + row_h * len(rates) + 12}" text-anchor="middle">{tick}%</text>')
    for i, r in enumerate(rates.itertuples(index=False)):
        y = top + i * row_h
        name = str(r.family)
        name = name if len(name) <= 22 else name[:21] + "…"
        out.append(f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end">{html.escape(name)}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row_h - 4}" fill="#eee"/>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w * r.rate / 100:.1f}" height="{row_h - 4}" fill="#2e7d32"/>'
                   f'<text x="{label_w + bar_w + 6}" y="{y + 11}">{r.rate:.0f}% ({r.passed}/{r.tested})</text>')
    out.append(f'<text x="{label_w + bar_w / 2}" y="{height - 4}" text-anchor="middle">PASS, % of tested models '
               f'(PASS + FAIL)</text></svg>')
    return "".join(out)


def render_summary_html(view: str, table: pd.DataFrame, *, note: str = "") -> str:
    """The summary a view opens with: counts, pass rate, and (where it helps) pass rate by family."""
    summary = view_summary(table)
    family = "task" if view == "Architectures" else "architecture"
    rates = family_pass_rates(table, family)
    plot = render_family_svg(rates, family) if len(rates) >= 2 and rates["tested"].max() >= 2 else ""
    extra = f' <span style="color:#666;font-size:12px">({html.escape(note)})</span>' if note else ""
    return f'{_STYLE}<div class="nh-summary"><b>{html.escape(summary_text(view, summary))}</b>{extra}</div>{plot}'


def dataset_notices(attrs: dict) -> list[str]:
    """One line per file that ``load_results`` skipped or that holds values outside the vocabulary."""
    lines = [f"{name} holds values outside the neuronhelpers vocabulary ({', '.join(problems)}): its rows are "
             "shown as recorded" for name, problems in attrs.get("off_vocabulary") or []]
    lines += [f"skipped {name}: {reason}" for name, reason in attrs.get("skipped") or []]
    return lines


def render_notices_html(notices: list[str]) -> str:
    return "".join(f'<div class="nh-notice">⚠ {html.escape(n)}</div>' for n in notices)


@lru_cache(maxsize=256)
def highlight_python(code: str) -> str:
    """run.py as highlighted HTML (pygments escapes the code)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=False))


def _pre(text: str) -> str:
    return f'<pre class="nh-code">{html.escape(text)}</pre>'


# Copies the text of the block the button sits in; no dataset string is part of the script.
_COPY_JS = ("var b=this,t=b.closest('.nh-block').querySelector('.nh-copytext').innerText;"
            "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then("
            "function(){b.textContent='copied'},function(){b.textContent='copy refused: select the text'})}"
            "else{b.textContent='no clipboard here: select the text'}")


def _copy_button() -> str:
    return f'<button type="button" class="nh-copy" onclick="{html.escape(_COPY_JS)}">copy</button>'


def download_link(text: str, filename: str, mime: str = "text/plain") -> str:
    """A link that downloads ``text`` as ``filename`` (a data: URL; base64 needs no escaping)."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return (f'<a class="nh-download" download="{html.escape(filename)}" '
            f'href="data:{html.escape(mime)};charset=utf-8;base64,{data}">download {html.escape(filename)}</a>')


def _kv_table(items: dict) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_text(v))}</td></tr>"
                   for k, v in items.items() if _text(v))
    return f'<table class="nh-table">{rows}</table>'


def _reproduce_html(command: str) -> str:
    return (f'<div class="nh-block nh-bar"><b>Reproduce:</b><code class="nh-cmd nh-copytext">{html.escape(command)}'
            f"</code>{_copy_button()}</div>")


def render_detail_html(detail: dict | None, model_id: str = "", *, hint: str = "") -> str:
    if detail is None:
        if not model_id:
            return "<p>Click a model's name in the table (or pick it above) to see how it ran.</p>"
        parts = [_STYLE, f"<h3>{html.escape(model_id)} — <span class=\"nh-untested\">untested</span></h3>",
                 "<p>Not tested yet for these versions.</p>"]
        if hint:
            parts.append(f"<p><b>Hint, not its result:</b> {html.escape(hint)}</p>")
        parts.append(_reproduce_html(reproduce_command(model_id)))
        return "\n".join(parts)
    row = detail["row"]
    label = detail["result_label"]
    verification = _text(row.get("verification"))
    verification = f" ({html.escape(verification)})" if verification else ""
    parts = [
        _STYLE,
        f"<h3>{html.escape(detail['model_id'])} — <span class=\"{_result_class(label)}\">{html.escape(label)}</span>"
        f"{verification}</h3>",
        _reproduce_html(detail["reproduce"]),
    ]
    if detail["cause"]:
        parts.append(f"<p><b>Cause:</b> <code>{html.escape(detail['cause'])}</code></p>")
    if detail["error"]:
        stage = _text(row.get("stage"))
        title = "Reason" if result_kind(label) in (EXCLUDED, vocab.UNTESTED) else "Error"
        parts.append(f"<p><b>{title}</b>{' (' + html.escape(stage) + ')' if stage else ''}:</p>{_pre(detail['error'])}")
    parts += [
        '<div style="display:flex;gap:24px;flex-wrap:wrap">'
        f'<div><h4>Tested on</h4>{_kv_table(detail["sdk"])}</div>'
        f'<div><h4>Run</h4>{_kv_table(detail["run"])}</div></div>',
        f"<h4>History across versions</h4>{render_table_html(detail['history'])}",
    ]
    if detail["requirements"]:
        parts.append(f'<h4>requirements.txt</h4><div class="nh-block"><div class="nh-bar">'
                     f'{download_link(detail["requirements"], "requirements.txt")}{_copy_button()}</div>'
                     f'<pre class="nh-code nh-copytext">{html.escape(detail["requirements"])}</pre></div>')
    else:
        parts.append("<h4>requirements.txt</h4><p>none recorded</p>")
    if detail["run_py"]:
        lines = len(detail["run_py"].splitlines())
        parts.append(f'<h4>run.py</h4><div class="nh-block"><div class="nh-bar">{lines} lines · '
                     f'{download_link(detail["run_py"], "run.py", "text/x-python")}{_copy_button()}</div>'
                     f'<div class="nh-runpy nh-scroll nh-copytext">{highlight_python(detail["run_py"])}</div></div>')
    else:
        parts.append("<h4>run.py</h4><p>none recorded</p>")
    parts.append(f'<h4>Compile cache for this compiler version</h4><div class="nh-block nh-bar">'
                 f'<code class="nh-cmd nh-copytext">{html.escape(detail["sync_command"])}</code>{_copy_button()}</div>')
    if detail["packages"]:
        count = len(detail["packages"].splitlines())
        parts.append(f"<details><summary>All {count} installed packages</summary>{_pre(detail['packages'])}</details>")
    if detail["traceback"]:
        parts.append(f"<details><summary>Full error output</summary>{_pre(detail['traceback'])}</details>")
    return "\n".join(parts)


def render_static_html(view: str, table: pd.DataFrame) -> str:
    """What a notebook shows where the widget cannot render (an HTML export without its widget renderer): why,
    and a static copy of the view. The widget's own style hides it wherever the widget renders."""
    return (f'{_STYLE}<div class="nh-static"><p><b>The interactive explorer did not render here.</b> It needs a running '
            "Jupyter kernel with ipywidgets (JupyterLab, or <code>neuronhelpers app</code>); an HTML export shows it "
            "only when the widget state was saved and the page can load the widget renderer from the internet. "
            f"A static copy of the {html.escape(view)} view follows.</p>"
            f"{render_summary_html(view, table)}{render_table_html(table)}</div>")


# ----------------------------------------------------------------------------------------------
# The widget
# ----------------------------------------------------------------------------------------------


def _track(column: str) -> str:
    """The grid column width: notes and causes take the room left; numbers wrap their header; text fits."""
    if column in ("note", "cause"):
        return "minmax(14em, 1fr)"
    if column in ("rank", "downloads", *[m[0] for m in MEASURES]):
        return "min-content"
    return "max-content"


class Explorer:
    """An ipywidgets catalog browser over a results DataFrame (``load_results``) and Hub rankings.

    The table is a grid of widgets: a column header is a button that sorts by it (again: reverses), a model's
    name is a button that opens its detail. ``page_size`` rows at a time.
    """

    def __init__(self, df: pd.DataFrame, rankings: pd.DataFrame | None = None, *, page_size: int = 30):
        import ipywidgets as w
        from ipywidgets.widgets.widget_string import HTMLStyle

        from neuronhelpers.models.rankings import load_rankings, ranking_label

        self._w = w
        self.notices = dataset_notices(df.attrs)
        self.df = normalise_results(df).copy(deep=False)
        self.df.attrs = {}  # pandas copies attrs into every derived frame: the notices are read, drop them
        self.rankings = rankings if rankings is not None else load_rankings()
        self.ranking_label = ranking_label(self.rankings)
        self.page_size = page_size
        self.sort_column, self.sort_ascending, self.page = None, True, 0
        self._rows_cache: dict = {}
        self._tables: dict = {}
        self._quiet = False
        compilers = versions_available(self.df, "compiler_version")
        compiler_of = self.df[["compiler_version", "compiler"]].dropna(subset=["compiler_version"]) \
            .drop_duplicates("compiler_version").set_index("compiler_version")["compiler"].to_dict()
        pair = newest_pair(self.df, library=DEFAULT_LIBRARY) or newest_pair(self.df)
        wide = {"description_width": "initial"}
        self.view = w.ToggleButtons(options=list(VIEWS), value="Selected", description="View")
        self.name = w.Text(placeholder="filter by name", description="Model")
        self.task = w.Dropdown(options=self._task_options("Selected"), value="", description="Task")
        self.compiler = w.Dropdown(options=[(f"{compiler_of.get(v) or ''} {v}".strip(), v) for v in compilers],
                                   value=pair[0] if pair else (compilers[0] if compilers else None),
                                   description="Compiler", style=wide)
        self.library = w.Dropdown(description=DEFAULT_LIBRARY, style=wide, layout=w.Layout(width="auto"))
        self._set_library_options(DEFAULT_LIBRARY, pair[1] if pair else None)
        self.notice_html = w.HTML(value=render_notices_html(self.notices))
        self.summary_html = w.HTML()
        self.grid = w.GridBox(layout=w.Layout(grid_template_columns="auto", overflow="auto", max_width="100%"))
        self.grid.add_class("nh-grid")
        self.prev_page = w.Button(description="◀ previous", layout=w.Layout(width="auto"))
        self.next_page = w.Button(description="next ▶", layout=w.Layout(width="auto"))
        self.page_label = w.HTML()
        self.pager = w.HBox([self.prev_page, self.page_label, self.next_page])
        self.prev_page.on_click(lambda _b: self._turn(-1))
        self.next_page.on_click(lambda _b: self._turn(1))
        self.model = w.Dropdown(options=[], description="Details")
        self.detail_html = w.HTML(value=render_detail_html(None))
        self._headers: dict[str, w.Button] = {}
        self._rows_pool: list[tuple] = []
        self._page_models: list[str] = []
        # Shared layouts and styles (one layout per row): fewer widget models for the page to build.
        self._cell_layout, self._cell_style, self._button_style = w.Layout(), HTMLStyle(), w.ButtonStyle()
        self.view.observe(self._on_view, names="value")
        self.task.observe(self._on_task, names="value")
        for control in (self.name, self.compiler, self.library):
            control.observe(self._refresh, names="value")
        self.model.observe(self._show_detail, names="value")
        self.widget = w.VBox([
            w.HTML(value=_STYLE + _WIDGET_STYLE),
            w.HBox([self.view]),
            w.HBox([self.name, self.task]),
            w.HBox([self.compiler, self.library]),
            self.notice_html,
            self.summary_html,
            self.grid,
            self.pager,
            self.model,
            self.detail_html,
        ])
        self.widget.add_class("nh-explorer")
        self._refresh()

    # -- controls ----------------------------------------------------------------------------

    @staticmethod
    def _task_options(view: str) -> list:
        tasks = [(t, t) for t in TASKS]
        # Trending and Downloads show one task at a time, as the published views do.
        return tasks if view in RANKED_VIEWS else [("all tasks", "")] + tasks

    def _library_for_task(self) -> str:
        return TASK_LIBRARY.get(self.task.value, DEFAULT_LIBRARY)

    def _set_library_options(self, library: str, prefer: str | None = None) -> None:
        versions = versions_available(self.df, "library_version", library=library)
        keep = prefer if prefer in versions else (self.library.value if self.library.value in versions else None)
        self.library.description = library
        self.library.options = versions
        self.library.value = keep or (versions[0] if versions else None)

    def _on_view(self, _change=None):
        self._quiet = True
        try:
            options = self._task_options(self.view.value)
            value = self.task.value if self.task.value in [v for _, v in options] else options[0][1]
            self.task.options = options
            self.task.value = value
            self._set_library_options(self._library_for_task())
        finally:
            self._quiet = False
        self.sort_column, self.sort_ascending = None, True
        self._refresh()

    def _on_task(self, _change=None):
        if self._quiet:
            return
        self._quiet = True
        try:
            self._set_library_options(self._library_for_task())
        finally:
            self._quiet = False
        self._refresh()

    def _sort_by(self, column: str):
        if self.sort_column == column:
            self.sort_ascending = not self.sort_ascending
        else:
            self.sort_column, self.sort_ascending = column, column != "downloads"  # most downloaded first
        self.page = 0
        self._render(self.table)

    def _turn(self, step: int):
        pages = max(1, -(-len(self.table) // self.page_size))
        self.page = min(max(0, self.page + step), pages - 1)
        self._render(self.table)

    def open_model(self, model_id: str):
        """Show a model's detail, as clicking its name does."""
        if model_id not in [value for _, value in self.model.options]:
            self.model.options = list(self.model.options) + [(model_id, model_id)]
        self.model.value = model_id

    # -- data ---------------------------------------------------------------------------------

    def _rows(self) -> pd.DataFrame:
        library = self._library_for_task()
        key = (self.compiler.value, self.library.value, library)
        if key not in self._rows_cache:
            if len(self._rows_cache) > 16:
                self._rows_cache.clear()
            self._rows_cache[key] = rows_for_versions(self.df, *key, columns=VIEW_COLUMNS)
        return self._rows_cache[key]

    def current_table(self) -> pd.DataFrame:
        """The view's table for the chosen task and versions (kept: typing a name only filters it again)."""
        key = (self.view.value, self.task.value, self.compiler.value, self.library.value, self._library_for_task())
        if key not in self._tables:
            if len(self._tables) > 32:
                self._tables.clear()
            self._tables[key] = view_table(self.view.value, self.df, self.rankings, task=self.task.value or None,
                                           compiler_version=self.compiler.value, library_version=self.library.value,
                                           library=self._library_for_task(), rows=self._rows())
        return filter_by_name(self._tables[key], self.name.value)

    def _refresh(self, _change=None):
        if self._quiet:
            return
        table = self.current_table()
        self.unsorted = table
        self.page = 0
        # The picker is updated before the table, so a model that shows in the table can be picked at once.
        models = list(dict.fromkeys(table["model"]))
        keep = self.model.value if self.model.value in models else None
        self.model.options = [("pick a model", "")] + [(m, m) for m in models]
        self.model.value = keep or ""
        self._show_detail()
        if self.sort_column not in table.columns:
            self.sort_column = None
        self._render(table)
        note = self.ranking_label if self.view.value in RANKED_VIEWS else ""
        self.summary_html.value = render_summary_html(self.view.value, table, note=note)  # last: the page is ready

    # -- the grid -----------------------------------------------------------------------------

    def _header(self, column: str):
        if column not in self._headers:
            button = self._w.Button(description=column, tooltip=f"sort by {column}", layout=self._cell_layout,
                                    style=self._button_style)
            button.add_class("nh-sortbtn")
            button.on_click(lambda _b, c=column: self._sort_by(c))
            self._headers[column] = button
        return self._headers[column]

    def _row_widgets(self, index: int) -> tuple:
        """Row ``index`` of the pool: the cells before the name, the name button, the cells after it. The three
        share the row's layout (which hides the row when the page has fewer rows); the cells' HTML is laid out
        in the grid's own columns (``display: contents``), so a row costs three widgets, not one per column."""
        w = self._w
        while len(self._rows_pool) <= index:
            i = len(self._rows_pool)
            layout = w.Layout()
            before, after = (w.HTML(layout=layout, style=self._cell_style) for _ in range(2))
            before.add_class("nh-cells")
            after.add_class("nh-cells")
            button = w.Button(layout=layout, style=self._button_style)
            button.add_class("nh-rowbtn")
            button.on_click(lambda _b, i=i: self._open_row(i))
            self._rows_pool.append((before, button, after, layout))
        return self._rows_pool[index]

    def name_buttons(self) -> list:
        """The name buttons of the rows shown, top to bottom (clicking one opens that model's detail)."""
        return [button for _before, button, _after, _layout in self._rows_pool[:len(self._page_models)]]

    def _open_row(self, index: int):
        if index < len(self._page_models):
            self.open_model(self._page_models[index])

    @staticmethod
    def _cells_html(columns, values) -> str:
        return "".join(f'<div class="nh-c nh-c-{i}">{cell_html(c, v)}</div>' for i, (c, v) in enumerate(zip(columns, values)))

    def _render(self, table: pd.DataFrame):
        """Put one page of the (sorted) table into the grid; only changed values are sent to the page.

        The grid keeps every row it has built (rows the page does not fill are hidden) and its column headers
        come last among its children (shown first by CSS order), so typing a filter, sorting or switching views
        changes values and visibility, not the page's widgets.
        """
        table = sort_table(table, self.sort_column, self.sort_ascending)
        self.table = table
        columns = list(table.columns)
        start = self.page * self.page_size
        page = table.iloc[start:start + self.page_size]
        model_at = columns.index("model")
        self._page_models = list(page["model"])
        rows = list(page.itertuples(index=False))
        children = []
        for i in range(max(len(rows), len(self._rows_pool))):
            before, button, after, layout = self._row_widgets(i)
            shown = i < len(rows)
            layout.display = None if shown else "none"
            if shown:
                values = rows[i]
                before.value = self._cells_html(columns[:model_at], values[:model_at])
                button.description = values[model_at]
                button.tooltip = f"details of {values[model_at]}"
                after.value = self._cells_html(columns[model_at + 1:], values[model_at + 1:])
            children += [before, button, after]
        for column in columns:
            header = self._header(column)
            arrow = (" ▲" if self.sort_ascending else " ▼") if column == self.sort_column else ""
            header.description = column + arrow
            children.append(header)
        self.grid.layout.grid_template_columns = " ".join(_track(c) for c in columns)
        self.grid.children = tuple(children)
        pages = max(1, -(-len(table) // self.page_size))
        self.pager.layout.display = "flex" if pages > 1 else "none"
        end = min(start + self.page_size, len(table))
        self.page_label.value = f"rows {start + 1}–{end} of {len(table)}" if len(table) else "no models"
        self.prev_page.disabled, self.next_page.disabled = self.page == 0, self.page >= pages - 1

    def page_text(self) -> str:
        """The grid as text (still escaped), the header line first, then one line per shown row (for tests)."""
        def cells(value):
            return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r'<div class="nh-c[^"]*">(.*?)</div>', value)]

        lines = [" | ".join(self._headers[c].description for c in self.table.columns)]
        for before, button, after, _layout in self._rows_pool[:len(self._page_models)]:
            lines.append(" | ".join([*cells(before.value), button.description, *cells(after.value)]))
        return "\n".join(lines)

    # -- detail -------------------------------------------------------------------------------

    def _show_detail(self, _change=None):
        model_id = self.model.value
        if not model_id:
            self.detail_html.value = render_detail_html(None)
            return
        detail = model_detail(self.df, model_id, compiler_version=self.compiler.value, library_version=self.library.value)
        hint = ""
        if detail is None and hasattr(self, "unsorted"):
            notes = self.unsorted.loc[self.unsorted["model"] == model_id, "note"]
            hint = next((n for n in notes if "architecture twin" in n), "")
        self.detail_html.value = render_detail_html(detail, model_id, hint=hint)

    def _ipython_display_(self):
        from IPython.display import HTML, display

        display(self.widget)
        # Shown only where the widget did not render (its style hides it): says why, with a static copy.
        display(HTML(render_static_html(self.view.value, self.unsorted)))


def explore(path_or_df, rankings: pd.DataFrame | None = None) -> Explorer:
    """Open the explorer on a dataset folder, an hf://datasets/... path, or a DataFrame.

    Files that were skipped or hold values outside the vocabulary are named once each in the explorer.
    """
    import warnings

    from neuronhelpers.store.dataset import DatasetWarning, load_results

    if isinstance(path_or_df, pd.DataFrame):
        df = path_or_df
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DatasetWarning)  # the explorer names those files itself
            df = load_results(path_or_df)
    return Explorer(df, rankings)
