"""Where compiled graphs are cached, per backend and compiler version, for every run (run.py included), and how
a prebuilt cache is synced in and published.

A shared cache is addressed by compiler version (``<root>/neuronxcc-<version>/``, ``inductor-<version>/``): graphs
compiled by another version are never picked up silently. On Trainium the entries land where torch-neuronx reads
them (``$TORCH_NEURONX_NEFF_CACHE_DIR/ab/cd/<key>.neff``, default /tmp/neff_cache).

Taught in notebook 02 (a warm cache) and 06 (publishing and syncing caches).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from neuronhelpers.core.backends import Backend, get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import DEFAULT_CACHE_BUCKET, HOME_ENV, NEFF_CACHE_DIR, VARIABLES, home

DEFAULT_BUCKET = DEFAULT_CACHE_BUCKET  # where prebuilt caches are published: one folder per compiler version


def cache_key(compiler: str, version: str | None) -> str:
    """The versioned folder name of a cache: neuronxcc-<version> on Trainium, inductor-<torch version> elsewhere."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{_folder_prefix(compiler)}{version or 'unknown'}")


def _folder_prefix(compiler: str) -> str:
    return ("neuronxcc" if compiler == "neuronx-cc" else compiler) + "-"


def cache_dir(backend: Backend) -> Path:
    """The compile cache folder for this backend and the installed compiler version.

    An explicitly set environment variable (e.g. TORCH_NEURONX_NEFF_CACHE_DIR) wins. On Trainium the default
    is torch-neuronx's own (/tmp/neff_cache, whose entries the compiler keys by its version, and where the
    published caches are synced); inductor's cache is not keyed by torch version, so elsewhere each version
    gets its own folder.
    """
    from neuronhelpers.core.versions import compiler_for

    explicit = os.environ.get(backend.cache_env)
    if explicit and os.path.abspath(explicit) != _torch_default(backend.cache_env):
        return Path(explicit)
    if backend.name == "neuron":
        return Path(NEFF_CACHE_DIR)
    return home() / "compile-cache" / backend.name / cache_key(*compiler_for(backend))


def _torch_default(variable: str) -> str | None:
    """torch writes its own default into TORCHINDUCTOR_CACHE_DIR once inductor runs in a process: that value
    was nobody's choice, so it must not override the versioned address."""
    if variable != "TORCHINDUCTOR_CACHE_DIR":
        return None
    import getpass
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def cache_env(backend: Backend) -> dict[str, str]:
    """Environment variables that point a run at the compile cache."""
    return {backend.cache_env: str(cache_dir(backend))}


NEURON_ONLY = "the public bucket holds Neuron (neuronx-cc) caches only"


# ------------------------------------------------------------------------------------------------
# A damaged entry: a run that failed reading a file of the cache (inductor: "Failed to import .../<key>.py"; on
# Trainium a NEFF that does not load) names it. The entry is set aside, never deleted (kept for a bug report), and the
# run compiles again: a damaged cache is never the model's FAIL.
# ------------------------------------------------------------------------------------------------

SET_ASIDE_SUFFIX = ".set-aside"


# What an error says of a cache entry it could not read: inductor's "Failed to import <entry>", a NEFF that will not
# load, a shared object cut short. Only an entry named on such a line is set aside: a model's own failure inside a
# compiled kernel names the kernel's files too (tiny/kosmos-2.5's "kernel, <entry>.main.cpp:56, index out of
# bounds"), and that is the model's answer, not a damaged cache.
UNREADABLE = re.compile(r"failed to (import|load)|could not (be )?read|cannot open shared object|invalid ELF header|"
                        r"file too short|bad magic|truncated|unexpected EOF|EOFError|UnpicklingError|corrupt", re.I)


def named_entries(text: str, backend: Backend) -> list[Path]:
    """The files of this backend's compile cache that a failed run's error or traceback says it could not read
    (existing ones, each named on a line that says so)."""
    roots = {str(cache_dir(backend)), str(cache_dir(backend).resolve())}  # as the run printed it, or resolved
    found = [p.rstrip(".") for line in (text or "").splitlines() if UNREADABLE.search(line) for root in roots
             for p in re.findall(re.escape(root) + r"/[^\s'\"():,]+", line)]
    return sorted({Path(p) for p in found if Path(p).is_file()})


def unparseable_entries(backend: Backend) -> list[Path]:
    """The cache's Python entries (inductor's generated kernels) that no longer parse: looked for once one entry was
    found damaged, since what cut one short (a full disk, a killed writer) often cut its neighbours too."""
    found = []
    for path in Path(cache_dir(backend)).rglob("*.py"):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OSError):
            found.append(path)
    return sorted(found)


def set_aside(entries: list[Path], backend: Backend) -> Path:
    """Move cache entries out of the cache, beside it (``<cache>.set-aside/<same relative path>``); returns that
    folder. The next run compiles what they held again."""
    root = cache_dir(backend).resolve()
    aside = root.with_name(root.name + SET_ASIDE_SUFFIX)
    for entry in entries:
        target = aside / entry.resolve().relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(entry, target)
    return aside


def sync_command(compiler: str, compiler_version: str | None, *, bucket: str = DEFAULT_BUCKET) -> str | None:
    """The shell command that syncs the public bucket's prebuilt cache of one neuronx-cc version into the folder
    torch-neuronx reads (shown per model); None for any other compiler: the public bucket holds Neuron caches only."""
    if compiler != "neuronx-cc":
        return None
    target = "${TORCH_NEURONX_NEFF_CACHE_DIR:-" + NEFF_CACHE_DIR + "}"
    if not compiler_version:  # not installed here: the command asks the trn2 it runs on for its own version
        folder = _folder_prefix(compiler) + \
            "$(python3 -c 'import importlib.metadata as m; print(m.version(\"neuronx-cc\"))')"
        return f'hf buckets sync "hf://buckets/{bucket}/{folder}" {target}'
    return f"hf buckets sync hf://buckets/{bucket}/{cache_key(compiler, compiler_version)} {target}"


def local_cache_command(compiler: str, compiler_version: str | None, backend_name: str = "cpu") -> str:
    """How to keep a local inductor cache of one torch version warm: point TORCHINDUCTOR_CACHE_DIR at the folder
    neuronhelpers runs use on the reader's machine (their NEURONHELPERS_HOME, not ours); later runs reuse it."""
    home_default = VARIABLES[HOME_ENV].default
    return (f"export {get_backend(backend_name).cache_env}=${{{HOME_ENV}:-{home_default}}}/compile-cache/"
            f"{backend_name}/{cache_key(compiler, compiler_version)}")


# ------------------------------------------------------------------------------------------------
# Sync and publish. A cache travels as <root>/<compiler>-<version>/ (neuronxcc-2.28.7631.0/ab/cd/<key>.neff),
# the layout of the public bucket; our manifest is optional. Entries land at the local cache root with the
# same relative path, where torch-neuronx reads them ($TORCH_NEURONX_NEFF_CACHE_DIR/ab/cd/<key>.neff).
# hf://buckets/... goes through huggingface_hub's bucket API; other sources through fsspec.
# ------------------------------------------------------------------------------------------------

MANIFEST = "neuronhelpers-cache.json"  # written by publish_cache, informative: a sync never needs nor copies it
BUCKET_PREFIX = "hf://buckets/"
VERSION_FOLDER = re.compile(r"^(neuronxcc|inductor)-[A-Za-z0-9_.+-]+$")


def is_version_folder(name: str) -> bool:
    """Is this the name of one compiler version's cache (neuronxcc-<version>, inductor-<version>)?"""
    return bool(VERSION_FOLDER.match(name))


def _fs(url: str):
    import fsspec

    if "://" not in url:
        url = os.path.abspath(url)
    elif url.startswith("hf://"):
        from neuronhelpers.core.network import hub_endpoint, hub_reachable

        if not hub_reachable():  # say so in one line, before huggingface_hub's offline error
            raise UserError(f"cannot reach the Hub ({hub_endpoint()}) for {url}: go online, or give a local folder "
                            "(`neuronhelpers cache sync FOLDER`)")
    return fsspec.core.url_to_fs(url)


def current_key(backend: Backend) -> str:
    from neuronhelpers.core.versions import compiler_for

    return cache_key(*compiler_for(backend))


def wanted_key(backend: Backend, compiler_version: str | None = None) -> str:
    """The version folder a sync takes: the installed compiler's, or that of ``compiler_version`` when given
    (``--compiler-version 2.28.7631.0``, or the folder name itself)."""
    from neuronhelpers.core.versions import compiler_for

    if not compiler_version:
        return current_key(backend)
    compiler = compiler_for(backend)[0]
    return cache_key(compiler, compiler_version.removeprefix(_folder_prefix(compiler)))


def manifest_for(backend: Backend, files: int) -> dict:
    import datetime as dt

    from neuronhelpers.core.versions import compiler_for, distribution_version

    compiler, version = compiler_for(backend)
    return {"backend": backend.name, "compiler": compiler, "compiler_version": version,
            "torch": distribution_version("torch"), "key": cache_key(compiler, version), "files": files,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def publish_cache(dest: str, backend: Backend) -> tuple[str, int]:
    """Upload the local cache of the current compiler version to ``dest``/<compiler>-<version>/, each entry at its
    path under the cache root (ab/cd/<key>.neff), plus our manifest (informative)."""
    import json

    local = cache_dir(backend)
    files = [p for p in local.rglob("*") if p.is_file()] if local.is_dir() else []
    if not files:
        raise UserError(f"the local compile cache {local} is empty: run a model or a sweep first, then publish")
    fs, root = _fs(dest)
    target = f"{root.rstrip('/')}/{current_key(backend)}"
    fs.makedirs(target, exist_ok=True)
    fs.put(f"{local}/", f"{target}/", recursive=True)
    with fs.open(f"{target}/{MANIFEST}", "w") as handle:
        handle.write(json.dumps(manifest_for(backend, len(files)), indent=1))
    return f"{dest.rstrip('/')}/{current_key(backend)}", len(files)


def _versions_in(fs, root: str) -> list[str]:
    try:
        entries = fs.ls(root, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = (e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")
    return sorted(n for n in names if is_version_folder(n))


def available_caches(source: str) -> list[str]:
    """The compiler versions a cache source holds: its <compiler>-<version> folders (a manifest is not needed)."""
    fs, root = _fs(source)
    return _versions_in(fs, root.rstrip("/"))


def _refusal(source: str, held: str, key: str, asked: bool) -> UserError:
    """One line: what the source holds and which version this sync wants. Another version is never used."""
    if asked:
        wanted = f"--compiler-version asks for {key}"
    elif key.endswith("-unknown"):
        wanted = f"this machine compiles with {key} (its compiler is not installed here: give --compiler-version V)"
    else:
        wanted = f"this machine compiles with {key}"
    return UserError(f"the cache at {source} {held}; {wanted}. A cache of another compiler version is never used: "
                     "sync the matching one, or let the first runs compile (they fill the local cache)")


def _source_folder(fs, root: str, source: str, key: str, asked: bool) -> str:
    """The folder of ``source`` that holds ``key``'s entries: SOURCE itself (a <compiler>-<version> folder, or a
    legacy folder with our manifest) or its <key> subfolder. Any other version is refused in one line."""
    import json

    bucket = source.startswith(BUCKET_PREFIX)
    name = root.rsplit("/", 1)[-1]
    if is_version_folder(name):
        folder = root
        if name != key:
            raise _refusal(source, f"holds {name}", key, asked)
    elif not bucket and fs.isfile(f"{root}/{MANIFEST}"):
        folder = root
    else:
        held = _versions_in(fs, root)
        if key not in held:
            if held:
                raise _refusal(source, f"holds {', '.join(held)}", key, asked)
            raise UserError(f"no compile cache at {source}: give a neuronxcc-<version> (or inductor-<version>) "
                            "folder or a folder holding them, e.g. one written by `neuronhelpers cache publish`")
        folder = f"{root}/{key}"
    if not bucket and fs.isfile(f"{folder}/{MANIFEST}"):  # optional; where present, its key must match
        with fs.open(f"{folder}/{MANIFEST}") as handle:
            compiled_by = json.loads(handle.read()).get("key")
        if compiled_by != key:
            raise _refusal(source, f"was compiled by {compiled_by}", key, asked)
    return folder


def _digest(handle) -> str:
    import hashlib

    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _unchanged(fs, path: str, size, target: Path) -> bool:
    """Is ``target`` already this entry? Same size, then the same content (a local source) or a remote copy no
    newer than ours (elsewhere, where the filesystem tells; else the content again)."""
    if not target.is_file() or target.stat().st_size != size:
        return False
    from fsspec.implementations.local import LocalFileSystem

    if not isinstance(fs, LocalFileSystem):
        try:
            return fs.modified(path).timestamp() <= target.stat().st_mtime
        except (NotImplementedError, AttributeError, KeyError, TypeError, ValueError):
            pass
    with fs.open(path, "rb") as theirs, target.open("rb") as ours:
        return _digest(theirs) == _digest(ours)


def _fetch(fs, path: str, target: Path) -> None:
    """Copy one entry in place atomically (a temporary file, then a rename, as torch-neuronx writes its own)."""
    import shutil
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.tmp.")
    try:
        with os.fdopen(handle, "wb") as out, fs.open(path, "rb") as src:
            shutil.copyfileobj(src, out)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _copy_changed(fs, folder: str, local: Path) -> tuple[int, int]:
    """Copy the entries of ``folder`` that ``local`` lacks or holds otherwise: (copied, already up to date)."""
    copied = same = 0
    for path, info in sorted(fs.find(folder, detail=True).items()):
        relative = path[len(folder):].lstrip("/")
        if relative == MANIFEST:
            continue
        target = local.joinpath(*relative.split("/"))
        if _unchanged(fs, path, info.get("size"), target):
            same += 1
        else:
            _fetch(fs, path, target)
            copied += 1
    return copied, same


def _sync_bucket(url: str, local: Path) -> tuple[int, int]:
    """hf://buckets/... through huggingface_hub's bucket sync, which moves only changed files (size, mtime)."""
    import huggingface_hub

    local.mkdir(parents=True, exist_ok=True)
    plan = huggingface_hub.sync_bucket(url, str(local), exclude=[MANIFEST], quiet=True)
    actions = [op.action for op in plan.operations]
    return actions.count("download"), actions.count("skip")


def sync_cache(source: str, backend: Backend, compiler_version: str | None = None) -> tuple[Path, int, int]:
    """Fill the local cache from ``source``: a <compiler>-<version> folder, or a root holding them (the installed
    compiler's is taken, or ``compiler_version``'s); any other version is refused. Entries keep their relative path
    under the cache root; only changed files move. Returns (local cache, files copied, files already up to date)."""
    key = wanted_key(backend, compiler_version)
    fs, root = _fs(source)  # hf://: says "cannot reach the Hub" before any network call
    root = root.rstrip("/")
    folder = _source_folder(fs, root, source, key, asked=bool(compiler_version))
    local = cache_dir(backend)
    if source.startswith(BUCKET_PREFIX):
        url = source.rstrip("/") + ("" if folder == root else f"/{key}")
        copied, same = _sync_bucket(url, local)
    else:
        copied, same = _copy_changed(fs, folder, local)
    if copied + same == 0:
        raise UserError(f"no compile cache at {source}: its {key} folder holds no entries")
    return local, copied, same


def cache_files(backend: Backend) -> set[str]:
    """Relative paths of the files in the local cache (to tell whether a run added compiled graphs)."""
    local = cache_dir(backend)
    return {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()} if local.is_dir() else set()
