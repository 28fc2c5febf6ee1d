"""Benchmark: a CLI sweep with its runs forked from the pre-imported server / the same sweep spawning a fresh Python
per run (issue 40: where a sweep's time went).

    .venv/bin/python bench/bench_forked_sweep.py [--models N]

Each leg runs `neuronhelpers sweep --jobs 2` as a person does, from an environment without HF_HUB_OFFLINE (offline
mode is what the harness gives each run when the Hub cannot be reached): once as today, once with
NEURONHELPERS_FORK_SERVER=0. Each leg has a fresh NEURONHELPERS_HOME (cold references and compile caches); the twins
are built before any timing and shared. Prints seconds per model for each leg, the mean load_s of the rows (what
the imports cost inside run.py), and the ratio forked / spawned last.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuronhelpers.store import dataset
from neuronhelpers.twins import build

MODELS = ["tiny/llama", "tiny/qwen3", "tiny/gpt2", "tiny/olmo2", "tiny/qwen2", "tiny/granite"]


def leg(models: list[str], tmp: Path, twins: Path, name: str, fork: bool) -> tuple[float, float]:
    home = tmp / name
    home.mkdir()
    (home / "twins").symlink_to(twins)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TORCHINDUCTOR_CACHE_DIR")}
    env.update(NEURONHELPERS_HOME=str(home), NEURONHELPERS_FORK_SERVER="1" if fork else "0")
    out = tmp / f"{name}-out"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "neuronhelpers", "sweep", *models, "--jobs", "2", "--out", str(out),
                    "--no-progress"], env=env, check=True, capture_output=True, text=True)
    per_model = (time.perf_counter() - start) / len(models)
    rows = dataset.load_results(out)
    load = statistics.mean(rows["load_s"].dropna()) if "load_s" in rows else float("nan")
    print(f"  {name:8s} {per_model:5.1f} s/model (--jobs 2), mean load_s {load:.2f}, results "
          f"{ {k: int(v) for k, v in rows['result'].value_counts().items()} }")
    return per_model, load


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=len(MODELS), help=f"how many of the {len(MODELS)} twins")
    models = MODELS[: parser.parse_args().models]
    tmp = Path(tempfile.mkdtemp(prefix="bench-forked-sweep-"))
    os.environ["NEURONHELPERS_HOME"] = str(tmp / "build")
    for model in models:
        build.build_twin(model.split("/", 1)[1])
    twins = tmp / "build" / "twins"
    print(f"{len(models)} twins, a CLI sweep with --jobs 2 on {os.cpu_count()} CPUs:")
    spawned, _ = leg(models, tmp, twins, "spawned", fork=False)
    forked, _ = leg(models, tmp, twins, "forked", fork=True)
    print(f"forked / spawned, seconds per model: {forked / spawned:.2f}")


if __name__ == "__main__":
    main()
