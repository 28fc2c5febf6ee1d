"""One model end to end: model spec -> plan -> run.py (rendered) -> its process tree, with the measuring around the
file's own functions -> verification against the CPU reference (or a judge) -> result row.

Taught in notebook 02.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core import versions, vocab
from neuronhelpers.core.backends import Backend, get_backend
from neuronhelpers.core.errors import say
from neuronhelpers.core.integrity import DamagedFile
from neuronhelpers.core.network import offline_env
from neuronhelpers.core.processes import parse_visible_cores
from neuronhelpers.core.settings import DEFAULT_TIMEOUT_S, REFERENCE_TIMEOUT_S, home
from neuronhelpers.core.topology import neuron_topology
from neuronhelpers.core.vocab import EXCLUDED, FAIL, PASS, UNTESTED
from neuronhelpers.models.resolve import TWIN_WEIGHTS, ModelRef, resolve_model
from neuronhelpers.plan.cores import Plan, host_reference_budget, plan_model
from neuronhelpers.process.tree import (
    KILLED_FROM_OUTSIDE,
    ProcessOutcome,
    execute,
    killed_from_outside,
    runs_abandoned,
)
from neuronhelpers.recipes import render
from neuronhelpers.run.compile_cache import cache_env, cache_files, named_entries, set_aside, unparseable_entries
from neuronhelpers.run.judge import make_judge
from neuronhelpers.run.measure import eager_not_tried
from neuronhelpers.run.reference import cached_reference, reference_key, store_reference
from neuronhelpers.store import schema
from neuronhelpers.twins import build
from neuronhelpers.twins.own import own_of
from neuronhelpers.verdict.classify import classify_failure
from neuronhelpers.verdict.declared import declared_fullgraph
from neuronhelpers.verdict.evidence import eager_columns, evidence_level, speedup, verdict_words
from neuronhelpers.verdict.verify import check_sensitivity, output_digest, verify_outputs

MEASURING = "neuronhelpers.run.measure"  # the module that runs a rendered run.py with the measuring around it


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
            twin_from=self.ref.twin_from, config_digest=self.ref.config_digest,
            config_changes=self.ref.config_changes, weights=self.ref.weights, revision=self.ref.revision,
            **dict(self.ref.config_source or ()), **versions.version_columns(self.backend, self.library),
            neuron_cores=None if self.plan.excluded else self.plan.cores,
            parallelism=None if self.plan.excluded else self.plan.parallelism,
            parameters=self.plan.parameters, dtype=self.params["dtype"],
        )

    def resume_key(self) -> tuple:
        return schema.resume_key(self.identity())


def plan_run(model: str | ModelRef, *, backend: str | Backend | None = None, dtype: str | None = None,
             trust_remote_code: bool = False, cores: int | None = None) -> PlannedRun:
    """Resolve and plan a model (no process is started): the planner picks the core count unless ``cores`` forces
    one."""
    ref = model if isinstance(model, ModelRef) else resolve_model(model, trust_remote_code=trust_remote_code)
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    plan = plan_model(ref, be, dtype=dtype, cores=cores)
    params = render.recipe_params(ref, be, dtype=dtype, trust_remote_code=trust_remote_code,
                                  cores=plan.cores or 1,
                                  parallelism=plan.parallelism if plan.cores else vocab.NO_PARALLELISM)
    return PlannedRun(ref, be, plan, params, trust_remote_code)


def on_this_node(planned: PlannedRun) -> PlannedRun:
    """A run planned elsewhere (a Ray sweep's driver), ready on the node that runs it, with the same plan: a model is
    planned once per run. Where the model's files are not on this node (a twin the driver built, a Hub snapshot in the
    driver's cache), the model is resolved here again (its own checkpoint, twin or cache), and only its path
    changes."""
    if Path(planned.ref.path).exists():
        return planned
    ref = resolve_model(planned.ref.model_id, trust_remote_code=planned.trust_remote_code)
    if {"twin_files", "shelf_files"} & set(planned.params):  # run.py names it by id and files, finds its folder
        return dataclasses.replace(planned, ref=ref)
    return dataclasses.replace(planned, ref=ref, params={**planned.params, "model_path": ref.path})


def untested_row(model_id: str, backend: Backend, *, stage: str, error: str, cause: str, task: str | None = None,
                 model_type: str | None = None, twin_of: str | None = None, library: str = vocab.TRANSFORMERS,
                 weights: str | None = None, **columns) -> dict:
    """A row that says no verdict could be reached here, and why (never a FAIL); ``columns``: further identity."""
    return schema.new_row(
        model_id=model_id, task=task, model_type=model_type, twin_of=twin_of, weights=weights, **columns,
        **versions.version_columns(backend, library),
        result=UNTESTED, stage=stage, error=error, cause=cause, packages=versions.installed_packages())


def prepare_run(model: str | ModelRef, *, backend: str | Backend | None = None, dtype: str | None = None,
                trust_remote_code: bool = False, cores: int | None = None) -> PlannedRun | dict:
    """``plan_run``, or the UNTESTED row when no verdict can be reached here (a twin that cannot be built; EXCLUDED
    where no twin was written).

    Bad input (an unknown id, a model not at hand offline) still raises UserError: it is not a row.
    """
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    try:
        return plan_run(model, backend=be, dtype=dtype, trust_remote_code=trust_remote_code, cores=cores)
    except DamagedFile as exc:  # a file damaged before the model ran: UNTESTED (input), naming the file
        model_id, weights = named_model(model)
        return untested_row(model_id, be, stage=vocab.UNTESTED_INPUT, cause=exc.cause, weights=weights,
                            error=f"{exc} ({exc.path}): download or save that file again; the next sweep runs "
                                  "the model again")
    except build.TwinUnavailable as exc:
        library = vocab.LIBRARY_FOR_TASK.get(exc.spec.task, vocab.TRANSFORMERS)
        own = own_of(exc.spec) or {}  # a model twin's: whose config it was built from
        columns = {"twin_from": own.get("twin_from"), "config_digest": own.get("digest"), **(own.get("source") or {})}
        if exc.stage == EXCLUDED:  # no twin was written for it: deliberately not run (vocab.UNTESTED_TWIN's rule)
            return schema.new_row(model_id=exc.spec.model_id, task=exc.spec.task, model_type=exc.spec.model_type,
                                  twin_of=exc.spec.model_type, weights=TWIN_WEIGHTS, result=EXCLUDED, error=exc.reason,
                                  **columns, **versions.version_columns(be, library),
                                  packages=versions.installed_packages())
        return untested_row(exc.spec.model_id, be, stage=exc.stage, error=str(exc), cause=exc.cause, task=exc.spec.task,
                            model_type=exc.spec.model_type, twin_of=exc.spec.model_type, weights=TWIN_WEIGHTS,
                            library=library, **columns)


def named_model(model: str | ModelRef) -> tuple[str, str | None]:
    """(model_id, weights) a row names a model by before it could be resolved: a folder by its absolute path."""
    if isinstance(model, ModelRef):
        return model.model_id, model.weights
    if os.path.isdir(model):
        return str(Path(model).resolve()), vocab.WEIGHTS_FOLDER
    return model, None


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
    if planned.plan.excluded:
        return schema.new_row(**planned.identity(), result=EXCLUDED, error=planned.plan.excluded,
                               packages=versions.installed_packages())
    shortfall = core_shortfall(planned, env)
    if shortfall:  # not the model's failure: this machine (or slot) cannot give it the cores its plan needs
        ref = planned.ref
        return untested_row(ref.model_id, planned.backend, stage=vocab.UNTESTED_INFRASTRUCTURE, error=shortfall,
                            cause="fewer NeuronCores here than the plan needs", task=ref.task,
                            model_type=ref.model_type, twin_of=ref.twin_of, library=planned.library,
                            weights=ref.weights)
    folder = Path(workdir) if workdir else run_dir(planned.ref.model_id)
    run = _RunFolder.write(planned, folder, env)
    row = _verified_row(planned, run, _Checks(timeout, memory_limit_bytes, cpus, reference_model, dtype, judge_model))
    row["speedup"] = speedup(row)
    row["evidence"] = evidence_level(row)
    return row


@dataclass
class _Checks:
    """How one run is executed and checked (run_model's arguments beyond the model)."""

    timeout: float
    memory_limit_bytes: int | None
    cpus: set[int] | None
    reference_model: str | ModelRef | None
    dtype: str | None
    judge_model: str | None


def _verified_row(planned: PlannedRun, run: _RunFolder, checks: _Checks) -> dict:
    """The device run, then its check: against the CPU reference, by a judge, or (failed) with the eager run beside."""
    cached_before = cache_files(planned.backend)
    device = _device_outcome(planned, run, checks)
    _save_logs(run.folder, "device", device)
    row = _device_row(planned, run, device)
    if not (device.payload and device.payload.get("ok")):
        row.update(classify_failure(device, checks.timeout))
        if row["result"] == FAIL:
            row["device_eager"] = _device_eager_after_failure(planned, run, row, checks)
        return row
    row["cache_hit"] = cache_hit(device.payload.get("compile_cache"), cached_before, cache_files(planned.backend))
    plan = planned.plan
    # The reference holds the same weights in the same dtype on the host: affordable or not.
    if planned.library == vocab.TRANSFORMERS and plan.cores > 1 and plan.weight_bytes > host_reference_budget():
        row.update(_judged(device.payload.get("text") or "", checks.judge_model))
        return row
    reference = _reference_payload(planned, run, checks.reference_model, checks.dtype, checks.cpus)
    row["reference_cached"] = reference.cached
    if reference.failure is not None:
        row.update(reference.failure)
        return row
    row.update(verify_outputs(planned.params, device.payload, reference.payload))
    row.update(check_sensitivity(planned.params, device.payload.get("perturbed"), reference.payload))
    if row["result"] == FAIL and row["stage"] == vocab.STAGE_MISMATCH and row.get("tokens") is not None:
        row.update(static_cache_blame(row, _static_cache_tokens_on_cpu(planned, run, row, checks)))
    return row


HEALING_TRIES = 2  # runs again after a kill from outside or a damaged compile-cache entry, at most


def _device_outcome(planned: PlannedRun, run: _RunFolder, checks: _Checks) -> ProcessOutcome:
    """The device run, run again where what failed it was not the model: a SIGKILL no timeout or out-of-memory kill
    explains (once), or a compile-cache entry it could not read (set aside, then compiled again). Each says so in
    one line."""
    device = run.measured(checks)
    killed = False
    for _ in range(HEALING_TRIES):
        if device.payload and device.payload.get("ok"):
            break
        entries = named_entries(f"{(device.payload or {}).get('traceback') or ''}\n{device.stderr}", planned.backend)
        if entries:
            entries = sorted({*entries, *unparseable_entries(planned.backend)})
            aside = set_aside(entries, planned.backend)
            more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
            names = ", ".join(e.name for e in entries[:3]) + more
            say(f"{planned.ref.model_id}: the compile cache's {names} could not be read: set aside in {aside}; "
                "compiling again")
        elif killed_from_outside(device) and not killed and not runs_abandoned():  # an interrupted sweep's kill
            killed = True
            say(f"{planned.ref.model_id}: the run was {KILLED_FROM_OUTSIDE}; running it once more")
        else:
            break
        device = run.measured(checks)
    return device


def static_cache_blame(row: dict, cpu_static_tokens: list | None) -> dict:
    """Before a token mismatch is blamed on the compile: where transformers' own generate() with the recipe's static
    cache, run eagerly on CPU with nothing compiled, already writes the device's tokens, the row keeps FAIL at mismatch
    with ``vocab.CAUSE_STATIC_CACHE`` (``causes`` ranks it apart); else the row is unchanged."""
    if cpu_static_tokens is None or list(cpu_static_tokens) != list(row["tokens"]):
        return {}
    return {"cause": vocab.CAUSE_STATIC_CACHE,
            "error": f"{row.get('error') or 'tokens diverge from the CPU reference'}; generate() with the same static "
                     "cache, eagerly on CPU with nothing compiled, writes these same tokens: the static cache differs "
                     "from the dynamic cache the reference uses, not the compiler"}


def _static_cache_tokens_on_cpu(planned: PlannedRun, run: _RunFolder, row: dict, checks: _Checks) -> list | None:
    """The tokens generate() writes with the recipe's static cache, eagerly on CPU. On CPU the eager run measured beside
    the compiled one is exactly that; elsewhere a CPU rendering of the same run.py runs with ``--eager`` (a run as
    large as the CPU reference, which already ran). None where neither could be had."""
    if planned.backend.name == "cpu" and row.get("eager_equals_compiled") is not None:
        return row["tokens"] if row["eager_equals_compiled"] else None
    params = render.recipe_params(planned.ref, get_backend("cpu"), dtype=planned.params["dtype"])
    script = run.folder / "static_cache_cpu_run.py"
    script.write_text(render.render_run_py(params))
    eager = execute(None, [str(script), "--eager"], module=MEASURING, timeout=REFERENCE_TIMEOUT_S, env=run.env,
                    cwd=str(run.folder), cpus=checks.cpus, fork=run.fork)
    _save_logs(run.folder, "static_cache_cpu", eager)
    return eager.payload.get("tokens") if eager.payload and eager.payload.get("ok") else None


def _device_eager_after_failure(planned: PlannedRun, run: _RunFolder, row: dict, checks: _Checks) -> str:
    """After a compiled failure: does the device run the model eagerly, with the recipe's own static cache? A fresh
    process loads the file's model and runs it with nothing compiled (``run.measure run.py --eager``; on CPU too: the
    CPU reference uses a dynamic cache, so it would not show that the static-cache path runs). A row whose run
    measured its eager call after the compiled ones already says."""
    if row.get("device_eager"):
        return row["device_eager"]
    if row.get("stage") == vocab.STAGE_TIMEOUT:
        return f"{vocab.DEVICE_EAGER_NOT_TRIED}: the compiled run timed out; an eager one is not given the time again"
    why = eager_not_tried(planned.params, planned.plan.cores > 1, planned.plan.parameters or 0)
    if why:
        return f"{vocab.DEVICE_EAGER_NOT_TRIED}: {why}"
    eager = run.measured(checks, "--eager")
    _save_logs(run.folder, "eager", eager)
    if eager.payload and eager.payload.get("ok"):
        return vocab.DEVICE_EAGER_RAN
    outcome = classify_failure(eager, checks.timeout)
    if outcome["result"] != FAIL or outcome["stage"] == vocab.STAGE_TIMEOUT:  # not the model's answer: say so
        return f"{vocab.DEVICE_EAGER_NOT_TRIED}: the eager run could not finish here ({outcome['stage']})"
    return f"{vocab.DEVICE_EAGER_FAILED}: {outcome['stage']}: {outcome['error']}"[:500]


def neuron_cores_here(env: dict | None = None) -> tuple[int, str]:
    """(how many NeuronCores a run started now may use, where that number comes from): the slot it was given
    (NEURON_RT_VISIBLE_CORES, in the run's environment or this process's), else the instance's logical cores."""
    visible = (env or {}).get("NEURON_RT_VISIBLE_CORES") or os.environ.get("NEURON_RT_VISIBLE_CORES")
    cores = parse_visible_cores(visible)
    if cores is not None:
        return len(cores), f"its slot (NEURON_RT_VISIBLE_CORES={visible})"
    topology = neuron_topology()
    return topology.cores, f"this instance ({topology.describe()})"


def core_shortfall(planned: PlannedRun, env: dict | None = None) -> str | None:
    """Why a neuron run cannot start here, when its plan needs more cores than it may use; None when it fits (or
    the backend is not neuron: CPU and CUDA ranks need no NeuronCores)."""
    if planned.backend.name != "neuron" or not planned.plan.cores:
        return None
    have, where = neuron_cores_here(env)
    if planned.plan.cores <= have:
        return None
    return (f"planned on {planned.plan.cores} NeuronCores, but {where} has {have}: run it where {planned.plan.cores} "
            "cores are free (a larger instance, or fewer --jobs)")


@dataclass
class _RunFolder:
    """A run's folder as the harness wrote it: run.py, requirements.txt, the environment and launcher it runs with."""

    folder: Path
    script: Path
    run_py: str
    requirements: str
    env: dict
    fork: bool

    @classmethod
    def write(cls, planned: PlannedRun, folder: Path, env: dict | None) -> "_RunFolder":
        folder.mkdir(parents=True, exist_ok=True)
        run_py = render.render_run_py(planned.params)
        script = folder / "run.py"
        script.write_text(run_py)
        requirements = render.render_requirements(planned.backend, planned.ref.task)
        (folder / "requirements.txt").write_text(requirements)
        run_env = {**cache_env(planned.backend), **offline_env(), **(env or {})}
        fork = planned.backend.name != "neuron"  # the Neuron runtime is not known to be safe to fork: fresh processes
        return cls(folder, script, run_py, requirements, run_env, fork)

    def measured(self, checks: _Checks, *flags: str) -> ProcessOutcome:
        """run.py on the device with the measuring around its own functions (``run.measure``), in its process tree."""
        return execute(None, [str(self.script), *flags], module=MEASURING, timeout=checks.timeout, env=self.env,
                       cwd=str(self.folder), memory_limit_bytes=checks.memory_limit_bytes, cpus=checks.cpus,
                       fork=self.fork)


def _device_row(planned: PlannedRun, run: _RunFolder, device: ProcessOutcome) -> dict:
    """The row as far as the device run tells it: identity, run.py, timings, figures and outputs."""
    row = schema.new_row(**planned.identity(), packages=versions.installed_packages(), run_py=run.run_py,
                          requirements=run.requirements, wall_s=device.wall_s)
    payload = device.payload or {}
    timings = payload.get("timings") or {}
    for key in ("load_s", "compile_s", "generate_s", "ttft_s", "decode_tokens_per_s"):
        row[key] = timings.get(key)
    figures = payload.get("figures") or {}  # the other libraries' warm figures (sentences/s; s per step, per image)
    for key in ("items_per_s", "step_s", "image_s"):
        row[key] = figures.get(key)
    row.update(eager_columns(payload))
    if row["declared_fullgraph"] is None and planned.library == vocab.TRANSFORMERS:  # a failed run loaded no class
        row["declared_fullgraph"] = declared_fullgraph(planned.ref.model_type, planned.ref.task)
    if payload.get("ok"):
        peak = payload.get("peak_memory_bytes")
        row.update(retraced=payload.get("retraced"), tokens=payload.get("tokens"), text=payload.get("text"),
                   prompt_tokens=payload.get("prompt_tokens"),
                   output_digest=output_digest(planned.library, payload), peak_memory_bytes=peak,
                   peak_memory_per_rank=payload.get("peak_memory_per_rank") or ([peak] if peak is not None else None))
    return row


def _judged(text: str, judge_model: str | None) -> dict:
    """The verdict of a sharded run too large for a CPU reference: the judge reads its text."""
    judge = make_judge(judge_model)
    judgement = judge.judge(text)
    if judgement.ok:
        return dict(judge=judge.name, result=PASS, verification=judgement.verification, stage=None, error=None)
    return dict(judge=judge.name, result=FAIL, verification=None, stage=vocab.STAGE_MISMATCH,
                error=f"the judge rejected the text: {judgement.reason}", cause="judge rejected the text")


@dataclass
class _Reference:
    payload: dict | None
    cached: bool
    failure: dict | None = None  # the row's columns when the reference could not be had


def _reference_payload(planned: PlannedRun, run: _RunFolder, reference_model, dtype, cpus) -> _Reference:
    """The CPU reference's outputs: from the reference cache, else a reference run of the same (or the named) model."""
    reference_params, reference_script = planned.params, run.script
    if reference_model is not None:
        other = reference_model if isinstance(reference_model, ModelRef) else resolve_model(reference_model)
        reference_params = render.recipe_params(other, planned.backend, dtype=dtype)
        reference_script = run.folder / "reference_run.py"
        reference_script.write_text(render.render_run_py(reference_params))
    key = reference_key(reference_params)
    cached = cached_reference(key)
    if cached is not None:
        return _Reference(cached, True)
    reference = execute(str(reference_script), ["--reference"], timeout=REFERENCE_TIMEOUT_S, env=run.env,
                        cwd=str(run.folder), cpus=cpus, fork=run.fork)
    _save_logs(run.folder, vocab.STAGE_REFERENCE, reference)
    if reference.payload and reference.payload.get("ok"):
        store_reference(key, reference.payload)
        return _Reference(reference.payload, False)
    failure = classify_failure(reference, REFERENCE_TIMEOUT_S)
    if failure["result"] != UNTESTED:  # the reference failed: the model's device run is not blamed
        failure = dict(result=FAIL, stage=vocab.STAGE_REFERENCE, traceback=failure["traceback"], cause=failure["cause"],
                       error=f"CPU reference failed ({failure['stage']}): {failure['error']}")
    return _Reference(None, False, failure)


def cache_hit(counters: dict | None, before: set[str], after: set[str]) -> bool:
    """Did the run find its graphs in the cache? Inductor counts hits and misses; elsewhere, no new cache files."""
    if counters is not None and counters.get("hits", 0) + counters.get("misses", 0) > 0:
        return counters["misses"] == 0
    return bool(before) and not (after - before)


def _save_logs(folder: Path, name: str, outcome: ProcessOutcome) -> None:
    (folder / f"{name}.stdout.txt").write_text(outcome.stdout)
    (folder / f"{name}.stderr.txt").write_text(outcome.stderr)


def saved_output(folder: str | Path, process: str = "device") -> dict | None:
    """The JSON line one run.py process of a run printed (``device``, ``reference`` or ``eager``), from the logs the
    run folder keeps: what a row does not carry, e.g. a diffusion run's image. None where that process left no line."""
    from neuronhelpers.process.tree import last_json_line

    path = Path(folder) / f"{process}.stdout.txt"
    return last_json_line(path.read_text()) if path.is_file() else None


def summary_line(row: dict) -> str:
    """One readable line for a row: model, verdict (a PASS says whether its check could fail), cores, times, memory."""
    parts = [f"{row['model_id']}: " + verdict_words(row["result"], row.get("stage"), row.get("verification"),
                                                      row.get("check_sensitive"))]
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

