"""A row reruns as written (issue 55, part 4): a twin's run.py names its twin by id and by the digest of its files, not
by a folder of the machine that ran it; run as a plain file anywhere with neuronhelpers, it builds that twin (the
same files) and gives the row's tokens; elsewhere it says in one line what it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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
    not_a_twin = render.render_run_py({k: v for k, v in params.items() if k != "twin_files"})
    assert "neuronhelpers.twins" not in not_a_twin and "# ---- the twin" not in not_a_twin  # that section: twins' only


@pytest.mark.slow
def test_a_twins_stored_run_py_reruns_as_a_plain_file_in_a_fresh_home(tmp_path):
    """The row's run.py, written to a file and run with `python run.py` where no twin was ever built (an empty
    NEURONHELPERS_HOME): it builds the twin, checks its files and writes the row's tokens. With another twin's digest
    it ends in one line saying which neuronhelpers builds the row's; without neuronhelpers, in one line naming it."""
    from neuronhelpers.run.harness import run_model

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
