"""The HTML pieces every pane shares: the style sheet, cells, tables, code blocks, copy buttons and download links.

Every value from a dataset is untrusted text: it goes through ``html.escape`` here (or pygments, which escapes)
before it is part of any HTML. The result colours are the plots' (``plots.RESULT_COLORS``).
"""

from __future__ import annotations

import base64
import html

import pandas as pd

from neuronhelpers.core.vocab import FAIL, PASS, UNTESTED
from neuronhelpers.ui.explorer.frames import DECIMALS, RESULT_ORDER, THOUSANDS, result_kind
from neuronhelpers.ui.plots import RESULT_COLORS

STYLE = """<style>
.nh-table{border-collapse:collapse;font-size:13px}.nh-table th,.nh-table td{padding:2px 8px;\
border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
.nh-table caption{text-align:left;font-weight:600;padding:4px 0}
.nh-PASS{color:%(pass)s;font-weight:600}.nh-FAIL{color:%(fail)s;font-weight:600}.nh-EXCLUDED{color:#8a6d00}
.nh-untested{color:#777}.nh-UNTESTED{color:%(untested)s;font-weight:600}.nh-other{color:#b35c00;font-weight:600}
.nh-code{background:#f6f8fa;padding:8px;margin:0;overflow:auto;max-height:320px;font-size:12px;white-space:pre}
.nh-scroll{max-height:320px;overflow:auto;border:1px solid #ddd}.nh-scroll pre{margin:0;font-size:12px}
.nh-bar{display:flex;gap:12px;align-items:center;font-size:12px;margin:2px 0}
.nh-bar a,.nh-copy{font-size:12px}.nh-cmd{background:#f6f8fa;padding:3px 8px;font-size:13px}
.nh-notice{background:#fff4e5;border-left:4px solid #b35c00;padding:4px 8px;margin:2px 0;font-size:13px}
.nh-summary{font-size:14px;margin:4px 0}
.nh-download{color:#0645ad;text-decoration:underline}
.nh-explorer .widget-html-content{line-height:1.4}
.nh-grid{border-top:1px solid #ccc;font-size:12px;align-items:stretch;max-width:100%%}
.nh-explorer .nh-grid>.jupyter-widgets{width:auto!important;min-width:0!important;max-width:none!important;\
margin:0!important;
 height:auto!important;box-sizing:border-box}
.nh-explorer .nh-grid>.nh-cells,.nh-explorer .nh-grid>.nh-cells>.widget-html-content{display:contents}
.nh-explorer .nh-grid>.nh-sortbtn{order:-1}
.nh-c{display:flex;align-items:center;line-height:1.35;white-space:normal;padding:2px 6px;font-size:12px;
 border-bottom:1px solid #eee;max-width:32em}
.nh-explorer .nh-grid button.nh-rowbtn{background:none;box-shadow:none;color:#0645ad;text-decoration:underline;\
text-align:left;
 padding:2px 6px;line-height:1.35;font-size:12px;border:none;border-bottom:1px solid #eee;border-radius:0;\
white-space:nowrap;
 overflow:visible;text-overflow:clip}
.nh-explorer .nh-grid button.nh-sortbtn{font-weight:600;font-size:12px;min-height:24px;white-space:normal;\
text-align:left;
 line-height:1.2;padding:2px 6px;background:#f0f0f0;border:none;border-bottom:1px solid #ccc;border-radius:0;\
box-shadow:none;
 overflow:visible;text-overflow:clip}
</style>""" % {"pass": RESULT_COLORS[PASS], "fail": RESULT_COLORS[FAIL],
                "untested": RESULT_COLORS[UNTESTED]}
# Only in the widget: where the widget renders, the static fallback beside it is hidden.
WIDGET_STYLE = "<style>.nh-static{display:none}</style>"


def is_missing(value) -> bool:
    """A missing dataset cell (None, NaN, NA); a list or array cell is not missing."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array cell
        return False


def as_text(value) -> str:
    """A dataset cell as text: missing values (None, NaN, NA) become the empty string."""
    return "" if is_missing(value) else str(value)


def _format(column: str, value) -> str:
    text = as_text(value)
    if not text:
        return ""
    if column in DECIMALS and isinstance(value, float):
        return f"{value:.{DECIMALS[column]}f}"
    if column in THOUSANDS:
        return f"{int(value):,}"
    return text


def result_class(label: str) -> str:
    """The CSS class that colours a result label (a value outside the vocabulary: 'nh-other')."""
    kind = result_kind(label)
    return f"nh-{kind}" if kind in RESULT_ORDER else "nh-other"


def cell_html(column: str, value) -> str:
    """One table cell's content as HTML (escaped; results coloured)."""
    text = html.escape(_format(column, value))
    return f'<span class="{result_class(text)}">{text}</span>' if column == "result" and text else text


def render_table_html(table: pd.DataFrame, caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell_html(c, v)}</td>" for c, v in zip(table.columns, row, strict=True))
                   + "</tr>" for row in table.itertuples(index=False))
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'{STYLE}<table class="nh-table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def pre_html(text: str) -> str:
    return f'<pre class="nh-code">{html.escape(text)}</pre>'


def kv_table_html(items: dict) -> str:
    """A two-column table of the items with a value (keys and values escaped)."""
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(as_text(v))}</td></tr>"
                   for k, v in items.items() if as_text(v))
    return f'<table class="nh-table">{rows}</table>'


# Copies the text of the block the button sits in; no dataset string is part of the script.
_COPY_JS = ("var b=this,t=b.closest('.nh-block').querySelector('.nh-copytext').innerText;"
            "if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(t).then("
            "function(){b.textContent='copied'},function(){b.textContent='copy refused: select the text'})}"
            "else{b.textContent='no clipboard here: select the text'}")


def copy_button() -> str:
    return f'<button type="button" class="nh-copy" onclick="{html.escape(_COPY_JS)}">copy</button>'


def download_link(text: str, filename: str, mime: str = "text/plain") -> str:
    """A link that downloads ``text`` as ``filename`` (a data: URL; base64 needs no escaping)."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return (f'<a class="nh-download" download="{html.escape(filename)}" '
            f'href="data:{html.escape(mime)};charset=utf-8;base64,{data}">download {html.escape(filename)}</a>')


def dataset_notices(attrs: dict) -> list[str]:
    """One line per file that ``load_results`` skipped or that holds values outside the vocabulary."""
    lines = [f"{name} holds values outside the neuronhelpers vocabulary ({', '.join(problems)}): its rows are "
             "shown as recorded" for name, problems in attrs.get("off_vocabulary") or []]
    lines += [f"skipped {name}: {reason}" for name, reason in attrs.get("skipped") or []]
    return lines


def render_notices_html(notices: list[str]) -> str:
    return "".join(f'<div class="nh-notice">⚠ {html.escape(n)}</div>' for n in notices)
