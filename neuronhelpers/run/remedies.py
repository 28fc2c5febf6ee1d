"""Tried, not guessed: after a FAIL, the remedies of its cause (recipes/remedies.py) run one at a time, each checked
exactly as the unmodified run is (the same CPU reference, tolerance and sensitivity rule), and what each cost is
recorded on the unmodified row (its ``remedies`` column), beside the verdict, never as it.

Each record carries the word a trn2 user acts on (``trn2_word``, vocab.TRN2_WORDS), derived from what the remedy run
compiled: trn2-ready (static shapes, one graph, no recompile), costly on trn2 (graph breaks or several graphs), not on
trn2 (a symbolic size or integer, or a compile per generated token). The ladder stops at the first trn2-ready PASS; a
costly one, or one Trainium cannot take, does not stop it (within MAX_REMEDY_RUNS runs). A remedy exact only within the
model's attention window is not applicable, and not counted, where the test's sequence exceeds that window.

``remedies_line`` says it as the answer does: 'PASS with full static layers for the sliding ones, for sequences up to
4096 tokens (trn2-ready: static shapes, one compiled graph, no recompile; identical output within the window)'.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import first_line
from neuronhelpers.core.protocol import MAX_NEW_TOKENS
from neuronhelpers.recipes.remedies import MAX_REMEDY_RUNS, REMEDIES, remedies_for, remedy_entry
from neuronhelpers.verdict.evidence import check_could_not_fail, counts_as_passed

# Recompiles that grow with the tokens generated: at least this share of the decode steps recompiled.
PER_TOKEN_SHARE = 0.5
_FIGURES = ("compile_s", "recompiles", "unique_graphs", "graph_breaks", "peak_memory_bytes", "symbolic_shapes",
            "prompt_tokens")
# The answer's order: the best word first.
_WORD_ORDER = (vocab.TRN2_READY, vocab.TRN2_COSTLY, vocab.NOT_ON_TRN2, None)


def try_remedies(planned, row: dict, workdir: str | Path | None = None, **run_kwargs) -> list[dict]:
    """The remedies of a FAIL's cause, in order, at most MAX_REMEDY_RUNS runs, until one passes trn2-ready: one record
    each (``remedy_record``; one the model's window rules out is recorded not applicable, unrun). None for a PASS, a
    library the ladder does not cover, or a cause it knows no remedy for."""
    from neuronhelpers.run.harness import run_dir, run_model

    workdir = Path(workdir) if workdir else run_dir(planned.ref.model_id)
    if row.get("result") != vocab.FAIL or planned.library != vocab.TRANSFORMERS or row.get("stage") == \
            vocab.STAGE_REFERENCE:
        return []
    tried, runs = [], 0
    window = unread = None
    for remedy in remedies_for(row.get("cause")):
        if runs >= MAX_REMEDY_RUNS:
            break
        if remedy.window_limited:
            try:
                window = window or attention_window(planned.ref.path, planned.trust_remote_code)
            except Exception as exc:  # noqa: BLE001 - no window read: the remedy is not applicable, the row is kept
                unread = f"its config could not be read here ({first_line(exc, name=True)})"
            if unread or not window or window <= MAX_NEW_TOKENS:
                tried.append(remedy_record(remedy.name, {}, window=window, not_applicable=unread))
                continue
        remedied = dataclasses.replace(planned, params={**planned.params, "remedy": remedy_entry(remedy.name)})
        outcome = run_model(remedied, workdir=workdir / f"remedy-{remedy.name}", **run_kwargs)
        runs += 1
        tried.append(remedy_record(remedy.name, outcome, window=window if remedy.window_limited else None))
        if tried[-1]["trn2"] == vocab.TRN2_READY:
            break
    return tried


def attention_window(path: str, trust_remote_code: bool = False) -> int | None:
    """The smallest attention window the model's config sets (``sliding_window``, ``attention_chunk_size``; a
    multimodal model's in its text config too), None where it sets none."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    sizes = [getattr(part, key, None) for part in (config, getattr(config, "text_config", None))
             for key in ("sliding_window", "attention_chunk_size")]
    sizes = [size for size in sizes if isinstance(size, int) and size > 0]
    return min(sizes) if sizes else None


def remedy_record(name: str, outcome: dict, window: int | None = None, not_applicable: str | None = None) -> dict:
    """What one remedy run showed: its verdict and cause, and what it cost (compile seconds, recompiles and graphs,
    graph breaks, peak memory; whether the recompiles grew with the tokens; the symbols it compiled with), with its
    trn2 word and why. A window-limited remedy records the window, and is not applicable where the test's prompt and
    new tokens exceed it, or ``not_applicable`` says why (``outcome`` empty: it was not run)."""
    remedy = REMEDIES[name]
    record = {"remedy": name, "change": remedy.label, "result": outcome.get("result"), "stage": outcome.get("stage"),
              "cause": outcome.get("cause"), "verification": outcome.get("verification"),
              "check_sensitive": outcome.get("check_sensitive"), "changes_computation": remedy.changes_computation}
    record.update({key: outcome.get(key) for key in _FIGURES})
    recompiles = outcome.get("recompiles")
    record["recompiles_per_token"] = isinstance(recompiles, int) and recompiles >= PER_TOKEN_SHARE * MAX_NEW_TOKENS
    if remedy.window_limited:
        record["window"] = window
        prompt = outcome.get("prompt_tokens")
        if not_applicable:
            record["not_applicable"] = not_applicable
        elif not window or window <= MAX_NEW_TOKENS or (isinstance(prompt, int) and prompt + MAX_NEW_TOKENS > window):
            record["not_applicable"] = ("the model's config sets no attention window" if not window else
                                        f"the test's {prompt if isinstance(prompt, int) else 'prompt'} + "
                                        f"{MAX_NEW_TOKENS} tokens exceed the window of {window}")
    record["trn2"], record["trn2_why"] = trn2_word(record)
    return record


def trn2_word(record: dict) -> tuple[str | None, str]:
    """A remedy record's word for Trainium (vocab.TRN2_WORDS) and its reason in figures: None for a run that did not
    pass, or one recorded before the symbols were read (its shapes unknown)."""
    if record.get("not_applicable"):
        return vocab.REMEDY_NOT_APPLICABLE, record["not_applicable"]
    if record.get("result") != vocab.PASS or record.get("changes_computation"):
        return None, ""
    symbols, graphs = record.get("symbolic_shapes"), record.get("unique_graphs") or 0
    breaks, recompiles = record.get("graph_breaks") or 0, record.get("recompiles") or 0
    if record.get("recompiles_per_token"):
        return vocab.NOT_ON_TRN2, f"{recompiles} recompiles for {MAX_NEW_TOKENS} tokens: a neuronx-cc compile each"
    if symbols:
        return vocab.NOT_ON_TRN2, f"compiled with {len(symbols)} symbol{'s' if len(symbols) > 1 else ''}: {symbols[0]}"
    if symbols is None:
        return None, "recorded before the compiled shapes were read"
    if breaks or graphs > 1 or recompiles:
        return vocab.TRN2_COSTLY, ", ".join(f"{n} {name}{'s' if n != 1 else ''}" for n, name in (
            (graphs, "compiled graph"), (breaks, "graph break"), (recompiles, "recompile")))
    return vocab.TRN2_READY, "static shapes, one compiled graph, no recompile"


def remedies_json(tried: list[dict]) -> str | None:
    """The row's ``remedies`` column: the records as JSON, None where nothing was tried."""
    return json.dumps(tried, default=str) if tried else None


def passed_records(tried: list[dict]) -> list[dict]:
    """The records that count as the model running with a remedy, those whose check could fail first, then the best
    trn2 word, then in the order tried."""
    passed = [t for t in tried if counts_as_passed(t)]
    return sorted(passed, key=lambda t: (check_could_not_fail(t),
                                         _WORD_ORDER.index(_word(t)[0] if _word(t)[0] in _WORD_ORDER else None)))


def _word(record: dict) -> tuple[str | None, str]:
    """A record's trn2 word and why: as recorded, or derived for a record made before words were (its shapes unread,
    so no word: it says so)."""
    return (record["trn2"], record.get("trn2_why") or "") if "trn2" in record else trn2_word(record)


def remedies_line(value, architecture_twin: bool = False) -> str | None:
    """The remedies a row records, in words: the best that passed (trn2-ready first) with its word and cost, then any
    other that passed with its word; else what was tried. ``architecture_twin``: the window it names is the
    architecture's default, said so."""
    if not isinstance(value, str) or not value:
        return None
    tried = json.loads(value)
    passed = passed_records(tried)
    if not passed:
        failed = "; ".join(f"{t['change']}: {t.get('trn2') if t.get('not_applicable') else t['result']}"
                           + (f" at {t['stage']}" if t.get("stage") else "") for t in tried)
        return f"no remedy made it run (tried {failed})"
    best, *others = passed
    line = f"PASS with {_said(best, architecture_twin)}"
    if others:
        line += "; also " + "; ".join(f"PASS with {_said(t, architecture_twin)}" for t in others)
    refused = [t for t in tried if t.get("not_applicable")]  # said, so a reader does not wonder why it is missing
    if refused:
        line += "; " + "; ".join(f"{t['change']}: not applicable ({t['not_applicable']})" for t in refused)
    return line


def _said(record: dict, architecture_twin: bool) -> str:
    """One remedy that passed: its change (and window), its trn2 word and why, its cost, its caveat."""
    window = record.get("window")
    limit = (f", for sequences up to {window} tokens" + (" (the architecture's default window)" if architecture_twin
                                                         else "")) if window else ""
    found, why = _word(record)
    word = f"{found}: {why}" if found else why
    caveat = getattr(REMEDIES.get(record.get("remedy")), "caveat", "")
    unchecked = "but its check could not have failed" if check_could_not_fail(record) else ""
    notes = "; ".join(part for part in (word, "identical output within the window" if window else "", unchecked,
                                        caveat) if part)
    return f"{record['change']}{limit}{_cost(record)}" + (f" ({notes})" if notes else "")


def remedies_frame(value):
    """A row's remedies as tried, one line each: the change, its verdict, its trn2 word, and what it cost (compile
    seconds, compiled graphs, recompiles and whether they grew with the tokens, graph breaks, symbols, peak memory in
    GiB)."""
    import pandas as pd

    columns = ["change", "result", "trn2", "compile_s", "unique_graphs", "recompiles", "recompiles_per_token",
               "graph_breaks", "symbolic_shapes", "peak_memory_gib", "changes_computation"]
    tried = json.loads(value) if isinstance(value, str) and value else []
    frame = pd.DataFrame(tried).reindex(columns=[*columns, "peak_memory_bytes"])
    frame["peak_memory_gib"] = (frame.pop("peak_memory_bytes").astype(float) / 2**30).round(2)
    frame["compile_s"] = frame["compile_s"].astype(float).round(1)
    frame["symbolic_shapes"] = [len(s) if isinstance(s, list) else None for s in frame["symbolic_shapes"]]
    return frame[columns]


def _cost(record: dict) -> str:
    recompiles, graphs = record.get("recompiles"), record.get("unique_graphs")
    if record.get("recompiles_per_token"):
        return f" at {recompiles} recompiles for {MAX_NEW_TOKENS} tokens (one per generated token)"
    parts = []
    if isinstance(graphs, int):
        parts.append(f"{graphs} compiled graph{'s' if graphs != 1 else ''}")
    if isinstance(recompiles, int) and recompiles:
        parts.append(f"{recompiles} recompiles")
    if isinstance(record.get("graph_breaks"), int) and record["graph_breaks"]:
        parts.append(f"{record['graph_breaks']} graph breaks")
    if isinstance(record.get("compile_s"), (int, float)):
        parts.append(f"compile {record['compile_s']:.1f} s")
    return f" [{', '.join(parts)}]" if parts else ""
