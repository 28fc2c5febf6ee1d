"""Sharded runs: run.py launches its own ranks (TP, TP+EP), verified against the single-process reference;
a failing rank ends the run at once; judges for runs too large for a CPU reference."""

import json
import os
import time
from pathlib import Path

import pytest
import torch
import transformers

from conftest import run_cli
from neuronhelpers import twins
from neuronhelpers.harness import run_model
from neuronhelpers.judge import LexicalJudge, LMJudge, make_judge

FAULTS = Path(__file__).parent / "faults"
ENGLISH = ("The children walk to school in the morning while the baker opens his shop, "
           "and the river runs quietly past the old mill.")
SOUP = "ple\ufffdai of\x11 d\x18g\ufffd\ufffdz\x7fheiU\x06berFwhilaz\ufffdY\ufffd< Aum Aum Aum Aum"


def test_tp_over_two_cores_equals_the_single_core_reference():
    proc = run_cli("run", "tiny/llama", "--cores", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout)
    assert (row["result"], row["neuron_cores"], row["parallelism"], row["verification"]) == ("PASS", 2, "tp", "exact")
    assert row["tokens"] == row["reference_tokens"] and len(row["tokens"]) == 32
    assert len(row["peak_memory_per_rank"]) == 2 and row["peak_memory_bytes"] == max(row["peak_memory_per_rank"])
    assert "'cores': 2" in row["run_py"] and "'dist_backend': 'gloo'" in row["run_py"]


def test_moe_over_two_cores_uses_expert_parallelism():
    row = run_model("tiny/qwen3_moe", cores=2)
    assert row["result"] == "PASS", row["error"]
    assert "ep" in row["parallelism"] and row["neuron_cores"] == 2 and row["verification"] == "exact"


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace"):
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_failing_second_rank_fails_the_run_within_seconds_and_leaves_no_process(monkeypatch):
    marker = f"NH_RANK_FAULT_{os.getpid()}"
    monkeypatch.setenv("PYTHONPATH", str(FAULTS))
    monkeypatch.setenv("NH_TEST_FAULTS", json.dumps({"*": "rank1_raises"}))
    monkeypatch.setenv(marker, "1")
    start = time.monotonic()
    row = run_model("tiny/llama", cores=2, timeout=300)
    elapsed = time.monotonic() - start
    assert (row["result"], row["stage"]) == ("FAIL", "load")
    assert row["error"].startswith("rank 1: RuntimeError: injected fault: rank 1 failed")
    assert elapsed < 60, f"took {elapsed:.0f} s: rank 0 was left waiting on the dead rank"
    time.sleep(0.5)
    assert _processes_with(marker) == [], "a rank outlived the run"


def test_without_an_affordable_reference_a_judge_decides(monkeypatch):
    monkeypatch.setenv("NEURONHELPERS_HOST_GIB", "0")  # no CPU reference fits
    row = run_model("tiny/llama", cores=2)
    # a random-weight twin writes token soup: the lexical judge must reject it
    assert (row["result"], row["stage"], row["reference_tokens"]) == ("FAIL", "mismatch", None)
    assert row["error"].startswith("the judge rejected the text: common words")


def test_lexical_judge_accepts_prose_and_rejects_soup():
    judge = LexicalJudge()
    assert judge.judge(ENGLISH).ok
    assert judge.judge("Paris is the capital of France and it is known for its museums.").ok
    assert not judge.judge(SOUP).ok
    assert not judge.judge("qzx vbn the the the the the the the the").ok  # repetition
    assert not judge.judge("xkcd qwrt plmz vbnq").ok
    assert make_judge(None).verification == "judge_lexical"


@pytest.fixture(scope="module")
def tiny_trained_lm(tmp_path_factory):
    """The llama twin, trained for a few seconds on the twins' English corpus: a tiny local judge LM."""
    src = twins.build_twin("llama")
    tok = transformers.AutoTokenizer.from_pretrained(src)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(src))
    lines = [line for line in twins._CORPUS.splitlines() if line.strip()]
    batch = tok(lines, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    path = tmp_path_factory.mktemp("judge-lm")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_lm_judge_scores_prose_below_soup_with_a_local_model(tiny_trained_lm):
    judge = LMJudge(tiny_trained_lm, max_perplexity=60)
    prose, soup = judge.judge(ENGLISH), judge.judge(SOUP)
    assert prose.verification == "judge_lm" and prose.score < soup.score
    assert prose.ok and not soup.ok, (prose.reason, soup.reason)


def test_lm_judge_from_a_missing_path_is_a_clear_error(tmp_path):
    from neuronhelpers.errors import UserError

    with pytest.raises(UserError, match="could not be loaded from disk"):
        LMJudge(str(tmp_path / "nothing"))
