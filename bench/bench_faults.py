"""Benchmark: faults injected into a real sweep, and what the integrity checks cost on a warm one (issue 54, part 5).

    .venv/bin/python bench/bench_faults.py [--seed N] [--quick] [--home DIR]

1. A clean sweep of 12 architecture twins on CPU (the `neuronhelpers sweep` CLI, a NEURONHELPERS_HOME of its own,
   shared by every sweep here so each twin is built once): the verdicts to keep.
2. The same twins swept again into a new results folder, beside a truncated copy of a real checkpoint from the shelf
   (SmolLM2-135M-Instruct, model.safetensors cut short: its row must be UNTESTED (input)), with faults drawn at random
   from the seed: a twin's model.safetensors cut short, half a twin's config.json, inductor compile-cache entries
   cut to a third, a worker killed with SIGKILL from outside mid-run (the bench finds it in the process tree), a
   harness import broken for one model (tests/faults/sitecustomize.py `harness_import`: the sweep must stop with a
   harness-fault line and exit 3), and a results folder on a small tmpfs that fills while rows are written (the
   sweep must stop with a named reason and keep every row before). After each stop the bench resumes as a user
   would: without the broken import, or in a roomy copy of the folder.
3. The final verdict table (newest_per_model: model -> result/stage) against the clean one. A fault is survived
   when the sweep completed, its stops (if any) were named, and its models' verdicts equal the clean ones.
4. The warm sweep (`--rerun`, everything cached) with the integrity checks on and off (NEURONHELPERS_INTEGRITY_CHECKS),
   three runs each, alternating: the checks' added wall time and CPU time (user and system time of the sweep's whole
   process tree, from getrusage; less disturbed by other work on the machine) (goal: under 3 %); and the checks
   alone, timed in this process for every twin once, since two cores shared with other work make a sweep noisy.

The damaged compile-cache entries are drawn from the cache the clean sweep filled (with --home, perhaps another
model's entries: then no swept model reads them). The bench's numbers: "faults injected", "faults survived",
"verdicts lost", "stops without a named reason", one line per fault, and the "integrity checks add" line.

About 15-20 minutes on 2 cores; `--quick` (4 twins, one timing run each, ~5) is a smoke check. Needs root for the tmpfs
mount (without it the full-disk fault is reported as not injected).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import machine_fault
from neuronhelpers.core.settings import INTEGRITY_ENV
from neuronhelpers.store import dataset

ROOT = Path(__file__).resolve().parents[1]
FAULT_SITE = ROOT / "tests" / "faults"  # sitecustomize.py: NH_TEST_FAULTS {model: "harness_import"}
CLI = Path(sys.executable).with_name("neuronhelpers")
TWINS = ["tiny/llama", "tiny/qwen2", "tiny/gpt2", "tiny/mistral", "tiny/phi3", "tiny/gemma", "tiny/opt", "tiny/bloom",
         "tiny/gpt_neox", "tiny/falcon", "tiny/qwen3", "tiny/starcoder2"]
QUICK_TWINS = TWINS[:4]
SHELF_CHECKPOINT = Path.home() / ".cache/neuronhelpers/shelf/models/HuggingFaceTB--SmolLM2-135M-Instruct"
MODEL_TIMEOUT_S = 300
SWEEP_TIMEOUT_S = 3600
PAGE = 4096
SMALL_DISK_BYTES = 2**20
MOST_RESUMES = 6  # a sweep that has not completed after this many runs has failed the bench
STOP_PREFIX = "neuronhelpers: stopped: "
HARNESS_STOP = "a fault of neuronhelpers' own code"
MODEL_FAULTS = ("twin weights", "twin config", "kill", "harness import")  # each hits its own twin


@dataclass
class Fault:
    kind: str
    target: str  # the model it hits, or what it damages
    detail: str  # what the bench did, in words
    injected: bool = True
    events: list[str] = field(default_factory=list)  # what happened, in the sweep's own lines
    models: list[str] = field(default_factory=list)  # the models whose verdicts it must leave as they were
    named_stop: bool | None = None  # None: it was not meant to stop the sweep
    problems: list[str] = field(default_factory=list)  # what went wrong beyond a verdict (a row lost, no stop)


@dataclass
class SweepRun:
    returncode: int
    seconds: float
    stderr: str
    cpu_seconds: float  # user and system time of the sweep's whole process tree (each process reaped by its parent)

    def stop_line(self) -> str | None:
        return next((line for line in self.stderr.splitlines() if line.startswith(STOP_PREFIX)), None)


def process_tree(root: int) -> dict[int, int]:
    """pid -> parent pid of every process below ``root`` (read from /proc: this bench runs on Linux)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:  # it ended while the table was read
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        below.update(dict.fromkeys(children, parent))
        frontier += children
    return below


class KillFromOutside:
    """SIGKILL, once, the run of ``model`` a moment (``after_s``) into it: the run's root process is found among the
    sweep's descendants by its working folder, NEURONHELPERS_HOME/runs/<model slug>-XXXXXXXX (runs are forked from a
    fork server whose command line they keep, so the folder is what names them)."""

    def __init__(self, model: str, after_s: float):
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip("_")[:80] + "-"
        self.after_s = after_s
        self.killed: str | None = None
        self.first_seen: dict[int, float] = {}

    def _run_roots(self, sweep_pid: int):
        for pid, parent in process_tree(sweep_pid).items():
            try:
                cwd, parent_cwd = (Path(os.readlink(f"/proc/{p}/cwd")) for p in (pid, parent))
            except OSError:  # it ended while looked at
                continue
            if cwd.parent.name == "runs" and cwd.name.startswith(self.prefix) and parent_cwd != cwd:
                yield pid, cwd

    def watch(self, sweep_pid: int, done: threading.Event) -> None:
        while self.killed is None and not done.wait(0.05):
            for pid, cwd in self._run_roots(sweep_pid):
                age = time.monotonic() - self.first_seen.setdefault(pid, time.monotonic())
                if age >= self.after_s:
                    os.kill(pid, signal.SIGKILL)
                    self.killed = f"SIGKILL sent to pid {pid} ({cwd.name}) {age:.1f} s after the bench saw it start"
                    break


def run_sweep(models: list[str], out: Path, env: dict, *, rerun: bool = False,
              watchers: list[Callable[[int, threading.Event], None]] = ()) -> SweepRun:
    """`neuronhelpers sweep MODELS --out OUT` on CPU as a user runs it; each watcher (a fault acting from outside)
    runs in a thread of its own, given the sweep's pid, until the sweep ends."""
    command = [str(CLI), "sweep", *models, "--out", str(out), "--backend", "cpu", "--no-progress",
               "--timeout", str(MODEL_TIMEOUT_S), *(["--rerun"] if rerun else [])]
    start, cpu_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    done = threading.Event()
    for watcher in watchers:
        threading.Thread(target=watcher, args=(proc.pid, done), daemon=True).start()
    try:
        _, stderr = proc.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    return SweepRun(proc.returncode, time.perf_counter() - start, stderr,
                    cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime)


def verdict_table(out: Path) -> dict[str, tuple[str, str | None]]:
    """model_id -> (result, stage) of each model's newest row, by the one rule every view uses."""
    frame = dataset.load_results(out)
    if frame.empty:
        return {}
    newest = dataset.newest_per_model(frame)
    return {model: (result, stage if isinstance(stage, str) else None)
            for model, result, stage in zip(newest["model_id"], newest["result"], newest["stage"], strict=True)}


def shown(verdict: tuple[str, str | None] | None) -> str:
    if verdict is None:
        return "no row"
    return f"{verdict[0]} ({verdict[1]})" if verdict[1] else verdict[0]


def base_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", INTEGRITY_ENV, "NH_TEST_FAULTS")}
    return {**env, "NEURONHELPERS_HOME": str(home)}


# ---- the faults -------------------------------------------------------------------------------------------------


def twin_folder(home: Path, model: str) -> Path:
    """The built twin the sweeps use: the newest folder of its kind holding a TWIN.json. Found, not computed: the
    folder's name carries a digest of the twins' code, which another engineer's commit may change while this runs."""
    from neuronhelpers.twins import build

    key = build.twin_spec(model).key
    built = [record.parent for record in (home / "twins").glob(f"{key}-*/{build.TWIN_RECORD}")
             if re.fullmatch(rf"{re.escape(key)}-[0-9a-f]{{10}}", record.parent.name)]
    if not built:
        raise SystemExit(f"no built twin of {model} under {home / 'twins'}")
    return max(built, key=lambda folder: (folder / build.TWIN_RECORD).stat().st_mtime)


def cut_file(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


def damage_twins(home: Path, weights_model: str, config_model: str, rng: random.Random) -> list[Fault]:
    weights = twin_folder(home, weights_model) / "model.safetensors"
    whole = weights.stat().st_size
    cut = rng.randint(whole // 10, whole * 9 // 10)
    cut_file(weights, cut)
    config = twin_folder(home, config_model) / "config.json"
    text = config.read_text()
    config.write_text(text[: len(text) // 2])
    return [Fault("twin weights", weights_model, f"{weights.parent.name}/model.safetensors cut from {whole:,} to "
                  f"{cut:,} bytes", models=[weights_model]),
            Fault("twin config", config_model, f"{config.parent.name}/config.json cut to its first half "
                  f"({len(text) // 2:,} of {len(text):,} characters)", models=[config_model])]


def damage_compile_cache(home: Path, rng: random.Random, count: int = 2) -> Fault:
    from neuronhelpers.run.compile_cache import cache_dir

    os.environ["NEURONHELPERS_HOME"] = str(home)
    root = Path(cache_dir(get_backend("cpu")))
    entries = sorted(p for p in root.rglob("*.py") if p.stat().st_size > 200)
    if not entries:
        return Fault("compile cache", str(root), "no inductor entry to damage", injected=False)
    chosen = rng.sample(entries, min(count, len(entries)))
    for entry in chosen:
        cut_file(entry, entry.stat().st_size // 3)
    return Fault("compile cache", f"{len(chosen)} of {len(entries)} inductor entries",
                 f"cut to a third: {', '.join(p.name[:16] + '...' for p in chosen)}")


def truncated_checkpoint(workdir: Path, rng: random.Random) -> Fault:
    """SmolLM2's config and tokenizer beside its model.safetensors cut short (copied up to the cut, not whole)."""
    if not (SHELF_CHECKPOINT / "model.safetensors").is_file():
        return Fault("checkpoint", str(SHELF_CHECKPOINT), "not on the shelf here (`neuronhelpers checkpoints "
                     "--install`)", injected=False)
    folder = workdir / "SmolLM2-135M-Instruct-cut"
    folder.mkdir()
    for path in SHELF_CHECKPOINT.iterdir():
        if path.name not in ("model.safetensors", "PROVENANCE.json"):
            shutil.copy2(path, folder / path.name)
    whole = (SHELF_CHECKPOINT / "model.safetensors").stat().st_size
    cut = rng.randint(5_000, 4_000_000)
    with open(SHELF_CHECKPOINT / "model.safetensors", "rb") as source:
        (folder / "model.safetensors").write_bytes(source.read(cut))
    model = str(folder.resolve())
    return Fault("checkpoint", model, f"a copy of {SHELF_CHECKPOINT.name} with model.safetensors cut from {whole:,} "
                 f"to {cut:,} bytes, swept beside the twins", models=[model])


class SmallDisk:
    """A results folder on a tmpfs of its own (mounted here: needs root), which another writer fills once
    ``fill_after`` rows were written to it, as a disk shared with other work fills; later copied to a roomy folder.
    (Sizing the tmpfs alone cannot pick the row: the first row makes a 44 KiB file, each further one adds a few
    hundred bytes, zstd compressing it against the first.)"""

    def __init__(self, mountpoint: Path, fill_after: int):
        self.mountpoint, self.fill_after, self.mounted = mountpoint, fill_after, False
        self.results = mountpoint / "results"
        self.rows_written, self.filled, self._files_seen = 0, False, ()

    def mount(self) -> str | None:
        """None once mounted, else why not."""
        self.mountpoint.mkdir(parents=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_BYTES}", "tmpfs",
                               str(self.mountpoint)], capture_output=True, text=True)
        self.mounted = done.returncode == 0
        return None if self.mounted else (done.stderr.strip() or f"mount exited {done.returncode}")

    def watch(self, done: threading.Event) -> None:
        """Count the rows written (each is an atomic rewrite: a new file in place of the old) and fill the disk, but
        a page, after ``fill_after`` of them: writing the next row needs room for the old file and the new one."""
        while not self.filled and not done.wait(0.02):
            try:
                files = tuple(sorted(os.stat(p).st_ino for p in (self.results / "data").glob("*.parquet")))
            except OSError:  # replaced between the listing and the stat: looked at again on the next turn
                continue
            if files and files != self._files_seen:
                self.rows_written, self._files_seen = self.rows_written + 1, files
            if self.rows_written >= self.fill_after:
                self.fill()

    def fill(self) -> None:
        room = os.statvfs(self.mountpoint)
        try:
            with open(self.mountpoint / "filler", "wb") as handle:
                handle.write(bytes(max(room.f_bavail * room.f_frsize - PAGE, 0)))
        except OSError:  # no space left: full already, which is what the filler is for
            pass
        self.filled = True

    def move_to(self, roomy: Path) -> Path:
        shutil.copytree(self.results, roomy)
        self.unmount()
        return roomy

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.mountpoint)], check=True)
            self.mounted = False


def small_disk(workdir: Path, models: int, rng: random.Random) -> tuple[SmallDisk, Fault]:
    fill_after = rng.randint(1, max(models - 2, 1))
    disk = SmallDisk(workdir / "small-disk", fill_after)
    why_not = disk.mount()
    rows = f"{fill_after} row{'' if fill_after == 1 else 's'}"
    fault = Fault("full disk", f"results folder on a {SMALL_DISK_BYTES // 2**20} MiB tmpfs",
                  f"filled by another writer once {rows} had been written to it", injected=why_not is None)
    if why_not:
        fault.detail = f"not mounted: {why_not}"
    return disk, fault


# ---- the sweep with faults, resumed after each stop as a user would ---------------------------------------------


@dataclass
class FaultSweep:
    models: list[str]
    env: dict
    out: Path
    roomy: Path  # where the results go once the small disk has filled
    disk: SmallDisk
    faults: dict[str, Fault]
    killer: KillFromOutside
    harness_target: str
    harness_pending: bool = True
    runs: list[SweepRun] = field(default_factory=list)
    unnamed_stops: list[str] = field(default_factory=list)  # stops without a "neuronhelpers: stopped:" line
    other_stops: list[str] = field(default_factory=list)  # named stops that no injected fault explains

    def sweep_until_complete(self) -> bool:
        for attempt in range(1, MOST_RESUMES + 1):
            env = self.env
            if self.harness_pending:
                env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(FAULT_SITE), env.get("PYTHONPATH")])),
                       "NH_TEST_FAULTS": json.dumps({self.harness_target: "harness_import"})}
            watchers = [self.killer.watch] if self.killer.killed is None else []
            if self.disk.mounted and not self.disk.filled:
                watchers.append(lambda _pid, done: self.disk.watch(done))
            run = run_sweep(self.models, self.out, env, watchers=watchers)
            self.runs.append(run)
            print(f"  fault sweep run {attempt}: exit {run.returncode} after {run.seconds:.0f} s, into "
                  f"{'the small disk' if self.disk.mounted else self.out.name}", flush=True)
            for line in run.stderr.splitlines():
                if not line.startswith("sweeping "):
                    print(f"    | {line}", flush=True)
            self.note_healing(run)
            if run.returncode == 0:
                return True
            self.after_stop(run)
        return False

    def note_healing(self, run: SweepRun) -> None:
        """The lines in which the sweep said it healed something, given to the fault they answer."""
        for line in run.stderr.splitlines():
            model = line.split(": ", 1)[0]
            if ": the built twin in " in line:
                for kind in ("twin weights", "twin config"):
                    if self.faults[kind].target == model:
                        self.faults[kind].events.append(line)
            elif ": the compile cache's " in line:
                self.faults["compile cache"].events.append(line)
                self.faults["compile cache"].models.append(model)
            elif ": the run was " in line and model == self.killer_target:
                self.faults["kill"].events.append(line)

    @property
    def killer_target(self) -> str:
        return self.faults["kill"].target

    def after_stop(self, run: SweepRun) -> None:
        stop = run.stop_line()
        if run.returncode != 3 or stop is None:
            last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "(nothing on stderr)"
            self.unnamed_stops.append(f"exit {run.returncode}: {last}")
        elif HARNESS_STOP in stop and self.harness_pending:
            self.harness_stopped(stop)
        elif machine_fault(stop) and self.disk.mounted:
            self.disk_filled(stop)
        else:
            self.other_stops.append(stop)

    def missing_rows(self, before: str) -> list[str]:
        """The models swept before ``before`` that have no row in the results folder."""
        frame = dataset.load_results(self.out)
        have = set(frame["model_id"]) if not frame.empty else set()
        return [m for m in self.models[: self.models.index(before)] if m not in have]

    def harness_stopped(self, stop: str) -> None:
        fault = self.faults["harness import"]
        fault.named_stop = True
        fault.events.append(f"exit 3: {stop}")
        if self.harness_target in verdict_table(self.out):
            fault.problems.append(f"a row was written for {self.harness_target}")
        lost = self.missing_rows(self.harness_target)
        if lost:
            fault.problems.append(f"rows missing for models before it: {', '.join(lost)}")
        fault.events.append(f"no row for {self.harness_target}, every row before it kept: "
                            f"{'yes' if not fault.problems else 'NO'}; resumed without the broken import")
        self.harness_pending = False

    def disk_filled(self, stop: str) -> None:
        fault = self.faults["full disk"]
        fault.named_stop = True
        fault.events.append(f"filled after {self.disk.rows_written} row{'' if self.disk.rows_written == 1 else 's'} "
                            f"had been written; exit 3: {stop}")
        named = re.search(r"while writing (.+?)'s row to ", stop)
        if named and named.group(1) in self.models:
            fault.models.append(named.group(1))
            lost = self.missing_rows(named.group(1))
            rows = len(dataset.load_results(self.out))
            fault.events.append(f"{rows} row{'' if rows == 1 else 's'} on the full disk, every model before "
                                f"{named.group(1)} has one: "
                                f"{'yes' if not lost else 'NO, missing ' + ', '.join(lost)}")
            fault.problems += [f"no row kept for {m}" for m in lost]
        else:
            fault.problems.append("the stop does not name the row it could not write")
        self.out = self.disk.move_to(self.roomy)
        fault.events.append(f"resumed in a roomy copy of the folder ({self.roomy.name})")


def inject_faults(workdir: Path, home: Path, twins: list[str], rng: random.Random) -> FaultSweep:
    """Every fault drawn from ``rng``: which twin each model fault hits, where files are cut, the sweep's order, when
    the kill lands and near which row the disk fills. The files are damaged now; the kill, the broken import and
    the small disk act while the sweep runs."""
    weights_model, config_model, kill_model, harness_model = rng.sample(twins, len(MODEL_FAULTS))
    faults = {fault.kind: fault for fault in damage_twins(home, weights_model, config_model, rng)}
    faults["compile cache"] = damage_compile_cache(home, rng)
    faults["checkpoint"] = truncated_checkpoint(workdir, rng)
    kill_after = round(rng.uniform(0.5, 2.0), 1)
    faults["kill"] = Fault("kill", kill_model, f"SIGKILL from the bench to its run's process {kill_after} s into it",
                           models=[kill_model])
    faults["harness import"] = Fault("harness import", harness_model, "tests/faults sitecustomize `harness_import` "
                                     "(its run cannot import neuronhelpers.run.instruments) until the sweep stops",
                                     models=[harness_model], named_stop=False)
    models = list(twins) + ([faults["checkpoint"].target] if faults["checkpoint"].injected else [])
    rng.shuffle(models)
    disk, faults["full disk"] = small_disk(workdir, len(models), rng)
    if disk.mounted:
        faults["full disk"].named_stop = False  # until it stops the sweep with a named reason
    roomy = workdir / "faults"
    return FaultSweep(models=models, env=base_env(home), out=disk.results if disk.mounted else roomy, roomy=roomy,
                      disk=disk, faults=faults, killer=KillFromOutside(kill_model, kill_after),
                      harness_target=harness_model)


def settle(sweep: FaultSweep) -> None:
    """After the last run: the faults that never acted are not counted as injected."""
    kill, disk, cache = sweep.faults["kill"], sweep.faults["full disk"], sweep.faults["compile cache"]
    for twin in (sweep.faults["twin weights"], sweep.faults["twin config"]):
        if not twin.events:  # the sweeps built and used another folder: the damaged one was never read
            twin.injected = False
            twin.detail += ": no sweep read that folder (no line said it was built again)"
    if sweep.killer.killed:
        kill.events.insert(0, sweep.killer.killed)
    else:
        kill.injected = False
        kill.detail += ": its run ended before the kill was due"
    if sweep.disk.mounted:  # the sweep completed on the small disk
        disk.injected = sweep.disk.filled
        disk.detail += ": filled, yet the sweep went on" if sweep.disk.filled else ": the sweep ended before it filled"
        sweep.out = sweep.disk.move_to(sweep.roomy)
    if cache.injected and not cache.events:
        cache.events.append("no run read a damaged entry (none was set aside): judged on every verdict")


def judge(fault: Fault, final: dict, expected: dict, completed: bool) -> bool:
    """Survived: the sweep completed, the stop it was meant to cause (if any) was named, nothing else went wrong, and
    every verdict it could touch equals the expected one (the clean sweep's; UNTESTED (input) for the checkpoint)."""
    for model in dict.fromkeys(fault.models or list(expected)):
        if final.get(model) != expected.get(model):
            fault.problems.append(f"{model}: {shown(final.get(model))}, expected {shown(expected.get(model))}")
    if fault.named_stop is False:
        fault.problems.append("it never stopped the sweep with a named reason")
    return completed and not fault.problems


def print_fault_report(sweep: FaultSweep, final: dict, expected: dict, completed: bool, workdir: Path) -> None:
    injected = [f for f in sweep.faults.values() if f.injected]
    survived = [f for f in injected if judge(f, final, expected, completed)]
    lost = [m for m in expected if final.get(m) != expected[m]]
    frame = dataset.load_results(sweep.out)
    attempts = [f"{m} {s}" for m, r, s in zip(frame["model_id"], frame["result"], frame["stage"], strict=True)
                if vocab.is_attempt(r, s) and m != sweep.faults["checkpoint"].target]
    print("\nfault sweep:")
    print(f"  sweep runs until complete: {len(sweep.runs)} ({'completed' if completed else 'NOT completed'}), "
          f"{sum(r.seconds for r in sweep.runs):.0f} s in all")
    print(f"  faults injected: {len(injected)}")
    print(f"  faults survived: {len(survived)} of {len(injected)}")
    print(f"  verdicts lost: {len(lost)} (goal 0){': ' + ', '.join(lost) if lost else ''}")
    print(f"  stops without a named reason: {len(sweep.unnamed_stops)} (goal 0)")
    for stop in sweep.unnamed_stops:
        print(f"    {stop}")
    print(f"  named stops no injected fault explains: {len(sweep.other_stops)}")
    for stop in sweep.other_stops:
        print(f"    {stop}")
    print(f"  attempt rows written for twins (UNTESTED infrastructure/input, retried on resume): {len(attempts)}"
          f"{': ' + ', '.join(attempts) if attempts else ''}")
    for fault in sweep.faults.values():
        verdict = "survived" if fault in survived else "NOT survived" if fault.injected else "not injected"
        print(f"  - {fault.kind}, {fault.target}: {fault.detail} -> {verdict}".replace(str(workdir), "<bench>"))
        for line in fault.events + [f"PROBLEM: {p}" for p in fault.problems]:
            print(f"      {line}".replace(str(workdir), "<bench>"))
        for model in dict.fromkeys(fault.models) if fault.injected else ():
            print(f"      {model}: {shown(final.get(model))} (expected {shown(expected.get(model))})"
                  .replace(str(workdir), "<bench>"))


# ---- the checks' cost on a warm sweep ---------------------------------------------------------------------------


def warm_timings(twins: list[str], home: Path, out: Path, runs: int) -> dict[str, list[SweepRun]]:
    """The warm sweep (`--rerun`: every model runs, everything cached) with the checks on and off, alternating."""
    timed: dict[str, list[SweepRun]] = {"on": [], "off": []}
    for i in range(runs):
        for state, value in (("on", "1"), ("off", "0")):
            run = run_sweep(twins, out, {**base_env(home), INTEGRITY_ENV: value}, rerun=True)
            if run.returncode != 0:
                raise SystemExit(f"the warm sweep (checks {state}) exited {run.returncode}:\n{run.stderr[-3000:]}")
            timed[state].append(run)
            print(f"  warm sweep {i + 1}/{runs}, integrity checks {state}: {run.seconds:.1f} s wall, "
                  f"{run.cpu_seconds:.1f} s CPU", flush=True)
    return timed


def checks_alone(home: Path, twins: list[str], repeats: int = 5) -> float:
    """Seconds the checks themselves take for every twin once (twin_damage: each file hashed against TWIN.json, and
    check_checkpoint: JSON parsed, safetensors headers read), fastest of ``repeats``: the part of the sweep's time
    the switch turns off, without the noise of a whole sweep on a shared machine."""
    from neuronhelpers.core import integrity
    from neuronhelpers.twins import build

    folders = [twin_folder(home, model) for model in twins]
    fastest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for folder in folders:
            if build.twin_damage(folder) is not None:
                raise SystemExit(f"{folder} is still damaged after the fault sweep: {build.twin_damage(folder)}")
            integrity.check_checkpoint(folder)
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def print_timings(timed: dict[str, list[SweepRun]], twins: int, checks_s: float) -> None:
    print(f"\nwarm sweep of {twins} twins (--rerun, all cached), {len(timed['on'])} run(s) each, alternating:")
    for measure, unit in (("seconds", "s wall"), ("cpu_seconds", "s CPU")):
        on, off = ([getattr(run, measure) for run in timed[state]] for state in ("on", "off"))
        for state, runs in (("on", on), ("off", off)):
            print(f"  checks {state + ':':4s} {', '.join(f'{s:.1f}' for s in runs)} {unit} (mean "
                  f"{statistics.mean(runs):.1f}, spread {100 * (max(runs) - min(runs)) / statistics.mean(runs):.1f} %)")
        print(f"  integrity checks add {100 * (statistics.mean(on) / statistics.mean(off) - 1):+.1f} % "
              f"{unit.split()[1]} time on the mean ({100 * (min(on) / min(off) - 1):+.1f} % fastest against "
              "fastest) (goal: under 3 %)")
    mean_on = statistics.mean(run.seconds for run in timed["on"])
    print(f"  the checks alone, every twin once: {1000 * checks_s:.1f} ms = {100 * checks_s / mean_on:.3f} % of the "
          "warm sweep's wall time")


# ---- main -------------------------------------------------------------------------------------------------------


def clean_sweep(twins: list[str], home: Path, out: Path) -> dict:
    run = run_sweep(twins, out, base_env(home))
    if run.returncode != 0:
        raise SystemExit(f"the clean sweep exited {run.returncode}:\n{run.stderr[-3000:]}")
    table = verdict_table(out)
    counts = {v: list(table.values()).count(v) for v in dict.fromkeys(table.values())}
    print(f"clean sweep: {len(table)} twins in {run.seconds:.0f} s (twins built, compile cache cold): "
          f"{', '.join(f'{n} {shown(v)}' for v, n in counts.items())}", flush=True)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=None, help="the faults' draw (default: a fresh one, printed)")
    parser.add_argument("--quick", action="store_true", help="4 twins and one timing run each: a smoke check")
    parser.add_argument("--home", default=None, help="a NEURONHELPERS_HOME to reuse (default: a fresh one, removed)")
    args = parser.parse_args()
    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)  # the home's own compile cache, the one the sweeps use
    os.environ.pop(INTEGRITY_ENV, None)  # on, for the checks timed in this process
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    twins = QUICK_TWINS if args.quick else TWINS
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    home = Path(args.home).resolve() if args.home else workdir / "home"
    print(f"bench_faults: seed {seed} (again: --seed {seed}); {len(twins)} twins on CPU; "
          f"NEURONHELPERS_HOME {'<bench>/home' if not args.home else home}", flush=True)
    started = time.perf_counter()
    sweep = None
    try:
        expected = clean_sweep(twins, home, workdir / "clean")
        sweep = inject_faults(workdir, home, twins, random.Random(seed))
        print(f"fault sweep order: {', '.join(m if m.startswith('tiny/') else 'CHECKPOINT' for m in sweep.models)}",
              flush=True)
        completed = sweep.sweep_until_complete()
        settle(sweep)
        final = verdict_table(sweep.out)
        if sweep.faults["checkpoint"].injected:
            expected[sweep.faults["checkpoint"].target] = (vocab.UNTESTED, vocab.UNTESTED_INPUT)
        print_fault_report(sweep, final, expected, completed, workdir)
        print("\ntiming the warm sweep:", flush=True)
        timed = warm_timings(twins, home, workdir / "timing", 1 if args.quick else 3)
        print_timings(timed, len(twins), checks_alone(home, twins))
    finally:
        if sweep is not None:
            sweep.disk.unmount()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nbench_faults: {time.perf_counter() - started:.0f} s in all (seed {seed})")


if __name__ == "__main__":
    main()
