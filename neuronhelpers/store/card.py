"""The dataset card (README.md with Hub YAML metadata), generated from the vocabulary and schema in code.

Taught in notebook 06.
"""

from __future__ import annotations

from pathlib import Path

from neuronhelpers.core import settings, vocab
from neuronhelpers.core.parameters import PARAMETERS
from neuronhelpers.core.protocol import EAGER_MAX_PARAMETERS, MAX_NEW_TOKENS, SENTENCES, TASK_INPUTS
from neuronhelpers.store import dataset, schema


def _table(mapping: dict) -> str:
    return "\n".join(f"| `{key}` | {text} |" for key, text in mapping.items())


def _front_matter() -> str:
    return f"""---
license: apache-2.0
pretty_name: torch-neuronx model support
tags:
- neuron
- trainium
- transformers
configs:
- config_name: default
  data_files:
  - split: train
    path: {dataset.DATA_DIR}/*.parquet
---

"""


def _introduction(title: str) -> str:
    table = _table
    return f"""# {title}

Does a Hugging Face model run unmodified on AWS Trainium? Each row is one model tested with the
neuronhelpers recipe, on one compiler version and one library version. What a row ran on is said beside its
verdict (see What the rows ran on): only a Trainium row is a measurement on Trainium.

## Tasks

| task | what is tested |
| --- | --- |
{table(vocab.TASKS)}

"""


def _protocol() -> str:
    from neuronhelpers.twins.pipelines import SHARES
    from neuronhelpers.twins.specs import SAME_COMPUTATION
    from neuronhelpers.twins.weights import EMBEDDING_CHOICES

    shared = "; ".join(f"`{variant}` uses `{base}`'s" for variant, base in SHARES.items())
    same = "; ".join(f"`{kind}` as `{base}` ({why})" for kind, (base, why) in SAME_COMPUTATION.items())
    embeddings = ", ".join("the config's own" if std is None else f"std {std:g} (seed {seed})"
                           for std, seed in EMBEDDING_CHOICES)
    ties = ", ".join(f"{dtype}: {margin:g}" for dtype, margin in vocab.NEAR_TIE_MARGIN.items())
    embedding_bounds = ", ".join(f"{dtype}: {b['max_abs_diff']:g} / {b['min_cosine']:g}"
                                 for dtype, b in vocab.EMBEDDING_TOLERANCE.items())
    image_bounds = ", ".join(f"{dtype}: {b['max_abs_diff']:g} / {b['min_psnr_db']:g} dB"
                             for dtype, b in vocab.IMAGE_TOLERANCE.items())
    measured_bounds = "; ".join(f"{backend} {dtype}: {b['max_abs_diff']:g} / {b['min_psnr_db']:g} dB"
                                for (backend, dtype), b in vocab.IMAGE_TOLERANCE_MEASURED.items())
    encode, draw = TASK_INPUTS[vocab.FEATURE_EXTRACTION], TASK_INPUTS[vocab.TEXT_TO_IMAGE]
    listen = TASK_INPUTS[vocab.AUTOMATIC_SPEECH_RECOGNITION]
    return f"""## Test protocol

1. `from_pretrained` loads the checkpoint (never with `trust_remote_code` unless a person asked for it).
2. The model is placed on the fewest cores whose memory holds its weights (`neuron_cores`; at most 16).
3. `generate()` produces {MAX_NEW_TOKENS} greedy tokens from a fixed prompt (a chat template and a generated
   test image for image-text-to-text models; a generated {listen['audio_seconds']:g}-second audio clip for
   automatic-speech-recognition) with a static KV cache, compiled with
   `torch.compile(backend=..., fullgraph=True, dynamic=False)`: `neuron` on Trainium, `inductor` elsewhere.
4. The tokens are checked against a CPU eager run of the same checkpoint, dtype and prompt
   (a judge checks the text when no CPU reference is affordable). Near-tie tolerance on the reference's
   top-1/top-2 logit margin, by dtype: {ties}; the device's token must be in the reference's top {vocab.NEAR_TIE_TOP_K}.

Sentence-embedding models (`feature-extraction`, sentence-transformers) and diffusion pipelines (`text-to-image`,
diffusers) take the same steps with their own call, one core each: `SentenceTransformer(...)` with its transformer
module compiled encodes a fixed batch of {len(SENTENCES)} sentences padded to {encode['sequence_length']}
tokens; a pipeline loaded with `from_pretrained`, every denoiser and its image decoder compiled, draws one image in
{draw['steps']} steps from a fixed prompt and seed (CPU noise: the same latents everywhere) at the checkpoint's
native size. Their outputs are compared as numbers
with the CPU reference: `exact` when bitwise equal, `within_tolerance` when within both bounds for the dtype, else FAIL
at `mismatch`; `tolerance`, `max_abs_diff` and `min_cosine` / `psnr_db` record the figures. Embeddings (max abs
difference / lowest cosine similarity): {embedding_bounds}. Images, pixels in [0, 1] (max abs difference / lowest
PSNR): {image_bounds}; where compiled runs were measured, {vocab.IMAGE_MARGIN} times the largest difference any
compiled run showed instead ({measured_bounds}), so that a wrong image cannot pass under a loose bound.

What `generate()` compiles: the decode step, one token at a time against the static cache (`unique_graphs` counts
the graphs). The prompt's prefill runs eagerly (transformers' `generate()` calls the uncompiled forward for it), and
with it a vision-language model's image encoder and a speech model's audio encoder: a PASS of those tasks says the
decoder compiled; their encoders are checked through the tokens, not compiled.

Rows whose `model_id` starts with `tiny/` are **tiny twins**: the architecture's real transformers code with
shrunk dimensions and random weights, built from the architecture's default config (`tiny/<model_type>`) or
from one model's own config.json (`tiny/<org>--<name>`, a model twin: see Answers). They show whether the code,
configured so, compiles; they say nothing of the real checkpoints' weights. A twin's linear maps are drawn at
1/sqrt(fan-in) with an output head of its own, and its input embeddings are the first of ({embeddings}) with which
it writes at least {vocab.MIN_DISTINCT_TOKENS} distinct tokens that a change to its middle layer alters, so its
tokens depend on what its layers compute; `check_sensitive` says whether its check caught a deliberate change.
Families that share a twin (the same components inside their own pipeline class): {shared}. Types whose twins
computed exactly the same tokens as another type's, so that one row stands for both: {same}.

Every row carries the exact `run_py` that ran and its `requirements`: save them and run `python3 run.py`.

"""


# The card's vocabulary sections, in order: (heading, the key column's name, the table, a paragraph before it,
# the meaning column's name). Each table is one of core/vocab.py's.
_VOCABULARY_SECTIONS = [
    ("Results", "value", vocab.RESULTS, "", "meaning"),
    ("Stages (why a FAIL failed)", "stage", vocab.STAGES, "", "meaning"),
    ("Untested reasons (why no verdict was reached)", "stage", vocab.UNTESTED_STAGES,
     "An UNTESTED row is neither a PASS nor a FAIL: the test could not reach a verdict about the model where it\n"
     "ran, for a reason that is not the model's. Its `stage` column says which:\n\n", "meaning"),
    ("Verification (how a PASS was established)", "verification", vocab.VERIFICATIONS, "", "meaning"),
    ("Evidence (what a verdict stands on)", "evidence", vocab.EVIDENCE,
     "Strongest first within PASS and within FAIL. `speedup` is compiled over eager, both measured back to back in\n"
     "one run.py process; it is never compared across rows run minutes apart.\n\n", "meaning"),
    ("Sensitivity (can the check fail?)", "check_sensitive", vocab.CHECK_SENSITIVE,
     "After the compiled run, the measuring runs the model once more, eagerly, with every weight of the middle\n"
     "block of its largest stack of repeated blocks (a decoder or encoder layer, a denoiser's block) shifted by\n"
     "Gaussian noise relative to that weight's mean absolute value, and checks the output against the unperturbed\n"
     "reference by the run's own rule; `perturbation` names the block and what changed. Null where no eager run is\n"
     "made (as for Device eager). The noise's size, per library: "
     + ", ".join(f"{library} {size:.0%}" for library, size in vocab.PERTURBATION_SIZE.items()) + ".\n\n", "meaning"),
    ("Answers (where the verdict for a Hub id comes from)", "answer", vocab.ANSWERS,
     "A Hub id is answered by the best row there is, and the answer says which. Model twins are named\n"
     "`tiny/<org>--<name>`: `twin_from` names the Hub id (or folder) whose config.json built the twin,\n"
     "`config_digest` its sha256 and `config_changes` every field the shrink changed (sizes only: a twin whose shrink\n"
     "would change another field is UNTESTED, the field named). Its tokenizer is the architecture twin's, its\n"
     "vocabulary sized to it. Counts of architectures (causes, verdicts per release) read the architecture twins\n"
     "alone.\n\n", "meaning"),
    ("Device eager (the model run eagerly on the same device)", "device_eager", vocab.DEVICE_EAGER,
     f"Bounds: no eager run for sharded models, nor above {EAGER_MAX_PARAMETERS / 1e9:g}B parameters (the row says so "
     "in `device_eager`).\n\n", "meaning"),
    ("Parallelism (how the weights were spread over `neuron_cores`)", "parallelism", vocab.PARALLELISMS, "", "meaning"),
    ("Weights (where a row's weights came from: the kind before the colon of `weights`)", "weights",
     vocab.WEIGHTS_KINDS, "", "meaning"),
    ("Libraries", "library", vocab.LIBRARIES, "", "what its recipe does"),
    ("run.py's parameters (its `PARAMS`, read back from `run_py`)", "parameter",
     {p.name: p.meaning + (f" ({', '.join(p.libraries or p.tasks)} only)" if p.libraries or p.tasks else "")
      for p in PARAMETERS},
     "Each run.py holds its parameters as one literal dict, `PARAMS`, at its top; a row's run is rerun with them.\n\n",
     "meaning"),
]


def _vocabulary() -> str:
    return "".join(f"## {heading}\n\n{intro}| {key} | {meaning} |\n| --- | --- |\n{_table(mapping)}\n\n"
                   for heading, key, mapping, intro, meaning in _VOCABULARY_SECTIONS)


def _layout_and_columns() -> str:
    columns = "\n".join(f"| `{name}` | {typ} | {text} |" for name, typ, text in schema.COLUMNS)
    return f"""## Layout

One Parquet file per (compiler version, library, library version) pair:
`{dataset.DATA_DIR}/<compiler>-<compiler_version>__<library>-<library_version>.parquet`.

```python
import pandas as pd
df = pd.read_parquet("{dataset.DATA_DIR}")   # or "hf://datasets/<namespace>/<name>/{dataset.DATA_DIR}"
df[df.model_id == "Qwen/Qwen3-0.6B"][["neuronx_cc", "library", "library_version", "neuron_cores", "result"]]
```

`neuronhelpers.load_results` reads this layout and the published one (below) alike, in one frame that names the cores
both `neuron_cores` and `tp`, so the same query written with `tp` works on either.

## Columns

| column | type | meaning |
| --- | --- | --- |
{columns}
"""


def ran_on_counts(rows) -> dict[str, int]:
    """Rows per 'ran on' label (vocab.RAN_ON), in the vocabulary's order; ``rows`` needs model_id, backend, weights."""
    if rows is None or len(rows) == 0:
        return {}
    labels = schema.ran_on_labels(rows)
    counts = {label: labels.count(label) for label in dict.fromkeys(labels)}
    order = list(vocab.RAN_ON)
    return dict(sorted(counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def card_title(counts: dict[str, int]) -> str:
    """What the dataset holds, in its title: Trainium verdicts only where every row is one."""
    if not counts:
        return "The torch-neuronx recipe: no rows yet"
    if set(counts) == {vocab.RAN_ON_TRAINIUM}:
        return "Which Hub models run on AWS Trainium with torch-neuronx"
    held = [label + "s" for label in counts if label != vocab.RAN_ON_TRAINIUM]
    kinds = " and ".join([", ".join(held[:-1]), held[-1]] if len(held) > 1 else held)
    trainium = "with Trainium verdicts beside them" if vocab.RAN_ON_TRAINIUM in counts else "no Trainium measurements"
    return f"The torch-neuronx recipe on {kinds} ({trainium})"


def _ran_on(counts: dict[str, int]) -> str:
    lines = "\n".join(f"| {label} | {'yes' if counts.get(label) else 'no'} | {text} |"
                       for label, text in vocab.RAN_ON.items())
    return f"""## What the rows ran on

Derived from each row's `backend` and the kind of its `weights`; the explorer shows it beside every verdict.

| ran on | rows here | meaning |
| --- | --- | --- |
{lines}

"""


def _published_layout() -> str:
    lines = "\n".join(f"| `{name}` | {typ} | {'`' + ours + '`' if ours else ''} | {how} |"
                       for name, typ, ours, how in schema.PUBLISHED_COLUMNS)
    return f"""## The published dataset's layout

The published Trainium dataset (`{settings.dataset_repo()}`) names its columns differently. neuronhelpers reads its
files whole, each published column into one of ours, and `hbm_*_gb` as GiB (2**30 bytes: the Neuron documentation
states device memory in GiB; the published dataset does not say which unit it means). Every published row reads as
`backend` neuron, `compiler` neuronx-cc at version `neuronx_cc`; its task and architecture come from the Selected list,
the rankings or the shelf where the model is known there.

| published column | type | our column | how |
| --- | --- | --- | --- |
{lines}

Writing to a dataset laid out that way (`neuronhelpers contribute`, or `publish` into it), only PASS or FAIL rows
measured on Trainium under Hub ids go in, written in those columns, names and order (in the file's own types); every
value of every row already there is copied as it is; published columns our rows do not record (`runner`,
`notes`, `cpu_match`, `english`, `hbm_capacity_gb`) are left null, and what our rows measure beyond the published
columns (evidence, the eager
comparison, graph counts, tokens, timings, the package list) stays out of the published dataset: our own dataset keeps
it.

"""


def result_counts(rows) -> list[dict]:
    """Per version pair, newest first, each model's newest row counted: PASS whose check could fail, PASS whose check
    could not have failed (evidence insensitive_check), FAIL, EXCLUDED, UNTESTED, and the pass rate of the first kind
    of PASS over it and FAIL."""
    from neuronhelpers.verdict.evidence import could_not_fail_count

    out = []
    if rows is None or rows.empty or "compiler_version" not in rows:
        return out
    for library, version, library_version in dataset.version_pairs(rows):
        pair = rows[(rows.library == library) & (rows.compiler_version == version)
                    & (rows.library_version == library_version)]
        newest = dataset.newest_per_model(pair)
        could_not = could_not_fail_count(newest["result"], newest.get("evidence"))
        count = newest["result"].value_counts()
        passed, failed = int(count.get(vocab.PASS, 0)) - could_not, int(count.get(vocab.FAIL, 0))
        compiler = next(iter(pair["compiler"].dropna()), "compiler") if "compiler" in pair else "compiler"
        out.append({"pair": f"{compiler} {version}, {library} {library_version}", "pass": passed,
                    "could_not": could_not, "fail": failed, "excluded": int(count.get(vocab.EXCLUDED, 0)),
                    "untested": int(count.get(vocab.UNTESTED, 0)),
                    "rate": f"{100 * passed / (passed + failed):.0f}%" if passed + failed else "-"})
    return out


def _table_rows(records: list[dict], cells) -> str:
    """Markdown table rows, one per record, its cells from ``cells(record)``."""
    return "\n".join("| " + " | ".join(str(cell) for cell in cells(r)) + " |" for r in records)


def _results(rows) -> str:
    counts = result_counts(rows)
    if not counts:
        return ""
    lines = _table_rows(counts, lambda c: (c["pair"], c["pass"], c["could_not"], c["fail"], c["excluded"],
                                          c["untested"], c["rate"]))
    return f"""## Results in these files

Each model's newest row per version pair. PASS counts the checks that could have failed; a PASS whose check could not
(the model with its middle block perturbed passed too: evidence `insensitive_check`) is counted beside it, and the pass
rate (PASS / (PASS + FAIL)) leaves it out.

| version pair | PASS | PASS whose check could not have failed | FAIL | EXCLUDED | UNTESTED | pass rate |
| --- | --- | --- | --- | --- | --- | --- |
{lines}

"""


def remedy_counts(rows) -> list[dict]:
    """Per cause of the FAIL rows swept with ``--remedies`` (each model's newest row per version pair): how many rows,
    and per remedy tried how many it turned PASS and at what cost (median compile seconds; how many of those passes
    recompiled on every generated token)."""
    import collections
    import json
    import statistics

    from neuronhelpers.verdict.evidence import check_could_not_fail, counts_as_passed

    if rows is None or rows.empty or "remedies" not in rows:
        return []
    newest = dataset.newest_per_model(rows, ["model_id", "compiler_version", "library", "library_version"])
    tried = newest[newest["remedies"].notna() & (newest["result"] == vocab.FAIL)]
    out = []
    for cause, group in tried.groupby("cause"):
        per_remedy: dict[str, list[dict]] = {}
        for value in group["remedies"]:
            for record in json.loads(value):
                per_remedy.setdefault(record["change"], []).append(record)
        for change, records in per_remedy.items():
            passed = [r for r in records if counts_as_passed(r)]
            seconds = [r["compile_s"] for r in passed if isinstance(r.get("compile_s"), (int, float))]
            words = collections.Counter((r.get("trn2") or "not judged")
                                        + (" (its check could not have failed)" if check_could_not_fail(r) else "")
                                        for r in passed)
            out.append({"cause": cause, "rows": len(group), "remedy": change, "tried": len(records),
                        "passed": len(passed), "compile_s": round(statistics.median(seconds), 1) if seconds else None,
                        "per_token": sum(bool(r.get("recompiles_per_token")) for r in passed),
                        "not_applicable": sum(bool(r.get("not_applicable")) for r in records),
                        "trn2": ", ".join(f"{n} {word}" for word, n in words.most_common())})
    return sorted(out, key=lambda r: (-r["rows"], r["cause"], -r["passed"]))


def _remedies(rows) -> str:
    counts = remedy_counts(rows)
    if not counts:
        return ""
    def short(cause: str) -> str:  # its start and its frame (`@ file:function`): two causes stay two lines
        return cause if len(cause) <= 90 else f"{cause[:55]}… {cause[-34:]}"

    lines = _table_rows(counts, lambda c: (short(c["cause"]), c["rows"], f"`{c['remedy']}`",
                                          f"{c['passed']} of {c['tried']}", c["trn2"], c["not_applicable"],
                                          "" if c["compile_s"] is None else c["compile_s"], c["per_token"]))
    words = "; ".join(f"**{word}**, {why}" for word, why in vocab.TRN2_WORDS.items()
                      if word != vocab.REMEDY_NOT_APPLICABLE)
    words += f" (TorchNeuron's documented contract, read on {vocab.TRN2_CONTRACT_READ})"
    return f"""## What would make a FAIL run

Swept with `--remedies`: after a FAIL, its cause's remedies (one change each to the recipe, `neuronhelpers render
MODEL --remedy NAME`) run in turn until one passes trn2-ready (at most three runs), checked exactly as the unmodified
run is. They are recorded in the row's `remedies`, beside the verdict: `result` stays the unmodified recipe's. Each
pass has its word for Trainium, from what the remedy run compiled: {words}. A remedy exact only within the model's
attention window is not applicable where the test's sequence exceeds it.

| cause | rows | remedy | PASS | on trn2 | not applicable | median compile (s) | of those, a recompile per token |
| --- | --- | --- | --- | --- | --- | --- | --- |
{lines}

"""


def render_card(rows=None, title: str | None = None) -> str:
    """The dataset card (README.md), every explanation generated from the vocabulary and the schema; ``rows`` (a frame
    with model_id, backend and weights) decides the title, the counts of what the rows ran on and of their results."""
    counts = ran_on_counts(rows)
    return (_front_matter() + _introduction(title or card_title(counts)) + _ran_on(counts) + _results(rows)
            + _remedies(rows) + _protocol() + _vocabulary() + _layout_and_columns() + _published_layout())


def write_card(folder: str | Path) -> Path:
    """The card of a dataset folder, from its rows, written to its README.md (under the folder's write lock, by atomic
    rename: the card counts the rows no writer is changing)."""
    import os
    import tempfile

    from neuronhelpers.store.lock import folder_lock

    path = Path(folder) / "README.md"
    with folder_lock(folder):
        rows = None
        if (Path(folder) / dataset.DATA_DIR).is_dir():
            rows = dataset.load_results(folder, validate=False)
        fd, tmp = tempfile.mkstemp(prefix=".README.md.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(render_card(rows))
        os.chmod(tmp, 0o644)  # a README anyone may read, as write_text would leave it
        os.replace(tmp, path)
    return path
