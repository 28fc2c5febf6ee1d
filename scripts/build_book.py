"""Build the static HTML book of the numbered notebooks (`make book`): build/book/index.html and one page a lesson.

    .venv/bin/python scripts/build_book.py [--executed build/executed] [--out build/book] [--execute-missing]

Renders the executed copies tests/test_notebooks.py leaves in build/executed; --execute-missing executes (once) any
notebook that has none yet. Open build/book/index.html in a browser: the pages need no network.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executed", type=Path, default=ROOT / "build" / "executed",
                        help="the executed notebooks (default build/executed)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book", help="the book (default build/book)")
    parser.add_argument("--execute-missing", action="store_true",
                        help="execute a notebook that has no executed copy yet (and keep the copy)")
    args = parser.parse_args(argv)

    from neuronhelpers.core.errors import UserError
    from neuronhelpers.ui.book import build_book

    started = time.monotonic()
    try:
        paths = build_book(args.executed, args.out, notebooks_dir=ROOT / "notebooks",
                           execute_missing=args.execute_missing)
    except UserError as err:
        print(f"book: {err}", file=sys.stderr)
        return 2
    out = args.out.resolve()
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"book: {len(paths) - 1} pages + contents in {shown} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
