"""Errors that are part of the interface: each carries a one-line message naming the thing and what to do.

Notebook 04 shows bad input refused.
"""


class UserError(Exception):
    """Bad input from a person (unknown model, missing tokenizer, remote code...).

    The CLI prints ``str(err)`` as one line and exits non-zero; no traceback unless ``--verbose``.
    """
