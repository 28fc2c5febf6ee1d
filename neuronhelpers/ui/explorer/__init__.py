"""The catalog browser: pure functions over DataFrames, and an ipywidgets UI that only wires them. Taught in
notebook 01 (``explore(df)``); the Voila app (``neuronhelpers app``, ``ui/app/explorer.ipynb``) is the same widget.

Views: Selected (the curated list), Trending and Downloads (the Hub's rankings, one task at a time,
tested or not), Architectures (every architecture twin: PASS, FAIL or UNTESTED, with its stage and
cause). Each view opens with a summary (PASS / FAIL / EXCLUDED / untested counts, the pass rate and,
where it helps, a pass-rate-by-family plot). Filters: a name substring, a task (every task of the
vocabulary; the library picker follows the task's library), the compiler version and the library
version (the newest pair by default). The table sorts by any column (click its header) and a model's
name opens its detail: the reproduce command, the Neuron SDK and component versions, timings, the
cause and error, history across versions, requirements.txt and run.py (bounded, with download and
copy), and the compile-cache sync command.

"untested" (``NO_ROW``) means no row for the model at these versions; a row whose result is UNTESTED (no verdict
could be reached, for a reason that is not the model's) shows as "UNTESTED (<reason>)". Neither counts
as a FAIL. An untested Hub model shows its architecture twin's verdict as a hint, never as its result.

Rows from other tools (only the published columns) are shown: missing columns are null, the compiler
version falls back to ``neuronx_cc``, and a result outside the vocabulary is kept as it is; the files
holding such values are named once each in a notice.

Every string from a dataset is untrusted: it is escaped before it reaches HTML.

Modules:

    frames      rows normalised, the rows of one version pair (newest per model), each view's table, the name
                filter, sorting (pure pandas)
    summaries   a view's counts and pass rate, its pass-rate-by-family chart (the numbers and colour of
                ``plots.pass_rate_by_family``), the static copy shown where the widget cannot render
    detail      one model's detail (``model_detail``) and the detail pane's HTML
    markup      the HTML every pane shares: style sheet, escaped cells and tables, copy and download links
    widget      the ``Explorer`` widget and ``explore``
"""

from neuronhelpers.ui.explorer.detail import highlight_python, model_detail, render_detail_html, reproduce_command
from neuronhelpers.ui.explorer.frames import (
                                              DEFAULT_LIBRARY,
                                              MEASURES,
                                              NO_ROW,
                                              RANKED_VIEWS,
                                              RESULT_ORDER,
                                              TABLE_COLUMNS,
                                              TASKS,
                                              VIEW_COLUMNS,
                                              VIEWS,
                                              TwinVerdicts,
                                              filter_by_name,
                                              newest_pair,
                                              normalise_results,
                                              result_kind,
                                              result_label,
                                              rows_for_versions,
                                              sort_table,
                                              versions_available,
                                              view_table,
)
from neuronhelpers.ui.explorer.markup import (
                                              cell_html,
                                              dataset_notices,
                                              download_link,
                                              render_notices_html,
                                              render_table_html,
)
from neuronhelpers.ui.explorer.summaries import (
                                              PASS_COULD_NOT_FAIL,
                                              family_pass_rates,
                                              render_family_svg,
                                              render_static_html,
                                              render_summary_html,
                                              summary_text,
                                              view_summary,
)
from neuronhelpers.ui.explorer.widget import Explorer, explore

__all__ = [
    "DEFAULT_LIBRARY", "MEASURES", "NO_ROW", "PASS_COULD_NOT_FAIL", "RANKED_VIEWS", "RESULT_ORDER", "TABLE_COLUMNS",
    "TASKS", "VIEW_COLUMNS",
    "VIEWS", "Explorer", "TwinVerdicts", "cell_html", "dataset_notices", "download_link", "explore",
    "family_pass_rates", "filter_by_name", "highlight_python", "model_detail", "newest_pair", "normalise_results",
    "render_detail_html", "render_family_svg", "render_notices_html", "render_static_html", "render_summary_html",
    "render_table_html", "reproduce_command", "result_kind", "result_label", "rows_for_versions", "sort_table",
    "summary_text", "versions_available", "view_summary", "view_table",
]
