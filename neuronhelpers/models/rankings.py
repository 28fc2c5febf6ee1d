"""The Hub's rankings (Trending, Downloads), one task at a time, cached as dated local snapshots.

Online, ``fetch_rankings`` asks ``HfApi.list_models`` sorted by trending score or downloads, with each
model's config in the same listing (``expand=[..., "config"]``), and records each model's architecture
(``model_type``) so an untested model can show its architecture twin's verdict as a hint;
``save_snapshot`` keeps a dated copy (``neuronhelpers rankings --refresh`` does both). Offline,
``load_rankings`` returns the newest snapshot, or the small sample shipped with the package (labelled as
a sample, with its date) so the views work on a fresh machine.

Taught in notebook 01 (the Trending and Downloads views).
"""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources
from pathlib import Path

import pandas as pd

from neuronhelpers.core import vocab
from neuronhelpers.core.settings import home
from neuronhelpers.twins.specs import pipeline_family

SORTS = {"trending": "trending_score", "downloads": "downloads"}
TASKS = tuple(vocab.TASKS)
# What each listed model carries: one request per (view, task), no per-model config download.
EXPAND = ["pipeline_tag", "downloads", "trendingScore", "likes", "config"]
COLUMNS = ["view", "task", "rank", "model_id", "model_type", "downloads", "trending_score", "likes"]


def snapshot_dir() -> Path:
    return home() / "rankings"



def model_type_of(info) -> str | None:
    """The architecture of a listed model from the config the Hub returned with it: transformers' model_type
    (sentence-transformers models carry their encoder's); for a diffusers pipeline, its text-to-image family
    (the AutoPipelineForText2Image key its class maps to, as twins are named), else the pipeline's class name."""
    config = getattr(info, "config", None)
    if not isinstance(config, dict):
        return None
    if config.get("model_type"):
        return str(config["model_type"])
    diffusers = config.get("diffusers")
    if isinstance(diffusers, dict) and diffusers.get("_class_name"):
        pipeline = str(diffusers["_class_name"])
        return pipeline_family(pipeline)
    return None


def fetch_rankings(*, tasks=TASKS, limit: int = 50, api=None) -> pd.DataFrame:
    """Rankings from the Hub (needs the network): one row per (view, task, rank), with each model's model_type."""
    from huggingface_hub import HfApi

    api = api or HfApi()
    rows = []
    for view, sort in SORTS.items():
        for task in tasks:
            listing = api.list_models(pipeline_tag=task, sort=sort, limit=limit, expand=list(EXPAND))
            for rank, info in enumerate(listing, start=1):
                rows.append({"view": view, "task": task, "rank": rank, "model_id": info.id,
                             "model_type": model_type_of(info),
                             "downloads": getattr(info, "downloads", None),
                             "trending_score": getattr(info, "trending_score", None),
                             "likes": getattr(info, "likes", None)})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs.update(source="hub", date=dt.date.today().isoformat())
    return frame


def save_snapshot(frame: pd.DataFrame, folder: Path | None = None) -> Path:
    folder = folder or snapshot_dir()
    folder.mkdir(parents=True, exist_ok=True)
    date = frame.attrs.get("date") or dt.date.today().isoformat()
    path = folder / f"rankings-{date}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"date": date, "source": frame.attrs.get("source", "hub"),
                               "rows": frame.to_dict("records")}, indent=1))
    tmp.replace(path)
    return path


def _from_json(text: str, label: str) -> pd.DataFrame:
    data = json.loads(text)
    frame = pd.DataFrame(data["rows"], columns=COLUMNS)
    frame.attrs.update(source=data.get("source", label), date=data.get("date"))
    return frame


def load_rankings(folder: Path | None = None) -> pd.DataFrame:
    """The newest local snapshot, else the sample shipped with the package (attrs say which, and its date)."""
    folder = folder or snapshot_dir()
    snapshots = sorted(folder.glob("rankings-*.json")) if folder.is_dir() else []
    for path in reversed(snapshots):
        try:
            return _from_json(path.read_text(), "hub")
        except (ValueError, KeyError):
            continue  # a damaged snapshot: try an older one
    return _from_json(resources.files("neuronhelpers.data").joinpath("rankings_sample.json").read_text(), "sample")


def ranking_label(frame: pd.DataFrame) -> str:
    source = frame.attrs.get("source")
    date = frame.attrs.get("date") or "unknown date"
    return f"sample rankings shipped with neuronhelpers ({date})" if source == "sample" else f"Hub rankings of {date}"
