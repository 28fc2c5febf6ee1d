"""The ``neuronhelpers`` command line (also ``python -m neuronhelpers``)."""

from __future__ import annotations

import argparse
import json
import sys

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import DEFAULT_DATASET, DEFAULT_TIMEOUT_S


def _json_default(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def cmd_run(args) -> int:
    from neuronhelpers.run.harness import run_model, summary_line

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

    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.store.dataset import DatasetWarning, load_results
    from neuronhelpers.sweep.local import summary_frame, sweep

    ray_address = getattr(args, "ray", None)
    if ray_address:
        from neuronhelpers.sweep.fleet import import_ray

        import_ray()  # without Ray: one line that says how to install it, before anything is planned
        if args.jobs != 1:
            raise UserError("--jobs does not apply with --ray: the cluster's free cores decide how many models run at once")
    backend = get_backend(args.backend)
    memory = int(args.memory_limit_gb * 2**30) if args.memory_limit_gb else None
    where = f" on the Ray cluster '{ray_address}'" if ray_address else ""
    print(f"sweeping {len(models)} models on backend '{backend.name}'{where} into {args.out}/ (32 greedy tokens each, verified)")
    if ray_address:
        from neuronhelpers.sweep.fleet import FleetReport, sweep_on_ray

        report = FleetReport()
        rows = sweep_on_ray(models, args.out, address=ray_address, backend=backend, timeout=args.timeout,
                            rerun=args.rerun, progress=not args.no_progress, memory_limit_bytes=memory,
                            include_excluded=include_excluded, report=report)
        print(report.summary())
    else:
        rows = sweep(models, args.out, backend=backend, jobs=args.jobs, timeout=args.timeout, rerun=args.rerun,
                     progress=not args.no_progress, memory_limit_bytes=memory, include_excluded=include_excluded)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        df = load_results(args.out)
    from neuronhelpers.sweep.local import excluded_rows

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
    from neuronhelpers.sweep.local import read_model_file, selected_models
    from neuronhelpers.twins.build import architectures

    models = list(args.models)
    if args.file:
        models += read_model_file(args.file)
    if args.architectures:
        models += [spec.model_id for spec in architectures(args.task)]
    use_selected = args.selected or not models
    if use_selected:
        models += selected_models(real=args.real)
    return _sweep_and_summarise(models, args, include_excluded=use_selected)


def cmd_demo(args) -> int:
    """The main job on its built-in default: sweep the Selected list's twins into ./results and summarise."""
    from neuronhelpers.store.card import write_card
    from neuronhelpers.sweep.local import selected_models

    code = _sweep_and_summarise(selected_models(real=False), args, include_excluded=True)
    print(f"Dataset card: {write_card(args.out)}")
    return code


def cmd_plan(args) -> int:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.run.plan import plan_model

    ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code)
    backend = get_backend(args.backend)
    print(f"{ref.model_id} on {backend.name}:")
    print(plan_model(ref, backend, dtype=args.dtype, forced=args.cores).describe())
    return 0


def cmd_diff(args) -> int:
    from neuronhelpers.store.diff import diff_results, load_side

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
    from neuronhelpers.store.publish import publish

    print(publish(args.folder, args.repo, dry_run=args.dry_run).describe(args.dry_run))
    return 0


def cmd_contribute(args) -> int:
    from neuronhelpers.store.publish import contribute

    print(contribute(args.rows, args.repo, dry_run=args.dry_run).describe(args.dry_run))
    return 0


def cmd_check(args) -> int:
    from neuronhelpers.store.diff import check_expected, expected_frame, read_expected
    from neuronhelpers.store.dataset import load_results

    from neuronhelpers.store.dataset import select_pair

    actual, _ = select_pair(load_results(args.results), args.pair)
    if args.write:
        frame = expected_frame(actual)
        frame.to_csv(args.expected, index=False)
        print(f"wrote {args.expected} ({len(frame)} models, " +
              ", ".join(f"{n} {r}" for r, n in frame.result.value_counts().sort_index().items()) + ")")
        return 0
    expected = read_expected(args.expected)
    problems, notes = check_expected(expected, actual, only_tested=args.only_tested)
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    checked = expected.model_id.isin(actual.model_id).sum() if args.only_tested else len(expected)
    print(f"{len(problems)} change(s) of verdict in {checked} model(s) checked against {args.expected}")
    if problems:
        print(f"If the new results are right, rewrite the file: neuronhelpers check {args.results} "
              f"--expected {args.expected} --write")
    return 1 if problems else 0


def cmd_app(args) -> int:
    """Serve the explorer as a web page with Voila on localhost."""
    import os
    import shutil
    import subprocess
    from importlib import resources

    from neuronhelpers.store.dataset import load_results

    load_results(args.results)  # a clear error now rather than a broken page later
    voila = shutil.which("voila", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if voila is None:
        raise UserError("voila is not installed: pip install voila (it is part of `make install`)")
    notebook = str(resources.files("neuronhelpers.ui.app").joinpath("explorer.ipynb"))
    env = {**os.environ, "NEURONHELPERS_RESULTS": os.path.abspath(args.results)}
    print(f"serving the explorer on http://127.0.0.1:{args.port}/ (Ctrl-C to stop)", flush=True)
    cmd = [voila, notebook, f"--port={args.port}", "--no-browser", "--Voila.ip=127.0.0.1",
           "--show_tracebacks=False", "--theme=light"]
    return serve_until_stopped(cmd, env)


def serve_until_stopped(cmd: list[str], env: dict, grace_s: float = 10.0) -> int:
    """Run a server in its own process group and take it down with this process: on SIGTERM or SIGINT it is
    asked to stop (it shuts its kernels down), then killed after ``grace_s``; if this process dies, the
    kernel kills the server (parent-death signal)."""
    import os
    import signal
    import subprocess

    from neuronhelpers.run.recipes.scaffold import die_with_parent

    server = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=die_with_parent)

    def stop(signum, _frame):
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return server.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)


def cmd_cache(args) -> int:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.run.compile_cache import cache_dir, current_key, publish_cache, sync_cache, sync_command
    from neuronhelpers.core.versions import compiler_for

    from neuronhelpers.core.settings import DEFAULT_CACHE_BUCKET

    backend = get_backend(args.backend)
    args.location = args.location or f"hf://buckets/{DEFAULT_CACHE_BUCKET}"
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
    from neuronhelpers.models.rankings import fetch_rankings, load_rankings, ranking_label, save_snapshot

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
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.run.render import recipe_params, render_requirements, render_run_py

    from neuronhelpers.run.plan import plan_model

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
    """Every architecture of the installed transformers and whether its twin builds (--all builds them)."""
    from neuronhelpers.twins import build as twins

    specs = twins.architectures(args.task)
    counts = {"builds": 0, "unavailable": 0, "not built yet": 0}
    bar = None
    if args.all and not args.no_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(specs), desc="twins", unit="twin", dynamic_ncols=True, file=sys.stderr)
    for spec in specs:
        try:
            folder = twins.build_twin(spec.key) if args.all else twins.known_twin(spec)
            status, detail = ("builds", str(folder)) if folder else ("not built yet", "")
        except twins.TwinUnavailable as exc:
            status, detail = "unavailable", f"[{exc.stage}] {exc.reason}"
        counts[status] += 1
        line = f"{spec.model_id:34s} {spec.task:20s} {status:13s} {detail}"
        if bar is not None:
            bar.update(1)
            bar.write(line)
        else:
            print(line)
    if bar is not None:
        bar.close()
    print(f"{len(specs)} architectures: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    return 0


def cmd_causes(args) -> int:
    """Root causes ranked by how many architectures they block, each with its architectures."""
    from neuronhelpers.verdict.causes import rank_causes, untested_reasons
    from neuronhelpers.store.dataset import load_results, select_pair

    df, pair = select_pair(load_results(args.results), args.pair)
    failing, untested = rank_causes(df), untested_reasons(df)
    if args.json:
        print(json.dumps({"pair": pair, "failures": failing.to_dict("records"), "untested": untested.to_dict("records")},
                         default=_json_default))
        return 0
    tested = df[df.result.isin([vocab.PASS, vocab.FAIL])]
    print(f"{args.results} ({'compiler ' + pair[0] + ', library ' + pair[1] if pair else 'all rows'}): "
          f"{len(tested)} verdicts ({(tested.result == vocab.PASS).sum()} PASS, {(tested.result == vocab.FAIL).sum()} FAIL), "
          f"{(df.result == vocab.UNTESTED).sum()} untested")
    for title, frame in (("FAIL causes", failing), ("UNTESTED reasons", untested)):
        if frame.empty:
            continue
        print(f"\n{title}, by architectures blocked:")
        for row in frame.head(args.top).itertuples(index=False):
            names = ", ".join(row.architectures[:8]) + (", ..." if len(row.architectures) > 8 else "")
            print(f"{row.count:4d}  [{row.stage}] {row.cause}\n      {names}")
        if len(frame) > args.top:
            print(f"      ... and {len(frame) - args.top} more causes (--top N)")
    return 0


TIMEOUT_HELP = f"seconds before a model's run is stopped (default {DEFAULT_TIMEOUT_S:g})"


def build_parser() -> argparse.ArgumentParser:
    # Options every command takes, accepted after the command name too (`run X --verbose`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks (and a failed run's whole error output)")
    backend = argparse.ArgumentParser(add_help=False)
    backend.add_argument("--backend", default="auto", help="neuron, cuda, cpu or auto (default: detect)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON instead of text")

    parser = argparse.ArgumentParser(prog="neuronhelpers", parents=[common],
                                     description="Does this Hugging Face model run unmodified on AWS Trainium?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help, *parents):
        return sub.add_parser(name, help=help, description=help, parents=[common, *parents])

    def model_args(p):
        p.add_argument("model", help="Hub id (org/name), local checkpoint folder, or tiny twin (tiny/qwen3)")
        p.add_argument("--dtype", default=None, help="override the backend's dtype (float32, bfloat16)")
        p.add_argument("--trust-remote-code", action="store_true",
                       help="allow modeling code from the checkpoint (read it first)")
        p.add_argument("--cores", type=int, default=None, help="force a core count (1, 2, 4, 8, 16); default: the planner's")

    p = command("run", "run one model under the recipe and print its verified result row", backend, as_json)
    model_args(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=TIMEOUT_HELP)
    p.add_argument("--judge-model", default=None,
                   help="local causal LM folder for judging sharded runs without a CPU reference")
    p.set_defaults(func=cmd_run)

    p = command("plan", "print the planner's decision for a model: cores, TP/EP, and why", backend)
    model_args(p)
    p.set_defaults(func=cmd_plan)

    def sweep_args(p):
        p.add_argument("--out", default="results", help="dataset folder (default ./results)")
        p.add_argument("--jobs", type=int, default=1, help="models at once, on disjoint CPUs / NeuronCores")
        p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=TIMEOUT_HELP)
        p.add_argument("--rerun", action="store_true", help="run models already recorded for these versions again")
        p.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per model process")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = command("sweep", "run many models, one process tree each, writing rows to a Parquet dataset", backend)
    p.add_argument("models", nargs="*", help="model ids (Hub ids, folders, tiny twins)")
    p.add_argument("--file", help="a text file of model ids, one per line ('#' starts a comment)")
    p.add_argument("--selected", action="store_true", help="the built-in Selected list (the default with no models)")
    p.add_argument("--architectures", action="store_true",
                   help="every text-generation and image-text-to-text architecture of the installed transformers (twins)")
    p.add_argument("--task", choices=list(vocab.TASKS), default=None, help="with --architectures: only this task")
    p.add_argument("--real", action="store_true", help="Selected: the real Hub ids (needs the Hub and the weights)")
    sweep_args(p)
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run each model as a Ray task on a cluster: auto (the cluster this machine joined), HOST:PORT, "
                        "or local (start one here); needs pip install -e '.[fleet]'")
    p.set_defaults(func=cmd_sweep)

    p = command("demo", "sweep the Selected list's twins into ./results and print a summary", backend)
    sweep_args(p)
    p.set_defaults(func=cmd_demo)

    p = command("causes", "root causes of FAIL (and UNTESTED) rows, ranked by how many architectures they block", as_json)
    p.add_argument("results", nargs="?", default="results", help="dataset folder (default ./results)")
    p.add_argument("--pair", default="newest",
                   help="COMPILER_VERSION,LIBRARY_VERSION, current (this environment's) or newest (the default)")
    p.add_argument("--top", type=int, default=10, help="causes to show per kind (default 10)")
    p.set_defaults(func=cmd_causes)

    p = command("diff", "compare two version pairs (files) or two dataset folders")
    p.add_argument("old", help="the earlier side: a version-pair Parquet file or a folder holding one pair")
    p.add_argument("new", help="the later side")
    p.add_argument("--time-threshold", type=float, default=0.25, help="relative wall-time change to report (0.25 = 25%%)")
    p.add_argument("--memory-threshold", type=float, default=0.10, help="relative peak-memory change to report")
    p.set_defaults(func=cmd_diff)

    p = command("publish", "push a dataset folder and its card to a Hub dataset repo (one commit)")
    p.add_argument("folder", help="dataset folder (a sweep's --out)")
    p.add_argument("--repo", default=DEFAULT_DATASET, help=f"namespace/name of the Hub dataset repo (default {DEFAULT_DATASET})")
    p.add_argument("--dry-run", action="store_true", help="list what would change; upload nothing")
    p.set_defaults(func=cmd_publish)

    p = command("contribute", "offer rows you ran to a Hub dataset as a pull request")
    p.add_argument("rows", help="a JSON row (run --json), JSON lines, or a dataset folder")
    p.add_argument("--repo", default=DEFAULT_DATASET, help=f"namespace/name of the Hub dataset repo (default {DEFAULT_DATASET})")
    p.add_argument("--dry-run", action="store_true", help="validate and list what the pull request would change")
    p.set_defaults(func=cmd_contribute)

    p = command("check", "the expected-results gate: fail on any change of verdict against an expected file")
    p.add_argument("results", help="dataset folder")
    p.add_argument("--expected", required=True, help="CSV with model_id,result (and stage, cause)")
    p.add_argument("--write", action="store_true", help="rewrite the expected file from these results instead")
    p.add_argument("--only-tested", action="store_true",
                   help="check only the expected models present in the results (a slice of a whole-library file)")
    p.add_argument("--pair", default=None,
                   help="only the rows of COMPILER_VERSION,LIBRARY_VERSION, current (this environment's) or newest")
    p.set_defaults(func=cmd_check)

    p = command("app", "serve the explorer as a web page (Voila) on localhost")
    p.add_argument("--results", default="results", help="dataset folder (default ./results)")
    p.add_argument("--port", type=int, default=8866, help="port on 127.0.0.1 (default 8866)")
    p.set_defaults(func=cmd_app)

    p = command("cache", "the compile cache: where it is, sync it from, or publish it to, a folder or hf://buckets/...",
                backend)
    p.add_argument("action", choices=["show", "sync", "publish"], help="show the local cache, sync into it, or publish it")
    p.add_argument("location", nargs="?", default=None, help="SOURCE for sync, DEST for publish (default: the public bucket)")
    p.set_defaults(func=cmd_cache)

    p = command("rankings", "the Hub rankings the explorer uses (--refresh fetches a dated snapshot)")
    p.add_argument("--refresh", action="store_true", help="fetch Trending and Downloads from the Hub now")
    p.add_argument("--limit", type=int, default=50, help="models per view and task (default 50)")
    p.set_defaults(func=cmd_rankings)

    p = command("doctor", "check this environment: OK / FAIL per requirement")
    p.set_defaults(func=lambda a: __import__("neuronhelpers.cli.doctor", fromlist=["main"]).main())

    p = command("card", "write the dataset card (README.md) into a dataset folder")
    p.add_argument("folder", help="dataset folder")
    p.set_defaults(func=lambda a: print(__import__("neuronhelpers.store.card", fromlist=["write_card"]).write_card(a.folder)) or 0)

    p = command("render", "print the run.py (or --requirements) for a model", backend)
    model_args(p)
    p.add_argument("--requirements", action="store_true", help="print requirements.txt instead")
    p.set_defaults(func=cmd_render)

    p = command("twins", "every architecture's tiny twin and whether it builds (--all builds them)")
    p.add_argument("--all", action="store_true", help="build every twin not built yet (each in its own process)")
    p.add_argument("--task", choices=list(vocab.TASKS), default=None, help="only the architectures of this task")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_twins)
    return parser


# Commands that may reach for the Hub: they decide once, quickly, whether it is reachable (and go offline if not).
_HUB_COMMANDS = {"run", "plan", "render", "sweep", "demo", "publish", "contribute", "rankings", "doctor", "cache"}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    args.verbose = verbose
    try:
        if args.command in _HUB_COMMANDS:
            from neuronhelpers.core.network import apply_offline_mode

            apply_offline_mode()
        return args.func(args)
    except UserError as err:
        if verbose:
            raise
        print(f"neuronhelpers: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("neuronhelpers: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - an unexpected failure is still one line (the traceback with --verbose)
        if verbose:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"neuronhelpers: error: {type(exc).__name__}: {first} (rerun with --verbose for the traceback)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
