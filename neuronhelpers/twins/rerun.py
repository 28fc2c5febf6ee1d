"""A twin's run.py, run again anywhere: the twin named by its id and the digest of its files, not by a folder.

A twin's row keeps a run.py whose PARAMS say ``"model_path": "tiny/qwen3"`` and ``"twin_files": {"digest": ...,
"built_by": ...}``. Run as a file, it asks this module for the twin's folder (the one place a run.py calls
neuronhelpers: docs/design.md section 3): the twin is built here if missing, and its files must be the row's, byte for
byte. A neuronhelpers whose builder makes other files (another commit, torch or transformers) says in one line which
one makes the row's. A Hub model's run.py imports nothing of neuronhelpers.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from neuronhelpers.core.errors import UserError


def twin_files_digest(folder: str | Path) -> str:
    """sha256 over a built twin's files, each by its name and content (TWIN.json aside: it records when each file was
    written, not what it holds): the same twin built on any machine with the same builder, torch and transformers
    gives the same digest."""
    from neuronhelpers.core.integrity import files_digest, sha256_of
    from neuronhelpers.twins.build import TWIN_RECORD

    folder = Path(folder)
    return files_digest({path.relative_to(folder).as_posix(): sha256_of(path)
                         for path in sorted(p for p in folder.rglob("*") if p.is_file()) if path.name != TWIN_RECORD})


@functools.lru_cache(maxsize=1)
def builder_named() -> str:
    """The neuronhelpers that builds twins here, as a person would install it: its version and, in a git checkout,
    the commit, with the torch and transformers releases the twin's files depend on."""
    import torch
    import transformers

    from neuronhelpers.core.versions import __version__

    package = Path(__file__).parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=package, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        # "+edited": the package's own files had changes not committed (the commit alone does not build the same twin
        # then); a sweep writing into the checkout's catalog does not count
        edited = commit and subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=package,
                                           capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):  # not a checkout, or no git: the version alone names it
        commit, edited = "", ""
    commit += "+edited" if edited else ""
    at = f" at commit {commit}" if commit else ""
    return (f"neuronhelpers {__version__}{at}, torch {torch.__version__.split('+')[0]}, "
            f"transformers {transformers.__version__}")


def twin_entry(folder: str | Path) -> dict:
    """A twin row's ``PARAMS["twin_files"]``: its files' digest and what builds it."""
    return {"digest": twin_files_digest(folder), "built_by": builder_named()}


def twin_folder(params: dict) -> str:
    """The folder of the twin a run.py names (``params["model_path"]``, ``params["twin_files"]``), built here if
    missing. Where it cannot be built, or this neuronhelpers builds other files than the run's, the run.py ends with
    one line that says so and which neuronhelpers builds the run's twin (SystemExit: no traceback)."""
    from neuronhelpers.twins.build import build_twin

    model_id, entry = params["model_path"], params["twin_files"]
    try:
        folder = build_twin(model_id)
    except UserError as exc:  # no twin of it here (TwinUnavailable), or not a twin's name
        raise SystemExit(f"{exc}: this run.py needs {entry['built_by']}") from None
    digest = twin_files_digest(folder)
    if digest != entry["digest"]:
        raise SystemExit(f"{model_id}: this neuronhelpers ({builder_named()}) builds other files than the twin this "
                         f"run.py tested (files {digest[:12]}, the run's {entry['digest'][:12]}): run it where "
                         f"{entry['built_by']} is installed")
    return str(folder)
