"""What is known of a Hub model without running it: its task and architecture (``model_type``).

Offline the sources are the Selected list, the rankings snapshot (or the sample shipped with the package), the shelf
and the config corpus (twins/corpus.py); where the Hub is reachable, the model's own config
(``architecture_from_hub``). Rows of the published dataset carry neither task nor architecture: reading them fills
both from here (``known_architectures``), and the comparison of twins with Trainium verdicts asks the Hub for the
rest. Taught in notebook 05.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from neuronhelpers.models.rankings import load_rankings, model_type_of
from neuronhelpers.models.selected import SELECTED
from neuronhelpers.models.shelf import SHELF, shelf_folder
from neuronhelpers.twins import corpus


def _shelf_model_type(hub_id: str) -> str | None:
    folder = shelf_folder(hub_id)
    try:
        return json.loads((folder / "config.json").read_text()).get("model_type") if folder else None
    except (OSError, ValueError):
        return None


def known_architectures() -> dict[str, tuple[str | None, str | None]]:
    """model_id -> (task, model_type) from the config corpus, the rankings snapshot, the shelf and the Selected list
    (the later source wins where two know the same model)."""
    known: dict[str, tuple[str | None, str | None]] = {}
    for model_id, record in corpus.records().items():  # the config corpus: its architecture (the task: own.py's rule)
        if "config.json" in record.get("files", {}):
            config = json.loads((Path(record["folder"]) / "config.json").read_text())
            known[model_id] = (None, config.get("model_type"))
    rankings = load_rankings()
    for model_id, task, model_type in rankings[["model_id", "task", "model_type"]].itertuples(index=False):
        known[model_id] = (task, model_type if isinstance(model_type, str) else None)
    for entry in SHELF:
        known[entry.hub_id] = (entry.task, _shelf_model_type(entry.hub_id) or known.get(entry.hub_id, (None, None))[1])
    for entry in SELECTED:
        known[entry.model_id] = (entry.task, entry.model_type)
    return known


@lru_cache(maxsize=1024)
def architecture_from_hub(model_id: str) -> tuple[str | None, str | None]:
    """(task, model_type) from the Hub's listing of the model (its pipeline tag and config); (None, None) where the
    Hub cannot be reached or does not know the model."""
    from huggingface_hub import HfApi

    from neuronhelpers.core.network import hub_reachable

    if not hub_reachable():
        return None, None
    try:
        info = HfApi().model_info(model_id, expand=["pipeline_tag", "config"])
    except Exception:  # noqa: BLE001 - a gated, renamed or deleted repo is simply not known
        return None, None
    return getattr(info, "pipeline_tag", None), model_type_of(info)
