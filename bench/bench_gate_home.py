"""Benchmark: `make gate`'s sweep in a home a run already warmed / the same sweep in an empty home (why .ci/run gives
the tests and the gate one home).

    .venv/bin/python bench/bench_gate_home.py [--models N]

Takes the first N models of expected/gate_slice.txt (default 8) and sweeps them twice with `--jobs 2`, as the gate
does, into two new results folders: first in an empty NEURONHELPERS_HOME (twins built, CPU references run, every
kernel compiled), then again in the same home (twins, references and compiled kernels found by digest). Prints
seconds per model for each leg and the ratio warm / cold last. It is the bound of what the shared home saves: in CI
the gate finds warm only the twins a test ran with the same parameters.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neuronhelpers.store import dataset

ROOT = Path(__file__).resolve().parents[1]


def gate_models() -> list[str]:
    lines = (ROOT / "expected" / "gate_slice.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def leg(models: list[str], home: Path, out: Path, name: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    env["NEURONHELPERS_HOME"] = str(home)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "neuronhelpers", "sweep", *models, "--jobs", "2", "--timeout", "600",
                    "--out", str(out), "--no-progress"], env=env, check=True, capture_output=True, text=True)
    per_model = (time.perf_counter() - start) / len(models)
    counts = {k: int(v) for k, v in dataset.load_results(out)["result"].value_counts().items()}
    print(f"  {name:5s} {per_model:5.1f} s/model (--jobs 2), results {counts}")
    return per_model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=8, help="how many models of the gate's slice, from its top")
    models = gate_models()[: parser.parse_args().models]
    tmp = Path(tempfile.mkdtemp(prefix="bench-gate-home-"))
    print(f"{len(models)} models of the gate's slice, `sweep --jobs 2` on {os.cpu_count()} CPUs:")
    cold = leg(models, tmp / "home", tmp / "cold-out", "cold")
    warm = leg(models, tmp / "home", tmp / "warm-out", "warm")
    print(f"warm / cold, seconds per model: {warm / cold:.2f}")


if __name__ == "__main__":
    main()
