"""The ``neuronhelpers`` command line (also ``python -m neuronhelpers``)."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import UserError


def _json_default(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def cmd_run(args) -> int:
    from .harness import run_model, summary_line

    row = run_model(args.model, backend=args.backend, dtype=args.dtype, timeout=args.timeout,
                    trust_remote_code=args.trust_remote_code, cores=args.cores, judge_model=args.judge_model)
    if args.json:
        print(json.dumps(row, default=_json_default))
    else:
        print(summary_line(row))
        if row["result"] != "PASS" and args.verbose and row.get("traceback"):
            print(row["traceback"], file=sys.stderr)
    return 0 if row["result"] == "PASS" else 1


def _sweep_and_summarise(models: list[str], args, include_excluded: bool) -> int:
    import warnings

    from .backends import get_backend
    from .results import DatasetWarning, load_results
    from .sweep import summary_frame, sweep

    backend = get_backend(args.backend)
    memory = int(args.memory_limit_gb * 2**30) if args.memory_limit_gb else None
    print(f"sweeping {len(models)} models on backend '{backend.name}' into {args.out}/ (32 greedy tokens each, verified)")
    rows = sweep(models, args.out, backend=backend, jobs=args.jobs, timeout=args.timeout, rerun=args.rerun,
                 progress=not args.no_progress, memory_limit_bytes=memory, include_excluded=include_excluded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        df = load_results(args.out)
    from .sweep import excluded_rows

    wanted = set(models) | {r["model_id"] for r in rows}
    if include_excluded:
        wanted |= {r["model_id"] for r in excluded_rows(backend)}
    shown = df[df.model_id.isin(wanted) & (df.backend == backend.name)].sort_values("model_id")
    print(summary_frame(shown).to_string(index=False))
    counts = shown.result.value_counts().to_dict()
    print(f"{len(rows)} run now, {len(shown)} recorded: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(f"Next: the rows are in {args.out}/data/ (pandas: pd.read_parquet('{args.out}/data')); "
          f"`neuronhelpers run MODEL --json` for one model; `neuronhelpers render MODEL` for its run.py.")
    return 0


def cmd_sweep(args) -> int:
    from .sweep import read_model_file, selected_models
    from .twins import TWINS

    models = list(args.models)
    if args.file:
        models += read_model_file(args.file)
    if args.all_twins:
        models += [f"tiny/{t}" for t in TWINS]
    use_selected = args.selected or not models
    if use_selected:
        models += selected_models(real=args.real)
    return _sweep_and_summarise(models, args, include_excluded=use_selected)


def cmd_demo(args) -> int:
    """The main job on its built-in default: sweep the Selected list's twins into ./results and summarise."""
    from .card import write_card
    from .sweep import selected_models

    code = _sweep_and_summarise(selected_models(real=False), args, include_excluded=True)
    print(f"Dataset card: {write_card(args.out)}")
    return code


def cmd_plan(args) -> int:
    from .backends import get_backend
    from .models import resolve_model
    from .plan import plan_model

    ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code)
    backend = get_backend(args.backend)
    print(f"{ref.model_id} on {backend.name}:")
    print(plan_model(ref, backend, dtype=args.dtype, forced=args.cores).describe())
    return 0


def cmd_diff(args) -> int:
    from .diff import diff_results, load_side

    changes = diff_results(load_side(args.old), load_side(args.new), time_threshold=args.time_threshold,
                           memory_threshold=args.memory_threshold)
    if changes.empty:
        print("no changes")
        return 0
    counts = changes.change.astype(str).value_counts()
    print(", ".join(f"{counts[c]} {c}" for c in changes.change.cat.categories if c in counts))
    with __import__("pandas").option_context("display.max_colwidth", 80, "display.width", 200):
        print(changes.dropna(axis=1, how="all").to_string(index=False))
    return 0


def cmd_publish(args) -> int:
    from .publish import publish

    print(publish(args.folder, args.repo, dry_run=args.dry_run).describe(args.dry_run))
    return 0


def cmd_contribute(args) -> int:
    from .publish import contribute

    print(contribute(args.rows, args.repo, dry_run=args.dry_run).describe(args.dry_run))
    return 0


def cmd_check(args) -> int:
    from .diff import check_expected, expected_frame, read_expected
    from .results import load_results

    actual = load_results(args.results)
    if args.write:
        expected_frame(actual).to_csv(args.expected, index=False)
        print(f"wrote {args.expected} ({len(actual)} models)")
        return 0
    problems = check_expected(read_expected(args.expected), actual)
    for line in problems:
        print(f"REGRESSION {line}")
    print(f"{len(problems)} regression(s) against {args.expected}")
    return 1 if problems else 0


def cmd_app(args) -> int:
    """Serve the explorer as a web page with Voila on localhost."""
    import os
    import shutil
    import subprocess
    from importlib import resources

    from .results import load_results

    load_results(args.results)  # a clear error now rather than a broken page later
    voila = shutil.which("voila", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if voila is None:
        raise UserError("voila is not installed: pip install voila (it is part of `make install`)")
    notebook = str(resources.files("neuronhelpers.app").joinpath("explorer.ipynb"))
    env = {**os.environ, "NEURONHELPERS_RESULTS": os.path.abspath(args.results)}
    print(f"serving the explorer on http://127.0.0.1:{args.port}/ (Ctrl-C to stop)", flush=True)
    cmd = [voila, notebook, f"--port={args.port}", "--no-browser", "--Voila.ip=127.0.0.1",
           "--show_tracebacks=False", "--theme=light"]
    return subprocess.call(cmd, env=env)


def cmd_cache(args) -> int:
    from .backends import get_backend
    from .cache import cache_dir, current_key, publish_cache, sync_cache, sync_command
    from .versions import compiler_for

    backend = get_backend(args.backend)
    if args.action != "show" and not args.location:
        raise UserError(f"cache {args.action} needs a location: a folder or hf://buckets/NAMESPACE/NAME")
    if args.action == "sync":
        folder, files = sync_cache(args.location, backend)
        print(f"synced {current_key(backend)} from {args.location} into {folder} ({files} files)")
    elif args.action == "publish":
        target, files = publish_cache(args.location, backend)
        print(f"published {files} files to {target}")
    else:
        folder = cache_dir(backend)
        files = sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0
        print(f"{folder} ({files} files, {current_key(backend)})")
        print("prebuilt cache for this compiler version:", sync_command(*compiler_for(backend)))
    return 0


def cmd_rankings(args) -> int:
    """Show which rankings the explorer uses; --refresh fetches them from the Hub and saves a dated snapshot."""
    from .hub import fetch_rankings, load_rankings, ranking_label, save_snapshot

    if args.refresh:
        try:
            path = save_snapshot(fetch_rankings(limit=args.limit))
            print(f"saved {path}")
        except Exception as exc:  # offline or rate limited: say so, keep the last snapshot
            print(f"neuronhelpers: could not refresh the rankings ({type(exc).__name__}); "
                  f"the explorer keeps using the {ranking_label(load_rankings())}", file=sys.stderr)
            return 1
    frame = load_rankings()
    print(f"{ranking_label(frame)}: " + ", ".join(
        f"{view}/{task} {len(group)}" for (view, task), group in frame.groupby(["view", "task"])))
    return 0


def cmd_render(args) -> int:
    from .backends import get_backend
    from .models import resolve_model
    from .recipe import recipe_params, render_requirements, render_run_py

    from .plan import plan_model

    ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code)
    backend = get_backend(args.backend)
    if args.requirements:
        print(render_requirements(backend, ref.task), end="")
        return 0
    plan = plan_model(ref, backend, dtype=args.dtype, forced=args.cores)
    if plan.excluded:
        raise UserError(f"{ref.model_id} is not run: {plan.excluded}")
    print(render_run_py(recipe_params(ref, backend, dtype=args.dtype, trust_remote_code=args.trust_remote_code,
                                      cores=plan.cores, parallelism=plan.parallelism)), end="")
    return 0


def cmd_twins(args) -> int:
    from . import twins

    for spec in twins.TWINS.values():
        line = f"{spec.model_id:24s} {spec.task}"
        if args.build:
            line += f"  {twins.build_twin(spec.model_type)}"
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronhelpers", description="Does this Hugging Face model run unmodified on AWS Trainium?")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    def model_args(p):
        p.add_argument("model", help="Hub id (org/name), local checkpoint folder, or tiny twin (tiny/qwen3)")
        p.add_argument("--backend", default="auto", help="neuron, cuda, cpu or auto (default: detect)")
        p.add_argument("--dtype", default=None, help="override the backend's dtype (float32, bfloat16)")
        p.add_argument("--trust-remote-code", action="store_true", help="allow modeling code from the checkpoint (read it first)")

    p = sub.add_parser("run", help="run one model under the recipe and print its verified result row")
    model_args(p)
    p.add_argument("--json", action="store_true", help="print the whole row as JSON")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before the run is stopped (default 900)")
    p.add_argument("--cores", type=int, default=None, help="force a core count (1, 2, 4, 8, 16); default: the planner's")
    p.add_argument("--judge-model", default=None, help="local causal LM folder for judging sharded runs without a CPU reference")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("plan", help="print the planner's decision for a model: cores, TP/EP, and why")
    model_args(p)
    p.add_argument("--cores", type=int, default=None)
    p.set_defaults(func=cmd_plan)

    def sweep_args(p):
        p.add_argument("--out", default="results", help="dataset folder (default ./results)")
        p.add_argument("--backend", default="auto", help="neuron, cuda, cpu or auto (default: detect)")
        p.add_argument("--jobs", type=int, default=1, help="models at once, on disjoint CPUs / NeuronCores")
        p.add_argument("--timeout", type=float, default=900.0, help="seconds per model before it is stopped")
        p.add_argument("--rerun", action="store_true", help="run models already recorded for these versions again")
        p.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per model process")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser("sweep", help="run many models, one process each, writing rows to a Parquet dataset")
    p.add_argument("models", nargs="*", help="model ids (Hub ids, folders, tiny twins)")
    p.add_argument("--file", help="a text file of model ids, one per line")
    p.add_argument("--selected", action="store_true", help="the built-in Selected list (the default with no models)")
    p.add_argument("--all-twins", action="store_true", help="every tiny twin")
    p.add_argument("--real", action="store_true", help="Selected: the real Hub ids (needs the Hub and the weights)")
    sweep_args(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("demo", help="sweep the Selected list's twins into ./results and print a summary")
    sweep_args(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("diff", help="compare two version pairs (files) or two dataset folders")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--time-threshold", type=float, default=0.25, help="relative wall-time change to report")
    p.add_argument("--memory-threshold", type=float, default=0.10, help="relative peak-memory change to report")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("publish", help="push a dataset folder and its card to a Hub dataset repo (one commit)")
    p.add_argument("folder")
    p.add_argument("--repo", required=True, help="namespace/name of the Hub dataset repo")
    p.add_argument("--dry-run", action="store_true", help="list what would change; upload nothing")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("contribute", help="offer rows you ran to a Hub dataset as a pull request")
    p.add_argument("rows", help="a JSON row (run --json), JSON lines, or a dataset folder")
    p.add_argument("--repo", required=True)
    p.add_argument("--dry-run", action="store_true")
    p.set_defaults(func=cmd_contribute)

    p = sub.add_parser("check", help="fail when a model expected to PASS no longer does")
    p.add_argument("results", help="dataset folder")
    p.add_argument("--expected", required=True, help="CSV with model_id,result")
    p.add_argument("--write", action="store_true", help="write the expected file from these results instead")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("app", help="serve the explorer as a web page (Voila) on localhost")
    p.add_argument("--results", default="results", help="dataset folder (default ./results)")
    p.add_argument("--port", type=int, default=8866)
    p.set_defaults(func=cmd_app)

    p = sub.add_parser("cache", help="the compile cache: where it is, sync it from, or publish it to, a folder or hf://buckets/...")
    p.add_argument("action", choices=["show", "sync", "publish"])
    p.add_argument("location", nargs="?", default=None, help="SOURCE for sync, DEST for publish")
    p.add_argument("--backend", default="auto")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("rankings", help="the Hub rankings the explorer uses (--refresh fetches a dated snapshot)")
    p.add_argument("--refresh", action="store_true")
    p.add_argument("--limit", type=int, default=50, help="models per view and task")
    p.set_defaults(func=cmd_rankings)

    p = sub.add_parser("doctor", help="check this environment: OK / FAIL per requirement")
    p.set_defaults(func=lambda a: __import__("neuronhelpers.check_env", fromlist=["main"]).main())

    p = sub.add_parser("card", help="write the dataset card (README.md) into a dataset folder")
    p.add_argument("folder")
    p.set_defaults(func=lambda a: print(__import__("neuronhelpers.card", fromlist=["write_card"]).write_card(a.folder)) or 0)

    p = sub.add_parser("render", help="print the run.py (or --requirements) for a model")
    model_args(p)
    p.add_argument("--requirements", action="store_true", help="print requirements.txt instead")
    p.add_argument("--cores", type=int, default=None, help="force a core count")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("twins", help="list the tiny twins (--build builds them)")
    p.add_argument("--build", action="store_true")
    p.set_defaults(func=cmd_twins)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    try:
        return args.func(args)
    except UserError as err:
        if verbose:
            raise
        print(f"neuronhelpers: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("neuronhelpers: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
