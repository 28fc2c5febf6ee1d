"""What would make a FAIL run: the remedies worth trying per cause, in one table, and the one PARAMS entry each is.

A remedy is data the recipe reads, never a change to its code: one entry, ``PARAMS["remedy"]``, naming the remedy and
its settings for the recipe's extension points (``config``: torch's settings by dotted name, set before anything
compiles; ``cache_layers``: the static cache's layer class per layer type; ``compile``: torch.compile's; ``generate``:
generate()'s; ``load``: from_pretrained's). The unmodified run.py carries no such entry, and a remedy's run.py differs
from it by that one line (``neuronhelpers render MODEL --remedy NAME``). The fallback of a failed compile to eager stays
refused in every run, remedies included (the Trainium contract): ``fullgraph=False`` lets dynamo split the graph where
it cannot trace, it never runs a failed compile eagerly.

``LADDER`` maps a cause's signature (verdict/causes.py) to the remedies to try, in order; ``sweep --remedies`` tries at
most ``MAX_REMEDY_RUNS`` of them after a FAIL and records what each cost beside the verdict, never as it, with the word
a trn2 user acts on (run/remedies.py: trn2-ready, costly on trn2, not on trn2), and stops at the first trn2-ready PASS.
A remedy that changes what the model computes is marked so and never counts as the model running; one that is exact
only within a limit (``window_limited``) is not applicable, and not counted, where the test's sequence exceeds it.

Dropped: ``torch._dynamo.config.capture_scalar_outputs`` (with ``capture_dynamic_output_shape_ops``), tried on the 8
data-dependent FAILs of the 5.24.0 pair (2026-12-05): 0 of 8 passed, and what it makes of a data-dependent value is an
unbacked symbol, which Trainium's static shapes refuse anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_REMEDY_RUNS = 3
# What the transformers recipe reads of a remedy: torch's settings by dotted name, the static cache's layer class per
# layer type (transformers.cache_utils.STATIC_LAYER_TYPE_MAPPING), torch.compile's, generate()'s, from_pretrained's.
EXTENSION_POINTS = ("config", "cache_layers", "compile", "generate", "load")


@dataclass(frozen=True)
class Remedy:
    name: str
    label: str  # the change, as a person would write it
    reason: str  # why it is on the list
    settings: dict = field(default_factory=dict)  # extension point -> its settings (EXTENSION_POINTS)
    changes_computation: bool = False  # True: a PASS with it is not the model running
    caveat: str = ""  # what a PASS with it does not show, said beside it in the answer
    window_limited: bool = False  # exact only while prompt + new tokens fit the config's attention window


REMEDIES = {remedy.name: remedy for remedy in (
    Remedy("use_cache", "use_cache=True", "generate() reads use_cache from the checkpoint's generation config: false "
           "means no cache, so no static cache and nothing compiled; the same weights, with a cache",
           {"generate": {"use_cache": True}}),
    Remedy("dynamic_window", 'torch.compiler.config.dynamic_sources = r".*cumulative_length_int"',
           "the sliding-window cache's length is a Python int guarded on every decode step; marked dynamic, it is a "
           "symbolic integer of one compiled graph",
           {"config": {"torch.compiler.config.dynamic_sources": r".*cumulative_length_int"}}),
    Remedy("recompile_limit", "torch._dynamo.config.recompile_limit = 64",
           "a Python value guarded on every decode step (a sliding window's position) recompiles the step each token; "
           "a higher limit lets generate() finish, at one compile per generated token",
           {"config": {"torch._dynamo.config.recompile_limit": 64}}),
    Remedy("fullgraph_false", "fullgraph=False",
           "where dynamo cannot trace a piece, it breaks the graph there and compiles the rest; each break is a return "
           "to Python on every step (graph_breaks counts them)",
           {"compile": {"fullgraph": False}}),
    Remedy("full_static_within_window", "full static layers for the sliding ones",
           "inside its window a sliding (or chunked) layer computes what a full one does; as a plain static layer it "
           "has no Python int for dynamo to guard at every step: static shapes, one graph, nothing symbolic. A Neuron "
           "deployment compiles at a fixed maximum length anyway: within the window, that is this",
           {"cache_layers": {"sliding_attention": "StaticLayer", "chunked_attention": "StaticLayer",
                             "hybrid_sliding": "LinearAttentionAndStaticFullAttentionLayer"}},
           window_limited=True),
    Remedy("attn_eager", 'attn_implementation="eager"',
           "the failure is inside transformers' SDPA attention; its eager attention computes the same softmax(QK^T)V "
           "with plain tensor operations (tried on kosmos-2, 5.24.0: it then fails in the model's own mask code)",
           {"load": {"attn_implementation": "eager"}}),
)}

# A cause's signature (a regular expression over the row's cause) -> the remedies to try, in order. The first entry
# that matches decides.
LADDER = [
    (r"use_cache: false", ["use_cache"]),
    (r"StaticSlidingWindowLayer\.cumulative_length_int", ["full_static_within_window", "dynamic_window",
                                                          "recompile_limit"]),
    (r"recompile limit", ["recompile_limit"]),
    (r"data-dependent|PendingUnbackedSymbolNotFound|unbacked", ["fullgraph_false"]),
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


def remedy_entry(name: str) -> dict:
    """A remedy as run.py's PARAMS carries it: its name, then its settings per extension point."""
    remedy = REMEDIES.get(name)
    if remedy is None:
        raise KeyError(f"no remedy named {name!r}: one of {', '.join(REMEDIES)}")
    return {"name": remedy.name, **remedy.settings}


def remedy_line(name: str) -> str:
    """The one line a remedy's run.py adds to the unmodified one (its PARAMS entry, as rendered)."""
    from neuronhelpers.recipes.render import params_line

    return params_line("remedy", remedy_entry(name)).strip()
