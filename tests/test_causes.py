"""Root causes: failures of the same origin share one signature across architectures; `neuronhelpers causes`
ranks them by how many architectures they block; a missing package makes a row UNTESTED, not FAIL."""

import pytest

from conftest import result_row, run_cli
from neuronhelpers.analysis.causes import rank_causes
from neuronhelpers.process.tree import ProcessOutcome
from neuronhelpers.run.harness import classify_failure
from neuronhelpers.store import dataset
from neuronhelpers.verdict import causes

RECOMPILE = ["Recompiling function forward in /x/modeling_gemma2.py:400\n"
             "    triggered by the following guard failure(s):\n"
             "    - 0/{n}: kwargs['past_key_values'].layers[0].cumulative_length_int == {v}  # cache_utils.py:529"]


def trace_in(model: str, line: int) -> str:
    return ('Traceback (most recent call last):\n'
            f'  File "/venv/site-packages/transformers/models/{model}/modeling_{model}.py", line {line}, in forward\n'
            '    x = y\n  File "/venv/site-packages/torch/nn/functional.py", line 9, in linear\n')


def test_the_same_failure_in_two_architectures_has_one_signature():
    a = causes.failure_cause("RuntimeError", "RuntimeError: size of tensor a (16) must match b (64) at dim 3",
                             trace_in("codegen", 120))
    b = causes.failure_cause("RuntimeError", "RuntimeError: size of tensor a (8) must match b (32) at dim 3",
                             trace_in("gptj", 377))
    assert a == b == ("RuntimeError: size of tensor a (N) must match b (N) at dim N @ "
                      "transformers/models/*/modeling_*.py:forward")

    # found in the catalog: the same failure under two releases differed only by dynamo's symbol numbers and
    # inductor's generated file names (a false "new cause" in the release diff)
    pending = "InternalTorchDynamoError: PendingUnbackedSymbolNotFound: Pending unbacked symbols {{u{u}}} not in " \
              "returned outputs FakeTensor(..., size=(-s{s} + u{u},), dtype=torch.int64)"
    assert causes.normalise(pending.format(s=1, u=0)) == causes.normalise(pending.format(s=77, u=3)) \
        == causes.normalise(pending.format(s="7N", u=0))  # a signature recorded before the symbol rule
    kernel = ("RuntimeError: kernel, /home/x/compile-cache/cpu/inductor-2.14.1/{d}/c{h}.main.cpp:56, "
              "index out of bounds: 0 <= tmp22 < {n}L")
    assert causes.normalise(kernel.format(d="v6", h="v6xblblrkehyy5by3s4om7k5tq2wmbq", n=2068)) == \
        causes.normalise(kernel.format(d="iz", h="izdxfcmxksidpjhijpy6z7sjoqsgjbx", n=4)) == \
        "RuntimeError: kernel, ….main.cpp:N, index out of bounds: N <= tmp22 < N"


def test_a_recompile_limit_is_signed_by_the_guard_and_the_class_that_owns_the_int():
    gemma2 = causes.failure_cause("FailOnRecompileLimitHit", "FailOnRecompileLimitHit: Hard failure", "recompile_limit",
                                  [RECOMPILE[0].format(n=7, v=6)])
    cohere2 = causes.failure_cause("FailOnRecompileLimitHit", "FailOnRecompileLimitHit: Hard failure",
                                   "recompile_limit", [RECOMPILE[0].format(n=3, v=9)])
    renamed = causes.failure_cause("FailOnRecompileLimitHit", "FailOnRecompileLimitHit: Hard failure",
                                   "recompile_limit",
                                   [RECOMPILE[0].format(n=7, v=6).replace("past_key_values", "cache")])
    assert gemma2 == cohere2 == renamed  # the same cause across architectures and releases that renamed the kwarg
    assert gemma2 == ("recompile limit: StaticSlidingWindowLayer.cumulative_length_int is a Python int guarded "
                      "on every decode step")


def test_a_missing_package_at_load_is_untested_with_what_to_install():
    payload = {"ok": False, "stage": "load", "error_type": "ImportError",
               "error": "ImportError: Qwen2VLVideoProcessor requires the Torchvision library but it was not found in "
                        "your environment. You can install it with pip: `pip install torchvision`", "traceback": ""}
    outcome = ProcessOutcome(1, False, 3.0, "", "", payload)
    row = classify_failure(outcome, 60)
    assert (row["result"], row["stage"], row["cause"]) == ("UNTESTED", "dependency", "missing package: torchvision")
    assert "pip install torchvision" in row["error"]
    missing_module = dict(payload, error="ModuleNotFoundError: No module named 'no_such_package_xyz'")
    assert classify_failure(ProcessOutcome(1, False, 1.0, "", "", missing_module), 60)["cause"] == \
        "missing package: no_such_package_xyz"


def test_an_import_error_of_an_installed_package_is_a_real_failure():
    payload = {"ok": False, "stage": "load", "error_type": "ImportError",
               "error": "ImportError: cannot import name 'Nope' from 'torch' (torch/__init__.py)", "traceback": ""}
    assert classify_failure(ProcessOutcome(1, False, 1.0, "", "", payload), 60)["result"] == "FAIL"


@pytest.mark.slow
def test_causes_command_ranks_causes_by_architectures_blocked(tmp_path):
    guard = "recompile limit: X.y is a Python int guarded on every decode step"
    rows = [result_row(f"tiny/{t}", "FAIL", model_type=t, twin_of=t, cause=guard)
            for t in ("gemma2", "gemma3_text", "cohere2")]
    rows += [result_row("tiny/mamba", "FAIL", model_type="mamba", twin_of="mamba", cause="TypeError: x @ y",
                        stage="run"),
             result_row("tiny/llama", "PASS", model_type="llama", twin_of="llama"),
             result_row("tiny/musicgen", "UNTESTED", model_type="musicgen", stage="twin", cause="twin build: x",
                        error="no twin", neuron_cores=None)]
    dataset.append_rows(tmp_path, rows)
    ranked = rank_causes(dataset.load_results(tmp_path))
    assert list(ranked["count"]) == [3, 1] and ranked.iloc[0]["architectures"] == ["cohere2", "gemma2", "gemma3_text"]
    proc = run_cli("causes", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert ("5 verdicts (1 PASS whose check could fail, 0 PASS whose check could not have failed, 4 FAIL; pass rate "
            "20% of 5), 1 untested") in proc.stdout
    lines = proc.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if guard in line)
    assert lines[first].strip().startswith("3  [compile]") and "cohere2, gemma2, gemma3_text" in lines[first + 1]
    assert "UNTESTED reasons" in proc.stdout and "twin build: x" in proc.stdout


def test_a_twin_that_needs_a_missing_package_is_untested_dependency(monkeypatch):
    from neuronhelpers.run import harness
    from neuronhelpers.twins import build

    spec = build.twin_spec("udop") if any(s.key == "udop" for s in build.architectures()) else build.twin_spec("llama")

    def unavailable(*args, **kwargs):
        raise build.TwinUnavailable(spec, "it needs the package 'pytesseract'", "missing package: pytesseract",
                                    stage="dependency")

    monkeypatch.setattr(harness, "plan_run", unavailable)
    row = harness.prepare_run(spec.model_id, backend="cpu")
    assert (row["result"], row["stage"], row["cause"]) == ("UNTESTED", "dependency", "missing package: pytesseract")
