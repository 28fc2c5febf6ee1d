"""Version-to-version comparison and the expected-results gate.

``diff_results(old, new)`` compares two sets of rows (two version pairs of one dataset, or two
dataset folders) model by model: regressed (PASS -> not PASS, with the new error), improved, newly
tested, dropped, and wall-time / peak-memory changes beyond a threshold.

Taught in notebooks 06 (a release's diff and gate) and 05 (releases side by side).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.vocab import FAIL, PASS, UNTESTED
from neuronhelpers.store.dataset import LAST_ATTEMPT, newest_per_model, pair_rows, version_pairs
from neuronhelpers.store.schema import weights_kinds

# Kinds of change, in the order they are listed. A row that became (or stopped being) UNTESTED is not a
# regression or an improvement of the model: the verdict was lost or reached.
LOST_TO_A_FAULT = "verdict lost to a fault"  # a newer attempt (infrastructure, input) reached no verdict
CHANGE_ORDER = ["regressed", "improved", "new cause", LOST_TO_A_FAULT, "verdict lost", "verdict reached", "new",
                "dropped",
                "lower evidence", "new graph break", "new fallback op", "speed-up fell", "slower", "faster",
                "more memory", "less memory"]
# The kinds that are a change of verdict (the rest: evidence, time, memory, rows added or dropped).
VERDICT_CHANGES = ["regressed", "improved", "new cause", LOST_TO_A_FAULT, "verdict lost", "verdict reached"]
# A speed-up (compiled over eager, one process) that fell by more than this share is reported (`speed-up fell`).
SPEEDUP_MARGIN = 0.25


def load_side(path: str | Path) -> pd.DataFrame:
    """Rows of one side of a diff: a dataset folder holding one version pair, or one version-pair Parquet file."""
    from neuronhelpers.store.dataset import conform, load_results, read_table

    path = str(path)
    if path.endswith(".parquet"):
        if not os.path.isfile(path):
            raise UserError(f"no such results file '{path}'")
        return conform(read_table(path)).to_pandas()
    df = load_results(path)
    pairs = version_pairs(df) if len(df) else []  # by the rows' values: two compilers may share a file name
    if len(pairs) > 1:
        named = ", ".join(f"{lib} {lib_version} on {compiler}" for lib, compiler, lib_version in pairs)
        files = sorted(df.attrs.get("files", []))
        raise UserError(f"'{path}' holds {len(pairs)} version pairs ({named}): give one results file a side, e.g. "
                        f"{files[0] if files else path}")
    return df


def _latest(df: pd.DataFrame) -> pd.DataFrame:
    """Each model's newest row, indexed by model_id (the gate's and the expected file's view)."""
    return newest_per_model(df).set_index("model_id")


def _latest_per_weights(df: pd.DataFrame) -> pd.DataFrame:
    """Each (model, kind of weights)'s newest row, indexed by both: a shelf row is compared with a shelf row and a
    twin's with a twin's, never a Hub row with a dequantized copy of it."""
    df = df.assign(weights_kind=weights_kinds(df.get("weights"), df["model_id"]))
    return newest_per_model(df, ["model_id", "weights_kind"]).set_index(["model_id", "weights_kind"])


def diff_results(old: pd.DataFrame, new: pd.DataFrame, *, time_threshold: float = 0.25,
                 memory_threshold: float = 0.10) -> pd.DataFrame:
    """One row per model (and kind of weights, the ``weights`` column: hub, shelf, twin, folder) that changed, with
    the kind of change; thresholds are relative (0.25 = 25%)."""
    a, b = _latest_per_weights(old), _latest_per_weights(new)
    out = []
    for key in sorted(set(a.index) | set(b.index)):
        model, kind = key
        if key not in b.index:
            out.append({"model_id": model, "weights": kind, "change": "dropped", "old_result": a.at[key, "result"]})
            continue
        if key not in a.index:
            out.append({"model_id": model, "weights": kind, "change": "new", "new_result": b.at[key, "result"],
                        "new_error": b.at[key, "error"]})
            continue
        ra, rb = a.loc[key], b.loc[key]
        base = {"model_id": model, "weights": kind, "old_result": ra["result"], "new_result": rb["result"],
                "old_cause": ra.get("cause")}
        verdicts = (PASS, FAIL)
        if ra["result"] in verdicts and (_present(rb.get(LAST_ATTEMPT)) or vocab.is_attempt(rb["result"],
                                                                                         rb["stage"])):
            # the verdict was kept (or, with none in this pair, is missing) because an attempt reached none: the
            # machine or the files failed, not the model; the gate fails on it until that model is run again
            out.append({**base, "change": LOST_TO_A_FAULT, "new_stage": rb["stage"],
                        "new_error": rb.get(LAST_ATTEMPT) if _present(rb.get(LAST_ATTEMPT)) else rb["error"],
                        "new_cause": rb.get("cause")})
            continue
        if ra["result"] in verdicts and rb["result"] == UNTESTED:
            out.append({**base, "change": "verdict lost", "new_stage": rb["stage"], "new_error": rb["error"],
                        "new_cause": rb.get("cause")})
            continue
        if ra["result"] not in verdicts and rb["result"] in verdicts:
            out.append({**base, "change": "verdict reached", "new_stage": rb["stage"], "new_error": rb["error"],
                        "new_cause": rb.get("cause")})
            continue
        if ra["result"] == PASS and rb["result"] != PASS:
            out.append({**base, "change": "regressed", "new_stage": rb["stage"], "new_error": rb["error"],
                        "new_cause": rb.get("cause")})
            continue
        if ra["result"] != PASS and rb["result"] == PASS:
            out.append({**base, "change": "improved"})
            continue
        if ra["result"] == FAIL and rb["result"] == FAIL and ra.get("cause") != rb.get("cause"):
            out.append({**base, "change": "new cause", "new_stage": rb["stage"], "new_error": rb["error"],
                        "new_cause": rb.get("cause")})
            continue
        out += _evidence_changes(base, ra, rb)
        for column, threshold, up, down in (("wall_s", time_threshold, "slower", "faster"),
                                            ("peak_memory_bytes", memory_threshold, "more memory", "less memory")):
            before, after = ra[column], rb[column]
            if pd.notna(before) and pd.notna(after) and before > 0:
                ratio = after / before - 1
                if abs(ratio) > threshold:
                    out.append({**base, "change": up if ratio > 0 else down, "column": column,
                                "old_value": float(before), "new_value": float(after), "relative": round(ratio, 3)})
    columns = ["model_id", "weights", "change", "old_result", "new_result", "new_stage", "old_cause", "new_cause",
               "new_error", "column", "old_value", "new_value", "relative", "old_evidence", "new_evidence"]
    frame = pd.DataFrame(out, columns=columns)
    frame["change"] = pd.Categorical(frame["change"], categories=CHANGE_ORDER, ordered=True)
    return frame.sort_values(["change", "model_id"]).reset_index(drop=True)


def change_counts(changes: pd.DataFrame) -> dict[str, int]:
    """How many changes of each kind, in CHANGE_ORDER, as plain ints (what a notebook or the CLI prints)."""
    counts = changes["change"].astype(str).value_counts()
    return {kind: int(counts[kind]) for kind in CHANGE_ORDER if kind in counts}


@dataclass(frozen=True)
class ReleaseStep:
    """Two version pairs of one library that differ in exactly one version: a library release under one compiler
    (transformers 5.23.0 -> 5.24.0 on inductor 2.14.1), or a compiler release under one library version."""

    library: str
    compiler: str
    old: tuple[str, str]  # (compiler version, library version)
    new: tuple[str, str]

    @property
    def kind(self) -> str:
        """'library' or 'compiler': which of the two versions changed."""
        return "library" if self.old[0] == self.new[0] else "compiler"

    def label(self) -> str:
        if self.kind == "library":
            return f"{self.library} {self.old[1]} -> {self.new[1]} on {self.compiler} {self.new[0]}"
        return f"{self.compiler} {self.old[0]} -> {self.new[0]} with {self.library} {self.new[1]}"


def release_steps(df: pd.DataFrame, library: str | None = None) -> list[ReleaseStep]:
    """Every comparison of neighbouring releases a results frame holds, library by library (never one library's
    version against another's): each library's consecutive versions under one compiler, then each compiler's
    consecutive versions under one library version; the newest first within each kind."""
    steps = []
    pairs = version_pairs(df)  # newest first
    compilers = df.groupby("compiler_version")["compiler"].first().to_dict() if "compiler" in df else {}
    libraries = [library] if library else sorted({p[0] for p in pairs}, key=lambda lib: lib != vocab.TRANSFORMERS)
    for lib in libraries:
        mine = [p for p in pairs if p[0] == lib]
        for shared in (1, 2):  # the compiler version shared (library releases) first, then the library version
            groups: dict[str, list] = {}
            for p in mine:
                groups.setdefault(p[shared], []).append(p)
            for group in groups.values():
                for newer, older in zip(group, group[1:], strict=False):  # version_pairs' order: newest first
                    steps.append(ReleaseStep(lib, str(compilers.get(newer[1]) or "compiler"), older[1:], newer[1:]))
    return steps


def step_rows(df: pd.DataFrame, library: str, pair: tuple[str, str]) -> pd.DataFrame:
    """The rows of one side of a release step: one library at one (compiler version, library version) pair."""
    return pair_rows(df, library, *pair)


def release_changes(df: pd.DataFrame, step: ReleaseStep, **thresholds) -> pd.DataFrame:
    """``diff_results`` of a release step's older rows against its newer rows."""
    return diff_results(step_rows(df, step.library, step.old), step_rows(df, step.library, step.new), **thresholds)


def _present(value) -> bool:
    """A scalar cell that holds a value (None, NaN and pd.NA do not)."""
    try:
        return not bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array cell
        return True


def _ops(value) -> set | None:
    """A fallback_ops cell as a set (None when the run recorded none)."""
    if value is None or (not hasattr(value, "__iter__")) or isinstance(value, str):
        return None
    return {str(op) for op in value}


def _weaker_evidence(old_level, new_level) -> bool:
    """A PASS level that is lower than before (both from vocab.PASS_EVIDENCE_ORDER)."""
    order = vocab.PASS_EVIDENCE_ORDER
    return old_level in order and new_level in order and order.index(new_level) > order.index(old_level)


def _more_graph_breaks(before, after) -> bool:
    return _present(before) and _present(after) and float(after) > float(before)


def _evidence_changes(base: dict, ra, rb) -> list[dict]:
    """Changes in what an unchanged verdict stands on: a PASS checked less strictly, a graph break or a CPU-fallback
    op that was not there, a speed-up that fell by more than SPEEDUP_MARGIN."""
    out = []
    old_level, new_level = ra.get("evidence"), rb.get("evidence")
    if ra["result"] == rb["result"] == PASS and _weaker_evidence(old_level, new_level):
        out.append({**base, "change": "lower evidence", "column": "evidence", "old_evidence": old_level,
                    "new_evidence": new_level})
    before, after = ra.get("graph_breaks"), rb.get("graph_breaks")
    if _more_graph_breaks(before, after):
        out.append({**base, "change": "new graph break", "column": "graph_breaks", "old_value": float(before),
                    "new_value": float(after)})
    old_ops, new_ops = _ops(ra.get("fallback_ops")), _ops(rb.get("fallback_ops"))
    if old_ops is not None and new_ops is not None:
        added = sorted(new_ops - old_ops)
        if added:
            out.append({**base, "change": "new fallback op", "column": "fallback_ops", "new_cause": ", ".join(added)})
    before, after = ra.get("speedup"), rb.get("speedup")
    if _present(before) and _present(after) and before > 0 and after < before * (1 - SPEEDUP_MARGIN):
        out.append({**base, "change": "speed-up fell", "column": "speedup", "old_value": float(before),
                    "new_value": float(after), "relative": round(after / before - 1, 3)})
    return out


# evidence and graph_breaks are held too, and reported as notes (the gate fails on verdicts only); a speed-up is not:
# it is a property of the machine that ran, and the gate's machine is not the catalog's.
EXPECTED_COLUMNS = ["model_id", "model_type", "task", "result", "stage", "cause", "evidence", "graph_breaks"]


def read_expected(path: str | Path) -> pd.DataFrame:
    """An expected-results file: CSV with at least model_id and result (like PyTorch's expected CSVs); stage and
    cause where the file records them."""
    try:
        expected = pd.read_csv(path, comment="#", dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise UserError(f"no expected-results file '{path}': write one with `neuronhelpers check RESULTS --expected "
                        f"{path} --write`") from None
    if not {"model_id", "result"} <= set(expected.columns):
        raise UserError(f"'{path}' is not an expected-results file: it needs model_id and result columns")
    # an empty cell is no value: None, whatever pandas' own missing value is (pandas 3 reads NaN into a str column)
    return expected.astype(object).where(expected.ne(""), None)


def check_expected(expected: pd.DataFrame, actual: pd.DataFrame, *,
                   only_tested: bool = False) -> tuple[list[str], list[str]]:
    """(problems, notes) of results held against expectations.

    A problem is any change of verdict, in either direction: a model expected to PASS that does not
    (a regression, named with its new error), a model expected not to PASS that now does (an improvement:
    the expected file is out of date and must be rewritten), a FAIL at another stage, or a verdict that
    became UNTESTED. A changed cause with the same result and stage is a note, and so is a PASS that stands on
    lower evidence than the file records, or a run with more graph breaks (files written before those columns
    existed are checked on verdicts alone). ``only_tested`` checks only the expected models present in the
    results (a CI slice of a whole-library file).
    """
    latest = _latest(actual)
    problems, notes = [], []
    for row in expected.itertuples(index=False):
        model, want = row.model_id, row.result
        if model not in latest.index:
            if not only_tested:
                problems.append(f"{model}: expected {want}, not in the results")
            continue
        got = latest.loc[model]
        if _present(got.get(LAST_ATTEMPT)):
            problems.append(f"{model}: {LOST_TO_A_FAULT.upper()}: its {got['result']} stands, but its last attempt "
                            f"reached no verdict ({got[LAST_ATTEMPT]}): run it again")
            continue
        want_stage, got_stage = _text(getattr(row, "stage", None)), _text(got["stage"])
        if got["result"] != want:
            if want == PASS:
                problems.append(f"{model}: REGRESSED: expected PASS, got {got['result']} at {got['stage']}: "
                                f"{got['error']}")
            elif got["result"] == PASS:
                problems.append(f"{model}: IMPROVED: expected {want} ({want_stage}), now PASS: update the "
                                "expected file")
            else:
                problems.append(f"{model}: CHANGED: expected {want} ({want_stage}), got {got['result']} "
                                f"({got['stage']}): {got['error']}")
        elif want != PASS and want_stage and got_stage != want_stage:
            problems.append(f"{model}: CHANGED: expected {want} at {want_stage}, got {want} at {got_stage}: "
                            f"{got['error']}")
        else:
            want_cause = getattr(row, "cause", None)
            if want != PASS and want_cause and _text(got.get("cause")) != want_cause:
                notes.append(f"{model}: same verdict, new cause: {got.get('cause')} (was {want_cause})")
            notes += _expected_evidence_notes(model, row, got)
    return problems, notes


def _expected_evidence_notes(model: str, row, got) -> list[str]:
    """Notes for an unchanged verdict whose evidence weakened against the expected file's line."""
    out = []
    want_level, got_level = getattr(row, "evidence", None), _text(got.get("evidence"))
    if row.result == PASS and _weaker_evidence(want_level, got_level):
        out.append(f"{model}: same verdict, lower evidence: {got_level} (was {want_level})")
    want_breaks, got_breaks = getattr(row, "graph_breaks", None), got.get("graph_breaks")
    if _more_graph_breaks(want_breaks, got_breaks):
        out.append(f"{model}: same verdict, new graph break: {int(float(got_breaks))} (was {int(float(want_breaks))})")
    return out


def _text(value) -> str | None:
    return None if not _present(value) else str(value)


def expected_frame(actual: pd.DataFrame) -> pd.DataFrame:
    """The expected-results table of a results set: one line per model (its newest row)."""
    latest = _latest(actual).reset_index()
    for column in EXPECTED_COLUMNS:
        if column not in latest:
            latest[column] = None
    latest["graph_breaks"] = pd.to_numeric(latest["graph_breaks"], errors="coerce").astype("Int64")  # 0, not 0.0
    frame = latest[EXPECTED_COLUMNS].sort_values("model_id").reset_index(drop=True)
    return frame.astype(object).where(frame.notna(), None)
