"""The commands over a results dataset: ``causes``, ``diff``, ``check``, ``card``, ``publish``, ``contribute``,
``rankings``, ``snapshot`` and ``app`` (the explorer served with Voila).

Each takes the parsed arguments and returns the exit status; the parser is ``cli/main.py``.
"""

from __future__ import annotations

import json
import sys

from neuronhelpers.cli.commands_run import json_default
from neuronhelpers.core import settings
from neuronhelpers.core.errors import UserError, first_line


def _print_ranked(title: str, frame, top: int) -> None:
    from neuronhelpers.analysis.causes import ranked_lines

    if frame.empty:
        return
    print(f"\n{title}, by architectures blocked:")
    print("\n".join(ranked_lines(frame, top)))


def _trainium_verdicts(source: str | None, catalog):
    """The twins held against Trainium verdicts: the catalog's own Trainium rows and those of ``source`` (default the
    published dataset, where the Hub answers). Returns (compared, outside, the line to print)."""
    import pandas as pd

    from neuronhelpers.analysis.agreement import trainium_agreement, trainium_agreement_line
    from neuronhelpers.core.network import hub_reachable, hub_status_line
    from neuronhelpers.models.known import architecture_from_hub
    from neuronhelpers.store.dataset import load_results

    frames, said = [catalog], ""
    if source is None and not hub_reachable():
        said = (f" (the published dataset hf://datasets/{settings.dataset_repo()} cannot be read: the Hub is "
                f"{hub_status_line()}; give --trainium FOLDER)")
    elif source:
        frames.append(load_results(source))
        said = f" ({source})"
    else:
        source = f"hf://datasets/{settings.dataset_repo()}"
        try:
            frames.append(load_results(source))
            said = f" ({source})"
        except Exception as exc:  # noqa: BLE001 - the Hub answered, then failed: say so, keep the rest of the report
            said = f" (the published dataset {source} could not be read: {first_line(exc)}; give --trainium FOLDER)"
    compared, outside = trainium_agreement(pd.concat(frames, ignore_index=True), catalog,
                                           lambda m: architecture_from_hub(m)[1])
    return compared, outside, trainium_agreement_line(compared, outside) + said


def cmd_causes(args) -> int:
    """Root causes ranked by how many architectures they block, each with its architectures; twins against real
    checkpoints, and against the verdicts measured on Trainium."""
    from neuronhelpers.analysis.agreement import agreement_line, twin_agreement
    from neuronhelpers.analysis.answers import own_config_effects, own_config_line, read_isolated
    from neuronhelpers.analysis.causes import (
        rank_causes,
        remedy_outcome_lines,
        remedy_outcomes,
        untested_reasons,
        verdict_counts_line,
    )
    from neuronhelpers.analysis.declared import declared_vs_measured, disagreement_line
    from neuronhelpers.store.dataset import load_results, select_pair

    _results_or_where_the_catalog_is(args.results)
    catalog = load_results(args.results)
    df, pair = select_pair(catalog, args.pair)
    if args.isolate:
        from neuronhelpers.sweep.isolate import isolate_folder

        isolate_folder(args.results, df, progress=lambda model, found: print(
            f"isolated {model}: {found['field']} ({found['runs']} runs)", flush=True))
    effects = own_config_effects(df, read_isolated(args.results))
    failing, untested, agreement = rank_causes(df), untested_reasons(df), twin_agreement(df)
    declared = declared_vs_measured(df)
    trainium, outside, trainium_line = _trainium_verdicts(args.trainium, catalog)
    if args.json:
        print(json.dumps({"pair": pair, "failures": failing.to_dict("records"), "untested": untested.to_dict("records"),
                          "twin_agreement": agreement.to_dict("records"),
                          "twin_agreement_line": agreement_line(agreement),
                          "trainium_agreement": trainium.to_dict("records"),
                          "trainium_outside": outside.to_dict("records"),
                          "trainium_agreement_line": trainium_line,
                          "declared_vs_measured": declared[declared.disagree].to_dict("records"),
                          "declared_vs_measured_line": disagreement_line(declared),
                          "own_config": effects.to_dict("records"), "own_config_line": own_config_line(effects),
                          "remedies": remedy_outcomes(df).to_dict("records")},
                         default=json_default))
        return 0
    print(f"{args.results} ({'compiler ' + pair[0] + ', library ' + pair[1] if pair else 'all rows'}): "
          + verdict_counts_line(df))
    print(f"Real checkpoints: {agreement_line(agreement)}")
    print(f"Trainium: {trainium_line}")
    print(f"Declared vs measured: {disagreement_line(declared)}")
    print(f"Own configs: {own_config_line(effects)}")
    compiler = ~failing["not_the_compiler"].astype(bool)
    _print_ranked("FAIL causes", failing[compiler], args.top)
    _print_ranked("FAIL causes shown on CPU with nothing compiled (not the compiler)", failing[~compiler], args.top)
    _print_ranked("UNTESTED reasons", untested, args.top)
    outcomes = remedy_outcomes(df)
    if not outcomes.empty:
        print("\nWhat would make them run (FAILs swept with --remedies, per cause: the best remedy's word on trn2)")
        print("\n".join(remedy_outcome_lines(outcomes.head(args.top))))
    return 0


def _results_or_where_the_catalog_is(results: str) -> None:
    """A results folder that is not there, in one line that names it and where the committed catalog is."""
    from pathlib import Path

    if "://" in str(results) or Path(results).exists():
        return
    catalog = settings.catalog_dir()
    where = f"the committed catalog is {catalog}: `neuronhelpers causes {catalog}`" if catalog else \
        f"no committed catalog was found either (run from a clone, or set {settings.CATALOG_ENV})"
    raise UserError(f"no results folder at '{results}' (causes reads ./results, a sweep's --out, unless given one); "
                    + where)


def cmd_repro(args) -> int:
    """A minimal reproduction of a cause (analysis/repro.py), from the twin that shows it in this environment's pair."""
    from neuronhelpers.analysis.repro import remedy_path, write_repro
    from neuronhelpers.core.settings import catalog_dir, no_catalog_words
    from neuronhelpers.store.dataset import load_results, select_pair

    results = catalog_dir(args.results)
    if results is None:
        raise UserError(no_catalog_words(args.results))
    rows, _pair = select_pair(load_results(results), args.pair)
    path, row = write_repro(rows, args.cause, args.out, remedy=args.remedy)
    lines = path.read_text().count("\n")
    print(f"read {results}/: its row of {row['compiler']} {row['compiler_version']}, {row['library']} "
          f"{row['library_version']}")
    print(f"{path}: {lines} lines, shows {row['model_id']}'s {row['stage']} failure on CPU: {row['cause']}")
    print(f"run it: python {path}   (REPRODUCED and exit 1 while this cause holds; 'a different failure' and exit 2 "
          "on another; exit 0 once fixed)")
    if args.remedy:
        second = remedy_path(path)
        print(f"{second}: {second.read_text().count(chr(10))} lines, the same failure with the remedy {args.remedy}")
        print(f"run it: python {second}   (WORKAROUND and exit 3 when the remedy makes it run within its limit; "
              "exit 2: not applicable; exit 1: it did not run. Never 0: not a fix)")
    return 0


def _counts_line(changes) -> str:
    from neuronhelpers.store.diff import change_counts

    return ", ".join(f"{n} {kind}" for kind, n in change_counts(changes).items()) or "no changes"


def cmd_diff(args) -> int:
    import pandas as pd

    from neuronhelpers.store.diff import diff_results, load_side

    thresholds = dict(time_threshold=args.time_threshold, memory_threshold=args.memory_threshold)
    if args.new is None:
        return _diff_releases(args.old, thresholds)
    changes = diff_results(load_side(args.old), load_side(args.new), **thresholds)
    if changes.empty:
        print("no changes")
        return 0
    print(_counts_line(changes))
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        print(changes.dropna(axis=1, how="all").to_string(index=False))
    return 0


def _diff_releases(folder: str, thresholds: dict) -> int:
    """One line per release step a dataset folder holds, then the changes of verdict of each."""
    from neuronhelpers.store.dataset import load_results
    from neuronhelpers.store.diff import VERDICT_CHANGES, release_changes, release_steps

    df = load_results(folder)
    steps = release_steps(df)
    if not steps:
        raise UserError(f"'{folder}' holds one version pair per library: nothing to compare (give two files instead)")
    for step in steps:
        changes = release_changes(df, step, **thresholds)
        print(f"{step.label()}: {_counts_line(changes)}")
        verdicts = changes[changes.change.isin(VERDICT_CHANGES)]
        for row in verdicts.itertuples(index=False):
            detail = row.new_cause if isinstance(row.new_cause, str) else (
                row.new_error if isinstance(row.new_error, str) else "")
            print(f"    {row.change}: {row.model_id} ({row.old_result} -> {row.new_result})"
                  + (f": {detail}" if detail else ""))
    return 0


def cmd_check(args) -> int:
    from neuronhelpers.store.dataset import load_results, select_pair
    from neuronhelpers.store.diff import check_expected, expected_frame, read_expected

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


def cmd_card(args) -> int:
    from neuronhelpers.store.card import write_card

    print(write_card(args.folder))
    return 0


def cmd_publish(args) -> int:
    from neuronhelpers.store.publish import publish

    print(publish(args.folder, args.repo, dry_run=args.dry_run).describe(args.dry_run))
    return 0


def cmd_contribute(args) -> int:
    from neuronhelpers.store.publish import contribute

    print(contribute(args.rows, args.repo, dry_run=args.dry_run, against=args.against).describe(args.dry_run))
    return 0


def cmd_snapshot(args) -> int:
    """Take a dated snapshot of the published dataset (`make demo` takes one); where the Hub cannot be reached, say so
    in one line and which the lessons read instead (exit 1)."""
    from neuronhelpers.store.snapshot import instead_line, newest_snapshot, snapshot_line

    if args.show:
        kept = newest_snapshot(args.repo)
        print(kept.describe() if kept else f"no snapshot of {args.repo} here: {instead_line(kept)}")
        return 0
    line, taken = snapshot_line(args.repo)
    print(line)
    return 0 if taken else 1


def cmd_rankings(args) -> int:
    """Show which rankings the explorer uses; --refresh fetches them from the Hub and saves a dated snapshot."""
    from neuronhelpers.models.rankings import fetch_rankings, load_rankings, ranking_label, save_snapshot

    if args.refresh:
        try:
            path = save_snapshot(fetch_rankings(limit=args.limit))
            print(f"saved {path}")
        except Exception as exc:  # noqa: BLE001 - offline or rate limited: say so, keep the last snapshot
            print(f"neuronhelpers: could not refresh the rankings ({type(exc).__name__}); "
                  f"the explorer keeps using the {ranking_label(load_rankings())}", file=sys.stderr)
            return 1
    frame = load_rankings()
    print(f"{ranking_label(frame)}: " + ", ".join(
        f"{view}/{task} {len(group)}" for (view, task), group in frame.groupby(["view", "task"])))
    return 0


def cmd_app(args) -> int:
    """Serve the explorer as a web page with Voila on localhost."""
    import os
    import shutil
    from importlib import resources

    from neuronhelpers.store.dataset import load_results

    load_results(args.results)  # a clear error now rather than a broken page later
    voila = shutil.which("voila", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if voila is None:
        raise UserError("voila is not installed: pip install voila (it is part of `make install`)")
    notebook = str(resources.files("neuronhelpers.ui.app").joinpath("explorer.ipynb"))
    env = {**os.environ, settings.RESULTS_ENV: os.path.abspath(args.results)}
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

    from neuronhelpers.core.processes import die_with_parent

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
