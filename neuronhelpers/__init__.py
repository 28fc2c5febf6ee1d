"""neuronhelpers: does this Hugging Face model run unmodified on AWS Trainium, and how do I run it myself?

Data flows one way, one module per stage (the notebook that teaches each stage in brackets):

    models, twins, library_twins   what a person typed -> a checkpoint to load; tiny twins per architecture [02, 06]
    plan                           the fewest cores that hold the weights, TP / EP [03]
    recipe, recipes/               the one run.py: shared scaffold + one recipe per library [02, 03]
    runner, forkserver             run.py in its own process tree, timeout, kill, limits [02, 05]
    harness                        one model end to end: plan -> run.py -> reference -> verdict -> row [02]
    verify, judge, reference       how a result is decided [04]
    causes                         root-cause signatures of failures [04, 06]
    results, vocab                 the row schema and the result vocabulary (defined once) [02, 04]
    dataset                        version-pair Parquet files: read, append, resume [01, 05]
    sweep, fleet                   many models, one process tree each; locally or on a Ray cluster [05]
    explorer, plots, hub           views, plots, the Hub's rankings [01]
    card, diff, publish, cache     the dataset card, releases side by side, the gate, publishing [05, 06]
    backends, versions, network,   what machine, which versions, is the Hub reachable, shared defaults
    settings, check_env            (``neuronhelpers doctor``)
    cli                            the ``neuronhelpers`` command
"""

from neuronhelpers.core.versions import __version__  # noqa: F401 - the one source is core/versions.py


def load_results(path, *, validate: bool = True):
    """Read a results dataset (local folder or hf://datasets/...): see neuronhelpers.store.dataset.load_results."""
    from neuronhelpers.store.dataset import load_results as _load

    return _load(path, validate=validate)
