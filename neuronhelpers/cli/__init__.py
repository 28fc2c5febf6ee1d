"""The ``neuronhelpers`` command line and ``neuronhelpers doctor`` (the environment check)."""
