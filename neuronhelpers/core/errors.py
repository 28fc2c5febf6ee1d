"""Errors that are part of the interface: each carries a one-line message naming the thing and what to do.

Notebook 03 shows bad input refused.
"""

import re


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


class Stopped(Exception):
    """Work stopped for a reason that is not any model's (a fault of this package's own code, a machine that fails
    every model the same way, a full disk): one line says which and what to do; every row written before stays, no
    row is written for what the reason hit, and running the same command again resumes. The CLI exits 3."""


class HarnessFault(Stopped):
    """An exception raised by neuronhelpers' own code that no model input explains (``harness_fault``)."""


_PACKAGE = __file__.rsplit("/core/", 1)[0] + "/"  # .../neuronhelpers/
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_OUR_MODULE = re.compile(r"""(?:No module named|cannot import name \S+ from|module) '(neuronhelpers(?:\.[\w.]+)?)'""")
# Exceptions that only a mistake in code raises, wherever its input came from: where the raising frame is ours (the
# package, or a run.py rendered from its recipes), the fault is ours.
_CODE_MISTAKES = ("NameError", "UnboundLocalError", "SyntaxError", "IndentationError", "AssertionError")


def _ours(path: str) -> bool:
    # this package wherever it is installed (a Ray node's copy too), or a run.py rendered from its recipes
    return path.startswith(_PACKAGE) or "/neuronhelpers/" in path or path.endswith("/run.py")


def harness_fault(error_type: str | None, message: str | None, trace: str | None) -> str | None:
    """What makes a failure a fault of this package's own code, in words (the exception and the file and line of ours
    that raised it); None when a model input may explain it.

    Ours: an ImportError (or ModuleNotFoundError, or an AttributeError of a module) that names a neuronhelpers module,
    wherever raised; a NameError, UnboundLocalError, SyntaxError, IndentationError or AssertionError whose raising
    frame is in the package or in a run.py rendered from its recipes. Everything else (an exception raised inside
    transformers, torch or a model's code, or any other type) is left to the model's classification."""
    trace = trace or ""
    error_type = error_type or _last_exception_type(trace)
    text = f"{message or ''}\n{trace.strip().splitlines()[-1] if trace.strip() else ''}"
    if error_type in ("ImportError", "ModuleNotFoundError", "AttributeError"):
        module = _OUR_MODULE.search(text)
        if module:
            return f"{error_type} of {module.group(1)}: {_first(message, trace)}"
        if error_type == "AttributeError":
            return None
    frames = _FRAME.findall(trace)
    if error_type in _CODE_MISTAKES and frames and _ours(frames[-1][0]):
        path, line = frames[-1]
        where = "neuronhelpers/" + path.rsplit("/neuronhelpers/", 1)[1] if "/neuronhelpers/" in path else path
        return f"{_first(message, trace)} (raised at {where}:{line})"
    return None


def harness_fault_of(exc: BaseException) -> str | None:
    """``harness_fault`` of an exception raised in this process."""
    import traceback

    return harness_fault(type(exc).__name__, f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc)))


def _last_exception_type(trace: str) -> str | None:
    for line in reversed(trace.strip().splitlines()):
        match = re.match(r"^([\w.]+(?:Error|Exception|Exit|Interrupt))\b", line.strip())
        if match:
            return match.group(1).rsplit(".", 1)[-1]
    return None


def _first(message: str | None, trace: str) -> str:
    if message:
        return message.strip().splitlines()[0][:300]
    lines = trace.strip().splitlines()
    return lines[-1][:300] if lines else "(no message)"


def say(line: str) -> None:
    """One line for a person on stderr, written above any progress bar rather than through it."""
    import sys

    try:
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm is a dependency; a stripped environment still gets the line
        print(line, file=sys.stderr, flush=True)


_MACHINE_FAULTS = ("No space left on device", "Disk quota exceeded", "Read-only file system", "File too large")


def machine_fault(text: str) -> str | None:
    """The words of a failure that is the machine's, whatever ran (a full disk, a read-only one, a file-size limit),
    when ``text`` holds them; None otherwise. Such a failure stops a sweep instead of becoming any model's row."""
    return next((words for words in _MACHINE_FAULTS if words in (text or "")), None)
