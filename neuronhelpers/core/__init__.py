"""Shared by every stage: the vocabulary (results, stages, verifications, parallelism, libraries), the
errors that are part of the interface, the settings (every environment variable the package reads), the backends
(neuron / cuda / cpu), version detection and whether the Hub is reachable. Imports nothing else of the package.

Taught in notebook 03 (the vocabulary) and 06 (the published artefacts).
"""
