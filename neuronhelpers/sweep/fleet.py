"""Fleet sweeps on Ray: many machines (trn2 instances), one dataset, nothing lost when a node dies.

``neuronhelpers sweep ... --ray ADDRESS`` (or ``sweep_on_ray``) runs the same sweep as ``local.sweep_models``, with
each model as one Ray task:

- The driver (this process) resolves and plans every model, as the local sweep does: the plan says how many
  cores the model needs (the task's resource request) and gives the model its resume key, so what ``out``
  already records is skipped before anything is submitted. Planning on the driver is cheap (a config and the
  weights' headers; a twin is built once and cached) and is the only way to ask Ray for the right resources.
- A task asks for the planned cores: ``neuron_cores`` on ``neuron`` (Ray's built-in resource: it sets
  NEURON_RT_VISIBLE_CORES for the task), CPUs and an estimate of host memory elsewhere. It carries the driver's
  planned run (a model is planned once) and runs ``local.run_one`` on it (``harness.on_this_node`` resolves the
  model again only where its files are not on that node: checkpoints, twins and caches are the node's own), and
  the harness runs the rendered run.py in its own process tree with its timeout, so a crash, hang or
  out-of-memory stays a row.
- The row comes back to the driver, the dataset's one writer, which appends it at once (atomic, one Parquet
  file per version pair), exactly as the local sweep does.

Faults: a task whose node or worker process dies without a result is submitted again (Ray places it on a live
node), at most ``retries`` times; after that the model is recorded UNTESTED with stage ``infrastructure``.
A model whose planned cores no live node has is recorded the same way (never a task pending forever). A killed
driver loses only the runs in flight (Ray stops the tasks of a dead driver); the next sweep resumes.
Taught in notebook 06.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from neuronhelpers.core.backends import Backend, GiB, get_backend
from neuronhelpers.core.errors import UserError, first_line
from neuronhelpers.core.settings import DEFAULT_TIMEOUT_S
from neuronhelpers.core.vocab import UNTESTED, UNTESTED_INFRASTRUCTURE
from neuronhelpers.run.harness import PlannedRun, on_this_node, untested_row
from neuronhelpers.store import schema
from neuronhelpers.sweep.local import SweepLog, excluded_rows, plan_for_sweep, run_one

INSTALL_HINT = "pip install -e '.[fleet]' (or pip install 'ray>=2.60')"
DEFAULT_RETRIES = 2  # a model whose task dies without a result is tried at most 1 + 2 times
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # rows are small: a local cluster needs little shared memory


def import_ray():
    """Ray, or a one-line UserError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


@dataclass
class FleetReport:
    """What a Ray sweep did besides writing rows: tasks, retries, where each model ran."""

    planned: int = 0  # models submitted as tasks
    submitted: int = 0  # tasks submitted, retries included
    retried: Counter = field(default_factory=Counter)  # model -> tasks submitted again after a node/worker died
    nodes: dict = field(default_factory=dict)  # model -> id of the node whose task returned its row
    task_seconds: dict = field(default_factory=dict)  # model -> seconds its task ran on that node
    infrastructure: list = field(default_factory=list)  # models recorded UNTESTED (infrastructure)
    recorded: int = 0  # rows this sweep wrote for its models
    cluster_nodes: int = 0  # live nodes when the sweep started

    def summary(self) -> str:
        retried = sum(self.retried.values())
        return (f"ray: {self.planned} models as tasks on {self.cluster_nodes} nodes; {self.recorded} rows recorded; "
                f"{retried} task(s) submitted again after a node or worker died ({len(self.retried)} models); "
                f"{len(self.infrastructure)} recorded UNTESTED (infrastructure)")


# ------------------------------------------------------------------------------------------------
# Connecting
# ------------------------------------------------------------------------------------------------


class _Quiet(logging.Filter):
    def filter(self, record):  # Ray's notice that a new local cluster uses token auth (we set it up ourselves)
        return "Token authentication is enabled" not in record.getMessage()


def connect(address: str = "auto"):
    """Connect to a Ray cluster (``auto``: the one running on this machine; ``host:port``; ``local``: start one
    here). An existing connection is used as it is. Returns the function that undoes this call (disconnects,
    which also stops a cluster started with ``local``), or None when nothing was done.

    Ray 2.60 turns on token authentication for a cluster that ``ray.init`` starts: a ``local`` cluster gets a
    fresh token in this process's environment (RAY_AUTH_TOKEN, inherited by the cluster's processes) unless a
    token is already configured, so nothing is written to ~/.ray. A cluster started with ``ray start`` uses a
    token only when one exists on its nodes; connecting to it then needs the same token (RAY_AUTH_MODE=token
    and ~/.ray/auth_token or RAY_AUTH_TOKEN): Ray's error says so, in one line.
    """
    ray = import_ray()
    if ray.is_initialized():
        return None
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    kwargs = dict(logging_level=logging.ERROR, log_to_driver=False)
    try:
        if address == "local":
            if os.environ.get("RAY_AUTH_MODE", "token") == "token" and not _token_configured():
                os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
            logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(_Quiet())
            ray.init(address="local", include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        _restore(saved)
        raise UserError(f"no Ray cluster at '{address}': start one (`ray start --head`) or use --ray local "
                        f"({first_line(exc)})") from None
    except ray.exceptions.AuthenticationError as exc:
        _restore(saved)
        raise UserError(f"the Ray cluster at '{address}' refused this driver: set RAY_AUTH_MODE=token and give it "
                        f"the cluster's token (~/.ray/auth_token or RAY_AUTH_TOKEN) ({exc.message})") from None

    def disconnect() -> None:
        ray.shutdown()
        _restore(saved)

    return disconnect


def _restore(saved: dict) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _token_configured() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return os.path.isfile(path)


# ------------------------------------------------------------------------------------------------
# What a task asks for, and whether any node can give it
# ------------------------------------------------------------------------------------------------


def core_resource_for(be: Backend) -> str:
    """The Ray resource one planned core is counted in: ``neuron_cores`` on Trainium, CPUs elsewhere."""
    return "neuron_cores" if be.name == "neuron" else "CPU"


def task_request(planned: PlannedRun, be: Backend, core_resource: str | None = None) -> dict:
    """The Ray resources a model's task asks for: {"CPU": n, "neuron_cores": n, "memory": bytes}."""
    cores = planned.plan.cores or 1
    resource = core_resource or core_resource_for(be)
    request = {"CPU": cores} if resource == "CPU" else {"CPU": 1, resource: cores}
    if be.name != "neuron":
        # Host memory: the weights live on the host (CPU) or pass through it (CUDA), in the run and in its
        # CPU reference one after the other; a load may briefly hold two copies. Plus torch itself.
        request["memory"] = 2 * planned.plan.weight_bytes + GiB
    return request


def _options(request: dict) -> dict:
    custom = {k: v for k, v in request.items() if k not in ("CPU", "memory")}
    # SPREAD: independent, heavy tasks go to the least loaded nodes rather than packing onto one.
    options = dict(num_cpus=request.get("CPU", 1), max_retries=0, retry_exceptions=False, scheduling_strategy="SPREAD")
    if custom:
        options["resources"] = custom
    if request.get("memory"):
        options["memory"] = int(request["memory"])
    return options


def live_nodes(ray) -> list[dict]:
    """Resources of each live node: [{"id": ..., "resources": {...}}]."""
    return [{"id": n["NodeID"], "resources": dict(n.get("Resources") or {})} for n in ray.nodes() if n.get("Alive")]


def fits(request: dict, nodes: list[dict]) -> bool:
    """Does some live node have every resource of the request (free or not)?"""
    return any(all(node["resources"].get(k, 0) >= v for k, v in request.items()) for node in nodes)


def shortfall(request: dict, nodes: list[dict]) -> str:
    """Why no node fits: the resource no node has enough of, and the most any node has."""
    for key, value in request.items():
        best = max((node["resources"].get(key, 0) for node in nodes), default=0)
        if best < value:
            amount = (lambda v: f"{v / GiB:.1f} GiB") if key == "memory" else (lambda v: f"{v:g}")
            return f"it needs {amount(value)} {key} on one node and the largest live node has {amount(best)}"
    return "no live node has all of " + ", ".join(f"{v:g} {k}" for k, v in request.items())


# ------------------------------------------------------------------------------------------------
# The task and the driver
# ------------------------------------------------------------------------------------------------


def _task(planned: PlannedRun, timeout: float, memory_limit_bytes: int | None, work) -> dict:
    """One model on a Ray worker: the driver's planned run, on this node (``harness.on_this_node``), through
    ``local.run_one`` (or ``Scheduling.work``, same arguments); returns the row, the node it ran on and how long it
    took there."""
    import ray

    start = time.monotonic()
    row = (work or run_one)(on_this_node(planned), timeout=timeout, memory_limit_bytes=memory_limit_bytes)
    return {"row": row, "node": ray.get_runtime_context().get_node_id(), "seconds": time.monotonic() - start}


@dataclass(frozen=True)
class Scheduling:
    """How a Ray sweep schedules its tasks and waits for them: ``sweep_on_ray(..., scheduling=Scheduling(...))``.

    The defaults are those of a real sweep. ``core_resource``: the Ray resource one planned core is counted in
    (default: ``neuron_cores`` on neuron, ``CPU`` elsewhere; a test cluster advertises ``neuron_cores`` on CPU
    nodes). ``work``: replaces ``local.run_one`` inside each task, with the same arguments (tests of scheduling
    and faults only). ``poll_s``: how long the driver waits for a task at a time. ``infeasible_grace_s``: how long a
    task that no live node can run any more stays pending before its model is recorded UNTESTED.
    """

    core_resource: str | None = None
    work: Callable | None = None
    poll_s: float = 1.0
    infeasible_grace_s: float = 10.0


@dataclass
class _Task:
    model: str  # as given
    planned: PlannedRun
    request: dict
    failures: list = field(default_factory=list)  # why earlier attempts died
    infeasible_since: float | None = None


def _failure_kind(ray, exc) -> str:
    kinds = ((ray.exceptions.NodeDiedError, "node died"), (ray.exceptions.OutOfMemoryError,
             "worker killed by Ray's memory monitor"), (ray.exceptions.WorkerCrashedError, "worker died"),
             (ray.exceptions.ObjectLostError, "result lost"))
    for cls, kind in kinds:
        if isinstance(exc, cls):
            return kind
    return type(exc).__name__


def infrastructure_row(planned: PlannedRun, be: Backend, *, error: str, cause: str) -> dict:
    """UNTESTED (stage infrastructure): the model never reported a result because the cluster failed it."""
    ref = planned.ref
    return untested_row(ref.model_id, be, stage=UNTESTED_INFRASTRUCTURE, error=error, cause=cause, task=ref.task,
                        model_type=ref.model_type, twin_of=ref.twin_of, library=planned.library)


NO_NODE_CAUSE = f"{UNTESTED_INFRASTRUCTURE}: no node with the resources the plan needs"


def _core_resource(ray, be: Backend, scheduling: Scheduling, report: FleetReport) -> str:
    """The resource planned cores are counted in, once some live node has it (else a UserError that says so)."""
    nodes = live_nodes(ray)
    report.cluster_nodes = len(nodes)
    resource = scheduling.core_resource or core_resource_for(be)
    if resource != "CPU" and not any(n["resources"].get(resource) for n in nodes):
        raise UserError(f"no node of the Ray cluster has '{resource}' (backend {be.name}): "
                        f"start the nodes on trn2 instances, or sweep with the backend the nodes have")
    return resource


class _Driver:
    """The driver of one Ray sweep: a task per planned model, each row appended (through the ``SweepLog``, the
    dataset's one writer) as its task returns it; a task whose node or worker died is submitted again at most
    ``retries`` times, and a model no live node can run is recorded UNTESTED (infrastructure)."""

    def __init__(self, ray, be: Backend, log: SweepLog, report: FleetReport, *, resource: str, timeout: float,
                 memory_limit_bytes: int | None, retries: int, scheduling: Scheduling):
        self.ray, self.be, self.log, self.report = ray, be, log, report
        self.resource, self.timeout, self.memory_limit_bytes = resource, timeout, memory_limit_bytes
        self.retries, self.scheduling = retries, scheduling
        self.remote = ray.remote(_task)
        self.pending: dict = {}  # ObjectRef -> _Task

    def run(self, models: list[str]) -> None:
        for model in models:  # planned here, submitted at once: the cluster starts while the rest is planned
            if self.log.stopped is not None:
                break
            planned = plan_for_sweep(model, self.be, self.log)
            if isinstance(planned, dict) or (planned is not None and planned.plan.excluded):
                self.log.end(model, run_one(planned))  # nothing to run (UNTESTED here, or EXCLUDED): recorded here
            elif planned is not None:
                self.report.planned += 1
                self.submit(_Task(model, planned, task_request(planned, self.be, self.resource)))
            self.harvest(0)
        grace = self.scheduling.infeasible_grace_s
        last_check = time.monotonic()
        while self.pending:
            if self.log.stopped is not None:  # a fault of ours or of the machines: the runs in flight are cancelled
                self.cancel_pending()
                return
            self.harvest(self.scheduling.poll_s)
            if time.monotonic() - last_check >= min(5.0, grace):
                last_check = time.monotonic()
                self.drop_infeasible(grace)

    def record(self, task: _Task, row: dict) -> None:
        self.log.end(task.model, row)
        self.report.recorded += 1
        if row.get("stage") == UNTESTED_INFRASTRUCTURE:
            self.report.infrastructure.append(task.model)

    def give_up(self, task: _Task, error: str, cause: str) -> None:
        self.log.say(f"{task.model}: {UNTESTED} ({UNTESTED_INFRASTRUCTURE}): {error}")
        self.record(task, infrastructure_row(task.planned, self.be, error=error, cause=cause))

    def _tasks_changed(self) -> None:
        self.log.extra["tasks"] = len(self.pending)

    def submit(self, task: _Task) -> None:
        """Submit the model's task, or record it UNTESTED when no live node has the resources it asks for."""
        nodes = live_nodes(self.ray)
        if not fits(task.request, nodes):
            self.give_up(task, f"no node of the Ray cluster can run it: {shortfall(task.request, nodes)}; add such a "
                               "node and sweep again", NO_NODE_CAUSE)
            return
        ref = self.remote.options(**_options(task.request)).remote(
            task.planned, self.timeout, self.memory_limit_bytes, self.scheduling.work)
        self.pending[ref] = task
        self.report.submitted += 1
        self._tasks_changed()
        self.log.show()

    def harvest(self, wait_s: float) -> None:
        """Collect the tasks that are done, waiting up to ``wait_s`` for the first one."""
        if not self.pending:
            return
        ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=wait_s)
        if ready:  # and every other one that is ready too
            ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
        for ref in ready:
            self.collect(ref)

    def collect(self, ref) -> None:
        """A finished task: its row recorded, or (its node or worker died) submitted again or given up."""
        exceptions = self.ray.exceptions
        task = self.pending.pop(ref)
        self._tasks_changed()
        try:
            returned = self.ray.get(ref)
        except exceptions.RayTaskError as exc:  # our own code raised inside the task
            cause = getattr(exc, "cause", None)
            if isinstance(cause, UserError) or isinstance(exc, UserError):
                self.log.say(f"skipped {task.model} on its node: {cause or exc}")
                self.log.end(task.model, skipped=True)
                return
            self.log.fault_of_ours(task.model, "running (on its node)", cause if isinstance(cause, Exception) else exc)
            return
        except exceptions.TaskCancelledError:
            return
        except exceptions.RayError as exc:  # the node or the worker died, the result was lost, ...
            self.died(task, exc)
            return
        row = returned["row"]
        self.report.nodes[task.model], self.report.task_seconds[task.model] = returned["node"], returned["seconds"]
        _check_versions(task, row, self.log)
        self.record(task, row)

    def died(self, task: _Task, exc: BaseException) -> None:
        """A task ended without a result: submitted again, or after ``retries`` more the model is given up."""
        task.failures.append(_failure_kind(self.ray, exc))
        if len(task.failures) <= self.retries:
            self.report.retried[task.model] += 1
            self.log.extra["retried"] = sum(self.report.retried.values())
            self.submit(task)
            return
        what = ", ".join(f"{kind} {n} time{'s' if n > 1 else ''}" for kind, n in Counter(task.failures).items())
        self.give_up(task, f"its Ray task failed {len(task.failures)} times without a result ({what}; last: "
                           f"{first_line(exc)}); the model never reported a result: sweep again to retry it",
                     f"{UNTESTED_INFRASTRUCTURE}: {what}")

    def drop_infeasible(self, grace_s: float) -> None:
        """Tasks no live node can run any more (the only node big enough died): recorded after ``grace_s``."""
        nodes = live_nodes(self.ray)
        now = time.monotonic()
        for ref, task in list(self.pending.items()):
            if fits(task.request, nodes):
                task.infeasible_since = None
                continue
            task.infeasible_since = task.infeasible_since or now
            if now - task.infeasible_since >= grace_s:
                self.pending.pop(ref)
                self._tasks_changed()
                self._cancel(ref)
                self.give_up(task, f"no live node of the Ray cluster can run it any more: "
                                   f"{shortfall(task.request, nodes)}; add such a node and sweep again", NO_NODE_CAUSE)

    def _cancel(self, ref) -> None:
        try:
            self.ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 - already finished or gone
            pass

    def cancel_pending(self) -> None:
        """The driver stops early (an error, Ctrl-C): stop the runs in flight."""
        for ref in list(self.pending):
            self._cancel(ref)


def sweep_on_ray(models: list[str], out: str | Path, *, address: str = "auto", backend: str | Backend | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, rerun: bool | str = False, progress: bool = True,
                 memory_limit_bytes: int | None = None, include_excluded: bool = False,
                 retries: int = DEFAULT_RETRIES, report: FleetReport | None = None,
                 scheduling: Scheduling | None = None) -> list[dict]:
    """``local.sweep_models`` on a Ray cluster: every model not yet recorded in ``out`` is one Ray task asking for
    its planned cores; each row is appended to ``out`` by this process as soon as its task returns it.

    ``address``: ``auto`` (the cluster this machine belongs to), ``host:port``, or ``local`` (start a cluster
    here for this sweep and stop it at the end); an existing ``ray.init`` connection is used as it is.
    ``retries``: how many times a model whose task died with its node or worker is submitted again before it is
    recorded UNTESTED (stage ``infrastructure``). ``report`` (a FleetReport) is filled in. ``scheduling`` (a
    ``Scheduling``) changes the resource cores are counted in, the work each task does, and the driver's waits.
    """
    ray = import_ray()
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    report = report if report is not None else FleetReport()
    scheduling = scheduling or Scheduling()
    models = list(dict.fromkeys(models))
    disconnect = connect(address)
    log = driver = None
    try:
        resource = _core_resource(ray, be, scheduling, report)
        log = SweepLog(Path(out), be, len(models), rerun=rerun, progress=progress, desc=f"sweep[{be.name}@ray]")
        driver = _Driver(ray, be, log, report, resource=resource, timeout=timeout,
                         memory_limit_bytes=memory_limit_bytes, retries=retries, scheduling=scheduling)
        if include_excluded:
            log.append([r for r in excluded_rows(be) if not log.is_recorded(r)])
        driver.run(models)
    finally:
        if driver is not None:
            driver.cancel_pending()
        if log is not None:
            log.close()
        if disconnect is not None:
            disconnect()
    log.raise_if_stopped()
    return log.rows


_warned_versions: set = set()


def _check_versions(task: _Task, row: dict, log: SweepLog) -> None:
    """A node that ran the model with other versions than the driver planned writes a row the next sweep will
    not recognise: say so once per difference (the fleet's nodes should share one environment)."""
    planned, got = task.planned.resume_key(), schema.resume_key(row)
    names = schema.RESUME_KEY
    diff = [f"{n} {a!r} -> {b!r}" for n, a, b in zip(names, planned, got, strict=True)
            if a != b and not (n == "neuron_cores" and b is None)]
    if diff and tuple(diff) not in _warned_versions:
        _warned_versions.add(tuple(diff))
        log.say(f"warning: {task.model} ran with other versions than this driver planned ({'; '.join(diff)}): "
                "give every node the same environment, or the next sweep will not recognise its rows")
