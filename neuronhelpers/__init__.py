"""neuronhelpers: does this Hugging Face model run unmodified on AWS Trainium, and how do I run it myself?

Data flows one way, a module per stage: models/twins -> recipe (run.py) -> runner (subprocess)
-> verify -> results (row, dataset) -> views.
"""

__version__ = "0.1.0"
