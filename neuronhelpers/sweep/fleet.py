"""Fleet sweeps on Ray: many machines (trn2 instances), one dataset, nothing lost when a node dies.

``neuronhelpers sweep ... --ray ADDRESS`` (or ``sweep_on_ray``) runs the same sweep as ``sweep.sweep``, with
each model as one Ray task:

- The driver (this process) resolves and plans every model, as the local sweep does: the plan says how many
  cores the model needs (the task's resource request) and gives the model its resume key, so what ``out``
  already records is skipped before anything is submitted. Planning on the driver is cheap (a config and the
  weights' headers; a twin is built once and cached) and is the only way to ask Ray for the right resources.
- A task asks for the planned cores: ``neuron_cores`` on ``neuron`` (Ray's built-in resource: it sets
  NEURON_RT_VISIBLE_CORES for the task), CPUs and an estimate of host memory elsewhere. It runs
  ``sweep.run_one``: the model is planned again on that node with exactly those cores (checkpoints, twins and
  caches are the node's own), and the harness runs the rendered run.py in its own process tree with its
  timeout, so a crash, hang or out-of-memory stays a row.
- The row comes back to the driver, the dataset's one writer, which appends it at once (atomic, one Parquet
  file per version pair), exactly as the local sweep does.

Faults: a task whose node or worker process dies without a result is submitted again (Ray places it on a live
node), at most ``retries`` times; after that the model is recorded UNTESTED with stage ``infrastructure``.
A model whose planned cores no live node has is recorded the same way (never a task pending forever). A killed
driver loses only the runs in flight (Ray stops the tasks of a dead driver); the next sweep resumes.
Taught in notebook 05.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.store import schema as results
from neuronhelpers.core.backends import GiB, Backend, get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.run.harness import PlannedRun, untested_row
from neuronhelpers.core.settings import DEFAULT_TIMEOUT_S
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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"no Ray cluster at '{address}': start one (`ray start --head`) or use --ray local ({first})") from None
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


def _task(model: str, backend: str, cores: int, timeout: float, memory_limit_bytes: int | None, work) -> dict:
    """One model on a Ray worker: ``sweep.run_one`` (or the injected ``work``, same arguments); returns the row
    the node it ran on and how long it took there."""
    import ray

    start = time.monotonic()
    row = (work or run_one)(model, backend=backend, cores=cores, timeout=timeout,
                            memory_limit_bytes=memory_limit_bytes)
    return {"row": row, "node": ray.get_runtime_context().get_node_id(), "seconds": time.monotonic() - start}


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
    return untested_row(ref.model_id, be, stage="infrastructure", error=error, cause=cause, task=ref.task,
                        model_type=ref.model_type, twin_of=ref.twin_of, library=planned.library)


def sweep_on_ray(models: list[str], out: str | Path, *, address: str = "auto", backend: str | Backend | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, rerun: bool = False, progress: bool = True,
                 memory_limit_bytes: int | None = None, include_excluded: bool = False,
                 retries: int = DEFAULT_RETRIES, core_resource: str | None = None, report: FleetReport | None = None,
                 work=None, poll_s: float = 1.0, infeasible_grace_s: float = 10.0) -> list[dict]:
    """``sweep.sweep`` on a Ray cluster: every model not yet recorded in ``out`` is one Ray task asking for its
    planned cores; each row is appended to ``out`` by this process as soon as its task returns it.

    ``address``: ``auto`` (the cluster this machine belongs to), ``host:port``, or ``local`` (start a cluster
    here for this sweep and stop it at the end); an existing ``ray.init`` connection is used as it is.
    ``retries``: how many times a model whose task died with its node or worker is submitted again before it is
    recorded UNTESTED (stage ``infrastructure``). ``core_resource`` overrides the Ray resource one planned core
    is counted in (``neuron_cores`` on neuron, ``CPU`` elsewhere). ``report`` (a FleetReport) is filled in.
    ``work`` replaces ``sweep.run_one`` inside the task (tests of scheduling and faults only).
    """
    ray = import_ray()
    be = backend if isinstance(backend, Backend) else get_backend(backend)
    report = report if report is not None else FleetReport()
    out = Path(out)
    models = list(dict.fromkeys(models))
    disconnect = connect(address)
    log = None
    pending: dict = {}  # ObjectRef -> _Task
    try:
        nodes = live_nodes(ray)
        report.cluster_nodes = len(nodes)
        resource = core_resource or core_resource_for(be)
        if resource != "CPU" and not any(n["resources"].get(resource) for n in nodes):
            raise UserError(f"no node of the Ray cluster has '{resource}' (backend {be.name}): "
                            f"start the nodes on trn2 instances, or sweep with the backend the nodes have")
        remote = ray.remote(_task)
        log = SweepLog(out, be, len(models), rerun=rerun, progress=progress, desc=f"sweep[{be.name}@ray]")
        if include_excluded:
            log.append([r for r in excluded_rows(be) if not log.is_recorded(r)])

        def record(task: _Task, row: dict) -> None:
            log.end(task.model, row)
            report.recorded += 1
            if row.get("stage") == "infrastructure":
                report.infrastructure.append(task.model)

        def give_up(task: _Task, error: str, cause: str) -> None:
            log.say(f"{task.model}: UNTESTED (infrastructure): {error}")
            record(task, infrastructure_row(task.planned, be, error=error, cause=cause))

        def submit(task: _Task) -> None:
            now = live_nodes(ray)
            if not fits(task.request, now):
                why = shortfall(task.request, now)
                give_up(task, f"no node of the Ray cluster can run it: {why}; add such a node and sweep again",
                        "infrastructure: no node with the resources the plan needs")
                return
            ref = remote.options(**_options(task.request)).remote(
                task.planned.ref.model_id, be.name, task.planned.plan.cores, timeout, memory_limit_bytes, work)
            pending[ref] = task
            report.submitted += 1
            log.extra["tasks"] = len(pending)
            log.show()

        def collect(ref) -> None:
            task = pending.pop(ref)
            log.extra["tasks"] = len(pending)
            try:
                returned = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # our own code raised inside the task
                cause = getattr(exc, "cause", None)
                if isinstance(cause, UserError) or isinstance(exc, UserError):
                    log.say(f"skipped {task.model} on its node: {cause or exc}")
                    log.end(task.model, skipped=True)
                    return
                raise
            except ray.exceptions.TaskCancelledError:
                return
            except ray.exceptions.RayError as exc:  # the node or the worker died, the result was lost, ...
                task.failures.append(_failure_kind(ray, exc))
                if len(task.failures) <= retries:
                    report.retried[task.model] += 1
                    log.extra["retried"] = sum(report.retried.values())
                    submit(task)
                    return
                counts = Counter(task.failures)
                what = ", ".join(f"{kind} {n} time{'s' if n > 1 else ''}" for kind, n in counts.items())
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
                give_up(task, f"its Ray task failed {len(task.failures)} times without a result ({what}; last: "
                              f"{first}); the model never reported a result: sweep again to retry it",
                        f"infrastructure: {what}")
                return
            row = returned["row"]
            report.nodes[task.model], report.task_seconds[task.model] = returned["node"], returned["seconds"]
            _check_versions(task, row, log)
            record(task, row)

        def harvest(wait_s: float) -> None:
            if not pending:
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
            if ready:  # and every other one that is ready too
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            for ref in ready:
                collect(ref)

        for model in models:  # planned here, submitted at once: the cluster starts while the rest is planned
            planned = plan_for_sweep(model, be, log)
            if isinstance(planned, dict) or (planned is not None and planned.plan.excluded):
                log.end(model, run_one(planned))  # nothing to run (UNTESTED here, or EXCLUDED): recorded here
            elif planned is not None:
                report.planned += 1
                submit(_Task(model, planned, task_request(planned, be, core_resource)))
            harvest(0)
        last_check = time.monotonic()
        while pending:
            harvest(poll_s)
            if time.monotonic() - last_check >= min(5.0, infeasible_grace_s):
                last_check = time.monotonic()
                _drop_infeasible(ray, pending, give_up, infeasible_grace_s, log)
    finally:
        for ref in list(pending):  # the driver stops early (an error, Ctrl-C): stop the runs in flight
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or gone
                pass
        if log is not None:
            log.close()
        if disconnect is not None:
            disconnect()
    return log.rows


def _drop_infeasible(ray, pending: dict, give_up, grace_s: float, log) -> None:
    """Tasks no live node can run any more (the only node big enough died): recorded after ``grace_s``."""
    nodes = live_nodes(ray)
    now = time.monotonic()
    for ref, task in list(pending.items()):
        if fits(task.request, nodes):
            task.infeasible_since = None
            continue
        task.infeasible_since = task.infeasible_since or now
        if now - task.infeasible_since >= grace_s:
            pending.pop(ref)
            log.extra["tasks"] = len(pending)
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001
                pass
            give_up(task, f"no live node of the Ray cluster can run it any more: {shortfall(task.request, nodes)}; "
                          "add such a node and sweep again", "infrastructure: no node with the resources the plan needs")


_warned_versions: set = set()


def _check_versions(task: _Task, row: dict, log: SweepLog) -> None:
    """A node that ran the model with other versions than the driver planned writes a row the next sweep will
    not recognise: say so once per difference (the fleet's nodes should share one environment)."""
    planned, got = task.planned.resume_key(), results.resume_key(row)
    names = results.RESUME_KEY
    diff = [f"{n} {a!r} -> {b!r}" for n, a, b in zip(names, planned, got)
            if a != b and not (n == "neuron_cores" and b is None)]
    if diff and tuple(diff) not in _warned_versions:
        _warned_versions.add(tuple(diff))
        log.say(f"warning: {task.model} ran with other versions than this driver planned ({'; '.join(diff)}): "
                "give every node the same environment, or the next sweep will not recognise its rows")
