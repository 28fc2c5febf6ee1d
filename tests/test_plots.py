"""The plots draw what the data says (checked on the artists, not on pixels)."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from neuronhelpers import plots, results  # noqa: E402


def frame():
    rows = []
    for i, (result, stage, lib) in enumerate([("PASS", None, "5.23.0"), ("FAIL", "compile", "5.23.0"),
                                              ("PASS", None, "5.24.0"), ("PASS", None, "5.24.0"),
                                              ("FAIL", "oom", "5.24.0"), ("EXCLUDED", None, "5.24.0")]):
        extra = {"verification": "exact"} if result == "PASS" else {}
        rows.append(results.new_row(model_id=f"m{i}", result=result, stage=stage, compiler="neuronx-cc",
                                    compiler_version="2.21", library_version=lib, parameters=10**(8 + i),
                                    wall_s=10.0 * (i + 1), peak_memory_bytes=2**30 * (i + 1), **extra))
    return pd.DataFrame(rows)


def test_pass_rate_per_version_counts_only_tested_rows():
    ax = plots.pass_rate_per_version(frame())
    heights = [round(p.get_height(), 1) for p in ax.patches]
    assert heights == [50.0, 66.7]  # 5.23: 1 of 2; 5.24: 2 of 3 (EXCLUDED is not a test)


def test_failure_stages_are_stacked_per_version():
    ax = plots.failure_stages_per_version(frame())
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["compile", "oom"]


def test_time_and_memory_scatter_has_a_point_per_tested_row():
    axes = plots.time_and_memory_vs_parameters(frame())
    points = sum(len(c.get_offsets()) for c in axes[0].collections)
    assert points == 5 and axes[0].get_xscale() == "log"
