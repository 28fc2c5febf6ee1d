"""The twins' tokenizers, all trained here on a few lines of English (no download), so decoded output reads as
(broken) English: the byte-level BPE of the transformers twins (text and vision-language, with whatever named tokens
a processor asks for) and the real tokenizer classes of the library twins (BERT WordPiece, Qwen2 BPE, CLIP BPE,
T5 Unigram). A leaf: imports nothing of the package.

Three of the tokenizers library's trainers (WordPiece, BPE with an end-of-word suffix, Unigram) break ties in hash
order, which differs per process: the same corpus gives another vocabulary on every build, so another twin's files and
outputs. Those three are trained once (``python -m neuronhelpers.twins.tokenizers``) and their vocabularies kept as
package data (``data/twin_tokenizers.json``): a twin built anywhere with the same releases has the same files, which is
what a twin's run.py checks (twins/rerun.py). The byte-level BPE trainer is deterministic and trains at build time.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from importlib import resources

CORPUS = """\
The quick brown fox jumps over the lazy dog. A model that runs on Trainium must load, compile and
generate. Every result is recorded as a row of an open dataset, and anyone can reproduce it.
The weather today is mild and the river runs quietly past the old mill. Children walk to school
while the baker opens his shop. She said that the answer was in the book on the table.
We measure the time to first token and the number of tokens per second after compilation.
Write a short story about a robot who learns to paint the sea at night under a bright moon.
Describe this image in one sentence. What colours do you see, and what shapes are there?
In the morning the market fills with people who buy bread, fruit, fish and fresh flowers.
"""
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}IMAGE_PLACEHOLDER{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_template(placeholder: str = "") -> str:
    """The twins' chat template, with ``placeholder`` where a message's image goes."""
    return CHAT_TEMPLATE.replace("IMAGE_PLACEHOLDER", placeholder)


@lru_cache(maxsize=1)
def _trained_bpe_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=480,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS.splitlines(), trainer)
    return bpe.to_str()


def trained_bpe():
    """The twins' byte-level BPE, trained on the corpus above (the same for every twin; trained once per process)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(_trained_bpe_json())


def text_tokenizer():
    """A text twin's tokenizer: the trained BPE with pad / bos / eos and the chat template (no image)."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=trained_bpe(),
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
    )
    tok.chat_template = chat_template()
    return tok


def make_tokenizer(named: dict[str, str], extra: list[str]):
    """A vision-language twin's tokenizer: trained BPE, the usual specials, ``named`` token attributes and ``extra``
    tokens."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=trained_bpe(),
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        pad_token="<|pad|>",
        unk_token="<|pad|>",
        extra_special_tokens=dict(named),
    )
    tokens = [t for t in dict.fromkeys(list(named.values()) + list(extra)) if t]
    tok.add_special_tokens({"extra_special_tokens": tokens}, replace_extra_special_tokens=False)
    return tok


def token_for(name: str) -> str:
    """A fresh special token for an attribute name: image_token -> <|image|>."""
    base = re.sub(r"_(token|token_id|token_index|id|index)$", "", name)
    return f"<|{base}|>"


# ---- the library twins' tokenizers, saved as the real tokenizer classes ------------------------------------------

def _lines() -> list[str]:
    return CORPUS.splitlines()


def _bpe(special: list[str], suffix: str | None = None, lowercase: bool = False) -> tuple[dict, list]:
    """A byte-level BPE trained on the corpus: (vocab, merges)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    suffixed = {"end_of_word_suffix": suffix} if suffix else {}
    bpe = Tokenizer(models.BPE(**suffixed))
    if lowercase:
        bpe.normalizer = normalizers.Lowercase()
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False, **suffixed)
    bpe.train_from_iterator(_lines(), trainer)
    model = json.loads(bpe.to_str())["model"]
    return model["vocab"], [tuple(pair) for pair in model["merges"]]


FROZEN_FILE = "twin_tokenizers.json"  # in neuronhelpers/data: the vocabularies trained once (above)
# Each frozen vocabulary's special tokens.
WORDPIECE_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CLIP_SPECIAL = ["<|startoftext|>", "<|endoftext|>"]
T5_SPECIAL = ["<pad>", "</s>", "<unk>"]
XLM_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def _train_wordpiece() -> dict:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=WORDPIECE_SPECIAL, show_progress=False)
    wordpiece.train_from_iterator(_lines(), trainer)
    return dict(sorted(wordpiece.get_vocab().items(), key=lambda item: item[1]))


def _train_unigram(special: list[str]) -> list:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=special, unk_token="<unk>", show_progress=False)
    unigram.train_from_iterator(_lines(), trainer)
    return json.loads(unigram.to_str())["model"]["vocab"]


def train_frozen() -> dict:
    """The vocabularies whose trainers are not deterministic, trained on the corpus (what the data file holds)."""
    vocab, merges = _bpe(CLIP_SPECIAL, suffix="</w>", lowercase=True)
    return {"wordpiece": _train_wordpiece(), "clip": {"vocab": vocab, "merges": [list(pair) for pair in merges]},
            "t5": _train_unigram(T5_SPECIAL), "xlm_roberta": _train_unigram(XLM_SPECIAL)}


@lru_cache(maxsize=1)
def frozen() -> dict:
    """The vocabularies trained once (``train_frozen``), as the package keeps them."""
    return json.loads(resources.files("neuronhelpers.data").joinpath(FROZEN_FILE).read_text())


def bert_tokenizer(max_length: int):
    from transformers import BertTokenizer

    return BertTokenizer(vocab=dict(frozen()["wordpiece"]), do_lower_case=True, model_max_length=max_length)


def qwen_tokenizer(max_length: int):
    from transformers import Qwen2Tokenizer

    vocab, merges = _bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    # Qwen3-Embedding pads on the left, so the last position (its pooled token) is always a real token.
    return Qwen2Tokenizer(vocab=vocab, merges=merges, padding_side="left", model_max_length=max_length)


def clip_tokenizer():
    from transformers import CLIPTokenizer

    clip = frozen()["clip"]
    return CLIPTokenizer(vocab=dict(clip["vocab"]), merges=[tuple(pair) for pair in clip["merges"]],
                         model_max_length=77)  # CLIP's fixed prompt length


def t5_tokenizer():
    from transformers import T5Tokenizer

    return T5Tokenizer(vocab=[tuple(piece) for piece in frozen()["t5"]], extra_ids=0, model_max_length=512)


def gemma_tokenizer(max_length: int = 512):
    """A GemmaTokenizer (Gemma, Gemma 2 and T5Gemma encoders): a BPE trained on the corpus with Gemma's ``▁`` word
    marks and its named tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GemmaTokenizer

    special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special, show_progress=False)
    bpe.train_from_iterator(_lines(), trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(pair) if isinstance(pair, list) else tuple(pair.split(" ")) for pair in model["merges"]]
    # like Gemma's own, every text starts with <bos> (so an empty prompt has a token to attend to)
    return GemmaTokenizer(vocab=model["vocab"], merges=merges, model_max_length=max_length, add_bos_token=True)


def glm_tokenizer(max_length: int = 1024):
    """A GLM-4 style tokenizer (CogView4's text encoder): the trained byte-level BPE, every text prefixed by GLM's
    ``[gMASK]<sop>`` (so even an empty prompt has tokens), left padding."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    bpe = trained_bpe()
    bpe.add_special_tokens(["[gMASK]", "<sop>"])
    bpe.post_processor = processors.TemplateProcessing(
        single="[gMASK] <sop> $A", pair="[gMASK] <sop> $A $B",
        special_tokens=[("[gMASK]", bpe.token_to_id("[gMASK]")), ("<sop>", bpe.token_to_id("<sop>"))])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|eos|>", pad_token="<|pad|>",
                                   padding_side="left", model_max_length=max_length)


def xlm_roberta_tokenizer(max_length: int = 77):
    """An XLMRobertaTokenizer (Kandinsky 2.1's multilingual CLIP): a Unigram trained on the corpus (frozen), with its
    named tokens."""
    from transformers import XLMRobertaTokenizer

    return XLMRobertaTokenizer(vocab=[tuple(piece) for piece in frozen()["xlm_roberta"]], model_max_length=max_length)


if __name__ == "__main__":  # train the frozen vocabularies again and write them where the package reads them
    target = resources.files("neuronhelpers.data").joinpath(FROZEN_FILE)
    with open(str(target), "w") as out:
        json.dump(train_frozen(), out, indent=0, ensure_ascii=False)
        out.write("\n")
    sys.stdout.write(f"wrote {target}\n")
