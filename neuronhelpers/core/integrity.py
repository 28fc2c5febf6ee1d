"""A model's files checked before they are trusted: one reader of a safetensors header, one check of a checkpoint
folder, one record of what a cache wrote (names, sizes, sha256) and one comparison with it.

Where the line is drawn (docs/design.md section 6a): a file damaged in transit, cut short or unreadable (a
safetensors file whose size contradicts its own header, a JSON file that does not parse, a file an index names that is
not there) says nothing about the model, so its row is UNTESTED with stage ``input`` and names the file. A checkpoint
whose files are whole but describe a model that does not load stays FAIL (load): that is the model's answer.

A cache the package wrote itself (a twin, a shelf copy) records what it wrote in its own JSON file; a copy that no
longer matches is built or installed again, never trusted. ``NEURONHELPERS_INTEGRITY_CHECKS=0`` turns every check here
off (only to measure what they cost on a warm sweep).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

from neuronhelpers.core import settings
from neuronhelpers.core.errors import UserError

# What is wrong with a damaged file, in the words its cause carries.
CUT_SHORT, UNREADABLE, CONTRADICTS, MISSING = ("cut short", "unreadable", "larger than its header says",
                                               "missing from the folder its index names")
_HEADER_LIMIT = 100 * 2**20  # safetensors refuses headers over 100 MB: a larger length is a damaged file


class DamagedFile(UserError):
    """A file of a model is damaged (cut short, unparseable, missing where an index names it): ``path`` and the
    ``reason`` in words a person can act on. The message names the file; the caller names the model."""

    def __init__(self, path: str | Path, reason: str, kind: str):
        self.path, self.reason, self.kind = Path(path), reason, kind
        super().__init__(reason)

    @property
    def cause(self) -> str:
        """The signature failures of the same origin share (the file's name and what is wrong with it, no sizes)."""
        return f"damaged file: {self.path.name} {self.kind}"


def checks_enabled() -> bool:
    return settings.integrity_checks_enabled()


def _n(count: int) -> str:
    return f"{count:,}"


def safetensors_header(path: str | Path) -> dict:
    """The header of a safetensors file (its tensors by name, and ``__metadata__``), checked against the file's size:
    the file must hold exactly the bytes its header promises. Raises DamagedFile naming the file otherwise."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise DamagedFile(path, f"{path.name} is {_n(size)} bytes: too short to hold a safetensors header",
                              CUT_SHORT)
        (length,) = struct.unpack("<Q", head)
        if length > _HEADER_LIMIT or 8 + length > size:
            raise DamagedFile(path, f"{path.name} is {_n(size)} bytes; its header alone claims {_n(8 + length)}",
                              CUT_SHORT)
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            raise DamagedFile(path, f"{path.name}: its header is not valid JSON ({exc})", UNREADABLE) from None
    if not isinstance(header, dict):
        raise DamagedFile(path, f"{path.name}: its header is not a table of tensors", UNREADABLE)
    try:
        end = max((info["data_offsets"][1] for name, info in header.items() if name != "__metadata__"), default=0)
    except (KeyError, TypeError, IndexError):
        raise DamagedFile(path, f"{path.name}: its header names a tensor without data offsets",
                          UNREADABLE) from None
    promised = 8 + length + end
    if promised != size:
        raise DamagedFile(path, f"{path.name} is {_n(size)} bytes; its header promises {_n(promised)}",
                          CUT_SHORT if size < promised else CONTRADICTS)
    return header


def parameter_count(header: dict) -> int:
    """The parameters a safetensors header holds (scalars count one)."""
    return sum(math.prod(info["shape"]) if info["shape"] else 1 for name, info in header.items()
               if name != "__metadata__")


def read_json(path: str | Path):
    """A JSON file of a checkpoint, or DamagedFile naming it (a download cut short leaves half a file)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedFile(path, f"{path.name} is not valid JSON ({exc}): the file is damaged or cut short; "
                                "download or save it again", UNREADABLE) from None


def _files(folder: Path, pattern: str) -> list[Path]:
    """Files of a checkpoint folder and of its component folders one level down (a sentence-transformers model's
    modules, a diffusers pipeline's components), hidden ones left out (the HF cache's .cache)."""
    found = [*folder.glob(pattern), *folder.glob(f"*/{pattern}")]
    return sorted(p for p in found if p.is_file() and not any(part.startswith(".") for part in
                                                              p.relative_to(folder).parts))


def check_checkpoint(folder: str | Path) -> None:
    """Every JSON file parses, every safetensors file holds what its header promises, and every file an index names
    is there. Reads headers only (cheap for any size). Raises DamagedFile naming the first problem."""
    if not checks_enabled():
        return
    folder = Path(folder)
    for path in _files(folder, "*.json"):
        index = read_json(path)
        if path.name.endswith(".index.json") and isinstance(index, dict):
            for name in sorted(set((index.get("weight_map") or {}).values())):
                if not (path.parent / name).is_file():
                    raise DamagedFile(path.parent / name, f"{name} is missing: {path.name} names it", MISSING)
    for path in _files(folder, "*.safetensors"):
        safetensors_header(path)


# ---- what a cache wrote, and whether it is still there --------------------------------------------------------

def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_digest(hashes: dict[str, str]) -> str:
    """One sha256 over a folder's files, each by its relative name and its own sha256 (``{name: sha256}``): what a
    run.py names a twin or a shelf copy by, the same on any machine that has the same bytes."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def file_manifest(folder: str | Path, *, leave_out: tuple[str, ...] = ()) -> dict[str, dict]:
    """Every file under ``folder`` (relative name: size, sha256, modification time), but those named in
    ``leave_out`` (the record itself)."""
    folder = Path(folder)
    manifest = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if name in leave_out:
            continue
        stat = path.stat()
        manifest[name] = {"size": stat.st_size, "sha256": sha256_of(path), "mtime_ns": stat.st_mtime_ns}
    return manifest


def manifest_mismatch(folder: str | Path, manifest: dict[str, dict] | None, *, rehash: bool = True) -> str | None:
    """The first way ``folder`` differs from what its record says was written, in words; None when it matches.

    Sizes are always compared. A file whose size and modification time are as recorded is taken as written unless
    ``rehash`` (a small twin: every use); otherwise its sha256 is computed again (a large shelf copy: only a file that
    was touched costs a read)."""
    if not checks_enabled():
        return None
    if not manifest:
        return "it records no files (written before files were recorded)"
    folder = Path(folder)
    for name, want in manifest.items():
        path = folder / name
        try:
            stat = path.stat()
        except OSError:
            return f"{name} is missing"
        if stat.st_size != want["size"]:
            return f"{name} is {_n(stat.st_size)} bytes; {_n(want['size'])} were written"
        untouched = stat.st_mtime_ns == want.get("mtime_ns")
        if (rehash or not untouched) and sha256_of(path) != want["sha256"]:
            return f"{name} does not hold what was written (sha256 differs)"
    return None
