"""Stage 2, one model end to end: the plan (cores, TP / EP), the one run.py rendered from recipes/, its process
tree (fork server, timeout, limits), the CPU reference, the compile cache, and the harness that joins them into a row.

Taught in notebooks 02 (a run) and 03 (sharded runs).
"""
