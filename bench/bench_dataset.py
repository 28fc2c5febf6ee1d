"""Benchmark: load a synthetic results dataset of 100k rows over 50 version pairs, then one model's lookup.

    .venv/bin/python bench/bench_dataset.py [--rows 100000] [--pairs 50]

Prints the time of a full load_results() and of one model's lookup across versions (target <= 150 ms),
and their ratio.
"""

import argparse
import random
import tempfile
import time

from neuronhelpers.store import dataset, schema


def synthetic(folder: str, rows: int, pairs: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    models = [f"org{i % 97}/model-{i}" for i in range(rows // pairs)]
    run_py = "# run.py\n" + "x = 1\n" * 200  # realistic size: every row carries its script
    for p in range(pairs):
        compiler_version, library_version = f"2.{20 + p // 10}.{p % 10}", f"5.{p % 25}.0"
        batch = []
        for model in models:
            ok = rng.random() < 0.7
            batch.append(schema.new_row(
                model_id=model, task="text-generation", result="PASS" if ok else "FAIL",
                stage=None if ok else rng.choice(["load", "compile", "run", "oom", "timeout", "mismatch"]),
                verification="exact" if ok else None, error=None if ok else "RuntimeError: synthetic",
                neuron_cores=rng.choice([1, 2, 4, 8, 16]), backend="neuron", compiler="neuronx-cc",
                compiler_version=compiler_version, neuronx_cc=compiler_version, library="transformers",
                library_version=library_version, wall_s=rng.uniform(10, 900),
                peak_memory_bytes=rng.randrange(2**30, 2**36),
                tokens=list(range(32)), run_py=run_py, packages="torch==2.13.0\ntransformers==5.23.0",
            ))
        dataset.write_table_atomic(schema.rows_to_table(batch), f"{folder}/{dataset.version_pair_file(batch[0])}")
    return models


def synthetic_args():
    """--rows and --pairs, the size of the synthetic dataset (shared by the dataset and explorer benches)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=50)
    return parser.parse_args()


def main():
    args = synthetic_args()
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        models = synthetic(folder, args.rows, args.pairs)
        print(f"wrote {args.rows} rows over {args.pairs} version pairs in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        df = dataset.load_results(folder)
        load_s = time.perf_counter() - t0
        target = models[len(models) // 2]
        timings = []
        for _ in range(5):
            t0 = time.perf_counter()
            hits = df[df.model_id == target][["neuronx_cc", "library", "library_version", "neuron_cores", "result"]]
            timings.append(time.perf_counter() - t0)
        lookup_s = min(timings)
        print(f"full load: {load_s * 1000:.0f} ms for {len(df)} rows")
        print(f"lookup of {target} across versions: {lookup_s * 1000:.1f} ms ({len(hits)} rows; target <= 150 ms)")
        print(f"lookup / load ratio: {lookup_s / load_s:.4f}")


if __name__ == "__main__":
    main()
