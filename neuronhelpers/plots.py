"""Plots of a results dataset (matplotlib): where a picture reads better than a table."""

from __future__ import annotations

import pandas as pd

from .vocab import PASS, STAGES


def _pair_label(df: pd.DataFrame) -> pd.Series:
    return df["compiler"].fillna("?") + " " + df["compiler_version"].fillna("?") + "\ntransformers " + \
        df["library_version"].fillna("?")


def _tested(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.result.isin(["PASS", "FAIL"])].copy()


def pass_rate_per_version(df: pd.DataFrame, ax=None):
    """Bar chart: share of tested models that PASS, per (compiler version, library version) pair."""
    import matplotlib.pyplot as plt

    tested = _tested(df)
    tested["pair"] = _pair_label(tested)
    rate = tested.groupby("pair")["result"].apply(lambda r: (r == PASS).mean() * 100).sort_index()
    counts = tested.groupby("pair").size().reindex(rate.index)
    ax = ax or plt.subplots(figsize=(max(4, 1.6 * len(rate)), 3.2))[1]
    bars = ax.bar(range(len(rate)), rate.values, color="#2e7d32")
    ax.set_xticks(range(len(rate)), rate.index, fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("PASS (%)")
    ax.set_title("Pass rate per version pair")
    for bar, n in zip(bars, counts.values):
        ax.annotate(f"n={n}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8)
    return ax


def time_and_memory_vs_parameters(df: pd.DataFrame, axes=None):
    """Scatter: wall time (compilation included) and peak device memory against parameter count."""
    import matplotlib.pyplot as plt

    data = _tested(df).dropna(subset=["parameters"])
    if axes is None:
        axes = plt.subplots(1, 2, figsize=(9, 3.4))[1]
    for ax, column, label, scale in ((axes[0], "wall_s", "wall time (s)", 1), (axes[1], "peak_memory_bytes", "peak memory (GiB)", 2**30)):
        for result, color in (("PASS", "#2e7d32"), ("FAIL", "#c62828")):
            part = data[(data.result == result) & data[column].notna()]
            ax.scatter(part["parameters"], part[column] / scale, label=result, color=color, s=18, alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("parameters")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    axes[0].set_title("Wall time vs size")
    axes[1].set_title("Peak memory vs size")
    return axes


def failure_stages_per_version(df: pd.DataFrame, ax=None):
    """Stacked bars: how many models failed at each stage, per version pair."""
    import matplotlib.pyplot as plt

    failed = df[df.result == "FAIL"].copy()
    failed["pair"] = _pair_label(failed)
    table = failed.groupby(["pair", "stage"]).size().unstack(fill_value=0).reindex(columns=list(STAGES), fill_value=0)
    ax = ax or plt.subplots(figsize=(max(4, 1.6 * max(len(table), 1)), 3.2))[1]
    bottom = None
    for stage in table.columns:
        values = table[stage].values
        if values.sum() == 0:
            continue
        ax.bar(range(len(table)), values, bottom=bottom, label=stage)
        bottom = values if bottom is None else bottom + values
    ax.set_xticks(range(len(table)), table.index, fontsize=8)
    ax.set_ylabel("models")
    ax.set_title("Failure stages per version pair")
    if len(table):
        ax.legend(fontsize=8)
    return ax
