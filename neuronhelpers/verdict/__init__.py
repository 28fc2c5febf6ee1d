"""Per run, how a result is decided: token and tensor checks against the reference, failure classification and
its signature, the evidence level. (The judge that reads a sharded run's text lives with the reference, in run/.)

Taught in notebook 03.
"""
