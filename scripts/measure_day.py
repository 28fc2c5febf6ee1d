"""Measure the workshop's day: execute every lesson as an attendee's Run All (after `make demo`: its results, warm
twins and compile cache) and write each code cell's seconds to neuronhelpers/data/workshop_timings.json, from which
neuronhelpers/ui/day.py works the plan out. `make workshop-timings` runs it, then rewrites the start page and the
lessons' time lines."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from neuronhelpers.ui import day
from neuronhelpers.ui.book import measure_lessons

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--results", default=str(day.NOTEBOOKS_DIR.parent / "results"), help="make demo's results")
args = parser.parse_args()
if not Path(args.results, "data").is_dir():
    sys.exit(f"no results in {args.results}: run `make demo` first (the day starts from them)")
with tempfile.TemporaryDirectory(prefix="nh-day-") as tmp:
    measured = measure_lessons(args.results, tmp)
day.TIMINGS.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
print(f"wrote {day.TIMINGS}")
