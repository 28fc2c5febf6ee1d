"""The plots draw what the data says and teach it: titles, labelled axes, integer ticks for counts, percentages
for rates, legends that match the colours drawn and sit outside the bars (checked on the artists, not on pixels)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from neuronhelpers.ui import plots
from neuronhelpers.store import schema as results  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def frame():
    rows = []
    for i, (result, stage, lib) in enumerate([("PASS", None, "5.23.0"), ("FAIL", "compile", "5.23.0"),
                                              ("PASS", None, "5.24.0"), ("PASS", None, "5.24.0"),
                                              ("FAIL", "oom", "5.24.0"), ("EXCLUDED", None, "5.24.0")]):
        extra = {"verification": "exact"} if result == "PASS" else {}
        rows.append(results.new_row(model_id=f"m{i}", result=result, stage=stage, compiler="neuronx-cc",
                                    compiler_version="2.21", library="transformers", library_version=lib,
                                    parameters=10**(8 + i), wall_s=10.0 * (i + 1), peak_memory_bytes=2**30 * (i + 1),
                                    **extra))
    return pd.DataFrame(rows)


def architectures():
    """Twin rows: llama 2 of 2 PASS, gemma2 1 of 3, and causes shared across architectures."""
    spec = [("llama", "PASS", None, None), ("llama", "PASS", None, None),
            ("gemma2", "PASS", None, None), ("gemma2", "FAIL", "compile", "Unsupported: data-dependent branch"),
            ("gemma2", "FAIL", "compile", "Unsupported: data-dependent branch"),
            ("qwen3_moe", "FAIL", "compile", "Unsupported: data-dependent branch"),
            ("mamba", "FAIL", "run", "RuntimeError: cache shape"), ("jamba", "UNTESTED", "twin", "config cannot shrink")]
    rows = []
    for i, (mt, result, stage, cause) in enumerate(spec):
        extra = {"verification": "exact"} if result == "PASS" else {}
        rows.append(results.new_row(model_id=f"tiny/{mt}-{i}", model_type=mt, twin_of=mt, result=result, stage=stage,
                                    cause=cause, **extra))
    return pd.DataFrame(rows)


def assert_teaches(ax):
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()


def legend_matches_bars(ax):
    """Every legend entry has the colour of the bars drawn under its label, and the legend is outside the axes."""
    legend = ax.get_legend()
    drawn = {}
    for container in ax.containers:
        drawn[container.get_label()] = {to_hex(p.get_facecolor()) for p in container.patches}
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        assert drawn[text.get_text()] == {to_hex(handle.get_facecolor())}
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1  # right of the plotting area: covers no bar


def test_pass_rate_per_version_counts_only_tested_rows_and_labels_percentages():
    ax = plots.pass_rate_per_version(frame())
    heights = [round(p.get_height(), 1) for p in ax.patches]
    assert heights == [50.0, 66.7]  # 5.23: 1 of 2; 5.24: 2 of 3 (EXCLUDED is not a test)
    assert [t.get_text() for t in ax.texts] == ["50% (1/2)", "67% (2/3)"]
    assert_teaches(ax)
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0%", "25%", "50%", "75%", "100%"]


def test_pass_rate_with_one_version_pair_still_shows_a_percentage():
    ax = plots.pass_rate_per_version(frame()[frame().library_version == "5.24.0"])
    assert [round(p.get_height(), 1) for p in ax.patches] == [66.7]
    assert [t.get_text() for t in ax.texts] == ["67% (2/3)"]
    assert "transformers 5.24.0" in ax.get_xticklabels()[0].get_text()


def test_failure_stages_are_stacked_per_version_with_integer_ticks_and_a_matching_legend():
    ax = plots.failure_stages_per_version(frame())
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["compile", "oom"]
    legend_matches_bars(ax)
    assert_teaches(ax)
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_yticks())


def test_time_and_memory_scatter_has_a_point_per_tested_row():
    axes = plots.time_and_memory_vs_parameters(frame())
    points = sum(len(c.get_offsets()) for c in axes[0].collections)
    assert points == 5 and axes[0].get_xscale() == "log"
    for ax in axes:
        assert_teaches(ax)
    colours = {to_hex(c.get_facecolor()[0]): c.get_label() for c in axes[1].collections}
    legend = axes[1].get_legend()
    assert {to_hex(h.get_facecolor()[0]): t.get_text() for h, t in zip(legend.legend_handles, legend.get_texts())} == colours


def test_pass_rate_by_family_counts_each_model_once():
    ax = plots.pass_rate_by_family(architectures())
    families = [t.get_text() for t in ax.get_yticklabels()]
    rates = dict(zip(families, (round(p.get_width(), 1) for p in ax.patches)))
    assert rates == {"gemma2": 33.3, "llama": 100.0, "qwen3_moe": 0.0, "mamba": 0.0}  # UNTESTED jamba: not tested
    assert families[-1] == "gemma2"  # most tested on top
    assert "33% (1/3)" in [t.get_text() for t in ax.texts]
    assert_teaches(ax)


def test_causes_bar_ranks_causes_by_architectures_blocked():
    ax = plots.causes_bar(architectures(), top=10)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    widths = [p.get_width() for p in ax.patches]
    assert labels[-1] == "Unsupported: data-dependent branch" and widths[-1] == 2  # gemma2 and qwen3_moe
    assert labels[0] == "RuntimeError: cache shape" and widths[0] == 1
    assert_teaches(ax)
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_xticks())
    legend = ax.get_legend()
    drawn = {to_hex(p.get_facecolor()) for p in ax.patches}
    assert {to_hex(h.get_facecolor()) for h in legend.legend_handles} == drawn
    assert [t.get_text() for t in legend.get_texts()] == ["run", "compile"]
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1


def test_plots_say_when_there_is_nothing_to_draw():
    empty = frame().iloc[0:0]
    for draw in (plots.pass_rate_per_version, plots.failure_stages_per_version, plots.pass_rate_by_family,
                 plots.causes_bar):
        ax = draw(empty)
        assert ax.get_title() and ax.texts and not ax.patches


def test_the_explorers_summary_chart_draws_the_numbers_and_colour_of_pass_rate_by_family():
    """Two drawings of one chart (matplotlib here, a small SVG in the explorer's summary): same families in the same
    order, same labels, same green, and the explorer's PASS labels in that green too."""
    import re

    from neuronhelpers.ui import explorer

    rows = architectures()
    ax = plots.pass_rate_by_family(rows)
    families = [t.get_text() for t in ax.get_yticklabels()][::-1]  # barh draws the first family at the bottom
    labels = [t.get_text() for t in ax.texts][::-1]
    (green,) = {to_hex(p.get_facecolor()) for p in ax.patches}

    table = explorer.view_table("Architectures", rows)
    svg = explorer.render_family_svg(explorer.family_pass_rates(table, "architecture"))
    assert re.findall(r'text-anchor="end">([^<]+)</text>', svg) == families
    assert re.findall(r"<text x=\"[\d.]+\" y=\"[\d.]+\">(\d+% \(\d+/\d+\))</text>", svg) == labels
    assert set(re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', svg)) == {green}  # the bars (the tracks are #eee)
    summary = explorer.render_summary_html("Architectures", table)
    assert re.search(r"\.nh-PASS\{color:(#[0-9a-f]{6})", summary).group(1) == green
