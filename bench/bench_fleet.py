"""Benchmark: a sweep on a 2-node Ray cluster against the same sweep run locally.

    .venv/bin/python bench/bench_fleet.py [--rounds N] [MODEL ...]

Starts a Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head without CPUs and two worker nodes
of 1 CPU each), warms one home (twins built, graphs compiled, CPU references cached) with a local sweep, then
runs the same command line twice per round into fresh folders, each as a fresh process, as a user would:
``neuronhelpers sweep MODELS --rerun --jobs 2`` (two models at a time on disjoint CPUs) and
``neuronhelpers sweep MODELS --rerun --ray ADDRESS`` (two tasks at a time, one per node). Prints whether the
rows are identical (result, stage, verification, cores, parallelism, tokens, text), the wall times and the
ratio Ray / local (the cluster's start-up is printed apart: a fleet starts once per release).
"""

import argparse
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ["tiny/llama", "tiny/qwen2", "tiny/qwen3", "tiny/gpt2", "tiny/smollm3", "tiny/granite",
                  "tiny/olmo2", "tiny/phi3"]
COMPARED = ["result", "stage", "verification", "neuron_cores", "parallelism", "tokens", "text", "reference_tokens",
            "backend", "compiler_version", "library_version"]


def cli_sweep(models, out: Path, *extra) -> float:
    cmd = [sys.executable, "-m", "neuronhelpers", "sweep", *models, "--out", str(out), "--rerun", "--no-progress",
           *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return took


def run_stats(out: Path) -> str:
    from neuronhelpers.store.dataset import load_results

    df = load_results(out)
    return (f"mean run.py {df.wall_s.mean():.1f} s, compile {df.compile_s.mean():.1f} s, "
            f"cache hits {int(df.cache_hit.sum())}/{len(df)}, cached references "
            f"{int(df.reference_cached.sum())}/{len(df)}")


def rows(out: Path) -> dict:
    from neuronhelpers.store.dataset import load_results

    df = load_results(out).set_index("model_id")
    return {m: {c: (list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v)
                for c, v in df.loc[m, COMPARED].items()} for m in df.index}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ.update(NEURONHELPERS_HOME=str(tmp / "home"), HF_HUB_OFFLINE="1", NEURONHELPERS_BACKEND="cpu")
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        import ray
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
        from ray.cluster_utils import Cluster

        _enable_token_auth()  # the nodes and every driver started from here share the token in the environment
        start = time.perf_counter()
        warm_s = cli_sweep(args.models, tmp / "warm-up", "--jobs", "2")
        print(f"warm-up (twins, compiled graphs, CPU references): {warm_s:.1f} s")
        start = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, object_store_memory=100 * 2**20,
                                                                    include_dashboard=False))
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=1, object_store_memory=100 * 2**20)
            cluster.wait_for_nodes()
            print(f"2-node Ray cluster started in {time.perf_counter() - start:.1f} s")
            local_s, ray_s = [], []
            for i in range(args.rounds):
                local_s.append(cli_sweep(args.models, tmp / f"local-{i}", "--jobs", "2"))
                ray_s.append(cli_sweep(args.models, tmp / f"ray-{i}", "--ray", cluster.address))
                print(f"round {i + 1}: local --jobs 2 {local_s[-1]:.1f} s, --ray (2 nodes) {ray_s[-1]:.1f} s, "
                      f"ratio {ray_s[-1] / local_s[-1]:.2f}")
                print(f"  local: {run_stats(tmp / f'local-{i}')}\n  ray:   {run_stats(tmp / f'ray-{i}')}")
        finally:
            ray.shutdown()
            cluster.shutdown()
        local, fleet = rows(tmp / "local-0"), rows(tmp / "ray-0")
        same = local == fleet
        print(f"{len(args.models)} models; rows identical (local vs Ray, {', '.join(COMPARED)}): {same}")
        for model in sorted(local):
            r = fleet.get(model, {})
            print(f"  {model:14s} local {local[model]['result']} ({local[model]['verification']}) "
                  f"ray {r.get('result')} ({r.get('verification')}) tokens equal: "
                  f"{local[model]['tokens'] == r.get('tokens')}")
        print(f"wall time: local {' '.join(f'{s:.1f}' for s in local_s)} s; Ray "
              f"{' '.join(f'{s:.1f}' for s in ray_s)} s; Ray / local: {sum(ray_s) / sum(local_s):.2f}")
        logging.shutdown()


if __name__ == "__main__":
    main()
