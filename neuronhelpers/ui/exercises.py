"""The notebooks' self-check: ``check_answer(lesson, number, answer)`` computes the exercise's right answer itself
(from the committed catalog, the planner, the verdict functions) and says "not answered yet", "right" or "not yet"
with a hint, never the answer. Each exercise is one entry of :data:`EXERCISES`: its question in one line, the
answer's keys, the function that computes them, and a hint per key.

Answers from the catalog use this environment's pair where the catalog has rows of it, else the newest pair (a
trn2 reading the inductor catalog): the lessons do the same. Taught in every notebook's Exercises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from neuronhelpers.core.vocab import FAIL, IMAGE_TEXT_TO_TEXT, PASS, TRANSFORMERS, UNTESTED
from neuronhelpers.ui.workshop import NOTEBOOKS_DIR

CATALOG_DIR = NOTEBOOKS_DIR.parent / "catalog"

NOT_ANSWERED, RIGHT, NOT_YET = "not answered yet", "right", "not yet"


@dataclass(frozen=True)
class Exercise:
    question: str
    expected: Callable[..., dict]  # computes the right answer: key -> value
    hints: dict = field(default_factory=dict)  # key -> what to look at (never the value)
    # What the notebook passes to check_answer for this exercise (``folder``: the attendee's terminal folder, so the
    # answer is that device's run; ``model_id``: the lesson's model), each given to ``expected`` when not None.
    takes: tuple[str, ...] = ()
    # Says what to do first where the answer cannot be worked out yet (e.g. the file to run was not edited), else None.
    not_ready: Callable[..., str | None] | None = None


@lru_cache(maxsize=1)
def _catalog():
    from neuronhelpers.core.errors import UserError
    from neuronhelpers.store.dataset import load_results

    if not CATALOG_DIR.is_dir():
        raise UserError(f"cannot check this answer here: no catalog folder at {CATALOG_DIR}")
    return load_results(str(CATALOG_DIR))


def _lesson_rows():
    """The catalog's rows in the pair the lessons use, each model's newest row once."""
    from neuronhelpers.store.dataset import current_or_newest, newest_per_model

    rows, _pair, _line = current_or_newest(_catalog())
    return newest_per_model(rows)


def _row(model_id: str):
    rows = _lesson_rows()
    found = rows[rows.model_id == model_id]
    if not len(found):
        from neuronhelpers.core.errors import UserError

        raise UserError(f"cannot check this answer here: the catalog has no row of {model_id} in this pair")
    return found.iloc[0]


# ---- 01 ------------------------------------------------------------------------------------------------------------
def _vision_counts() -> dict:
    """One twin per architecture (the rule 05's tables use): a vision-language model's own twin answers for that
    model, not for another architecture."""
    from neuronhelpers.analysis.agreement import architecture_twin_rows

    rows = architecture_twin_rows(_lesson_rows())
    vision = rows[rows.task == IMAGE_TEXT_TO_TEXT]
    counts = vision.result.value_counts()
    return {r: int(counts.get(r, 0)) for r in (PASS, FAIL, UNTESTED)}


CLASSIC_EXERCISE_MODEL = "tiny/qwen2_vl"


def _one_model_across_pairs() -> dict:
    from neuronhelpers.store.dataset import newest_per_model

    catalog = _catalog()
    rows = newest_per_model(catalog[catalog.model_id == CLASSIC_EXERCISE_MODEL],
                            ["model_id", "compiler_version", "library_version"])
    results = {f"{r.compiler_version},{r.library_version}": r.result for r in rows.itertuples()}
    untested = rows[rows.result == UNTESTED]
    return {"results": results, "untested_stage": untested.stage.iloc[0] if len(untested) else None}


# ---- 02 ------------------------------------------------------------------------------------------------------------
TERMINAL_MODEL = "tiny/qwen3"


# 02's exercise 1: the attendee edits one parameter of the row's run.py (its prompt) and runs the file in a terminal;
# no cell prints the tokens of that prompt. The check runs the attendee's edited file once more, on this machine's
# device (a trn2's bfloat16 tokens are its own), and compares the last 8 tokens.
TERMINAL_PROMPT = "The capital of France is"
TERMINAL_TOKENS = slice(-8, None)
PROMPT_LINE = "    'prompt': "


def terminal_prompt(folder) -> str | None:
    """The prompt the run.py in ``folder`` asks (its PARAMS line), or None without a readable run.py."""
    import ast
    from pathlib import Path

    path = Path(folder) / "run.py"
    if not path.is_file():
        return None
    line = next((ln for ln in path.read_text().splitlines() if ln.startswith(PROMPT_LINE)), None)
    return ast.literal_eval(line[len(PROMPT_LINE):].rstrip(",")) if line else None


def with_prompt(run_py: str, prompt: str) -> str:
    """A run.py's text with its PARAMS prompt set to ``prompt``: the one-line edit 02's exercise 1 asks for."""
    import re

    return re.sub(rf"^{re.escape(PROMPT_LINE)}.*,$", f"{PROMPT_LINE}{prompt!r},", run_py, count=1, flags=re.M)


def _terminal_not_ready(folder=None) -> str | None:
    if folder is None:
        return "pass the terminal's folder: check_answer(\"02\", 1, exercise_1, folder=terminal)"
    if terminal_prompt(folder) != TERMINAL_PROMPT:
        return (f"the run.py in {folder} does not ask {TERMINAL_PROMPT!r} yet: set its PARAMS 'prompt' to it, save, "
                "and run python3 run.py again")
    return None


def _terminal_tokens(folder=None) -> dict:
    """The last 8 tokens the attendee's edited run.py writes: the file run once more here, as the terminal ran it."""
    import os
    import subprocess
    import sys

    from neuronhelpers.core.network import hub_reachable
    from neuronhelpers.process.tree import last_json_line

    env = {**os.environ, **({} if hub_reachable() else {"HF_HUB_OFFLINE": "1"})}
    done = subprocess.run([sys.executable, "run.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=900)
    payload = last_json_line(done.stdout) or {}
    return {"tokens": [int(t) for t in payload.get("tokens", [])][TERMINAL_TOKENS]}


def _trn2_run_py(model_id: str = TERMINAL_MODEL) -> dict:
    """The run.py a trn2 would run against this machine's: the PARAMS keys whose values differ (rendered for both
    backends, nothing runs), and the near-tie tolerance of the trn2's dtype."""
    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.core.vocab import NEAR_TIE_MARGIN
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.recipes.render import recipe_params

    ref = resolve_model(model_id)
    here, trn2 = recipe_params(ref, get_backend("cpu")), recipe_params(ref, get_backend("neuron"))
    return {"changed": sorted(k for k in {*here, *trn2} if here.get(k) != trn2.get(k)),
            "tolerance": NEAR_TIE_MARGIN[trn2["dtype"]]}


# ---- 04 ------------------------------------------------------------------------------------------------------------
def _qwen3_30b():
    """The Qwen3-30B-A3B config notebook 04 builds from the published model card (30.5 B parameters)."""
    import transformers

    return transformers.Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                       moe_intermediate_size=768, num_hidden_layers=48, num_attention_heads=32,
                                       num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
                                       tie_word_embeddings=False)


def _real_plan(cores=None):
    from neuronhelpers.core.backends import GiB
    from neuronhelpers.plan.cores import plan_cores

    return plan_cores(_qwen3_30b(), int(30.5e9), dtype="bfloat16", core_memory=24 * GiB, cores=cores)


def _mixtral_8x7b():
    """The Mixtral-8x7B config notebook 04 builds from the published model card (46.7 B parameters)."""
    import transformers

    return transformers.MixtralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=8, num_local_experts=8)


# 04's exercise 1: a twin and a core count whose layout no cell prints (the lesson prints tiny/llama's and
# tiny/qwen3_moe's over 2 cores), and a real model whose per-rank layout no cell prints.
RANKS_TWIN, RANKS_TWIN_CORES = "tiny/olmoe", 2


def _what_each_rank_holds() -> dict:
    import transformers

    from neuronhelpers.core.backends import GiB, get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.plan.cores import per_rank_layout, plan_cores, plan_model

    ref = resolve_model(RANKS_TWIN)
    twin = plan_model(ref, get_backend("cpu"), cores=RANKS_TWIN_CORES)
    twin_layout = per_rank_layout(transformers.AutoConfig.from_pretrained(ref.path), twin.cores, twin.parallelism)
    real = plan_cores(_mixtral_8x7b(), int(46.7e9), dtype="bfloat16", core_memory=24 * GiB)
    real_layout = per_rank_layout(_mixtral_8x7b(), real.cores, real.parallelism)
    keys = {"heads_per_rank": "attention heads per rank", "kv_heads_per_rank": "key/value heads per rank",
            "experts_per_rank": "experts per rank"}
    return {**{f"twin_{k}": twin_layout[v] for k, v in keys.items()},
            **{f"real_{k}": real_layout[v] for k, v in keys.items()}}


def _counts_that_hold_it() -> dict:
    from neuronhelpers.core.errors import UserError

    fewest = _real_plan().cores
    splits = []
    for n in (1, 2, 4, 8, 16):
        try:
            _real_plan(n)
            splits.append(n)
        except UserError:
            pass
    return {"twin_refused": True, "real_counts": [n for n in splits if n >= fewest]}


# ---- 03 ------------------------------------------------------------------------------------------------------------
def _exact_near_tie_or_mismatch() -> dict:
    from neuronhelpers.verdict.verify import compare_tokens

    reference = {"tokens": [5, 8, 2], "top_ids": [[5, 1], [8, 3], [2, 9]],
                 "top_logits": [[3.0, 1.0], [4.20, 4.05], [5.0, 4.0]]}
    cases = {"a": ([5, 8, 2], "bfloat16"), "b": ([5, 3, 7], "bfloat16"), "c": ([5, 3, 7], "float16")}
    verdicts = {k: compare_tokens(device, reference, dtype) for k, (device, dtype) in cases.items()}
    return {**{k: v.verification or v.stage for k, v in verdicts.items()},
            "margin": round(verdicts["b"].divergence_margin, 3)}


# 03's exercise 2, read in class: a live FAIL whose stage, cause and evidence no cell of 03 prints (03 breaks
# tiny/llama, runs tiny/rwkv and reads the gemma-3 rows, all of which ran eagerly on the device; this one did not).
LIVE_FAIL_MODEL = "tiny/cpmant"
LIVE_FAIL_KEYS = ("result", "stage", "cause", "evidence")


@lru_cache(maxsize=4)
def _live_fail_run(model_id: str) -> tuple:
    """The model run here, once per process (a twin: a few seconds): where the catalog holds no row of this
    environment's pair (a trn2), the check's answer comes from a real run on this device."""
    from neuronhelpers.run.harness import run_model

    row = run_model(model_id)
    return tuple(row[k] for k in LIVE_FAIL_KEYS)


def _read_a_live_fail() -> dict:
    """The FAIL's result, stage, cause and evidence: the catalog's row of this environment's pair, else (no such row:
    a trn2 reading the inductor catalog) a run of the model here."""
    from neuronhelpers.store.dataset import newest_per_model, select_pair

    here, _ = select_pair(_catalog(), "current")
    found = newest_per_model(here[here.model_id == LIVE_FAIL_MODEL])
    if len(found):
        return {k: found.iloc[0][k] for k in LIVE_FAIL_KEYS}
    return dict(zip(LIVE_FAIL_KEYS, _live_fail_run(LIVE_FAIL_MODEL), strict=True))


# ---- 06 ------------------------------------------------------------------------------------------------------------
def _out_of_date_expected() -> dict:
    import pandas as pd

    from neuronhelpers.store.diff import check_expected

    stale = pd.DataFrame([{"model_id": "tiny/qwen2", "result": FAIL, "stage": "compile"}])
    problems, _ = check_expected(stale, pd.DataFrame([_row("tiny/qwen2").to_dict()]))
    return {"problems": problems}


def _compiler_step() -> dict:
    """The compiler step's verdicts reached, split by their verdict now (no cell prints it), and its regressions."""
    from neuronhelpers.store.diff import release_changes, release_steps

    catalog = _catalog()
    step = next(s for s in release_steps(catalog, TRANSFORMERS) if s.kind == "compiler")
    changes = release_changes(catalog, step)
    reached = changes[changes.change.astype(str) == "verdict reached"].new_result.value_counts()
    return {"reached_pass": int(reached.get(PASS, 0)), "reached_fail": int(reached.get(FAIL, 0)),
            "regressed": int((changes.change.astype(str) == "regressed").sum())}


# ---- 05 ------------------------------------------------------------------------------------------------------------
# 05's exercise 1: the top cause's architectures in the newest pair against the oldest (no cell prints the older
# pair's ranking, nor what the newly blocked architectures were there).
OLDEST_PAIR = "2.13.0,5.23.0"


def _biggest_blocker() -> dict:
    from neuronhelpers.analysis.agreement import architecture_twin_rows
    from neuronhelpers.analysis.causes import rank_causes
    from neuronhelpers.store.dataset import newest_per_model, select_pair

    twins = architecture_twin_rows(_catalog())
    newest, _ = select_pair(twins, "newest")
    oldest, _ = select_pair(twins, OLDEST_PAIR)
    top, then = rank_causes(newest).iloc[0], rank_causes(oldest)
    before = set(then[then.cause == top.cause].architectures.iloc[0]) if (then.cause == top.cause).any() else set()
    new = sorted(set(top.architectures) - before)
    old_rows = newest_per_model(oldest)
    return {"cause": top.cause, "newly_blocked": new,
            "untested_then": int(old_rows[old_rows.model_type.isin(new)].result.eq(UNTESTED).sum())}


def _flag_misleads() -> dict:
    from neuronhelpers.analysis.declared import declared_vs_measured
    from neuronhelpers.store.dataset import current_or_newest, newest_per_model

    rows, _pair, _line = current_or_newest(_catalog())
    declared = declared_vs_measured(rows)
    wrong = declared[declared.disagree & declared.declared.eq(True)]
    causes = newest_per_model(rows)[["model_type", "task", "cause"]]
    by_cause = wrong.merge(causes, on=["model_type", "task"], how="left")
    counts = by_cause.cause.value_counts()
    return {"declared_true_fail": len(wrong), "top_cause": counts.index[0], "top_count": int(counts.iloc[0])}


def your_model(model_id: str) -> dict:
    """A model of the attendee's choosing: its architecture (offline: the config corpus, the shelf, the Selected list
    or the rankings snapshot; else the Hub's config) and the catalog's answer for it (analysis/answers.py): which kind
    of row answers (a Trainium row, its own twin, its architecture's twin) and that row's result."""
    from neuronhelpers.analysis.answers import Answers
    from neuronhelpers.models.known import architecture_from_hub, known_architectures

    task, model_type = known_architectures().get(model_id, (None, None))
    if not model_type:
        task, model_type = architecture_from_hub(model_id)
    found = Answers(_catalog()).answer(model_id, model_type, task)  # the one rule, over every pair (as `plan`)
    return {"architecture": model_type, "answer": found.kind if found else None,
            "result": found.result if found else None}


EXERCISES = {
    ("01", 1): Exercise("vision-language twins: PASS, FAIL and UNTESTED counts in this pair", _vision_counts,
                        {PASS: "architecture twins (architecture_twin_rows: one per architecture, not the model twins) "
                               "of task image-text-to-text, each model's newest row once",
                         FAIL: "count the failed rows among the same rows",
                         UNTESTED: "rows without a verdict are twins that could not be built here: count them too"}),
    ("01", 2): Exercise(f"the classic query on {CLASSIC_EXERCISE_MODEL}: its result per pair, and the stage of its "
                        "UNTESTED row", _one_model_across_pairs,
                        {"results": "one entry per pair, keyed like '2.13.0,5.23.0' (the compiler version first, a "
                                    "comma, no space), its newest row's result",
                         "untested_stage": "the UNTESTED row's `stage` column says why there is no verdict"}),
    ("02", 1): Exercise(f"the last 8 token ids `python3 run.py` printed in a terminal for the prompt "
                        f"{TERMINAL_PROMPT!r}", _terminal_tokens,
                        {"tokens": "the last line `python3 run.py` prints is JSON: its \"tokens\" list, the last 8 "
                                   "ids as integers"}, takes=("folder",), not_ready=_terminal_not_ready),
    ("02", 2): Exercise("the run.py a trn2 would run against the CPU's: the PARAMS keys that differ, and the "
                        "near-tie tolerance of the trn2's dtype", _trn2_run_py,
                        {"changed": "render both (get_backend(\"cpu\") and get_backend(\"neuron\")) and compare the "
                                    "PARAMS blocks line by line: the keys whose values differ, as a sorted list",
                         "tolerance": "vocab.NEAR_TIE_MARGIN, looked up with the trn2's dtype"}, takes=("model_id",)),
    ("04", 1): Exercise(f"heads, key/value heads and experts per rank: {RANKS_TWIN} over {RANKS_TWIN_CORES} cores, "
                        "Mixtral-8x7B over the planner's cores", _what_each_rank_holds,
                        {"twin_heads_per_rank": f"{RANKS_TWIN}'s config (AutoConfig.from_pretrained(ref.path)) and the "
                                                "plan's cores; per_rank_layout says it too",
                         "twin_kv_heads_per_rank": "the same config's key/value heads and the same plan",
                         "twin_experts_per_rank": "the same config's experts (OLMoE: num_experts) and the plan",
                         "real_heads_per_rank": "the config `mixtral` of the planning cell and plans[\"Mixtral-8x7B\"]",
                         "real_kv_heads_per_rank": "the same config and plan",
                         "real_experts_per_rank": "the same config (Mixtral calls them num_local_experts) and plan"}),
    ("04", 2): Exercise("the twin over 4 cores, and the core counts that both split Qwen3-30B-A3B and hold its "
                        "weights", _counts_that_hold_it,
                        {"twin_refused": "did plan_model raise UserError for 4 cores?",
                         "real_counts": "a count must split the heads and experts (no UserError) and be at least "
                                        "the planner's own choice (fewer cores cannot hold 61 GB)"}),
    ("03", 1): Exercise("exact, near_tie or mismatch for (a), (b), (c), and the margin at the first divergence",
                        _exact_near_tie_or_mismatch,
                        {"a": "compare_tokens's verification (a PASS) or stage (a FAIL) for (a)'s tokens and dtype",
                         "b": "compare the margin with bfloat16's NEAR_TIE_MARGIN",
                         "c": "compare the margin with float16's NEAR_TIE_MARGIN",
                         "margin": "the reference's top-1 minus top-2 logit where the tokens first differ, 3 places"}),
    ("03", 2): Exercise(f"{LIVE_FAIL_MODEL}'s FAIL read from its own row: result, stage, cause and evidence",
                        _read_a_live_fail,
                        {"result": "the row's `result`", "stage": "the row's `stage`: where it stopped",
                         "cause": "the row's `cause` column, copied whole",
                         "evidence": "the row's `evidence` (vocab.EVIDENCE says what each value means; `device_eager` "
                                     "is the eager run it stands on)"}),
    ("06", 1): Exercise("what the gate says of a stale expected file for tiny/qwen2", _out_of_date_expected,
                        {"problems": "check_expected's first return value, a list of lines"}),
    ("06", 2): Exercise("the compiler step: its verdicts reached that PASS and that FAIL, and its regressions",
                        _compiler_step,
                        {"reached_pass": "release_changes for the step whose kind is 'compiler': the rows whose "
                                         "change is 'verdict reached', by their new_result",
                         "reached_fail": "the same rows, by their new_result",
                         "regressed": "the rows of the same changes whose change is 'regressed' (0 is an answer)"}),
    ("05", 1): Exercise(f"the top cause of the newest pair, the architectures it blocks there and not in "
                        f"{OLDEST_PAIR}, and how many of those were UNTESTED then", _biggest_blocker,
                        {"cause": "causes.iloc[0].cause",
                         "newly_blocked": f"rank_causes over select_pair(twins_only, '{OLDEST_PAIR}'): the same "
                                          "cause's `architectures` there; the newest's that are not, as a sorted list",
                         "untested_then": "those architectures' newest rows in the older pair: how many are UNTESTED "
                                          "(the others had no twin there at all)"}),
    ("05", 2): Exercise("architectures that declare fullgraph and FAIL: how many, their top cause and its count",
                        _flag_misleads,
                        {"declared_true_fail": "rows of `declared` with declared True and disagree True",
                         "top_cause": "join them to current_rows' newest rows on model_type and task, count the causes",
                         "top_count": "how many of them have that cause"}),
}


def check_answer(lesson: str, number: int, answer, *, model_id: str | None = None, folder=None) -> str:
    """Check an exercise's answer: "not answered yet", "right", or "not yet: <hint>" (never the right answer), a line
    a notebook shows as the cell's output. The whole answer is judged at once: never which part is wrong (one wrong
    part at a time would let a small answer space be found by trial), nor how many (most parts have fewer than 20
    possible values: a verdict word, a dtype, a small count, True or False), with every part's hint.
    ``model_id``: the model of a bring-your-own-model exercise (05, 3) or the lesson's model (02, 2); ``folder``: the
    terminal's folder (02, 1), whose edited run.py is run once more on this device, so the answer is that device's (a
    trn2's bfloat16 tokens are not the CPU's float32 ones)."""
    if answer is None:
        return _say(NOT_ANSWERED + ": write your answer into the exercise's variable, then run this cell again")
    if (lesson, number) == ("05", 3):
        exercise = Exercise("your own model: its architecture, and which row answers for it with what result",
                            lambda: your_model(model_id),
                            {"architecture": "known_architectures() offline, the Hub's config online (None when "
                                             "neither knows the model)",
                             "answer": "Answers(current_rows).answer(MY_MODEL, ...).kind: a Trainium row, else its "
                                       "own twin (tiny/<org>--<name>), else its architecture's twin",
                             "result": "that answer's result (None when no row answers)"})
    else:
        exercise = EXERCISES.get((str(lesson), int(number)))
        if exercise is None:
            from neuronhelpers.core.errors import UserError

            raise UserError(f"no exercise {number} in lesson {lesson}: the exercises are "
                            f"{', '.join(f'{ls} {n}' for ls, n in EXERCISES)} and 05 3")
    given = {"model_id": model_id, "folder": folder}
    if exercise.not_ready and (first := exercise.not_ready(**{k: given[k] for k in exercise.takes})):
        return _say(f"{NOT_YET}: {first}")
    expected = exercise.expected(**{k: given[k] for k in exercise.takes if given[k] is not None})
    if not isinstance(answer, dict):
        if len(expected) != 1:
            return _say(f"{NOT_YET}: give a dict with the keys {', '.join(expected)}")
        answer = {next(iter(expected)): answer}
    def hint(key):
        return exercise.hints.get(key, exercise.question)

    missing = [key for key in expected if key not in answer]
    if missing:  # the answer's shape, not its content: naming what is missing gives nothing away
        return _say(f"{NOT_YET}: your answer has no " + "; no ".join(f"'{key}' ({hint(key)})" for key in missing))
    if all(_same(answer[key], value) for key, value in expected.items()):
        return _say(f"{RIGHT}: {exercise.question}")
    if len(expected) == 1:
        return _say(f"{NOT_YET}: not right. Hint: {hint(next(iter(expected)))}")
    hints = "; ".join(f"'{key}': {hint(key)}" for key in expected)
    return _say(f"{NOT_YET}. Hints: {hints}")


def _same(given, expected) -> bool:
    if isinstance(expected, float) or isinstance(given, float):
        try:
            return math.isclose(float(given), float(expected), rel_tol=1e-3, abs_tol=1e-3)
        except (TypeError, ValueError):
            return False
    if isinstance(expected, dict):
        return isinstance(given, dict) and given.keys() == expected.keys() and all(
            _same(given[k], v) for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return isinstance(given, (list, tuple)) and len(given) == len(expected) and all(
            _same(g, e) for g, e in zip(given, expected, strict=True))
    if hasattr(given, "item"):  # a numpy scalar
        given = given.item()
    return given == expected


class CheckLine(str):
    """The self-check's line: shown once as a notebook cell's output (not printed and then echoed as a value)."""

    def _ipython_display_(self):
        print(self)


def _say(line: str) -> str:
    return CheckLine(line)
