"""Vision-language twins: image / video processors (images.py), the processor and where the prompt puts the image
(processors.py), token wiring (tokens.py), the probe that runs the prompt through the model and repairs what its
errors point at by named rules (probe.py), and the writer (build.py).

Taught in notebook 05.
"""
