"""Benchmark: `make demo` on a fresh clone, typed as a newcomer types it. It prints each phase's minutes, the total,
and when the first verdict appeared, against issue 57's goals: 6 minutes in all, the first verdict within 3.

    python3 bench/bench_demo.py [--runs N] [--keep] [--pip-cache]

Each run makes a `git clone` of this checkout's HEAD into a temporary folder, with an empty NEURONHELPERS_HOME and
no installer cache (pip's nor uv's; --pip-cache keeps them), then runs `make demo`. It prints the demo's own phases line
per run, then the ratios last: total / 6 minutes, and first verdict / 3 minutes. The figures measured are in
bench/demo_measured.md.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_TOTAL_S, GOAL_FIRST_S = 6 * 60, 3 * 60
PHASES = re.compile(r"^make demo: (?P<phases>.*); (?P<total>\d+:\d\d) in all(?:; the first verdict (?P<first>\d+:\d\d) "
                    r"after it began)?$", re.M)


def seconds(minutes: str) -> int:
    m, s = minutes.split(":")
    return int(m) * 60 + int(s)


def one_run(work: Path, pip_cache: bool) -> dict:
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "NEURONHELPERS_HOME": str(work / "home")}
    if not pip_cache:
        env.update(PIP_NO_CACHE_DIR="1", UV_NO_CACHE="1")  # neither installer reads a cache
    start = time.monotonic()
    proc = subprocess.run(["make", "demo"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    (work / "demo.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    found = PHASES.search(proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"make demo failed (exit {proc.returncode}) or printed no phases line: see {work / 'demo.log'}")
    return {"line": found.group(0), "total": seconds(found["total"]), "wall": wall,
            "first": seconds(found["first"]) if found["first"] else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep each run's clone, home and log")
    parser.add_argument("--pip-cache", action="store_true", help="let pip use its cache (as after an install)")
    args = parser.parse_args()
    results = []
    for i in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="bench-demo-"))
        try:
            result = one_run(work, args.pip_cache)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        print(f"run {i + 1}: {result['line']} (make's own wall {result['wall']:.0f} s)", flush=True)
        results.append(result)
    total = max(r["total"] for r in results)
    firsts = [r["first"] for r in results if r["first"] is not None]
    print(f"slowest total / 6 minutes: {total / GOAL_TOTAL_S:.2f}")
    if firsts:
        print(f"slowest first verdict / 3 minutes: {max(firsts) / GOAL_FIRST_S:.2f}")


if __name__ == "__main__":
    main()
