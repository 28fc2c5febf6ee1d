"""Stage 5, many models, one process tree each: a local sweep (parallel, resumable) and a fleet sweep on Ray.

Taught in notebook 05.
"""
