"""Benchmark: the time remedy runs add to a catalog sweep, as a share of that sweep (issue 49's goal: under a third).

    .venv/bin/python bench/bench_remedies.py [--catalog catalog] [--per-stratum 6] [--seed 0]

The catalog's rows of this venv's version pair fall in strata by what a sweep does with them: PASS, FAIL with a
remedy ladder (its cause has remedies to try), FAIL without one, and the rest (UNTESTED, EXCLUDED). A seeded sample of
each stratum runs as a sweep runs it (``sweep.local.run_one``: the unmodified run, timed; then, for a FAIL, its
remedies, timed apart), in a fresh home: cold compile caches and no cached references, as for a new compiler release.
The pair's sweep time is each stratum's mean unmodified seconds times its row count; the remedies' time is the ladder
stratum's mean remedy seconds times its row count. Prints both and their ratio last.
"""

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.settings import home as neuronhelpers_home
from neuronhelpers.core.versions import distribution_version
from neuronhelpers.process import tree
from neuronhelpers.recipes.remedies import remedies_for
from neuronhelpers.run.harness import run_model
from neuronhelpers.run.remedies import try_remedies
from neuronhelpers.store.dataset import load_results, newest_per_model
from neuronhelpers.sweep.local import prepare_run


def stratum(row) -> str:
    if row["result"] == vocab.PASS:
        return "PASS"
    if row["result"] == vocab.FAIL:  # the rule try_remedies applies: a transformers FAIL whose cause has a ladder
        laddered = (row["library"] == vocab.TRANSFORMERS and row["stage"] != vocab.STAGE_REFERENCE
                    and bool(remedies_for(row["cause"])))
        return "FAIL with a remedy ladder" if laddered else "FAIL, no remedy ladder"
    return "UNTESTED or EXCLUDED"


def timed_model(model_id: str, workdir: Path) -> tuple[float, float, str, list]:
    start = time.perf_counter()
    planned = prepare_run(model_id, backend="cpu")
    if isinstance(planned, dict):
        return time.perf_counter() - start, 0.0, planned["result"], []
    row = run_model(planned, workdir=workdir / "plain")
    plain_s = time.perf_counter() - start
    start = time.perf_counter()
    tried = try_remedies(planned, row, workdir=workdir / "remedies")
    return plain_s, time.perf_counter() - start, row["result"], tried


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", default="catalog")
    parser.add_argument("--per-stratum", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = load_results(args.catalog)
    pair = rows[(rows["compiler_version"] == distribution_version("torch"))
                & (rows["transformers"] == distribution_version("transformers"))]
    pair = newest_per_model(pair).copy()
    if pair.empty:
        raise SystemExit(f"{args.catalog} holds no row of this venv's pair (torch {distribution_version('torch')}, "
                         f"transformers {distribution_version('transformers')}): run this with that pair's venv")
    pair["stratum"] = pair.apply(stratum, axis=1)
    home = Path(tempfile.mkdtemp(prefix="bench-remedies-"))
    for shared in ("twins", "shelf"):  # built twins and installed checkpoints; compile and reference caches are cold
        (home / shared).symlink_to(neuronhelpers_home() / shared)
    os.environ["NEURONHELPERS_HOME"] = str(home)
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    tree.reset_fork_server()
    plain_total = remedies_total = 0.0
    try:
        for name, group in pair.groupby("stratum"):
            ids = sorted(group["model_id"])
            sample = random.Random(args.seed).sample(ids, min(args.per_stratum, len(ids)))
            plain, remedies = [], []
            for i, model_id in enumerate(sample):
                plain_s, remedy_s, result, tried = timed_model(model_id, home / "runs" / f"{name[:4]}-{i}")
                plain.append(plain_s)
                remedies.append(remedy_s)
                print(f"  {name:22s} {model_id:48s} {result:9s} unmodified {plain_s:5.1f} s, remedies {remedy_s:5.1f} s"
                      f" {[(t['remedy'], t['result']) for t in tried]}", flush=True)
            plain_total += statistics.mean(plain) * len(group)
            remedies_total += statistics.mean(remedies) * len(group)
            print(f"{name}: {len(group)} rows in the pair, {len(sample)} run: unmodified "
                  f"{statistics.mean(plain):.1f} s/model, remedies {statistics.mean(remedies):.1f} s/model")
    finally:
        tree.reset_fork_server()
        shutil.rmtree(home, ignore_errors=True)
    print(f"pair of torch {distribution_version('torch')}, transformers {distribution_version('transformers')}: "
          f"{len(pair)} rows; sweep (estimated) {plain_total / 60:.1f} min, remedy runs {remedies_total / 60:.1f} min")
    print(f"remedy runs / unmodified sweep: {remedies_total / plain_total:.2f} (goal < 0.33)")


if __name__ == "__main__":
    main()
