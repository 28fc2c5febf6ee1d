"""The answer for a Hub id, in one place: a row measured on Trainium if there is one, else the verdict of the model's
own twin (``tiny/<org>--<name>``: its config, sizes shrunk), else its architecture twin's (``tiny/<model_type>``:
the default config); each labelled with which one it is (``vocab.ANSWERS``). The explorer's hints and detail pane,
``causes``, ``plan`` and notebook 05 read it.

``own_config_effects`` compares the two kinds of twin: for how many models their own config changes their
architecture's verdict, and (where ``causes --isolate`` ran) which field of the config is responsible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

import neuronhelpers.twins.corpus as corpus
from neuronhelpers.analysis.agreement import model_twin_rows
from neuronhelpers.core.vocab import (
    ANSWER_ARCHITECTURE_TWIN,
    ANSWER_MODEL_TWIN,
    ANSWER_SHELF,
    ANSWER_TRAINIUM,
    FAIL,
    PASS,
    WEIGHTS_SHELF,
)
from neuronhelpers.run.remedies import remedies_line
from neuronhelpers.store.dataset import LAST_ATTEMPT, newest_per_model, version_key
from neuronhelpers.store.schema import measured_on_trainium
from neuronhelpers.twins.corpus import model_id_of
from neuronhelpers.twins.own import GENERATION_CONFIG
from neuronhelpers.twins.specs import TWIN_PREFIX
from neuronhelpers.verdict.evidence import verdict_words

# Where ``causes --isolate`` records which config field turns a model's verdict (in the dataset folder).
ISOLATED_FILE = "own_config_fields.json"
NOT_ISOLATED = "not isolated"


# The columns that say which version pair a row belongs to, and those an answer reads.
PAIR_COLUMNS = ["compiler", "compiler_version", "library", "library_version"]
ANSWER_COLUMNS = ["model_id", "task", "twin_of", "twin_from", "result", "stage", "cause", "verification",
                  "check_sensitive", "config_source", "config_form", "config_id_inferred", "config_corroboration",
                  "remedies", *PAIR_COLUMNS]
# ... and what an answer reads besides (newest_per_model's column: not a column of the rows, nor of the views).
READ_COLUMNS = [*ANSWER_COLUMNS, LAST_ATTEMPT]
# How a corpus copy was written, in words (corpus SOURCE.json's "form").
_FORM_WORDS = {"json file": "copied as a JSON file", "python literal": "re-serialized from a Python literal",
               "json string": "copied from a JSON string inside another file",
               "package file": "a registry package's file", "hub page": "the Hub's own page of the file"}


@dataclass(frozen=True)
class Answer:
    """One answer: where it comes from (``kind``: vocab.ANSWER_*), the row's model id and its verdict, the version
    pair that row belongs to, where a model twin's config came from (``source``), what the verdict rests on that the
    twin could not check (``caveat``), and for a model twin its architecture twin's answer in the same pair."""

    kind: str
    model_id: str
    result: str
    stage: str | None = None
    cause: str | None = None
    pair: str | None = None
    verification: str | None = None
    check_sensitive: bool | None = None
    source: str | None = None
    caveat: str | None = None
    remedies: str | None = None  # a FAIL's remedies as tried (run/remedies.remedies_line), beside the verdict
    elsewhere: str | None = None  # a FAIL's same twin passing in another version pair of these rows (a lookup)
    last_attempt: str | None = None  # a newer attempt that reached no verdict and did not replace this one
    architecture: Answer | None = None

    @property
    def verdict(self) -> str:
        """'PASS (exact, the check could fail)', 'FAIL at compile', 'UNTESTED (twin)' (evidence.verdict_words)."""
        return verdict_words(self.result, self.stage, self.verification, self.check_sensitive)

    def line(self) -> str:
        """'model twin tiny/microsoft--Phi-3.5-mini-instruct (inductor 2.14.1, transformers 5.24.0): FAIL at compile:
        <cause>; from a copy of its config (...); architecture twin tiny/phi3 in the same pair: PASS (...)'."""
        text = f"{self.kind} {self.model_id}" if self.kind not in (ANSWER_TRAINIUM, ANSWER_SHELF) else self.kind
        text += (f" ({self.pair}): " if self.pair else ": ") + self.verdict
        if self.result != PASS and self.cause:
            text += f": {self.cause}"
        if self.last_attempt:
            text += f" (last attempt: {self.last_attempt})"
        if self.result == FAIL and self.remedies:
            text += f"; what would make it run: {self.remedies}"
        if self.result == FAIL and self.elsewhere:
            text += f"; {self.elsewhere}"
        for extra in (self.source, self.caveat):
            if extra:
                text += f"; {extra}"
        if self.architecture is not None:
            text += f"; architecture twin {self.architecture.model_id} in the same pair: {self.architecture.verdict}"
        return text


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def hub_id_of_twin(model_id: str) -> str | None:
    """The Hub id a model twin's id stands for (tiny/<org>--<name> -> org/name)."""
    return model_id_of(model_id[len(TWIN_PREFIX):]) if isinstance(model_id, str) and \
        model_id.startswith(TWIN_PREFIX) else None


def pair_words(record) -> str | None:
    """'inductor 2.14.1, transformers 5.24.0': the version pair a row belongs to."""
    compiler, version, library, library_version = (getattr(record, c, None) for c in PAIR_COLUMNS)
    if not isinstance(version, str) or not isinstance(library_version, str):
        return None
    return f"{compiler or 'compiler'} {version}, {library or 'library'} {library_version}"


def source_words(record) -> str | None:
    """Where a model twin's config came from, in words: 'its own twin, from a copy of its config (GitHub
    org/repo@abc1234, re-serialized from a Python literal; the Hub id inferred from a name; not checked against the
    Hub; single copy: ...)'; None for a row without a config source (an architecture twin, an older row)."""
    source = _text(getattr(record, "config_source", None))
    if source is None:
        return None
    kind, _, where = source.partition(":")
    parts = []
    if kind == "github":
        parts.append(f"GitHub {where.split(':', 1)[0]}")
    elif kind == "package":
        parts.append(f"the package {where.split(':', 1)[0]}")
    form = _FORM_WORDS.get(_text(getattr(record, "config_form", None)) or "")
    if form and kind not in ("hub", "folder", "shelf"):
        parts.append(form)
    if getattr(record, "config_id_inferred", None) is True:
        parts.append("the Hub id inferred from a file, folder or variable name")
    if kind in ("hub", "folder", "shelf"):
        what = {"hub": "the Hub", "folder": "the folder", "shelf": "the shelf's real checkpoint"}[kind]
        return f"its own twin, from its config as {what} has it ({where})"
    parts.append("not checked against the Hub")
    corroboration = _text(getattr(record, "config_corroboration", None))
    if corroboration:
        parts.append(corroboration)
    return f"its own twin, from a copy of its config ({'; '.join(parts)})"


def generation_caveat(hub_id: str | None, cause: str | None) -> str | None:
    """A FAIL that rests on ``use_cache: false`` in config.json, where generate() reads use_cache from the
    checkpoint's generation_config.json and the corpus holds no copy of this model's: the answer says so."""
    if not hub_id or not cause or "use_cache: false" not in cause:
        return None
    record = corpus.records().get(hub_id) or {}
    if GENERATION_CONFIG in record.get("files", {}):
        return None
    return (f"this FAIL rests on use_cache: false in config.json; generate() reads use_cache from the checkpoint's "
            f"{GENERATION_CONFIG}, of which no copy was found: it holds only if that file sets it too")


def _pair_keys(frame: pd.DataFrame) -> list[tuple]:
    """Each row's (compiler version, library version, library, compiler), a missing value as None (NaN never equals
    itself, so it could not key a dict)."""
    return [tuple(None if pd.isna(v) else v for v in r) for r in frame[
        ["compiler_version", "library_version", "library", "compiler"]].itertuples(index=False)]


def _oldest_pair_first(rows: pd.DataFrame) -> pd.DataFrame:
    """Each model's newest row per version pair, with its pair's rank (``pair_rank``, 0 the newest pair by
    ``dataset.version_key``), oldest pair first: read in order into a dict, the newest pair's row is the one kept."""
    newest = newest_per_model(rows, [*PAIR_COLUMNS, "model_id"])
    keys = _pair_keys(newest)
    order = {pair: rank for rank, pair in enumerate(sorted(set(keys), reverse=True, key=lambda p: (
        version_key(p[0]), version_key(p[1]), str(p[2]), str(p[3]))))}
    return newest.assign(pair_rank=[order[p] for p in keys]).sort_values("pair_rank", ascending=False, kind="stable")


def _shelf_records(rows: pd.DataFrame) -> dict:
    """A real checkpoint from the shelf, run on CPU (weights ``shelf: ...``): each Hub id's row in the newest pair."""
    if rows.empty or "weights" not in rows:
        return {}
    shelved = rows[rows["weights"].fillna("").astype(str).str.startswith(f"{WEIGHTS_SHELF}:")]
    ranked = _oldest_pair_first(shelved)[[*READ_COLUMNS, "weights"]]
    return {record.model_id: record for record in ranked.itertuples(index=False)}


class Answers:
    """The answers ``rows`` give (any rows: one version pair's or a whole catalog's). The rule, the same for every
    interface: a Trainium row if there is one; else the real checkpoint from the shelf, run on CPU, in the newest pair
    that holds it; else the model's own twin in the newest pair that holds it, beside the architecture twin of that
    same pair; else the architecture twin of the newest pair that holds it. Each answer names its pair."""

    def __init__(self, rows: pd.DataFrame):
        rows = rows if not rows.empty else rows.iloc[0:0]
        rows = rows.assign(**{c: None for c in READ_COLUMNS if c not in rows})
        twins = rows[rows["twin_of"].notna()]
        self.by_task, self.by_type, self.by_model = {}, {}, {}  # the newest pair's record of each
        self.by_twin_id: dict[str, object] = {}  # an architecture twin asked for by its own id (tiny/<model_type>)
        self._arch_in_pair: dict[tuple, object] = {}
        ranked = _oldest_pair_first(twins)
        self._passes_in: dict[str, list[str]] = {}  # a twin -> the pairs where it passes, newest first
        for record in ranked[ranked["result"] == PASS].sort_values("pair_rank", kind="stable").itertuples(index=False):
            self._passes_in.setdefault(record.model_id, []).append(pair_words(record))
        is_own = model_twin_rows(ranked)
        for record in ranked[~is_own][[*READ_COLUMNS, "pair_rank"]].itertuples(index=False):
            self.by_task[(record.task, record.twin_of)] = record
            self.by_type[record.twin_of] = record
            self.by_twin_id[record.model_id] = record
            self._arch_in_pair[(record.pair_rank, record.task, record.twin_of)] = record
            self._arch_in_pair.setdefault((record.pair_rank, None, record.twin_of), record)
        for record in ranked[is_own][[*READ_COLUMNS, "pair_rank"]].itertuples(index=False):
            hub_id = hub_id_of_twin(record.model_id)
            if hub_id:
                self.by_model[hub_id] = record
        self.trainium = {}
        if not rows.empty and "backend" in rows:
            weights = rows["weights"] if "weights" in rows else [None] * len(rows)
            mask = [measured_on_trainium(b, w, m) for b, w, m in zip(rows["backend"], weights, rows["model_id"],
                                                                     strict=True)]
            for record in newest_per_model(rows[mask])[READ_COLUMNS].itertuples(index=False):
                self.trainium[record.model_id] = record
        self.shelf = _shelf_records(rows)

    def _answer(self, kind: str, record, **extra) -> Answer:
        sensitive = getattr(record, "check_sensitive", None)
        pair = pair_words(record)
        elsewhere = None
        if record.result == FAIL:  # where the catalog's other pairs pass the same twin: a lookup, not a run
            passes = [p for p in self._passes_in.get(record.model_id, []) if p != pair]
            elsewhere = f"the same twin passes with {' and with '.join(passes)}" if passes else None
        return Answer(kind, record.model_id, record.result, _text(record.stage), _text(record.cause),
                      pair=pair, verification=_text(getattr(record, "verification", None)),
                      check_sensitive=sensitive if isinstance(sensitive, bool) else None,
                      remedies=remedies_line(getattr(record, "remedies", None), architecture_twin=bool(
                          _text(getattr(record, "twin_of", None)) and not _text(getattr(record, "twin_from", None)))),
                      elsewhere=elsewhere,
                      last_attempt=_text(getattr(record, LAST_ATTEMPT, None)), **extra)

    def _architecture(self, model_type, task, rank=None):
        if rank is not None:
            return self._arch_in_pair.get((rank, task, model_type)) or self._arch_in_pair.get((rank, None, model_type))
        return self.by_task.get((task, model_type)) or self.by_type.get(model_type)

    def twin_answer(self, model_id: str | None, model_type=None, task=None) -> Answer | None:
        """The model's own twin's verdict (newest pair holding it, with that pair's architecture twin beside it), else
        its architecture twin's (None when neither has a row). A twin's own id answers too: a model twin's
        (tiny/<org>--<name>) as its Hub id, an architecture twin's (tiny/<model_type>) as that twin."""
        model_id = hub_id_of_twin(model_id) or model_id
        if model_id in self.by_twin_id:
            return self._answer(ANSWER_ARCHITECTURE_TWIN, self.by_twin_id[model_id])
        if model_id in self.by_model:
            record = self.by_model[model_id]
            arch = self._architecture(record.twin_of, record.task, record.pair_rank)
            return self._answer(ANSWER_MODEL_TWIN, record, source=source_words(record),
                                caveat=generation_caveat(model_id, _text(record.cause)) if record.result == FAIL
                                else None,
                                architecture=self._answer(ANSWER_ARCHITECTURE_TWIN, arch) if arch is not None else None)
        if not isinstance(model_type, str) or not model_type:
            return None
        twin = self._architecture(model_type, task)
        return self._answer(ANSWER_ARCHITECTURE_TWIN, twin) if twin is not None else None

    def answer(self, model_id: str, model_type=None, task=None) -> Answer | None:
        """A Trainium row if there is one, else the real checkpoint's row from the shelf (CPU), else ``twin_answer``."""
        if model_id in self.trainium:
            return self._answer(ANSWER_TRAINIUM, self.trainium[model_id])
        if model_id in self.shelf:
            record = self.shelf[model_id]
            return self._answer(ANSWER_SHELF, record, source=f"weights: {record.weights}")
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
