"""Errors that are part of the interface: each carries a one-line message naming the thing and what to do.

Notebook 03 shows bad input refused.
"""


class UserError(Exception):
    """Bad input from a person (unknown model, missing tokenizer, remote code...).

    The CLI prints ``str(err)`` as one line and exits non-zero; no traceback unless ``--verbose``.
    """


def first_line(exc: BaseException, *, limit: int = 300, name: bool = False) -> str:
    """The one line of an exception a person reads first: its message's first non-empty line, joined with the next
    when it only introduces it (ends with ':'), cut to ``limit`` characters. ``name`` puts the exception's type in
    front ("ValueError: ..."); an exception without a message gives its type's name alone."""
    text = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    line = text[0] if text else ""
    if line.endswith(":") and len(text) > 1:
        line = f"{line} {text[1]}"
    line = line[:limit]
    if name:
        return f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return line or type(exc).__name__
