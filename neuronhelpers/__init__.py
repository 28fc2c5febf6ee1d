"""neuronhelpers: does this Hugging Face model run unmodified on AWS Trainium, and how do I run it myself?

Data flows one way, a module per stage: models/twins -> recipe (run.py) -> runner (subprocess)
-> verify -> results (row, dataset) -> views.
"""

__version__ = "0.1.0"


def load_results(path, *, validate: bool = True):
    """Read a results dataset (local folder or hf://datasets/...): see neuronhelpers.results.load_results."""
    from .results import load_results as _load

    return _load(path, validate=validate)
