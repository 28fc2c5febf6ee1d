"""The answer for a Hub id, in one place: a row measured on Trainium if there is one, else the verdict of the model's
own twin (``tiny/<org>--<name>``: its config, sizes shrunk), else its architecture twin's (``tiny/<model_type>``:
the default config); each labelled with which one it is (``vocab.ANSWERS``). The explorer's hints and detail pane,
``causes``, ``plan`` and notebook 06 read it.

``own_config_effects`` compares the two kinds of twin: for how many models their own config changes their
architecture's verdict, and (where ``causes --isolate`` ran) which field of the config is responsible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from neuronhelpers.analysis.agreement import model_twin_rows
from neuronhelpers.core.vocab import (
    ANSWER_ARCHITECTURE_TWIN,
    ANSWER_MODEL_TWIN,
    ANSWER_TRAINIUM,
    FAIL,
    PASS,
    UNTESTED,
)
from neuronhelpers.store.dataset import newest_per_model
from neuronhelpers.store.schema import measured_on_trainium
from neuronhelpers.twins.corpus import model_id_of
from neuronhelpers.twins.specs import TWIN_PREFIX

# Where ``causes --isolate`` records which config field turns a model's verdict (in the dataset folder).
ISOLATED_FILE = "own_config_fields.json"
NOT_ISOLATED = "not isolated"


@dataclass(frozen=True)
class Answer:
    """One answer: where it comes from (``kind``: vocab.ANSWER_*), the row's model id and its verdict."""

    kind: str
    model_id: str
    result: str
    stage: str | None = None
    cause: str | None = None

    def line(self) -> str:
        """'model twin tiny/microsoft--Phi-3.5-mini-instruct: FAIL at compile: <cause>'."""
        text = f"{self.kind} {self.model_id}: " if self.kind != ANSWER_TRAINIUM else f"{self.kind}: "
        text += f"{UNTESTED} ({self.stage})" if self.result == UNTESTED and self.stage else str(self.result)
        if self.result == FAIL and self.stage:
            text += f" at {self.stage}"
        if self.result != PASS and self.cause:
            text += f": {self.cause}"
        return text


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def hub_id_of_twin(model_id: str) -> str | None:
    """The Hub id a model twin's id stands for (tiny/<org>--<name> -> org/name)."""
    return model_id_of(model_id[len(TWIN_PREFIX):]) if isinstance(model_id, str) and \
        model_id.startswith(TWIN_PREFIX) else None


class Answers:
    """The answers ``rows`` give (one version pair's rows, or any rows: each model's newest is read)."""

    def __init__(self, rows: pd.DataFrame):
        rows = rows if not rows.empty else rows.iloc[0:0]
        twins = rows[rows["twin_of"].notna()] if "twin_of" in rows else rows.iloc[0:0]
        own = model_twin_rows(twins)
        self.by_task, self.by_type, self.by_model = {}, {}, {}
        columns = ["model_id", "task", "twin_of", "result", "stage", "cause"]
        for record in newest_per_model(twins[~own])[columns].itertuples(index=False):
            self.by_task[(record.task, record.twin_of)] = record
            self.by_type.setdefault(record.twin_of, record)
        for record in newest_per_model(twins[own])[columns].itertuples(index=False):
            hub_id = hub_id_of_twin(record.model_id)
            if hub_id:
                self.by_model[hub_id] = record
        self.trainium = {}
        if not rows.empty and "backend" in rows:
            weights = rows["weights"] if "weights" in rows else [None] * len(rows)
            mask = [measured_on_trainium(b, w, m) for b, w, m in zip(rows["backend"], weights, rows["model_id"],
                                                                     strict=True)]
            for record in newest_per_model(rows[mask])[columns].itertuples(index=False):
                self.trainium[record.model_id] = record

    @staticmethod
    def _answer(kind: str, record) -> Answer:
        return Answer(kind, record.model_id, record.result, _text(record.stage), _text(record.cause))

    def twin_answer(self, model_id: str | None, model_type=None, task=None) -> Answer | None:
        """The model's own twin's verdict, else its architecture twin's (None when neither has a row)."""
        if model_id in self.by_model:
            return self._answer(ANSWER_MODEL_TWIN, self.by_model[model_id])
        if not isinstance(model_type, str) or not model_type:
            return None
        twin = self.by_task.get((task, model_type)) or self.by_type.get(model_type)
        return self._answer(ANSWER_ARCHITECTURE_TWIN, twin) if twin is not None else None

    def answer(self, model_id: str, model_type=None, task=None) -> Answer | None:
        """A Trainium row if there is one, else ``twin_answer``."""
        if model_id in self.trainium:
            return self._answer(ANSWER_TRAINIUM, self.trainium[model_id])
        return self.twin_answer(model_id, model_type, task)

    def hint(self, model_type, task=None, model_id: str | None = None) -> str:
        """For a model without a row of its own: its twin's verdict as a labelled hint (never its result)."""
        found = self.twin_answer(model_id, model_type, task)
        return found.line() if found else ""


# ---- a model's own config against its architecture's -----------------------------------------------------------

EFFECT_COLUMNS = ["model_id", "twin_model", "model_type", "task", "result", "stage", "cause", "architecture_twin",
                  "architecture_result", "architecture_stage", "differs", "field"]


def verdict_text(result, stage) -> str:
    """'FAIL at compile', 'PASS': a verdict as two rows are compared (a FAIL's stage counts)."""
    return f"{result} at {stage}" if result == FAIL else str(result)


def own_config_effects(rows: pd.DataFrame, isolated: dict | None = None) -> pd.DataFrame:
    """Each model twin with a verdict beside its architecture twin's (same task and type, in ``rows``: one version
    pair's), whether they differ (PASS / FAIL, and a FAIL's stage), and the field ``isolated`` names for it."""
    isolated = isolated or {}
    answers = Answers(rows)
    out = []
    twins = newest_per_model(rows[model_twin_rows(rows)]) if not rows.empty else rows
    for record in twins.sort_values("model_id").itertuples(index=False) if not twins.empty else ():
        hub_id = hub_id_of_twin(record.model_id)
        arch = answers.by_task.get((record.task, record.twin_of)) or answers.by_type.get(record.twin_of)
        if not hub_id or arch is None or record.result not in (PASS, FAIL) or arch.result not in (PASS, FAIL):
            continue
        differs = verdict_text(record.result, record.stage) != verdict_text(arch.result, arch.stage)
        out.append({"model_id": hub_id, "twin_model": record.model_id, "model_type": record.twin_of,
                    "task": record.task, "result": record.result, "stage": _text(record.stage),
                    "cause": _text(record.cause), "architecture_twin": arch.model_id,
                    "architecture_result": arch.result, "architecture_stage": _text(arch.stage), "differs": differs,
                    "field": isolated[hub_id].get("field") if differs and hub_id in isolated else None})
    return pd.DataFrame(out, columns=EFFECT_COLUMNS).sort_values("model_id", key=lambda s: s.str.lower(),
                                                               ignore_index=True)


def read_isolated(folder) -> dict:
    """What ``causes --isolate`` recorded in a dataset folder (model id -> field, runs, tried), or {}."""
    path = Path(folder) / ISOLATED_FILE if folder else None
    if path is None or not path.is_file():
        return {}
    return json.loads(path.read_text()).get("models", {})


def own_config_line(effects: pd.DataFrame) -> str:
    """'a model's own config changes its architecture's verdict for N of M models: <model> (<field>), ...'."""
    if effects.empty:
        return ("no model twin has a verdict beside its architecture twin's in these rows (sweep --corpus builds "
                "every corpus model's own twin)")
    differ = effects[effects["differs"].astype(bool)]
    line = f"a model's own config changes its architecture's verdict for {len(differ)} of {len(effects)} models"
    if differ.empty:
        return line
    named = "; ".join(
        f"{r.model_id} {verdict_text(r.result, r.stage)} (architecture twin "
        f"{verdict_text(r.architecture_result, r.architecture_stage)}; field: "
        f"{r.field or 'not yet looked for: causes --isolate'})" for r in differ.itertuples(index=False))
    return f"{line}: {named}"
