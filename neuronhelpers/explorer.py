"""The catalog browser: pure functions over DataFrames, and an ipywidgets UI that only wires them.

Views: Selected (the curated list), Trending and Downloads (the Hub's rankings, one task at a time,
tested or not), Architectures (the tiny twins, one per architecture). Filters: a name substring, a
task, the compiler version and the library version (newest by default). Picking a model shows its
detail: history across versions, SDK and packages, requirements.txt, run.py, the compile-cache sync
command and the error when it failed.

Every string from a dataset is untrusted: it is escaped before it reaches HTML.
"""

from __future__ import annotations

import html
from functools import lru_cache

import pandas as pd

from .cache import sync_command
from .selected import SELECTED
from .vocab import EXCLUDED

VIEWS = ("Selected", "Trending", "Downloads", "Architectures")
TASKS = ("text-generation", "image-text-to-text")
TABLE_COLUMNS = ["model", "result", "cores", "wall time (s)", "peak memory (GiB)", "failed at", "note"]
UNTESTED = "untested"


def _version_key(value: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(str(value).split("+")[0]), str(value))
    except InvalidVersion:
        return (0, None, str(value))


def versions_available(df: pd.DataFrame, column: str) -> list[str]:
    """Distinct versions in a column, newest first."""
    values = [v for v in df[column].dropna().unique()] if column in df else []
    return sorted(values, key=_version_key, reverse=True)


def rows_for_versions(df: pd.DataFrame, compiler_version: str | None, library_version: str | None) -> pd.DataFrame:
    """The rows of one (compiler version, library version) pair; the newest row per model."""
    out = df
    if compiler_version:
        out = out[out.compiler_version == compiler_version]
    if library_version:
        out = out[out.library_version == library_version]
    return out.sort_values("timestamp").drop_duplicates("model_id", keep="last")


def _table_from(ids: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Join a list of model ids (with optional 'note') to their rows; untested ids say so."""
    merged = ids.merge(rows, on="model_id", how="left", suffixes=("", "_row"))
    result = merged["result"].fillna(UNTESTED)
    note = merged["note"].fillna("") if "note" in merged else pd.Series("", index=merged.index)
    excluded = result == EXCLUDED
    note = note.where(~excluded, merged["error"].fillna(""))
    return pd.DataFrame({
        "model": merged["model_id"],
        "result": result,
        "cores": merged["neuron_cores"].astype("Int64"),
        "wall time (s)": merged["wall_s"].round(1),
        "peak memory (GiB)": (merged["peak_memory_bytes"] / 2**30).round(2),
        "failed at": merged["stage"].fillna(""),
        "note": note,
    })


def _twin_note(model_type: str, twin_results: dict) -> str:
    """For an untested real model: how its architecture's tiny twin did (a hint, never its result)."""
    result = twin_results.get(f"tiny/{model_type}")
    return f"architecture twin tiny/{model_type}: {result}" if result else ""


def view_table(view: str, df: pd.DataFrame, rankings: pd.DataFrame | None = None, *, task: str | None = None,
               name: str = "", compiler_version: str | None = None, library_version: str | None = None) -> pd.DataFrame:
    """The table a view shows: one row per model, filtered by task and a case-insensitive name substring."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    rows = rows_for_versions(df, compiler_version, library_version)
    if view == "Selected":
        twin_results = dict(zip(rows.model_id, rows.result))
        ids = pd.DataFrame([{"model_id": e.model_id, "task": e.task, "note": e.excluded or _twin_note(e.model_type, twin_results)}
                            for e in SELECTED])
        table = _table_from(ids.drop(columns="task"), rows)
        # Deliberate exclusions are part of the list, whether or not a row recorded them.
        excluded = [bool(e.excluded) for e in SELECTED]
        table.loc[excluded, "result"] = EXCLUDED
        tasks = ids["task"]
    elif view in ("Trending", "Downloads"):
        ranked = rankings if rankings is not None else pd.DataFrame(columns=["view", "task", "rank", "model_id"])
        ranked = ranked[ranked["view"] == view.lower()].sort_values(["task", "rank"])
        table = _table_from(ranked[["model_id"]].reset_index(drop=True), rows)
        tasks = ranked["task"].reset_index(drop=True)
    else:
        twins = rows[rows.twin_of.notna()].sort_values("model_id")
        ids = pd.DataFrame({"model_id": twins["model_id"], "note": "twin of " + twins["twin_of"]})
        table = _table_from(ids.reset_index(drop=True), rows)
        tasks = twins["task"].reset_index(drop=True)
    keep = pd.Series(True, index=table.index)
    if task:
        keep &= tasks.reindex(table.index).eq(task).values
    if name:
        keep &= table["model"].str.contains(name, case=False, regex=False)
    return table[keep].reset_index(drop=True)


def _text(value) -> str:
    """A dataset cell as text: missing values (None, NaN, NA) become the empty string."""
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def model_detail(df: pd.DataFrame, model_id: str, *, compiler_version: str | None = None,
                 library_version: str | None = None) -> dict | None:
    """Everything the detail pane shows for one model (None when the dataset has no row for it)."""
    history = df[df.model_id == model_id].sort_values("timestamp")
    if history.empty:
        return None
    chosen = rows_for_versions(history, compiler_version, library_version)
    row = (chosen if not chosen.empty else history).iloc[-1]
    hist = history[["compiler", "compiler_version", "library_version", "neuron_cores", "result", "stage", "wall_s"]]
    return {
        "model_id": model_id,
        "row": row.to_dict(),
        "history": hist.drop_duplicates(["compiler_version", "library_version"], keep="last").reset_index(drop=True),
        "sdk": {k: row.get(k) for k in ("backend", "compiler", "compiler_version", "neuronx_cc", "torch", "torch_neuronx",
                                        "library", "library_version")},
        "requirements": _text(row.get("requirements")),
        "run_py": _text(row.get("run_py")),
        "packages": _text(row.get("packages")),
        "sync_command": sync_command(row.get("compiler") or "neuronx-cc", row.get("compiler_version")),
        "error": _text(row.get("error")) if row.get("result") != "PASS" else "",
        "traceback": _text(row.get("traceback")) if row.get("result") != "PASS" else "",
    }


# ----------------------------------------------------------------------------------------------
# HTML rendering: every value from the dataset goes through html.escape (or pygments, which escapes).
# ----------------------------------------------------------------------------------------------

_STYLE = """<style>
.nh-table{border-collapse:collapse;font-size:13px}.nh-table th,.nh-table td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
.nh-PASS{color:#0a7d28;font-weight:600}.nh-FAIL{color:#b3261e;font-weight:600}.nh-EXCLUDED{color:#8a6d00}.nh-untested{color:#777}
.nh-code{background:#f6f8fa;padding:8px;overflow:auto;max-height:420px;font-size:12px}
</style>"""


def render_table_html(table: pd.DataFrame, caption: str = "") -> str:
    def cell(column, value):
        text = _text(value)
        klass = f' class="nh-{html.escape(text)}"' if column == "result" and text.isidentifier() else ""
        return f"<td{klass}>{html.escape(text)}</td>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(cell(c, v) for c, v in zip(table.columns, row)) + "</tr>"
                   for row in table.itertuples(index=False))
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'{_STYLE}<table class="nh-table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


@lru_cache(maxsize=256)
def highlight_python(code: str) -> str:
    """run.py as highlighted HTML (pygments escapes the code)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=False))


def _pre(text: str) -> str:
    return f'<pre class="nh-code">{html.escape(text)}</pre>'


def render_detail_html(detail: dict | None, model_id: str = "") -> str:
    if detail is None:
        return f"<p><b>{html.escape(model_id)}</b>: not tested yet for these versions.</p>" if model_id else \
            "<p>Pick a model to see how it ran.</p>"
    row = detail["row"]
    sdk = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                  for k, v in detail["sdk"].items() if v is not None and v == v)
    history = render_table_html(detail["history"].astype(object).where(detail["history"].notna(), ""))
    parts = [
        _STYLE,
        f"<h3>{html.escape(detail['model_id'])} — <span class=\"nh-{html.escape(str(row.get('result')))}\">"
        f"{html.escape(str(row.get('result')))}</span></h3>",
    ]
    if detail["error"]:
        parts.append(f"<p><b>Error</b> ({html.escape(str(row.get('stage')))}):</p>{_pre(str(detail['error']))}")
    parts += [
        f'<h4>Tested on</h4><table class="nh-table">{sdk}</table>',
        f"<h4>History across versions</h4>{history}",
        f"<h4>requirements.txt</h4>{_pre(detail['requirements'])}",
        f"<h4>run.py</h4><div class=\"nh-runpy\">{highlight_python(detail['run_py'])}</div>" if detail["run_py"]
        else "<h4>run.py</h4><p>none recorded</p>",
        f"<h4>Compile cache for this compiler version</h4>{_pre(detail['sync_command'])}",
    ]
    if detail["packages"]:
        count = len(detail["packages"].splitlines())
        parts.append(f"<details><summary>All {count} installed packages</summary>{_pre(detail['packages'])}</details>")
    if detail["traceback"]:
        parts.append(f"<details><summary>Full error output</summary>{_pre(str(detail['traceback']))}</details>")
    return "\n".join(parts)


# ----------------------------------------------------------------------------------------------
# The widget
# ----------------------------------------------------------------------------------------------


class Explorer:
    """An ipywidgets catalog browser over a results DataFrame (``load_results``) and Hub rankings."""

    def __init__(self, df: pd.DataFrame, rankings: pd.DataFrame | None = None):
        import ipywidgets as w

        from .hub import load_rankings, ranking_label

        self.df = df
        self.rankings = rankings if rankings is not None else load_rankings()
        compilers = versions_available(df, "compiler_version")
        libraries = versions_available(df, "library_version")
        self.view = w.ToggleButtons(options=list(VIEWS), value="Selected", description="View")
        self.name = w.Text(placeholder="filter by name", description="Model")
        self.task = w.Dropdown(options=[("all tasks", "")] + [(t, t) for t in TASKS], value="", description="Task")
        self.compiler = w.Dropdown(options=compilers, value=compilers[0] if compilers else None, description="Compiler")
        self.library = w.Dropdown(options=libraries, value=libraries[0] if libraries else None, description="transformers")
        self.model = w.Dropdown(options=[], description="Details")
        self.table_html = w.HTML()
        self.detail_html = w.HTML(value=render_detail_html(None))
        self.status = w.HTML(value=html.escape(ranking_label(self.rankings)))
        for control in (self.view, self.name, self.task, self.compiler, self.library):
            control.observe(self._refresh, names="value")
        self.model.observe(self._show_detail, names="value")
        self.widget = w.VBox([
            w.HBox([self.view]),
            w.HBox([self.name, self.task]),
            w.HBox([self.compiler, self.library]),
            self.status,
            self.table_html,
            self.model,
            self.detail_html,
        ])
        self._refresh()

    def current_table(self) -> pd.DataFrame:
        return view_table(self.view.value, self.df, self.rankings, task=self.task.value or None, name=self.name.value,
                          compiler_version=self.compiler.value, library_version=self.library.value)

    def _refresh(self, _change=None):
        table = self.current_table()
        # The picker is updated before the table, so a model that shows in the table can be picked at once.
        models = list(dict.fromkeys(table["model"]))
        keep = self.model.value if self.model.value in models else None
        self.model.options = [("pick a model", "")] + [(m, m) for m in models]
        self.model.value = keep or ""
        self._show_detail()
        self.table_html.value = render_table_html(table, f"{self.view.value}: {len(table)} models")

    def _show_detail(self, _change=None):
        model_id = self.model.value
        if not model_id:
            self.detail_html.value = render_detail_html(None)
            return
        detail = model_detail(self.df, model_id, compiler_version=self.compiler.value, library_version=self.library.value)
        self.detail_html.value = render_detail_html(detail, model_id)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def explore(path_or_df, rankings: pd.DataFrame | None = None) -> Explorer:
    """Open the explorer on a dataset folder, an hf://datasets/... path, or a DataFrame."""
    from .dataset import load_results

    df = path_or_df if isinstance(path_or_df, pd.DataFrame) else load_results(path_or_df)
    return Explorer(df, rankings)
