"""One model's detail: what the pane shows (``model_detail``: the row at the chosen versions, its history
across versions, timings, the reproduce and compile-cache commands) and the pane as HTML (``render_detail_html``).

Every string from the dataset is untrusted: each is escaped (``html.escape``, or pygments for run.py) here.
"""

from __future__ import annotations

import html
import shlex
from functools import lru_cache

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.vocab import EXCLUDED, PASS
from neuronhelpers.run.compile_cache import NEURON_ONLY, local_cache_command, sync_command
from neuronhelpers.store.dataset import LAST_ATTEMPT
from neuronhelpers.store.schema import ran_on
from neuronhelpers.ui.explorer.frames import NO_ROW, normalise_results, result_kind, result_label, rows_for_versions
from neuronhelpers.ui.explorer.markup import (
    STYLE,
    as_text,
    copy_button,
    download_link,
    is_missing,
    kv_table_html,
    pre_html,
    render_table_html,
    result_class,
)


def _number(value):
    return None if is_missing(value) else value


def _count(value):
    """An integer column read back as float (nullable in Parquet): shown as 8, not 8.0."""
    value = _number(value)
    return None if value is None else int(value)


def reproduce_command(model_id: str, cores=None, backend: str | None = None) -> str:
    """The one line that reproduces a row: ``neuronhelpers run MODEL`` (--cores N when sharded, --backend for a
    row that ran on cpu or cuda)."""
    parts = ["neuronhelpers", "run", shlex.quote(model_id)]
    cores = _number(cores)
    if cores is not None and int(cores) > 1:
        parts += ["--cores", str(int(cores))]
    if backend in ("cpu", "cuda"):
        parts += ["--backend", backend]
    return " ".join(parts)


def _history(history: pd.DataFrame) -> pd.DataFrame:
    last = history.drop_duplicates(["compiler", "compiler_version", "library", "library_version"], keep="last")
    return pd.DataFrame({
        "compiler": last["compiler"].fillna("") + " " + last["compiler_version"].fillna(""),
        "library": last["library"].fillna("") + " " + last["library_version"].fillna(""),
        "Neuron SDK": last["neuron_sdk"].fillna(""),
        "cores": pd.to_numeric(last["neuron_cores"], errors="coerce").astype("Int64"),
        "result": [result_label(r, s) for r, s in zip(last["result"], last["stage"], strict=True)],
        "wall time (s)": pd.to_numeric(last["wall_s"], errors="coerce").round(1),
        "compile (s)": pd.to_numeric(last["compile_s"], errors="coerce").round(1),
        "tested": pd.to_datetime(last["timestamp"], utc=True, errors="coerce").dt.strftime("%Y-%m-%d").fillna(""),
    }).reset_index(drop=True)


def _run_facts(get, cores) -> dict:
    """The Run table: verification, cores and parallelism, timings, memory, cache (only what was recorded)."""
    memory = _number(get("peak_memory_bytes"))

    def seconds(column, decimals=1):
        value = _number(get(column))
        return None if value is None else f"{value:.{decimals}f} s"

    decode, eager = _number(get("decode_tokens_per_s")), _number(get("eager_decode_tokens_per_s"))
    speed = _number(get("speedup"))
    run = {
        "weights": get("weights"), "revision": get("revision"),
        "verification": get("verification"), "judge": get("judge"),
        "evidence": get("evidence"), "check can fail": _sensitivity(get("check_sensitive")),
        "perturbation": get("perturbation"), "eager on the device": get("device_eager"),
        "eager decode": None if eager is None else f"{eager:.1f} tokens/s",
        "speed-up (compiled / eager)": None if speed is None else f"{speed:.2f}x",
        "graph breaks": _count(get("graph_breaks")), "graphs compiled": _count(get("unique_graphs")),
        "what compiled": _compiled_part(get("library"), get("task")),
        "recompiles": _count(get("recompiles")),
        "CPU fallback ops": ", ".join(map(str, list(get("fallback_ops") if get("fallback_ops") is not None else [])))
        or None,
        "declares fullgraph": get("declared_fullgraph"),
        # a row of the published dataset records no parallelism: the count alone, never a guessed 'none'
        "cores": None if cores is None else f"{int(cores)} ({get('parallelism')})" if get("parallelism")
        else str(int(cores)),
        "wall time": seconds("wall_s"), "load": seconds("load_s"), "compile": seconds("compile_s"),
        "warm generate (32 tokens)": seconds("generate_s", 2), "time to first token": seconds("ttft_s", 3),
        "decode": None if decode is None else f"{decode:.1f} tokens/s",
        "peak memory": None if memory is None else f"{memory / 2**30:.2f} GiB",
        "compile cache hit": get("cache_hit"), "retraced": get("retraced"),
    }
    return {k: v for k, v in run.items() if as_text(v)}


# What generate() compiles (the card's Test protocol says why): the decode step; the rest of the call runs eagerly.
_EAGER_IN_GENERATE = {vocab.TEXT_GENERATION: "the prompt's prefill", vocab.IMAGE_TEXT_TO_TEXT:
                      "the prompt's prefill with the image encoder", vocab.AUTOMATIC_SPEECH_RECOGNITION:
                      "the audio encoder and the prefill"}


def _compiled_part(library, task) -> str | None:
    """For a generate() row: which part of the call the compiled graphs cover."""
    if library != vocab.TRANSFORMERS or task not in _EAGER_IN_GENERATE:
        return None
    return f"the decode step; {_EAGER_IN_GENERATE[task]} ran eagerly"


def _sensitivity(value) -> str | None:
    """The row's check_sensitive in words (None where it was not measured)."""
    if is_missing(value):
        return None
    return ("yes: a perturbed model failed the same check" if bool(value)
            else "no: a perturbed model passed it too, so this PASS proves little")


def _sdk_facts(get) -> dict:
    """The Tested-on table: what it ran on, when, the Neuron SDK, backend, compiler, component versions and dtype."""
    compiler = " ".join(as_text(v) for v in (get("compiler"), get("compiler_version")) if as_text(v))
    tested = pd.to_datetime(get("timestamp"), utc=True, errors="coerce") if get("timestamp") is not None else None
    facts = {"ran on": ran_on(get("backend"), get("weights"), get("model_id")),
             "tested at": None if tested is None or pd.isna(tested) else tested.strftime("%Y-%m-%d %H:%M:%S UTC"),
             "Neuron SDK": get("neuron_sdk") or "not recorded", "backend": get("backend"), "compiler": compiler or None,
             "neuronx-cc": get("neuronx_cc"), "torch": get("torch"), "torch-neuronx": get("torch_neuronx"),
             get("library") or "library": get("library_version"), "dtype": get("dtype"), "Python": get("python"),
             "Neuron driver": get("neuron_driver"), "NKI": get("nki"), "accelerate": get("accelerate")}
    if get("library") != vocab.TRANSFORMERS:
        facts[vocab.TRANSFORMERS] = get(vocab.TRANSFORMERS)
    return facts


def _recorded_facts(get) -> dict:
    """The published dataset's own columns, shown as recorded and never interpreted (schema: runner, notes,
    cpu_match, english, hbm_capacity_gb)."""
    capacity = _number(get("hbm_capacity_gb"))
    facts = {"runner": get("runner"), "notes": get("notes"), "cpu_match": get("cpu_match"), "english": get("english"),
             "hbm_capacity_gb": None if capacity is None else f"{capacity:g}"}
    return {k: v for k, v in facts.items() if as_text(v)}


def _cache_commands(get) -> dict:
    """The public bucket's sync command for a neuron row; for any other compiler (inductor), no bucket path: the
    command that keeps its local cache warm instead."""
    compiler, version = get("compiler") or "neuronx-cc", get("compiler_version")
    command = sync_command(compiler, version)
    backend = get("backend") if get("backend") in ("cpu", "cuda") else "cpu"
    return {"sync_command": command, "local_cache_command": None if command else
            local_cache_command(compiler, version, backend)}


def model_detail(df: pd.DataFrame, model_id: str, *, compiler_version: str | None = None,
                 library_version: str | None = None) -> dict | None:
    """Everything the detail pane shows for one model (None when the dataset has no row for it)."""
    df = normalise_results(df)
    history = df[df["model_id"] == model_id].sort_values("timestamp", na_position="first", kind="stable")
    if history.empty:
        return None
    chosen = rows_for_versions(history, compiler_version, library_version)
    row = (chosen if not chosen.empty else history).iloc[-1]

    def get(column):
        value = row.get(column)
        return None if is_missing(value) else value

    failed = get("result") != PASS
    ran = result_kind(result_label(get("result"))) not in (EXCLUDED, vocab.UNTESTED)
    cores = _number(get("neuron_cores")) if ran else None
    return {
        "model_id": model_id,
        "row": row.to_dict(),
        "result_label": result_label(get("result"), get("stage")),
        "history": _history(history),
        "sdk": _sdk_facts(get),
        "run": _run_facts(get, cores),
        "recorded": _recorded_facts(get),
        "reproduce": reproduce_command(model_id, cores, get("backend")),
        "requirements": as_text(get("requirements")),
        "run_py": as_text(get("run_py")),
        "packages": as_text(get("packages")),
        **_cache_commands(get),
        "cause": as_text(get("cause")) if failed else "",
        "remedies": remedy_lines(model_id, get("remedies")) if failed else [],
        "error": as_text(get("error")) if failed else "",
        "last_attempt": as_text(get(LAST_ATTEMPT)),
        "traceback": as_text(get("traceback")) if failed else "",
    }


# ----------------------------------------------------------------------------------------------
# The pane as HTML: every value from the dataset goes through html.escape (or pygments, which escapes).
# ----------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def highlight_python(code: str) -> str:
    """run.py as highlighted HTML (pygments escapes the code)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=False))


def _reproduce_html(command: str) -> str:
    return (f'<div class="nh-block nh-bar"><b>Reproduce:</b><code class="nh-cmd nh-copytext">{html.escape(command)}'
            f"</code>{copy_button()}</div>")


def _no_row_html(model_id: str, hint: str) -> str:
    if not model_id:
        return "<p>Click a model's name in the table (or pick it above) to see how it ran.</p>"
    parts = [STYLE, f'<h3>{html.escape(model_id)} — <span class="{result_class(NO_ROW)}">{NO_ROW}</span></h3>',
             "<p>Not tested yet for these versions.</p>"]
    if hint:
        parts.append(f"<p><b>Hint, not its result:</b> {html.escape(hint)}</p>")
    parts.append(_reproduce_html(reproduce_command(model_id)))
    return "\n".join(parts)


def remedy_lines(model_id: str, value) -> list[str]:
    """A FAIL's remedies as tried (run/remedies.py): what made it run and at what cost, and for each remedy its result
    with its word on trn2, the one line its run.py adds (its PARAMS entry), and the command that prints the run.py a
    trn2 user runs."""
    import json

    from neuronhelpers.recipes.remedies import REMEDIES, remedy_line
    from neuronhelpers.run.remedies import remedies_line

    summary = remedies_line(value)
    if not summary:
        return []
    lines = [summary]
    for tried in json.loads(value):
        remedy = REMEDIES.get(tried.get("remedy"))
        if remedy is not None:
            word = f" ({tried['trn2']})" if tried.get("trn2") else ""
            lines.append(f"{tried['result'] or 'not run'}{word} with `{remedy_line(remedy.name)}`: neuronhelpers "
                         f"render {model_id} --remedy {remedy.name} --backend neuron")
    return lines


def _heading_html(detail: dict) -> list[str]:
    """The title (model, result, verification), the reproduce line, the cause and the error or reason."""
    row, label = detail["row"], detail["result_label"]
    verification = as_text(row.get("verification"))
    verification = f" ({html.escape(verification)})" if verification else ""
    parts = [f"<h3>{html.escape(detail['model_id'])} — <span class=\"{result_class(label)}\">{html.escape(label)}"
             f"</span>{verification}</h3>"]
    weights = as_text(row.get("weights"))
    if weights:
        parts.append(f"<p><b>Weights:</b> {html.escape(weights)}</p>")
    parts.append(_reproduce_html(detail["reproduce"]))
    if detail["cause"]:
        parts.append(f"<p><b>Cause:</b> <code>{html.escape(detail['cause'])}</code></p>")
    if detail.get("remedies"):
        first, *each = detail["remedies"]
        parts.append(f"<p><b>What would make it run</b> (tried, beside the verdict): {html.escape(first)}</p>"
                     + "".join(f"<div><code>{html.escape(line)}</code></div>" for line in each))
    if detail.get("last_attempt"):
        parts.append(f"<p><b>Last attempt</b> (it reached no verdict, so the one above stands): "
                     f"{html.escape(detail['last_attempt'])}</p>")
    if detail["error"]:
        stage = as_text(row.get("stage"))
        title = "Reason" if result_kind(label) in (EXCLUDED, vocab.UNTESTED) else "Error"
        parts.append(f"<p><b>{title}</b>{' (' + html.escape(stage) + ')' if stage else ''}:</p>"
                     f"{pre_html(detail['error'])}")
    return parts


def _files_html(detail: dict) -> list[str]:
    """requirements.txt and run.py, each with download and copy (or 'none recorded')."""
    parts = []
    if detail["requirements"]:
        parts.append(f'<h4>requirements.txt</h4><div class="nh-block"><div class="nh-bar">'
                     f'{download_link(detail["requirements"], "requirements.txt")}{copy_button()}</div>'
                     f'<pre class="nh-code nh-copytext">{html.escape(detail["requirements"])}</pre></div>')
    else:
        parts.append("<h4>requirements.txt</h4><p>none recorded</p>")
    if detail["run_py"]:
        lines = len(detail["run_py"].splitlines())
        parts.append(f'<h4>run.py</h4><div class="nh-block"><div class="nh-bar">{lines} lines · '
                     f'{download_link(detail["run_py"], "run.py", "text/x-python")}{copy_button()}</div>'
                     f'<div class="nh-runpy nh-scroll nh-copytext">{highlight_python(detail["run_py"])}</div></div>')
    else:
        parts.append("<h4>run.py</h4><p>none recorded</p>")
    return parts


def _more_html(detail: dict) -> list[str]:
    """The compile-cache sync command, then the installed packages and the whole error output, folded."""
    command = detail["sync_command"] or detail.get("local_cache_command")
    parts = ["<h4>Compile cache for this compiler version</h4>"]
    if not detail["sync_command"]:
        said = NEURON_ONLY[0].upper() + NEURON_ONLY[1:]
        parts.append(f"<p>{html.escape(said)}. To keep a local cache warm, point runs at one folder per compiler "
                     "version:</p>")
    if command:
        parts.append(f'<div class="nh-block nh-bar"><code class="nh-cmd nh-copytext">{html.escape(command)}</code>'
                     f"{copy_button()}</div>")
    if detail["packages"]:
        count = len(detail["packages"].splitlines())
        parts.append(f"<details><summary>All {count} installed "
                     f"packages</summary>{pre_html(detail['packages'])}</details>")
    if detail["traceback"]:
        parts.append(f"<details><summary>Full error output</summary>{pre_html(detail['traceback'])}</details>")
    return parts


def render_detail_html(detail: dict | None, model_id: str = "", *, hint: str = "") -> str:
    """The detail pane: ``model_detail``'s answer, or (None) a model without a row here, with the twin's hint."""
    if detail is None:
        return _no_row_html(model_id, hint)
    recorded = detail.get("recorded") or {}
    recorded_html = (f'<div><h4>As the published dataset records it</h4>{kv_table_html(recorded)}'
                     "<p style=\"font-size:11px;color:#666\">columns not documented publicly: shown, never interpreted"
                     "</p></div>") if recorded else ""
    tables = ('<div style="display:flex;gap:24px;flex-wrap:wrap">'
              f'<div><h4>Tested on</h4>{kv_table_html(detail["sdk"])}</div>'
              f'<div><h4>Run</h4>{kv_table_html(detail["run"])}</div>{recorded_html}</div>')
    history = f"<h4>History across versions</h4>{render_table_html(detail['history'])}"
    return "\n".join([STYLE, *_heading_html(detail), tables, history, *_files_html(detail), *_more_html(detail)])
