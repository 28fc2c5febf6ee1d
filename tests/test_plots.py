"""The plots draw what the data says and teach it: titles, labelled axes, integer ticks for counts, percentages
for rates, legends that match the colours drawn and sit outside the bars (checked on the artists, not on pixels)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from neuronhelpers.store import schema  # noqa: E402
from neuronhelpers.ui import plots


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
        rows.append(schema.new_row(model_id=f"m{i}", result=result, stage=stage, compiler="neuronx-cc",
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
            ("mamba", "FAIL", "run", "RuntimeError: cache shape"),
            ("jamba", "UNTESTED", "twin", "config cannot shrink")]
    rows = []
    for i, (mt, result, stage, cause) in enumerate(spec):
        extra = {"verification": "exact"} if result == "PASS" else {}
        rows.append(schema.new_row(model_id=f"tiny/{mt}-{i}", model_type=mt, twin_of=mt, result=result, stage=stage,
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
    for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=False):
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
    assert {to_hex(h.get_facecolor()[0]): t.get_text()
            for h, t in zip(legend.legend_handles, legend.get_texts(), strict=False)} == colours


def test_pass_rate_by_family_counts_each_model_once():
    ax = plots.pass_rate_by_family(architectures())
    families = [t.get_text() for t in ax.get_yticklabels()]
    rates = dict(zip(families, (round(p.get_width(), 1) for p in ax.patches), strict=False))
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


def test_divergence_margins_puts_each_token_row_against_its_dtypes_tolerance():
    rows = pd.DataFrame([
        schema.new_row(model_id="near", result="PASS", verification="near_tie", first_divergence=3,
                        divergence_margin=0.1, dtype="bfloat16"),
        schema.new_row(model_id="far", result="FAIL", stage="mismatch", first_divergence=1, divergence_margin=3.0,
                        dtype="bfloat16"),
        schema.new_row(model_id="f32", result="FAIL", stage="mismatch", first_divergence=2, divergence_margin=0.08,
                        dtype="float32"),
        schema.new_row(model_id="exact", result="PASS", verification="exact", dtype="bfloat16"),  # no margin
        schema.new_row(model_id="emb", result="FAIL", stage="mismatch", tolerance=1e-4, max_abs_diff=0.3,
                        dtype="float32"),  # embeddings: no margin
        schema.new_row(model_id="broken", result="FAIL", stage="compile", dtype="float32")])
    ax = plots.divergence_margins(rows)
    assert_teaches(ax)
    points = {c.get_label(): (to_hex(c.get_facecolor()[0]), sorted(y for _, y in c.get_offsets()))
              for c in ax.collections if isinstance(c, PathCollection)}
    assert points == {"PASS (near_tie)": (plots.PASS_COLOR, [0.1]), "FAIL (mismatch)": (plots.FAIL_COLOR, [0.08, 3.0])}
    lines = {c.get_label(): {y for segment in c.get_segments() for _, y in segment}
             for c in ax.collections if isinstance(c, LineCollection)}
    assert lines == {"tolerance, float32: 0.001": {1e-3}, "tolerance, bfloat16: 0.25": {0.25}}  # NEAR_TIE_MARGIN
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert len(ticks) == 3 and ticks[0].startswith("f32") and "token 2" in ticks[0]  # sorted by tolerance, then margin
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["PASS (near_tie)", "FAIL (mismatch)",
                                                          "tolerance, float32: 0.001", "tolerance, bfloat16: 0.25"]
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1


def test_divergence_margins_takes_row_dicts_and_says_when_there_is_nothing_to_draw():
    ax = plots.divergence_margins([{"model_id": "m", "result": "PASS", "verification": "near_tie",
                                    "divergence_margin": 0.01, "first_divergence": 0, "dtype": "float16"}])
    assert sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)) == 1
    for empty in ([], pd.DataFrame([schema.new_row(model_id="x", result="PASS", verification="exact")])):
        ax = plots.divergence_margins(empty)
        assert ax.get_title() and ax.texts and not ax.collections


def test_a_model_in_two_joined_folders_counts_once_per_version_pair():
    """A results folder joined with the catalog holds some models twice: the pass rate counts each once."""
    rows = frame()
    older = rows.iloc[[1]].assign(result="PASS", stage=None, timestamp=pd.Timestamp("2020-01-01", tz="UTC"))
    joined = pd.concat([older, rows], ignore_index=True)  # m1 twice under 5.23.0: its newest row (FAIL) counts
    ax = plots.pass_rate_per_version(joined)
    assert [t.get_text() for t in ax.texts] == ["50% (1/2)", "67% (2/3)"]
    assert sum(p.get_height() for p in plots.failure_stages_per_version(joined).patches) == 2


def test_verdicts_per_release_stacks_pass_fail_and_untested_per_library_and_compiler():
    rows = frame()
    rows = pd.concat([rows, pd.DataFrame([schema.new_row(model_id="m9", result="UNTESTED", stage="twin",
                                                          compiler="neuronx-cc", compiler_version="2.21",
                                                          library="transformers", library_version="5.24.0")])])
    ax = plots.verdicts_per_release(rows)
    assert_teaches(ax)
    legend_matches_bars(ax)
    widths = {c.get_label(): [round(p.get_width()) for p in c.patches] for c in ax.containers}
    # bars bottom-up: 5.23.0 (1 PASS, 1 FAIL), then 5.24.0 (2 PASS, 1 FAIL, 1 UNTESTED); EXCLUDED is not drawn
    assert widths == {"PASS": [1, 2], "FAIL": [1, 1], "UNTESTED": [0, 1]}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["transformers 5.23.0 / neuronx-cc 2.21",
                                                            "transformers 5.24.0 / neuronx-cc 2.21"]


def test_rank_layout_draws_each_ranks_memory_and_says_what_it_holds():
    rows = {"tiny/llama": {"parallelism": "tp", "peak_memory_per_rank": [300 * 2**20, 310 * 2**20]},
            "tiny/qwen3_moe": {"parallelism": "tp+ep", "peak_memory_per_rank": [400 * 2**20, 420 * 2**20]},
            "single": {"parallelism": "none", "peak_memory_per_rank": None}}
    layouts = {"tiny/llama": {"attention heads per rank": 2, "key/value heads per rank": 1, "experts per rank": None},
               "tiny/qwen3_moe": {"attention heads per rank": 2, "key/value heads per rank": 1, "experts per rank": 4}}
    ax = plots.rank_layout(rows, layouts)
    assert_teaches(ax)
    heights = {c.get_label(): [round(p.get_height()) for p in c.patches] for c in ax.containers}
    assert heights == {"tiny/llama (tp, 2 ranks)": [300, 310], "tiny/qwen3_moe (tp+ep, 2 ranks)": [400, 420]}
    notes = [t.get_text() for t in ax.texts]
    assert notes.count("2 heads\n1 kv") == 2 and notes.count("2 heads\n1 kv\n4 experts") == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rank 0", "rank 1"]
    assert plots.rank_layout({"single": rows["single"]}, {}).texts  # nothing sharded: says so


def test_causes_that_shorten_alike_keep_their_ends_so_no_two_bars_share_a_label():
    shared = "RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton dimension "
    causes = [shared + "3 @ transformers/models/*/modeling_*.py:forward", shared + "5 @ torch/_inductor/lowering.py:x",
              "KeyError: 'x'"]
    labels = plots.cause_labels(causes)
    assert len(set(labels)) == 3 and labels[2] == "KeyError: 'x'"
    assert labels[0].endswith("modeling_*.py:forward") and labels[1].endswith("lowering.py:x")
    assert all(len(label) <= 72 for label in labels)
