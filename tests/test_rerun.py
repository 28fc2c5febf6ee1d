"""A row reruns as written (issue 55, part 4): a twin's run.py names its twin by id and by the digest of its files, not
by a folder of the machine that ran it; run as a plain file anywhere with neuronhelpers, it builds that twin (the
same files) and gives the row's tokens; elsewhere it says in one line what it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import result_row, run_cli
from neuronhelpers.core.backends import get_backend
from neuronhelpers.recipes import render
from neuronhelpers.run import reference

FROZEN = ("bert_tokenizer(77)", "clip_tokenizer()", "t5_tokenizer()", "xlm_roberta_tokenizer(77)")
_DIGEST_TOKENIZERS = f"""
import hashlib, os, sys, tempfile
from neuronhelpers.twins import tokenizers
for name in {FROZEN!r}:
    folder = tempfile.mkdtemp()
    eval("tokenizers." + name).save_pretrained(folder)
    digest = hashlib.sha256()
    for file in sorted(os.listdir(folder)):
        digest.update(file.encode() + open(os.path.join(folder, file), "rb").read())
    print(name, digest.hexdigest())
"""


def test_the_twins_tokenizers_are_the_same_in_every_process_and_know_the_corpus():
    """The WordPiece, suffixed-BPE and Unigram trainers break ties in hash order (another vocabulary per process):
    their vocabularies are trained once and kept as package data, so two builds write the same tokenizer files. Each
    was trained on the corpus: it reads every corpus word without an unknown token."""
    from neuronhelpers.twins import tokenizers

    runs = [subprocess.run([sys.executable, "-c", _DIGEST_TOKENIZERS], capture_output=True, text=True, timeout=300,
                           check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0].splitlines()) == len(FROZEN), runs
    words = sorted({word.strip(".,?").lower() for word in tokenizers.CORPUS.split()} - {""})
    for name in FROZEN:
        tokenizer = eval("tokenizers." + name)  # noqa: S307 - one of FROZEN's calls
        ids = [i for word in words for i in tokenizer(word, add_special_tokens=False)["input_ids"]]
        assert tokenizer.unk_token_id not in ids, name


@pytest.mark.slow
def test_a_twins_run_py_names_it_by_id_and_files_and_its_reference_is_keyed_by_them():
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.twins.rerun import builder_named, twin_files_digest

    ref = resolve_model("tiny/qwen3")
    params = render.recipe_params(ref, get_backend("cpu"))
    assert params["model_path"] == "tiny/qwen3" and params["twin_files"] == {
        "digest": twin_files_digest(ref.path), "built_by": builder_named()}
    text = render.render_run_py(params)
    assert ref.path not in text and "from neuronhelpers.twins.rerun import twin_folder" in text
    key = reference.reference_key(params)
    assert key is not None and key != reference.reference_key(
        {**params, "twin_files": {**params["twin_files"], "digest": "0" * 64}})
    # the same files built by another commit reuse the reference: the digest, not the builder, says what they are
    assert key == reference.reference_key({**params, "twin_files": {**params["twin_files"], "built_by": "another"}})
    not_a_twin = render.render_run_py({k: v for k, v in params.items() if k != "twin_files"})
    assert "neuronhelpers.twins" not in not_a_twin and "# ---- the twin" not in not_a_twin  # that section: twins' only


@pytest.mark.slow
def test_a_twins_stored_run_py_reruns_as_a_plain_file_in_a_fresh_home(tmp_path):
    """The row's run.py, written to a file and run with `python run.py` where no twin was ever built (an empty
    NEURONHELPERS_HOME): it builds the twin, checks its files and writes the row's tokens. With another twin's digest
    it ends in one line saying which neuronhelpers builds the row's; without neuronhelpers, in one line naming it."""
    from neuronhelpers.run.harness import run_model
    from neuronhelpers.store import dataset

    row = run_model("tiny/qwen3", backend="cpu")
    assert row["result"] == "PASS", row.get("error")
    run_py = tmp_path / "run.py"
    run_py.write_text(row["run_py"])
    env = {**os.environ, "NEURONHELPERS_HOME": str(tmp_path / "fresh-home")}
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["tokens"] == list(row["tokens"])
    assert list((tmp_path / "fresh-home" / "twins").glob("qwen3-*/TWIN.json"))  # built there, by the run.py

    params = render.params_of_run_py(row["run_py"])
    other = row["run_py"].replace(params["twin_files"]["digest"], "0" * 64)
    (tmp_path / "other.py").write_text(other)
    proc = subprocess.run([sys.executable, "other.py", "--reference"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout[-500:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "builds other files than the twin" in proc.stderr
    assert params["twin_files"]["built_by"] in proc.stderr
    without = ("import runpy, sys; sys.modules['neuronhelpers'] = None; "  # as on a machine without neuronhelpers
               "runpy.run_path('run.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", without], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"tiny/qwen3 is a neuronhelpers twin: install {params['twin_files']['built_by']}, rerun")

    # `neuronhelpers rerun` does the same for a results folder: run.py, then run.py --reference, judged as the sweep
    dataset.append_rows(tmp_path / "results", [row])
    proc = run_cli("rerun", str(tmp_path / "results"), "--sample", "5", "--no-progress", timeout=900)
    assert proc.returncode == 0 and proc.stdout.strip() == "1 of 1 reproduced", proc.stdout + proc.stderr[-2000:]


def _rows(pair):
    compiler, library = pair
    common = dict(compiler_version=compiler, library_version=library, run_py="PARAMS = {}")
    return [result_row("tiny/a", **common), result_row("tiny/b", "FAIL", **common),
            result_row("tiny/st-a", task="feature-extraction", library="sentence-transformers", **{
                **common, "library_version": __import__("sentence_transformers").__version__}),
            result_row("tiny/t2i-a", task="text-to-image", library="diffusers", **{
                **common, "library_version": __import__("diffusers").__version__}),
            result_row("tiny/c", **common), result_row("tiny/old", **{**common, "compiler_version": "0.0.1"}),
            result_row("tiny/t2i-other", task="text-to-image", library="diffusers", packages="transformers==4.0.0", **{
                **common, "library_version": __import__("diffusers").__version__}),
            result_row("tiny/untested", "UNTESTED", stage="twin", error="x", **common),
            result_row("tiny/no-run-py", **{**common, "run_py": None})]


def test_a_rerun_sample_takes_this_pairs_verdicts_across_libraries_and_tasks_first():
    """Only verdicts of this environment's pair that carry a run.py; a sample of 3 covers three (library, task)
    groups before it takes a second row of one; an unknown model is refused in one line. A diffusers row made beside
    another transformers is not this environment's (its twin's files come from transformers): rerun in the 5.24.0
    venv, 8 of 20 such rows ended "builds other files than the twin this run.py tested"."""
    from neuronhelpers.core import versions
    from neuronhelpers.store import schema
    from neuronhelpers.sweep.rerun import rows_to_rerun

    pair = (versions.compiler_for(get_backend("cpu"))[1], versions.library_version("transformers"))
    frame = schema.rows_to_table(_rows(pair)).to_pandas()
    every = rows_to_rerun(frame)
    assert sorted(row["model_id"] for row in every) == ["tiny/a", "tiny/b", "tiny/c", "tiny/st-a", "tiny/t2i-a"]
    drawn = rows_to_rerun(frame, sample=3)
    assert len({(row["library"], row["task"]) for row in drawn}) == 3
    assert [row["model_id"] for row in rows_to_rerun(frame, models=["tiny/b"])] == ["tiny/b"]
    with pytest.raises(Exception, match="no verdict with a run.py for tiny/old in this environment's pair"):
        rows_to_rerun(frame, models=["tiny/old"])
    with pytest.raises(Exception, match="only where it was made with this transformers"):
        rows_to_rerun(frame, models=["tiny/t2i-other"])


def test_a_rerun_is_judged_against_its_row_verdict_stage_verification_then_tokens():
    from neuronhelpers.sweep.rerun import difference_from, rerun_lines

    passed = {"result": "PASS", "verification": "exact", "stage": None, "tokens": [1, 2, 3]}
    assert difference_from(passed, {**passed}) is None
    assert difference_from(passed, {**passed, "tokens": [1, 2, 4]}) == ("tokens differ from the row's at position 2 "
                                                                       "of 3")
    assert difference_from(passed, {**passed, "verification": "within_tolerance"}) == (
        "verification 'within_tolerance', the row's 'exact'")
    assert difference_from(passed, {"result": "FAIL", "stage": "compile"}) == "result 'FAIL', the row's 'PASS'"
    # a rerun that failed says where and why, in run.py's own words (z-image's controlnet, found by rerun --sample 30)
    assert difference_from(passed, {"result": "FAIL", "stage": "compile", "error": "Unsupported: Unsupported context "
                                    "manager"}) == ("result 'FAIL' (at compile: Unsupported: Unsupported context "
                                                    "manager), the row's 'PASS'")
    failed = {"result": "FAIL", "stage": "compile", "verification": None, "tokens": None}
    assert difference_from(failed, {**failed, "stage": "run"}) == "stage 'run', the row's 'compile'"
    assert difference_from(failed, {**failed, "verification": "exact"}) is None  # a FAIL's verification: not compared
    # embeddings and images: the row's output digest (means over parts of the output), within the row's tolerance
    from neuronhelpers.verdict.verify import output_digest

    embeddings = [[float(i * j) / 7 for i in range(16)] for j in range(3)]
    digest = output_digest("sentence-transformers", {"embeddings": embeddings})
    assert len(digest) == 3 * 8 and output_digest("transformers", {"tokens": [1]}) is None
    encoded = {"result": "PASS", "verification": "within_tolerance", "output_digest": digest, "tolerance": 0.01}
    nudged = output_digest("sentence-transformers", {"embeddings": [[v + 0.005 for v in row] for row in embeddings]})
    assert difference_from(encoded, {**encoded, "output_digest": nudged}) is None
    moved = output_digest("sentence-transformers", {"embeddings": [[v + 0.02 for v in row] for row in embeddings]})
    assert difference_from(encoded, {**encoded, "output_digest": moved}) == (
        "its output lies 0.02 from the row's (the row's tolerance 0.01)")
    lines = rerun_lines([{"model_id": "tiny/a", "reproduced": True, "difference": None},
                         {"model_id": "tiny/b", "reproduced": False, "difference": "stage 'run', the row's 'compile'"}])
    assert lines == ["1 of 2 reproduced", "  tiny/b: stage 'run', the row's 'compile'"]


def test_while_a_twin_is_written_log_exp_and_expm1_are_correctly_rounded_then_torchs_own_again():
    """torch's float32 log is not correctly rounded (here log(7), log(47), log(49) and log(0.75) are one unit in the
    last place off) and its last bit differs between machines: a twin whose constructor computes a parameter with it
    (the state-space families' A_log) had other files on another machine, and its run.py refused it."""
    import math

    import numpy as np
    import torch

    from neuronhelpers.twins.weights import correctly_rounded_math

    plain = (torch.log, torch.exp, torch.expm1, torch.Tensor.log)
    integers, values = torch.arange(1, 65), torch.linspace(-4.0, 4.0, 257)
    with correctly_rounded_math():
        logs, scalar, method = torch.log(integers), torch.log(torch.tensor(0.75)), integers.float().log()
        exps, expm1s = torch.exp(values), (-values.abs()).expm1()
    assert logs.dtype == torch.float32 and (torch.log, torch.exp, torch.expm1, torch.Tensor.log) == plain
    assert logs.tolist() == method.tolist() == [float(np.float32(math.log(i))) for i in range(1, 65)]
    assert scalar.item() == float(np.float32(math.log(0.75)))
    assert exps.tolist() == [float(np.float32(math.exp(v))) for v in values.double().tolist()]
    assert expm1s.tolist() == [float(np.float32(math.expm1(-abs(v)))) for v in values.double().tolist()]


@pytest.mark.slow
def test_a_twins_files_are_the_same_whatever_the_machines_float_math_or_network(tmp_path, monkeypatch):
    """Built where the Hub is reachable, a twin's tokenizer_config.json still says local_files_only, as every twin
    built offline does (the catalog's were); and a state-space twin's A_log is log(1..N) correctly rounded, whatever
    this machine's torch.log gives (2026-12-07: eight twins and five encoders built here had other files than their
    rows, and their run.py refused them)."""
    import math

    import huggingface_hub.constants
    import numpy as np
    from safetensors.numpy import load_file

    from neuronhelpers.core.settings import HOME_ENV
    from neuronhelpers.twins.build import build_twin

    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    encoder, mamba = build_twin("tiny/st-bert"), build_twin("tiny/mamba")
    assert json.loads((encoder / "tokenizer_config.json").read_text())["local_files_only"] is True
    assert "HF_HUB_OFFLINE" not in os.environ and huggingface_hub.constants.HF_HUB_OFFLINE is False
    weights = load_file(mamba / "model.safetensors")
    a_logs = [name for name in weights if name.endswith("A_log")]
    assert a_logs
    for name in a_logs:
        columns = weights[name].shape[-1]
        exact = np.array([np.float32(math.log(i)) for i in range(1, columns + 1)], dtype=np.float32)
        assert (weights[name] == exact).all(), name


@pytest.mark.slow
def test_the_lumina_twins_never_initialised_pad_token_is_zeros_not_reused_memory(tmp_path, monkeypatch):
    """diffusers' LuminaNextDiT2DModel allocates pad_token with torch.empty and never initialises it: the twin held
    whatever the allocator reused, other files on every build, and its run.py refused every rebuild (2026-12-07)."""
    from safetensors.numpy import load_file

    from neuronhelpers.core.settings import HOME_ENV
    from neuronhelpers.twins.build import build_twin

    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    weights = load_file(build_twin("tiny/t2i-lumina") / "transformer" / "diffusion_pytorch_model.safetensors")
    assert (weights["pad_token"] == 0).all()
