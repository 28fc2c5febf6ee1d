"""Root causes: a short, stable signature per failure, so failures of the same origin group across models.

A signature is built from what the failed run reported: the exception type, the first line of its
message with the details that vary between models removed (numbers, addresses, paths), and the place
it came from (the deepest frame inside transformers or torch, or the model code dynamo was tracing).
A run that hit dynamo's recompile limit is signed by the guard that kept failing, the thing a user
can act on. ``analysis.causes.rank_causes`` orders causes across rows (``neuronhelpers causes``).
Taught in notebook 03 and the architecture catalog notebook.
"""

from __future__ import annotations

import re
from importlib import util as _importlib_util

from neuronhelpers.core import vocab

MAX_LENGTH = 200

_NUMBER = re.compile(r"(?<![\w])\d+(?:\.\d+)?L?(?![\w])")  # 2068L: a C++ long in generated kernels
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:/[\w.\-]+)+/([\w.\-]+\.\w+)")
# dynamo's size symbols (s77, u0) are numbered per trace; ``N`` covers a signature made before this rule
_SYMBOL = re.compile(r"(?<![\w])([su])(?:\d+N?|N)(?![\w])")
_HASH = re.compile(r"(?<![\w])[0-9a-z]{24,}(?![\w])")  # generated file names (inductor's cache keys)
_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')
_GUARD = re.compile(r"^\s*-\s*\d+/\d+:\s*(.+?)\s*(?:#.*)?$", re.M)
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_REQUIRES_LIBRARY = re.compile(r"requires the ([\w\-. ]+?) librar(?:y|ies)\b.*?(?:not found|but it was not found)",
                               re.I | re.S)
_PIP_INSTALL = re.compile(r"pip install ([\w\-\[\]]+)")


# (pattern, replacement) in order: what ``normalise`` does, also written into each repro script (analysis/repro.py).
NORMALISING = ((_ADDRESS, "0x…"), (_PATH, r"\1"), (_HASH, "…"), (_SYMBOL, r"\1N"), (_NUMBER, "N"))
HEAD_LENGTH = 130  # a signature keeps this much of the message (then "…")


def normalise(text: str) -> str:
    """The part of a message that is the same for every model failing this way."""
    for pattern, replacement in NORMALISING:
        text = pattern.sub(replacement, text)
    return re.sub(r"\s+", " ", text).strip()


# The model libraries' package folders, diffusers first (see _frame_label).
_LIBRARY_FOLDERS = tuple(name.replace("-", "_") for name in (vocab.DIFFUSERS, vocab.SENTENCE_TRANSFORMERS,
                                                             vocab.TRANSFORMERS))


def _frame_label(path: str, function: str) -> str | None:
    """'transformers/cache_utils.py:update' for a frame inside a model library or torch; model files grouped.
    diffusers comes first: its model files live in a folder named transformers (diffusers/models/transformers/)."""
    for root in _LIBRARY_FOLDERS + ("torch",):
        marker = f"/{root}/"
        if marker in path:
            relative = root + "/" + path.rsplit(marker, 1)[1]
            # Each architecture has its own copy of shared code (modeling_<name>.py): group the copies.
            relative = re.sub(r"models/[\w]+/(modeling|processing|image_processing|configuration)_[\w]+\.py",
                              r"models/*/\1_*.py", relative)
            return f"{relative}:{function}"
    return None


def deepest_frame(trace: str, *, prefer: tuple = _LIBRARY_FOLDERS) -> str | None:
    """The innermost traceback frame inside a model library (else torch), as 'package/file.py:function'."""
    frames = [_frame_label(path, fn) for path, fn in _FRAME.findall(trace or "")]
    frames = [f for f in frames if f]
    preferred = [f for f in frames if f.startswith(prefer)]
    return (preferred or frames or [None])[-1]


def traced_code_frame(trace: str) -> str | None:
    """For a dynamo error: the model code it was tracing when it stopped ('from user code:' frames)."""
    if "from user code:" not in (trace or ""):
        return None
    return deepest_frame(trace.split("from user code:", 1)[1])


def failing_guard(reasons: list[str] | None) -> str | None:
    """The guard that failed on the last recompilation dynamo reported, normalised."""
    for reason in reversed(reasons or []):
        guards = _GUARD.findall(reason)
        if guards:
            return normalise(guards[0])
    return None


def module_installed(name: str) -> bool:
    """Whether a top-level module can be imported here (without importing it)."""
    return _importlib_util.find_spec(name) is not None


def missing_package(error: str | None, trace: str | None = None) -> str | None:
    """The package a run needed and did not find installed, when that is why it failed; else None."""
    text = f"{error or ''}\n{trace or ''}"
    for match in _MISSING_MODULE.finditer(text):
        top = match.group(1).split(".")[0]
        if top and not module_installed(top):
            return top
    match = _REQUIRES_LIBRARY.search(error or "")
    if match:
        install = _PIP_INSTALL.search(text[match.start():match.start() + 600])
        return (install.group(1) if install else match.group(1)).strip().lower()
    return None


_INT_GUARD = re.compile(r"\.(\w+) == N$")
# Where the objects a decode step carries are defined: the caches and the generation loop.
_SHARED_SOURCES = ("cache_utils.py", "generation/utils.py", "masking_utils.py", "modeling_utils.py")


def owner_of(attribute: str) -> str | None:
    """The transformers class that sets ``self.<attribute>`` in the shared cache / generation code, if one does."""
    import ast

    try:
        import transformers
    except ImportError:
        return None
    from pathlib import Path

    root = Path(transformers.__file__).parent
    for name in _SHARED_SOURCES:
        try:
            tree = ast.parse((root / name).read_text())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for sub in ast.walk(node):
                    if (isinstance(sub, ast.Attribute) and sub.attr == attribute and isinstance(sub.ctx, ast.Store)
                            and isinstance(sub.value, ast.Name) and sub.value.id == "self"):
                        return node.name
    return None


def failure_cause(error_type: str | None, error: str | None, trace: str | None = None,
                  recompile_reasons: list[str] | None = None) -> str:
    """The signature of one failure (see the module docstring)."""
    guard = failing_guard(recompile_reasons)
    if guard and "recompile" in f"{error_type} {error} {trace}".lower():
        attribute = _INT_GUARD.search(guard)
        owner = owner_of(attribute.group(1)) if attribute else None
        if owner:  # the owning class and attribute stay the same across releases; the guard's path does not
            return f"recompile limit: {owner}.{attribute.group(1)} is a Python int guarded on every decode step"
        return f"recompile limit: guard `{guard}` fails on every decode step"[:MAX_LENGTH]
    message = (error or error_type or "unknown error").split("\n", 1)[0]
    if error_type and message.startswith(f"{error_type}:"):
        message = message[len(error_type) + 1:]
    head = normalise(message)
    if len(head) > HEAD_LENGTH:
        head = head[:HEAD_LENGTH - 1] + "…"
    where = traced_code_frame(trace or "") or deepest_frame(trace or "")
    cause = f"{error_type or 'Error'}: {head}" if head else (error_type or "Error")
    return (f"{cause} @ {where}" if where else cause)[:MAX_LENGTH]
