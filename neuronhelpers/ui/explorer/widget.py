"""The ipywidgets explorer: it only wires the pure functions of ``frames``, ``summaries`` and ``detail``.

The table is a grid of widgets: a column header is a button that sorts by it (again: reverses), a model's name
is a button that opens its detail; ``page_size`` rows at a time. ``explore`` opens it on a folder, an
hf://datasets/... path or a DataFrame.
"""

from __future__ import annotations

import re

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.vocab import LIBRARY_FOR_TASK
from neuronhelpers.ui.explorer.detail import model_detail, render_detail_html
from neuronhelpers.ui.explorer.frames import (
    DEFAULT_LIBRARY,
    MEASURES,
    RANKED_VIEWS,
    TASKS,
    VIEW_COLUMNS,
    VIEWS,
    filter_by_evidence,
    filter_by_name,
    newest_pair,
    normalise_results,
    rows_for_versions,
    sort_table,
    versions_available,
    view_table,
)
from neuronhelpers.ui.explorer.markup import STYLE, WIDGET_STYLE, cell_html, dataset_notices, render_notices_html
from neuronhelpers.ui.explorer.summaries import example_notices, render_static_html, render_summary_html, trainium_line


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

        self._w = w
        self._load(df, rankings, page_size)
        self._build_pickers()
        self._build_grid()
        self._build_detail()
        self._wire()
        self.widget = self._layout()
        self._refresh()

    # -- building -----------------------------------------------------------------------------

    def _load(self, df: pd.DataFrame, rankings: pd.DataFrame | None, page_size: int) -> None:
        """The data and the state: rows, rankings, notices, sorting, paging and the caches."""
        from neuronhelpers.models.rankings import load_rankings, ranking_label

        self.notices = dataset_notices(df.attrs) + example_notices(df)
        self.df = normalise_results(df).copy(deep=False)
        self.df.attrs = {}  # pandas copies attrs into every derived frame: the notices are read, drop them
        self.rankings = rankings if rankings is not None else load_rankings()
        self.ranking_label = ranking_label(self.rankings)
        self.trainium_line = trainium_line(self.df)
        self.page_size = page_size
        self.sort_column, self.sort_ascending, self.page = None, True, 0
        self._rows_cache: dict = {}
        self._tables: dict = {}
        self._quiet = False
        self.unsorted = None  # the view's table before sorting (set by each refresh)

    def _build_pickers(self) -> None:
        """View, name filter, task, compiler version and library version (the newest pair by default)."""
        w = self._w
        compilers = versions_available(self.df, "compiler_version")
        compiler_of = self.df[["compiler_version", "compiler"]].dropna(subset=["compiler_version"]) \
            .drop_duplicates("compiler_version").set_index("compiler_version")["compiler"].to_dict()
        pair = newest_pair(self.df, library=DEFAULT_LIBRARY) or newest_pair(self.df)
        wide = {"description_width": "initial"}
        self.view = w.ToggleButtons(options=list(VIEWS), value="Selected", description="View")
        self.name = w.Text(placeholder="filter by name", description="Model")
        self.task = w.Dropdown(options=self._task_options("Selected"), value="", description="Task")
        self.evidence = w.Dropdown(options=[("any", "")] + [(level, level) for level in vocab.EVIDENCE], value="",
                                   description="Evidence")
        self.compiler = w.Dropdown(options=[(f"{compiler_of.get(v) or ''} {v}".strip(), v) for v in compilers],
                                   value=pair[0] if pair else (compilers[0] if compilers else None),
                                   description="Compiler", style=wide)
        self.library = w.Dropdown(description=DEFAULT_LIBRARY, style=wide, layout=w.Layout(width="auto"))
        self._set_library_options(DEFAULT_LIBRARY, pair[1] if pair else None)

    def _build_grid(self) -> None:
        """The notices, the summary, the grid (its rows are pooled) and the pager."""
        from ipywidgets.widgets.widget_string import HTMLStyle

        w = self._w
        self.notice_html = w.HTML(value=render_notices_html(self.notices))
        self.summary_html = w.HTML()
        self.grid = w.GridBox(layout=w.Layout(grid_template_columns="auto", overflow="auto", max_width="100%"))
        self.grid.add_class("nh-grid")
        self.prev_page = w.Button(description="◀ previous", layout=w.Layout(width="auto"))
        self.next_page = w.Button(description="next ▶", layout=w.Layout(width="auto"))
        self.page_label = w.HTML()
        self.pager = w.HBox([self.prev_page, self.page_label, self.next_page])
        self._headers: dict[str, w.Button] = {}
        self._rows_pool: list[tuple] = []
        self._page_models: list[str] = []
        # Shared layouts and styles (one layout per row): fewer widget models for the page to build.
        self._cell_layout, self._cell_style, self._button_style = w.Layout(), HTMLStyle(), w.ButtonStyle()

    def _build_detail(self) -> None:
        self.model = self._w.Dropdown(options=[], description="Details")
        self.detail_html = self._w.HTML(value=render_detail_html(None))

    def _wire(self) -> None:
        self.prev_page.on_click(lambda _b: self._turn(-1))
        self.next_page.on_click(lambda _b: self._turn(1))
        self.view.observe(self._on_view, names="value")
        self.task.observe(self._on_task, names="value")
        for control in (self.name, self.evidence, self.compiler, self.library):
            control.observe(self._refresh, names="value")
        self.model.observe(self._show_detail, names="value")

    def _layout(self):
        w = self._w
        widget = w.VBox([
            w.HTML(value=STYLE + WIDGET_STYLE),
            w.HBox([self.view]),
            w.HBox([self.name, self.task, self.evidence]),
            w.HBox([self.compiler, self.library]),
            self.notice_html,
            self.summary_html,
            self.grid,
            self.pager,
            self.model,
            self.detail_html,
        ])
        widget.add_class("nh-explorer")
        return widget

    # -- controls ----------------------------------------------------------------------------

    @staticmethod
    def _task_options(view: str) -> list:
        tasks = [(t, t) for t in TASKS]
        # Trending and Downloads show one task at a time, as the published views do.
        return tasks if view in RANKED_VIEWS else [("all tasks", "")] + tasks

    def _library_for_task(self) -> str:
        return LIBRARY_FOR_TASK.get(self.task.value, DEFAULT_LIBRARY)

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
        return filter_by_evidence(filter_by_name(self._tables[key], self.name.value), self.evidence.value)

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
        note = (self.ranking_label if self.view.value in RANKED_VIEWS
                else self.trainium_line if self.view.value == "Architectures" else "")
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
        return "".join(f'<div class="nh-c nh-c-{i}">{cell_html(c, v)}</div>'
                       for i, (c, v) in enumerate(zip(columns, values, strict=False)))

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
        self._page_models = list(page["model"])
        children = self._fill_rows(columns, list(page.itertuples(index=False)))
        for column in columns:
            header = self._header(column)
            arrow = (" ▲" if self.sort_ascending else " ▼") if column == self.sort_column else ""
            header.description = column + arrow
            children.append(header)
        self.grid.layout.grid_template_columns = " ".join(_track(c) for c in columns)
        self.grid.children = tuple(children)
        self._show_pager(start, len(table))

    def _fill_rows(self, columns: list[str], rows: list) -> list:
        """The pooled row widgets with this page's values (rows past the page hidden), in grid order."""
        model_at = columns.index("model")
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
        return children

    def _show_pager(self, start: int, total: int) -> None:
        pages = max(1, -(-total // self.page_size))
        self.pager.layout.display = "flex" if pages > 1 else "none"
        end = min(start + self.page_size, total)
        self.page_label.value = f"rows {start + 1}–{end} of {total}" if total else "no models"
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
        detail = model_detail(self.df, model_id, compiler_version=self.compiler.value,
                              library_version=self.library.value)
        hint = ""
        if detail is None and self.unsorted is not None:
            notes = self.unsorted.loc[self.unsorted["model"] == model_id, "note"]
            hint = next((n for n in notes if vocab.ANSWER_ARCHITECTURE_TWIN in n or vocab.ANSWER_MODEL_TWIN in n), "")
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
