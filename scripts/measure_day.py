"""Measure the workshop's day: execute every lesson as an attendee's Run All (after `make demo`: its results, warm
twins and compile cache) and write each code cell's seconds to neuronhelpers/data/workshop_timings.json, from which
neuronhelpers/ui/day.py works the plan out. `make workshop-timings` runs it, then rewrites the start page and the
lessons' time lines. `--lessons 03` re-measures only the lessons named (after a change to them): their cells are
replaced, the others kept, and the file's "how" says which were measured when."""

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from neuronhelpers.ui import day
from neuronhelpers.ui.book import measure_lessons
from neuronhelpers.ui.workshop import LESSON_ORDER

ALL = LESSON_ORDER[1:]  # every lesson the start page lists (it has no cells of its own to time)
parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--results", default=str(day.NOTEBOOKS_DIR.parent / "results"), help="make demo's results")
parser.add_argument("--lessons", nargs="+", choices=ALL, default=ALL, help="re-measure only these (default: all)")
args = parser.parse_args()
lessons = tuple(sorted(args.lessons))
if not Path(args.results, "data").is_dir() and "01" in lessons:  # lesson 01 reads make demo's results
    sys.exit(f"no results in {args.results}: run `make demo` first (the day starts from them)")
with tempfile.TemporaryDirectory(prefix="nh-day-") as tmp:
    measured = measure_lessons(args.results, tmp, lessons=lessons)
if lessons != ALL:
    kept = json.loads(day.TIMINGS.read_text())
    how = measured["measured"]
    kept["cells"].update(measured["cells"])
    said = f" [{', '.join(lessons)} re-measured alone on "
    earlier = re.sub(re.escape(said) + r"[^\]]*\(scripts/measure_day.py --lessons\)\]", "", kept["measured"]["how"])
    kept["measured"]["how"] = earlier + f"{said}{how['date']} at {how['commit']} (scripts/measure_day.py --lessons)]"
    measured = kept
day.TIMINGS.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
print(f"wrote {day.TIMINGS}")
