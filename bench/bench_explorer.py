"""Benchmark: how long the explorer takes to re-render after a filter change, on 100k rows / 50 version pairs.

    .venv/bin/python bench/bench_explorer.py [--rows 100000] [--pairs 50]

Prints the median and worst re-render time over several filter changes (target <= 100 ms), and the ratio
of the median to the time of building the widget.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_dataset import synthetic, synthetic_args  # noqa: E402

from neuronhelpers import dataset  # noqa: E402
from neuronhelpers.explorer import Explorer  # noqa: E402


def main():
    args = synthetic_args()
    with tempfile.TemporaryDirectory() as folder:
        synthetic(folder, args.rows, args.pairs)
        df = dataset.load_results(folder)
    t0 = time.perf_counter()
    ui = Explorer(df)
    build = time.perf_counter() - t0
    ui.view.value = "Trending"
    timings = []
    for text in ["org1", "org12", "model-5", "", "qwen", "org3/model-1003", "", "org9"]:
        t0 = time.perf_counter()
        ui.name.value = text
        timings.append(time.perf_counter() - t0)
    ui.view.value = "Selected"
    for text in ["llama", "", "Qwen"]:
        t0 = time.perf_counter()
        ui.name.value = text
        timings.append(time.perf_counter() - t0)
    median = statistics.median(timings)
    print(f"{len(df)} rows: widget built in {build * 1000:.0f} ms")
    print(f"filter change re-render: median {median * 1000:.1f} ms, worst {max(timings) * 1000:.1f} ms "
          f"over {len(timings)} changes (target <= 100 ms)")
    print(f"re-render / build ratio: {median / build:.3f}")


if __name__ == "__main__":
    main()
