"""Compiled runs end to end: twin -> run.py -> subprocess -> verified row (CPU, inductor)."""

import json
import subprocess
import sys

import pytest

from conftest import run_cli
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.process.tree import last_json_line
from neuronhelpers.run.harness import run_model
from neuronhelpers.twins import build


@pytest.fixture(scope="module")
def qwen3_row():
    proc = run_cli("run", "tiny/qwen3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_cli_run_qwen3_passes_exactly(qwen3_row):
    row = qwen3_row
    assert (row["model_id"], row["result"], row["verification"]) == ("tiny/qwen3", "PASS", "exact")
    assert row["twin_of"] == "qwen3" and row["neuron_cores"] == 1 and row["backend"] == "cpu"
    assert row["compile_s"] > 0 and row["peak_memory_bytes"] > 0
    assert len(row["tokens"]) == 32 and row["tokens"] == row["reference_tokens"]
    assert row["wall_s"] >= row["load_s"] + row["compile_s"]
    assert row["decode_tokens_per_s"] > 0 and row["ttft_s"] > 0
    assert (row["compiler"], row["library"]) == ("inductor", "transformers")
    assert "transformers==" in row["packages"] and "torch==" in row["requirements"]


@pytest.mark.slow
def test_saved_run_py_alone_prints_the_same_tokens(qwen3_row, tmp_path):
    """A user saves run.py elsewhere and runs `python3 run.py`: same tokens, no neuronhelpers involved."""
    (tmp_path / "run.py").write_text(qwen3_row["run_py"])
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = last_json_line(proc.stdout)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == result  # the last line is the JSON
    assert result["ok"] and result["tokens"] == qwen3_row["tokens"]


@pytest.mark.slow
def test_vlm_twin_runs_end_to_end():
    row = run_model("tiny/llava")
    assert (row["result"], row["verification"], row["task"]) == ("PASS", "exact", "image-text-to-text"), row["error"]
    assert len(row["tokens"]) == 32 and row["peak_memory_bytes"] > 0


@pytest.mark.slow
def test_perturbed_weight_is_caught_as_mismatch(tmp_path):
    """One weight perturbed for the device run only: FAIL at stage mismatch with the divergence index."""
    perturbed = build.broken_twin("llama", tmp_path / "llama-perturbed", "perturbed")
    device_model = resolve_model(str(perturbed))
    row = run_model(device_model, reference_model=resolve_model("tiny/llama"))
    assert (row["result"], row["stage"]) == ("FAIL", "mismatch")
    assert isinstance(row["first_divergence"], int) and 0 <= row["first_divergence"] < 32
    assert row["tokens"][row["first_divergence"]] != row["reference_tokens"][row["first_divergence"]]
    assert f"token {row['first_divergence']}" in row["error"]


@pytest.mark.slow
def test_a_model_generate_runs_eagerly_is_a_compile_failure_never_a_pass():
    """RWKV keeps its own recurrent state: transformers' generate() finds no compileable cache and silently runs
    the eager forward. The recipe asks for a compiled forward, so this is FAIL at compile, not a PASS."""
    row = run_model("tiny/rwkv")
    assert (row["result"], row["stage"]) == ("FAIL", "compile")
    assert row["cause"].startswith("NotCompiled: generate() ran the forward eagerly")
