"""Judges: when a sharded model is too large for a CPU reference, decide whether its text is sound English.

One interface, two judges: ``LMJudge`` scores the text with a small local causal LM (given by path,
never downloaded at run time); ``LexicalJudge`` is the offline fallback, based on how much of the
text is common English words and how repetitive it is. ``Judgement.verification`` names the one
that ran, as the row's ``verification`` column does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# The most frequent English words: real prose is full of them, token soup is not.
COMMON_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each even few first for from further get go had has have
having he her here hers herself him himself his how i if in into is it its itself just know like little long
make man many me more most much must my myself new no nor not now of off on once one only or other our ours
ourselves out over own people said same say see she should so some such take than that the their theirs them
themselves then there these they thing think this those through time to too two under until up upon us use very
was way we well were what when where which while who whom why will with would year you your yours yourself
yourselves day good great just old right small still tell work world life hand part place case week company
number group problem fact look find give come came went made each story sea night moon bright learn learns paint
robot image colour color shape shapes write short sentence describe answer question water light house school
""".split())
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


@dataclass
class Judgement:
    ok: bool
    score: float
    verification: str
    reason: str


class LexicalJudge:
    """Offline word-frequency judge. Accepts text whose words are mostly real and partly common English."""

    verification = "judge_lexical"

    def __init__(self, min_common: float = 0.2, min_wordlike: float = 0.6, min_distinct: float = 0.4):
        self.min_common, self.min_wordlike, self.min_distinct = min_common, min_wordlike, min_distinct

    def judge(self, text: str) -> Judgement:
        pieces = text.split()
        words = [w.lower() for w in _WORD.findall(text)]
        if len(words) < 3:
            return Judgement(False, 0.0, self.verification, f"only {len(words)} words")
        wordlike = sum(1 for p in pieces if _WORD.fullmatch(p.strip(".,;:!?\"()'")) is not None) / max(len(pieces), 1)
        common = sum(w in COMMON_WORDS for w in words) / len(words)
        distinct = len(set(words)) / len(words)
        ok = common >= self.min_common and wordlike >= self.min_wordlike and distinct >= self.min_distinct
        reason = f"common words {common:.0%}, word-like pieces {wordlike:.0%}, distinct words {distinct:.0%}"
        return Judgement(ok, round(common, 4), self.verification, reason)


class LMJudge:
    """Scores text by its perplexity under a small local causal LM; accepts below ``max_perplexity``."""

    verification = "judge_lm"

    def __init__(self, path: str, max_perplexity: float = 200.0):
        import transformers

        from .errors import UserError

        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
        except OSError as exc:
            raise UserError(f"judge model '{path}' could not be loaded from disk ({exc.__class__.__name__}): "
                            "give a local folder with a causal LM and its tokenizer") from None
        self.path, self.max_perplexity = path, max_perplexity

    def perplexity(self, text: str) -> float:
        import torch

        ids = self.tokenizer(text, return_tensors="pt")["input_ids"]
        if ids.shape[1] < 2:
            return math.inf
        with torch.no_grad():
            loss = self.model(input_ids=ids, labels=ids).loss
        return float(torch.exp(loss))

    def judge(self, text: str) -> Judgement:
        ppl = self.perplexity(text)
        return Judgement(ppl <= self.max_perplexity, ppl, self.verification,
                         f"perplexity {ppl:.1f} under {self.path} (accepts <= {self.max_perplexity:g})")


def make_judge(judge_model: str | None = None):
    """The LM judge when a local judge model is given, else the lexical judge."""
    return LMJudge(judge_model) if judge_model else LexicalJudge()
