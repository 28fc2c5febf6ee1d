"""Publishing to a Hub dataset repo (one commit, only changed files, retried on conflict), contributing rows
as a pull request, version-to-version diffs and the expected-results gate.

The Hub is tests/hub_server.py, a local HTTP server speaking the Hub's REST API, and the client is a real
``huggingface_hub.HfApi`` pointed at it: the token comes from HF_TOKEN through huggingface_hub's own token
handling (never passed by the tests or the code), exactly as it would for the real Hub."""

import json
import logging
import tempfile
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from huggingface_hub import constants as hf_constants
from huggingface_hub.errors import HfHubHTTPError

from conftest import result_row, run_cli
from hub_server import EMPTY_AGENT_REGISTRY, HubServer
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.recipes import render
from neuronhelpers.store import dataset as store_dataset
from neuronhelpers.store import diff, publish, schema

REPO = "neuronhelpers-test/results"
SECRET = "hf_THISISNOTAREALTOKENBUTMUSTNEVERBEWRITTEN"
PAIR = "data/inductor-2.13.0__transformers-5.23.0.parquet"


def make_row(model_id="tiny/llama", result="PASS", wall=10.0, **overrides):
    """A row whose run_py is the recipe's own rendering for the model (as a real run stores it)."""
    ref = resolve_model(model_id) if model_id.startswith("tiny/") else None
    run_py = render.render_run_py(render.recipe_params(ref, get_backend("cpu"))) if ref else None
    return result_row(model_id, result, run_py=run_py, wall_s=wall, peak_memory_bytes=500 * 2**20, **overrides)


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "results"
    store_dataset.append_rows(folder, [make_row("tiny/llama"), make_row("tiny/qwen3")])
    return folder


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A local Hub that accepts writes only with SECRET; HF_TOKEN=SECRET, and huggingface_hub's cache and token
    file moved under tmp_path (so no user login or cache is used or written)."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)  # conftest turns the Hub off; this one is local
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(hf_constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf-home" / "stored_tokens"))
    registry = tmp_path / "hf-home" / ".agent_harnesses.json"  # else building headers fetches it from huggingface.co
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text(json.dumps(EMPTY_AGENT_REGISTRY))
    monkeypatch.setattr(hf_constants, "AGENT_HARNESSES_PATH", str(registry))
    with HubServer(token=SECRET) as server:
        yield server
    assert server.unhandled == [], "the client called a route the local Hub does not implement"


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url)  # no token=: huggingface_hub finds HF_TOKEN itself


def snapshot(folder: Path) -> dict:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def files_containing(secret: str, *folders: Path) -> list[str]:
    return [str(p) for folder in folders for p in Path(folder).rglob("*")
            if p.is_file() and not p.is_symlink() and secret.encode() in p.read_bytes()]


def write_row(path: Path, row: dict) -> Path:
    path.write_text(json.dumps(row, default=str))
    return path


def test_dry_run_lists_the_files_and_touches_nothing(dataset, hub, api):
    plan = publish.publish(dataset, REPO, dry_run=True, api=api)
    assert sorted(plan.changed) == ["README.md", PAIR]
    assert [r.method for r in hub.requests] == ["GET"] and REPO not in hub.repos  # one tree listing, no write
    assert "would upload 2 file(s)" in plan.describe(dry_run=True)


@pytest.mark.slow
def test_publish_is_one_commit_and_then_only_changed_files(dataset, hub, api):
    first = publish.publish(dataset, REPO, api=api)
    assert len(first.changed) == 2 and hub.commits(REPO) == 1 and len(hub.requests_to("commit")) == 1
    assert sorted(hub.history(REPO)[0].changed) == ["README.md", PAIR]
    assert hub.files(REPO)["README.md"].startswith(b"---\nlicense")
    assert first.commit_url == f"{hub.url}/datasets/{REPO}/commit/{hub.history(REPO)[0].sha}"
    again = publish.publish(dataset, REPO, api=api)
    assert again.changed == [] and hub.commits(REPO) == 1 and len(hub.requests_to("commit")) == 1  # no commit
    store_dataset.append_rows(dataset, [make_row("tiny/gpt2", library_version="5.24.0")])
    third = publish.publish(dataset, REPO, api=api)
    new_pair = "data/inductor-2.13.0__transformers-5.24.0.parquet"
    assert third.changed == [new_pair] and hub.commits(REPO) == 2 and hub.history(REPO)[1].changed == [new_pair]


def test_a_conflicting_push_is_retried_against_the_new_head(dataset, hub, api):
    hub.create_repo(REPO)
    hub.push_before_next_commit = {"notes.txt": b"someone else"}
    plan = publish.publish(dataset, REPO, api=api)
    assert [r.status for r in hub.requests_to("commit")] == [412, 200]  # stale parentCommit refused, then retried
    assert plan.attempts == 2 and hub.commits(REPO) == 2
    assert set(hub.files(REPO)) == {"notes.txt", "README.md", PAIR}


def test_a_failed_upload_leaves_the_local_dataset_untouched(dataset, hub, api):
    before = snapshot(dataset)
    hub.fail_next_commit = 500
    with pytest.raises(HfHubHTTPError) as failure:
        publish.publish(dataset, REPO, api=api)
    assert failure.value.response.status_code == 500 and hub.commits(REPO) == 0
    assert snapshot(dataset) == before
    assert store_dataset.load_results(dataset).shape[0] == 2


def test_the_token_from_hf_token_reaches_the_hub_only_in_the_authorization_header(dataset, hub, api):
    publish.publish(dataset, REPO, api=api)
    (commit,) = hub.requests_to("commit")
    assert commit.status == 200 and commit.headers["authorization"] == f"Bearer {SECRET}"
    for request in hub.requests:  # every call was authenticated, and nothing else carries the token
        assert request.headers.get("authorization") == f"Bearer {SECRET}", request.path
        others = {k: v for k, v in request.headers.items() if k != "authorization"}
        assert SECRET not in json.dumps(others) + request.path + json.dumps(request.query)
        assert SECRET.encode() not in request.body
    assert not any(SECRET.encode() in data for data in hub.files(REPO).values())


def test_without_a_token_the_hub_refuses_the_upload(dataset, hub, api, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(HfHubHTTPError) as refused:
        publish.publish(dataset, REPO, api=api)
    assert refused.value.response.status_code == 401 and REPO not in hub.repos
    assert all("authorization" not in r.headers for r in hub.requests)


def test_the_token_is_never_written_or_logged(dataset, hub, api, tmp_path, monkeypatch, caplog, capfd):
    """Publish and contribute with huggingface_hub's most verbose logging (HF_DEBUG logs every request as curl);
    every temporary directory is kept under tmp_path so what was written there can be read afterwards."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    class KeptTemporaryDirectory(tempfile.TemporaryDirectory):
        def __init__(self, suffix=None, prefix=None, dir=None, **_):
            self.name = tempfile.mkdtemp(suffix, prefix, dir or scratch)

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(tempfile, "TemporaryDirectory", KeptTemporaryDirectory)
    monkeypatch.setattr(hf_constants, "HF_DEBUG", True)
    for name in (None, "huggingface_hub", "neuronhelpers"):
        caplog.set_level(logging.DEBUG, logger=name)
    publish.publish(dataset, REPO, api=api)
    plan = publish.contribute(write_row(tmp_path / "row.json", make_row("tiny/gpt2")), REPO, api=api)
    out = capfd.readouterr()
    assert plan.pr_url and hub.requests_to("commit")[-1].headers["authorization"] == f"Bearer {SECRET}"
    # the logs were on and saw authenticated requests, with the header masked
    assert "(authenticated: True)" in caplog.text and "authorization: <TOKEN>" in caplog.text
    assert any(scratch.rglob("*.parquet")) and any((tmp_path / "hf-home" / "hub").rglob(PAIR.split("/")[1]))
    assert files_containing(SECRET, dataset, scratch, tmp_path / "hf-home") == []
    assert SECRET not in caplog.text + out.out + out.err
    published = [*hub.files(REPO).values(), *hub.files(REPO, hub.pull_requests(REPO)[0]).values()]
    assert not any(SECRET.encode() in data for data in published)


def test_the_cli_publishes_with_the_token_from_the_environment_and_never_prints_it(dataset, hub, tmp_path):
    home, scratch = tmp_path / "cli-hf-home", tmp_path / "cli-tmp"
    scratch.mkdir()
    env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": SECRET, "HF_HUB_OFFLINE": "0", "HF_DEBUG": "1", "HF_HOME": str(home),
           "TMPDIR": str(scratch), "NO_PROXY": "127.0.0.1"}
    proc = run_cli("publish", str(dataset), "--repo", REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{REPO}: uploaded 2 file(s)" in proc.stdout and hub.commits(REPO) == 1
    assert hub.requests_to("commit")[0].headers["authorization"] == f"Bearer {SECRET}"
    assert "(authenticated: True)" in proc.stderr  # HF_DEBUG logged every request, to stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert files_containing(SECRET, dataset, home, scratch) == []


def test_contribute_opens_a_pull_request_that_adds_rows(dataset, hub, api, tmp_path):
    publish.publish(dataset, REPO, api=api)
    plan = publish.contribute(write_row(tmp_path / "row.json", make_row("tiny/gpt2")), REPO, api=api)
    assert plan.pr_url == f"{hub.url}/datasets/{REPO}/discussions/1" and hub.pull_requests(REPO) == ["refs/pr/1"]
    assert hub.requests_to("commit")[-1].query.get("create_pr") == ["1"] and hub.commits(REPO) == 1  # main untouched
    assert [r.method for r in hub.requests_to("resolve")] == ["HEAD", "GET"]  # started from the dataset's file
    (tmp_path / "pr" / "data").mkdir(parents=True)
    (tmp_path / "pr" / "data" / "x.parquet").write_bytes(hub.files(REPO, "refs/pr/1")[PAIR])
    assert sorted(store_dataset.load_results(tmp_path / "pr").model_id) == ["tiny/gpt2", "tiny/llama", "tiny/qwen3"]


def test_contribute_dry_run_shows_the_files(hub, api, tmp_path):
    plan = publish.contribute(write_row(tmp_path / "row.json", make_row("tiny/gpt2")), REPO, api=api, dry_run=True)
    assert plan.changed == [PAIR] and plan.pr_url is None
    assert all(r.method in ("GET", "HEAD") for r in hub.requests) and REPO not in hub.repos


def test_a_tampered_run_py_is_refused(hub, api, tmp_path):
    row = make_row("tiny/gpt2")
    row["run_py"] = row["run_py"].replace('"do_sample": False', '"do_sample": True')
    with pytest.raises(UserError, match=r"row for 'tiny/gpt2' refused: its run_py's code differs from the recipe's, "
                                        r"first at `.*do_sample.*True"):
        publish.contribute(write_row(tmp_path / "row.json", row), REPO, api=api)
    assert hub.requests == []  # refused before anything reached the Hub


def test_an_unknown_result_value_is_refused(tmp_path):
    row = make_row("tiny/gpt2")
    row["result"] = "PASSISH"
    (tmp_path / "row.json").write_text(json.dumps(row, default=str))
    proc = run_cli("contribute", str(tmp_path / "row.json"), "--repo", REPO, "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("neuronhelpers: error: row 1 of 1 ('tiny/gpt2') refused: unknown result value "
                                   "'PASSISH': expected one of PASS, FAIL, EXCLUDED, UNTESTED; nothing was written")


def test_publish_dry_run_from_the_cli(dataset):
    proc = run_cli("publish", str(dataset), "--repo", REPO, "--dry-run", env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "would upload" in proc.stdout and "README.md" in proc.stdout


def test_diff_lists_regressions_improvements_and_changes(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    store_dataset.append_rows(old, [make_row("a/pass-then-fail"), make_row("b/fail-then-pass", "FAIL"),
                                 make_row("c/dropped"), make_row("d/slower", wall=10.0)])
    store_dataset.append_rows(new, [make_row("a/pass-then-fail", "FAIL", error="BackendCompilerFailed: boom"),
                              make_row("b/fail-then-pass"), make_row("e/new"), make_row("d/slower", wall=20.0)])
    changes = diff.diff_results(diff.load_side(old), diff.load_side(new))
    got = dict(zip(changes.model_id, changes.change.astype(str), strict=True))
    assert got == {"a/pass-then-fail": "regressed", "b/fail-then-pass": "improved", "c/dropped": "dropped",
                   "e/new": "new", "d/slower": "slower"}
    assert changes.set_index("model_id").at["a/pass-then-fail", "new_error"] == "BackendCompilerFailed: boom"
    proc = run_cli("diff", str(old), str(new))
    assert proc.returncode == 0 and "regressed" in proc.stdout and "BackendCompilerFailed: boom" in proc.stdout


def test_diff_keeps_lost_and_reached_verdicts_apart_from_regressions_and_names_new_causes(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    untested = dict(stage="twin", error="no twin", neuron_cores=None)
    store_dataset.append_rows(old, [make_row("a/pass-then-untested"),
                                 make_row("b/untested-then-fail", "UNTESTED", **untested),
                                 make_row("c/fail-new-cause", "FAIL", cause="guard x")])
    store_dataset.append_rows(new, [make_row("a/pass-then-untested", "UNTESTED", stage="dependency",
                                          error="needs torchvision", neuron_cores=None),
                                 make_row("b/untested-then-fail", "FAIL", cause="guard y"),
                                 make_row("c/fail-new-cause", "FAIL", cause="guard y")])
    changes = diff.diff_results(diff.load_side(old), diff.load_side(new)).set_index("model_id")
    assert changes.change.astype(str).to_dict() == {"a/pass-then-untested": "verdict lost",
                                                    "b/untested-then-fail": "verdict reached",
                                                    "c/fail-new-cause": "new cause"}
    assert (changes.at["c/fail-new-cause", "old_cause"],
            changes.at["c/fail-new-cause", "new_cause"]) == ("guard x", "guard y")


def test_release_steps_compare_one_library_and_one_version_at_a_time_and_the_cli_prints_each(tmp_path):
    """Three transformers pairs and one sentence-transformers pair: two library steps and a compiler step, never a
    transformers version against a sentence-transformers one."""
    folder = tmp_path / "catalog"
    tf = dict(library="transformers")
    store_dataset.append_rows(folder, [
        result_row("tiny/a", compiler_version="2.13.0", library_version="5.23.0", **tf),
        result_row("tiny/b", "UNTESTED", stage="dependency", error="needs torchvision", compiler_version="2.13.0",
                   library_version="5.23.0", **tf),
        result_row("tiny/a", compiler_version="2.14.1", library_version="5.23.0", **tf),
        result_row("tiny/b", compiler_version="2.14.1", library_version="5.23.0", **tf),
        result_row("tiny/a", "FAIL", compiler_version="2.14.1", library_version="5.24.0", cause="guard x", **tf),
        result_row("tiny/b", compiler_version="2.14.1", library_version="5.24.0", **tf),
        result_row("tiny/st", task="feature-extraction", library="sentence-transformers", library_version="6.2.0",
                   compiler_version="2.14.1")])
    df = store_dataset.load_results(folder)
    steps = diff.release_steps(df)
    assert [s.label() for s in steps] == ["transformers 5.23.0 -> 5.24.0 on inductor 2.14.1",
                                          "inductor 2.13.0 -> 2.14.1 with transformers 5.23.0"]
    assert [s.kind for s in steps] == ["library", "compiler"]
    assert diff.change_counts(diff.release_changes(df, steps[0])) == {"regressed": 1}
    assert diff.change_counts(diff.release_changes(df, steps[1])) == {"verdict reached": 1}
    assert all(isinstance(n, int) for n in diff.change_counts(diff.release_changes(df, steps[1])).values())
    counts = store_dataset.verdicts_per_pair(df)
    assert list(counts.library) == ["sentence-transformers 6.2.0", "transformers 5.24.0", "transformers 5.23.0",
                                    "transformers 5.23.0"]
    oldest = counts.iloc[-1]
    assert (oldest.compiler, oldest.PASS, oldest.UNTESTED, oldest["with a verdict"], oldest["pass rate of tested"]) == \
        ("inductor 2.13.0", 1, 1, "50%", "100%")
    proc = run_cli("diff", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert "transformers 5.23.0 -> 5.24.0 on inductor 2.14.1: 1 regressed" in proc.stdout
    assert "    regressed: tiny/a (PASS -> FAIL): guard x" in proc.stdout
    assert "inductor 2.13.0 -> 2.14.1 with transformers 5.23.0: 1 verdict reached" in proc.stdout
    lone = tmp_path / "lone"
    store_dataset.append_rows(lone, [result_row("tiny/a")])
    refused = run_cli("diff", str(lone))
    assert refused.returncode == 2 and "nothing to compare" in refused.stderr


def test_expected_results_gate_names_the_regressed_model(tmp_path):
    store_dataset.append_rows(tmp_path / "r", [make_row("a/model", "FAIL"), make_row("b/model")])
    expected = tmp_path / "expected.csv"
    expected.write_text("model_id,result\na/model,PASS\nb/model,PASS\nc/model,FAIL\n")
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "a/model: REGRESSED: expected PASS, got FAIL at compile: BackendCompilerFailed: x" in proc.stdout
    assert "c/model: expected FAIL, not in the results" in proc.stdout
    assert "b/model" not in proc.stdout
    ok = tmp_path / "ok.csv"
    ok.write_text("model_id,result\nb/model,PASS\na/model,FAIL\n")
    assert run_cli("check", "--expected", str(ok), str(tmp_path / "r")).returncode == 0


def test_the_gate_fails_on_an_unexpected_improvement_and_says_how_to_update(tmp_path):
    """A model expected to FAIL that now passes: the expected file is out of date, so the gate fails too."""
    store_dataset.append_rows(tmp_path / "r", [make_row("a/model"), make_row("b/model", "FAIL")])
    expected = tmp_path / "expected.csv"
    expected.write_text("model_id,result,stage\na/model,FAIL,compile\nb/model,FAIL,compile\n")
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "a/model: IMPROVED: expected FAIL (compile), now PASS: update the expected file" in proc.stdout
    assert f"neuronhelpers check {tmp_path / 'r'} --expected {expected} --write" in proc.stdout
    rewrite = run_cli("check", str(tmp_path / "r"), "--expected", str(expected), "--write")
    assert rewrite.returncode == 0 and "2 models" in rewrite.stdout
    assert run_cli("check", "--expected", str(expected), str(tmp_path / "r")).returncode == 0


def test_the_gate_fails_on_a_failure_that_moved_stage_and_notes_a_new_cause(tmp_path):
    store_dataset.append_rows(tmp_path / "r", [make_row("a/model", "FAIL", stage="run", cause="X"),
                                             make_row("b/model", "FAIL", cause="new cause")])
    expected = tmp_path / "expected.csv"
    expected.write_text("model_id,result,stage,cause\na/model,FAIL,compile,X\nb/model,FAIL,compile,old cause\n")
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"))
    assert proc.returncode == 1
    assert "a/model: CHANGED: expected FAIL at compile, got FAIL at run" in proc.stdout
    assert "note: b/model: same verdict, new cause: new cause (was old cause)" in proc.stdout


def test_the_gate_notes_a_pass_on_lower_evidence_and_a_new_graph_break_without_failing(tmp_path):
    """Evidence is reported by the gate, never failed on: the verdict gate stays a verdict gate."""
    store_dataset.append_rows(tmp_path / "r", [make_row("a/model", evidence="judged", graph_breaks=0),
                                             make_row("b/model", evidence="exact", graph_breaks=2),
                                             make_row("c/model", evidence="exact", graph_breaks=0)])
    expected = tmp_path / "expected.csv"
    written = run_cli("check", str(tmp_path / "r"), "--expected", str(expected), "--write")
    assert written.returncode == 0 and "evidence" in expected.read_text().splitlines()[0]
    expected.write_text("model_id,result,stage,cause,evidence,graph_breaks\n"
                        "a/model,PASS,,,exact,0\nb/model,PASS,,,exact,0\nc/model,PASS,,,near_tie,0\n")
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stdout
    assert "note: a/model: same verdict, lower evidence: judged (was exact)" in proc.stdout
    assert "note: b/model: same verdict, new graph break: 2 (was 0)" in proc.stdout
    assert "c/model" not in proc.stdout  # stronger evidence than recorded is not news
    old_file = tmp_path / "old.csv"  # a file from before the evidence columns: verdicts only, no notes
    old_file.write_text("model_id,result\na/model,PASS\n")
    assert "note:" not in run_cli("check", "--expected", str(old_file), str(tmp_path / "r"), "--only-tested").stdout


def test_a_slice_of_a_whole_library_file_checks_only_what_was_run(tmp_path):
    store_dataset.append_rows(tmp_path / "r", [make_row("a/model")])
    expected = tmp_path / "expected.csv"
    expected.write_text("model_id,result\na/model,PASS\nz/not-in-the-slice,FAIL\n")
    assert run_cli("check", "--expected", str(expected), str(tmp_path / "r")).returncode == 1
    proc = run_cli("check", "--expected", str(expected), str(tmp_path / "r"), "--only-tested")
    assert proc.returncode == 0 and "in 1 model(s) checked" in proc.stdout


def test_rows_for_local_folders_are_never_published(tmp_path, hub, api):
    folder = tmp_path / "local"
    store_dataset.append_rows(folder, [make_row("tiny/llama"), make_row(str(tmp_path / "my-checkpoint"))])
    with pytest.raises(UserError, match="rows for local checkpoint folders .*my-checkpoint.*cannot be published"):
        publish.publish(folder, REPO, api=api)
    assert hub.requests == []


def test_an_invalid_repo_id_is_a_clear_error(dataset, hub, api):
    with pytest.raises(UserError, match="'<ns>/results' is not a Hub dataset repo id"):
        publish.publish(dataset, "<ns>/results", dry_run=True, api=api)
    assert hub.requests == []


def test_a_comment_edit_in_a_recipe_keeps_every_row_current_and_a_code_edit_stales_them(monkeypatch):
    """A row's recipe identity is what its run.py executes (core/code_identity.py): the recipe's comments and
    docstrings are not part of it, its code is. The same rule keys the CPU reference cache and the twins' builder."""
    from neuronhelpers.core.code_identity import code_digest
    from neuronhelpers.run.reference import recipe_identity

    rows = [row for row in store_dataset.row_records(store_dataset.load_results("catalog"))
            if row["library"] == "transformers" and row.get("run_py")]
    rows = rows[::max(1, len(rows) // 40)]  # a sample of every pair, as today's recipe and measuring make them
    rows = [{**row, "run_py": render.render_run_py(render.params_of_run_py(row["run_py"])),
             "harness_version": schema.HARNESS_VERSION} for row in rows]
    original, name = render.recipe_source, render.RECIPE_FILES["transformers"]

    def edit(change):
        monkeypatch.setattr(render, "recipe_source", lambda f: change(original(f)) if f == name else original(f))

    before = recipe_identity("transformers")
    assert all(publish.made_by_todays_recipe(row) for row in rows)
    edit(lambda text: text.replace('"""', '"""Edited, as a maintainer would. ', 1).replace(
        "\n    import torch\n", "\n    # a comment a maintainer added\n    import torch\n", 1))
    assert original(name) != render.recipe_source(name)
    assert all(publish.made_by_todays_recipe(row) for row in rows) and recipe_identity("transformers") == before
    edit(lambda text: text.replace('"fullgraph": True', '"fullgraph": False'))
    assert not any(publish.made_by_todays_recipe(row) for row in rows) and recipe_identity("transformers") != before
    twins = (Path(render.__file__).parents[1] / "twins" / "own.py").read_text()
    assert code_digest(twins.replace("\n\n\n", "\n\n\n# a note\n", 1)) == code_digest(twins)
    assert code_digest(twins.replace("MAX_POSITIONS = 8192", "MAX_POSITIONS = 4096")) != code_digest(twins)
