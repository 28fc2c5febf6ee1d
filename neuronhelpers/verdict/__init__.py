"""Stage 3, how a result is decided: token and tensor checks against the reference, the judge for sharded runs,
and root-cause signatures of failures.

Taught in notebook 04.
"""
