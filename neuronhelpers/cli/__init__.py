"""The ``neuronhelpers`` command line and ``neuronhelpers doctor`` (the environment check).

    main            the parser (one function per group of commands) and ``main``, the entry point
    commands_run    run, plan, render, sweep, demo, twins, cache: commands that run models
    commands_data   causes, diff, check, card, publish, contribute, rankings, app: commands over a results dataset
    doctor          OK / FAIL per requirement pyproject.toml declares, the Neuron device, backend, cache and Hub
"""
