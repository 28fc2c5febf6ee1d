"""What a view opens with: counts by result kind, the pass rate of its tested models and, where it helps, a
pass-rate-by-family chart; and the static copy of a view shown where the widget cannot render.

The chart's numbers, labels and colour are those of ``plots.pass_rate_by_family`` (``plots.family_pass_rates``,
``plots.rate_label``, ``plots.PASS_COLOR``): drawn here as a small SVG, so the summary needs no matplotlib.
"""

from __future__ import annotations

import html

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.vocab import EXCLUDED, FAIL, PASS
from neuronhelpers.ui import plots
from neuronhelpers.ui.explorer.frames import NO_ROW, result_kind
from neuronhelpers.ui.explorer.markup import STYLE, render_table_html
from neuronhelpers.verdict.evidence import could_not_fail, could_not_fail_count

# The summary's count of PASS rows whose check could not have failed (kept out of PASS and of the pass rate).
PASS_COULD_NOT_FAIL = vocab.PASS_COULD_NOT_FAIL
# The summary's count of models without a verdict: those without a row (NO_ROW) and those whose row is UNTESTED.
UNTESTED_COUNT = "untested"


def view_summary(table: pd.DataFrame) -> dict:
    """Counts of a view's table by result kind, and the pass rate of its tested models (PASS / (PASS + FAIL)).

    PASS counts the PASS rows whose check could fail; PASS_COULD_NOT_FAIL those whose check could not (evidence
    ``insensitive_check``), which neither the pass rate nor 'tested' counts.

    'untested' counts the models without a row and those whose row is UNTESTED ('untested_rows' says how many
    of them have such a row); 'other' counts results outside the vocabulary.
    """
    kinds = table["result"].map(result_kind) if len(table) else pd.Series(dtype=object)
    counts = kinds.value_counts()
    known = {PASS, FAIL, EXCLUDED, NO_ROW, vocab.UNTESTED}
    could_not = could_not_fail_count(kinds, table["evidence"] if "evidence" in table else None)
    summary = {
        "models": int(len(table)),
        PASS: int(counts.get(PASS, 0)) - could_not,
        PASS_COULD_NOT_FAIL: could_not,
        FAIL: int(counts.get(FAIL, 0)),
        EXCLUDED: int(counts.get(EXCLUDED, 0)),
        UNTESTED_COUNT: int(counts.get(NO_ROW, 0) + counts.get(vocab.UNTESTED, 0)),
        "untested_rows": int(counts.get(vocab.UNTESTED, 0)),
        "other": int(sum(n for k, n in counts.items() if k not in known)),
    }
    tested = summary[PASS] + summary[FAIL]
    summary["tested"] = tested
    summary["pass_rate"] = summary[PASS] / tested if tested else None
    return summary


def family_pass_rates(table: pd.DataFrame, family: str = "architecture", top: int = 12) -> pd.DataFrame:
    """Per family (a table column: 'architecture' or 'task'): models tested, passed, and the pass rate (%),
    most-tested first (``plots.family_pass_rates`` over the table's results)."""
    kinds = table["result"].map(result_kind)
    if "evidence" in table:  # a PASS whose check could not have failed is neither passed nor tested
        kinds = kinds.where([not could_not_fail(k, e) for k, e in zip(kinds, table["evidence"], strict=True)],
                            PASS_COULD_NOT_FAIL)
    return plots.family_pass_rates(kinds, table[family], top)


def summary_text(view: str, summary: dict) -> str:
    """'Selected: 28 models · 10 PASS · 2 PASS whose check could not have failed · 3 FAIL · 3 EXCLUDED · 10 untested ·
    pass rate 77% of 13 tested'."""
    parts = [f"{view}: {summary['models']} models", f"{summary[PASS]} PASS"]
    if summary.get(PASS_COULD_NOT_FAIL):
        parts.append(f"{summary[PASS_COULD_NOT_FAIL]} {PASS_COULD_NOT_FAIL}")
    parts += [f"{summary[FAIL]} FAIL", f"{summary[EXCLUDED]} EXCLUDED"]
    untested = f"{summary[UNTESTED_COUNT]} untested"
    if summary["untested_rows"]:
        untested += f" ({summary['untested_rows']} with an {vocab.UNTESTED} row)"
    parts.append(untested)
    if summary["other"]:
        parts.append(f"{summary['other']} other results")
    rate = summary["pass_rate"]
    parts.append(f"pass rate {rate * 100:.0f}% of {summary['tested']} tested" if rate is not None else "none tested")
    return " · ".join(parts)


def render_family_svg(rates: pd.DataFrame, family_label: str = "architecture") -> str:
    """``family_pass_rates``' answer as a small horizontal bar chart (title, labelled axis, % ticks, each bar
    labelled as the plots label it); '' when empty."""
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
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w * r.rate / 100:.1f}" height="{row_h - 4}" '
                   f'fill="{plots.PASS_COLOR}"/>'
                   f'<text x="{label_w + bar_w + 6}" '
                   f'y="{y + 11}">{plots.rate_label(r.rate, r.passed, r.tested)}</text>')
    out.append(f'<text x="{label_w + bar_w / 2}" y="{height - 4}" text-anchor="middle">PASS, % of tested models '
               f'(PASS + FAIL)</text></svg>')
    return "".join(out)


def example_notices(df: pd.DataFrame) -> list[str]:
    """A notice when the frame holds rows of neuronhelpers' made-up example (store/example.py)."""
    from neuronhelpers.store.example import EXAMPLE_RUNNER

    count = int((df["runner"] == EXAMPLE_RUNNER).sum()) if "runner" in df else 0
    return [f"{count} rows are neuronhelpers' made-up example in the published layout (runner {EXAMPLE_RUNNER}): "
            "not measurements"] if count else []


def trainium_line(df: pd.DataFrame) -> str:
    """For the Architectures view: how often the frame's twins predict its Trainium verdicts (analysis/agreement), or
    '' when it holds no row measured on Trainium."""
    from neuronhelpers.analysis.agreement import trainium_agreement, trainium_agreement_line, trainium_rows

    trainium = trainium_rows(df)
    return "" if trainium.empty else trainium_agreement_line(*trainium_agreement(trainium, df))


def render_summary_html(view: str, table: pd.DataFrame, *, note: str = "") -> str:
    """The summary a view opens with: counts, pass rate, and (where it helps) pass rate by family."""
    summary = view_summary(table)
    family = "task" if view == "Architectures" else "architecture"
    rates = family_pass_rates(table, family)
    plot = render_family_svg(rates, family) if len(rates) >= 2 and rates["tested"].max() >= 2 else ""
    extra = f' <span style="color:#666;font-size:12px">({html.escape(note)})</span>' if note else ""
    return f'{STYLE}<div class="nh-summary"><b>{html.escape(summary_text(view, summary))}</b>{extra}</div>{plot}'


def render_static_html(view: str, table: pd.DataFrame) -> str:
    """What a notebook shows where the widget cannot render (an HTML export without its widget renderer): why,
    and a static copy of the view. The widget's own style hides it wherever the widget renders."""
    return (f'{STYLE}<div class="nh-static"><p><b>The interactive explorer did not render here.</b> It needs a running '
            "Jupyter kernel with ipywidgets (JupyterLab, or <code>neuronhelpers app</code>); an HTML export shows it "
            "only when the widget state was saved and the page can load the widget renderer from the internet. "
            f"A static copy of the {html.escape(view)} view follows.</p>"
            f"{render_summary_html(view, table)}{render_table_html(table)}</div>")
