"""Vision-language twins: processors, token wiring and the probe that fits a processor to its model.

Taught in notebook 06.
"""
