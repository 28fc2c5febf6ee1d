"""The process tree a run.py runs in: its own session, a timeout, limits, the one JSON line read back; the fork
server that starts runs without paying for imports. Taught in notebooks 02 and 06.
"""
