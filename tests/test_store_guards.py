"""The dataset store under concurrent writers and bad input: no row lost, no file hidden, no false gate.

Writers are real processes appending to one folder (store/lock.py serialises them), the reader runs beside them; file
variants are the published layout's plausible forms written with pyarrow; the round trip is property-based
(hypothesis) over generated rows.
"""

import datetime as dt
import errno
import multiprocessing
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import result_row, run_cli
from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.store import dataset, diff, example, lock, schema
from neuronhelpers.store.example import NEWER

# ---- concurrent writers ------------------------------------------------------------------------------------------

WRITERS, APPENDS = 4, 250


def _append_one_at_a_time(folder, writer, appends):
    for index in range(appends):
        dataset.append_rows(folder, [result_row(f"org/w{writer}-m{index}")])


def _read_until(folder, stop, report):
    loads = skipped = 0
    errors = []
    while not stop.is_set():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                skipped += len(dataset.load_results(folder, validate=False).attrs["skipped"])
        except Exception as exc:  # noqa: BLE001 - what the test counts
            errors.append(repr(exc))
        loads += 1
    report.put((loads, skipped, errors))


@pytest.mark.slow
def test_four_writers_appending_250_rows_each_lose_none_and_a_reader_beside_them_never_errs(tmp_path):
    context = multiprocessing.get_context("spawn")
    stop, report = context.Event(), context.Queue()
    reader = context.Process(target=_read_until, args=(str(tmp_path), stop, report))
    reader.start()
    writers = [context.Process(target=_append_one_at_a_time, args=(str(tmp_path), w, APPENDS)) for w in range(WRITERS)]
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(timeout=600)
    stop.set()
    loads, skipped, errors = report.get(timeout=60)
    reader.join(timeout=60)
    assert [proc.exitcode for proc in writers] == [0] * WRITERS
    df = dataset.load_results(tmp_path)
    assert len(df) == WRITERS * APPENDS and df.model_id.nunique() == WRITERS * APPENDS
    assert loads > 0 and skipped == 0 and errors == []


def test_the_lock_is_reentrant_and_a_second_process_waits_for_it(tmp_path):
    """append_rows upgrades older files under the lock it holds; another process cannot take it meanwhile."""
    context = multiprocessing.get_context("spawn")
    with lock.folder_lock(tmp_path), lock.folder_lock(tmp_path):
        proc = context.Process(target=_take_lock_briefly, args=(str(tmp_path),))
        proc.start()
        proc.join(timeout=60)
        assert proc.exitcode == 3  # it could not take the lock within its wait
    proc = context.Process(target=_take_lock_briefly, args=(str(tmp_path),))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 0


def _take_lock_briefly(folder):
    try:
        with lock.folder_lock(folder, wait_s=0.3):
            pass
    except UserError:
        raise SystemExit(3) from None


def test_a_file_system_without_locks_is_refused_in_one_line_and_nothing_is_written(tmp_path, monkeypatch):
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(UserError, match=r"file system without file locks \(No locks available\).*local folder"):
        dataset.append_rows(tmp_path, [result_row("org/model")])
    assert dataset.parquet_files(tmp_path) == []


# ---- a write changes only what it was asked to ---------------------------------------------------------------------

def test_an_append_keeps_the_columns_and_metadata_of_files_it_upgrades_or_joins(tmp_path):
    """A file of ours in an older schema with an extra column (`instance_type`): the append upgrades it and keeps
    the column; a published-layout file beside it (mixed folder, with a hybrid `tp`) is not touched at all."""
    older = schema.rows_to_table([result_row("org/old", library_version="5.22.0")])
    older = older.drop_columns(["evidence"]).append_column("instance_type", pa.array(["trn2.48xlarge"]))
    older = older.replace_schema_metadata({b"huggingface": b'{"info": "kept"}'})
    old_path = tmp_path / dataset.version_pair_file(result_row("org/old", library_version="5.22.0"))
    old_path.parent.mkdir(parents=True)
    pq.write_table(older, old_path)
    published_file = tmp_path / "published.parquet"
    pq.write_table(example.example_rows(NEWER), published_file)
    before = published_file.read_bytes()

    dataset.append_rows(tmp_path, [result_row("org/new")])

    upgraded = pq.read_table(old_path)
    assert "evidence" in upgraded.column_names and upgraded.column("instance_type").to_pylist() == ["trn2.48xlarge"]
    assert published_file.read_bytes() == before
    df = dataset.load_results(tmp_path)
    assert set(df.model_id) >= {"org/old", "org/new"} and "instance_type" in df


def test_an_append_into_a_file_keeps_its_schema_metadata_and_unknown_columns(tmp_path):
    path = tmp_path / dataset.version_pair_file(result_row("org/a"))
    dataset.append_rows(tmp_path, [result_row("org/a")])
    table = pq.read_table(path).append_column("tp", pa.array([8], pa.int32()))
    pq.write_table(table.replace_schema_metadata({b"huggingface": b"{}"}), path)
    dataset.append_rows(tmp_path, [result_row("org/b")])
    after = pq.read_table(path)
    assert after.column("tp").to_pylist() == [8, None] and sorted(after.column("model_id").to_pylist()) == [
        "org/a", "org/b"]


def test_a_written_file_is_readable_by_others_as_a_plain_write_leaves_it_and_keeps_a_chosen_mode(tmp_path):
    """The atomic write's temporary file is private (0600); renamed into place as it is, a shared sweep folder's files
    became unreadable to everyone else. A new file gets 0644, a replaced one keeps the mode it had."""
    import stat

    path = tmp_path / dataset.version_pair_file(result_row("org/a"))
    dataset.append_rows(tmp_path, [result_row("org/a")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o664)  # a group-writable folder
    dataset.append_rows(tmp_path, [result_row("org/b")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o664


def test_identical_rows_in_one_call_are_written_once_and_a_corrected_row_wins(tmp_path):
    dataset.append_rows(tmp_path, [result_row("org/a"), result_row("org/a")])
    assert len(dataset.load_results(tmp_path)) == 1
    dataset.append_rows(tmp_path, [result_row("org/a"), result_row("org/a", "FAIL", stage="compile")])
    df = dataset.load_results(tmp_path)
    assert list(df.result) == ["FAIL"]


# ---- the published layout's variants: read or refused ---------------------------------------------------------------

def _variant(name):
    table = example.example_rows(NEWER)

    def set_column(column, values, typ):
        return table.set_column(table.schema.get_field_index(column), column, pa.array(values, typ))

    tp, times = table.column("tp").to_pylist(), table.column("tested_at").to_pylist()
    return {
        "tp float with a NaN": lambda: set_column("tp", [float(x) for x in tp[:-1]] + [float("nan")], pa.float64()),
        "tp float with a null": lambda: set_column("tp", [float(x) for x in tp[:-1]] + [None], pa.float64()),
        "tp int64": lambda: set_column("tp", tp, pa.int64()),
        "times as text with a zone": lambda: set_column("tested_at", [t.isoformat() for t in times], pa.string()),
        "times as text without a zone": lambda: set_column(
            "tested_at", [t.replace(tzinfo=None).isoformat() for t in times], pa.string()),
        "error typed null": lambda: table.set_column(table.schema.get_field_index("error"), "error",
                                                     pa.nulls(table.num_rows)),
        "results in lower case": lambda: set_column(
            "result", [r and r.lower() for r in table.column("result").to_pylist()], pa.string()),
    }[name]()


VARIANTS = ["tp float with a NaN", "tp float with a null", "tp int64", "times as text with a zone",
            "times as text without a zone", "error typed null", "results in lower case"]


@pytest.mark.parametrize("name", VARIANTS)
def test_a_published_file_variant_is_read_with_its_values_and_takes_an_append(tmp_path, name):
    original = example.example_rows(NEWER)
    path = tmp_path / example.example_file(NEWER)
    path.parent.mkdir(parents=True)
    pq.write_table(_variant(name), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dataset.DatasetWarning)  # nothing skipped, nothing off the vocabulary
        df = dataset.load_results(tmp_path)
    assert len(df) == original.num_rows
    assert str(df["neuron_cores"].dtype) == "Int64" and str(df["tp"].dtype) == "Int64"
    cores = original.column("tp").to_pylist()
    if "NaN" in name or "null" in name:
        cores[-1] = None
    assert [None if pd.isna(c) else int(c) for c in df["neuron_cores"]] == cores
    assert set(df.result) <= set(vocab.RESULTS)
    times = [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in original.column("tested_at").to_pylist()]
    assert [t.to_pydatetime() for t in df["timestamp"]] == times
    dataset.append_rows(tmp_path, [_trainium_row()])
    assert len(dataset.load_results(tmp_path)) == original.num_rows + 1


def test_an_append_into_a_file_the_reader_would_skip_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / example.example_file(NEWER)
    path.parent.mkdir(parents=True)
    table = example.example_rows(NEWER)
    pq.write_table(table.set_column(table.schema.get_field_index("tp"), "tp",
                                    pa.array([1.5] * table.num_rows, pa.float64())), path)
    before = path.read_bytes()
    with pytest.warns(dataset.DatasetWarning, match="column neuron_cores holds 1.5, not a whole number"):
        assert dataset.load_results(tmp_path).empty
    with pytest.raises(UserError, match=r"cannot be read \(column neuron_cores holds 1.5.*nothing was written"):
        dataset.append_rows(tmp_path, [_trainium_row()])
    assert path.read_bytes() == before


def test_a_folder_whose_only_file_is_damaged_is_not_written_in_either_layout(tmp_path):
    """Its layout cannot be told: our files would be written into what may be a published folder."""
    damaged = tmp_path / "data" / "train.parquet"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"PAR1 not really")
    with pytest.raises(UserError, match="none of which can be read, so its layout .* cannot be told"):
        dataset.append_rows(tmp_path, [result_row("org/a")])
    assert dataset.parquet_files(tmp_path) == [damaged]


# ---- one validation for every row ---------------------------------------------------------------------------------

def _trainium_row(**overrides):
    model = overrides.pop("model_id", "Qwen/Qwen3-0.6B")
    values = dict(backend="neuron", compiler="neuronx-cc", compiler_version=NEWER[0], neuronx_cc=NEWER[0],
                  library_version=NEWER[1], weights="hub", neuron_cores=2,
                  timestamp=dt.datetime(2026, 12, 5, tzinfo=dt.timezone.utc))
    values.update(overrides)
    return result_row(model, **values)


RULES = [  # (the row, in which layout, the rule's words)
    (dict(model_id=""), "ours", "a row without a model_id"),
    (dict(result="MAYBE"), "ours", "unknown result value 'MAYBE'"),
    (dict(result="FAIL", stage="banana"), "ours", "unknown stage value 'banana'"),
    (dict(result="FAIL", stage=None), "ours", "FAIL without a stage"),
    (dict(verification=None), "ours", "PASS without a verification"),
    (dict(library="keras"), "ours", "unknown library value 'keras'"),
    (dict(timestamp="yesterday"), "ours", "timestamp 'yesterday' is not an ISO time"),
    (dict(model_id="tiny/acme--m", twin_from="acme/m", config_digest="sha256:0123456789ab"), "ours",
     "is a model twin without config_source"),
    (dict(colour="blue"), "ours", "has columns the schema does not: colour"),
    (dict(model_id="/home/user/private-ckpt"), "published", "is not under a Hub id"),
    (dict(weights="shelf: gguf"), "published", "ran on Trainium real checkpoint, not Trainium"),
    (dict(backend="cpu"), "published", "ran on CPU real checkpoint, not Trainium"),
    (dict(neuronx_cc=None), "published", "names no neuronx_cc version"),
    (dict(result="UNTESTED", stage="dependency", verification=None), "published", "is UNTESTED, not a verdict"),
]


@pytest.mark.parametrize("change, layout, words", RULES, ids=[r[2] for r in RULES])
def test_every_rule_refuses_its_row_in_one_line_and_nothing_is_written(tmp_path, change, layout, words):
    folder = tmp_path / layout
    if layout == "published":
        example.write_published_example(folder)
    else:
        dataset.append_rows(folder, [_trainium_row(model_id="org/kept")])
    before = {p: p.read_bytes() for p in dataset.parquet_files(folder)}
    rows = [_trainium_row(model_id="org/fine"), {**_trainium_row(), **change}]
    with pytest.raises(UserError) as raised:
        dataset.append_rows(folder, rows)
    message = str(raised.value)
    assert "\n" not in message and words in message and "row 2 of 2" in message and "nothing was written" in message
    assert {p: p.read_bytes() for p in dataset.parquet_files(folder)} == before


def test_a_timestamp_as_iso_text_is_read_as_utc(tmp_path):
    dataset.append_rows(tmp_path, [result_row("org/a", timestamp="2026-12-05T10:00:00")])
    stamp = dataset.load_results(tmp_path)["timestamp"].iloc[0]
    assert stamp == pd.Timestamp("2026-12-05T10:00:00", tz="UTC")


def test_a_corrected_row_in_the_published_layout_is_refused_not_dropped(tmp_path):
    folder = example.write_published_example(tmp_path / "published")
    existing = dataset.load_results(folder)
    first = dataset.row_records(existing[existing.neuronx_cc == NEWER[0]].head(1))[0]
    corrected = {**first, "result": vocab.FAIL if first["result"] == vocab.PASS else vocab.PASS,
                 "stage": "compile" if first["result"] == vocab.PASS else None, "verification": "exact",
                 "weights": "hub", "runner": None}
    with pytest.raises(UserError, match="already holds .* with other values .*result.*not overwritten"):
        dataset.append_rows(folder, [corrected])


# ---- the gate round-trips; diff compares one pair a side -----------------------------------------------------------

@pytest.mark.parametrize("layout", ["ours", "published", "mixed"])
def test_check_write_then_check_exits_0_on_every_layout(tmp_path, layout):
    folder = tmp_path / "results"
    if layout in ("ours", "mixed"):
        dataset.append_rows(folder, [result_row("org/pass"), result_row("org/fail", "FAIL", stage="compile"),
                                     result_row("org/excluded", "EXCLUDED", verification=None, error="why"),
                                     result_row("org/untested", "UNTESTED", stage="dependency", verification=None)])
    if layout in ("published", "mixed"):  # (the published files last: a published folder takes only Trainium rows)
        example.write_published_example(folder)
    expected = tmp_path / "expected.csv"
    assert run_cli("check", str(folder), "--expected", str(expected), "--write").returncode == 0
    proc = run_cli("check", str(folder), "--expected", str(expected))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 change(s) of verdict" in proc.stdout


def test_diff_refuses_a_side_with_two_compilers_sharing_a_library_version_naming_both(tmp_path):
    folder = tmp_path / "side"
    dataset.append_rows(folder, [result_row("org/a", compiler_version="2.13.0"),
                                 result_row("org/a", compiler_version="2.14.1")])
    with pytest.raises(UserError, match=r"holds 2 version pairs \(transformers 5.23.0 on 2.14.1, transformers 5.23.0 "
                                        r"on 2.13.0\): give one results file a side, e.g. .*\.parquet"):
        diff.load_side(folder)


# ---- the round trip, property-based ------------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_VERDICTS = st.sampled_from([
    dict(result="PASS", verification="exact", stage=None),
    dict(result="PASS", verification="within_tolerance", stage=None),
    dict(result="FAIL", verification=None, stage="compile"),
    dict(result="FAIL", verification=None, stage="mismatch"),
    dict(result="UNTESTED", verification=None, stage="dependency"),
    dict(result="EXCLUDED", verification=None, stage=None),
])


@st.composite
def rows(draw):
    return [result_row(
        f"org{draw(st.integers(0, 3))}/model-{index}", **draw(_VERDICTS),
        error=draw(st.none() | _TEXT), neuron_cores=draw(st.none() | st.integers(1, 128)),
        wall_s=draw(st.none() | st.floats(0, 1e6, allow_nan=False)),
        peak_memory_bytes=draw(st.none() | st.integers(0, 2**40)),
        tokens=draw(st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=8)),
        library_version=draw(st.sampled_from(["5.23.0", "5.24.0"])),
        timestamp=draw(st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 1, 1),
                                    timezones=st.just(dt.timezone.utc))),
    ) for index in range(draw(st.integers(1, 6)))]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=rows(), second=rows(), extra=st.booleans())
def test_read_append_read_keeps_every_value_and_type(tmp_path_factory, first, second, extra):
    folder = tmp_path_factory.mktemp("roundtrip")
    dataset.append_rows(folder, first)
    if extra:  # another tool's column in one file: kept through the next append
        path = dataset.parquet_files(folder)[0]
        table = pq.read_table(path)
        pq.write_table(table.append_column("note_of_another_tool", pa.array(["x"] * table.num_rows)), path)
    dataset.append_rows(folder, second)
    df = dataset.load_results(folder)
    def one_per_key(batch):  # in one call, the later of two rows with one resume key
        return {schema.resume_key(row): row for row in batch}

    wanted, later = one_per_key(first), one_per_key(second)
    # a later call's row replaces what it ``replaces`` (the same key, or a verdict and a non-verdict of one model)
    wanted = {key: row for key, row in wanted.items() if not any(schema.replaces(new, key) for new in later)}
    wanted.update(later)
    assert len(df) == len(wanted)
    got = {schema.resume_key(row): row for row in dataset.row_records(df)}
    assert set(got) == set(wanted)
    for key, want in wanted.items():
        have = got[key]
        for column in ("result", "stage", "verification", "error", "library_version"):
            assert have[column] == want[column], column
        for column in ("neuron_cores", "peak_memory_bytes"):
            assert (have[column] is None) == (want[column] is None) and (
                want[column] is None or int(have[column]) == want[column]), column
        assert have["wall_s"] == want["wall_s"] or (have["wall_s"] is None and want["wall_s"] is None)
        assert list(have["tokens"]) == want["tokens"] if want["tokens"] is not None else have["tokens"] is None
        assert have["timestamp"] == want["timestamp"]
    assert str(df["neuron_cores"].dtype) == "Int64"
    assert ("note_of_another_tool" in df) == extra


def test_every_committed_catalog_row_keeps_every_rule_a_row_written_today_keeps():
    """The rules of ``schema.validate_row`` hold for the catalog as committed, not only for rows written from now on:
    e.g. every model-twin row names where its config was read (config_source, filled for the rows of the 2.14.1 /
    5.23.0 pair by scripts/fill_config_source.py)."""
    files = sorted((Path(__file__).parents[1] / "catalog" / "data").glob("*.parquet"))
    assert files
    for path in files:
        rows = pq.read_table(path).to_pylist()
        assert len(schema.checked_rows(rows)) == len(rows), path.name
