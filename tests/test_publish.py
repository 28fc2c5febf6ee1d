"""Publishing to a Hub dataset repo (one commit, only changed files, retried on conflict), contributing rows
as a pull request, version-to-version diffs and the expected-results gate. The Hub is a local stand-in."""

import json
import logging
from pathlib import Path

import pytest
from huggingface_hub.errors import HfHubHTTPError

from conftest import result_row, run_cli
from hub_standin import LocalHub, _response
from neuronhelpers import diff, publish, recipe, results
from neuronhelpers.backends import get_backend
from neuronhelpers.errors import UserError
from neuronhelpers.models import resolve_model

REPO = "neuronhelpers-test/results"
SECRET = "hf_THISISNOTAREALTOKENBUTMUSTNEVERBEWRITTEN"


def make_row(model_id="tiny/llama", result="PASS", wall=10.0, **overrides):
    """A row whose run_py is the recipe's own rendering for the model (as a real run stores it)."""
    ref = resolve_model(model_id) if model_id.startswith("tiny/") else None
    run_py = recipe.render_run_py(recipe.recipe_params(ref, get_backend("cpu"))) if ref else None
    return result_row(model_id, result, run_py=run_py, wall_s=wall, peak_memory_bytes=500 * 2**20, **overrides)


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "results"
    results.append_rows(folder, [make_row("tiny/llama"), make_row("tiny/qwen3")])
    return folder


def snapshot(folder: Path) -> dict:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_dry_run_lists_the_files_and_touches_nothing(dataset):
    hub = LocalHub()
    plan = publish.publish(dataset, REPO, dry_run=True, api=hub)
    assert sorted(plan.changed) == ["README.md", "data/inductor-2.13.0__transformers-5.23.0.parquet"]
    assert hub.commit_calls == [] and REPO not in hub.repos
    assert "would upload 2 file(s)" in plan.describe(dry_run=True)


def test_publish_is_one_commit_and_then_only_changed_files(dataset):
    hub = LocalHub()
    first = publish.publish(dataset, REPO, api=hub)
    assert len(first.changed) == 2 and hub.commits(REPO) == 1
    assert hub.files(REPO)["README.md"].startswith(b"---\nlicense")
    again = publish.publish(dataset, REPO, api=hub)
    assert again.changed == [] and hub.commits(REPO) == 1  # nothing changed: no commit
    results.append_rows(dataset, [make_row("tiny/gpt2", library_version="5.24.0")])
    third = publish.publish(dataset, REPO, api=hub)
    assert third.changed == ["data/inductor-2.13.0__transformers-5.24.0.parquet"] and hub.commits(REPO) == 2


def test_a_conflicting_push_is_retried_against_the_new_head(dataset):
    hub = LocalHub()
    hub.create_repo(REPO, repo_type="dataset")
    hub.push_before_next_commit = {"notes.txt": b"someone else"}
    plan = publish.publish(dataset, REPO, api=hub)
    assert plan.attempts == 2 and hub.commits(REPO) == 2
    assert set(hub.files(REPO)) == {"notes.txt", "README.md", "data/inductor-2.13.0__transformers-5.23.0.parquet"}


def test_a_failed_upload_leaves_the_local_dataset_untouched(dataset):
    hub = LocalHub()
    before = snapshot(dataset)
    hub.fail_next = HfHubHTTPError("500 Internal Server Error", response=_response(500))
    with pytest.raises(HfHubHTTPError):
        publish.publish(dataset, REPO, api=hub)
    assert snapshot(dataset) == before
    assert results.load_results(dataset).shape[0] == 2


def test_the_token_is_never_written_or_logged(dataset, monkeypatch, caplog, capsys):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    hub = LocalHub()
    publish.publish(dataset, REPO, api=hub)
    published = b"".join(hub.files(REPO).values())
    local = b"".join(p.read_bytes() for p in dataset.rglob("*") if p.is_file())
    out = capsys.readouterr()
    assert SECRET.encode() not in published + local
    assert SECRET not in caplog.text + out.out + out.err


def test_contribute_opens_a_pull_request_that_adds_rows(dataset, tmp_path):
    hub = LocalHub()
    publish.publish(dataset, REPO, api=hub)
    row_file = tmp_path / "row.json"
    row_file.write_text(json.dumps(make_row("tiny/gpt2"), default=str))
    plan = publish.contribute(row_file, REPO, api=hub)
    assert plan.pr_url and hub.commit_calls[-1]["create_pr"] is True and hub.commits(REPO) == 1  # main untouched
    proposed = hub.pull_requests[-1]["files"]["data/inductor-2.13.0__transformers-5.23.0.parquet"]
    (tmp_path / "pr" / "data").mkdir(parents=True)
    (tmp_path / "pr" / "data" / "x.parquet").write_bytes(proposed)
    assert sorted(results.load_results(tmp_path / "pr").model_id) == ["tiny/gpt2", "tiny/llama", "tiny/qwen3"]


def test_contribute_dry_run_shows_the_files(tmp_path):
    row_file = tmp_path / "row.json"
    row_file.write_text(json.dumps(make_row("tiny/gpt2"), default=str))
    plan = publish.contribute(row_file, REPO, api=LocalHub(), dry_run=True)
    assert plan.changed == ["data/inductor-2.13.0__transformers-5.23.0.parquet"] and plan.pr_url is None


def test_a_tampered_run_py_is_refused(tmp_path):
    row = make_row("tiny/gpt2")
    row["run_py"] = row["run_py"].replace('"do_sample": False', '"do_sample": True')
    (tmp_path / "row.json").write_text(json.dumps(row, default=str))
    with pytest.raises(UserError, match=r"row for 'tiny/gpt2' refused: its run_py differs from the recipe at line \d+"):
        publish.contribute(tmp_path / "row.json", REPO, api=LocalHub(), dry_run=True)


def test_an_unknown_result_value_is_refused(tmp_path):
    row = make_row("tiny/gpt2")
    row["result"] = "PASSISH"
    (tmp_path / "row.json").write_text(json.dumps(row, default=str))
    proc = run_cli("contribute", str(tmp_path / "row.json"), "--repo", REPO, "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("neuronhelpers: error: row for 'tiny/gpt2' refused: unknown result value "
                                   "'PASSISH': expected one of PASS, FAIL, EXCLUDED")


def test_publish_dry_run_from_the_cli(dataset):
    proc = run_cli("publish", str(dataset), "--repo", REPO, "--dry-run", env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "would upload" in proc.stdout and "README.md" in proc.stdout


def test_diff_lists_regressions_improvements_and_changes(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    results.append_rows(old, [make_row("a/pass-then-fail"), make_row("b/fail-then-pass", "FAIL"), make_row("c/dropped"),
                              make_row("d/slower", wall=10.0)])
    results.append_rows(new, [make_row("a/pass-then-fail", "FAIL", error="BackendCompilerFailed: boom"),
                              make_row("b/fail-then-pass"), make_row("e/new"), make_row("d/slower", wall=20.0)])
    changes = diff.diff_results(diff.load_side(old), diff.load_side(new))
    got = dict(zip(changes.model_id, changes.change.astype(str)))
    assert got == {"a/pass-then-fail": "regressed", "b/fail-then-pass": "improved", "c/dropped": "dropped",
                   "e/new": "new", "d/slower": "slower"}
    assert changes.set_index("model_id").at["a/pass-then-fail", "new_error"] == "BackendCompilerFailed: boom"
    proc = run_cli("diff", str(old), str(new))
    assert proc.returncode == 0 and "regressed" in proc.stdout and "BackendCompilerFailed: boom" in proc.stdout


def test_expected_results_gate_names_the_regressed_model(tmp_path):
    results.append_rows(tmp_path / "r", [make_row("a/model", "FAIL"), make_row("b/model")])
    expected = tmp_path / "expected.csv"
    expected.write_text("model_id,result\na/model,PASS\nb/model,PASS\nc/model,FAIL\n")
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "a/model: expected PASS, got FAIL at compile: BackendCompilerFailed: x" in proc.stdout
    assert "b/model" not in proc.stdout
    ok = tmp_path / "ok.csv"
    ok.write_text("model_id,result\nb/model,PASS\na/model,FAIL\n")
    assert run_cli("check", "--expected", str(ok), str(tmp_path / "r")).returncode == 0


def test_an_invalid_repo_id_is_a_clear_error(dataset):
    with pytest.raises(UserError, match="'<ns>/results' is not a Hub dataset repo id"):
        publish.publish(dataset, "<ns>/results", dry_run=True, api=LocalHub())
