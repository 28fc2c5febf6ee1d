"""Many models, one process tree each: a local sweep (``local.sweep_models``: parallel, resumable) and a
fleet sweep on Ray (``fleet.sweep_on_ray``), sharing one bookkeeping and writer (``local.SweepLog``).

Taught in notebook 06.
"""
