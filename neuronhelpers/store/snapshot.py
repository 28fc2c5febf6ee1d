"""Dated local snapshots of the published dataset, so lessons read real Trainium verdicts offline.

``take_snapshot`` (``neuronhelpers snapshot``, run by ``make demo``) downloads the dataset's Parquet files, where the
Hub answers, into ``NEURONHELPERS_HOME/published/<org>--<name>/<YYYY-MM-DD>/`` (the repo's paths kept) with a stamp
(``STAMP``): the repo, when it was taken (UTC), the commit it holds and its files. It is written into a temporary
folder beside the others and renamed into place whole, so a failed download leaves the previous snapshot as it was;
a second snapshot on one day replaces that day's. ``newest_snapshot`` finds the newest complete one without the network.

``published_source`` is the one choice the lessons make (notebooks 01 and 05): the Hub when it is reachable (and the
lesson's FETCH_FROM_HUB let the kernel reach it), else the newest snapshot, said with its date, else the made-up
example (store/example.py), said as such.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core.errors import UserError, first_line
from neuronhelpers.core.settings import dataset_repo, home

STAMP = "SNAPSHOT.json"
HF_DATASETS = "hf://datasets/"


def snapshots_dir(repo_id: str) -> Path:
    """Where the snapshots of one dataset repo live, one dated folder each."""
    return home() / "published" / repo_id.replace("/", "--", 1)


@dataclass(frozen=True)
class Snapshot:
    folder: Path
    repo_id: str
    taken_at: str  # ISO time, UTC
    revision: str | None  # the commit it holds, where the Hub said
    files: tuple[str, ...]

    @property
    def date(self) -> str:
        return self.taken_at[:10]

    def describe(self) -> str:
        revision = f" at revision {self.revision[:7]}" if self.revision else ""
        return (f"{self.repo_id} as of {self.date}{revision}: {len(self.files)} Parquet file(s), {self.rows()} rows, "
                f"in {self.folder}")

    def rows(self) -> int:
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(self.folder / path).num_rows for path in self.files)


def _read_stamp(folder: Path, repo_id: str) -> Snapshot | None:
    """A snapshot folder's stamp, or None where it has none, names another repo or misses a file it lists."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
        snapshot = Snapshot(folder, stamp["repo_id"], stamp["taken_at"], stamp.get("revision"), tuple(stamp["files"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if snapshot.repo_id != repo_id or not snapshot.files or not all((folder / p).is_file() for p in snapshot.files):
        return None
    return snapshot


def newest_snapshot(repo_id: str | None = None) -> Snapshot | None:
    """The newest complete snapshot of the dataset on this machine (no network), or None where there is none."""
    repo_id = repo_id or dataset_repo()
    base = snapshots_dir(repo_id)
    folders = sorted((p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.name, reverse=True) if base.is_dir() else []
    return next((s for folder in folders if (s := _read_stamp(folder, repo_id)) is not None), None)


def take_snapshot(repo_id: str | None = None, *, api=None, now: dt.datetime | None = None) -> Snapshot | None:
    """Download the dataset's Parquet files into today's snapshot folder, whole or not at all; None (nothing touched)
    where the Hub cannot be reached. A download that fails, or a repo without Parquet files, raises UserError in one
    line and leaves the previous snapshot as it was."""
    from huggingface_hub import HfApi

    from neuronhelpers.core.network import hub_reachable
    from neuronhelpers.store.publish import REPO_TYPE, check_repo_id, download_files, remote_hashes

    repo_id = repo_id or dataset_repo()
    check_repo_id(repo_id)
    api = api or HfApi()
    if not hub_reachable(endpoint=getattr(api, "endpoint", None)):
        return None
    now = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    base = snapshots_dir(repo_id)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{now.date().isoformat()}-", dir=base))
    try:
        revision = api.repo_info(repo_id, repo_type=REPO_TYPE).sha
        paths = sorted(p for p in remote_hashes(api, repo_id, revision=revision) if p.endswith(".parquet"))
        if not paths:
            raise UserError(f"{repo_id} holds no Parquet file")
        download_files(api, repo_id, paths, tmp, revision=revision)
        (tmp / STAMP).write_text(json.dumps({"repo_id": repo_id, "taken_at": now.isoformat(timespec="seconds"),
                                             "revision": revision, "files": paths}, indent=1) + "\n")
        snapshot = _into_place(tmp, base / now.date().isoformat())
    except Exception as exc:  # noqa: BLE001 - whatever failed, the previous snapshot stays and the line says why
        shutil.rmtree(tmp, ignore_errors=True)
        kept = newest_snapshot(repo_id)
        raise UserError(f"no snapshot of {repo_id} taken ({first_line(exc, name=not isinstance(exc, UserError))}); "
                        + (f"the one of {kept.date} is kept" if kept else "there is none yet")) from None
    return snapshot


def snapshot_line(repo_id: str | None = None) -> tuple[str, bool]:
    """Take a snapshot: (one line that says what was taken, or why none was and what the lessons read instead,
    and whether one was taken). `neuronhelpers snapshot` and the demo print it."""
    repo_id = repo_id or dataset_repo()
    taken = take_snapshot(repo_id)
    if taken is not None:
        return f"snapshot taken: {taken.describe()}", True
    return (f"no snapshot of {repo_id} taken: the Hub cannot be reached from here; "
            f"{instead_line(newest_snapshot(repo_id))}"), False


def instead_line(kept: Snapshot | None) -> str:
    """What the lessons read where no snapshot was taken now."""
    return (f"the lessons read the snapshot of {kept.date} ({kept.folder})" if kept else
            "the lessons read neuronhelpers' made-up example (no snapshot here yet)")


def _into_place(tmp: Path, target: Path) -> Snapshot:
    """Rename a finished snapshot folder into place; the day's earlier one is moved aside first and removed after."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        target.replace(old / target.name)
    tmp.replace(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    snapshot = _read_stamp(target, json.loads((target / STAMP).read_text())["repo_id"])
    assert snapshot is not None, target  # written just above, every file listed
    return snapshot


# ------------------------------------------------------------------------------------------------
# What a lesson reads: the Hub, else the newest snapshot, else the example
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishedSource:
    location: str  # what load_results reads: hf://datasets/..., or a folder
    kind: str  # "hub", "snapshot", "folder" or "example"
    line: str  # what a lesson prints
    date: str | None = None  # the snapshot's date


def published_source(dataset: str | Path | None = None, *, example_folder: str | Path | None = None
                     ) -> PublishedSource:
    """Where to read the published Trainium verdicts from: ``dataset`` (a Hub repo id or hf://datasets/... path,
    default ``settings.dataset_repo()``; a local folder is read as it is) from the Hub when it can be reached; else
    the newest snapshot of it (``newest_snapshot``); else the made-up example written into ``example_folder`` (a new
    temporary folder by default). Its ``line`` says which, the snapshot's date, or that the example is made up."""
    from neuronhelpers.core.network import hub_reachable
    from neuronhelpers.store.example import EXAMPLE_RUNNER, write_published_example

    text = str(dataset or dataset_repo())
    if not text.startswith(HF_DATASETS) and Path(text).is_dir():
        return PublishedSource(text, "folder", f"the Trainium verdicts in the folder {text}")
    repo_id = text.removeprefix(HF_DATASETS).split("@", 1)[0].strip("/")
    if hub_reachable():
        return PublishedSource(f"{HF_DATASETS}{repo_id}", "hub", f"the published dataset {repo_id}, read from the "
                                                                 "Hub now")
    snapshot = newest_snapshot(repo_id)
    if snapshot is not None:
        return PublishedSource(str(snapshot.folder), "snapshot",
                               f"the published dataset as of {snapshot.date} (snapshot taken by make demo): "
                               f"{repo_id}, read offline", snapshot.date)
    folder = write_published_example(Path(example_folder or tempfile.mkdtemp(prefix="nh-published-")))
    return PublishedSource(str(folder), "example",
                           f"no snapshot of {repo_id} on this machine (make demo takes one where the Hub answers): "
                           f"neuronhelpers' made-up example in the published layout (runner '{EXAMPLE_RUNNER}'), "
                           "not measurements")
