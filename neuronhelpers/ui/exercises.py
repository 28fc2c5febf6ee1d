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
    expected: Callable[[], dict]  # computes the right answer: key -> value
    hints: dict = field(default_factory=dict)  # key -> what to look at (never the value)


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
    rows = _lesson_rows()
    vision = rows[rows.twin_of.notna() & (rows.task == IMAGE_TEXT_TO_TEXT)]
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


def _terminal_tokens() -> dict:
    return {"tokens": [int(t) for t in _row(TERMINAL_MODEL).tokens[:8]]}


def _read_a_fail() -> dict:
    row = _row("tiny/gemma2")
    return {"result": row.result, "stage": row.stage, "cause": row.cause}


# ---- 03 ------------------------------------------------------------------------------------------------------------
def _qwen3_30b():
    """The Qwen3-30B-A3B config notebook 03 builds from the published model card (30.5 B parameters)."""
    import transformers

    return transformers.Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                                       moe_intermediate_size=768, num_hidden_layers=48, num_attention_heads=32,
                                       num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
                                       tie_word_embeddings=False)


def _real_plan(cores=None):
    from neuronhelpers.core.backends import GiB
    from neuronhelpers.plan.cores import plan_cores

    return plan_cores(_qwen3_30b(), int(30.5e9), dtype="bfloat16", core_memory=24 * GiB, cores=cores)


def _what_each_rank_holds() -> dict:
    import transformers

    from neuronhelpers.core.backends import get_backend
    from neuronhelpers.models.resolve import resolve_model
    from neuronhelpers.plan.cores import per_rank_layout, plan_model

    ref = resolve_model("tiny/mixtral")
    twin = plan_model(ref, get_backend("cpu"), cores=2)
    twin_layout = per_rank_layout(transformers.AutoConfig.from_pretrained(ref.path), twin.cores, twin.parallelism)
    real = _real_plan()
    real_layout = per_rank_layout(_qwen3_30b(), real.cores, real.parallelism)
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


# ---- 04 ------------------------------------------------------------------------------------------------------------
def _exact_near_tie_or_mismatch() -> dict:
    from neuronhelpers.verdict.verify import compare_tokens

    reference = {"tokens": [5, 8, 2], "top_ids": [[5, 1], [8, 3], [2, 9]],
                 "top_logits": [[3.0, 1.0], [4.20, 4.05], [5.0, 4.0]]}
    cases = {"a": ([5, 8, 2], "bfloat16"), "b": ([5, 3, 7], "bfloat16"), "c": ([5, 3, 7], "float16")}
    verdicts = {k: compare_tokens(device, reference, dtype) for k, (device, dtype) in cases.items()}
    return {**{k: v.verification or v.stage for k, v in verdicts.items()},
            "margin": round(verdicts["b"].divergence_margin, 3)}


def _what_a_fail_stands_on() -> dict:
    return {"real_evidence": _row("google/gemma-3-270m").evidence, "twin_evidence": _row("tiny/gemma3_text").evidence}


# ---- 05 ------------------------------------------------------------------------------------------------------------
def _out_of_date_expected() -> dict:
    import pandas as pd

    from neuronhelpers.store.diff import check_expected

    stale = pd.DataFrame([{"model_id": "tiny/qwen2", "result": FAIL, "stage": "compile"}])
    problems, _ = check_expected(stale, pd.DataFrame([_row("tiny/qwen2").to_dict()]))
    return {"problems": problems}


def _compiler_step() -> dict:
    from neuronhelpers.store.diff import VERDICT_CHANGES, change_counts, release_changes, release_steps

    catalog = _catalog()
    step = next(s for s in release_steps(catalog, TRANSFORMERS) if s.kind == "compiler")
    counts = change_counts(release_changes(catalog, step))
    return {"verdicts": {k: int(n) for k, n in counts.items() if k in VERDICT_CHANGES}}


# ---- 06 ------------------------------------------------------------------------------------------------------------
def _biggest_blocker() -> dict:
    from neuronhelpers.analysis.causes import rank_causes
    from neuronhelpers.store.dataset import select_pair

    catalog = _catalog()
    newest, _ = select_pair(catalog[catalog.twin_of.notna()], "newest")
    top = rank_causes(newest).iloc[0]
    return {"cause": top.cause, "stage": top.stage, "count": int(top["count"])}


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
    found = Answers(_lesson_rows()).answer(model_id, model_type, task)
    return {"architecture": model_type, "answer": found.kind if found else None,
            "result": found.result if found else None}


EXERCISES = {
    ("01", 1): Exercise("vision-language twins: PASS, FAIL and UNTESTED counts in this pair", _vision_counts,
                        {PASS: "twin rows (twin_of set) of task image-text-to-text, each model's newest row once",
                         FAIL: "count the failed rows among the same rows",
                         UNTESTED: "rows without a verdict are twins that could not be built here: count them too"}),
    ("01", 2): Exercise(f"the classic query on {CLASSIC_EXERCISE_MODEL}: its result per pair, and the stage of its "
                        "UNTESTED row", _one_model_across_pairs,
                        {"results": "one entry per pair, keyed like '2.13.0,5.23.0' (the compiler version first, a "
                                    "comma, no space), its newest row's result",
                         "untested_stage": "the UNTESTED row's `stage` column says why there is no verdict"}),
    ("02", 1): Exercise(f"the first 8 token ids `python3 run.py` printed for {TERMINAL_MODEL} in a terminal",
                        _terminal_tokens,
                        {"tokens": "the JSON line's \"tokens\" list, its first 8 ids as integers"}),
    ("02", 2): Exercise("tiny/gemma2's FAIL read from its row: result, stage and cause", _read_a_fail,
                        {"result": "the row's `result`", "stage": "the row's `stage`: where it stopped",
                         "cause": "the row's `cause` column, copied whole"}),
    ("03", 1): Exercise("heads, key/value heads and experts per rank: tiny/mixtral over 2 cores, Qwen3-30B-A3B over "
                        "the planner's cores", _what_each_rank_holds,
                        {"twin_heads_per_rank": "the twin's num_attention_heads divided by its 2 ranks",
                         "twin_kv_heads_per_rank": "num_key_value_heads over 2 ranks",
                         "twin_experts_per_rank": "num_local_experts over 2 ranks (EP)",
                         "real_heads_per_rank": "32 heads over real_plan.cores",
                         "real_kv_heads_per_rank": "4 key/value heads over real_plan.cores",
                         "real_experts_per_rank": "128 experts over real_plan.cores"}),
    ("03", 2): Exercise("the twin over 4 cores, and the core counts that both split Qwen3-30B-A3B and hold its "
                        "weights", _counts_that_hold_it,
                        {"twin_refused": "did plan_model raise UserError for 4 cores?",
                         "real_counts": "a count must split the heads and experts (no UserError) and be at least "
                                        "the planner's own choice (fewer cores cannot hold 61 GB)"}),
    ("04", 1): Exercise("exact, near_tie or mismatch for (a), (b), (c), and the margin at the first divergence",
                        _exact_near_tie_or_mismatch,
                        {"a": "one of exact, near_tie or mismatch: every token equal",
                         "b": "compare the margin with bfloat16's NEAR_TIE_MARGIN",
                         "c": "compare the margin with float16's NEAR_TIE_MARGIN",
                         "margin": "the reference's top-1 minus top-2 logit where the tokens first differ, 3 places"}),
    ("04", 2): Exercise("the evidence of the real gemma-3-270m's FAIL and of its twin's", _what_a_fail_stands_on,
                        {"real_evidence": "the `evidence` column of google/gemma-3-270m's row in `catalog`",
                         "twin_evidence": "the `evidence` column of tiny/gemma3_text's row"}),
    ("05", 1): Exercise("what the gate says of a stale expected file for tiny/qwen2", _out_of_date_expected,
                        {"problems": "check_expected's first return value, a list of lines"}),
    ("05", 2): Exercise("the compiler step's changes of verdict, counted by kind", _compiler_step,
                        {"verdicts": "change_counts of release_changes for the step whose kind is 'compiler', only "
                                     "the kinds in VERDICT_CHANGES"}),
    ("06", 1): Exercise("the cause that blocks the most architectures in the newest pair", _biggest_blocker,
                        {"cause": "causes.iloc[0].cause", "stage": "the same row's stage",
                         "count": "its `count` column (how many architectures), as an int"}),
    ("06", 2): Exercise("architectures that declare fullgraph and FAIL: how many, their top cause and its count",
                        _flag_misleads,
                        {"declared_true_fail": "rows of `declared` with declared True and disagree True",
                         "top_cause": "join them to current_rows' newest rows on model_type and task, count the causes",
                         "top_count": "how many of them have that cause"}),
}


def check_answer(lesson: str, number: int, answer, *, model_id: str | None = None) -> str:
    """Check an exercise's answer: "not answered yet", "right", or "not yet: <hint>" (never the right answer), a line
    a notebook shows as the cell's output. The whole answer is judged at once: how many parts are right, never which
    (one wrong part at a time would let a small answer space be found by trial), with every part's hint.
    ``model_id``: the model of a bring-your-own-model exercise (06, 3)."""
    if answer is None:
        return _say(NOT_ANSWERED + ": write your answer into the exercise's variable, then run this cell again")
    if (lesson, number) == ("06", 3):
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
                            f"{', '.join(f'{ls} {n}' for ls, n in EXERCISES)} and 06 3")
    expected = exercise.expected()
    if not isinstance(answer, dict):
        if len(expected) != 1:
            return _say(f"{NOT_YET}: give a dict with the keys {', '.join(expected)}")
        answer = {next(iter(expected)): answer}
    def hint(key):
        return exercise.hints.get(key, exercise.question)

    missing = [key for key in expected if key not in answer]
    if missing:  # the answer's shape, not its content: naming what is missing gives nothing away
        return _say(f"{NOT_YET}: your answer has no " + "; no ".join(f"'{key}' ({hint(key)})" for key in missing))
    right = sum(_same(answer[key], value) for key, value in expected.items())
    if right == len(expected):
        return _say(f"{RIGHT}: {exercise.question}")
    if len(expected) == 1:
        return _say(f"{NOT_YET}: not right. Hint: {hint(next(iter(expected)))}")
    hints = "; ".join(f"'{key}': {hint(key)}" for key in expected)
    return _say(f"{NOT_YET}: {right} of {len(expected)} parts right. Hints: {hints}")


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
