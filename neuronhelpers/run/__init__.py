"""One model end to end: plan it, render its run.py, run that file with the measuring around its steps in its own
process tree, check it against the CPU reference (or a judge), and make the row.

Taught in notebooks 02 (a run) and 04 (sharded runs).
"""
