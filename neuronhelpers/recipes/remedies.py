"""What would make a FAIL run: the remedies worth trying per cause, in one table, and the one change each renders into
run.py.

A remedy is a single change to the recipe, expressed as a parameter (``PARAMS["remedy"]``) that ``render`` turns into
a short block appended to run.py: the unmodified recipe's run.py is byte for byte what it was (no remedy, no block),
and a remedy's run.py differs from it by that block alone (``neuronhelpers render MODEL --remedy NAME``). The fallback
of a failed compile to eager stays refused in every run, remedies included (the Trainium contract): ``fullgraph=False``
lets dynamo split the graph where it cannot trace, it never runs a failed compile eagerly.

``LADDER`` maps a cause's signature (verdict/causes.py) to the remedies to try, in order; ``sweep --remedies`` tries at
most ``MAX_REMEDY_RUNS`` of them after a FAIL and records what each cost beside the verdict, never as it
(run/remedies.py). A remedy that changes what the model computes is marked so and never counts as the model running.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_REMEDY_RUNS = 3


@dataclass(frozen=True)
class Remedy:
    name: str
    label: str  # the change, as a person would write it
    reason: str  # why it is on the list
    code: str  # the block run.py gets (appended after the recipe, before main runs)
    changes_computation: bool = False  # True: a PASS with it is not the model running
    caveat: str = ""  # what a PASS with it does not show, said beside it in the answer


_USE_CACHE = '''
_recipe_generation_kwargs = compiled_generation_kwargs


def compiled_generation_kwargs(params, device, tokenizer):
    """The recipe's generate() arguments, and use_cache=True: the checkpoint's config says false, so generate() would
    run without a cache, and so without the compiled static-cache forward."""
    return {**_recipe_generation_kwargs(params, device, tokenizer), "use_cache": True}
'''

_RECOMPILE_LIMIT = '''
import torch._dynamo  # noqa: E402 - the remedy's one setting, before anything compiles

# A guard that changes on every decode step recompiles each step: let it, up to 64 (the default stops at 8).
torch._dynamo.config.recompile_limit = 64
torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 256)
'''

_DYNAMIC_WINDOW = '''
import torch.compiler  # noqa: E402 - the remedy's one setting, before anything compiles

# The sliding-window cache's length, a Python int that dynamo would guard (and so recompile on) at every decode step,
# becomes a symbolic integer of one graph instead.
torch.compiler.config.dynamic_sources = r".*cumulative_length_int"
'''

_CAPTURE_SCALARS = '''
import torch._dynamo  # noqa: E402 - the remedy's one setting, before anything compiles

# A data-dependent scalar (.item(), a count of selected experts) becomes a symbol in the graph instead of a stop.
torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True
'''

_GRAPH_BREAKS = '''
_recipe_generation_kwargs = compiled_generation_kwargs


def compiled_generation_kwargs(params, device, tokenizer):
    """The recipe's generate() arguments with fullgraph=False: dynamo splits the forward where it cannot trace it and
    compiles the pieces (the breaks are counted); a failed compile still fails, it never runs eagerly instead."""
    kwargs = _recipe_generation_kwargs(params, device, tokenizer)
    kwargs["compile_config"].fullgraph = False
    return kwargs
'''

_EAGER_ATTENTION = '''
_recipe_load = load


def load(params, device, sharded=False):
    """The recipe's load, then attention through transformers' eager (matmul and softmax) implementation instead of
    SDPA: the same computation, written as plain tensor operations."""
    model, tokenizer, inputs = _recipe_load(params, device, sharded)
    model.set_attn_implementation("eager")
    return model, tokenizer, inputs
'''

REMEDIES = {remedy.name: remedy for remedy in (
    Remedy("use_cache", "use_cache=True", "generate() reads use_cache from the checkpoint's generation config: false "
           "means no cache, so no static cache and nothing compiled; the same weights, with a cache", _USE_CACHE),
    Remedy("dynamic_window", 'torch.compiler.config.dynamic_sources = r".*cumulative_length_int"',
           "the sliding-window cache's length is a Python int guarded on every decode step; marked dynamic, it is a "
           "symbolic integer of one compiled graph", _DYNAMIC_WINDOW,
           caveat="shown on CPU with inductor; on Trainium neuronx-cc must accept that symbolic integer: untried"),
    Remedy("recompile_limit", "torch._dynamo.config.recompile_limit = 64",
           "a Python value guarded on every decode step (a sliding window's position) recompiles the step each token; "
           "a higher limit lets generate() finish, at one compile per generated token", _RECOMPILE_LIMIT),
    Remedy("capture_scalar_outputs", "torch._dynamo.config.capture_scalar_outputs = True",
           "a data-dependent scalar or shape (MoE routing, .item()) stops a full-graph trace; captured as a symbol, "
           "the graph may trace whole", _CAPTURE_SCALARS),
    Remedy("fullgraph_false", "fullgraph=False",
           "where dynamo cannot trace a piece, it breaks the graph there and compiles the rest; each break is a return "
           "to Python on every step (graph_breaks counts them)", _GRAPH_BREAKS),
    Remedy("attn_eager", 'attn_implementation="eager"',
           "the failure is inside transformers' SDPA attention; its eager attention computes the same softmax(QK^T)V "
           "with plain tensor operations (tried on kosmos-2, 5.24.0: it then fails in the model's own mask code)",
           _EAGER_ATTENTION),
)}

# A cause's signature (a regular expression over the row's cause) -> the remedies to try, in order. The first entry
# that matches decides.
LADDER = [
    (r"use_cache: false", ["use_cache"]),
    (r"StaticSlidingWindowLayer\.cumulative_length_int", ["dynamic_window", "recompile_limit"]),
    (r"recompile limit", ["recompile_limit"]),
    (r"data-dependent|PendingUnbackedSymbolNotFound|unbacked", ["capture_scalar_outputs", "fullgraph_false"]),
    (r"graph break|Unsupported:", ["fullgraph_false"]),
    (r"transformers/integrations/sdpa_attention", ["attn_eager"]),
]


def remedies_for(cause) -> list[Remedy]:
    """The remedies worth trying for a FAIL's cause, in order (none where the ladder knows none)."""
    if not isinstance(cause, str) or not cause:
        return []
    for pattern, names in LADDER:
        if re.search(pattern, cause):
            return [REMEDIES[name] for name in names]
    return []


def remedy_block(name: str) -> str:
    """The block a remedy's run.py gets, with a banner saying which remedy it is and why."""
    import textwrap

    remedy = REMEDIES.get(name)
    if remedy is None:
        raise KeyError(f"no remedy named {name!r}: one of {', '.join(REMEDIES)}")
    banner = f"# ---- remedy: {remedy.label} " + "-" * max(4, 104 - len(remedy.label))
    reason = textwrap.fill(remedy.reason + ".", width=116, initial_indent="# ", subsequent_indent="# ")
    return f"{banner}\n{reason}\n{remedy.code.strip()}\n"
