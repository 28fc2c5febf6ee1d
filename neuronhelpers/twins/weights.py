"""The weights of a generating twin (text, vision-language, speech): random, but such that its 32 tokens depend on
the computation, so that a compiled graph computing wrong numbers writes other tokens.

Two things made a twin's check prove little (measured on main 79de2f6): an output head tied to the input embeddings,
scaled for decisive logits, scaled the embeddings too, and 49 of 181 PASS twins wrote one token 32 times; and with
every matrix at the configs' ``initializer_range`` (0.02) the layers add next to nothing to the residual stream, so
the next token is a function of the current one and a layer changed by 100 % of its weights changed no token
(tiny/llama). Here:

- the output head is the twin's own (``untie_output_head``, on the config before the model is made);
- every linear map (``nn.Linear`` and GPT-2's ``Conv1D``) is drawn at 1/sqrt(fan-in), so each layer moves the
  hidden state about as much as its input does and attention is not uniform; embeddings, norms, biases and
  the architecture's special parameters (state-space decays, convolutions) keep their own initialisation;
- the head is drawn the same way and scaled by ``LOGIT_SCALE``, so logits spread by a few units: greedy choices
  are decisive against float noise (float32's near-tie tolerance is 1e-3, bfloat16's 0.25) yet a wrong layer
  moves them. On 25 text twins a 10 % change to the middle layer then changed tokens in all 25 (12 of 25 before);
- a gate that a fresh model holds at exactly 0 (mllama's cross-attention gates, ``tanh(gate) * layer``) is opened
  to 1 (``open_zero_gates``): at 0 the layer behind it adds nothing, so the twin ignored the image and a change to
  that layer changed no token, where a trained checkpoint's gates are open;
- the input embeddings are chosen after the twin is saved (``choose_embeddings``): the config's own, or larger ones
  where the layers alone settle on one token whatever the input.
"""

from __future__ import annotations

import contextlib
import math

from neuronhelpers.core.vocab import MIN_DISTINCT_TOKENS
from neuronhelpers.twins.configs import walk_configs

# Logits of a fan-in head over a normalised hidden state spread by about 1; this many times wider, the median
# top-1/top-2 margin of a twin's 32 tokens is about 2 (bfloat16's near-tie tolerance is 0.25).
LOGIT_SCALE = 8.0


def untie_output_head(config) -> None:
    """Every config in the tree gets an output head of its own (``tie_word_embeddings`` off where it was on)."""
    for _path, sub, _role in walk_configs(config):
        if getattr(sub, "tie_word_embeddings", None):
            sub.tie_word_embeddings = False


def decisive_weights(model, seed: int) -> None:
    """Draw every linear map of ``model`` at 1/sqrt(fan-in) and the output head LOGIT_SCALE times wider (see the
    module's docstring), from ``seed``. The head must already be the model's own (``untie_output_head``)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    head = model.get_output_embeddings()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                _draw(module.weight, module.weight.shape[1], generator)
            elif isinstance(module, Conv1D):  # GPT-2's linear map stores its weight as (in, out)
                _draw(module.weight, module.weight.shape[0], generator)
        open_zero_gates(model)
        if head is not None and getattr(head, "weight", None) is not None:
            if _tied(model, head):  # tied by the model's code whatever the config says: give it its own copy
                head.weight = torch.nn.Parameter(head.weight.detach().clone())
            _draw(head.weight, head.weight.shape[1], generator)
            head.weight.mul_(LOGIT_SCALE)


def open_zero_gates(model) -> None:
    """Every one-number parameter whose name ends in ``gate`` and that holds exactly 0 is set to 1 (see the module's
    docstring). Biases and routers' correction terms named ``*gate*bias`` are not gates and keep their zeros."""
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.rsplit(".", 1)[-1].endswith("gate") and parameter.numel() == 1 and float(parameter) == 0.0:
                parameter.fill_(1.0)


def _tied(model, head) -> bool:
    try:
        embeddings = model.get_input_embeddings()
    except (NotImplementedError, AttributeError):  # a model without input embeddings: nothing to be tied to
        return False
    weight = getattr(embeddings, "weight", None)
    return weight is not None and weight.data_ptr() == head.weight.data_ptr()


def _draw(weight, fan_in: int, generator) -> None:
    import torch

    weight.copy_(torch.randn(weight.shape, generator=generator, dtype=torch.float32).to(weight.dtype)
                 / math.sqrt(max(fan_in, 1)))


# Which input embeddings a generating twin keeps: the first of these (standard deviation, seed) choices (None: the
# config's own initialisation, usually 0.02) whose twin writes at least vocab.MIN_DISTINCT_TOKENS distinct tokens of its
# 32 and whose tokens a perturbation of its decoder's middle block (verdict/perturb.py, the measuring's own) changes.
# Small embeddings let the layers dominate, and some stacks then settle on one token whatever the input (qwen3_moe,
# nanochat: measured); larger ones bring the input back. The last four were added when aria (1 distinct token at every
# earlier choice), jetmoe (2), asr-moonshine_streaming (3) and asr-canary (5) met none of the first three; a twin that
# met one before keeps it. None passing, the first is kept and the rows say so (check_sensitive).
EMBEDDING_CHOICES = ((None, 0), (0.3, 0), (1.0, 0), (3.0, 0), (0.3, 1), (1.0, 1), (3.0, 1))


def choose_embeddings(spec, folder) -> dict:
    """Try EMBEDDING_CHOICES on the twin saved in ``folder`` (loaded through the recipe's own loader, run eagerly on the
    CPU) and save the first that meets the target; returns what was chosen and measured (for TWIN.json)."""
    import torch

    from neuronhelpers.core import vocab
    from neuronhelpers.core.parameters import local_parameters
    from neuronhelpers.recipes.transformers_generate import generation_kwargs, load, new_tokens
    from neuronhelpers.twins.specs import SEED
    from neuronhelpers.verdict.perturb import decoder_or_model, middle_block, perturbed

    params = local_parameters(folder, spec.task)
    model, tokenizer, inputs = load(params, "cpu")
    embeddings = model.get_input_embeddings().weight
    original = embeddings.detach().clone()
    block = middle_block(decoder_or_model(model))[1]

    def tokens():
        torch.manual_seed(0)  # as run.py's generate(): a model that draws noise draws it alike
        with torch.inference_mode():
            out = model.generate(**inputs, **generation_kwargs(tokenizer, 32), return_dict_in_generate=True)
        return new_tokens(model, out, inputs)

    tried = []
    for std, seed in EMBEDDING_CHOICES:
        with torch.no_grad():
            if std is None:
                embeddings.copy_(original)
            else:
                generator = torch.Generator().manual_seed(SEED + seed)
                embeddings.copy_(torch.randn(embeddings.shape, generator=generator).to(embeddings.dtype) * std)
        written = tokens()
        with perturbed(block, vocab.PERTURBATION_SIZE[vocab.TRANSFORMERS]):
            changed = tokens() != written
        tried.append({"embedding_std": std, "embedding_seed": SEED + seed, "distinct_tokens": len(set(written)),
                      "perturbation_changes": changed})
        if len(set(written)) >= MIN_DISTINCT_TOKENS and changed:
            if std is not None:
                model.save_pretrained(folder)
            return {**tried[-1], "tried": len(tried)}
    return {**tried[0], "tried": len(tried)}  # nothing met the target: the config's own embeddings, as first saved


# The float functions the architectures' constructors compute parameters with (measured: log, and exp and expm1 in the
# state-space families' time-step bias), computed correctly rounded while a twin's files are written.
ROUNDED_ONCE = ("log", "exp", "expm1")


@contextlib.contextmanager
def correctly_rounded_math():
    """torch's ``log``, ``exp`` and ``expm1`` (functions, methods and in-place methods) correctly rounded while a twin's
    files are written. Some architectures' constructors compute parameters with them (the state-space families'
    ``A_log = log(1..N)`` and time-step bias, moonshine_streaming's ``log_k = log(0.75)``), and torch's float32 versions
    are not correctly rounded: their last bit differs from one machine to the next (here ``log(0.75)`` gave
    -0.28768205642700195 where the machine that swept the catalog gave the correctly rounded -0.28768208622932434), so
    a twin built elsewhere had other files than its row's and its run.py refused it (2026-12-07: jamba, mamba,
    falcon_mamba, zamba, zamba2, olmo_hybrid, bailing_hybrid, asr-moonshine_streaming). Computed in float64 and
    rounded once to the input's precision (the default float for integers), each result is the same everywhere."""
    import torch

    # the originals: torch.<name>, Tensor.<name> and the in-place Tensor.<name>_ (olmo_hybrid's A_log: .log_())
    plain = {(owner, attribute): getattr(owner, attribute)
             for name in ROUNDED_ONCE for owner, attribute in ((torch, name), (torch.Tensor, name),
                                                               (torch.Tensor, name + "_"))}

    def rounded_once(function):
        def call(tensor, *args, **kwargs):
            if args or kwargs or not isinstance(tensor, torch.Tensor) or tensor.dtype == torch.float64:
                return function(tensor, *args, **kwargs)
            dtype = tensor.dtype if tensor.is_floating_point() else torch.get_default_dtype()
            return function(tensor.to(torch.float64)).to(dtype)
        return call

    for name in ROUNDED_ONCE:
        call = rounded_once(plain[torch, name])
        setattr(torch, name, call)
        setattr(torch.Tensor, name, lambda self, *args, _call=call, **kwargs: _call(self, *args, **kwargs))
        setattr(torch.Tensor, name + "_", lambda self, _call=call: self.copy_(_call(self)))
    try:
        yield
    finally:
        for (owner, attribute), original in plain.items():
            setattr(owner, attribute, original)
