"""What would make a FAIL run (issue 49): the remedy ladder per cause, the one change each renders into run.py, the
remedy runs a sweep tries after a FAIL, and the rule that a remedy is recorded beside the verdict, never as it."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import result_row, run_cli
from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import ModelRef
from neuronhelpers.recipes import render
from neuronhelpers.recipes.remedies import LADDER, REMEDIES, remedies_for, remedy_entry, remedy_line
from neuronhelpers.run.remedies import remedies_frame, remedies_json, remedies_line, remedy_record
from neuronhelpers.store import schema

SLIDING = "recompile limit: StaticSlidingWindowLayer.cumulative_length_int is a Python int guarded on every decode step"
USE_CACHE = ("NotCompiled: generate() ran the forward eagerly: its config sets use_cache: false, so nothing was "
             "compiled; pass use_cache=True to generate()")


def test_the_ladder_maps_each_cause_to_its_remedies_in_order_each_with_its_reason():
    assert [r.name for r in remedies_for(USE_CACHE)] == ["use_cache"]
    assert [r.name for r in remedies_for(SLIDING)] == ["full_static_within_window", "dynamic_window", "recompile_limit"]
    other_guard = "recompile limit: guard `tensor 'input_ids' size mismatch at index N. expected N, actual N`"
    assert [r.name for r in remedies_for(other_guard)] == ["recompile_limit"]
    data_dependent = ("UserError: Consider annotating your code using torch._check*(). Could not extract specialized "
                      "integer from data-dependent expression uN")
    assert [r.name for r in remedies_for(data_dependent)] == ["fullgraph_false"]  # capture_scalar_outputs: 0 of 8
    assert remedies_for("IndexError: index_copy_(): index N is out of bounds") == [] and remedies_for(None) == []
    attention = ("RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton "
                 "dimension N @ transformers/integrations/sdpa_attention.py:sdpa_attention_forward")
    assert [r.name for r in remedies_for(attention)] == ["attn_eager"]
    assert remedies_for("mutation on a view chain @ diffusers/models/attention_processor.py:__call__") == []
    assert all(name in REMEDIES for _, names in LADDER for name in names)
    assert all(len(r.reason) > 60 and r.label for r in REMEDIES.values())


def test_a_remedy_is_one_params_entry_and_the_unmodified_run_py_carries_none():
    """The unmodified file's PARAMS hold no remedy; a remedy's file differs from it by one line, its PARAMS entry
    (name and settings), and nothing in the recipe's code."""
    params = render.recipe_params(ModelRef("tiny/x", "/p", vocab.TEXT_GENERATION, "llama"), get_backend("cpu"))
    plain = render.render_run_py(params)
    assert "remedy" not in render.params_of_run_py(plain)
    for name in REMEDIES:
        text = render.render_run_py({**params, "remedy": remedy_entry(name)})
        added = [line for line in text.splitlines() if line not in plain.splitlines()]
        removed = [line for line in plain.splitlines() if line not in text.splitlines()]
        assert (added, removed) == (["    " + remedy_line(name)], []), (added, removed)
        assert render.params_of_run_py(text)["remedy"]["name"] == name
    with pytest.raises(KeyError, match="no remedy named"):
        remedy_entry("nothing")
    with pytest.raises(ValueError, match="parameter remedy is 'use_cache', not dict"):
        render.render_run_py({**params, "remedy": "use_cache"})  # a name alone is not an entry the recipe reads


def test_the_recipe_reads_each_remedys_settings_at_its_extension_point(tmp_path, monkeypatch):
    """Each remedy's entry reaches what it names, through the rendered run.py's own functions: torch's config (set
    before anything compiles), the static cache's layer classes, torch.compile's and generate()'s arguments,
    from_pretrained's; none without a remedy."""
    import importlib

    from neuronhelpers.recipes.remedies import EXTENSION_POINTS

    saved = {}  # torch's settings the remedies set, restored after the test (monkeypatch cannot restore them)
    for name, remedy in REMEDIES.items():
        assert set(remedy.settings) <= set(EXTENSION_POINTS), name
        for path in remedy.settings.get("config", {}):  # each dotted name is a setting torch has
            module, _, setting = path.rpartition(".")
            saved[path] = (importlib.import_module(module), setting, getattr(importlib.import_module(module), setting))
    import transformers.cache_utils as cache_utils

    layers = dict(cache_utils.STATIC_LAYER_TYPE_MAPPING)  # a remedy's cache_layers change it: restored too
    try:
        _each_extension_point(tmp_path, monkeypatch)
    finally:
        for config, setting, value in saved.values():
            setattr(config, setting, value)
        cache_utils.STATIC_LAYER_TYPE_MAPPING.clear()
        cache_utils.STATIC_LAYER_TYPE_MAPPING.update(layers)


def _each_extension_point(tmp_path, monkeypatch):
    import torch._dynamo
    import transformers

    from neuronhelpers.run.measure import load_run_py

    params = render.recipe_params(ModelRef("tiny/x", "/p", vocab.TEXT_GENERATION, "llama"), get_backend("cpu"))
    tokenizer = type("Tokenizer", (), {"pad_token_id": 0, "eos_token_id": 0})()
    loaded = {}
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda path, **kwargs: loaded.update(kwargs) or torch.nn.Linear(1, 1))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda path, **kwargs: type(
        "T", (), {"chat_template": None, "__call__": lambda self, text, return_tensors: {}})())

    def run_py(remedy):
        path = tmp_path / f"{remedy}.py"
        path.write_text(render.render_run_py({**params, **({"remedy": remedy_entry(remedy)} if remedy else {})}))
        return load_run_py(str(path))

    plain = run_py(None)
    kwargs = plain.compiled_generation_kwargs(plain.PARAMS, "cpu", tokenizer)
    assert "use_cache" not in kwargs and kwargs["compile_config"].fullgraph is True
    assert torch._dynamo.config.recompile_limit == 8 and torch.compiler.config.dynamic_sources == ""
    plain.load(plain.PARAMS, "cpu")
    assert "attn_implementation" not in loaded
    module = run_py("use_cache")
    assert module.compiled_generation_kwargs(module.PARAMS, "cpu", tokenizer)["use_cache"] is True
    module = run_py("fullgraph_false")
    assert module.compiled_generation_kwargs(module.PARAMS, "cpu", tokenizer)["compile_config"].fullgraph is False
    module = run_py("recompile_limit")
    module.compiled_generation_kwargs(module.PARAMS, "cpu", tokenizer)
    assert torch._dynamo.config.recompile_limit == 64
    module = run_py("dynamic_window")
    module.compiled_generation_kwargs(module.PARAMS, "cpu", tokenizer)
    assert torch.compiler.config.dynamic_sources == r".*cumulative_length_int"
    import transformers.cache_utils as cache_utils

    module = run_py("full_static_within_window")
    module.compiled_generation_kwargs(module.PARAMS, "cpu", tokenizer)
    assert cache_utils.STATIC_LAYER_TYPE_MAPPING["sliding_attention"] is cache_utils.StaticLayer
    assert cache_utils.STATIC_LAYER_TYPE_MAPPING["chunked_attention"] is cache_utils.StaticLayer
    module = run_py("attn_eager")
    module.load(module.PARAMS, "cpu")
    assert loaded["attn_implementation"] == "eager"
    loaded.clear()
    module.reference_run(module.PARAMS)  # the CPU reference runs the recipe as it is, whatever the remedy
    assert "attn_implementation" not in loaded


@pytest.mark.slow
def test_render_refuses_an_unknown_remedy_in_one_line():
    proc = run_cli("render", "tiny/llama", "--remedy", "nothing", timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "use_cache" in proc.stderr


STATIC = {"symbolic_shapes": [], "recompiles": 0, "graph_breaks": 0, "unique_graphs": 1}


def test_a_remedy_record_says_what_it_cost_and_its_word_on_trn2():
    """trn2-ready: static shapes, one graph, no recompile; costly: breaks or several graphs; not on trn2: a symbol or
    a compile per token; no word for a FAIL, or for a record made before the shapes were read."""
    per_token = remedy_record("recompile_limit", {"result": "PASS", "verification": "exact", "recompiles": 30,
                                                  "unique_graphs": 31, "compile_s": 36.4, "graph_breaks": 0,
                                                  "symbolic_shapes": []})
    assert per_token["recompiles_per_token"] is True and per_token["trn2"] == "not on trn2"
    line = remedies_line(remedies_json([per_token]))
    assert line == ("PASS with torch._dynamo.config.recompile_limit = 64 at 30 recompiles for 32 tokens (one per "
                    "generated token) (not on trn2: 30 recompiles for 32 tokens: a neuronx-cc compile each)")
    once = remedy_record("use_cache", {"result": "PASS", **STATIC, "compile_s": 5.36})
    assert remedies_line(remedies_json([once])) == ("PASS with use_cache=True [1 compiled graph, compile 5.4 s] "
                                                    "(trn2-ready: static shapes, one compiled graph, no recompile)")
    symbolic = remedy_record("dynamic_window", {"result": "PASS", **STATIC,
                                                "symbolic_shapes": ["cumulative_length_int (a symbolic int)"]})
    assert (symbolic["trn2"], symbolic["trn2_why"]) == ("not on trn2", "compiled with 1 symbol: cumulative_length_int "
                                                                       "(a symbolic int)")
    broken = remedy_record("fullgraph_false", {"result": "PASS", **STATIC, "unique_graphs": 14, "graph_breaks": 6})
    assert (broken["trn2"], broken["trn2_why"]) == ("costly on trn2", "14 compiled graphs, 6 graph breaks, "
                                                                      "0 recompiles")
    assert remedy_record("use_cache", {"result": "PASS", "unique_graphs": 1})["trn2"] is None  # shapes not read
    assert remedy_record("use_cache", {"result": "FAIL", **STATIC})["trn2"] is None
    none = [remedy_record("use_cache", {"result": "FAIL", "stage": "compile"}),
            remedy_record("fullgraph_false", {"result": "FAIL", "stage": "run"})]
    assert remedies_line(remedies_json(none)) == ("no remedy made it run (tried use_cache=True: FAIL at compile; "
                                                  "fullgraph=False: FAIL at run)")
    assert remedies_json([]) is None and remedies_line(None) is None
    table = remedies_frame(remedies_json([per_token, {**once, "peak_memory_bytes": 2**30}]))
    assert table["change"].tolist() == ["torch._dynamo.config.recompile_limit = 64", "use_cache=True"]
    assert table["trn2"].tolist() == ["not on trn2", "trn2-ready"]
    assert table["recompiles_per_token"].tolist() == [True, False] and table["peak_memory_gib"].iloc[1] == 1.0
    assert remedies_frame(None).empty  # a row nothing was tried for: an empty table, not an error


def test_the_answer_gives_the_trn2_ready_remedy_first_and_the_others_with_their_words():
    """Whatever order they ran in, the best word leads; a PASS beyond the window it is exact within does not count."""
    window = remedy_record("full_static_within_window", {"result": "PASS", **STATIC, "prompt_tokens": 38,
                                                         "compile_s": 5.2}, window=4096)
    symbolic = remedy_record("dynamic_window", {"result": "PASS", **STATIC, "symbolic_shapes": ["n (a symbolic int)"]})
    line = remedies_line(remedies_json([symbolic, window]), architecture_twin=True)
    assert line.startswith("PASS with full static layers for the sliding ones, for sequences up to 4096 tokens (the "
                           "architecture's default window) [1 compiled graph, compile 5.2 s] (trn2-ready: static "
                           "shapes, one compiled graph, no recompile; identical output within the window); also PASS "
                           "with torch.compiler.config.dynamic_sources"), line
    assert line.endswith("(not on trn2: compiled with 1 symbol: n (a symbolic int))")
    beyond = remedy_record("full_static_within_window", {"result": "PASS", **STATIC, "prompt_tokens": 40}, window=64)
    assert (beyond["trn2"], beyond["trn2_why"]) == ("not applicable",
                                                    "the test's 40 + 32 tokens exceed the window of 64")
    assert remedies_line(remedies_json([beyond])) == ("no remedy made it run (tried full static layers for the "
                                                      "sliding ones: not applicable)")
    symbolic_after = remedies_line(remedies_json([beyond, symbolic]))  # one passed: the refused one is still said
    assert symbolic_after.startswith("PASS with torch.compiler.config.dynamic_sources") and symbolic_after.endswith(
        "; full static layers for the sliding ones: not applicable (the test's 40 + 32 tokens exceed the window of "
        "64)"), symbolic_after
    unrun = remedy_record("full_static_within_window", {}, window=None)
    assert unrun["trn2_why"] == "the model's config sets no attention window" and unrun["result"] is None
    unread = remedy_record("full_static_within_window", {}, not_applicable="its config could not be read here (x)")
    assert (unread["trn2"], unread["trn2_why"]) == ("not applicable", "its config could not be read here (x)")


def test_a_remedys_pass_whose_check_could_not_fail_is_said_and_counted_apart():
    """tiny/inkling_mm_model's window remedy passed trn2-ready, exact, but its perturbed run gave the same output:
    before, `causes` and the card counted it among the trn2-ready and its answer did not say so. Now a remedy whose
    check could fail comes first, the other is said with its caveat, and the counts keep it apart."""
    from neuronhelpers.analysis.causes import remedy_outcomes
    from neuronhelpers.core.vocab import PASS_COULD_NOT_FAIL
    from neuronhelpers.store.card import remedy_counts

    unchecked = remedy_record("full_static_within_window", {"result": "PASS", **STATIC, "prompt_tokens": 38,
                                                            "compile_s": 5.2, "check_sensitive": False}, window=4096)
    checked = remedy_record("dynamic_window", {"result": "PASS", **STATIC, "check_sensitive": True})
    line = remedies_line(remedies_json([unchecked, checked]))
    assert line.startswith("PASS with torch.compiler.config.dynamic_sources") and line.endswith(
        "identical output within the window; but its check could not have failed)"), line
    alone = remedies_json([unchecked])
    rows = pd.DataFrame([result_row(f"tiny/{name}", "FAIL", cause=USE_CACHE, remedies=value)
                         for name, value in (("a", alone), ("b", remedies_json([checked])))],
                        columns=schema.COLUMN_NAMES)
    [outcome] = remedy_outcomes(rows).to_dict("records")
    assert (outcome["rows"], outcome["trn2-ready"], outcome[PASS_COULD_NOT_FAIL]) == (2, 1, 1)
    words = {c["remedy"]: c["trn2"] for c in remedy_counts(rows)}
    assert words["full static layers for the sliding ones"] == "1 trn2-ready (its check could not have failed)"


def test_the_measuring_reads_what_a_compiled_graph_takes_that_is_not_static():
    """From dynamo's own graph code: a symbolic int input, a tensor input of symbolic size and a data-dependent value
    are named; a static graph (whatever symbols dynamo named on the way and left out) gives none."""
    import torch

    from neuronhelpers.run.instruments import RecompileLog

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = torch.tensor(0)
            torch._dynamo.mark_static_address(self.n)

        def forward(self, x, n):
            self.n.item()  # dynamo names a symbol for it, and leaves it out of the graph: still static
            return x[:n] * 2 + self.n

    saved = (torch.compiler.config.dynamic_sources, torch._dynamo.config.capture_scalar_outputs)
    try:
        torch._dynamo.reset()
        with RecompileLog() as static:
            compiled = torch.compile(Counter(), backend="eager", fullgraph=True, dynamic=False)
            compiled(torch.ones(5, 3), 2), compiled(torch.ones(5, 3), 2)
        torch._dynamo.reset()
        torch.compiler.config.dynamic_sources = r".*\['n'\]"
        with RecompileLog() as dynamic:
            compiled = torch.compile(Counter(), backend="eager", fullgraph=True, dynamic=False)
            compiled(torch.ones(5, 3), 2), compiled(torch.ones(5, 3), 3)
        torch._dynamo.config.capture_scalar_outputs = True
        with RecompileLog() as unbacked:
            torch.compile(lambda x: torch.zeros(x.sum().item() + 1), backend="eager", fullgraph=True)(
                torch.ones(3, dtype=torch.int64))
    finally:
        torch.compiler.config.dynamic_sources, torch._dynamo.config.capture_scalar_outputs = saved
        torch._dynamo.reset()
    assert static.symbols == [] and dynamic.symbols == ["n (a symbolic int)"]
    assert unbacked.symbols == ["u0 (a data-dependent value)"]
    assert RecompileLog.not_static('def forward(self, L_x_: "f32[s3, 8][8, 1]cpu", L_y_: "f32[2][1]cpu"):') == [
        "x (a tensor of symbolic size)"]


def test_a_remedy_that_passed_is_never_read_as_the_models_result():
    """newest_per_model, the answer, the gate, the explorer's counts and the card read `result`: the unmodified
    recipe's FAIL, whatever the remedies column says."""
    from neuronhelpers.analysis.answers import Answers
    from neuronhelpers.store.card import remedy_counts, result_counts
    from neuronhelpers.store.dataset import newest_per_model
    from neuronhelpers.store.diff import check_expected

    tried = remedies_json([remedy_record("use_cache", {"result": "PASS", **STATIC, "compile_s": 5.0})])
    rows = pd.DataFrame([result_row("tiny/llama", twin_of="llama", model_type="llama"),
                         result_row("tiny/01-ai--Yi-1.5-6B-Chat", "FAIL", twin_of="llama", model_type="llama",
                                    twin_from="01-ai/Yi-1.5-6B-Chat", cause=USE_CACHE, remedies=tried)],
                        columns=schema.COLUMN_NAMES)
    assert newest_per_model(rows).set_index("model_id").at["tiny/01-ai--Yi-1.5-6B-Chat", "result"] == "FAIL"
    answer = Answers(rows).answer("01-ai/Yi-1.5-6B-Chat", "llama")
    assert answer.result == "FAIL" and answer.line().startswith("model twin tiny/01-ai--Yi-1.5-6B-Chat (inductor "
                                                                "2.13.0, transformers 5.23.0): FAIL at compile: ")
    assert ("; what would make it run: PASS with use_cache=True [1 compiled graph, compile 5.0 s] (trn2-ready: "
            "static shapes, one compiled graph, no recompile)") in answer.line()
    [counts] = result_counts(rows)
    assert (counts["pass"], counts["fail"]) == (1, 1)
    [remedied] = remedy_counts(rows)
    assert (remedied["remedy"], remedied["passed"], remedied["tried"]) == ("use_cache=True", 1, 1)
    expected = pd.DataFrame([{"model_id": "tiny/01-ai--Yi-1.5-6B-Chat", "result": "PASS", "stage": None}])
    problems, _notes = check_expected(expected, rows, only_tested=True)
    assert len(problems) == 1 and "tiny/01-ai--Yi-1.5-6B-Chat" in problems[0]  # a remedy's PASS is not the model's


@pytest.mark.slow
def test_a_sweep_tries_the_remedies_of_a_fail_and_records_their_cost(tmp_path):
    """Two model twins through `sweep --remedies`: Yi-1.5-6B-Chat (use_cache: false) runs with use_cache=True at one
    compile; Mistral-7B-v0.1 (its own sliding window of 4096) runs with full static layers, in one compiled graph of
    static shapes: trn2-ready, so the ladder stops there (the symbolic window and the recompile limit are not tried).
    Both rows stay FAIL; their remedies are in the column beside it, each checked against the same reference."""
    from neuronhelpers.run.remedies import remedies_line
    from neuronhelpers.store.dataset import load_results

    proc = run_cli("sweep", "tiny/01-ai--Yi-1.5-6B-Chat", "tiny/mistralai--Mistral-7B-v0.1", "--remedies", "--out",
                   str(tmp_path / "out"), "--no-progress", timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = load_results(tmp_path / "out").set_index("model_id")
    yi, mistral = (json.loads(rows.at[m, "remedies"]) for m in ("tiny/01-ai--Yi-1.5-6B-Chat",
                                                                "tiny/mistralai--Mistral-7B-v0.1"))
    assert set(rows["result"]) == {"FAIL"}
    assert [(t["remedy"], t["result"], t["recompiles_per_token"]) for t in yi] == [("use_cache", "PASS", False)]
    assert [(t["remedy"], t["result"], t["trn2"]) for t in mistral] == [
        ("full_static_within_window", "PASS", "trn2-ready")]
    assert (mistral[0]["unique_graphs"], mistral[0]["symbolic_shapes"], mistral[0]["window"]) == (1, [], 4096)
    assert mistral[0]["check_sensitive"] is True and mistral[0]["verification"] == "exact"
    assert yi[0]["unique_graphs"] == 1 and yi[0]["check_sensitive"] is True
    assert "for sequences up to 4096 tokens [1 compiled graph" in remedies_line(
        rows.at["tiny/mistralai--Mistral-7B-v0.1", "remedies"])


# ---- a minimal reproduction per cause ----------------------------------------------------------------------------

# A script per library, task and way of showing (the text a cause contains): text generation's recompile limit (both of
# its guard forms), static cache, NotCompiled and an exception; an image-text-to-text model fed an image; a
# sentence-transformers encoder; a diffusers denoiser, with and without PAG's processor. How a script matches its cause
# is held for every form by test_a_repro_script_says_reproduced_only_for_its_rows_cause_signature, without a model.
REPRO_CAUSES = ["StaticSlidingWindowLayer", "tensor 'input_ids' size mismatch", "static cache writes other tokens",
                "use_cache: false", "index_copy_", "Tensors must have same number of dimensions", "Logger method",
                "mutation on a view chain", "lumina2"]


def _captured(config, **kwargs):
    import torch

    from neuronhelpers.analysis.repro_inputs import Captured

    return Captured(vocab.TRANSFORMERS, "AutoModelForCausalLM", config,
                    kwargs=kwargs or {"input_ids": torch.tensor([[5, 6, 7]])}, generate={"pad_token_id": 0})


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rms_norm_eps": 1e-6,
         "architectures": ["LlamaForCausalLM"], "transformers_version": "5.23.0"}


def test_a_repro_script_is_self_contained_and_says_how_it_shows_its_cause():
    from neuronhelpers.analysis.repro import (
        KIND_COMPILE,
        KIND_NOT_COMPILED,
        KIND_STATIC_CACHE,
        minimal_config,
        repro_kind,
        repro_script,
    )

    assert repro_kind(vocab.CAUSE_STATIC_CACHE) == KIND_STATIC_CACHE
    assert repro_kind(USE_CACHE) == KIND_NOT_COMPILED and repro_kind(SLIDING) == KIND_COMPILE
    assert minimal_config(LLAMA) == {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4}
    row = {"model_id": "tiny/llama", "task": vocab.TEXT_GENERATION, "library": vocab.TRANSFORMERS,
           "torch": "2.13.0+cpu", "library_version": "5.23.0"}
    for cause in (SLIDING, USE_CACHE, vocab.CAUSE_STATIC_CACHE):
        script = repro_script({**row, "cause": cause}, _captured(LLAMA))
        compile(script, "repro.py", "exec")
        assert "neuronhelpers" not in script.split('"""', 2)[2] and script.count("\n") <= 100
        assert max(len(line) for line in script.splitlines()) <= 120
        assert "ROW_VERSIONS = {'torch': '2.13.0', 'transformers': '5.23.0'}" in script


def _script_functions(script: str) -> dict:
    """The names a script defines before it builds anything (its version note, signature, shows_the_cause)."""
    namespace = {}
    exec(compile(script.split("\nCONFIG = ", 1)[0], "repro.py", "exec"), namespace)  # noqa: S102 - our own script
    return namespace


def test_a_repro_script_says_reproduced_only_for_its_rows_cause_signature(capsys):
    """The script's signature is the catalog's (verdict/causes.py's rules written into it): an exception of the
    row's type and words, with other numbers and paths, shows the cause; another type or other words do not, nor a
    recompile limit on another guard. A row made with other versions than those installed says so."""
    from neuronhelpers.analysis.repro import repro_script
    from neuronhelpers.verdict.causes import failure_cause

    trace = 'File "/x/site-packages/transformers/models/git/modeling_git.py", line 9, in forward\n'
    cause = failure_cause("RuntimeError", "RuntimeError: Tensors must have same number of dimensions: got 3 and 4",
                          trace)
    row = {"model_id": "tiny/git", "task": vocab.TEXT_GENERATION, "library": vocab.TRANSFORMERS, "cause": cause,
           "torch": "1.0.0", "library_version": "4.0.0"}
    script = _script_functions(repro_script(row, _captured(LLAMA)))
    assert "note: the row ran with torch 1.0.0 (here " in capsys.readouterr().out
    shows = script["shows_the_cause"]
    assert shows(RuntimeError("Tensors must have same number of dimensions: got 2 and 5 at /tmp/a/b.py"))
    assert not shows(ValueError("Tensors must have same number of dimensions: got 2 and 5"))
    assert not shows(RuntimeError("Unsupported: Data-dependent branching"))
    long = "Could not guard on data-dependent expression ((u0//2)) > 1 (unhinted: ((u0//2)) > 1).  " * 3
    long_cause = failure_cause("UserError", f"UserError: {long}", trace)
    assert _script_functions(repro_script({**row, "cause": long_cause}, _captured(LLAMA)))["shows_the_cause"](
        type("UserError", (Exception,), {})(long.replace("u0", "u7")))
    recompile = _script_functions(repro_script({**row, "cause": SLIDING}, _captured(LLAMA)))
    limit = type("FailOnRecompileLimitHit", (Exception,), {})("recompile_limit reached with fullgraph=True")
    recompile["reasons"].append("- 0/7: self.layers[0].cumulative_length_int == 12")
    assert recompile["shows_the_cause"](limit)
    recompile["reasons"][:] = ["- 0/7: tensor 'input_ids' size mismatch at index 1. expected 9, actual 10"]
    assert not recompile["shows_the_cause"](limit)


def test_a_scripts_inputs_are_written_back_exactly_or_as_noise_of_their_shape():
    """Integers (token ids with their padding and image placeholders, masks, grids) and small floats come back exactly;
    a large floating-point tensor (pixels, audio features) as seeded noise of its shape and dtype; an object a script
    cannot write is refused in one line."""
    import torch

    from neuronhelpers.analysis.repro_inputs import Unscriptable, as_code

    inputs = {"input_ids": torch.tensor([[1] + [482] * 40 + [7, 8] + [0] * 20]),
              "mask": torch.ones(2, 9, dtype=torch.bool), "timestep": torch.tensor([500.0]),
              "pixel_values": torch.rand(1, 3, 32, 32), "sizes": [(1, 8, 8)], "flag": None}
    code = as_code(inputs)
    back = eval(code, {"torch": torch})  # noqa: S307 - the code as_code wrote
    for name in ("input_ids", "mask", "timestep"):
        assert torch.equal(back[name], inputs[name]), name
    assert back["pixel_values"].shape == inputs["pixel_values"].shape and back["sizes"] == [(1, 8, 8)]
    assert "[482] * 40" in code and len(code) < 400
    with pytest.raises(Unscriptable, match="an input of type object"):
        as_code({"cache": object()})


def test_every_fail_with_a_cause_gets_a_script_or_a_one_line_reason():
    """Over the committed catalog, every pair: a FAIL row with a cause either gets a script (its library's run and its
    cause's kind) or says in one line why not; a real checkpoint points to its twin with the same cause."""
    from neuronhelpers.analysis.repro import why_no_script
    from neuronhelpers.store.dataset import load_results

    rows = load_results("catalog")
    failed = rows[(rows["result"] == vocab.FAIL) & rows["cause"].notna()]
    reasons = {row["model_id"]: why_no_script(row, rows) for row in failed.to_dict("records")}
    with_script = [model for model, reason in reasons.items() if reason is None]
    assert all("\n" not in reason for reason in reasons.values() if reason)
    libraries = set(failed[failed["model_id"].isin(with_script)]["library"])
    assert libraries == {vocab.TRANSFORMERS, vocab.SENTENCE_TRANSFORMERS, vocab.DIFFUSERS}
    assert "tiny/google--gemma-3-270m" in reasons["google/gemma-3-270m"]
    assert len(with_script) >= len(reasons) - 5, {m: r for m, r in reasons.items() if r}


def test_a_cause_carries_the_upstream_thread_that_knows_it_and_says_when_none_was_found():
    """`causes` and the repro script name the public issue or pull request of a cause, with its state and the day it was
    read; a cause without one gets no invented link."""
    from neuronhelpers.analysis.causes import rank_causes, ranked_lines
    from neuronhelpers.analysis.repro import repro_script
    from neuronhelpers.verdict.upstream import READ_ON, upstream_for

    assert upstream_for(SLIDING).url.endswith("huggingface/transformers/issues/44609")
    assert upstream_for(USE_CACHE) is None and upstream_for(None) is None
    failed = [result_row("tiny/gemma2", "FAIL", twin_of="gemma2", model_type="gemma2", cause=SLIDING),
              result_row("tiny/mpt", "FAIL", twin_of="mpt", model_type="mpt", cause=USE_CACHE)]
    ranked = rank_causes(pd.DataFrame(failed, columns=schema.COLUMN_NAMES))
    text = "\n".join(ranked_lines(ranked))
    assert text.count("upstream: ") == 1 and f"read {READ_ON}" in text and "issues/44609" in text
    script = repro_script({"model_id": "tiny/gemma2", "cause": SLIDING, "library": vocab.TRANSFORMERS,
                           "torch": "2.14.1", "library_version": "5.23.0", "task": vocab.TEXT_GENERATION},
                          _captured({"model_type": "gemma2", "sliding_window": 4}))
    assert "upstream: https://github.com/huggingface/transformers/issues/44609" in script.split('"""')[1]


@pytest.mark.slow
@pytest.mark.parametrize("cause", REPRO_CAUSES)
def test_each_repro_script_fails_on_cpu_as_its_cause_says(cause, tmp_path):
    """From the committed catalog's twin that shows the cause: at most 100 lines, no neuronhelpers import, and run on
    CPU it prints REPRODUCED with the cause's own words and exits 1, in about a minute. The sliding window's second
    script (``repro --remedy full_static_within_window``) runs the same failure with the remedy: WORKAROUND and exit 3
    where the twin's window holds the test's sequence (not applicable and exit 2 where it does not), never 0."""
    import subprocess
    import sys
    import time

    from neuronhelpers.analysis.repro import remedy_path, write_repro
    from neuronhelpers.store.dataset import load_results, select_pair

    rows, _ = select_pair(load_results("catalog"), "current")
    remedy = "full_static_within_window" if cause == "StaticSlidingWindowLayer" else None
    path, row = write_repro(rows, cause, tmp_path / "repro.py", remedy=remedy)
    text = path.read_text()
    assert text.count("\n") <= 100 and "import neuronhelpers" not in text and "from neuronhelpers" not in text
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, (proc.stdout[-500:], proc.stderr[-1500:])
    shown = proc.stdout.strip().splitlines()[-1]
    assert shown.startswith("REPRODUCED: ") and time.monotonic() - started < 150  # about a minute when quiet
    words = {"StaticSlidingWindowLayer": "RecompileLimit", "static cache writes": "static cache writes other tokens",
             "use_cache: false": "use_cache: False", "tensor 'input_ids'": "RecompileLimit"}
    expected = next((w for key, w in words.items() if key in cause), None)
    if expected is None:  # an exception: the cause's own type and words
        expected = str(row["cause"]).split(" @ ")[0][:60]
    assert expected.lower() in shown.lower(), (row["cause"], shown)
    if remedy:
        _the_remedy_script_runs_as_a_workaround(remedy_path(path), row, tmp_path)


def _the_remedy_script_runs_as_a_workaround(path, row, tmp_path):
    import subprocess
    import sys

    from neuronhelpers.run.remedies import attention_window
    from neuronhelpers.twins.build import build_twin

    text = path.read_text()
    assert text.startswith('"""Workaround, not a fix: ') and "from neuronhelpers" not in text
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    window = attention_window(str(build_twin(row["model_id"])))
    shown = proc.stdout.strip().splitlines()[-1]
    if window >= 70:  # the recipe's 38 prompt tokens and 32 new ones
        assert proc.returncode == 3 and shown.startswith("WORKAROUND: ") and f"window ({window})" in shown, (
            shown, proc.stderr[-1500:])
    else:
        assert proc.returncode == 2 and shown.startswith("not applicable: "), (shown, proc.stderr[-1500:])


@pytest.mark.slow
def test_a_repro_script_that_meets_another_failure_says_so_and_exits_2(tmp_path):
    """The same script with another row's cause: the failure it meets is not that one, so it prints "a different
    failure" and exits 2, never REPRODUCED."""
    import subprocess
    import sys

    from neuronhelpers.analysis.repro import write_repro
    from neuronhelpers.store.dataset import load_results, select_pair

    rows, _ = select_pair(load_results("catalog"), "current")
    path, row = write_repro(rows, "index_copy_", tmp_path / "repro.py")
    text = path.read_text()
    start, end = text.index("CAUSE = "), text.index("ROW_VERSIONS = ")
    path.write_text(text[:start] + "CAUSE = 'KeyError: heavily_compressed_attention @ transformers/cache_utils.py'\n"
                    + text[end:])
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    shown = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 2 and shown.startswith("a different failure: IndexError: index_copy_()"), shown
