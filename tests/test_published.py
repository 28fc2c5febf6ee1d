"""The published dataset as it is (issue: read it whole, write to it without harm, hold the twins against it).

The published layout is read from neuronhelpers' made-up example (store/example.py: two files in exactly the published
columns and types, one without `exclusion`, `hbm_peak_gb` 17.3, millisecond timestamps); writes go through
``append_rows``, and ``contribute`` / ``publish`` through a real ``huggingface_hub.HfApi`` against the local Hub
(tests/hub_server.py). The Hub's viewer is the ``datasets`` library's own parquet loader, run offline.
"""

import datetime as dt
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import result_row, run_cli
from neuronhelpers.analysis.agreement import trainium_agreement, trainium_agreement_line
from neuronhelpers.core import settings
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.models.resolve import ModelRef
from neuronhelpers.recipes import render
from neuronhelpers.store import card, dataset, example, publish, published, schema
from neuronhelpers.store.example import NEWER, OLDER
from test_publish import REPO, api, hub, write_row  # noqa: F401 - the local Hub's fixtures

FIXTURES = Path(__file__).parent / "fixtures"
OLD_DIFFUSERS = FIXTURES / "inductor-2.13.0__diffusers-0.42.1.52-columns.parquet"  # catalog/data's file at f098795
SEED = ["neuronx_cc", "library", "library_version", "neuron_cores", "result"]
SEED_TP = ["neuronx_cc", "library", "library_version", "tp", "result"]


@pytest.fixture
def published_folder(tmp_path):
    return example.write_published_example(tmp_path / "published")


def trainium_row(model_id="Qwen/Qwen3-0.6B", pair=NEWER, **overrides):
    """A PASS measured on Trainium under a Hub id, its run.py the recipe's own rendering for the neuron backend."""
    ref = ModelRef(model_id=model_id, path=model_id, task="text-generation", model_type="qwen3", weights="hub")
    values = dict(backend="neuron", compiler="neuronx-cc", compiler_version=pair[0], neuronx_cc=pair[0],
                  library_version=pair[1], weights="hub", neuron_cores=1, wall_s=401.6,
                  peak_memory_bytes=int(3.25 * 2**30), torch_neuronx="2.14.3.0", python="3.12.11",
                  timestamp=dt.datetime(2026, 12, 3, 8, 0, 0, 654321, tzinfo=dt.timezone.utc),
                  run_py=render.render_run_py(render.recipe_params(ref, get_backend("neuron"))))
    values.update(overrides)
    return result_row(model_id, **values)


def original(folder: Path, pair) -> pa.Table:
    return pq.read_table(folder / example.example_file(pair))


def load_with_datasets(folder: Path, cache: Path):
    """The Hub viewer's reader: the datasets library loading a dataset folder as the Hub does (the card's `configs`
    where it has one, else its data files), offline (HF_DATASETS_OFFLINE), with a cache of its own."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"  # read when datasets is first imported; the flag below if it already was
    import datasets

    datasets.config.HF_DATASETS_OFFLINE = True
    return datasets.load_dataset(str(folder), cache_dir=str(cache), split="train")


# ------------------------------------------------------------------------------------------------
# Reading the published layout whole
# ------------------------------------------------------------------------------------------------


def test_a_published_layout_folder_reads_whole_with_every_column_mapped_or_kept(published_folder):
    df = dataset.load_results(published_folder)
    raw = pd.concat([original(published_folder, p).to_pandas() for p in (OLDER, NEWER)], ignore_index=True)
    assert len(df) == len(raw) == 10
    llama = df[df.model_id == "meta-llama/Llama-3.1-8B-Instruct"].iloc[0]
    assert llama.neuron_cores == 2 and llama.tp == 2 and llama.wall_s == 1433
    assert llama.peak_memory_bytes / schema.PUBLISHED_GB == pytest.approx(17.3, abs=1e-9)  # GiB, to the byte
    assert llama.timestamp == pd.Timestamp("2026-12-02 09:30:15.123", tz="UTC")  # milliseconds kept
    assert (llama.backend, llama.compiler, llama.compiler_version) == ("neuron", "neuronx-cc", NEWER[0])
    assert (llama.task, llama.model_type) == ("text-generation", "llama")  # from the Selected list
    # every published column without a counterpart of ours is kept as it reads there
    for column in ("runner", "notes", "hbm_capacity_gb", "cpu_match", "english", "transformers", "accelerate", "nki",
                   "python", "neuron_driver"):
        assert df[column].astype(object).where(df[column].notna(), None).tolist() == \
            raw[column].astype(object).where(raw[column].notna(), None).tolist(), column
    excluded = df[df.model_id == "deepseek-ai/DeepSeek-V3"].iloc[0]
    assert excluded.result == "EXCLUDED" and excluded.error == "too large: needs more than 16 cores"
    unknown = df[df.model_id == "example-org/unknown-architecture-1B"].iloc[0]
    assert pd.isna(unknown.task) and pd.isna(unknown.model_type)  # known nowhere: null, never guessed
    assert df.attrs["skipped"] == [] and df.attrs["off_vocabulary"] == []


def test_an_exclusion_wins_over_the_recorded_result_and_keeps_it_in_the_reason():
    table = pa.table({"model_id": ["a/b"], schema.PUBLISHED_CORES: pa.array([1], pa.int32()), "result": ["FAIL"],
                      "error": ["boom"], "exclusion": ["not a priority yet"], "neuronx_cc": ["2.23.1"]})
    row = dataset.conform(table).to_pylist()[0]
    assert row["result"] == "EXCLUDED"
    assert row["error"] == "not a priority yet (error recorded: boom) (result recorded: FAIL)"


@pytest.mark.parametrize("layout", ["published", "ours", "mixed"])
def test_the_seed_query_works_in_both_spellings_on_either_layout_and_a_mix(tmp_path, published_folder, layout):
    ours = tmp_path / "ours"
    dataset.append_rows(ours, [result_row("Qwen/Qwen3-0.6B", neuron_cores=1)])
    folder = {"published": published_folder, "ours": ours}.get(layout, tmp_path / "mixed")
    if layout == "mixed":
        shutil.copytree(published_folder / "data", folder / "data")
        shutil.copy(next(ours.rglob("*.parquet")), folder / "data" / "ours.parquet")
    df = dataset.load_results(folder)
    seed = df[df.model_id == "Qwen/Qwen3-0.6B"][SEED]
    with_tp = df[df.model_id == "Qwen/Qwen3-0.6B"][SEED_TP]
    assert len(seed) == {"published": 2, "ours": 1, "mixed": 3}[layout]
    assert seed["neuron_cores"].tolist() == with_tp["tp"].tolist() == [1] * len(seed)
    assert seed["result"].tolist() == ["PASS"] * len(seed)


# ------------------------------------------------------------------------------------------------
# Writing: one schema per folder, and the published files kept as they are
# ------------------------------------------------------------------------------------------------


def test_appending_to_a_published_layout_folder_keeps_every_row_exactly(published_folder):
    before = {pair: original(published_folder, pair) for pair in (OLDER, NEWER)}
    touched = dataset.append_rows(published_folder, [trainium_row(pair=OLDER)])
    assert touched == [example.example_file(OLDER)]  # found by the values it holds, not by our naming
    after = original(published_folder, OLDER)
    assert after.schema.equals(schema.PUBLISHED_SCHEMA)  # the 24 published columns, in order: `exclusion` added
    old = after.slice(0, before[OLDER].num_rows)
    assert old.select(before[OLDER].column_names).equals(
        before[OLDER].cast(old.select(before[OLDER].column_names).schema))
    assert old.column("exclusion").null_count == before[OLDER].num_rows
    new = after.slice(before[OLDER].num_rows).to_pylist()[0]
    assert (new["model_id"], new[schema.PUBLISHED_CORES], new["wall_s"], new["hbm_peak_gb"]) == (
        "Qwen/Qwen3-0.6B", 1, 402, 3.25)
    assert new["tested_at"] == dt.datetime(2026, 12, 3, 8, 0, 0, 654000, tzinfo=dt.timezone.utc)
    assert new["runner"] is None and new["cpu_match"] is None and new["english"] is None  # never made up
    assert original(published_folder, NEWER).equals(before[NEWER])  # the other file untouched
    dataset.append_rows(published_folder, [trainium_row(pair=OLDER)])  # the same row again is not added twice
    assert original(published_folder, OLDER).num_rows == before[OLDER].num_rows + 1


def test_a_pair_the_dataset_lacks_gets_a_file_named_after_its_own_pattern(published_folder):
    touched = dataset.append_rows(published_folder, [trainium_row(pair=("2.24.1.0", "5.24.0"))])
    assert touched == ["data/neuronx_cc-2.24.1.0/transformers-5.24.0.parquet"]
    assert pq.read_schema(published_folder / touched[0]).equals(schema.PUBLISHED_SCHEMA, check_metadata=False)


def test_file_names_without_a_common_pattern_give_ours_beside_them():
    files = {"data/a.parquet": {("2.1", "transformers", "4.0")}, "data/b.parquet": {("2.2", "transformers", "5.0")}}
    assert published.name_pattern(files) is None
    assert published.file_for(("2.3", "transformers", "5.1"), files, "x") is None
    spread = {**files, "data/c.parquet": {("2.1", "transformers", "4.0")}}
    with pytest.raises(UserError, match="spread over data/a.parquet, data/c.parquet"):
        published.file_for(("2.1", "transformers", "4.0"), spread, "x")


@pytest.mark.parametrize("row, label", [
    (result_row("tiny/qwen3", twin_of="qwen3"), "CPU twin"),
    (result_row("Qwen/Qwen3-0.6B", weights="shelf: gguf"), "CPU real checkpoint"),
    (result_row("Qwen/Qwen3-0.6B"), "CPU real checkpoint"),
    (trainium_row(result="UNTESTED", stage="dependency", error="x", verification=None), "Trainium"),
])
def test_a_published_layout_folder_refuses_any_other_row_in_one_line(published_folder, row, label):
    before = {p: p.read_bytes() for p in dataset.parquet_files(published_folder)}
    with pytest.raises(UserError) as raised:
        dataset.append_rows(published_folder, [row])
    message = str(raised.value)
    assert "\n" not in message and "only PASS or FAIL rows measured on Trainium under Hub ids" in message
    assert label in message and "nothing was written" in message
    assert {p: p.read_bytes() for p in dataset.parquet_files(published_folder)} == before


def test_the_datasets_loader_reads_the_committed_catalog_as_one_table(tmp_path):
    catalog = Path(__file__).resolve().parents[1] / "catalog"
    loaded = load_with_datasets(catalog, tmp_path / "cache")
    assert loaded.num_rows == len(dataset.load_results(catalog))
    assert loaded.column_names == schema.COLUMN_NAMES


def test_a_folder_grown_from_an_old_file_stays_one_table_for_the_datasets_loader(tmp_path):
    """A copy of the 52-column file plus rows of all three libraries, written with append_rows; a control folder made
    without append_rows (the old file beside a current one) shows the loader's own failure."""
    control = tmp_path / "control" / "data"
    control.mkdir(parents=True)
    shutil.copy(OLD_DIFFUSERS, control / OLD_DIFFUSERS.name.replace(".52-columns", ""))
    dataset.write_table_atomic(schema.rows_to_table([result_row("tiny/llama")]), control / "ours.parquet")
    with pytest.raises(Exception) as raised:
        load_with_datasets(control.parent, tmp_path / "cache-control")
    assert "column names don't match" in f"{raised.value} {raised.value.__cause__}"

    folder = tmp_path / "grown"
    (folder / "data").mkdir(parents=True)
    shutil.copy(OLD_DIFFUSERS, folder / "data" / OLD_DIFFUSERS.name.replace(".52-columns", ""))
    old_rows = pq.read_table(OLD_DIFFUSERS).num_rows
    dataset.append_rows(folder, [
        result_row("tiny/llama"),
        result_row("tiny/st-bert", task="feature-extraction", library="sentence-transformers", library_version="6.2.0",
                   verification="within_tolerance"),
        result_row("tiny/sd-new", task="text-to-image", library="diffusers", library_version="0.42.1",
                   verification="within_tolerance")])
    loaded = load_with_datasets(folder, tmp_path / "cache")
    assert loaded.num_rows == old_rows + 3 and loaded.column_names == schema.COLUMN_NAMES
    assert all(pq.read_schema(p).equals(schema.SCHEMA, check_metadata=False) for p in dataset.parquet_files(folder))


# ------------------------------------------------------------------------------------------------
# Contributing and publishing to a dataset laid out as published (the local Hub)
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def published_repo(hub, api, published_folder):  # noqa: F811 - the local Hub's fixtures
    api.create_repo(REPO, repo_type="dataset")
    api.upload_folder(folder_path=str(published_folder), repo_id=REPO, repo_type="dataset")
    return hub.files(REPO)


def test_a_contribution_to_the_published_layout_keeps_every_row_and_adds_ours_in_its_columns(
        published_repo, hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    rows = [trainium_row(), trainium_row("google/gemma-3-1b-it", pair=("2.24.1.0", "5.24.0"), result="FAIL",
                                         stage="compile", error="RuntimeError: x", verification=None)]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(pd.Series(r).to_json(date_format="iso") for r in rows))
    plan = publish.contribute(path, REPO, api=api)
    assert plan.pr_url and hub.pull_requests(REPO) == ["refs/pr/1"] and hub.commits(REPO) == 1  # main untouched
    target, new_file = example.example_file(NEWER), "data/neuronx_cc-2.24.1.0/transformers-5.24.0.parquet"
    assert sorted(plan.changed) == sorted([target, new_file])
    pr = hub.files(REPO, "refs/pr/1")
    before, after = pq.read_table(pa.BufferReader(published_repo[target])), pq.read_table(pa.BufferReader(pr[target]))
    assert after.slice(0, before.num_rows).equals(before)  # all 24 columns of every old row, exactly
    added = after.slice(before.num_rows).to_pylist()
    assert [(r["model_id"], r["result"], r[schema.PUBLISHED_CORES], r["hbm_peak_gb"]) for r in added] == \
        [("Qwen/Qwen3-0.6B", "PASS", 1, 3.25)]
    assert pr[example.example_file(OLDER)] == published_repo[example.example_file(OLDER)]
    assert pq.read_table(pa.BufferReader(pr[new_file])).column("error").to_pylist() == ["RuntimeError: x"]
    assert "README.md" not in plan.changed  # their card is theirs


@pytest.mark.slow
def test_a_twin_row_offered_to_the_published_layout_is_refused_in_one_line(
        published_repo, hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    from test_publish import make_row

    proc_before = len(hub.requests)
    with pytest.raises(UserError, match=rf"^refused by {REPO}, which holds Trainium verdicts only: row for "
                                        r"'tiny/gpt2' ran on CPU twin, not Trainium \(a CPU row is not a Trainium "
                                        r"verdict: run a Hub model on a trn2 and contribute that row\); nothing was "
                                        r"sent$"):
        publish.contribute(write_row(tmp_path / "row.json", make_row("tiny/gpt2")), REPO, api=api)
    assert all(r.method in ("GET", "HEAD") for r in hub.requests[proc_before:]) and hub.pull_requests(REPO) == []


def test_publishing_a_catalog_into_the_published_layout_is_refused_and_trainium_rows_join_it(
        published_repo, hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    twins = tmp_path / "twins"
    dataset.append_rows(twins, [result_row("tiny/llama")])
    with pytest.raises(UserError, match="laid out as the published Trainium dataset"):
        publish.publish(twins, REPO, api=api)
    assert hub.commits(REPO) == 1
    mine = tmp_path / "trainium"
    dataset.append_rows(mine, [trainium_row()])
    plan = publish.publish(mine, REPO, api=api)
    assert plan.changed == [example.example_file(NEWER)] and "laid out as the published dataset" in plan.note
    assert pq.read_table(pa.BufferReader(hub.files(REPO)[example.example_file(NEWER)])).num_rows == 7


def test_the_made_up_example_is_never_published_or_contributed(
        published_folder, hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    with pytest.raises(UserError, match="made-up example dataset: they are not measurements"):
        publish.publish(published_folder, REPO, api=api)
    row = trainium_row(runner=example.EXAMPLE_RUNNER)
    with pytest.raises(UserError, match="made-up example dataset: they are not measurements"):
        publish.contribute(write_row(tmp_path / "row.json", row), REPO, api=api)
    assert hub.requests == []


def cpu_row_of_a_hub_model(model_id="HuggingFaceTB/SmolLM2-135M-Instruct"):
    """A real Hub checkpoint run on CPU (as `neuronhelpers run` records it off a trn2), its run.py the recipe's own."""
    ref = ModelRef(model_id=model_id, path=model_id, task="text-generation", model_type="llama", weights="hub")
    run_py = render.render_run_py(render.recipe_params(ref, get_backend("cpu")))
    return result_row(model_id, weights="hub", run_py=run_py)


def test_the_published_dataset_refuses_a_cpu_row_of_a_hub_model_before_anything_is_sent(
        hub, api, tmp_path):  # noqa: F811 - the local Hub's fixtures
    """Bug guarded: offline (or before the repo held a file) a dry run listed a CPU row as joining the published
    dataset, which holds Trainium verdicts only."""
    row = write_row(tmp_path / "row.json", cpu_row_of_a_hub_model())
    for dry_run in (True, False):
        with pytest.raises(UserError, match=r"^refused by aws-neuron/torch-neuronx-model-support, which holds Trainium "
                                            r"verdicts only: row for 'HuggingFaceTB/SmolLM2-135M-Instruct' ran on CPU "
                                            r"real checkpoint, not Trainium \(a CPU row is not a Trainium verdict: run "
                                            r"a Hub model on a trn2 and contribute that row\); nothing was sent$"):
            publish.contribute(row, settings.dataset_repo(), api=api, dry_run=dry_run)
    assert hub.requests == []
    assert publish.contribute(row, REPO, api=api, dry_run=True).changed  # a results dataset of our own takes it


def test_a_dry_run_against_the_local_example_refuses_a_cpu_row_and_shows_what_a_trainium_row_would_carry(
        published_folder, tmp_path, monkeypatch):
    """contribute --dry-run --against FOLDER: the attendee's CPU row is refused with its reason; the example's Trainium
    row (made up, and said so) shows the file a pull request would change and the row it would add; no network, and
    the folder is left as it was."""
    from test_publish import make_row

    monkeypatch.setattr(publish, "remote_layout", lambda *a, **k: pytest.fail("against a folder, the Hub is not read"))
    before = {p: p.read_bytes() for p in published_folder.rglob("*.parquet")}
    with pytest.raises(UserError, match=r"^refused by aws-neuron/torch-neuronx-model-support, which holds Trainium "
                                        r"verdicts only: row for 'tiny/qwen2' ran on CPU twin, not Trainium \(a CPU "
                                        r"row is not a Trainium verdict: run a Hub model on a trn2"):
        publish.contribute([make_row("tiny/qwen2")], settings.dataset_repo(), dry_run=True, against=published_folder)
    plan = publish.contribute(example.example_trainium_row(), settings.dataset_repo(), dry_run=True,
                              against=published_folder)
    assert plan.changed == [example.example_file(NEWER)] and plan.unchanged == [example.example_file(OLDER)]
    assert plan.offered == ["HuggingFaceTB/SmolLM2-135M-Instruct PASS on Trainium, 1 core(s), neuronx-cc "
                            f"{NEWER[0]}, transformers {NEWER[1]}"]
    text = plan.describe(dry_run=True)
    assert text.startswith("aws-neuron/torch-neuronx-model-support: a pull request would carry 1 file(s), 1 unchanged")
    assert "made up, not measurements" in text and "nothing was sent" in text and plan.pr_url is None
    assert {p: p.read_bytes() for p in published_folder.rglob("*.parquet")} == before


def test_the_examples_trainium_row_is_never_sent(published_folder, hub, api, tmp_path):  # noqa: F811
    row = example.example_trainium_row()
    with pytest.raises(UserError, match="a contribution is a dry run only"):
        publish.contribute(row, settings.dataset_repo(), against=published_folder)
    for dry_run in (True, False):
        with pytest.raises(UserError, match="made-up example dataset: they are not measurements"):
            publish.contribute(row, REPO, api=api, dry_run=dry_run)
    assert hub.requests == []


def test_the_cli_contributes_against_a_local_folder_and_says_why_a_cpu_row_is_refused(published_folder, tmp_path):
    from test_publish import make_row

    proc = run_cli("contribute", str(write_row(tmp_path / "row.json", make_row("tiny/qwen2"))), "--dry-run",
                   "--against", str(published_folder), env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2 and proc.stderr.startswith(
        "neuronhelpers: error: refused by aws-neuron/torch-neuronx-model-support, which holds Trainium verdicts only: "
        "row for 'tiny/qwen2' ran on CPU twin"), proc.stderr


# ------------------------------------------------------------------------------------------------
# Twins against Trainium, and what each row ran on
# ------------------------------------------------------------------------------------------------


def small_catalog() -> pd.DataFrame:
    """Twins in two transformers releases: 5.23.0 (the example's newer file) and 5.24.0 (the newest)."""
    rows = []
    for version in ("5.23.0", "5.24.0"):
        for arch, result in (("qwen3", "PASS"), ("llama", "PASS"), ("gemma2", "FAIL"), ("gemma3_text", "FAIL"),
                             ("gpt2", "PASS"), ("mixtral", "PASS")):
            extra = {"stage": "compile", "cause": "recompile limit"} if result == "FAIL" else {}
            if arch == "gpt2" and version == "5.24.0":
                result, extra = "FAIL", {"stage": "compile", "cause": "gpt2 broke in 5.24"}
            rows.append(result_row(f"tiny/{arch}", result, twin_of=arch, model_type=arch, compiler_version="2.14.1",
                                   library_version=version, weights="twin: random", **extra))
    return pd.DataFrame(rows)


def test_twins_against_trainium_count_agreements_name_each_disagreement_and_what_stays_outside(published_folder):
    compared, outside = trainium_agreement(dataset.load_results(published_folder), small_catalog())
    assert len(compared) == 7 and int(compared.agree.sum()) == 5
    by_model = compared.set_index("model_id")
    assert by_model.loc["Qwen/Qwen3-0.6B", "twin_pair"] == "inductor 2.14.1, transformers 5.23.0"  # same release
    assert by_model.loc["openai-community/gpt2", "twin_pair"] == "inductor 2.14.1, transformers 5.24.0"  # the newest
    line = trainium_agreement_line(compared, outside)
    assert line.startswith("example rows, made up (not measurements): twins agree with 5 of 7 models "
                           "tested on Trainium")
    assert ("mistralai/Mixtral-8x7B-Instruct-v0.1 (Trainium FAIL: RuntimeError: neuronx-cc failed: example "
            "error, not a measurement; twin tiny/mixtral PASS, inductor 2.14.1, transformers 5.23.0)") in line
    assert "openai-community/gpt2 (Trainium PASS; twin tiny/gpt2 FAIL: gpt2 broke in 5.24, inductor 2.14.1" in line
    assert line.endswith("outside the count: 1 excluded (deepseek-ai/DeepSeek-V3), 1 architecture unknown "
                         "(example-org/unknown-architecture-1B)")


@pytest.mark.slow
def test_the_causes_command_holds_the_catalog_against_a_trainium_folder(published_folder, tmp_path):
    catalog = tmp_path / "catalog"
    dataset.append_rows(catalog, dataset.row_records(small_catalog()))
    proc = run_cli("causes", str(catalog), "--trainium", str(published_folder))
    assert proc.returncode == 0, proc.stderr
    assert "Trainium: example rows, made up (not measurements): twins agree with 5 of 7 models tested on Trainium" \
        in proc.stdout
    offline = run_cli("causes", str(catalog), env={"HF_HUB_OFFLINE": "1"})
    assert ("Trainium: no rows measured on Trainium to hold the twins against (the published dataset "
            "hf://datasets/aws-neuron/torch-neuronx-model-support cannot be read") in offline.stdout


def test_each_row_says_what_it_ran_on_and_the_card_title_says_what_the_dataset_holds():
    assert schema.ran_on("neuron", None, "Qwen/Qwen3-0.6B") == "Trainium"
    assert schema.ran_on("neuron", "twin: random", "tiny/qwen3") == "Trainium twin"
    assert schema.ran_on("cpu", None, "tiny/qwen3") == "CPU twin"
    assert schema.ran_on("cpu", "shelf: gguf", "HuggingFaceTB/SmolLM2-135M-Instruct") == "CPU real checkpoint"
    catalog = dataset.load_results(Path(__file__).resolve().parents[1] / "catalog")
    text = card.render_card(catalog)
    assert text.splitlines()[text.splitlines().index("---", 1) + 2] == \
        "# The torch-neuronx recipe on CPU twins and CPU real checkpoints (no Trainium measurements)"
    assert "| Trainium | no |" in text and "| CPU twin | yes |" in text
    for name, *_ in schema.PUBLISHED_COLUMNS:  # the card's mapping table names every published column
        assert f"| `{name}` |" in text
    assert "as GiB (2**30 bytes" in text and "stays out of the published dataset" in text


def test_diff_and_causes_read_published_files(published_folder):
    older, newer = (str(published_folder / example.example_file(p)) for p in (OLDER, NEWER))
    proc = run_cli("diff", older, newer)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "5 new, 3 dropped" and (
        "deepseek-ai/DeepSeek-V3     hub     new" in proc.stdout)
    causes = run_cli("causes", str(published_folder), "--trainium", str(published_folder))
    # a Trainium FAIL records no cause: it is ranked by its error's first line, under the architectures it blocks
    assert ("   2  [no stage recorded] RuntimeError: neuronx-cc failed: example error, not a measurement"
            in causes.stdout)
    assert "gemma2, mixtral" in causes.stdout


def test_a_contribution_to_the_older_published_file_mends_the_viewer_for_that_folder(published_folder, tmp_path):
    with pytest.raises(Exception) as raised:  # as published: one file lacks `exclusion`
        load_with_datasets(published_folder, tmp_path / "cache-before")
    assert "column names don't match" in f"{raised.value} {raised.value.__cause__}"
    dataset.append_rows(published_folder, [trainium_row(pair=OLDER)])
    loaded = load_with_datasets(published_folder, tmp_path / "cache-after")
    assert loaded.num_rows == 11 and loaded.column_names == schema.PUBLISHED_NAMES


def test_publishing_our_layout_brings_an_older_file_to_the_current_schema(tmp_path):
    folder = tmp_path / "results"
    (folder / "data").mkdir(parents=True)
    shutil.copy(OLD_DIFFUSERS, folder / "data" / "inductor-2.13.0__diffusers-0.42.1.parquet")
    dataset.write_table_atomic(schema.rows_to_table([result_row("tiny/llama")]), folder / "data" / "x.parquet")
    files = publish.local_files(folder)
    for name in ("data/inductor-2.13.0__diffusers-0.42.1.parquet", "data/x.parquet"):
        assert pq.read_schema(pa.BufferReader(files[name])).equals(schema.SCHEMA, check_metadata=False), name
    assert pq.read_table(pa.BufferReader(files["data/inductor-2.13.0__diffusers-0.42.1.parquet"])).num_rows == 2
    assert files["README.md"].decode().count("# The torch-neuronx recipe on CPU twins (no Trainium measurements)") == 1


def test_the_architectures_view_sets_each_twin_beside_the_trainium_models_of_its_architecture(published_folder):
    from neuronhelpers.ui.explorer.frames import ON_TRAINIUM, view_table
    from neuronhelpers.ui.explorer.summaries import trainium_line

    df = pd.concat([dataset.load_results(published_folder), pd.DataFrame(small_catalog())], ignore_index=True)
    table = view_table("Architectures", df, compiler_version="2.14.1", library_version="5.23.0").set_index("model")
    assert table.loc["tiny/llama", ON_TRAINIUM] == ("twin agrees with 2 of 2: "
                                                    "HuggingFaceTB/SmolLM2-135M-Instruct PASS, "
                                                    "meta-llama/Llama-3.1-8B-Instruct PASS")
    assert table.loc["tiny/mixtral", ON_TRAINIUM] == ("twin agrees with 0 of 1: "
                                                      "mistralai/Mixtral-8x7B-Instruct-v0.1 FAIL")
    assert table.loc["tiny/llama", "ran on"] == "CPU twin"
    assert trainium_line(df).startswith("example rows, made up (not measurements): twins agree with 5 of 7")


def test_a_published_file_in_other_types_is_read_without_loss_and_written_in_its_own_types(tmp_path):
    """A file whose `wall_s` is a float and `tp` an int64 (not the viewer's int32): nothing truncated on reading, and
    rows join it in its own types."""
    folder = tmp_path / "other-types"
    table = example.example_rows(NEWER).slice(0, 2)
    table = table.set_column(table.schema.get_field_index("wall_s"), "wall_s", pa.array([402.7, 1433.2]))
    index = table.schema.get_field_index(schema.PUBLISHED_CORES)
    table = table.set_column(index, schema.PUBLISHED_CORES, table.column(index).cast(pa.int64()))
    (folder / "data").mkdir(parents=True)
    pq.write_table(table, folder / "data" / "file.parquet")
    assert dataset.load_results(folder)["wall_s"].tolist() == [402.7, 1433.2]
    dataset.append_rows(folder, [trainium_row()])
    after = pq.read_table(folder / "data" / "file.parquet")
    assert after.schema.field("wall_s").type == pa.float64() and (
        after.schema.field(schema.PUBLISHED_CORES).type == pa.int64())
    assert after.slice(0, 2).equals(table) and after.column("wall_s").to_pylist()[2] == 402.0


def test_edge_cases_of_a_published_file_lose_nothing(tmp_path):
    """A NaN memory figure reads as no figure (the file is not skipped); a file that mixes a published-only column with
    ours keeps that column as it reads; a backend a pandas frame left as NaN is no device."""
    table = example.example_rows(NEWER).slice(0, 2)
    index = table.schema.get_field_index("hbm_peak_gb")
    table = table.set_column(index, "hbm_peak_gb", pa.array([float("nan"), 17.3]))
    (tmp_path / "a" / "data").mkdir(parents=True)
    pq.write_table(table, tmp_path / "a" / "data" / "nan.parquet")
    df = dataset.load_results(tmp_path / "a")
    assert len(df) == 2 and pd.isna(df.peak_memory_bytes[0]) and df.attrs["skipped"] == []
    hybrid = pa.table({"model_id": ["a/b"], "result": ["PASS"], "task": ["text-generation"], "tp": [4]})
    row = dataset.conform(hybrid, keep_other_columns=True).to_pylist()[0]
    assert row["tp"] == 4 and row["neuron_cores"] is None  # neither layout's: kept, not guessed
    assert schema.ran_on(float("nan"), None, "a/b") == "unknown device real checkpoint"


def test_new_file_names_take_values_only_where_they_stand_whole():
    assert published.name_pattern(
        {"data/sdk-2.25.0/transformers-5.0.parquet": {("2.25.12.0", "transformers", "5.0")}}) \
        is None  # '5.0' inside '2.25.0' is no field: the name shows no pattern for neuronx_cc
    files = {"data/sdk-2.25.12.0/transformers-5.0.parquet": {("2.25.12.0", "transformers", "5.0")}}
    assert published.name_pattern(files) == "data/sdk-{neuronx_cc}/{library}-{library_version}.parquet"
    assert published.name_pattern({"data/x-1.0.parquet": {("1.0", "transformers", "1.0")}}) is None  # ambiguous
    # files in sibling folders with no common pattern: a new file goes under data/, never to the filesystem's root
    files = {"a/one.parquet": {("2.1", "transformers", "4.0")}, "b/two.parquet": {("2.2", "transformers", "5.0")}}
    assert published.file_for(("2.3", "transformers", "5.1"), files, "x") is None


def test_a_new_file_beside_files_without_a_pattern_stays_inside_the_folder(tmp_path):
    folder = tmp_path / "siblings"
    for name, pair in (("a/one.parquet", OLDER), ("b/two.parquet", NEWER)):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(example.example_rows(pair), folder / name)
    touched = dataset.append_rows(folder, [trainium_row(pair=("2.24.1.0", "5.24.0"))])
    assert touched == ["data/neuronx-cc-2.24.1.0__transformers-5.24.0.parquet"] and (folder / touched[0]).is_file()


def test_a_sweep_into_a_published_layout_folder_is_refused_before_anything_runs(published_folder):
    from neuronhelpers.sweep.local import sweep_models

    with pytest.raises(UserError, match="laid out as the published Trainium dataset.*sweep into a folder of your own"):
        sweep_models(["tiny/llama"], published_folder, progress=False)


def test_a_time_without_a_zone_is_written_as_utc():
    row = trainium_row(timestamp=dt.datetime(2026, 12, 3, 8, 0, 0, 654321))
    assert published.to_published([row]).column("tested_at").to_pylist()[0] == \
        dt.datetime(2026, 12, 3, 8, 0, 0, 654000, tzinfo=dt.timezone.utc)
