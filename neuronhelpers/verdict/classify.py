"""Failure classification: what a run that did not report success becomes (FAIL at a stage with a cause, or UNTESTED
when a package is missing here), read from its JSON line, its exit status or signal, and its stderr.

Taught in notebook 03.
"""

from __future__ import annotations

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import HarnessFault, harness_fault
from neuronhelpers.core.processes import MEMORY_WORDS
from neuronhelpers.core.vocab import FAIL, UNTESTED
from neuronhelpers.process.tree import KILLED_FROM_OUTSIDE, ProcessOutcome, killed_from_outside  # noqa: F401 - re-exported
from neuronhelpers.verdict.causes import failing_guard, failure_cause, missing_package


def _meaningful_last_line(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("warnings.warn", "  ")) and "%|" not in line:
            return line[:500]
    return None


def classify_failure(outcome: ProcessOutcome, timeout: float) -> dict:
    """Result, stage, cause, error line and traceback for a process that did not report success.

    A load that failed because a package is not installed here is UNTESTED (stage ``dependency``): that
    is this environment, not the model. A SIGKILL is FAIL (oom) only where the kernel recorded an out-of-memory kill
    while the run ran; any other is UNTESTED (infrastructure). A failure raised by this package's own code
    (``errors.harness_fault``) is no row at all: HarnessFault stops the sweep.
    """
    payload = outcome.payload
    _raise_if_ours(payload, outcome.stderr)
    if payload and not payload.get("ok"):
        error, trace = payload.get("error"), payload.get("traceback") or outcome.stderr[-20000:]
        stage = payload.get("stage") or vocab.STAGE_RUN
        package = missing_package(error, trace) if stage in (vocab.STAGE_LOAD, vocab.STAGE_REFERENCE) else None
        if package:
            return {"result": UNTESTED, "stage": vocab.UNTESTED_DEPENDENCY, "cause": f"missing package: {package}",
                    "traceback": trace,
                    "error": f"needs the package '{package}', which is not installed here ({error}): "
                             f"pip install {package}, then run it again"}
        guard = failing_guard(payload.get("recompile_reasons"))
        if guard and "recompile" in f"{error} {trace}".lower():
            error = f"{error} (the guard that kept failing: `{guard}`)"
        return {"result": FAIL, "stage": stage, "error": error, "traceback": trace,
                "cause": failure_cause(payload.get("error_type"), error, trace, payload.get("recompile_reasons"))}
    tail = outcome.stderr[-20000:]
    if outcome.timed_out:
        return {"result": FAIL, "stage": vocab.STAGE_TIMEOUT,
                "error": f"no result within {timeout:g} s; the run was stopped",
                "traceback": tail, "cause": "timeout"}
    sig = outcome.signal_name
    if sig == "SIGKILL" and outcome.oom_kills:
        return {"result": FAIL, "stage": vocab.STAGE_OOM,
                "error": "the kernel's out-of-memory killer killed the process (SIGKILL)",
                "traceback": tail, "cause": "killed (SIGKILL): out of memory"}
    if sig == "SIGKILL":
        return {"result": UNTESTED, "stage": vocab.UNTESTED_INFRASTRUCTURE, "traceback": tail,
                "error": f"the run was {KILLED_FROM_OUTSIDE} by the kernel: not the model's answer; the "
                         "next sweep runs it again", "cause": KILLED_FROM_OUTSIDE}
    if sig:
        return {"result": FAIL, "stage": vocab.STAGE_RUN, "error": f"the process died with {sig}", "traceback": tail,
                "cause": f"process died with {sig}"}
    last = _meaningful_last_line(outcome.stderr) or f"exit status {outcome.returncode} without a result line"
    memory = "MemoryError" in last or any(w in last.lower() for w in MEMORY_WORDS)
    stage = vocab.STAGE_OOM if memory else vocab.STAGE_RUN
    error_type = last.split(":", 1)[0] if ":" in last else None
    return {"result": FAIL, "stage": stage, "error": last, "traceback": tail,
            "cause": failure_cause(error_type, last, tail)}




def _raise_if_ours(payload: dict | None, stderr: str) -> None:
    """HarnessFault when the run failed in this package's own code (its result's exception, or with no result, the
    traceback on its stderr), never a row of the model's."""
    if payload and not payload.get("ok"):
        fault = harness_fault(payload.get("error_type"), payload.get("error"), payload.get("traceback"))
    elif not payload:
        fault = harness_fault(None, None, stderr[-20000:])
    else:
        fault = None
    if fault:
        raise HarnessFault(f"a fault of neuronhelpers' own code, not the model's: {fault}")
