"""The one way the package keeps transformers, diffusers and sentence-transformers quiet while it builds or checks
something of its own (a tiny twin): ``with quiet_libraries(): ...``.

Inside the block transformers logs errors only and shows no progress bars, the ``diffusers`` and
``sentence_transformers`` loggers log errors only, and diffusers shows no progress bars; on exit every setting is
put back as it was. The libraries are imported inside, lazily (this module imports nothing at import time), and a
library that is not installed is left alone.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from contextlib import contextmanager

_LOGGERS = ("diffusers", "sentence_transformers")


def _installed(name: str) -> bool:
    return name in sys.modules or importlib.util.find_spec(name) is not None


@contextmanager
def quiet_libraries(*, diffusers: bool | None = None):
    """Silence the libraries' logs and progress bars for the block; restore them on exit.

    ``diffusers``: None silences diffusers' progress bars only when diffusers is already imported (importing it costs
    seconds, which a transformers-only build should not pay); True imports it to silence them (a diffusers build);
    its logger is set to ERROR either way.
    """
    restore = []
    if _installed("transformers"):
        from transformers.utils import logging as hf_logging

        verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        restore.append(lambda: (hf_logging.set_verbosity(verbosity),
                                hf_logging.enable_progress_bar() if bars else hf_logging.disable_progress_bar()))
    if diffusers or (diffusers is None and "diffusers" in sys.modules):
        if _installed("diffusers"):
            from diffusers.utils import logging as diffusers_logging

            diffusers_bars = diffusers_logging.is_progress_bar_enabled()
            diffusers_logging.disable_progress_bar()
            restore.append(lambda: diffusers_logging.enable_progress_bar() if diffusers_bars
                           else diffusers_logging.disable_progress_bar())
    levels = {name: logging.getLogger(name).level for name in _LOGGERS}
    for name in levels:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for undo in reversed(restore):
            undo()
