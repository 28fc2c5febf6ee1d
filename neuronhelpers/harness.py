"""One model end to end: model spec -> run.py (rendered) -> subprocess -> verification -> result row."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from . import recipe, results, versions
from .backends import Backend, get_backend
from .cache import cache_env, cache_files, neuronhelpers_home
from .judge import make_judge
from .models import ModelRef, resolve_model
from .plan import host_reference_budget, plan_model
from .reference import cached_reference, reference_key, store_reference
from .runner import ProcessOutcome, execute
from .verify import compare_tokens
from .vocab import EXCLUDED, FAIL, PASS

DEFAULT_TIMEOUT_S = 900.0
REFERENCE_TIMEOUT_S = 600.0


def run_dir(model_id: str) -> Path:
    """A fresh folder for one run's run.py and logs."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_id).strip("_")[:80] or "model"
    base = neuronhelpers_home() / "runs"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=base))


def run_model(model: str | ModelRef, *, backend: str | Backend | None = None, dtype: str | None = None,
              timeout: float = DEFAULT_TIMEOUT_S, trust_remote_code: bool = False, workdir: str | Path | None = None,
              reference_model: str | ModelRef | None = None, env: dict | None = None,
              memory_limit_bytes: int | None = None, cpus: set[int] | None = None, cores: int | None = None,
              judge_model: str | None = None) -> dict:
    """Run one model under the recipe and return its verified result row.

    The planner picks the core count unless ``cores`` forces one. ``reference_model`` lets a test
    compare against another checkpoint (e.g. an unperturbed twin); by default the reference is the
    same checkpoint. A sharded model too large for a CPU reference is checked by a judge
    (``judge_model``: a local causal LM; else the lexical judge).
    """
    ref = model if isinstance(model, ModelRef) else resolve_model(model, trust_remote_code=trust_remote_code)
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    plan = plan_model(ref, be, dtype=dtype, forced=cores)
    params = recipe.recipe_params(ref, be, dtype=dtype, trust_remote_code=trust_remote_code,
                                  cores=plan.cores or 1, parallelism=plan.parallelism)
    if plan.excluded:
        row = _base_row(ref, be, params, None, None)
        row.update(result=EXCLUDED, error=plan.excluded, neuron_cores=None, parallelism=None, parameters=plan.parameters)
        return row
    run_py = recipe.render_run_py(params)
    folder = Path(workdir) if workdir else run_dir(ref.model_id)
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "run.py"
    script.write_text(run_py)
    requirements = recipe.render_requirements(be, ref.task)
    (folder / "requirements.txt").write_text(requirements)
    run_env = {**cache_env(be), **(env or {})}

    cached_before = cache_files(be)
    device = execute(str(script), timeout=timeout, env=run_env, cwd=str(folder), memory_limit_bytes=memory_limit_bytes,
                     cpus=cpus)
    _save_logs(folder, "device", device)
    row = _base_row(ref, be, params, run_py, requirements)
    row.update(neuron_cores=plan.cores, parallelism=plan.parallelism, wall_s=device.wall_s, parameters=plan.parameters)
    payload = device.payload or {}
    timings = payload.get("timings") or {}
    for key in ("load_s", "compile_s", "generate_s", "ttft_s", "decode_tokens_per_s"):
        row[key] = timings.get(key)

    if not (device.payload and device.payload.get("ok")):
        row.update(classify_failure(device, timeout))
        return row

    row["cache_hit"] = cache_hit(payload.get("compile_cache"), cached_before, cache_files(be))
    row.update(
        tokens=payload["tokens"],
        text=payload.get("text"),
        peak_memory_bytes=payload.get("peak_memory_bytes"),
        peak_memory_per_rank=payload.get("peak_memory_per_rank") or (
            [payload["peak_memory_bytes"]] if payload.get("peak_memory_bytes") is not None else None),
    )
    # The reference holds the same weights in the same dtype on the host: affordable or not.
    if plan.cores > 1 and plan.weight_bytes > host_reference_budget():
        judgement = make_judge(judge_model).judge(payload.get("text") or "")
        row.update(result=PASS if judgement.ok else FAIL, verification=judgement.verification if judgement.ok else None,
                   stage=None if judgement.ok else "mismatch",
                   error=None if judgement.ok else f"the judge rejected the text: {judgement.reason}")
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
                            cwd=str(folder), cpus=cpus)
        _save_logs(folder, "reference", reference)
        if not (reference.payload and reference.payload.get("ok")):
            failure = classify_failure(reference, REFERENCE_TIMEOUT_S)
            row.update(result=FAIL, stage="reference", traceback=failure["traceback"],
                       error=f"CPU reference failed ({failure['stage']}): {failure['error']}")
            return row
        reference_payload = reference.payload
        store_reference(key, reference_payload)
    row["reference_tokens"] = reference_payload["tokens"]
    verdict = compare_tokens(payload["tokens"], reference_payload, params["dtype"])
    row.update(result=verdict.result, stage=verdict.stage, verification=verdict.verification, error=verdict.error,
               first_divergence=verdict.first_divergence, divergence_margin=verdict.divergence_margin)
    return row


def cache_hit(counters: dict | None, before: set[str], after: set[str]) -> bool:
    """Did the run find its graphs in the cache? Inductor counts hits and misses; elsewhere, no new cache files."""
    if counters is not None and counters.get("hits", 0) + counters.get("misses", 0) > 0:
        return counters["misses"] == 0
    return bool(before) and not (after - before)


def _base_row(ref: ModelRef, be: Backend, params: dict, run_py: str | None, requirements: str | None) -> dict:
    compiler, compiler_version = versions.compiler_for(be)
    core = versions.core_versions()
    return results.new_row(
        model_id=ref.model_id,
        task=ref.task,
        model_type=ref.model_type,
        twin_of=ref.twin_of,
        neuron_cores=1,
        parallelism="none",
        backend=be.name,
        compiler=compiler,
        compiler_version=compiler_version,
        neuronx_cc=core["neuronx-cc"] if compiler == "neuronx-cc" else None,
        library="transformers",
        library_version=core["transformers"],
        torch=core["torch"],
        torch_neuronx=core["torch-neuronx"],
        dtype=params["dtype"],
        packages=versions.installed_packages(),
        run_py=run_py,
        requirements=requirements,
    )


def _meaningful_last_line(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("warnings.warn", "  ")) and "%|" not in line:
            return line[:500]
    return None


def classify_failure(outcome: ProcessOutcome, timeout: float) -> dict:
    """Stage, error line and traceback for a process that did not report success."""
    payload = outcome.payload
    if payload and not payload.get("ok"):
        return {"result": FAIL, "stage": payload.get("stage") or "run", "error": payload.get("error"),
                "traceback": payload.get("traceback") or outcome.stderr[-20000:]}
    tail = outcome.stderr[-20000:]
    if outcome.timed_out:
        return {"result": FAIL, "stage": "timeout", "error": f"no result within {timeout:g} s; the run was stopped",
                "traceback": tail}
    sig = outcome.signal_name
    if sig == "SIGKILL":
        # Killed from outside without our timeout: the kernel's out-of-memory killer.
        return {"result": FAIL, "stage": "oom", "error": "the process was killed (SIGKILL), most likely out of memory",
                "traceback": tail}
    if sig:
        return {"result": FAIL, "stage": "run", "error": f"the process died with {sig}", "traceback": tail}
    last = _meaningful_last_line(outcome.stderr) or f"exit status {outcome.returncode} without a result line"
    stage = "oom" if ("MemoryError" in last or "out of memory" in last.lower()) else "run"
    return {"result": FAIL, "stage": stage, "error": last, "traceback": tail}


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
    if row.get("parallelism") not in (None, "none"):
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

