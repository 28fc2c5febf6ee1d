"""Benchmark: the wall time the evidence adds to a sweep (issue 23): the eager generate beside every compiled PASS,
and after a compiled failure the eager run on the device (on CPU: the CPU reference, which a failed run skipped).

    .venv/bin/python bench/bench_evidence.py [MODEL ...]

Each model runs once to warm the twin, the compile cache and the reference cache, then alternately with the eager
runs off (NEURONHELPERS_EAGER_MAX_PARAMETERS=0: today's rows) and on (the default), ROUNDS times each. Prints each
model's median harness wall time both ways and, last, the ratio of the totals (evidence on / off).
"""

import os
import statistics
import sys
import tempfile
import time

from neuronhelpers import run_model
from neuronhelpers.core.settings import EAGER_MAX_ENV

DEFAULT_MODELS = ["tiny/llama", "tiny/qwen3", "tiny/gemma2", "tiny/st-bert"]
ROUNDS = 3


def timed(model: str, eager_on: bool) -> tuple[float, dict]:
    if eager_on:
        os.environ.pop(EAGER_MAX_ENV, None)
    else:
        os.environ[EAGER_MAX_ENV] = "0"
    start = time.perf_counter()
    row = run_model(model, workdir=tempfile.mkdtemp(prefix="nh-bench-evidence-"))
    return time.perf_counter() - start, row


def main(models: list[str]) -> None:
    totals = {False: 0.0, True: 0.0}
    for model in models:
        timed(model, True)  # warm: twin, compile cache, reference cache
        seconds = {False: [], True: []}
        for _ in range(ROUNDS):
            for eager_on in (False, True):
                wall, row = timed(model, eager_on)
                seconds[eager_on].append(wall)
        off, on = statistics.median(seconds[False]), statistics.median(seconds[True])
        totals[False] += off
        totals[True] += on
        print(f"{model:18s} {row['result']:5s} evidence {row.get('evidence')!s:26s} eager off {off:6.1f} s, "
              f"on {on:6.1f} s (+{on - off:5.1f} s); speed-up {row.get('speedup')}")
    os.environ.pop(EAGER_MAX_ENV, None)
    print(f"evidence on / off, harness wall time over {len(models)} models (median of {ROUNDS}): "
          f"{totals[True]:.1f} s / {totals[False]:.1f} s = {totals[True] / totals[False]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT_MODELS)
