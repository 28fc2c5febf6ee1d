"""Benchmark: sweep throughput on this machine, the issue's goals T2-T4 measured side by side in one run.

    .venv/bin/python bench/bench_sweep.py [--models N]

T2  harness wall per model / bare `python run.py` + `python run.py --reference` of the same files (warm
    compile cache, no cached references: both sides do the same work)              goal <= 1.10
T3  8-twin sweep --jobs 2 / the same sweep serial (cold compile caches both)        goal <= 0.65
T4  warm-cache rerun of the same sweep / the cold sweep (serial)                    goal <= 0.25

Twins are built before any timing (building is not compiling). Each leg uses a fresh NEURONHELPERS_HOME
where it must be cold. Prints a per-stage breakdown (mean seconds per model) and the ratios last.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuronhelpers.core.backends import get_backend
from neuronhelpers.process import tree
from neuronhelpers.run.compile_cache import cache_env
from neuronhelpers.sweep.local import sweep_models
from neuronhelpers.twins import build

MODELS = ["tiny/llama", "tiny/qwen3", "tiny/gpt2", "tiny/olmo2", "tiny/qwen2", "tiny/smollm3", "tiny/granite",
          "tiny/phi3"]


def use_home(home: Path, twin_home: Path) -> None:
    os.environ["NEURONHELPERS_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "twins").exists():
        (home / "twins").symlink_to(twin_home)  # the twins are shared: only caches are cold or warm
    tree.reset_fork_server()  # a server started under the previous home would carry its environment


def timed_sweep(models, out: Path, **kwargs):
    start = time.perf_counter()
    rows = sweep_models(models, out, progress=False, **kwargs)
    return time.perf_counter() - start, rows


def breakdown(label: str, rows: list[dict], total: float) -> None:
    def mean(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return statistics.mean(values) if values else 0.0

    print(f"  {label:28s} {total / len(rows):5.1f} s/model: run.py {mean('wall_s'):.1f} (load {mean('load_s'):.2f}, "
          f"compile {mean('compile_s'):.2f}, generate {mean('generate_s'):.2f}), reference and harness "
          f"{total / len(rows) - mean('wall_s'):.1f}; retraced "
          f"{sum(bool(r.get('retraced')) for r in rows)}/{len(rows)}, results {sorted({r['result'] for r in rows})}")


def bare_runs(rows: list[dict], folder: Path) -> float:
    """`python3 run.py` then `python3 run.py --reference` for each stored run.py, as a user runs them."""
    env = {**os.environ, **cache_env(get_backend("cpu"))}
    total = 0.0
    for i, row in enumerate(rows):
        work = folder / f"bare-{i}"
        work.mkdir(parents=True)
        (work / "run.py").write_text(row["run_py"])
        for args in ([], ["--reference"]):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "run.py", *args], cwd=work, env=env, capture_output=True, text=True)
            total += time.perf_counter() - start
            assert proc.returncode == 0, proc.stderr[-2000:]
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=8, help="how many of the 8 twins to sweep")
    models = MODELS[: parser.parse_args().models]
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        twin_home = tmp / "twins"
        os.environ["NEURONHELPERS_HOME"] = str(tmp)  # the twins are built once, into tmp/twins
        for model in models:
            build.build_twin(model)

        use_home(tmp / "serial", twin_home)
        cold_serial, rows_cold = timed_sweep(models, tmp / "out-serial")
        warm_serial, rows_warm = timed_sweep(models, tmp / "out-serial", rerun=True)
        use_home(tmp / "jobs2", twin_home)
        cold_jobs2, rows_jobs2 = timed_sweep(models, tmp / "out-jobs2", jobs=2)

        # T2: the harness (fork server) against bare processes, same warm compile cache, references not cached.
        use_home(tmp / "serial", twin_home)
        shutil.rmtree(tmp / "serial" / "reference-cache", ignore_errors=True)
        harness_s, rows_t2 = timed_sweep(models, tmp / "out-t2")
        bare_s = bare_runs(rows_t2, tmp / "bare")
    finally:
        tree.reset_fork_server()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{len(models)} twins on {get_backend('auto').name}, fork server "
          f"{'on' if tree.fork_server_enabled() else 'off'}")
    breakdown("cold, serial", rows_cold, cold_serial)
    breakdown("cold, --jobs 2", rows_jobs2, cold_jobs2)
    breakdown("warm rerun, serial", rows_warm, warm_serial)
    breakdown("warm, references not cached", rows_t2, harness_s)
    print(f"  bare python run.py + run.py --reference: {bare_s / len(models):.1f} s/model")
    print(f"T2 harness / bare processes: {harness_s / bare_s:.2f} (goal <= 1.10)")
    print(f"T3 --jobs 2 / serial (cold): {cold_jobs2 / cold_serial:.2f} (goal <= 0.65)")
    print(f"T4 warm rerun / cold (serial): {warm_serial / cold_serial:.2f} (goal <= 0.25)")


if __name__ == "__main__":
    main()
