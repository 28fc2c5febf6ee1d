"""Plots of a results dataset (matplotlib): where a picture reads better than a table.

Every plot has a title and labelled axes; counts get integer ticks, rates are shown in percent (on the axis
and on each bar); a legend only names colours that were drawn and sits outside the bars. Each function
takes an optional ``ax`` and returns what it drew on; with no data it says so on the axes instead of
failing. The colours (``RESULT_COLORS``, ``STAGE_COLORS``) and the pass rate per family (``family_pass_rates``,
``rate_label``) are defined here once: the explorer's summary chart and result labels use them too. Taught in
notebook 01 and the architecture catalog notebook.
"""

from __future__ import annotations

import textwrap

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.vocab import FAIL, PASS, STAGES
from neuronhelpers.store.dataset import newest_per_model

# The colour of each result, the one table: these plots and the explorer (its result labels and its summary chart).
PASS_COLOR = "#2e7d32"
FAIL_COLOR = "#c62828"
UNTESTED_COLOR = "#6a4ca0"
RESULT_COLORS = {PASS: PASS_COLOR, FAIL: FAIL_COLOR, vocab.UNTESTED: UNTESTED_COLOR}
# One colour per stage (FAIL stages and UNTESTED reasons), the same in every plot.
STAGE_COLORS = {
    vocab.STAGE_LOAD: "#8c564b", vocab.STAGE_COMPILE: "#d62728", vocab.STAGE_RUN: "#ff7f0e",
    vocab.STAGE_OOM: "#9467bd", vocab.STAGE_TIMEOUT: "#7f7f7f", vocab.STAGE_MISMATCH: "#e377c2",
    vocab.STAGE_REFERENCE: "#17becf",
    vocab.UNTESTED_TWIN: "#bcbd22", vocab.UNTESTED_DEPENDENCY: "#1f77b4", vocab.UNTESTED_INFRASTRUCTURE: "#aec7e8",
    vocab.UNTESTED_INPUT: "#c5b0d5",
}
OTHER_COLOR = "#555555"
UNKNOWN_FAMILY = "(unknown)"


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    return ax if ax is not None else plt.subplots(figsize=figsize)[1]


def _integer_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _percent_ticks(axis) -> None:
    from matplotlib.ticker import PercentFormatter

    axis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))


def _nothing(ax, title: str, message: str):
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _outside_legend(ax, **kwargs) -> None:
    """A legend right of the axes, so it covers no bar or point."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def _pair_label(df: pd.DataFrame) -> pd.Series:
    library = df["library"].fillna("library") if "library" in df else pd.Series("library", index=df.index)
    return (df["compiler"].fillna("?") + " " + df["compiler_version"].fillna("?") + "\n" + library + " "
            + df["library_version"].fillna("?"))


def _one_per_model_and_pair(df: pd.DataFrame) -> pd.DataFrame:
    """Each model's newest row per version pair: a model swept into two folders that were then joined (a results
    folder and the catalog) counts once."""
    key = [c for c in ("model_id", "library", "compiler_version", "library_version") if c in df]
    return newest_per_model(df, key)


def _tested(df: pd.DataFrame) -> pd.DataFrame:
    df = _one_per_model_and_pair(df)
    return df[df.result.isin([PASS, FAIL])].copy()


def rate_label(rate: float, passed: int, tested: int) -> str:
    """A pass rate as every chart labels it: '67% (2/3)'."""
    return f"{rate:.0f}% ({passed}/{tested})"


def family_pass_rates(results: pd.Series, families: pd.Series, top: int = 15) -> pd.DataFrame:
    """Per family, over one result per model: models tested (PASS or FAIL), passed, and the pass rate (%), the
    ``top`` most-tested families first (then the most passed, then by name); a missing or empty family name is
    '(unknown)'. The numbers of both pass-rate-by-family charts (``pass_rate_by_family`` and the explorer's)."""
    tested = results.isin([PASS, FAIL]).to_numpy()
    if not tested.any():
        return pd.DataFrame({"family": pd.Series(dtype=object), "tested": pd.Series(dtype=int),
                             "passed": pd.Series(dtype=int), "rate": pd.Series(dtype=float)})
    names = pd.Series(families.to_numpy(dtype=object)[tested])
    names = names.where(names.notna() & names.ne(""), UNKNOWN_FAMILY).astype(str)
    grouped = pd.Series(results.to_numpy()[tested] == PASS).groupby(names.to_numpy())
    out = pd.DataFrame({"tested": grouped.size(), "passed": grouped.sum().astype(int)}).rename_axis("family")
    out = out.reset_index().sort_values(["tested", "passed", "family"], ascending=[False, False, True], kind="stable")
    out = out.head(top).reset_index(drop=True)
    out["rate"] = out["passed"] / out["tested"] * 100
    return out


def pass_rate_per_version(df: pd.DataFrame, ax=None):
    """Bar chart: share of tested models (PASS or FAIL) that PASS, per (compiler version, library version) pair,
    each bar labelled with its percentage and counts (one pair is one labelled bar)."""
    title = "Pass rate per version pair"
    tested = _tested(df)
    tested["pair"] = _pair_label(tested)
    ax = _axes(ax, (max(4.5, 1.8 * tested["pair"].nunique()), 3.4))
    if tested.empty:
        return _nothing(ax, title, "no PASS or FAIL rows")
    grouped = tested.groupby("pair")["result"]
    passed = grouped.apply(lambda r: int((r == PASS).sum())).sort_index()
    counts = grouped.size().reindex(passed.index)
    rate = passed / counts * 100
    bars = ax.bar(range(len(rate)), rate.values, color=PASS_COLOR, width=0.6 if len(rate) > 1 else 0.4)
    ax.set_xticks(range(len(rate)), rate.index, fontsize=8)
    ax.set_xlim(-0.7, len(rate) - 0.3)
    ax.set_ylim(0, 115)
    _percent_ticks(ax.yaxis)
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.set_ylabel("PASS (% of tested models)")
    ax.set_xlabel("compiler and library version")
    ax.set_title(title)
    for bar, r, p, n in zip(bars, rate.values, passed.values, counts.values, strict=True):
        ax.annotate(rate_label(r, p, n), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    return ax


def time_and_memory_vs_parameters(df: pd.DataFrame, axes=None):
    """Scatter: wall time (compilation included) and peak device memory against parameter count."""
    import matplotlib.pyplot as plt

    data = _tested(df).dropna(subset=["parameters"])
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)[1]
    for ax, column, label, scale, title in (
            (axes[0], "wall_s", "wall time, compilation included (s)", 1, "Wall time vs size"),
            (axes[1], "peak_memory_bytes", "peak device memory (GiB)", 2**30, "Peak memory vs size")):
        drawn = False
        for result, color in ((PASS, PASS_COLOR), (FAIL, FAIL_COLOR)):
            part = data[(data.result == result) & data[column].notna()]
            if len(part):
                ax.scatter(part["parameters"], part[column] / scale, label=result, color=color, s=18, alpha=0.8)
                drawn = True
        ax.set_xscale("log")
        ax.set_xlabel("parameters (log scale)")
        ax.set_ylabel(label)
        ax.set_title(title)
        if not drawn:
            ax.text(0.5, 0.5, "no measured runs", ha="center", va="center", transform=ax.transAxes, color="#666")
    if axes[1].get_legend_handles_labels()[0]:
        _outside_legend(axes[1], title="result")
    return axes


def failure_stages_per_version(df: pd.DataFrame, ax=None):
    """Stacked bars: how many models failed at each stage, per version pair (integer counts; the legend lists
    only the stages drawn, outside the bars)."""
    title = "Failure stages per version pair"
    df = _one_per_model_and_pair(df)
    failed = df[df.result == FAIL].copy()
    failed["pair"] = _pair_label(failed)
    ax = _axes(ax, (max(4.5, 1.8 * max(failed["pair"].nunique(), 1)) + 1.2, 3.4))
    if failed.empty:
        return _nothing(ax, title, "no FAIL rows")
    table = failed.groupby(["pair", "stage"]).size().unstack(fill_value=0)
    order = [s for s in STAGES if s in table.columns] + sorted(c for c in table.columns if c not in STAGES)
    table = table[order]
    bottom = None
    for stage in table.columns:
        values = table[stage].values
        if values.sum() == 0:
            continue
        ax.bar(range(len(table)), values, bottom=bottom, label=stage, color=STAGE_COLORS.get(stage, OTHER_COLOR),
               width=0.6 if len(table) > 1 else 0.4)
        bottom = values if bottom is None else bottom + values
    ax.set_xticks(range(len(table)), table.index, fontsize=8)
    ax.set_xlim(-0.7, len(table) - 0.3)
    _integer_ticks(ax.yaxis)
    ax.set_ylabel("failed models")
    ax.set_xlabel("compiler and library version")
    ax.set_title(title)
    _outside_legend(ax, title="stage")
    return ax


def pass_rate_by_family(df: pd.DataFrame, family: str = "model_type", top: int = 15, ax=None):
    """Horizontal bars: pass rate per family (the architecture, ``model_type``, by default; any column), over
    each model's newest row (pass one version pair's rows to compare like with like). Most-tested families
    first, each bar labelled with its percentage and counts."""
    title = f"Pass rate by {family.replace('_', ' ')}"
    newest = newest_per_model(df)
    names = newest[family] if family in newest else pd.Series(index=newest.index, dtype=object)
    if family == "model_type" and "twin_of" in newest:
        names = names.fillna(newest["twin_of"])
    stats = family_pass_rates(newest["result"], names, top).iloc[::-1]
    ax = _axes(ax, (6.5, 1.0 + 0.3 * max(len(stats), 2)))
    if stats.empty:
        return _nothing(ax, title, "no PASS or FAIL rows")
    bars = ax.barh(range(len(stats)), stats["rate"].values, color=PASS_COLOR, height=0.6)
    ax.set_yticks(range(len(stats)), stats["family"], fontsize=8)
    ax.set_xlim(0, 130)
    ax.set_xticks([0, 25, 50, 75, 100])
    _percent_ticks(ax.xaxis)
    ax.set_xlabel("PASS (% of tested models)")
    ax.set_ylabel(family.replace("_", " "))
    ax.set_title(title)
    for bar, r in zip(bars, stats.itertuples(index=False), strict=True):
        ax.annotate(rate_label(r.rate, r.passed, r.tested), (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=8, xytext=(3, 0), textcoords="offset points")
    return ax


def cause_labels(causes, width: int = 70) -> list[str]:
    """Each cause shortened to ``width`` characters for an axis; two causes that shorten alike (a long shared
    beginning) keep their ends instead, so no two bars carry the same label."""
    short = [textwrap.shorten(str(c), width=width, placeholder="…") for c in causes]
    repeated = {label for label in short if short.count(label) > 1}
    head = width // 2
    return [f"{str(c)[:head].rstrip()} … {str(c)[-(width - head - 3):].lstrip()}" if label in repeated else label
            for c, label in zip(causes, short, strict=True)]


def causes_bar(df: pd.DataFrame, top: int = 10, ax=None, *, results=(FAIL,)):
    """Horizontal bars: the root causes (``analysis.causes.rank_causes``) that block the most architectures, each bar as
    long as the number of architectures it blocks and coloured by its stage (legend outside the bars)."""
    from neuronhelpers.analysis.causes import rank_causes

    title = f"Root causes by architectures blocked (top {top})"
    ranked = rank_causes(df, results=results).head(top).iloc[::-1]
    ax = _axes(ax, (9, 1.2 + 0.42 * max(len(ranked), 2)))
    if ranked.empty:
        return _nothing(ax, title, "no failures with a recorded cause")
    stages = [str(s).split(", ")[0] if s else "" for s in ranked["stage"]]
    colors = [STAGE_COLORS.get(s, OTHER_COLOR) for s in stages]
    bars = ax.barh(range(len(ranked)), ranked["count"].values, color=colors, height=0.6)
    ax.set_yticks(range(len(ranked)), cause_labels(ranked["cause"]), fontsize=7)
    _integer_ticks(ax.xaxis)
    ax.set_xlim(0, ranked["count"].max() * 1.15 + 0.5)
    ax.set_xlabel("architectures blocked")
    ax.set_ylabel("root cause")
    ax.set_title(title)
    for bar, n in zip(bars, ranked["count"].values, strict=True):
        ax.annotate(str(n), (bar.get_width(), bar.get_y() + bar.get_height() / 2), va="center", fontsize=8,
                    xytext=(3, 0), textcoords="offset points")
    from matplotlib.patches import Patch

    drawn = list(dict.fromkeys(stages))
    ax.legend(handles=[Patch(color=STAGE_COLORS.get(s, OTHER_COLOR), label=s or "(no stage)") for s in drawn],
              title="stage", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


# Where a run's seconds go, in the order they happen; the rest of the process's wall time is start-up.
TIME_PARTS = (("load_s", "load (from_pretrained)", "#1f77b4"),
              ("compile_s", "compile (first generate - warm)", "#d62728"),
              ("generate_s", "warm generate", "#2ca02c"))
STARTUP = ("start-up and imports", "#bbbbbb")


def time_breakdown(runs: dict, ax=None):
    """Horizontal stacked bars, one per labelled row: where the run.py process's wall time went."""
    ax = _axes(ax, (8, 0.8 + 0.7 * max(len(runs), 1)))
    if not runs:
        return _nothing(ax, "Where the time went", "no runs")
    labels = list(runs)
    for y, label in enumerate(labels):
        row, left = runs[label], 0.0
        for key, name, color in TIME_PARTS:
            value = row.get(key) or 0.0
            ax.barh(y, value, left=left, color=color, label=name if y == 0 else None)
            left += value
        rest = max((row.get("wall_s") or left) - left, 0.0)
        ax.barh(y, rest, left=left, color=STARTUP[1], label=STARTUP[0] if y == 0 else None)
        ax.annotate(f"{row.get('wall_s') or left:.1f} s", (left + rest, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (wall time of the run.py process)")
    ax.set_title("Where the time went")
    _outside_legend(ax)
    return ax


def divergence_margins(rows, ax=None):
    """Points: each token row's reference top-1/top-2 logit margin at its first divergence (``divergence_margin``)
    against the near-tie tolerance of its dtype (``vocab.NEAR_TIE_MARGIN``, as ``compare_tokens`` applies it: one
    dashed line over that dtype's rows). A PASS ``near_tie`` lies under its line; a FAIL ``mismatch`` lies above it,
    or under it when the device's token was not among the reference's top-k. ``rows``: a frame or a list of row
    dicts (``model_id`` labels a point); rows without a margin (exact, embeddings, images) are left out. The margin
    axis is symmetric-log, so margins from 1e-3 to 10 (and a tie of 0) all show."""
    title = "Near-tie margin against the dtype's tolerance"
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))

    def column(name):
        return df[name] if name in df else pd.Series(None, index=df.index, dtype=object)

    near_tie = (column("result") == PASS) & (column("verification") == vocab.NEAR_TIE)
    mismatch = (column("result") == FAIL) & (column("stage") == vocab.STAGE_MISMATCH)
    data = df[(near_tie | mismatch) & pd.to_numeric(column("divergence_margin"), errors="coerce").notna()].copy()
    ax = _axes(ax, (max(5.0, 1.1 * len(data) + 2.5), 3.6))
    if data.empty:
        return _nothing(ax, title, "no near_tie PASS or mismatch FAIL rows with a margin")
    dtypes = data["dtype"] if "dtype" in data else pd.Series(None, index=data.index, dtype=object)
    data["dtype"] = dtypes.where(dtypes.isin(list(vocab.NEAR_TIE_MARGIN)), "float32")
    data["tolerance_line"] = data["dtype"].map(vocab.NEAR_TIE_MARGIN)
    data["margin"] = data["divergence_margin"].astype(float)
    data = data.sort_values(["tolerance_line", "margin"], kind="stable").reset_index(drop=True)
    x = pd.Series(range(len(data)))
    for result, name, color in ((PASS, f"{PASS} ({vocab.NEAR_TIE})", PASS_COLOR),
                                (FAIL, f"{FAIL} ({vocab.STAGE_MISMATCH})", FAIL_COLOR)):
        part = data.result == result
        if part.any():
            ax.scatter(x[part], data.margin[part], color=color, label=name, s=36, zorder=3)
    for style, (dtype, group) in zip(("--", ":", "-.", (0, (5, 1))), data.groupby("tolerance_line", sort=True),
                                     strict=False):
        ax.hlines(dtype, group.index.min() - 0.4, group.index.max() + 0.4, colors="#333333", linestyles=style,
                  label=f"tolerance, {group['dtype'].iloc[0]}: {dtype:g}", zorder=2)
    if len(data) <= 12:
        for xi, margin in zip(x, data.margin, strict=True):
            ax.annotate(f"{margin:.3g}", (xi, margin), xytext=(6, 0), textcoords="offset points", va="center",
                        fontsize=7)
    labels = data["model_id"] if "model_id" in data else pd.Series(x.astype(str))
    where = data["first_divergence"] if "first_divergence" in data else pd.Series(None, index=data.index)
    ticks = [textwrap.fill(textwrap.shorten(str(label), width=44, placeholder="…"), 16)
             + ("" if pd.isna(i) else f"\ntoken {int(i)}") for label, i in zip(labels, where, strict=True)]
    ax.set_xticks(range(len(data)), ticks, fontsize=7, rotation=30 if len(data) > 8 else 0,
                  ha="right" if len(data) > 8 else "center")
    ax.set_xlim(-0.7, len(data) - 0.3)
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_ylim(bottom=0, top=max(data.margin.max(), data.tolerance_line.max()) * 3)
    ax.set_ylabel("reference top-1 − top-2 logit\nmargin at the first divergence")
    ax.set_xlabel("row (and the token where it first diverged)")
    ax.set_title(title)
    _outside_legend(ax)
    return ax


def verdicts_per_release(df: pd.DataFrame, ax=None):
    """Stacked horizontal bars: per version pair (one library's release under one compiler), how many models PASS,
    FAIL or reached no verdict (UNTESTED); the counts of ``dataset.verdicts_per_pair``, summed over tasks."""
    from neuronhelpers.store.dataset import verdicts_per_pair

    title = "Verdicts per version pair"
    counts = verdicts_per_pair(df)
    ax = _axes(ax, (8.5, 1.2 + 0.45 * max(counts.groupby(["compiler", "library"]).ngroups, 2)))
    if counts.empty:
        return _nothing(ax, title, "no rows")
    table = counts.groupby(["compiler", "library"], sort=False)[[PASS, FAIL, vocab.UNTESTED]].sum().iloc[::-1]
    labels = [f"{library} / {compiler}" for compiler, library in table.index]
    left = pd.Series(0, index=table.index)
    for result in (PASS, FAIL, vocab.UNTESTED):
        values = table[result]
        if values.sum() == 0:
            continue
        bars = ax.barh(range(len(table)), values.values, left=left.values, color=RESULT_COLORS[result], height=0.6,
                       label=result)
        for bar, value in zip(bars, values.values, strict=True):
            if value:
                ax.annotate(str(int(value)), (bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2),
                            ha="center", va="center", fontsize=7, color="white")
        left = left + values
    ax.set_yticks(range(len(table)), labels, fontsize=8)
    _integer_ticks(ax.xaxis)
    ax.set_xlabel("models (each model's newest row in the pair)")
    ax.set_ylabel("library / compiler")
    ax.set_title(title)
    _outside_legend(ax, title="result")
    return ax


def rank_layout(rows: dict, layouts: dict, ax=None):
    """Grouped bars: each rank's peak memory (MiB) for each sharded run, labelled with what the rank holds (attention
    heads, key/value heads, experts: ``plan.per_rank_layout``). ``rows`` and ``layouts`` are keyed by run name."""
    title = "What each rank holds, and its peak memory"
    ax = _axes(ax, (8.5, 3.6))
    runs = [(name, row) for name, row in rows.items() if row.get("peak_memory_per_rank") is not None]
    if not runs:
        return _nothing(ax, title, "no sharded run with per-rank memory")
    width = 0.8 / len(runs)
    palette = ["#1565c0", "#ef6c00", "#6a1b9a", "#00838f"]
    for i, (name, row) in enumerate(runs):
        memory = [(m or 0) / 2**20 for m in row["peak_memory_per_rank"]]
        layout = layouts.get(name, {})
        held = [f"{layout.get('attention heads per rank')} heads", f"{layout.get('key/value heads per rank')} kv"]
        if layout.get("experts per rank"):
            held.append(f"{layout['experts per rank']} experts")
        xs = [rank + (i - (len(runs) - 1) / 2) * width for rank in range(len(memory))]
        bars = ax.bar(xs, memory, width=width * 0.9, color=palette[i % len(palette)],
                      label=f"{name} ({row.get('parallelism')}, {len(memory)} ranks)")
        for bar in bars:
            ax.annotate("\n".join(held), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ranks = max(len(row["peak_memory_per_rank"]) for _, row in runs)
    ax.set_xticks(range(ranks), [f"rank {r}" for r in range(ranks)])
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_xlabel("rank (one core each)")
    ax.set_title(title)
    _outside_legend(ax, title="run")
    return ax
