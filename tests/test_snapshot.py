"""Dated snapshots of the published dataset (store/snapshot.py): taken from the Hub where it answers (here the local
Hub, tests/hub_server.py, serving the made-up example as the dataset), whole or not at all, and what the lessons read:
the Hub, else the newest snapshot with its date, else the example, said as such. Nothing real is downloaded."""

import datetime as dt
import json

import pytest

from conftest import run_cli
from neuronhelpers.core.errors import UserError
from neuronhelpers.store import example, snapshot
from neuronhelpers.store.dataset import load_results
from test_publish import REPO, api, hub  # noqa: F401 - the local Hub's fixtures

DAY_1 = dt.datetime(2027, 1, 5, 8, 0, tzinfo=dt.timezone.utc)
DAY_2 = dt.datetime(2027, 1, 6, 8, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONHELPERS_HOME", str(tmp_path / "nh-home"))
    return tmp_path / "nh-home"


@pytest.fixture
def served(hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    """The local Hub serving the example, laid out as the published dataset, as the repo REPO."""
    api.create_repo(REPO, repo_type="dataset")
    api.upload_folder(folder_path=str(example.write_published_example(tmp_path / "published")), repo_id=REPO,
                      repo_type="dataset")
    return hub


def test_a_snapshot_lands_in_a_dated_folder_with_its_stamp_and_reads_back_with_load_results(
        home, served, api):  # noqa: F811
    taken = snapshot.take_snapshot(REPO, api=api, now=DAY_1)
    assert taken.folder == home / "published" / "neuronhelpers-test--results" / "2027-01-05"
    stamp = json.loads((taken.folder / snapshot.STAMP).read_text())
    assert stamp == {"repo_id": REPO, "taken_at": "2027-01-05T08:00:00+00:00",
                     "revision": served.repos[REPO]["main"][-1].sha,
                     "files": sorted(example.example_file(p) for p in (example.OLDER, example.NEWER))}
    df = load_results(taken.folder)
    assert len(df) == 10 and set(df.backend) == {"neuron"} and taken.rows() == 10
    assert snapshot.newest_snapshot(REPO) == taken
    assert [p.name for p in taken.folder.parent.iterdir()] == ["2027-01-05"]  # no temporary folder left


def test_a_failed_download_keeps_the_previous_snapshot(home, served, api, monkeypatch):  # noqa: F811
    first = snapshot.take_snapshot(REPO, api=api, now=DAY_1)
    before = {p: p.read_bytes() for p in first.folder.rglob("*") if p.is_file()}
    calls = []

    def broken(*args, **kwargs):
        calls.append(args)
        if len(calls) > 1:  # the first file arrives, the second does not
            raise ConnectionError("connection reset by peer")
        return api.__class__.hf_hub_download(api, *args, **kwargs)

    monkeypatch.setattr(api, "hf_hub_download", broken)
    for day in (DAY_1, DAY_2):  # the same day's snapshot and a new day's
        calls.clear()
        with pytest.raises(UserError, match=rf"^no snapshot of {REPO} taken \(ConnectionError: connection reset by "
                                            r"peer\); the one of 2027-01-05 is kept$"):
            snapshot.take_snapshot(REPO, api=api, now=day)
    assert {p: p.read_bytes() for p in first.folder.rglob("*") if p.is_file()} == before
    assert [p.name for p in first.folder.parent.iterdir()] == ["2027-01-05"]
    assert snapshot.newest_snapshot(REPO) == first


def test_offline_the_lessons_read_the_newest_snapshot_and_say_its_date(home, served, api, monkeypatch):  # noqa: F811
    snapshot.take_snapshot(REPO, api=api, now=DAY_1)
    newest = snapshot.take_snapshot(REPO, api=api, now=DAY_2)
    damaged = newest.folder.parent / "2027-01-07"  # newer, but its stamp never came: an interrupted copy
    damaged.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert snapshot.take_snapshot(REPO, api=api) is None  # offline: nothing taken, nothing touched
    source = snapshot.published_source(REPO)
    assert (source.kind, source.location, source.date) == ("snapshot", str(newest.folder), "2027-01-06")
    assert source.line == (f"the published dataset as of 2027-01-06 (snapshot taken by make demo): {REPO}, read "
                           "offline")
    assert snapshot.published_source(f"hf://datasets/{REPO}").location == str(newest.folder)


def test_with_no_snapshot_the_lessons_read_the_example_said_as_such(home, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = snapshot.published_source(example_folder=tmp_path / "example")
    assert source.kind == "example" and source.location == str(tmp_path / "example")
    assert source.line.startswith("no snapshot of aws-neuron/torch-neuronx-model-support on this machine (make demo "
                                  "takes one where the Hub answers): neuronhelpers' made-up example")
    assert set(load_results(source.location).runner) == {example.EXAMPLE_RUNNER}
    folder = snapshot.published_source(str(tmp_path / "example"))  # a folder given is read as it is
    assert (folder.kind, folder.location) == ("folder", str(tmp_path / "example"))


def test_the_snapshot_command_takes_one_from_the_hub_and_says_one_line_without_it(home, served, tmp_path):
    env = {"HF_ENDPOINT": served.url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf-home"),
           "NO_PROXY": "127.0.0.1"}
    proc = run_cli("snapshot", "--repo", REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"snapshot taken: {REPO} as of ") and "2 Parquet file(s), 10 rows" in proc.stdout
    proc = run_cli("snapshot", "--repo", REPO, env={**env, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert proc.returncode == 1 and len(proc.stdout.strip().splitlines()) == 1, proc
    assert proc.stdout.startswith(f"no snapshot of {REPO} taken: the Hub cannot be reached from here; the lessons "
                                  "read the snapshot of ")
