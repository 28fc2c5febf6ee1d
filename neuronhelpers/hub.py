"""The Hub's rankings (Trending, Downloads), one task at a time, cached as dated local snapshots.

Online, ``fetch_rankings`` asks ``HfApi.list_models`` sorted by trending score or downloads and
``save_snapshot`` keeps a dated copy (``neuronhelpers rankings --refresh`` does both); offline, ``load_rankings`` returns the newest snapshot, or the small sample
shipped with the package (labelled as a sample, with its date) so the views work on a fresh machine.
"""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources
from pathlib import Path

import pandas as pd

from .settings import home

SORTS = {"trending": "trending_score", "downloads": "downloads"}
TASKS = ("text-generation", "image-text-to-text")
COLUMNS = ["view", "task", "rank", "model_id", "downloads", "trending_score", "likes"]


def snapshot_dir() -> Path:
    return home() / "rankings"


def fetch_rankings(*, tasks=TASKS, limit: int = 50, api=None) -> pd.DataFrame:
    """Rankings from the Hub (needs the network): one row per (view, task, rank)."""
    from huggingface_hub import HfApi

    api = api or HfApi()
    rows = []
    for view, sort in SORTS.items():
        for task in tasks:
            for rank, info in enumerate(api.list_models(pipeline_tag=task, sort=sort, limit=limit), start=1):
                rows.append({"view": view, "task": task, "rank": rank, "model_id": info.id,
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
