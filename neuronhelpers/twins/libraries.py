"""Tiny twins of the libraries beyond transformers: sentence-transformers (feature-extraction) and diffusers
(text-to-image). Real library classes with shrunk configs and random weights, built offline like the
transformers twins (see twins.py, which lists and builds them through the three functions here).

- ``tiny/st-bert``     SentenceTransformer: a BERT Transformer module (WordPiece tokenizer), mean pooling, Normalize
- ``tiny/st-qwen3``    SentenceTransformer: a Qwen3 decoder (byte-level BPE, left padding), last-token pooling, Normalize
                       (the layout of Qwen3-Embedding)
- ``tiny/sd-unet``     StableDiffusionPipeline: UNet2DConditionModel, AutoencoderKL, CLIP text encoder and tokenizer,
                       PNDM scheduler (the layout of Stable Diffusion 1.x)
- ``tiny/pixart-dit``  PixArtSigmaPipeline: PixArtTransformer2DModel (a DiT), AutoencoderKL, T5 encoder and tokenizer,
                       DPM-Solver++ scheduler

Every tokenizer is trained here on a few lines of English (no download) and saved as the library's real tokenizer
class. A twin counts only when it loads back through the recipe's own loader and runs eagerly (an encode, a
2-step pipeline call). ``perturbed_twin`` makes the deliberately wrong copy that notebook 04 and the tests use to
show a mismatch. Taught in notebook 02.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_TO_IMAGE

LIBRARY_TASKS = (FEATURE_EXTRACTION, TEXT_TO_IMAGE)

# name -> (model_type, task): the architecture a twin stands in for, and how it is addressed (tiny/<name>).
LIBRARY_TWINS = {
    "st-bert": ("bert", FEATURE_EXTRACTION),
    "st-qwen3": ("qwen3", FEATURE_EXTRACTION),
    "sd-unet": ("unet2d", TEXT_TO_IMAGE),
    "pixart-dit": ("pixart", TEXT_TO_IMAGE),
}
# The weight each twin's perturbed copy shifts (half of its output rows): (file inside the twin, tensor name). Shifting
# it changes the output far beyond any dtype's tolerance while the model still loads and runs.
PERTURBED_WEIGHT = {
    "st-bert": ("model.safetensors", "encoder.layer.1.output.dense.weight"),
    "st-qwen3": ("model.safetensors", "layers.1.mlp.down_proj.weight"),
    "sd-unet": ("unet/diffusion_pytorch_model.safetensors", "conv_out.weight"),
    # The random DiT's output barely reaches the image through the random VAE's group norms: shift the decoder's.
    "pixart-dit": ("vae/diffusion_pytorch_model.safetensors", "decoder.conv_out.weight"),
}
SEED = 0
IMAGE_SIZE = 32  # pixels: latents of 16x16 through a VAE that upsamples twice
SEQUENCE_LENGTH = 128  # position embeddings of the text twins (the recipe pads to fewer)


def library_twin_specs() -> list:
    """The twins of the other libraries (TwinSpec with a ``name``), in a stable order."""
    from neuronhelpers.twins.build import TwinSpec

    return [TwinSpec(model_type, task, name=name) for name, (model_type, task) in LIBRARY_TWINS.items()]


def write_twin(spec, folder: Path) -> None:
    """Build the twin ``spec`` names and save it into ``folder`` with the library's own save methods."""
    builders = {"st-bert": _st_bert, "st-qwen3": _st_qwen3, "sd-unet": _sd_unet, "pixart-dit": _pixart_dit}
    if spec.key not in builders:
        raise NotImplementedError(f"no {spec.task} twin builder for '{spec.key}'")
    import torch

    torch.manual_seed(SEED)
    with _quiet():
        builders[spec.key](Path(folder))
    (Path(folder) / "TWIN.json").write_text(json.dumps(
        {"twin_of": spec.model_type, "name": spec.key, "task": spec.task, "seed": SEED}, indent=1))
    if spec.task == TEXT_TO_IMAGE:
        # twins.known_twin recognises a built twin by a root config.json; a diffusers pipeline keeps its configs in
        # model_index.json and the component folders, so this marker (ignored by diffusers) says the build finished.
        (Path(folder) / "config.json").write_text(json.dumps(
            {"neuronhelpers_twin": spec.key, "note": "marker only: diffusers loads model_index.json"}, indent=1))


def check_twin_runs(spec, folder: Path) -> None:
    """The twin loads back through the recipe's own loader and runs eagerly: an encode of two sentences, or a
    2-step pipeline call; it must also stay tiny. A twin that cannot do this is refused (TwinUnavailable)."""
    import torch

    from neuronhelpers.twins.build import MAX_TWIN_PARAMETERS

    try:
        params = {"model_path": str(folder), "trust_remote_code": False, "revision": None, "seed": SEED, "steps": 2,
                  "image_size": None, "sequence_length": 16, "prompt": ["A robot paints the sea.", "The river runs."]}
        with _quiet():
            if spec.task == FEATURE_EXTRACTION:
                from neuronhelpers.run.recipes.sentence_transformers_encode import encode, load

                model = load(params, "cpu", torch.float32)
                parameters = sum(p.numel() for p in model.parameters())
                out = encode(model, params)
                expected = (2, model.get_embedding_dimension())
            else:
                from neuronhelpers.run.recipes.diffusers_pipeline import draw, load

                model = load(params, "cpu", torch.float32)
                parameters = sum(p.numel() for c in model.components.values() if isinstance(c, torch.nn.Module)
                                 for p in c.parameters())
                params["prompt"] = "A robot paints the sea."
                out = draw(model, params)
                expected = (3, IMAGE_SIZE, IMAGE_SIZE)
        if parameters > MAX_TWIN_PARAMETERS:
            raise ValueError(f"the shrunk model still has {parameters:,} parameters (more than {MAX_TWIN_PARAMETERS:,})")
        if tuple(out.shape) != expected:
            raise ValueError(f"the eager run returned shape {tuple(out.shape)}, not {expected}")
        if not torch.isfinite(out).all():
            raise ValueError("the eager run returned non-finite values")
    except Exception as exc:
        exc.twin_step = "eager check"
        raise


def perturbed_twin(model_id: str, dest: str | Path) -> Path:
    """Copy the twin ``model_id`` (tiny/st-bert, ...) to ``dest`` with one weight shifted (see PERTURBED_WEIGHT):
    it loads and runs, but its output differs from the unperturbed twin's (a mismatch). Returns ``dest``."""
    from safetensors.torch import load_file, save_file

    from neuronhelpers.twins.build import build_twin, twin_spec

    spec = twin_spec(model_id)
    if spec.key not in PERTURBED_WEIGHT:
        raise ValueError(f"'{model_id}' is not a sentence-transformers or diffusers twin")
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(build_twin(spec.key), dest)
    if spec.task == TEXT_TO_IMAGE:
        (dest / "config.json").unlink(missing_ok=True)  # the build marker: the copy is a plain diffusers folder
    file, name = PERTURBED_WEIGHT[spec.key]
    weights = load_file(dest / file)
    # Half of the output rows shifted: a shift of every row alike would be undone by a following LayerNorm.
    weight = weights[name].clone()
    weight[: weight.shape[0] // 2] += 0.5 * weight.abs().max()
    weights[name] = weight
    save_file(weights, dest / file, metadata={"format": "pt"})
    return dest


# ----------------------------------------------------------------------------------------------
# Tokenizers, trained offline on the twins' corpus and saved as the real tokenizer classes.
# ----------------------------------------------------------------------------------------------

def _lines() -> list[str]:
    from neuronhelpers.twins.build import _CORPUS

    return _CORPUS.splitlines()


def _bpe(special: list[str], suffix: str | None = None, lowercase: bool = False) -> tuple[dict, list]:
    """A byte-level BPE trained on the corpus: (vocab, merges)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    suffixed = {"end_of_word_suffix": suffix} if suffix else {}
    bpe = Tokenizer(models.BPE(**suffixed))
    if lowercase:
        bpe.normalizer = normalizers.Lowercase()
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, **suffixed)
    bpe.train_from_iterator(_lines(), trainer)
    model = json.loads(bpe.to_str())["model"]
    return model["vocab"], [tuple(pair) for pair in model["merges"]]


def _bert_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizer

    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    wordpiece.train_from_iterator(_lines(), trainer)
    return BertTokenizer(vocab=wordpiece.get_vocab(), do_lower_case=True, model_max_length=SEQUENCE_LENGTH)


def _qwen_tokenizer():
    from transformers import Qwen2Tokenizer

    vocab, merges = _bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    # Qwen3-Embedding pads on the left, so the last position (its pooled token) is always a real token.
    return Qwen2Tokenizer(vocab=vocab, merges=merges, padding_side="left", model_max_length=SEQUENCE_LENGTH)


def _clip_tokenizer():
    from transformers import CLIPTokenizer

    vocab, merges = _bpe(["<|startoftext|>", "<|endoftext|>"], suffix="</w>", lowercase=True)
    return CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=77)  # CLIP's fixed prompt length


def _t5_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import T5Tokenizer

    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    unigram.train_from_iterator(_lines(), trainer)
    vocab = [tuple(piece) for piece in json.loads(unigram.to_str())["model"]["vocab"]]
    return T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=512)


# ----------------------------------------------------------------------------------------------
# The twins.
# ----------------------------------------------------------------------------------------------

def _sentence_transformer(folder: Path, model, tokenizer, pooling: str) -> None:
    """Save a transformers model and tokenizer, wrap them as a SentenceTransformer (Transformer module, pooling,
    Normalize) and save that into ``folder``: modules.json, the transformer at the root, the other modules beside."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        transformer = Transformer(tmp)
        st = SentenceTransformer(modules=[transformer, Pooling(model.config.hidden_size, pooling), Normalize()],
                                 device="cpu")
        st.save(str(folder))


def _st_bert(folder: Path) -> None:
    from transformers import BertConfig, BertModel

    tok = _bert_tokenizer()
    config = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=SEQUENCE_LENGTH, pad_token_id=tok.pad_token_id)
    _sentence_transformer(folder, BertModel(config, add_pooling_layer=False), tok, "mean")


def _st_qwen3(folder: Path) -> None:
    from transformers import Qwen3Config, Qwen3Model

    tok = _qwen_tokenizer()
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=SEQUENCE_LENGTH, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    _sentence_transformer(folder, Qwen3Model(config), tok, "lasttoken")


def _vae():
    """An AutoencoderKL that upsamples latents twice (vae_scale_factor 2): 16x16x4 latents -> 32x32 RGB."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(block_out_channels=(8, 16), in_channels=3, out_channels=3, latent_channels=4,
                         down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                         layers_per_block=1, norm_num_groups=8, sample_size=IMAGE_SIZE)


def _sd_unet(folder: Path) -> None:
    from diffusers import PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    tok = _clip_tokenizer()
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, projection_dim=32, max_position_embeddings=77,
                                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                        pad_token_id=tok.pad_token_id))
    unet = UNet2DConditionModel(sample_size=IMAGE_SIZE // 2, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(16, 32), down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=8, norm_num_groups=8)
    # Stable Diffusion 1.x's own scheduler settings.
    scheduler = PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True,
                              set_alpha_to_one=False, steps_offset=1)
    pipe = StableDiffusionPipeline(vae=_vae(), text_encoder=text, tokenizer=tok, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(folder)


def _pixart_dit(folder: Path) -> None:
    from diffusers import DPMSolverMultistepScheduler, PixArtSigmaPipeline, PixArtTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    tok = _t5_tokenizer()
    text = T5EncoderModel(T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                   decoder_start_token_id=tok.pad_token_id))
    transformer = PixArtTransformer2DModel(
        sample_size=IMAGE_SIZE // 2, num_layers=2, patch_size=2, attention_head_dim=8, num_attention_heads=4,
        caption_channels=32, in_channels=4, out_channels=8, cross_attention_dim=32, attention_bias=True,
        activation_fn="gelu-approximate", num_embeds_ada_norm=1000, norm_type="ada_norm_single",
        norm_elementwise_affine=False, norm_eps=1e-6)
    pipe = PixArtSigmaPipeline(tokenizer=tok, text_encoder=text, vae=_vae(), transformer=transformer,
                               scheduler=DPMSolverMultistepScheduler())
    pipe.save_pretrained(folder)


class _quiet:
    """Keep a build or check quiet: no progress bars or info logs from transformers, diffusers or
    sentence-transformers (their warnings about placeholder values are replaced right after)."""

    def __enter__(self):
        import logging

        from transformers.utils import logging as hf_logging

        from diffusers.utils import logging as diffusers_logging

        hf_logging.disable_progress_bar()
        diffusers_logging.disable_progress_bar()
        self.verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        self.levels = {name: logging.getLogger(name).level for name in ("diffusers", "sentence_transformers")}
        for name in self.levels:
            logging.getLogger(name).setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        import logging

        from transformers.utils import logging as hf_logging

        from diffusers.utils import logging as diffusers_logging

        hf_logging.set_verbosity(self.verbosity)
        hf_logging.enable_progress_bar()
        diffusers_logging.enable_progress_bar()
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)
        return False
