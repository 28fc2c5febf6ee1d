"""Tried, not guessed: after a FAIL, the remedies of its cause (recipes/remedies.py) run one at a time until one
passes, each checked exactly as the unmodified run is (the same CPU reference, tolerance and sensitivity rule), and
what each cost is recorded on the unmodified row (its ``remedies`` column), beside the verdict, never as it.

``remedies_line`` says it as the answer does: 'PASS with use_cache=True (1 compile)', or 'PASS with
torch._dynamo.config.recompile_limit = 64 at 31 recompiles for 32 tokens: on Trainium a neuronx-cc compile each, not
practical'.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.protocol import MAX_NEW_TOKENS
from neuronhelpers.recipes.remedies import MAX_REMEDY_RUNS, REMEDIES, remedies_for, remedy_entry

# Recompiles that grow with the tokens generated: at least this share of the decode steps recompiled.
PER_TOKEN_SHARE = 0.5
_FIGURES = ("compile_s", "recompiles", "unique_graphs", "graph_breaks", "peak_memory_bytes")


def try_remedies(planned, row: dict, workdir: str | Path | None = None, **run_kwargs) -> list[dict]:
    """The remedies of a FAIL's cause, in order, at most MAX_REMEDY_RUNS, until one passes without changing what the
    model computes: one record each (``remedy_record``). None for a PASS, a library the ladder does not cover, or a
    cause it knows no remedy for."""
    from neuronhelpers.run.harness import run_dir, run_model

    workdir = Path(workdir) if workdir else run_dir(planned.ref.model_id)
    if row.get("result") != vocab.FAIL or planned.library != vocab.TRANSFORMERS or row.get("stage") == \
            vocab.STAGE_REFERENCE:
        return []
    tried = []
    for remedy in remedies_for(row.get("cause"))[:MAX_REMEDY_RUNS]:
        remedied = dataclasses.replace(planned, params={**planned.params, "remedy": remedy_entry(remedy.name)})
        outcome = run_model(remedied, workdir=workdir / f"remedy-{remedy.name}", **run_kwargs)
        tried.append(remedy_record(remedy.name, outcome))
        if outcome["result"] == vocab.PASS and not remedy.changes_computation:
            break
    return tried


def remedy_record(name: str, outcome: dict) -> dict:
    """What one remedy run showed: its verdict and cause, and what it cost (compile seconds, recompiles and graphs,
    graph breaks, peak memory; whether the recompiles grew with the tokens)."""
    remedy = REMEDIES[name]
    record = {"remedy": name, "change": remedy.label, "result": outcome.get("result"), "stage": outcome.get("stage"),
              "cause": outcome.get("cause"), "verification": outcome.get("verification"),
              "check_sensitive": outcome.get("check_sensitive"), "changes_computation": remedy.changes_computation}
    record.update({key: outcome.get(key) for key in _FIGURES})
    recompiles = outcome.get("recompiles")
    record["recompiles_per_token"] = isinstance(recompiles, int) and recompiles >= PER_TOKEN_SHARE * MAX_NEW_TOKENS
    return record


def remedies_json(tried: list[dict]) -> str | None:
    """The row's ``remedies`` column: the records as JSON, None where nothing was tried."""
    return json.dumps(tried, default=str) if tried else None


def remedies_line(value) -> str | None:
    """The remedies a row records, in words: the one that passed and its cost, else what was tried."""
    if not isinstance(value, str) or not value:
        return None
    tried = json.loads(value)
    passed = next((t for t in tried if t["result"] == vocab.PASS and not t.get("changes_computation")), None)
    if passed is None:
        failed = "; ".join(f"{t['change']}: {t['result']}" + (f" at {t['stage']}" if t.get("stage") else "")
                           for t in tried)
        return f"no remedy made it run (tried {failed})"
    cost = _cost(passed)
    caveat = getattr(REMEDIES.get(passed.get("remedy")), "caveat", "")
    return f"PASS with {passed['change']}{cost}" + (f" ({caveat})" if caveat else "")


def remedies_frame(value):
    """A row's remedies as tried, one line each: the change, its verdict and what it cost (compile seconds, compiled
    graphs, recompiles and whether they grew with the tokens, graph breaks, peak memory in GiB)."""
    import pandas as pd

    columns = ["change", "result", "compile_s", "unique_graphs", "recompiles", "recompiles_per_token", "graph_breaks",
               "peak_memory_gib", "changes_computation"]
    tried = json.loads(value) if isinstance(value, str) and value else []
    frame = pd.DataFrame(tried).reindex(columns=[*columns, "peak_memory_bytes"])
    frame["peak_memory_gib"] = (frame.pop("peak_memory_bytes").astype(float) / 2**30).round(2)
    frame["compile_s"] = frame["compile_s"].astype(float).round(1)
    return frame[columns]


def _cost(record: dict) -> str:
    recompiles, graphs = record.get("recompiles"), record.get("unique_graphs")
    if record.get("recompiles_per_token"):
        return (f" at {recompiles} recompiles for {MAX_NEW_TOKENS} tokens (one per generated token): on Trainium a "
                "neuronx-cc compile each, not practical")
    parts = []
    if isinstance(graphs, int):
        parts.append(f"{graphs} compiled graph{'s' if graphs != 1 else ''}")
    if isinstance(recompiles, int) and recompiles:
        parts.append(f"{recompiles} recompiles")
    if isinstance(record.get("graph_breaks"), int) and record["graph_breaks"]:
        parts.append(f"{record['graph_breaks']} graph breaks")
    if isinstance(record.get("compile_s"), (int, float)):
        parts.append(f"compile {record['compile_s']:.1f} s")
    return f" ({', '.join(parts)})" if parts else ""
