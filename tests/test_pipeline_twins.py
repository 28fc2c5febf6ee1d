"""Pipeline twins: one tiny pipeline per text-to-image family of the installed diffusers (its AutoPipeline keys, no
hand list), each the family's own pipeline class, under the parameter bound, loading back through the diffusers
recipe's own loader and drawing a finite (3, H, W) image in [0, 1] eagerly; and the recipe's compile_pipeline
compiling every denoiser and the image decoder without changing the image."""

import os

import pytest
import torch

from neuronhelpers.core.quiet import quiet_libraries
from neuronhelpers.recipes import diffusers_pipeline
from neuronhelpers.twins.pipelines import BUILDERS, SHARES, parameter_count, write_pipeline_twin
from neuronhelpers.twins.specs import MAX_TWIN_PARAMETERS, pipeline_families

pytestmark = pytest.mark.slow
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PARAMS = {"prompt": "A robot paints the sea.", "steps": 2, "seed": 0, "image_size": None}
SAMPLE = ["stable-diffusion", "flux", "sana", "kandinsky22"]  # a UNet, a MMDiT, a linear DiT, a two-stage pipeline


def _load(folder):
    params = {"model_path": str(folder), "dtype": "float32", "revision": None, "trust_remote_code": False}
    return diffusers_pipeline.load(params, "cpu")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sample's twins, built once: key -> folder."""
    root = tmp_path_factory.mktemp("pipeline-twins")
    with quiet_libraries(diffusers=True):
        for key in SAMPLE:
            write_pipeline_twin(key, root / key)
    return {key: root / key for key in SAMPLE}


def test_families_are_the_installed_auto_text2image_mapping():
    from diffusers.pipelines.auto_pipeline import AUTO_TEXT2IMAGE_PIPELINES_MAPPING

    names = pipeline_families()
    # read from diffusers' source, with the families it adds only when sentencepiece is installed (counted either way)
    kolors = ("kolors", "kolors-pag")
    assert [k for k in names if k not in kolors] == [k for k in AUTO_TEXT2IMAGE_PIPELINES_MAPPING if k not in kolors]
    assert names["kolors"] == "KolorsPipeline" and names["kolors-pag"] == "KolorsPAGPipeline"
    assert names["stable-diffusion"] == "StableDiffusionPipeline" and names["flux"] == "FluxPipeline"
    assert all(base in names and base not in SHARES for base in SHARES.values())
    assert set(BUILDERS) <= set(names)


def test_unknown_family_is_refused(tmp_path):
    with pytest.raises(KeyError, match="not a text-to-image family"):
        write_pipeline_twin("no-such-family", tmp_path)


@pytest.mark.parametrize("key", SAMPLE)
def test_twin_is_its_family_pipeline_tiny_and_draws_eagerly(built, key):
    with quiet_libraries(diffusers=True):
        pipe = _load(built[key])
        image = diffusers_pipeline.draw(pipe, PARAMS)
    assert type(pipe).__name__ == pipeline_families()[key]
    assert 0 < parameter_count(pipe) <= MAX_TWIN_PARAMETERS
    size = diffusers_pipeline.image_size(pipe, PARAMS)
    assert size == 32 and tuple(image.shape) == (3, size, size) and image.dtype == torch.float32
    assert torch.isfinite(image).all() and image.min() >= 0 and image.max() <= 1
    assert image.std() > 0  # an image, not a constant


def test_every_denoiser_of_a_two_stage_pipeline_is_found(built):
    with quiet_libraries(diffusers=True):
        pipe = _load(built["kandinsky22"])
    assert diffusers_pipeline.denoisers(pipe) == ["decoder_pipe.unet", "prior_pipe.prior"]
    assert diffusers_pipeline.denoiser_name(pipe) == "decoder_pipe.unet"
    assert diffusers_pipeline.image_decoder(pipe) == "decoder_pipe.movq"


def test_compiled_pipeline_draws_the_eager_image(built):
    with quiet_libraries(diffusers=True):
        pipe = _load(built["stable-diffusion"])
        eager = diffusers_pipeline.draw(pipe, PARAMS)
        names = diffusers_pipeline.compile_pipeline(pipe, "inductor")
        compiled = diffusers_pipeline.draw(pipe, PARAMS)
    assert names == "unet"
    assert type(pipe.unet).__name__ == "OptimizedModule" and hasattr(pipe.vae.decode, "_torchdynamo_orig_callable")
    assert (compiled - eager).abs().max() <= 1e-3


def test_a_pipeline_that_draws_from_the_global_generator_draws_the_same_image_every_time(tmp_path):
    """CogView4 Control samples its control image's latents from torch's global generator, not the one passed: draw
    seeds that one too, or cold, warm and reference calls would differ (it read as a FAIL at mismatch)."""
    with quiet_libraries(diffusers=True):
        write_pipeline_twin("cogview4-control", tmp_path / "twin")
        pipe = _load(tmp_path / "twin")
        torch.manual_seed(123)
        first = diffusers_pipeline.draw(pipe, PARAMS)
        torch.manual_seed(456)
        second = diffusers_pipeline.draw(pipe, PARAMS)
    assert torch.equal(first, second)
