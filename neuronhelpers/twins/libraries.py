"""Tiny twins of the libraries beyond transformers: sentence-transformers (feature-extraction) and diffusers
(text-to-image). Real library classes with shrunk configs and random weights, built offline like the
transformers twins (the orchestrator, twins/build.py, lists them from specs.LIBRARY_TWINS and builds and checks them
through ``write_twin`` and ``check_twin_runs`` here).

- ``tiny/st-bert``     SentenceTransformer: a BERT Transformer module (WordPiece tokenizer), mean pooling, Normalize
- ``tiny/st-qwen3``    SentenceTransformer: a Qwen3 decoder (byte-level BPE, left padding), last-token pooling,
                       Normalize (the layout of Qwen3-Embedding)
- ``tiny/sd-unet``     StableDiffusionPipeline: UNet2DConditionModel, AutoencoderKL, CLIP text encoder and tokenizer,
                       PNDM scheduler (the layout of Stable Diffusion 1.x)
- ``tiny/pixart-dit``  PixArtSigmaPipeline: PixArtTransformer2DModel (a DiT), AutoencoderKL, T5 encoder and tokenizer,
                       DPM-Solver++ scheduler

Every tokenizer is trained on a few lines of English (no download) and saved as the library's real tokenizer class
(twins/tokenizers.py). A twin counts only when it loads back through the recipe's own loader and runs eagerly (an
encode, a 2-step pipeline call). Like every twin, a built one is recognised by its TWIN.json, written by the
orchestrator last; its deliberately wrong copy (``perturbed_twin``, for notebook 04 and the tests) is made by
twins/broken.py. Taught in notebook 02.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_TO_IMAGE
from neuronhelpers.twins.specs import LIBRARY_TASKS, LIBRARY_TWINS, MAX_TWIN_PARAMETERS, SEED, library_twin_specs
from neuronhelpers.twins.tokenizers import bert_tokenizer, clip_tokenizer, qwen_tokenizer, t5_tokenizer

__all__ = ["LIBRARY_TASKS", "LIBRARY_TWINS", "IMAGE_SIZE", "SEQUENCE_LENGTH", "library_twin_specs", "write_twin",
           "check_twin_runs"]

IMAGE_SIZE = 32  # pixels: latents of 16x16 through a VAE that upsamples twice
SEQUENCE_LENGTH = 128  # position embeddings of the text twins (the recipe pads to fewer)


def write_twin(spec, folder: Path) -> None:
    """Build the twin ``spec`` names and save it into ``folder`` with the library's own save methods."""
    builders = {"st-bert": _st_bert, "st-qwen3": _st_qwen3, "sd-unet": _sd_unet, "pixart-dit": _pixart_dit}
    if spec.key not in builders:
        raise NotImplementedError(f"no {spec.task} twin builder for '{spec.key}'")
    import torch

    torch.manual_seed(SEED)
    with quiet_libraries(diffusers=spec.task == TEXT_TO_IMAGE):
        builders[spec.key](Path(folder))


def _run_eagerly(spec, params):
    """(output, expected shape, parameter count) of one eager run through the recipe's own loader."""
    import torch

    if spec.task == FEATURE_EXTRACTION:
        from neuronhelpers.recipes.sentence_transformers_encode import encode, load

        model = load(params, "cpu")
        parameters = sum(p.numel() for p in model.parameters())
        return encode(model, params), (2, model.get_embedding_dimension()), parameters
    from neuronhelpers.recipes.diffusers_pipeline import draw, load

    model = load(params, "cpu")
    parameters = sum(p.numel() for c in model.components.values() if isinstance(c, torch.nn.Module)
                     for p in c.parameters())
    params["prompt"] = "A robot paints the sea."
    return draw(model, params), (3, IMAGE_SIZE, IMAGE_SIZE), parameters


def check_twin_runs(spec, folder: Path) -> None:
    """The twin loads back through the recipe's own loader and runs eagerly: an encode of two sentences, or a
    2-step pipeline call; it must also stay tiny. A twin that cannot do this is refused (TwinUnavailable)."""
    import torch

    try:
        params = {"model_path": str(folder), "trust_remote_code": False, "revision": None, "seed": SEED, "steps": 2,
                  "dtype": "float32",
                  "image_size": None, "sequence_length": 16, "prompt": ["A robot paints the sea.", "The river runs."]}
        with quiet_libraries(diffusers=spec.task == TEXT_TO_IMAGE):
            out, expected, parameters = _run_eagerly(spec, params)
        if parameters > MAX_TWIN_PARAMETERS:
            raise ValueError(f"the shrunk model still has {parameters:,} parameters (more than "
                             f"{MAX_TWIN_PARAMETERS:,})")
        if tuple(out.shape) != expected:
            raise ValueError(f"the eager run returned shape {tuple(out.shape)}, not {expected}")
        if not torch.isfinite(out).all():
            raise ValueError("the eager run returned non-finite values")
    except Exception as exc:  # not swallowed: marked with the step that failed, then raised again
        exc.twin_step = "eager check"
        raise


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

    tok = bert_tokenizer(SEQUENCE_LENGTH)
    config = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=SEQUENCE_LENGTH, pad_token_id=tok.pad_token_id)
    _sentence_transformer(folder, BertModel(config, add_pooling_layer=False), tok, "mean")


def _st_qwen3(folder: Path) -> None:
    from transformers import Qwen3Config, Qwen3Model

    tok = qwen_tokenizer(SEQUENCE_LENGTH)
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

    tok = clip_tokenizer()
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

    tok = t5_tokenizer()
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
