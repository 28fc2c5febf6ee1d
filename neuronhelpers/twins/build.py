"""Tiny twins, the orchestrator: build (or reuse) the twin of an architecture, check it runs, remember failures.

A twin stands in for a Hub checkpoint in tests and offline sweeps. It is the architecture's real
config class and modeling code, with small dimensions, random weights from a fixed seed, and a
tokenizer (plus image processor / processor for vision-language models) built locally. It is saved
with ``save_pretrained`` and loaded back with ``from_pretrained``, so it exercises exactly the code
path that decides whether an architecture compiles. A twin is addressed as ``tiny/<model_type>``.

The architectures are enumerated from transformers' own auto mappings (specs.py). Each task has a writer and
an eager check (``WRITERS``, ``EAGER_CHECKS``): text.py, vision/build.py, libraries.py. A family that needs more
than the generic shrink has an entry in the one override table (overrides.py) with a one-line reason. A twin counts
only when it runs eagerly after loading back (a forward pass and a few greedy tokens); when it cannot be built or
does not run, ``build_twin`` raises ``TwinUnavailable`` with the reason, and the catalog records the architecture
as UNTESTED, never FAIL. ``python -m neuronhelpers.twins.build build TYPE`` builds one twin in this process (the
isolated build's child). Taught in notebook 02 and the architecture catalog notebook (05).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from neuronhelpers.core.code_identity import code_digest
from neuronhelpers.core.errors import (
    HarnessFault,
    Stopped,
    UserError,
    harness_fault,
    harness_fault_of,
    machine_fault,
    say,
)
from neuronhelpers.core.integrity import DamagedFile, file_manifest, manifest_mismatch, read_json
from neuronhelpers.core.network import offline_mode
from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.core.vocab import (
    AUTOMATIC_SPEECH_RECOGNITION,
    EXCLUDED,
    FEATURE_EXTRACTION,
    IMAGE_TEXT_TO_TEXT,
    NO_TWIN_WRITTEN,
    TEXT_GENERATION,
    TEXT_TO_IMAGE,
    UNTESTED_DEPENDENCY,
    UNTESTED_INFRASTRUCTURE,
    UNTESTED_TWIN,
)
from neuronhelpers.twins.broken import BREAKAGES, break_copy, check_breakage, check_perturbable, perturb_copy
from neuronhelpers.twins.corpus import model_id_of
from neuronhelpers.twins.libraries import check_twin_runs as check_library_twin_runs
from neuronhelpers.twins.libraries import write_twin as write_library_twin
from neuronhelpers.twins.own import (
    carry_generation_config,
    config_changes,
    describe_changes,
    model_twin_spec,
    own_of,
    unkept,
)
from neuronhelpers.twins.shrink import TEXT_SHRINK, VISION_SHRINK, shrunk_config  # noqa: F401 - read by tests
from neuronhelpers.twins.specs import (
    LIBRARY_TASKS,
    MAX_TWIN_PARAMETERS,
    SEED,
    TWIN_FORMAT,
    TWIN_PREFIX,
    TwinSpec,
    architectures,
    is_twin_id,
    mapped_tasks,
)
from neuronhelpers.twins.specs import twin_spec as architecture_twin_spec
from neuronhelpers.twins.speech import write_speech_twin
from neuronhelpers.twins.text import write_text_twin
from neuronhelpers.twins.vision.build import write_vlm_twin
from neuronhelpers.twins.weights import choose_embeddings, correctly_rounded_math

__all__ = ["build_twin", "model_twin", "known_twin", "twin_path", "twin_home", "check_twin_runs", "broken_twin",
           "perturbed_twin", "TwinUnavailable", "WRITERS", "EAGER_CHECKS", "BREAKAGES",
           # re-exported from specs.py and shrink.py, where other code reads them through this module
           "TwinSpec", "TWIN_PREFIX", "MAX_TWIN_PARAMETERS", "LIBRARY_TASKS", "TEXT_GENERATION", "IMAGE_TEXT_TO_TEXT",
           "TEXT_SHRINK", "VISION_SHRINK", "architectures", "twin_spec", "is_twin_id", "mapped_tasks", "shrunk_config"]

TWIN_RECORD = "TWIN.json"  # what a twin is, and the files its build wrote (written last)
BUILD_TIMEOUT_S = 300.0
BUILD_MEMORY_BYTES = 16 * 2**30  # address space: torch alone maps ~4 GiB, and each thread reserves malloc arenas


class TwinUnavailable(UserError):
    """No tiny twin of this architecture can be built and run here: the architecture is UNTESTED, not FAILED (or
    EXCLUDED, ``stage`` EXCLUDED, where no builder was written for it: nothing was tried)."""

    def __init__(self, spec: TwinSpec, reason: str, cause: str, stage: str = UNTESTED_TWIN):
        super().__init__(f"no tiny twin of '{spec.key}' could be built here: {reason}")
        self.spec, self.reason, self.cause, self.stage = spec, reason, cause, stage


def check_transformers_twin_runs(spec: TwinSpec, folder: Path) -> None:
    """The twin loads back through the recipe's own loader and runs eagerly: a forward pass (not for speech: an
    encoder-decoder's forward needs the decoder's start, which generate() makes) and 4 greedy tokens.

    A twin that cannot do this would make any failure of the compiled run meaningless, so it is not a twin.
    """
    import torch

    from neuronhelpers.core.parameters import local_parameters
    from neuronhelpers.recipes.transformers_generate import load, new_tokens

    try:
        params = local_parameters(folder, spec.task)
        model, tokenizer, inputs = load(params, "cpu")
        parameters = sum(p.numel() for p in model.parameters())
        if parameters > MAX_TWIN_PARAMETERS:
            raise ValueError(f"the shrunk model still has {parameters:,} parameters (more than "
                             f"{MAX_TWIN_PARAMETERS:,})")
        with torch.inference_mode():
            if spec.task != AUTOMATIC_SPEECH_RECOGNITION:
                model(**inputs)
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            out = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=pad,
                                 return_dict_in_generate=True)
        new = new_tokens(model, out, inputs)
        if len(new) != 4:
            raise ValueError(f"generate() returned {len(new)} new tokens, not 4")
    except Exception as exc:  # not swallowed: marked with the step that failed, then raised again
        exc.twin_step = "eager check"
        raise


# The registry of builders by task: how a twin of the task is written into a folder, and how it is checked to run.
WRITERS = {TEXT_GENERATION: write_text_twin, IMAGE_TEXT_TO_TEXT: write_vlm_twin,
           FEATURE_EXTRACTION: write_library_twin, TEXT_TO_IMAGE: write_library_twin,
           AUTOMATIC_SPEECH_RECOGNITION: write_speech_twin}
EAGER_CHECKS = {TEXT_GENERATION: check_transformers_twin_runs, IMAGE_TEXT_TO_TEXT: check_transformers_twin_runs,
                FEATURE_EXTRACTION: check_library_twin_runs, TEXT_TO_IMAGE: check_library_twin_runs,
                AUTOMATIC_SPEECH_RECOGNITION: check_transformers_twin_runs}


def twin_home() -> Path:
    """Where built twins are cached (``NEURONHELPERS_HOME``/twins)."""
    from neuronhelpers.core.settings import home

    return home() / "twins"


@functools.lru_cache(maxsize=1)
def builder_identity() -> str:
    """What every module of the twins package executes, as one digest (read once per process)."""
    here = Path(__file__).parent
    return hashlib.sha256("".join(code_digest(path.read_text()) for path in sorted(here.rglob("*.py"))).encode()
                          ).hexdigest()


def _spec_digest(spec: TwinSpec) -> str:
    """What a built twin (or a remembered failure) depends on: the spec, what this builder's code executes (comments
    and docstrings aside: core/code_identity.py), the transformers and torch releases. Any such change builds the twin
    anew."""
    import torch
    import transformers

    builder = builder_identity()
    blob = json.dumps([TWIN_FORMAT, spec.key, spec.model_type, spec.task, spec.overrides, builder,
                       transformers.__version__, torch.__version__.split("+")[0]] + ([spec.own] if spec.own else []),
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def twin_path(model_id_or_type: str | TwinSpec) -> Path:
    """The folder a twin is (or will be) saved in; built checkpoints are keyed by spec and library version."""
    spec = model_id_or_type if isinstance(model_id_or_type, TwinSpec) else twin_spec(model_id_or_type)
    return twin_home() / f"{spec.key}-{_spec_digest(spec)}"


# Model twins made in this process (a folder's twin cannot be found again from its name alone).
_MODEL_TWINS: dict[str, TwinSpec] = {}


def model_twin(source: str) -> TwinSpec:
    """The spec of a model's own twin (a Hub id or a folder holding a config.json; own.py), remembered in this
    process under its name."""
    spec = model_twin_spec(source)
    if spec.key in {s.key for s in architectures()}:
        raise UserError(f"the folder name '{spec.key}' is an architecture twin's name: rename the folder")
    _MODEL_TWINS[spec.key] = spec
    return spec


def twin_spec(model_id_or_type: str) -> TwinSpec:
    """The spec of ``tiny/<model_type>`` (an architecture twin, specs.twin_spec) or of a model twin: ``tiny/<org>--
    <name>`` (its config read again: own.py) or a folder's twin made in this process."""
    key = model_id_or_type[len(TWIN_PREFIX):] if is_twin_id(model_id_or_type) else model_id_or_type
    if key in _MODEL_TWINS:
        return _MODEL_TWINS[key]
    hub_id = model_id_of(key)
    if hub_id and key not in {s.key for s in architectures()}:
        return model_twin(hub_id)
    return architecture_twin_spec(model_id_or_type)


def build_twin(model_id_or_type: str | TwinSpec, *, force: bool = False, isolated: bool = True) -> Path:
    """Build (or reuse) the twin and return the folder ``from_pretrained`` loads it from.

    The build runs in a child process (``isolated``) with a timeout and a memory limit: building runs the
    architecture's own code, and a crash, hang or runaway allocation there must cost one architecture, not
    the sweep. The folder is written under a temporary name, checked (it must load back and run eagerly),
    then renamed into place, so a half-built or broken twin is never seen by another process. When the
    twin cannot be built or does not run, ``TwinUnavailable`` says why; the failure is remembered next to
    the twins (keyed like the twin) so the next sweep does not pay for it again (``force`` retries).
    """
    spec = model_id_or_type if isinstance(model_id_or_type, TwinSpec) else twin_spec(model_id_or_type)
    dest = twin_path(spec)
    if not force:
        known = known_twin(spec)
        if known is not None:
            return known
    if isolated:
        return _build_in_child(spec, force)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key}-", dir=dest.parent))
    try:
        _write_twin(spec, tmp)
        check_twin_runs(spec, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
        _unavailable_marker(dest).unlink(missing_ok=True)
    except Exception as exc:  # any failure of the architecture's code: recorded next to the twins, then raised
        shutil.rmtree(tmp, ignore_errors=True)
        if harness_fault_of(exc) or machine_fault(str(exc)):  # ours or the machine's: never remembered as a refusal
            raise
        unavailable = _unavailable(spec, exc)
        _remember(dest, unavailable)
        raise unavailable from exc
    return dest


def _remember(dest: Path, unavailable: TwinUnavailable) -> None:
    failed = _unavailable_marker(dest)
    tmp_failed = failed.with_name(f".{failed.name}.{os.getpid()}")
    tmp_failed.write_text(json.dumps({"reason": unavailable.reason, "cause": unavailable.cause,
                                      "stage": unavailable.stage}))
    os.replace(tmp_failed, failed)


def _write_twin(spec: TwinSpec, folder: Path) -> None:
    """The task's writer, quietly (a generating twin's embeddings then chosen: twins/weights.py); then TWIN.json,
    which marks the folder as a twin."""
    with quiet_libraries():
        # the same files on every machine: whatever its float math (twins/weights.py) or its network (core/network.py)
        with correctly_rounded_math(), offline_mode():
            WRITERS[spec.task](spec, folder)
        carry_generation_config(spec, folder)
        own = _own_record(spec, folder)
        chosen = None if spec.task in LIBRARY_TASKS else choose_embeddings(spec, folder)
    write_twin_json(spec, folder, chosen, own)


def _own_record(spec: TwinSpec, folder: Path) -> dict | None:
    """A model twin's TWIN.json entries: whose config built it, its digest, where it was read, and what the shrink
    changed. A change to a field that is not a size refuses the twin (it would not compute what the model does)."""
    own = own_of(spec)
    if own is None:
        return None
    changes = config_changes(json.loads(own["files"]["config.json"]), json.loads((folder / "config.json").read_text()))
    kept_not = unkept(changes, spec.task)
    if kept_not:
        failed = ValueError("the shrink could not keep " + ", ".join(
            f"{key} ({json.dumps(changes[key][0], default=str)[:40]} -> "
            f"{json.dumps(changes[key][1], default=str)[:40]})" for key in kept_not[:4]))
        failed.twin_step = "shrink"
        raise failed
    return {"twin_from": own["twin_from"], "config_digest": own["digest"], "config_read": own["read"],
            "config_changes": describe_changes(changes), **(own.get("source") or {})}


def check_twin_runs(spec: TwinSpec, folder: Path) -> None:
    """The task's eager check (see EAGER_CHECKS): the twin loads back and runs, or the error says why."""
    with quiet_libraries():
        EAGER_CHECKS[spec.task](spec, folder)


def write_twin_json(spec: TwinSpec, folder: Path, weights: dict | None = None, own: dict | None = None) -> None:
    """TWIN.json, the one record every twin carries: what it is a twin of, its name and task, the seed and build
    format, for a generating twin the embeddings chosen (``weights``), for a model twin whose config built it
    (``own``: twin_from, config_digest, config_read, config_changes). ``known_twin`` recognises a built twin by it
    (the folder is renamed into place only once checked)."""
    record = {"twin_of": spec.model_type, "name": spec.key, "task": spec.task, "seed": SEED, "format": TWIN_FORMAT,
              **(own or {}), "files": file_manifest(folder, leave_out=(TWIN_RECORD,))}
    (Path(folder) / TWIN_RECORD).write_text(json.dumps({**record, **({"weights": weights} if weights else {})},
                                                       indent=1))


def _unavailable_marker(dest: Path) -> Path:
    return dest.with_name(dest.name + ".unavailable.json")


def twin_damage(folder: Path) -> str | None:
    """How a built twin's files differ from what its TWIN.json says was written (a disk that filled, a copy cut
    short, an edit by hand), in words; None when they match. Twins are small: every file is hashed on every use."""
    try:
        record = read_json(folder / TWIN_RECORD)
    except DamagedFile as exc:  # half a TWIN.json is a damaged twin too: built again
        return str(exc)
    return manifest_mismatch(folder, record.get("files") if isinstance(record, dict) else None)


def known_twin(spec: TwinSpec) -> Path | None:
    """The built twin's folder; raises TwinUnavailable when building it failed before; None when never tried, or when
    the twin on disk does not match its record (then it is built again, and the build says so in one line)."""
    dest = twin_path(spec)
    if (dest / TWIN_RECORD).is_file():  # written last, into a folder renamed into place only once checked
        damage = twin_damage(dest)
        if damage is None:
            return dest
        say(f"{spec.model_id}: the built twin in {dest} does not match its {TWIN_RECORD} ({damage}): building it again")
        return None
    marker = _unavailable_marker(dest)
    if marker.is_file():
        known = json.loads(marker.read_text())
        raise TwinUnavailable(spec, known["reason"], known["cause"], known.get("stage", UNTESTED_TWIN))
    return None


def _build_in_child(spec: TwinSpec, force: bool) -> Path:
    """Build in a child process (``python -m neuronhelpers.twins.build build``); read the outcome from disk."""
    from neuronhelpers.process.tree import execute

    args = ["build", spec.key] + (["--force"] if force else [])
    spec_file = None
    if spec.own:  # a model twin: the child builds from the config this process read (a folder's has no name to go by)
        twin_home().mkdir(parents=True, exist_ok=True)
        fd, spec_file = tempfile.mkstemp(prefix=f".{spec.key}-", suffix=".spec.json", dir=twin_home())
        with os.fdopen(fd, "w") as out:
            json.dump(dataclasses.asdict(spec), out)
        args += ["--spec", spec_file]
    try:
        outcome = execute(None, args, module="neuronhelpers.twins.build", timeout=BUILD_TIMEOUT_S,
                          memory_limit_bytes=BUILD_MEMORY_BYTES)
    finally:
        if spec_file:
            os.unlink(spec_file)
    found = known_twin(spec)  # the child wrote the twin, or the reason it could not
    if found is not None:
        return found
    printed = Path((outcome.stdout.strip().splitlines() or [""])[-1])
    if outcome.returncode == 0 and (printed / TWIN_RECORD).is_file():
        # the builder's code changed while the child ran (an edit to the twins package): the child keyed the twin
        # by the code it read, and its folder is the one it printed
        return printed
    _raise_if_not_the_builders(spec, outcome)
    if outcome.timed_out:
        why, cause = f"the build did not finish within {BUILD_TIMEOUT_S:g} s", "twin build: timeout"
    elif outcome.signal_name:
        why, cause = f"the build crashed ({outcome.signal_name})", f"twin build: crashed ({outcome.signal_name})"
    else:
        last = (outcome.stderr.strip().splitlines() or [f"exit status {outcome.returncode}"])[-1][:300]
        why, cause = f"the build failed: {last}", "twin build: failed without a reason"
    raise TwinUnavailable(spec, why, cause)


def _raise_if_not_the_builders(spec: TwinSpec, outcome) -> None:
    """A build child that failed in this package's own code (HarnessFault), on a full disk (Stopped), or was killed
    from outside (TwinUnavailable, infrastructure): none of it is the builder's refusal, and none is remembered."""
    from neuronhelpers.process.tree import KILLED_FROM_OUTSIDE, killed_from_outside

    fault = harness_fault(None, None, outcome.stderr[-20000:])
    if fault:
        raise HarnessFault(f"a fault of neuronhelpers' own code while building the twin of {spec.model_id}, not the "
                           f"model's: {fault}")
    full = machine_fault(outcome.stderr[-2000:])
    if full:
        raise Stopped(f"{full} while building the twin of {spec.model_id}: free some space, then run the same "
                      "command again (it resumes)")
    if killed_from_outside(outcome):
        raise TwinUnavailable(spec, f"the build was {KILLED_FROM_OUTSIDE}", f"twin build: {KILLED_FROM_OUTSIDE}",
                              stage=UNTESTED_INFRASTRUCTURE)


def _unavailable(spec: TwinSpec, exc: Exception) -> TwinUnavailable:
    """Why a twin could not be built or run, in words and as a cause signature."""
    import traceback

    from neuronhelpers.verdict.causes import missing_package, normalise

    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    reason = f"{type(exc).__name__}: {message[:300]}" if message else type(exc).__name__
    package = missing_package(reason, "".join(traceback.format_exception(exc)))
    if package:
        return TwinUnavailable(spec, f"it needs the package '{package}', which is not installed here ({reason})",
                               f"missing package: {package}", stage=UNTESTED_DEPENDENCY)
    if isinstance(exc, NotImplementedError):  # no builder was written for it: nothing was tried (vocab.UNTESTED_TWIN)
        return TwinUnavailable(spec, f"{NO_TWIN_WRITTEN} ({message[:300]})", "no twin written", stage=EXCLUDED)
    step = getattr(exc, "twin_step", "build")
    return TwinUnavailable(spec, f"{step} failed: {reason}",
                           f"twin {step}: {type(exc).__name__}: {normalise(message)[:100]}")


# ---- deliberately broken copies (broken.py breaks a copy of the built twin) ----------------------------------

def broken_twin(model_id_or_type: str, dest: str | Path, how: str) -> Path:
    """Copy a twin to ``dest`` and break it as ``how`` says (see BREAKAGES). Returns ``dest``."""
    check_breakage(how)
    return break_copy(build_twin(model_id_or_type), dest, how)


def perturbed_twin(model_id: str, dest: str | Path) -> Path:
    """Copy the library twin ``model_id`` (tiny/st-bert, ...) to ``dest`` with one weight shifted (see
    PERTURBED_WEIGHT in broken.py): it loads and runs, but its output differs from the unperturbed twin's (a
    mismatch)."""
    spec = twin_spec(model_id)
    check_perturbable(spec.key, model_id)
    return perturb_copy(spec.key, build_twin(spec.key), dest)


def main(argv: list[str] | None = None) -> int:
    """``python -m neuronhelpers.twins.build build MODEL_TYPE [--force]``: build one twin in this process."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "build":
        print("usage: python -m neuronhelpers.twins.build build MODEL_TYPE [--force] [--spec FILE]", file=sys.stderr)
        return 2
    target = argv[1]
    if "--spec" in argv:  # a model twin's spec, written by the parent (_build_in_child)
        target = TwinSpec(**json.loads(Path(argv[argv.index("--spec") + 1]).read_text()))
    try:
        print(build_twin(target, force="--force" in argv, isolated=False))
    except TwinUnavailable as exc:  # the reason is on disk (known_twin) and printed for the parent
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
