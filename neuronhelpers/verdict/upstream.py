"""What upstream knows of a cause: the public issue or pull request that reports it (or fixes its code path), with its
state as last read, in one table. A cause without an entry says so rather than guess.

The links were found by searching the public threads of huggingface/transformers, pytorch/pytorch and
huggingface/diffusers on 2026-12-05 (``READ_ON``); a state can have changed since, which is why every line says when
it was read. ``relation`` says how close the thread is: ``reports`` (the same failure), ``same code`` (the same code
path, reported on another model or with an older message), ``introduced`` (the change that made it an error).
No thread named the release that fixed one of these; the catalog's own pairs say where a model passes in another
release (analysis/answers.py), which is a lookup, not a claim about upstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

READ_ON = "2026-12-05"


@dataclass(frozen=True)
class Upstream:
    url: str
    state: str  # as the thread showed it on READ_ON: open, closed, merged, or unknown and why
    relation: str  # reports | same code | introduced
    note: str  # why this thread, in a line

    def line(self) -> str:
        return f"upstream: {self.url} ({self.relation}; {self.state}, read {READ_ON}): {self.note}"


# A cause's signature (a regular expression over the row's cause, as verdict/causes.py normalises it) -> its thread.
UPSTREAM = [
    (r"StaticSlidingWindowLayer\.cumulative_length_int", Upstream(
        "https://github.com/huggingface/transformers/issues/44609", "state unknown: quoted by tenstorrent/tt-xla#3688",
        "reports", "the sliding-window cache keeps its length as a Python int that dynamo guards every decode step")),
    (r"PendingUnbackedSymbolNotFound", Upstream(
        "https://github.com/pytorch/pytorch/issues/158058", "open", "reports",
        "torch.arange with bounds read from a tensor (the cache's length) raises PendingUnbackedSymbolNotFound")),
    (r"Could not extract specialized integer from data-dependent expression", Upstream(
        "https://github.com/huggingface/transformers/pull/40421", "closed", "same code",
        "the MoE loop over nonzero() experts that stops a full-graph trace (reported for HunYuanMoE)")),
    (r"index_copy_\(\): index N is out of bounds", Upstream(
        "https://github.com/huggingface/transformers/pull/48013", "merged", "same code",
        "cpmant's generate() with a cache; transformers 5.24 still overflows the static cache with its prompt tokens")),
    (r"mutation on a view chain", Upstream(
        "https://github.com/pytorch/pytorch/issues/104505", "closed", "introduced",
        "torch.compile refuses a mutation through as_strided views (pytorch#122502); PAG's fill_diagonal_ on a slice")),
]


def upstream_for(cause) -> Upstream | None:
    """The thread that knows a cause, or None where none was found."""
    if not isinstance(cause, str):
        return None
    return next((thread for pattern, thread in UPSTREAM if re.search(pattern, cause)), None)
