"""The sweep (``sweep_models``): run a list of models, each in its own process tree, writing each row as it finishes.

Resumable: a model already recorded for the same versions is skipped (``rerun=True`` forces it).
Parallel: ``jobs`` models at once, each pinned to a disjoint CPU set here, or to a disjoint
NeuronCore range on Trainium (NEURON_RT_VISIBLE_CORES). On many machines: ``fleet.sweep_on_ray``, which
shares this module's bookkeeping and writer (``SweepLog``), planning (``plan_for_sweep``) and per-model
function (``run_one``).

Taught in notebooks 01 and 06.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from neuronhelpers.core import settings, versions
from neuronhelpers.core.backends import Backend, get_backend
from neuronhelpers.core.errors import HarnessFault, Stopped, UserError, first_line, harness_fault_of, machine_fault
from neuronhelpers.core.settings import DEFAULT_TIMEOUT_S
from neuronhelpers.core.topology import neuron_topology
from neuronhelpers.core.vocab import EXCLUDED, LIBRARY_FOR_TASK, PASS, UNTESTED, UNTESTED_INFRASTRUCTURE
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.process import tree
from neuronhelpers.run.harness import PlannedRun, prepare_run, run_model, summary_line
from neuronhelpers.store import dataset, publish, schema

STALE = "stale"  # sweep(rerun=STALE): run again only the rows today's recipe and measuring would not make
SAME_FAULT_STOPS = 3  # this many completed models in a row with the same infrastructure cause stop a sweep


def excluded_rows(backend: Backend) -> list[dict]:
    """EXCLUDED rows for the Selected models deliberately left out, with their reasons (never run: no cores)."""
    return [
        schema.new_row(model_id=e.model_id, task=e.task, model_type=e.model_type, result=EXCLUDED, error=e.excluded,
                        **versions.version_columns(backend, LIBRARY_FOR_TASK[e.task]))
        for e in SELECTED
        if e.excluded
    ]


def selected_models(real: bool) -> list[str]:
    """The Selected list to sweep: real Hub ids (with the Hub at hand), else one twin per architecture."""
    from neuronhelpers.models.selected import selected_twins

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
    """Disjoint NeuronCore ranges (NEURON_RT_VISIBLE_CORES values), one per parallel job, over the instance's
    logical cores (NEURONHELPERS_NEURON_CORES, else /dev/neuron* and NEURON_LOGICAL_NC_CONFIG: 64 on a trn2.48xlarge,
    4 on a trn2.3xlarge). Inside a slot run.py gives each rank one of its cores (``rank_environment``); a model planned
    on more cores than its slot holds is recorded UNTESTED (infrastructure), so size --jobs to the largest model.
    """
    if jobs <= 1:
        return [None]
    total = total_cores or settings.neuron_cores() or neuron_topology().cores
    size = total // jobs
    if size < 1:
        raise UserError(f"--jobs {jobs} is more than the {total} NeuronCores here ({neuron_topology().describe()}): "
                        f"use at most {max(total, 1)}, or set NEURONHELPERS_NEURON_CORES")
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


class SweepLog:
    """A sweep's bookkeeping and its one writer: what is recorded already, rows appended as they come, counts, bar.

    The local sweep and the Ray sweep (``fleet.py``) share it: the same resume set (``schema.resume_key`` of
    each planned run against ``dataset.recorded_keys``), the same atomic ``dataset.append_rows`` per row, the
    same progress bar.
    """

    def __init__(self, out, be: Backend, total: int, *, rerun: bool | str, progress: bool, desc: str | None = None,
                 verdicts: bool = False):
        dataset.check_sweep_folder(out)
        self.out, self.be = out, be
        self.verdicts = verdicts  # a line per model as its row is written (the demo's: a verdict on screen at once)
        # rerun: True runs everything again; STALE what today's package would not make (a re-sweep after a recipe
        # change, resumable: what it has made since counts as recorded)
        where = publish.made_by_todays_recipe if rerun == STALE else None
        self.done = set() if rerun is True else dataset.recorded_keys(out, where=where)
        self.lock = threading.Lock()
        self.rows: list[dict] = []
        self.running: dict[str, None] = {}
        self.counts = {"passed": 0, "finished": 0, "recorded": 0, "skipped": 0}
        self.extra: dict[str, int] = {}  # further counters shown on the bar (the Ray sweep's retries)
        self.bar = _progress(total, progress, be, desc)
        self.stopped: Stopped | None = None  # why the sweep stopped early (no model starts after it is set)
        self._same_fault: list[str] = []  # the infrastructure causes of the last completed models, in a row
        self.interrupted = False  # Ctrl-C: the runs in flight were killed, so no row is written after it

    def stop(self, reason: Stopped) -> None:
        """Stop the sweep for a reason that is not any model's: no model starts after this, runs in flight finish,
        and ``raise_if_stopped`` raises it once they have."""
        with self.lock:
            self._stop_held(reason)

    def _stop_held(self, reason: Stopped) -> None:
        """``stop`` with the lock already held (the writer's own stops): the first reason stands."""
        if self.stopped is None:
            self.stopped = reason
            self.say(f"stopping: {reason}")

    def interrupt(self) -> None:
        """Ctrl-C: no model starts, and no row is written from now on (a run cut short has no verdict)."""
        with self.lock:
            self.interrupted = True
            if self.stopped is None:
                self.stopped = Stopped("interrupted")

    def raise_if_stopped(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def fault_of_ours(self, model: str, step: str, exc: BaseException) -> None:
        """An exception of this process while ``step`` of ``model`` ran (our code, never the model's run, which is a
        child's): a stop, with one line that names the model, the step and what was raised."""
        if self.interrupted:  # the interrupt killed its run: what followed is no fault, and nothing is written
            return
        if isinstance(exc, Stopped):
            self.stop(exc)
            return
        disk = machine_fault(str(exc))
        if disk:
            self.stop(Stopped(f"{disk} while {step} {model}: free space (or raise the limit) and run the same "
                              "command again: it resumes"))
            return
        fault = harness_fault_of(exc) or f"{first_line(exc, name=True)} (a fault of ours, not the model's)"
        self.stop(HarnessFault(f"a fault of neuronhelpers' own code while {step} {model}: {fault}; nothing was "
                               "recorded for it: fix the code (or reinstall) and run the same command again"))

    def is_recorded(self, planned: PlannedRun | dict) -> bool:
        key = schema.resume_key(planned) if isinstance(planned, dict) else planned.resume_key()
        return key in self.done

    def say(self, line: str) -> None:
        _say(line, self.bar)

    def show(self) -> None:
        if self.bar is not None:
            extra = "".join(f" {k}={v}" for k, v in self.extra.items() if v)
            self.bar.set_postfix_str(f"passed={self.counts['passed']}/{self.counts['finished']} "
                                     f"recorded={self.counts['recorded']}{extra} "
                                     f"running={','.join(self.running) or '-'}")

    def start(self, model: str) -> None:
        with self.lock:
            self.running[model] = None
            self.show()

    def append(self, rows: list[dict]) -> None:
        """Write rows that are not model runs (the Selected exclusions) without counting them."""
        if rows:
            with self.lock:
                dataset.append_rows(self.out, rows)

    def end(self, model: str, row: dict | None = None, *, recorded: bool = False, skipped: bool = False) -> None:
        """A model is done: its row is appended now (one writer, atomic), or it was recorded already, or skipped."""
        with self.lock:
            if self.interrupted:  # its run was killed by the interrupt: no verdict, and the next sweep runs it
                self.running.pop(model, None)
                return
            if row is not None:
                if not self._appended(model, row):
                    return
                self.rows.append(row)
                self.counts["finished"] += 1
                self.counts["passed"] += row["result"] == PASS
                if self.verdicts:
                    self.say(summary_line(row))
            self.counts["recorded"] += recorded
            self.counts["skipped"] += skipped
            self.running.pop(model, None)
            self.show()
            if self.bar is not None:
                self.bar.update(1)

    def _appended(self, model: str, row: dict) -> bool:
        """Append one row (the lock held); a full disk stops the sweep with the row unwritten (the next sweep runs the
        model again), and the same infrastructure cause in SAME_FAULT_STOPS completed models in a row stops it too."""
        try:
            dataset.append_rows(self.out, [row])
        except OSError as exc:
            disk = machine_fault(str(exc))
            if not disk:
                raise
            self.running.pop(model, None)
            self._stop_held(Stopped(f"{disk} while writing {model}'s row to {self.out}: every row before it is "
                                    "kept; free space (or raise the limit) and run the same command again"))
            return False
        infrastructure = row.get("result") == UNTESTED and row.get("stage") == UNTESTED_INFRASTRUCTURE
        self._same_fault = [*self._same_fault, row.get("cause") or ""][-SAME_FAULT_STOPS:] if infrastructure else []
        if len(self._same_fault) == SAME_FAULT_STOPS and len(set(self._same_fault)) == 1:
            self._stop_held(Stopped(
                f"the last {SAME_FAULT_STOPS} models all ended UNTESTED ({UNTESTED_INFRASTRUCTURE}) with the same "
                f"cause, '{self._same_fault[0]}': that is this machine, not the models; fix it and run the same "
                "command again (those rows are retried)"))
        return True

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def plan_for_sweep(model: str, be: Backend, log: SweepLog) -> PlannedRun | dict | None:
    """Resolve and plan one model of a sweep: the planned run, an UNTESTED row to record (no verdict can be
    reached here), or None when there is nothing to do (recorded already, or bad input: one line, no row)."""
    try:
        planned = prepare_run(model, backend=be)
    except UserError as err:
        # Bad input (an unknown id, a model not at hand offline) says nothing about the model: one line,
        # no row, and the sweep goes on. A rerun picks it up once it is fixed.
        log.say(f"skipped {model}: {err}")
        log.end(model, skipped=True)
        return None
    except Exception as exc:  # noqa: BLE001 - ours (a stop), or one line naming the model and the step
        if isinstance(exc, Stopped) or harness_fault_of(exc) or machine_fault(str(exc)):
            log.fault_of_ours(model, "planning", exc)
        else:
            log.say(f"skipped {model}: while planning it: {first_line(exc, name=True)}")
            log.end(model, skipped=True)
        return None
    if log.is_recorded(planned):
        log.end(model, recorded=True)
        return None
    return planned


def run_one(model: str | PlannedRun | dict, *, backend: str | Backend | None = None, cores: int | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, memory_limit_bytes: int | None = None, cpus: set[int] | None = None,
            env: dict | None = None, remedies: bool = False) -> dict:
    """One model of a sweep, run in its own process tree by the harness (the rendered run.py in a subprocess,
    with its timeout): its verified row. A crash, hang or out-of-memory is a row, never an exception. With
    ``remedies``, a FAIL's remedies are tried next and recorded in its row's ``remedies`` (run/remedies.py).

    A sweep passes the run it planned (or the UNTESTED row planning gave, returned as it is): a Ray task the
    driver's, on the node that runs it (``harness.on_this_node``). Given a model id, it is planned here.
    """
    planned = model if isinstance(model, (PlannedRun, dict)) else prepare_run(model, backend=backend, cores=cores)
    if isinstance(planned, dict):
        return planned  # UNTESTED: nothing could be run here
    row = run_model(planned, timeout=timeout, memory_limit_bytes=memory_limit_bytes, cpus=cpus, env=env)
    if remedies:
        from neuronhelpers.run.remedies import remedies_json, try_remedies

        row["remedies"] = remedies_json(try_remedies(planned, row, timeout=timeout,
                                                     memory_limit_bytes=memory_limit_bytes, cpus=cpus, env=env))
    return row


def sweep_models(models: list[str], out: str | Path, *, backend: str | Backend | None = None, jobs: int = 1,
          timeout: float = DEFAULT_TIMEOUT_S, rerun: bool | str = False, progress: bool = True,
          memory_limit_bytes: int | None = None, include_excluded: bool = False,
          remedies: bool = False, verdicts: bool = False) -> list[dict]:
    """Run every model not yet recorded in ``out`` and append its row there as soon as it finishes (``rerun``: True,
    every model again; ``STALE``, those whose row today's recipe and measuring would not make; ``remedies``: after a
    FAIL, its cause's remedies, recorded beside the verdict; ``verdicts``: a line per model as its row is written).

    "Recorded" is decided by the one resume key (``schema.resume_key``) of the model as resolved and
    planned, the same key its row carries: a folder given by a relative path, or a model planned on
    several cores, is recognised on the next sweep. ``fleet.sweep_on_ray`` does the same on a Ray cluster.
    """
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    out = Path(out)
    models = list(dict.fromkeys(models))
    log = SweepLog(out, be, len(models), rerun=rerun, progress=progress, verdicts=verdicts)
    if include_excluded:
        log.append([r for r in excluded_rows(be) if not log.is_recorded(r)])

    slots: queue.Queue = queue.Queue()
    for slot in (neuron_slots(jobs) if be.name == "neuron" else cpu_slots(jobs)):
        slots.put(slot)
    neuron = be.name == "neuron"

    def one(model: str) -> None:
        slot = slots.get()
        if log.stopped is not None:  # no model starts once the sweep is stopping
            slots.put(slot)
            return
        log.start(model)
        try:
            planned = plan_for_sweep(model, be, log)
            if planned is None:
                return
            try:
                row = planned if isinstance(planned, dict) else run_one(
                    planned, timeout=timeout, memory_limit_bytes=memory_limit_bytes, cpus=None if neuron else slot,
                    env={"NEURON_RT_VISIBLE_CORES": slot} if neuron and slot is not None else None, remedies=remedies)
            except Exception as exc:  # noqa: BLE001 - the model ran in a child: what this process raised is ours
                log.fault_of_ours(model, "running", exc)
                return
            log.end(model, row)
        finally:
            log.running.pop(model, None)
            slots.put(slot)

    try:
        with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            futures = [pool.submit(one, m) for m in models]
            try:
                for future in as_completed(futures):
                    future.result()
            except KeyboardInterrupt:
                _abandon(log, futures)
                raise
    finally:
        tree.resume_runs()
        log.close()
    log.raise_if_stopped()
    return log.rows


def _abandon(log: SweepLog, futures) -> None:
    """Ctrl-C on a sweep: no model starts, the runs in flight are killed at once rather than waited for (each run has
    its own session, so the terminal's SIGINT does not reach it), and nothing more is written."""
    log.interrupt()
    for future in futures:
        future.cancel()
    in_flight = len(log.running)
    tree.abandon_runs()
    log.say(f"interrupted: {in_flight} model(s) in flight stopped and not recorded; every row written stays, and the "
            "same command resumes")


def _say(line: str, bar) -> None:
    """One line to stderr that does not tear the progress bar."""
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def _progress(total: int, enabled: bool, be: Backend, desc: str | None = None):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc or f"sweep[{be.name}]", unit="model", dynamic_ncols=True)


def summary_frame(df):
    """The demo's table: model, result (with stage or verification), cores, wall time, peak memory."""
    import pandas as pd

    if df.empty:
        return pd.DataFrame(columns=["model", "result", "cores", "wall_s", "peak_MiB"])
    from neuronhelpers.verdict.evidence import verdict_words

    sensitive = df["check_sensitive"] if "check_sensitive" in df else [None] * len(df)
    return pd.DataFrame({
        "model": df["model_id"],
        "result": [verdict_words(r, s, v, c if isinstance(c, bool) else None)
                   for r, s, v, c in zip(df["result"], df["stage"], df["verification"], sensitive, strict=True)],
        "cores": df["neuron_cores"],
        "wall_s": df["wall_s"].round(1),
        "peak_MiB": (df["peak_memory_bytes"] / 2**20).round(0),
    }).reset_index(drop=True)
