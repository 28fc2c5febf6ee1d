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
                    trust_remote_code=args.trust_remote_code)
    if args.json:
        print(json.dumps(row, default=_json_default))
    else:
        print(summary_line(row))
        if row["result"] != "PASS" and args.verbose and row.get("traceback"):
            print(row["traceback"], file=sys.stderr)
    return 0 if row["result"] == "PASS" else 1


DEMO_MODELS = ("tiny/qwen3", "tiny/llama", "tiny/llava")


def cmd_demo(args) -> int:
    """The main job on its built-in default: run a few twins and print their verified rows."""
    from .backends import get_backend
    from .harness import run_model, summary_line

    backend = get_backend(args.backend)
    print(f"neuronhelpers demo: {len(args.models)} models on backend '{backend.name}' (32 greedy tokens each, verified)")
    failed = 0
    for model in args.models:
        row = run_model(model, backend=backend)
        failed += row["result"] != "PASS"
        print(summary_line(row), flush=True)
    print("Next: `neuronhelpers run MODEL --json` for a whole row, `neuronhelpers render MODEL` for its run.py.")
    return 1 if failed else 0


def cmd_render(args) -> int:
    from .backends import get_backend
    from .models import resolve_model
    from .recipe import recipe_params, render_requirements, render_run_py

    ref = resolve_model(args.model, trust_remote_code=args.trust_remote_code)
    backend = get_backend(args.backend)
    if args.requirements:
        print(render_requirements(backend, ref.task), end="")
    else:
        print(render_run_py(recipe_params(ref, backend, dtype=args.dtype, trust_remote_code=args.trust_remote_code)), end="")
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
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="run a few tiny twins end to end and print their rows")
    p.add_argument("models", nargs="*", default=list(DEMO_MODELS))
    p.add_argument("--backend", default="auto")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("render", help="print the run.py (or --requirements) for a model")
    model_args(p)
    p.add_argument("--requirements", action="store_true", help="print requirements.txt instead")
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
