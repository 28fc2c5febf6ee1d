"""Judges for sharded runs too large for a CPU reference: measured on held-out English and degenerate output.

The held-out English below was written for these tests: none of its content words occur in the twins'
corpus or our prompts, and none of its text occurs in the Python documentation that the lexical judge's
word list and the test LM judge are made from. The degenerate set is what broken runs write: token soup
(random twin-tokenizer ids, decoded), byte garbage, repetition loops, random letters, real words in random
order, one word repeated, empty or very short text. Accuracies are printed and asserted at the floors
written next to each assertion, set from what was measured (see the numbers there).
"""

import functools
import json
import math
import random
import re
import time
from pathlib import Path

import pytest

from neuronhelpers.core import network
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.protocol import PROMPTS
from neuronhelpers.run import judge
from neuronhelpers.run.judge import DEFAULT_JUDGE_MODEL, JUDGE_MODEL_ENV, LexicalJudge, LMJudge, make_judge
from neuronhelpers.twins import shrink, tokenizers

HELD_OUT = [
    "My grandmother kept her recipes in a tin box, and every winter she baked ginger cookies for the whole family.",
    "The committee will vote on the new budget next Tuesday after a long debate about taxes and roads.",
    "Our team lost the final match by two goals, but the coach praised the players for their courage.",
    "Doctors recommend drinking plenty of fluids and resting in bed when you catch a cold or the flu.",
    "He planted tomatoes, beans and carrots in the garden, then built a little fence to keep the rabbits away.",
    "The museum reopened last spring with an exhibit of ancient coins found near the harbour.",
    "If the train is delayed again, we will miss our connection in Lyon and arrive well after midnight.",
    "Astronomers announced that a distant comet will pass close enough to Earth to be visible without a telescope.",
    "I could not find my keys anywhere, so I called my sister and asked her to bring the spare set.",
    "The company reported higher profits this quarter because demand for electric bicycles grew across Europe.",
    "Heavy snow closed the mountain pass for three days, leaving hundreds of trucks stranded on the highway.",
    "She practised the violin for an hour each evening until her teacher agreed she was ready for the concert.",
    "Volunteers cleaned the beach on Saturday and collected more than forty bags of plastic waste.",
    "The recipe calls for two cups of flour, a pinch of salt and a spoonful of honey.",
    "Our neighbours adopted a grey cat from the shelter, and it now sleeps on their porch all afternoon.",
    "The judge postponed the trial because a key witness had fallen ill during the holidays.",
    "After years of saving, they finally rented a cottage by the lake and moved there with their two sons.",
    "The library extended its hours during exam season so that students could study late into the evening.",
    "Farmers in the valley worry that the dry summer will reduce this year's harvest of wheat and corn.",
    "He apologised for arriving late and explained that his car had broken down on the bridge.",
    "The orchestra rehearsed the symphony twice before the conductor was satisfied with the tempo.",
    "Engineers are testing a lighter battery that could let phones last several days between charges.",
    "Please remember to lock the back door and switch off the lights before you leave the office.",
    "The hikers followed a narrow path through the forest and reached the summit just before sunset.",
    "Prices at the grocery store have risen sharply, so many families now plan their meals more carefully.",
    "The nurse checked his temperature, gave him some medicine, and told him to call if the pain returned.",
    "Historians believe the castle was built in the twelfth century to guard the valley from invaders.",
    "My brother is studying Spanish because he plans to spend next summer working on a farm in Chile.",
    "The airline cancelled dozens of flights when a storm swept across the coast on Friday.",
    "Nobody expected the small village team to win the regional championship, yet they never lost a game.",
]

# English closed-class words (articles, pronouns, prepositions, conjunctions, auxiliaries, determiners): the
# words every English text shares. Everything else in a held-out sentence is a content word.
FUNCTION_WORDS = set("""
a an the this that these those my your his her its our their i you he she it we they me him us them
of to in on at by for from with into onto about after before over under between through across during until
near without than as and or but so yet nor if because when while then there here not no never
is are was were be been being am have has had do does did will would can could shall should may might must
all each every some any many more most much few little such what which who whom whose
""".split())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _stem(word: str) -> str:
    """Crude English stemming, enough to catch 'learns'/'learning' or 'paints'/'painted'."""
    for suffix in ("ing", "ies", "ed", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _degenerate(twin_tokenizer) -> list[tuple[str, str]]:
    """(kind, text) pairs: what broken runs write. Seeded, so every run judges the same texts."""
    rng = random.Random(1234)
    out = []
    for n in (12, 24, 32, 32, 32, 32):  # token soup: random ids of the twins' own tokenizer, decoded
        ids = [rng.randrange(len(twin_tokenizer)) for _ in range(n)]
        out.append(("token soup", twin_tokenizer.decode(ids, skip_special_tokens=True)))
    out += [
        ("byte garbage", bytes(rng.randrange(256) for _ in range(80)).decode("utf-8", errors="replace")),
        ("byte garbage", bytes(rng.randrange(32, 127) for _ in range(80)).decode("ascii")),
        ("byte garbage", "ple\ufffdai of\x11 d\x18g\ufffd\ufffdz\x7fheiU\x06berFwhilaz\ufffdY\ufffd< Aum Aum Aum Aum"),
        ("repetition loop", "I think that " * 8),
        ("repetition loop", "The cat sat on the mat. " * 5),
        ("repetition loop", "and then and then and then and then and then and then and then"),
        ("repetition loop", "He said yes, yes, yes, yes, yes, yes, yes, yes, yes, yes, yes, yes."),
        ("repetition loop", "qzx vbn the the the the the the the the"),
    ]
    for _ in range(3):
        out.append(("random letters", " ".join(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(16))))
    out.append(("random letters", "xkcd qwrt plmz vbnq"))
    for sentence in rng.sample(HELD_OUT, 5):
        words = sentence.rstrip(".").split()
        rng.shuffle(words)
        out.append(("words in random order", " ".join(words) + "."))
    out += [
        ("single repeated word", "Aum " * 20),
        ("single repeated word", "the " * 24),
        ("single repeated word", "banana, " * 16),
        ("empty or very short", ""),
        ("empty or very short", "   "),
        ("empty or very short", "Hello"),
        ("empty or very short", "."),
    ]
    return out


@pytest.fixture(scope="module")
def degenerate():
    return _degenerate(tokenizers.text_tokenizer())


def _accuracy(judge, held_out, degenerate):
    """(share of held-out English accepted, share of degenerate text rejected, degenerate texts accepted)."""
    accepted = sum(judge.judge(text).ok for text in held_out) / len(held_out)
    missed = [(kind, text) for kind, text in degenerate if judge.judge(text).ok]
    return accepted, 1 - len(missed) / len(degenerate), missed


def _report(capsys, title, held, degen, missed, n_degenerate):
    with capsys.disabled():
        print(f"\n{title}: held-out English accepted {held:.0%} of {len(HELD_OUT)}, "
              f"degenerate rejected {degen:.0%} of {n_degenerate}; accepted degenerate kinds: "
              f"{sorted({kind for kind, _ in missed})}")


def _pydoc_prose_words() -> list[str]:
    from pydoc_data.topics import topics

    return _words(" ".join(p for text in topics.values() for p in judge._prose_paragraphs(text)))


# ---- the test material is held out ------------------------------------------------------------------------

def test_held_out_english_shares_no_content_word_with_the_twin_corpus_or_prompts(degenerate):
    """Guards the held-out set: judged English must not be the twins' corpus or prompts in other words."""
    # a task may have several prompts
    prompts = [p for v in PROMPTS.values() for p in ([v] if isinstance(v, str) else v or [])]  # speech: none
    ours = {_stem(w) for w in _words(tokenizers.CORPUS + " " + " ".join(prompts))}
    assert len(HELD_OUT) >= 20 and len(degenerate) >= 20
    for sentence in HELD_OUT:
        shared = {w for w in _words(sentence) if w not in FUNCTION_WORDS and _stem(w) in ours}
        assert not shared, f"{sentence!r} shares content words with the twin corpus or prompts: {shared}"


def test_held_out_english_appears_nowhere_in_the_word_list_source_or_lm_training_text():
    """Guards the held-out set against the Python docs (word-list source, test-LM training text) and the corpus:
    no run of four words of a held-out sentence occurs in either."""
    def grams(words):
        return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}

    seen = grams(_pydoc_prose_words()) | grams(_words(tokenizers.CORPUS))
    for sentence in HELD_OUT:
        assert not grams(_words(sentence)) & seen, sentence


# ---- the lexical judge's word list ------------------------------------------------------------------------

def test_the_word_list_is_derived_from_python_docs_not_from_our_corpus():
    """Guards issue 1: the list is exactly what derive_common_words() makes of the Python docs (no hand edits,
    no corpus or prompt words slipped in), and the words the old hand list took from our corpus are gone."""
    import sys

    shipped = judge.load_common_words()
    assert shipped["source"].startswith("pydoc_data.topics") and "derive_common_words" in shipped["how"]
    assert judge.COMMON_WORDS == frozenset(shipped["words"]) and 500 <= len(shipped["words"]) <= 2000
    for corpus_word in ("story", "robot", "paint", "sea", "moon", "bright", "learns", "image", "sentence", "colour"):
        assert corpus_word not in judge.COMMON_WORDS
    if shipped["python"] != sys.version.split()[0]:
        pytest.skip(f"the list was made with Python {shipped['python']}; its docs text differs from this one's")
    assert shipped["words"] == judge.derive_common_words()


# ---- accuracy of the lexical judge ------------------------------------------------------------------------

def test_lexical_judge_accepts_held_out_english_and_rejects_degenerate_output(degenerate, capsys):
    """Guards the offline fallback's accuracy. Measured (Python 3.11 word list): held-out 30/30 accepted,
    degenerate 24/30 rejected; the misses are the 5 shuffles of real words (it reads words, not order) and one
    12-token soup. Floors: 90% on held-out; 75% on all degenerate; 95% on the kinds other than shuffles."""
    judge = LexicalJudge()
    held, degen, missed = _accuracy(judge, HELD_OUT, degenerate)
    _report(capsys, "lexical judge", held, degen, missed, len(degenerate))
    assert held >= 0.9, [s for s in HELD_OUT if not judge.judge(s).ok]
    orderless = [(kind, text) for kind, text in degenerate if kind != "words in random order"]
    _, degen_orderless, missed_orderless = _accuracy(judge, HELD_OUT, orderless)
    assert degen_orderless >= 0.95, missed_orderless
    assert degen >= 0.75, missed
    for kind in ("byte garbage", "repetition loop", "random letters", "single repeated word", "empty or very short"):
        assert not [t for k, t in missed if k == kind], f"the lexical judge accepted {kind}"
    verdict = judge.judge(HELD_OUT[0])
    assert (verdict.verification, judge.name) == ("judge_lexical", "lexical") and verdict.reason.startswith(
        "common words")


# ---- a tiny local LM judge, trained on the Python docs -----------------------------------------------------

# Chosen from what was measured with the fixture's LM: held-out English scored 141-724, token soup, byte
# garbage and random letters 890-44533, shuffled held-out sentences 253-440 (inside the English range).
TINY_LM_MAX_PERPLEXITY = 800.0


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """The llama twin architecture (hidden 128, 2 layers) with a byte-level BPE (1000 tokens), both trained on
    the prose of the Python docs (pydoc_data.topics: not the held-out set, not the twin corpus): 400 steps of
    16 x 64 tokens, one thread (about 60 s on 2 shared cores)."""
    from pydoc_data.topics import topics

    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    paragraphs = [p for text in topics.values() for p in judge._prose_paragraphs(text)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(paragraphs, trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<|pad|>", "<|bos|>", "<|eos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|bos|>", eos_token="<|eos|>",
                                               pad_token="<|pad|>")
    config = shrink.text_config("llama", tok, {"hidden_size": 128, "intermediate_size": 256, "head_dim": 32})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on 2 busy cores one thread trains 2-4x faster than two
    try:
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
        ids = torch.tensor([i for p in paragraphs for i in tok(p)["input_ids"] + [tok.eos_token_id]])
        steps, batch, length = 400, 16, 64
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
        generator = torch.Generator().manual_seed(0)
        for _ in range(steps):
            starts = torch.randint(0, len(ids) - length - 1, (batch,), generator=generator)
            x = torch.stack([ids[s:s + length] for s in starts])
            model(input_ids=x, labels=x).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            schedule.step()
    finally:
        torch.set_num_threads(threads)
    path = tmp_path_factory.mktemp("judge-lm")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.mark.slow
def test_lm_judge_accuracy_on_held_out_english_and_degenerate_output(tiny_lm, degenerate, capsys):
    """Guards the LM judge's accuracy with a tiny local LM. Measured: held-out 30/30 accepted, degenerate 24/30
    rejected (all five shuffles of real words pass: the tiny LM, trained on technical prose, scores them inside
    the English range; so does the shortest token soup, 12 tokens decoding to 4 word-like pieces at perplexity
    641, inside held-out English's 62..693; every other kind is rejected, longer soups at 8,800..36,600). Floors:
    90% / 75%. Perplexity orders the kinds: soup, garbage and random letters score far above English (asserted: 3x
    the held-out geometric mean), and a shuffle scores above its own sentence for 82 of 90 shuffles (asserted:
    75%)."""
    judge = LMJudge(tiny_lm, max_perplexity=TINY_LM_MAX_PERPLEXITY)
    held, degen, missed = _accuracy(judge, HELD_OUT, degenerate)
    by_ppl = sum(judge.perplexity(t) > TINY_LM_MAX_PERPLEXITY for _, t in degenerate) / len(degenerate)
    _report(capsys, f"LM judge (tiny llama, max perplexity {TINY_LM_MAX_PERPLEXITY:g})", held, degen, missed,
            len(degenerate))
    with capsys.disabled():
        print(f"LM judge, perplexity alone (no repetition / length guard): degenerate rejected {by_ppl:.0%}")
    assert held >= 0.9, [(s, judge.judge(s).reason) for s in HELD_OUT if not judge.judge(s).ok]
    assert degen >= 0.75, missed
    for kind in ("token soup", "byte garbage", "random letters", "repetition loop", "single repeated word",
                 "empty or very short"):
        # a tiny LM cannot tell 4 word-like pieces from a short sentence; a real run writes 32 tokens
        accepted = [t for k, t in missed if k == kind and (kind != "token soup" or len(t.split()) > 4)]
        assert not accepted, f"the LM judge accepted {kind}: {accepted}"

    def log_mean(texts):
        return sum(math.log(judge.perplexity(t)) for t in texts) / len(texts)

    english = log_mean(HELD_OUT)
    for kind in ("token soup", "byte garbage", "random letters"):
        assert log_mean([t for k, t in degenerate if k == kind]) > english + math.log(3), kind
    rng = random.Random(7)
    raised = total = 0
    for sentence in HELD_OUT:
        base = judge.perplexity(sentence)
        for _ in range(3):
            words = sentence.rstrip(".").split()
            rng.shuffle(words)
            raised += judge.perplexity(" ".join(words) + ".") > base
            total += 1
    with capsys.disabled():
        print(f"LM judge: a shuffle of a held-out sentence scores above the sentence in {raised} of {total}")
    assert raised / total >= 0.75


@pytest.mark.slow
def test_lm_judge_rejects_a_fluent_repetition_loop_whatever_its_perplexity(tiny_lm):
    """Guards the repetition guard: a real LM scores loops as very likely, so perplexity alone would pass them."""
    judge = LMJudge(tiny_lm, max_perplexity=1e12)  # any perplexity is low enough
    assert judge.judge(HELD_OUT[0]).ok
    looped = judge.judge("The cat sat on the mat. " * 5)
    assert not looped.ok and "distinct words 17%" in looped.reason
    assert not judge.judge("Hello").ok  # too short to be judged


# ---- the real default judge, offline: SmolLM2-135M-Instruct from the shelf ----------------------------------

@pytest.mark.slow
def test_offline_the_default_judge_is_the_shelf_smollm2_and_reads_real_english(degenerate, monkeypatch, capsys):
    """Guards issue 19's offline judge: with the Hub unreachable, make_judge() is the LM judge on the shelf's real
    SmolLM2-135M-Instruct (installed by `make checkpoints`; this test fails, never skips, without it), its name and
    revision saying where its weights came from. Measured (max perplexity 200): held-out English 29/30 accepted
    (perplexity 15..164, one at 328), token soup 6/6 rejected (1,143..29,209), shuffled held-out words 5/5 rejected
    (2,589..8,881, and a shuffle scores above its own sentence in 90 of 90), looping sentences 5/5 rejected (by the
    repetition guard: their perplexity is 5..345), one of three byte garbages accepted (perplexity 127). Floors:
    90% of held-out English; every soup, shuffle, loop, random-letters and repeated-word text rejected; 85% of all
    degenerate text."""
    from neuronhelpers.models import shelf

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    monkeypatch.setattr(judge, "_LOADED", {})
    assert shelf.shelf_folder(DEFAULT_JUDGE_MODEL) is not None, "the shelf is missing: run `make checkpoints`"
    chosen = make_judge(None)
    entry = shelf.BY_ID[DEFAULT_JUDGE_MODEL]
    assert isinstance(chosen, LMJudge)
    assert (chosen.name, chosen.revision) == (f"{DEFAULT_JUDGE_MODEL} ({entry.weights})", entry.revision)
    # each text's perplexity once: judge() and the figures printed below read the same numbers (saves ~40 forwards)
    chosen.perplexity = functools.lru_cache(maxsize=None)(chosen.perplexity)
    held, degen, missed = _accuracy(chosen, HELD_OUT, degenerate)
    _report(capsys, f"LM judge (real {DEFAULT_JUDGE_MODEL}, shelf)", held, degen, missed, len(degenerate))
    assert held >= 0.9, [(s, chosen.judge(s).reason) for s in HELD_OUT if not chosen.judge(s).ok]
    for kind in ("token soup", "words in random order", "repetition loop", "random letters", "single repeated word",
                 "empty or very short"):
        assert not [t for k, t in missed if k == kind], f"the real LM judge accepted {kind}"
    assert degen >= 0.85, missed
    scores = {kind: sorted(round(chosen.perplexity(t)) for k, t in degenerate if k == kind)
              for kind in ("token soup", "words in random order")}
    with capsys.disabled():
        print(f"real LM judge perplexity: held-out English {sorted(round(chosen.perplexity(t)) for t in HELD_OUT)}; "
              f"{scores}")


# ---- make_judge: which judge reads the text ---------------------------------------------------------------

def test_make_judge_offline_without_a_model_is_the_lexical_judge(monkeypatch, tmp_path):
    """Guards issue 2's fallback: offline, no judge model given and no shelf copy of the default -> the word-list
    judge, no model load tried."""
    from neuronhelpers.core.settings import SHELF_ENV

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(SHELF_ENV, str(tmp_path / "empty-shelf"))
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)

    def no_load(*args, **kwargs):
        raise AssertionError("offline, make_judge() must not try to load a judge model")

    monkeypatch.setattr(judge, "LMJudge", no_load)
    chosen = make_judge(None)
    assert isinstance(chosen, LexicalJudge) and chosen.name == "lexical" and chosen.verification == "judge_lexical"


def test_make_judge_with_a_local_folder_is_an_lm_judge_named_by_the_folder(tiny_lm, monkeypatch):
    """Guards the explicit choice: a local folder -> LMJudge, and the row's judge column is that folder; so is
    a local folder named by $NEURONHELPERS_JUDGE_MODEL, even offline."""
    chosen = make_judge(tiny_lm)
    assert isinstance(chosen, LMJudge) and chosen.name == tiny_lm and chosen.verification == "judge_lm"
    assert chosen.revision is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(JUDGE_MODEL_ENV, tiny_lm)
    assert make_judge(None).name == tiny_lm


def test_make_judge_uses_the_default_hub_model_when_the_hub_is_reachable(monkeypatch):
    """Guards issue 2's default: with the Hub reachable and no judge model given, the small instruction-tuned
    DEFAULT_JUDGE_MODEL (or $NEURONHELPERS_JUDGE_MODEL) judges; when it cannot load, the lexical judge stands in
    unless the environment asked for that model by name."""
    loaded = []

    class FakeLM:
        def __init__(self, model, *args, **kwargs):
            if model == "org/broken":
                raise UserError("judge model 'org/broken' could not be loaded from the Hub (RepositoryNotFoundError)")
            loaded.append(model)
            self.name = f"{model}@0123abc"

    monkeypatch.setattr(network, "hub_reachable", lambda **kwargs: True)
    monkeypatch.setattr(judge, "LMJudge", FakeLM)
    monkeypatch.setattr(judge, "_LOADED", {})
    monkeypatch.delenv(JUDGE_MODEL_ENV, raising=False)
    assert make_judge(None).name == f"{DEFAULT_JUDGE_MODEL}@0123abc" and loaded == [DEFAULT_JUDGE_MODEL]
    monkeypatch.setenv(JUDGE_MODEL_ENV, "org/other")
    assert make_judge(None).name == "org/other@0123abc" and loaded[-1] == "org/other"
    monkeypatch.setattr(judge, "DEFAULT_JUDGE_MODEL", "org/broken")
    monkeypatch.delenv(JUDGE_MODEL_ENV)
    assert isinstance(make_judge(None), LexicalJudge)  # the default failed: the fallback, named in the row
    monkeypatch.setenv(JUDGE_MODEL_ENV, "org/broken")
    with pytest.raises(UserError, match="org/broken"):
        make_judge(None)


def _fake_hub_cache(root: Path, repo_id: str, model_folder: str) -> str:
    """A Hugging Face cache holding one snapshot of ``repo_id`` (its refs/main names the commit)."""
    commit = "3f1c0ffee" + "0" * 31
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in Path(model_folder).iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())
    return commit


def test_a_cached_hub_judge_is_loaded_offline_and_named_with_its_resolved_revision(tiny_lm, tmp_path, monkeypatch):
    """Guards the row's record of a Hub judge: name is '<repo_id>@<commit>', the commit resolved from the cache."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = _fake_hub_cache(tmp_path, "neuronhelpers-tests/tiny-judge", tiny_lm)
    hub_judge = LMJudge("neuronhelpers-tests/tiny-judge", max_perplexity=TINY_LM_MAX_PERPLEXITY)
    assert (hub_judge.name, hub_judge.revision) == (f"neuronhelpers-tests/tiny-judge@{commit}", commit)
    assert hub_judge.judge(HELD_OUT[1]).ok and not hub_judge.judge("xkcd qwrt plmz vbnq zzyx").ok
    pinned = LMJudge(f"neuronhelpers-tests/tiny-judge@{commit}")
    assert pinned.name == f"neuronhelpers-tests/tiny-judge@{commit}"


def test_an_uncached_hub_id_offline_is_a_one_line_user_error(tmp_path, monkeypatch):
    """Guards offline behaviour: a Hub id not in the cache fails at once with one clear line, no retries."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(UserError, match="local Hugging Face cache") as err:
        make_judge("neuronhelpers-tests/not-cached")
    assert "\n" not in str(err.value) and "neuronhelpers-tests/not-cached" in str(err.value)
    assert time.monotonic() - start < 10


def test_lm_judge_from_a_missing_path_is_a_clear_error(tmp_path):
    """Guards bad input: a folder that is not there is a UserError naming it, not a traceback or a download."""
    with pytest.raises(UserError, match="could not be loaded from disk"):
        LMJudge(str(tmp_path / "nothing"))


def test_the_lm_judge_never_runs_remote_code(tiny_lm, tmp_path):
    """Guards trust_remote_code: a judge folder whose config asks for its own modeling code is refused, unrun."""
    folder = tmp_path / "remote-code-judge"
    folder.mkdir()
    for f in Path(tiny_lm).iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    marker = tmp_path / "remote-code-ran"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="evil", auto_map={"AutoConfig": "modeling_evil.EvilConfig",
                                               "AutoModelForCausalLM": "modeling_evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="never runs remote code"):
        LMJudge(str(folder))
    assert not marker.exists()
