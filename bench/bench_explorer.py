"""Benchmark: how long the explorer takes to re-render after a filter change, on 100k rows / 50 version pairs.

    .venv/bin/python bench/bench_explorer.py [--rows 100000] [--pairs 50]

A re-render is what a person waits for after typing in the name filter: the view's table, its summary,
the detail picker and one page of the sortable grid. Measured in Trending and Selected (the rankings and the
curated list) and in Architectures, where 300 of the synthetic models are made architecture twins (a
300-row table, paged). Prints the median and worst over the changes (target <= 100 ms), the ratio of the
median to building the widget, and, for reference, a version change (a new version pair: the 100k rows are
filtered again), a header click (sort) and a page turn.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_dataset import synthetic, synthetic_args  # noqa: E402

from neuronhelpers.store import dataset  # noqa: E402
from neuronhelpers.ui.explorer import Explorer  # noqa: E402


def timed(action) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def main():
    args = synthetic_args()
    with tempfile.TemporaryDirectory() as folder:
        models = synthetic(folder, args.rows, args.pairs)
        df = dataset.load_results(folder)
    twins = df["model_id"].isin(models[:300])
    df.loc[twins, "twin_of"] = df.loc[twins, "model_id"].str.split("/").str[1]
    t0 = time.perf_counter()
    ui = Explorer(df)
    build = time.perf_counter() - t0
    timings = []

    def filters(view, texts):
        ui.view.value = view
        for text in texts:
            timings.append(timed(lambda text=text: setattr(ui.name, "value", text)))

    filters("Trending", ["org1", "org12", "model-5", "", "qwen", "org3/model-1003", "", "org9"])
    filters("Selected", ["llama", "", "Qwen"])
    filters("Architectures", ["model-1", "", "model-2", "model-", ""])
    median = statistics.median(timings)
    sort_click = statistics.median(timed(lambda c=c: ui._headers[c].click())
                                   for c in ("result", "wall time (s)", "model"))
    page_turn = statistics.median(timed(lambda: ui.next_page.click()) for _ in range(3))
    assert len(ui.table) == 300, len(ui.table)
    # Compiler versions that have rows with the library version shown: each pick re-filters the 100k rows.
    pairs = df[["compiler_version", "library_version"]].drop_duplicates()
    compilers = [c for c in pairs[pairs.library_version == ui.library.value].compiler_version if c != ui.compiler.value]
    version_change = statistics.median(timed(lambda c=c: setattr(ui.compiler, "value", c)) for c in compilers[:4])
    print(f"{len(df)} rows: widget built in {build * 1000:.0f} ms")
    print(f"filter change re-render: median {median * 1000:.1f} ms, worst {max(timings) * 1000:.1f} ms "
          f"over {len(timings)} changes (target <= 100 ms)")
    print(f"re-render / build ratio: {median / build:.3f}")
    print(f"version change {version_change * 1000:.1f} ms, sort click {sort_click * 1000:.1f} ms, "
          f"page turn {page_turn * 1000:.1f} ms (medians)")


if __name__ == "__main__":
    main()
