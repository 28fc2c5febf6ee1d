"""Across rows: causes ranked, twins held against real checkpoints and Trainium verdicts, declared against measured.

Reads the dataset (``store``); nothing here runs a model. Taught in notebooks 03 and 05.
"""
