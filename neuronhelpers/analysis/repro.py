"""A minimal reproduction per cause, small enough to attach to an upstream issue: ``neuronhelpers repro CAUSE_OR_MODEL``
writes a self-contained script (the twin's config inline, random weights, the recipe's inputs, no neuronhelpers
import) that shows the failure on CPU in under a minute.

A script says only what it shows. It prints ``REPRODUCED: ...`` and exits 1 only when the failure it meets has the
row's cause signature (the exception's type and first line, normalised as verdict/causes.py does, its rules written
into the script; for a recompile limit, the guard that kept failing). Any other exception prints ``a different
failure: ...`` and exits 2; no failure exits 0 (fixed). It names the versions of the row it was made from, and says so
when the installed torch or library differs.

What a script runs follows the row's library and cause: transformers' compiled static-cache generate() on the inputs
the recipe's loader made for its task (text, an image's pixels, audio features: analysis/repro_inputs.py); a
generate() that compiled nothing; the static cache writing other tokens than the dynamic cache with nothing compiled
(vocab.CAUSE_STATIC_CACHE); the sentence-transformers encoder or the diffusers denoiser compiled alone and called as
the recipe called it (diffusers' PAG pipelines: with the guided layer's processor, KIND_PAG). ``why_no_script`` gives
the one-line reason where a FAIL has none. The script names the public upstream thread of its cause where one is known
(verdict/upstream.py).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd

from neuronhelpers.analysis.repro_inputs import AUTO_CLASS, EXACT_FLOATS, Captured, Unscriptable, as_code, capture
from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.versions import distribution_version
from neuronhelpers.recipes.remedies import REMEDIES, remedies_for
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.twins.own import BOOKKEEPING
from neuronhelpers.verdict.causes import NORMALISING
from neuronhelpers.verdict.upstream import upstream_for

KIND_COMPILE, KIND_NOT_COMPILED, KIND_STATIC_CACHE = "compile", "not compiled", "static cache"
KIND_PAG = "diffusers PAG"  # a diffusers denoiser with perturbed-attention guidance's processor, compiled alone
RECOMPILE = "recompile limit: "
# The guard a recompile-limit cause names (verdict/causes.failure_cause's two forms): the int's attribute, or the guard.
_GUARDS = (re.compile(r"^recompile limit: \w+\.(\w+) is "), re.compile(r"^recompile limit: guard `(.+)` fails"))
# The library a script imports (a sentence-transformers encoder is a transformers model); each is its own module name.
_LIBRARY_MODULE = {vocab.TRANSFORMERS: vocab.TRANSFORMERS, vocab.SENTENCE_TRANSFORMERS: vocab.TRANSFORMERS,
                   vocab.DIFFUSERS: vocab.DIFFUSERS}

_HEAD = '''"""{title}
{cause}
{upstream}
{made}
{contract}"""
import re
import sys
from importlib.metadata import version

import torch
import {module}

CAUSE = {cause_literal}
ROW_VERSIONS = {versions}  # what the row ran with
changed = [f"{{name}} {{ran}} (here {{version(name)}})" for name, ran in ROW_VERSIONS.items()
           if version(name).split("+")[0] != ran]
if changed:
    print("note: the row ran with", ", ".join(changed))
# How the catalog's causes write a message the same for every model: addresses, paths, generated names, numbers.
RULES = {rules}


def normalised(text):
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text)
    return " ".join(text.split())


def signature(exc):  # the exception's type and first line (with the next, after a colon), as the row's cause has it
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = f"{{lines[0]}} {{lines[1]}}" if len(lines) > 1 and lines[0].endswith(":") else (lines or [""])[0]
    return f"{{type(exc).__name__}}: {{normalised(first)}}"

'''
_MATCH_MESSAGE = '''SHOWN = ""


def shows_the_cause(exc):  # the cause's type and words, as far as the cause keeps them
    return signature(exc).startswith(CAUSE.rsplit(" @ ", 1)[0].rstrip("…"))

'''
_MATCH_GUARD = '''import logging  # noqa: E402 - torch's recompile log names the guard that kept failing

GUARD = {guard!r}
SHOWN = f" (dynamo's guard on {{GUARD}} failed at every decode step)"
reasons = []
handler = logging.Handler()
handler.emit = lambda record: reasons.append(record.getMessage())
logging.getLogger("torch._dynamo.guards.__recompiles").addHandler(handler)
torch._logging.set_logs(recompiles=True)


def shows_the_cause(exc):  # the recompile limit, on the cause's guard
    return "recompile" in signature(exc).lower() and any(GUARD in normalised(reason) for reason in reasons)

'''
_MODEL_AND_INPUTS = '''
CONFIG = {config}
torch.manual_seed(0)
INPUTS = {inputs}
SETTINGS = {settings}


def generate(model, **kwargs):
    with torch.inference_mode():
        return model.generate(**INPUTS, max_new_tokens=32, min_new_tokens=32, do_sample=False, **SETTINGS, **kwargs)
'''
_RUN = _MODEL_AND_INPUTS + '''

def run():
    model = transformers.{model_class}.from_config(transformers.AutoConfig.for_model(**CONFIG)).eval()
    with torch.no_grad():  # weights at 1/sqrt(fan-in), not 0.02: the tokens then depend on the input and the layers
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0, weight.shape[1] ** -0.5)
    compile_config = transformers.CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True  # generate() compiles by itself only on accelerators
{show}'''
# A sentence-transformers encoder or a diffusers denoiser: built from its config, compiled alone, called as the recipe
# called it; (how it is built, what the comment says).
_ALONE = '''
CONFIG = {config}
torch.manual_seed(0)
ARGS = {args}
INPUTS = {inputs}


def run():
    model = {build}.eval()
{show}    with torch.inference_mode():  # {what}
        torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)(*ARGS, **INPUTS)
'''
_BUILD = {
    vocab.SENTENCE_TRANSFORMERS: ("transformers.{model_class}.from_config(transformers.AutoConfig.for_model(**CONFIG))",
                                  "the encoder compiled as the recipe compiles it: whole, static shapes"),
    vocab.DIFFUSERS: ("diffusers.{model_class}.from_config(CONFIG)",
                      "the denoiser alone, compiled as the recipe does, called as the pipeline did"),
}
# The end of a transformers script's run() per kind (a diffusers PAG script's processor lines), and what "did not
# reproduce" says.
_SHOW = {
    KIND_COMPILE: ('''    generate(model, cache_implementation="static", compile_config=compile_config)
''', "the compiled static-cache generate() wrote 32 tokens"),
    KIND_NOT_COMPILED: ('''    generate(model, cache_implementation="static", compile_config=compile_config)
    if getattr(model, "_compiled_call", None) is None:
        return ("NotCompiled: generate() ran the forward eagerly, nothing was compiled (use_cache: "
                f"{model.generation_config.use_cache})")
''', "generate() compiled the forward"),
    KIND_STATIC_CACHE: ('''    static, dynamic = generate(model, cache_implementation="static"), generate(model)
    if not torch.equal(static, dynamic):  # nothing compiled: the two caches alone
        first = int((static != dynamic).nonzero()[0, 1]) - INPUTS["input_ids"].shape[1]
        return f"the static cache writes other tokens than the dynamic cache from token {first}, eagerly"
''', "the static and dynamic caches write the same 32 tokens"),
    # The PAG pipelines of SD3 set PAGJointAttnProcessor2_0 on their guided layer: compiled alone with it, the
    # transformer shows the pipeline's failure.
    KIND_PAG: ('''    from diffusers.models.attention_processor import PAGJointAttnProcessor2_0

    model.transformer_blocks[-1].attn.set_processor(PAGJointAttnProcessor2_0())  # as the PAG pipeline sets its layer
''', "the compiled denoiser ran"),
}
_DONE = {vocab.SENTENCE_TRANSFORMERS: "the compiled encoder ran", vocab.DIFFUSERS: "the compiled denoiser ran"}
_TAIL = '''

try:
    shown = run()
except Exception as exc:  # the failure this script shows, or another one
    seen = signature(exc)[:300]
    if shows_the_cause(exc):
        print(f"REPRODUCED: {{seen}}{{SHOWN}}")
        sys.exit(1)
    print(f"a different failure: {{seen}}")
    sys.exit(2)
if shown:
    print(f"REPRODUCED: {{shown}}")
    sys.exit(1)
print("did not reproduce: {done}")
sys.exit(0)
'''

_REPRODUCED_CONTRACT = ("On CPU it prints REPRODUCED and exits 1 while this failure holds, exits 2 on a different "
                        "failure, 0 once fixed.")
# The second script of a cause a remedy makes run (``repro --remedy``): the same model and inputs, the remedy applied,
# its tokens against the eager dynamic cache's. Not a fix: it exits 3, never 0. Only the static-shape remedy of the
# sliding window has one: the remedy a trn2 can take (recipes/remedies.py), its layers written into the script.
REMEDY_SCRIPTS = ("full_static_within_window",)
_REMEDY_CONTRACT = ("On CPU it prints WORKAROUND and exits 3 when the remedy runs compiled and writes the eager "
                    "model's tokens within\nits limit; exit 2: not applicable (the sequence exceeds the window); exit "
                    "1: the remedy did not make it run.\nNever 0: not a fix.")
_REMEDY_RUN = '''

LAYERS = {layers}  # the remedy: a full static layer for each sliding kind of the static cache


def run():
    import transformers.cache_utils as cache_utils

    model = transformers.{model_class}.from_config(transformers.AutoConfig.for_model(**CONFIG)).eval()
    with torch.no_grad():  # as in the failing script: the tokens then depend on the input and the layers
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0, weight.shape[1] ** -0.5)
    text = model.config.get_text_config()
    window = min(w for w in (getattr(text, "sliding_window", None), getattr(text, "attention_chunk_size", None)) if w)
    length = INPUTS["input_ids"].shape[1] + 32
    if length > window:
        return 2, f"not applicable: the prompt and 32 new tokens ({{length}}) exceed the window ({{window}})"
    eager = generate(model)  # the dynamic cache, nothing compiled: what the model computes
    for kind, name in LAYERS.items():
        cache_utils.STATIC_LAYER_TYPE_MAPPING[kind] = getattr(cache_utils, name)
    compile_config = transformers.CompileConfig(fullgraph=True, dynamic=False)
    compile_config._compile_all_devices = True  # generate() compiles by itself only on accelerators
    compiled = generate(model, cache_implementation="static", compile_config=compile_config)
    if not torch.equal(compiled, eager):
        return 1, "the remedy ran, but its tokens differ from the eager model's"
    return 3, (f"the compiled static-cache generate() ran with full static layers (fullgraph, static shapes, no "
               f"dynamic source) and wrote the eager model's 32 tokens. Exact only while the prompt and new tokens "
               f"({{length}} here) fit the window ({{window}}): a deployment that compiles at a fixed length up to "
               f"{{window}} can take it. Not a fix: the unmodified run still fails")


try:
    code, said = run()
except Exception as exc:  # the remedy did not make it run
    print(f"the remedy did not make it run: {{signature(exc)[:300]}}")
    sys.exit(1)
print(("WORKAROUND: " if code == 3 else "") + said)
sys.exit(code)
'''


def repro_kind(cause: str) -> str:
    """How a cause is shown (see the module docstring)."""
    if "mutation on a view chain" in cause and "attention_processor" in cause:
        return KIND_PAG
    if cause == vocab.CAUSE_STATIC_CACHE:
        return KIND_STATIC_CACHE
    return KIND_NOT_COMPILED if cause.startswith("NotCompiled") else KIND_COMPILE


def why_no_script(row: dict, rows: pd.DataFrame | None = None) -> str | None:
    """The one-line reason a FAIL row with a cause gets no script, or None where it gets one."""
    model, cause, stage = row["model_id"], str(row.get("cause") or ""), row.get("stage")
    if pd.isna(row.get("twin_of")):
        twin = _twin_with_cause(row, rows)
        return (f"{model} is a real checkpoint: a script holds a tiny config, and "
                + (f"its twin {twin} fails with the same cause: `neuronhelpers repro {twin}`" if twin else
                   "no twin of it fails with this cause in these rows"))
    if row.get("library") not in _LIBRARY_MODULE:
        return f"no script runs a {row.get('library')} model"
    if row.get("library") == vocab.TRANSFORMERS and row.get("task") not in AUTO_CLASS:
        return f"no script loads a {row.get('task')} model yet"
    if stage == vocab.STAGE_MISMATCH and cause != vocab.CAUSE_STATIC_CACHE:
        return "a mismatch shows as other numbers, not as an exception: run the row's run.py beside its reference"
    if stage in (vocab.STAGE_OOM, vocab.STAGE_TIMEOUT):
        return f"a FAIL ({stage}) depends on the machine's memory and time, not on a config a script can hold"
    if row.get("library") != vocab.TRANSFORMERS and repro_kind(cause) not in (KIND_COMPILE, KIND_PAG):
        return f"a {repro_kind(cause)} cause is a transformers generate() cause, not {row.get('library')}'s"
    return None


def _twin_with_cause(row: dict, rows: pd.DataFrame | None) -> str | None:
    """The twin of a real checkpoint's model (its model twin, else its architecture's) whose FAIL has its cause."""
    if rows is None:
        return None
    same = rows[(rows["result"] == vocab.FAIL) & (rows["cause"] == row.get("cause")) & rows["twin_of"].notna()]
    for candidates in (same[same["twin_from"] == row["model_id"]], same[same["model_type"] == row.get("model_type")]):
        if not candidates.empty:
            return str(candidates["model_id"].sort_values().iloc[0])
    return None


def failing_row(rows: pd.DataFrame, cause_or_model: str) -> dict:
    """The newest FAIL row that shows a cause: a model's (any id the rows hold), else the first twin in name order whose
    cause contains the text; UserError saying what the rows hold instead, or why that FAIL has no script."""
    newest = newest_per_model(rows[(rows["result"] == vocab.FAIL) & rows["cause"].notna()])
    if cause_or_model in set(rows["model_id"]):
        found = newest[newest["model_id"] == cause_or_model]
        if found.empty:
            raise UserError(f"{cause_or_model} has no FAIL with a cause in these rows: nothing to reproduce")
    else:
        found = newest[newest["cause"].str.contains(re.escape(cause_or_model), case=False) & newest["twin_of"].notna()]
        if found.empty:
            raise UserError(f"no twin's FAIL cause contains '{cause_or_model}': `neuronhelpers causes` lists them")
    row = found.sort_values(["twin_from", "model_id"], na_position="first").iloc[0].to_dict()
    reason = why_no_script(row, rows)
    if reason:
        raise UserError(f"no script for {row['model_id']}'s FAIL: {reason}")
    return row


def minimal_config(config: dict) -> dict:
    """The fields of a twin's config that its class would not set by itself (what the script must say); a sub-config
    (text_config, vision_config) likewise against its own class."""
    from transformers import AutoConfig

    try:
        defaults = AutoConfig.for_model(config["model_type"]).to_dict()
    except (KeyError, ValueError):  # a sub-config type AutoConfig does not map: said whole
        defaults = {}
    kept = {}
    for key, value in config.items():
        if key in BOOKKEEPING or key == "model_type" or (key in defaults and defaults[key] == value):
            continue
        kept[key] = minimal_config(value) if isinstance(value, dict) and "model_type" in value else value
    return {"model_type": config["model_type"], **kept}


def _wrapped(code: str, indent: str = "    ") -> str:
    """Python text folded at 116 columns between items (no string literal is split: only the bare text of numbers,
    names and brackets is folded where a literal holds no space)."""
    return textwrap.fill(code, width=116, initial_indent=" " * 10, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)[10:]  # after "CONFIG = "


def _text_literal(text: str, width: int = 96) -> str:
    """A string literal that stays within the line: adjacent pieces in parentheses where it is long."""
    pieces = [repr(text[i:i + width]) for i in range(0, len(text), width)] or ["''"]
    return pieces[0] if len(pieces) == 1 else "(" + "\n    ".join(pieces) + ")"


def row_versions(row: dict) -> dict:
    """What the row ran with, of the packages its script imports: torch, and transformers or diffusers."""
    library = row.get("library")
    ran = row.get(vocab.TRANSFORMERS) if library == vocab.SENTENCE_TRANSFORMERS else row.get("library_version")
    out = {"torch": str(row.get("torch") or "").split("+")[0], _LIBRARY_MODULE[library]: str(ran or "")}
    return {name: value for name, value in out.items() if value}


def repro_script(row: dict, captured: Captured, remedy: str | None = None) -> str:
    """The script for a failing row, from what its recipe's loading captured (analysis/repro_inputs.py); with a
    ``remedy`` (REMEDY_SCRIPTS), its second script: the same model and inputs, run with the remedy."""
    kind, cause, library = repro_kind(row["cause"]), str(row["cause"]), captured.library
    config = minimal_config(captured.config) if library != vocab.DIFFUSERS else {
        k: v for k, v in captured.config.items() if v not in ([], None)}
    versions = row_versions(row)
    here = {name: distribution_version(name) for name in versions}
    made = [f"{name} {here[name]}" for name in versions if (here[name] or "").split("+")[0] != versions[name]]
    noise = [name for name, value in captured.kwargs.items() if getattr(value, "is_floating_point", lambda: False)()
             and value.numel() > EXACT_FLOATS]
    thread = upstream_for(cause)
    where = (f"Made by `neuronhelpers repro` from {row['model_id']}'s FAIL ({row.get('task')}), a row recorded with "
             + ", ".join(f"{n} {v}" for n, v in versions.items()) + (f" (made here with {', '.join(made)})" if made
                                                                      else "")
             + ". Its twin's config below, random weights, and the inputs the recipe made for it ("
             + (f"{', '.join(noise)} as seeded noise of its shape, the rest exactly)." if noise else "exactly)."))
    rules = "".join(f"\n    ({pattern.pattern!r}, {replacement!r})," for pattern, replacement in NORMALISING)
    title = f"Workaround, not a fix: {REMEDIES[remedy].label}, for this failure:" if remedy else \
        "Minimal reproduction:"
    head = _HEAD.format(
        title=title, contract=_REMEDY_CONTRACT if remedy else _REPRODUCED_CONTRACT,
        cause=textwrap.fill(cause, width=116).replace('"""', "'''"),
        upstream=textwrap.fill(thread.line(), width=116) + "\n" if thread else "", made=textwrap.fill(where, 116),
        module=_LIBRARY_MODULE[library], cause_literal=_text_literal(cause), versions=repr(versions),
        rules=f"[{rules}\n]")
    if remedy:
        return head + _MODEL_AND_INPUTS.format(config=_wrapped(repr(config)), inputs=_wrapped(as_code(
            captured.kwargs)), settings=repr(captured.generate)) + _REMEDY_RUN.format(
            layers=repr(REMEDIES[remedy].settings["cache_layers"]), model_class=captured.model_class)
    guard = next((m.group(1) for m in (g.match(cause) for g in _GUARDS) if m), None)
    match = _MATCH_GUARD.format(guard=guard) if cause.startswith(RECOMPILE) and guard else _MATCH_MESSAGE
    # transformers' run ends as its kind shows; an encoder or denoiser compiled alone only gains PAG's processor
    show, done = _SHOW[kind] if library == vocab.TRANSFORMERS or kind == KIND_PAG else ("", "")
    build, what = _BUILD.get(library, ("", ""))
    body = (_RUN if library == vocab.TRANSFORMERS else _ALONE).format(
        config=_wrapped(repr(config)), inputs=_wrapped(as_code(captured.kwargs)), settings=repr(captured.generate),
        args=_wrapped(as_code(tuple(captured.args))), model_class=captured.model_class, show=show,
        build=build.format(model_class=captured.model_class), what=what)
    return head + match + body + _TAIL.format(done=_DONE.get(library, done))


def write_repro(rows: pd.DataFrame, cause_or_model: str, out: str | Path | None = None,
                remedy: str | None = None) -> tuple[Path, dict]:
    """Write the reproduction of a cause (or of a model's FAIL) to ``out`` (default ``repro_<twin>.py`` here);
    returns the path and the row it shows. With a ``remedy`` (REMEDY_SCRIPTS), its second script is written beside it
    too (``remedy_path``)."""
    from neuronhelpers.twins.build import build_twin

    row = failing_row(rows, cause_or_model)
    if remedy and (remedy not in REMEDY_SCRIPTS or remedy not in [r.name for r in remedies_for(row["cause"])]):
        raise UserError(f"--remedy {remedy}: a second script is written for {', '.join(REMEDY_SCRIPTS)}, on a cause "
                        f"whose remedies include it; {row['model_id']}'s cause has "
                        f"{', '.join(r.name for r in remedies_for(row['cause'])) or 'none'}")
    try:
        captured = capture(Path(build_twin(row["model_id"])), row["task"])
    except Unscriptable as exc:
        raise UserError(f"no script for {row['model_id']}'s FAIL: what its recipe compiles is called with {exc}, "
                        "which a script cannot write inline") from None
    path = Path(out) if out else Path(f"repro_{row['model_id'].split('/')[-1]}.py")
    path.write_text(repro_script(row, captured))
    if remedy:
        remedy_path(path).write_text(repro_script(row, captured, remedy))
    return path, row


def remedy_path(path: Path) -> Path:
    """Where a reproduction's second script, with the remedy, is written: beside it."""
    return path.with_name(f"{path.stem}_remedy{path.suffix}")
