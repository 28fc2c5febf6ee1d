"""neuronhelpers: does this Hugging Face model run unmodified on AWS Trainium, and how do I run it myself?

Data flows one way, a module per stage: models/twins -> recipe (run.py) -> runner (subprocess)
-> verify -> results (row, dataset) -> views.
"""

__version__ = "0.2.0"  # the one source: pyproject reads it, every row records it


def load_results(path, *, validate: bool = True):
    """Read a results dataset (local folder or hf://datasets/...): see neuronhelpers.dataset.load_results."""
    from .dataset import load_results as _load

    return _load(path, validate=validate)
