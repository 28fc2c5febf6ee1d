"""Stage 1b, tiny twins: real transformers (and sentence-transformers, diffusers) architectures with shrunk
dimensions and random weights, built offline, one per architecture, plus deliberately broken copies.

Taught in notebooks 02 (a twin), 04 (broken copies) and 06 (one twin per architecture).
"""
