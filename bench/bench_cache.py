"""Benchmark: what a synced compile cache saves a sweep.

    .venv/bin/python bench/bench_cache.py [MODEL ...]

Runs the same small sweep twice into fresh result folders: first with an empty compile cache (cold),
then on a fresh home whose empty cache was filled by `cache sync` from the first run's published cache
(warm), then once more on that home (compile cache and CPU references both warm, as the next release's
sweep on the same machine is). Prints the wall times, where the time goes, and the ratios (target <= 0.20).
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from neuronhelpers import sweep_models
from neuronhelpers.core.backends import get_backend
from neuronhelpers.run import compile_cache
from neuronhelpers.twins import build

DEFAULT_MODELS = ["tiny/llama", "tiny/qwen3", "tiny/gpt2", "tiny/olmo2"]


def timed_sweep(models, home: Path, out: Path):
    os.environ["NEURONHELPERS_HOME"] = str(home)
    for model in models:  # building twins is not compilation: keep it out of the timing
        build.build_twin(model)
    start = time.perf_counter()
    rows = sweep_models(models, out, progress=False)
    return time.perf_counter() - start, rows


def main():
    models = sys.argv[1:] or DEFAULT_MODELS
    backend = get_backend("auto")
    os.environ.pop(backend.cache_env, None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cold_s, cold = timed_sweep(models, tmp / "home-cold", tmp / "results-cold")
        target, files = compile_cache.publish_cache(str(tmp / "published"), backend)
        os.environ["NEURONHELPERS_HOME"] = str(tmp / "home-warm")
        compile_cache.sync_cache(str(tmp / "published"), backend)
        warm_s, warm = timed_sweep(models, tmp / "home-warm", tmp / "results-warm")
        # The next release's sweep on the same machine: compile cache and CPU references both warm.
        again_s, again = timed_sweep(models, tmp / "home-warm", tmp / "results-again")
    print(f"{len(models)} models on {backend.name}; published cache: {files} files")
    print(f"cold sweep: {cold_s:.1f} s   warm sweep (after cache sync): {warm_s:.1f} s")
    print(f"same home again (compile cache and reference cache warm): {again_s:.1f} s")
    for label, rows, total in (("cold", cold, cold_s), ("warm", warm, warm_s), ("again", again, again_s)):
        mean = {k: statistics.mean(r[k] for r in rows if r.get(k) is not None)
                for k in ("wall_s", "load_s", "compile_s", "generate_s")}
        hits = sum(bool(r["cache_hit"]) for r in rows)
        print(f"  {label}: per model run.py {mean['wall_s']:.1f} s (load {mean['load_s']:.1f}, compile "
              f"{mean['compile_s']:.1f}, generate {mean['generate_s']:.2f}); rest of the model's time "
              f"(interpreter, imports, reference run) {total / len(rows) - mean['wall_s']:.1f} s;"
              f" cache hits {hits}/{len(rows)}; cached references {sum(bool(r['reference_cached']) for r in rows)};"
              f" results {sorted({r['result'] for r in rows})}")
    print(f"warm / cold wall-time ratio: {warm_s / cold_s:.2f} (target <= 0.20)")
    print(f"again / cold wall-time ratio: {again_s / cold_s:.2f}")


if __name__ == "__main__":
    main()
