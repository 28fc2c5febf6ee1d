"""The sweep: run a list of models, each in its own process tree, writing each row as it finishes.

Resumable: a model already recorded for the same versions is skipped (``rerun=True`` forces it).
Parallel: ``jobs`` models at once, each pinned to a disjoint CPU set here, or to a disjoint
NeuronCore range on Trainium (NEURON_RT_VISIBLE_CORES).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from . import dataset, results, versions
from .backends import Backend, get_backend
from .errors import UserError
from .harness import prepare_run, run_model
from .recipe import LIBRARY_FOR_TASK
from .selected import SELECTED
from .settings import DEFAULT_TIMEOUT_S
from .vocab import EXCLUDED, PASS


def excluded_rows(backend: Backend) -> list[dict]:
    """EXCLUDED rows for the Selected models deliberately left out, with their reasons (never run: no cores)."""
    compiler, compiler_version = versions.compiler_for(backend)
    core = versions.core_versions()
    return [
        results.new_row(model_id=e.model_id, task=e.task, model_type=e.model_type, result=EXCLUDED, error=e.excluded,
                        backend=backend.name, compiler=compiler, compiler_version=compiler_version,
                        neuronx_cc=core["neuronx-cc"] if compiler == "neuronx-cc" else None,
                        library=LIBRARY_FOR_TASK[e.task], library_version=versions.library_version(LIBRARY_FOR_TASK[e.task]),
                        torch=core["torch"])
        for e in SELECTED
        if e.excluded
    ]


def selected_models(real: bool) -> list[str]:
    """The Selected list to sweep: real Hub ids (with the Hub at hand), else one twin per architecture."""
    from .selected import selected_twins

    if real:
        return [e.model_id for e in SELECTED if not e.excluded]
    return selected_twins()


def read_model_file(path: str) -> list[str]:
    """Model ids from a text file, one per line; '#' starts a comment."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise UserError(f"cannot read model list '{path}': {exc.strerror}") from None
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def neuron_slots(jobs: int, total_cores: int | None = None) -> list[str | None]:
    """Disjoint NeuronCore ranges (NEURON_RT_VISIBLE_CORES values), one per parallel job.

    Each job sees its range as devices 0..n-1; a model planned for more cores than its range holds
    fails at load with the runtime's error, so size --jobs to the largest model (16 cores / jobs).
    """
    if jobs <= 1:
        return [None]
    total = total_cores or int(os.environ.get("NEURONHELPERS_NEURON_CORES", "16"))
    size = total // jobs
    if size < 1:
        raise UserError(f"--jobs {jobs} is more than the {total} NeuronCores here: use at most {total}")
    return [f"{i * size}-{(i + 1) * size - 1}" if size > 1 else str(i) for i in range(jobs)]


def cpu_slots(jobs: int) -> list[set[int] | None]:
    """Disjoint CPU sets, one per parallel job (None when running one at a time)."""
    if jobs <= 1:
        return [None]
    cpus = sorted(os.sched_getaffinity(0))
    if jobs > len(cpus):
        raise UserError(f"--jobs {jobs} is more than the {len(cpus)} CPUs here: use at most {len(cpus)}")
    size = len(cpus) // jobs
    return [set(cpus[i * size:(i + 1) * size]) for i in range(jobs)]


def sweep(models: list[str], out: str | Path, *, backend: str | Backend | None = None, jobs: int = 1,
          timeout: float = DEFAULT_TIMEOUT_S, rerun: bool = False, progress: bool = True,
          memory_limit_bytes: int | None = None, include_excluded: bool = False) -> list[dict]:
    """Run every model not yet recorded in ``out`` and append its row there as soon as it finishes.

    "Recorded" is decided by the one resume key (``results.resume_key``) of the model as resolved and
    planned, the same key its row carries: a folder given by a relative path, or a model planned on
    several cores, is recognised on the next sweep.
    """
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    out = Path(out)
    done = set() if rerun else dataset.recorded_keys(out)
    models = list(dict.fromkeys(models))
    if include_excluded:
        fresh = [r for r in excluded_rows(be) if rerun or results.resume_key(r) not in done]
        if fresh:
            dataset.append_rows(out, fresh)

    slots: queue.Queue = queue.Queue()
    for slot in (neuron_slots(jobs) if be.name == "neuron" else cpu_slots(jobs)):
        slots.put(slot)
    write_lock = threading.Lock()
    rows: list[dict] = []
    running: dict[str, None] = {}
    counts = {"passed": 0, "finished": 0, "recorded": 0, "skipped": 0}

    def show():
        if bar is not None:
            bar.set_postfix_str(f"passed={counts['passed']}/{counts['finished']} recorded={counts['recorded']} "
                                f"running={','.join(running) or '-'}")

    def one(model: str) -> dict | None:
        slot = slots.get()
        with write_lock:
            running[model] = None
            show()
        row = None
        try:
            neuron = be.name == "neuron"
            env = {"NEURON_RT_VISIBLE_CORES": slot} if neuron and slot is not None else None
            try:
                planned = prepare_run(model, backend=be)
            except UserError as err:
                # Bad input (an unknown id, a model not at hand offline) says nothing about the model: one line,
                # no row, and the sweep goes on. A rerun picks it up once it is fixed.
                _say(f"skipped {model}: {err}", bar)
                counts["skipped"] += 1
                planned = None
            if isinstance(planned, dict):  # no verdict can be reached here (e.g. the twin cannot be built)
                row = planned if rerun or results.resume_key(planned) not in done else None
            elif planned is not None:
                if rerun or planned.resume_key() not in done:
                    row = run_model(planned, timeout=timeout, memory_limit_bytes=memory_limit_bytes,
                                    cpus=None if neuron else slot, env=env)
            with write_lock:
                if row is not None:
                    dataset.append_rows(out, [row])
                    counts["finished"] += 1
                    counts["passed"] += row["result"] == PASS
                elif planned is not None:
                    counts["recorded"] += 1
                running.pop(model, None)
                show()
                if bar is not None:
                    bar.update(1)
            return row
        finally:
            slots.put(slot)

    bar = _progress(len(models), progress, be)
    try:
        with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            for future in as_completed([pool.submit(one, m) for m in models]):
                if future.result() is not None:
                    rows.append(future.result())
    finally:
        if bar is not None:
            bar.close()
    return rows


def _say(line: str, bar) -> None:
    """One line to stderr that does not tear the progress bar."""
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def _progress(total: int, enabled: bool, be: Backend):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"sweep[{be.name}]", unit="model", dynamic_ncols=True)



def summary_frame(df):
    """The demo's table: model, result (with stage or verification), cores, wall time, peak memory."""
    import pandas as pd

    if df.empty:
        return pd.DataFrame(columns=["model", "result", "cores", "wall_s", "peak_MiB"])
    detail = df["stage"].where(df["stage"].notna(), df["verification"]).fillna("")
    return pd.DataFrame({
        "model": df["model_id"],
        "result": df["result"] + detail.map(lambda d: f" ({d})" if d else ""),
        "cores": df["neuron_cores"],
        "wall_s": df["wall_s"].round(1),
        "peak_MiB": (df["peak_memory_bytes"] / 2**20).round(0),
    }).reset_index(drop=True)
