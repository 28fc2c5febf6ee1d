"""A minimal reproduction per cause, small enough to attach to an upstream issue: ``neuronhelpers repro CAUSE_OR_MODEL``
writes a self-contained script (a tiny config inline, random weights, no neuronhelpers import, the versions it was made
with) that shows the failure on CPU in under a minute: it prints ``REPRODUCED: ...`` and exits 1 while the failure
holds, and exits 0 once a release fixes it.

The config is the twin's that failed in the catalog, minus every field its class would set anyway. How the failure is
shown follows the cause: an exception of the compiled static-cache generate(); a generate() that compiled nothing;
the static cache writing other tokens than the dynamic cache with nothing compiled (vocab.CAUSE_STATIC_CACHE); or, for
diffusers' PAG pipelines, their denoiser compiled alone with the guided layer's processor (KIND_PAG). The script
names the public upstream thread of its cause where one is known (verdict/upstream.py).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.versions import distribution_version
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.twins.own import BOOKKEEPING
from neuronhelpers.twins.specs import TWIN_PREFIX
from neuronhelpers.verdict.upstream import upstream_for

KIND_COMPILE, KIND_NOT_COMPILED, KIND_STATIC_CACHE = "compile", "not compiled", "static cache"
KIND_PAG = "diffusers PAG"  # a diffusers denoiser with perturbed-attention guidance's processor, compiled alone

_HEAD = '''"""Minimal reproduction:
{cause}
{upstream}
Made by `neuronhelpers repro` from the catalog's twin {model_id} (its config below, random weights) with torch {torch}
and transformers {transformers}. On CPU it prints REPRODUCED and exits 1 while the failure holds; exit 0: fixed."""
import sys

import torch
import transformers

CONFIG = {config}
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**CONFIG)).eval()
with torch.no_grad():  # weights at 1/sqrt(fan-in), not 0.02: the tokens then depend on the input and the layers
    for weight in (p for p in model.parameters() if p.dim() == 2):
        weight.normal_(0, weight.shape[1] ** -0.5)
inputs = torch.randint(3, model.config.get_text_config().vocab_size, (1, 8))
compile_config = transformers.CompileConfig(fullgraph=True, dynamic=False)
compile_config._compile_all_devices = True  # generate() compiles by itself only on accelerators


def generate(**kwargs):
    with torch.inference_mode():
        return model.generate(inputs, max_new_tokens=32, min_new_tokens=32, do_sample=False, pad_token_id=0, **kwargs)

'''
_SHOW = {
    KIND_COMPILE: '''
try:
    generate(cache_implementation="static", compile_config=compile_config)
except Exception as exc:  # the failure this script shows
    print(f"REPRODUCED: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}")
    sys.exit(1)
print("did not reproduce: the compiled static-cache generate() wrote 32 tokens")
''',
    KIND_NOT_COMPILED: '''
generate(cache_implementation="static", compile_config=compile_config)
if getattr(model, "_compiled_call", None) is None:
    print("REPRODUCED: NotCompiled: generate() ran the forward eagerly, nothing was compiled (use_cache: "
          f"{model.generation_config.use_cache})")
    sys.exit(1)
print("did not reproduce: generate() compiled the forward")
''',
    KIND_STATIC_CACHE: '''
static, dynamic = generate(cache_implementation="static"), generate()
if not torch.equal(static, dynamic):  # nothing compiled: the two caches alone
    first = int((static != dynamic).nonzero()[0, 1]) - inputs.shape[1]
    print(f"REPRODUCED: the static cache writes other tokens than the dynamic cache from token {first}, eagerly")
    sys.exit(1)
print("did not reproduce: the static and dynamic caches write the same 32 tokens")
''',
}

# The PAG pipelines of SD3 set PAGJointAttnProcessor2_0 on their guided layer and run the prompt twice (as it is, and
# with that layer's self-attention replaced by identity); compiled alone, the transformer shows the pipeline's failure.
_PAG = '''"""Minimal reproduction:
{cause}
{upstream}
Made by `neuronhelpers repro` from the catalog's twin {model_id}
(its denoiser's config below, random weights) with torch {torch} and diffusers {diffusers}.
On CPU it prints REPRODUCED and exits 1 while the failure holds; exit 0: fixed."""
import sys

import diffusers
import torch
from diffusers.models.attention_processor import PAGJointAttnProcessor2_0

CONFIG = {config}
torch.manual_seed(0)
model = diffusers.SD3Transformer2DModel(**CONFIG).eval()
model.transformer_blocks[-1].attn.set_processor(PAGJointAttnProcessor2_0())  # as the PAG pipeline sets its layer
size, batch = model.config.sample_size, 2  # the prompt as it is, and with the layer's self-attention perturbed
inputs = {{"hidden_states": torch.randn(batch, model.config.in_channels, size, size),
          "encoder_hidden_states": torch.randn(batch, 8, model.config.joint_attention_dim),
          "pooled_projections": torch.randn(batch, model.config.pooled_projection_dim),
          "timestep": torch.full((batch,), 500.0)}}
with torch.inference_mode():
    model(**inputs)  # eagerly it runs
    try:
        torch.compile(model, backend="inductor", fullgraph=True)(**inputs)
    except Exception as exc:  # the failure this script shows
        print(f"REPRODUCED: {{type(exc).__name__}}: {{' '.join(str(exc).split())[:300]}}")
        sys.exit(1)
print("did not reproduce: the compiled transformer ran")
sys.exit(0)
'''


def repro_kind(cause: str) -> str:
    """How a cause is shown (see the module docstring)."""
    if "mutation on a view chain" in cause and "attention_processor" in cause:
        return KIND_PAG
    if cause == vocab.CAUSE_STATIC_CACHE:
        return KIND_STATIC_CACHE
    return KIND_NOT_COMPILED if cause.startswith("NotCompiled") else KIND_COMPILE


def failing_row(rows: pd.DataFrame, cause_or_model: str) -> dict:
    """The newest FAIL row of a twin that shows a cause (a twin id, or text the cause contains: the first architecture
    in name order): a transformers twin, or a diffusers twin whose cause has a script (KIND_PAG); else UserError
    saying what the catalog holds instead."""
    failed = rows[(rows["result"] == vocab.FAIL) & rows["twin_of"].notna()]
    shown = (failed["library"] == vocab.TRANSFORMERS) | (
        (failed["library"] == vocab.DIFFUSERS) & failed["cause"].fillna("").map(repro_kind).eq(KIND_PAG))
    newest = newest_per_model(failed[shown])
    if cause_or_model.startswith(TWIN_PREFIX):
        found = newest[newest["model_id"] == cause_or_model]
        if found.empty:
            raise UserError(f"{cause_or_model} has no FAIL in these rows that a script can show: nothing to reproduce")
    else:
        found = newest[newest["cause"].fillna("").str.contains(re.escape(cause_or_model), case=False)]
        if found.empty:
            raise UserError(f"no FAIL's cause that a script can show contains '{cause_or_model}': `neuronhelpers "
                            "causes` lists them")
    return found.sort_values(["twin_from", "model_id"], na_position="first").iloc[0].to_dict()


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


def repro_script(row: dict, config: dict) -> str:
    """The script for a failing row, from its twin's config.json (a diffusers twin's: its denoiser's)."""
    kind = repro_kind(row["cause"])
    fields = minimal_config(config) if kind != KIND_PAG else {
        k: v for k, v in config.items() if not k.startswith("_") and v not in ([], None)}
    items = ", ".join(f"{key!r}: {value!r}" for key, value in fields.items())
    text = textwrap.fill("{" + items + "}", width=116, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)
    cause = textwrap.fill(str(row["cause"]), width=116).replace('"""', "'''")
    thread = upstream_for(row["cause"])
    upstream = textwrap.fill(thread.line(), width=116) + "\n" if thread else ""
    words = dict(cause=cause, upstream=upstream, model_id=row["model_id"], torch=distribution_version("torch"),
                 config=text)
    if kind == KIND_PAG:
        return _PAG.format(diffusers=distribution_version(vocab.DIFFUSERS), **words)
    head = _HEAD.format(transformers=distribution_version(vocab.TRANSFORMERS), **words)
    return head + "\n" + _SHOW[kind].lstrip("\n") + "sys.exit(0)\n"


def write_repro(rows: pd.DataFrame, cause_or_model: str, out: str | Path | None = None) -> tuple[Path, dict]:
    """Write the reproduction of a cause (or of a twin's FAIL) to ``out`` (default ``repro_<twin>.py`` here); returns
    the path and the row it shows."""
    from neuronhelpers.twins.build import build_twin

    row = failing_row(rows, cause_or_model)
    folder = Path(build_twin(row["model_id"]))
    config = json.loads(((folder / "transformer") if repro_kind(row["cause"]) == KIND_PAG else folder).joinpath(
        "config.json").read_text())
    path = Path(out) if out else Path(f"repro_{row['model_id'].split('/')[-1]}.py")
    path.write_text(repro_script(row, config))
    return path, row
