"""One model end to end: model spec -> plan -> run.py (rendered) -> subprocess -> verification -> result row.

Taught in notebook 02.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.run import render as recipe
from neuronhelpers.store import schema as results
from neuronhelpers.twins import build as twins
from neuronhelpers.core import versions
from neuronhelpers.core.backends import Backend, get_backend
from neuronhelpers.run.compile_cache import cache_env, cache_files
from neuronhelpers.core.settings import home
from neuronhelpers.verdict.causes import failing_guard, failure_cause, missing_package
from neuronhelpers.verdict.judge import make_judge
from neuronhelpers.models.resolve import ModelRef, resolve_model
from neuronhelpers.core.network import offline_env
from neuronhelpers.run.plan import Plan, host_reference_budget, plan_model
from neuronhelpers.run.recipes.scaffold import MEMORY_WORDS
from neuronhelpers.run.reference import cached_reference, reference_key, store_reference
from neuronhelpers.run.process import ProcessOutcome, execute
from neuronhelpers.core.settings import DEFAULT_TIMEOUT_S, REFERENCE_TIMEOUT_S
from neuronhelpers.verdict.verify import verify_outputs
from neuronhelpers.core.vocab import EXCLUDED, FAIL, PASS, UNTESTED



def run_dir(model_id: str) -> Path:
    """A fresh folder for one run's run.py and logs."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_id).strip("_")[:80] or "model"
    base = home() / "runs"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=base))


@dataclass
class PlannedRun:
    """A model resolved and planned on a backend: everything a row's identity needs, before anything runs."""

    ref: ModelRef
    backend: Backend
    plan: Plan
    params: dict  # the recipe parameters run.py is rendered with
    trust_remote_code: bool = False

    @property
    def library(self) -> str:
        return self.params["library"]

    def identity(self) -> dict:
        """The row columns that say what was tested with what (the resume key is taken from these)."""
        return dict(
            model_id=self.ref.model_id, task=self.ref.task, model_type=self.ref.model_type, twin_of=self.ref.twin_of,
            **versions.version_columns(self.backend, self.library),
            neuron_cores=None if self.plan.excluded else self.plan.cores,
            parallelism=None if self.plan.excluded else self.plan.parallelism,
            parameters=self.plan.parameters, dtype=self.params["dtype"],
        )

    def resume_key(self) -> tuple:
        return results.resume_key(self.identity())


def plan_run(model: str | ModelRef, *, backend: str | Backend | None = None, dtype: str | None = None,
             trust_remote_code: bool = False, cores: int | None = None) -> PlannedRun:
    """Resolve and plan a model (no process is started): the planner picks the core count unless ``cores`` forces one."""
    ref = model if isinstance(model, ModelRef) else resolve_model(model, trust_remote_code=trust_remote_code)
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    plan = plan_model(ref, be, dtype=dtype, forced=cores)
    params = recipe.recipe_params(ref, be, dtype=dtype, trust_remote_code=trust_remote_code,
                                  cores=plan.cores or 1, parallelism=plan.parallelism if plan.cores else vocab.NO_PARALLELISM)
    return PlannedRun(ref, be, plan, params, trust_remote_code)


def untested_row(model_id: str, backend: Backend, *, stage: str, error: str, cause: str, task: str | None = None,
                 model_type: str | None = None, twin_of: str | None = None, library: str = vocab.TRANSFORMERS) -> dict:
    """A row that says no verdict could be reached here, and why (never a FAIL)."""
    return results.new_row(
        model_id=model_id, task=task, model_type=model_type, twin_of=twin_of, **versions.version_columns(backend, library),
        result=UNTESTED, stage=stage, error=error, cause=cause, packages=versions.installed_packages())


def prepare_run(model: str | ModelRef, *, backend: str | Backend | None = None, dtype: str | None = None,
                trust_remote_code: bool = False, cores: int | None = None) -> PlannedRun | dict:
    """``plan_run``, or the UNTESTED row when no verdict can be reached here (a twin that cannot be built).

    Bad input (an unknown id, a model not at hand offline) still raises UserError: it is not a row.
    """
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    try:
        return plan_run(model, backend=be, dtype=dtype, trust_remote_code=trust_remote_code, cores=cores)
    except twins.TwinUnavailable as exc:
        return untested_row(exc.spec.model_id, be, stage=exc.stage, error=str(exc), cause=exc.cause, task=exc.spec.task,
                            model_type=exc.spec.model_type, twin_of=exc.spec.model_type,
                            library=vocab.LIBRARY_FOR_TASK.get(exc.spec.task, vocab.TRANSFORMERS))


def run_model(model: str | ModelRef | PlannedRun, *, backend: str | Backend | None = None, dtype: str | None = None,
              timeout: float = DEFAULT_TIMEOUT_S, trust_remote_code: bool = False, workdir: str | Path | None = None,
              reference_model: str | ModelRef | None = None, env: dict | None = None,
              memory_limit_bytes: int | None = None, cpus: set[int] | None = None, cores: int | None = None,
              judge_model: str | None = None) -> dict:
    """Run one model under the recipe and return its verified result row.

    ``model`` is a model string, a resolved ModelRef, or a PlannedRun (then backend, dtype and cores are
    already decided). ``reference_model`` lets a test compare against another checkpoint (e.g. an
    unperturbed twin); by default the reference is the same checkpoint. A sharded model too large for a
    CPU reference is checked by a judge (``judge_model``: a local causal LM; else the lexical judge).
    """
    planned = model if isinstance(model, PlannedRun) else prepare_run(
        model, backend=backend, dtype=dtype, trust_remote_code=trust_remote_code, cores=cores)
    if isinstance(planned, dict):
        return planned  # UNTESTED: nothing could be run
    ref, be, plan, params = planned.ref, planned.backend, planned.plan, planned.params
    if plan.excluded:
        return results.new_row(**planned.identity(), result=EXCLUDED, error=plan.excluded,
                               packages=versions.installed_packages())
    run_py = recipe.render_run_py(params)
    folder = Path(workdir) if workdir else run_dir(ref.model_id)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "run.py"
    script.write_text(run_py)
    requirements = recipe.render_requirements(be, ref.task)
    (folder / "requirements.txt").write_text(requirements)
    run_env = {**cache_env(be), **offline_env(), **(env or {})}

    cached_before = cache_files(be)
    fork = be.name != "neuron"  # the Neuron runtime is not known to be safe to fork after import: fresh processes
    device = execute(str(script), timeout=timeout, env=run_env, cwd=str(folder), memory_limit_bytes=memory_limit_bytes,
                     cpus=cpus, fork=fork)
    _save_logs(folder, "device", device)
    row = results.new_row(**planned.identity(), packages=versions.installed_packages(), run_py=run_py,
                          requirements=requirements, wall_s=device.wall_s)
    payload = device.payload or {}
    timings = payload.get("timings") or {}
    for key in ("load_s", "compile_s", "generate_s", "ttft_s", "decode_tokens_per_s"):
        row[key] = timings.get(key)
    figures = payload.get("figures") or {}  # the other libraries' warm figures (sentences/s; seconds per step, per image)
    for key in ("items_per_s", "step_s", "image_s"):
        row[key] = figures.get(key)

    if not (device.payload and device.payload.get("ok")):
        row.update(classify_failure(device, timeout))
        return row

    row["cache_hit"] = cache_hit(payload.get("compile_cache"), cached_before, cache_files(be))
    row.update(
        retraced=payload.get("retraced"),
        tokens=payload.get("tokens"),
        text=payload.get("text"),
        peak_memory_bytes=payload.get("peak_memory_bytes"),
        peak_memory_per_rank=payload.get("peak_memory_per_rank") or (
            [payload["peak_memory_bytes"]] if payload.get("peak_memory_bytes") is not None else None),
    )
    # The reference holds the same weights in the same dtype on the host: affordable or not.
    if planned.library == vocab.TRANSFORMERS and plan.cores > 1 and plan.weight_bytes > host_reference_budget():
        judge = make_judge(judge_model)
        judgement = judge.judge(payload.get("text") or "")
        row.update(judge=judge.name, result=PASS if judgement.ok else FAIL,
                   verification=judgement.verification if judgement.ok else None,
                   stage=None if judgement.ok else vocab.STAGE_MISMATCH,
                   error=None if judgement.ok else f"the judge rejected the text: {judgement.reason}")
        if not judgement.ok:
            row["cause"] = "judge rejected the text"
        return row
    reference_params = params
    reference_script = script
    if reference_model is not None:
        other = reference_model if isinstance(reference_model, ModelRef) else resolve_model(reference_model)
        reference_params = recipe.recipe_params(other, be, dtype=dtype)
        reference_script = folder / "reference_run.py"
        reference_script.write_text(recipe.render_run_py(reference_params))
    key = reference_key(reference_params)
    reference_payload = cached_reference(key)
    row["reference_cached"] = reference_payload is not None
    if reference_payload is None:
        reference = execute(str(reference_script), ["--reference"], timeout=REFERENCE_TIMEOUT_S, env=run_env,
                            cwd=str(folder), cpus=cpus, fork=fork)
        _save_logs(folder, vocab.STAGE_REFERENCE, reference)
        if not (reference.payload and reference.payload.get("ok")):
            failure = classify_failure(reference, REFERENCE_TIMEOUT_S)
            if failure["result"] == UNTESTED:
                row.update(failure)
            else:
                row.update(result=FAIL, stage=vocab.STAGE_REFERENCE, traceback=failure["traceback"], cause=failure["cause"],
                           error=f"CPU reference failed ({failure['stage']}): {failure['error']}")
            return row
        reference_payload = reference.payload
        store_reference(key, reference_payload)
    row.update(verify_outputs(params, payload, reference_payload))
    return row


def cache_hit(counters: dict | None, before: set[str], after: set[str]) -> bool:
    """Did the run find its graphs in the cache? Inductor counts hits and misses; elsewhere, no new cache files."""
    if counters is not None and counters.get("hits", 0) + counters.get("misses", 0) > 0:
        return counters["misses"] == 0
    return bool(before) and not (after - before)


def _meaningful_last_line(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("warnings.warn", "  ")) and "%|" not in line:
            return line[:500]
    return None


def classify_failure(outcome: ProcessOutcome, timeout: float) -> dict:
    """Result, stage, cause, error line and traceback for a process that did not report success.

    A load that failed because a package is not installed here is UNTESTED (stage ``dependency``): that
    is this environment, not the model.
    """
    payload = outcome.payload
    if payload and not payload.get("ok"):
        error, trace = payload.get("error"), payload.get("traceback") or outcome.stderr[-20000:]
        stage = payload.get("stage") or vocab.STAGE_RUN
        package = missing_package(error, trace) if stage in (vocab.STAGE_LOAD, vocab.STAGE_REFERENCE) else None
        if package:
            return {"result": UNTESTED, "stage": vocab.UNTESTED_DEPENDENCY, "cause": f"missing package: {package}", "traceback": trace,
                    "error": f"needs the package '{package}', which is not installed here ({error}): "
                             f"pip install {package}, then run it again"}
        guard = failing_guard(payload.get("recompile_reasons"))
        if guard and "recompile" in f"{error} {trace}".lower():
            error = f"{error} (the guard that kept failing: `{guard}`)"
        return {"result": FAIL, "stage": stage, "error": error, "traceback": trace,
                "cause": failure_cause(payload.get("error_type"), error, trace, payload.get("recompile_reasons"))}
    tail = outcome.stderr[-20000:]
    if outcome.timed_out:
        return {"result": FAIL, "stage": vocab.STAGE_TIMEOUT, "error": f"no result within {timeout:g} s; the run was stopped",
                "traceback": tail, "cause": "timeout"}
    sig = outcome.signal_name
    if sig == "SIGKILL":
        # Killed from outside without our timeout: the kernel's out-of-memory killer.
        return {"result": FAIL, "stage": vocab.STAGE_OOM, "error": "the process was killed (SIGKILL), most likely out of memory",
                "traceback": tail, "cause": "killed (SIGKILL): out of memory"}
    if sig:
        return {"result": FAIL, "stage": vocab.STAGE_RUN, "error": f"the process died with {sig}", "traceback": tail,
                "cause": f"process died with {sig}"}
    last = _meaningful_last_line(outcome.stderr) or f"exit status {outcome.returncode} without a result line"
    memory = "MemoryError" in last or any(w in last.lower() for w in MEMORY_WORDS)
    stage = vocab.STAGE_OOM if memory else vocab.STAGE_RUN
    error_type = last.split(":", 1)[0] if ":" in last else None
    return {"result": FAIL, "stage": stage, "error": last, "traceback": tail,
            "cause": failure_cause(error_type, last, tail)}


def _save_logs(folder: Path, name: str, outcome: ProcessOutcome) -> None:
    (folder / f"{name}.stdout.txt").write_text(outcome.stdout)
    (folder / f"{name}.stderr.txt").write_text(outcome.stderr)


def summary_line(row: dict) -> str:
    """One readable line for a row: model, result, cores, times, memory."""
    parts = [f"{row['model_id']}: {row['result']}"]
    if row.get("verification"):
        parts.append(f"({row['verification']})")
    if row.get("stage"):
        parts.append(f"at {row['stage']}")
    parts.append(f"cores={row.get('neuron_cores')}")
    if row.get("parallelism") not in (None, vocab.NO_PARALLELISM):
        parts.append(f"({row['parallelism']})")
    if row.get("wall_s") is not None:
        parts.append(f"wall={row['wall_s']:.1f}s")
    if row.get("compile_s") is not None:
        parts.append(f"compile={row['compile_s']:.1f}s")
    if row.get("peak_memory_bytes"):
        parts.append(f"peak={row['peak_memory_bytes'] / 2**20:.0f}MiB")
    if row.get("error"):
        parts.append(f"- {row['error']}")
    return " ".join(parts)

