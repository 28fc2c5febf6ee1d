"""sentence-transformers and diffusers take the transformers path: twin -> plan -> rendered run.py -> subprocess ->
verification against a CPU eager reference -> row. Their twins, recipes, checks, planning and Selected entries."""

import base64
import json
import math
import py_compile
import subprocess
import sys

import pytest

from conftest import imported_modules, run_cli
from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.protocol import SENTENCES
from neuronhelpers.models.resolve import ModelRef, resolve_model
from neuronhelpers.plan.cores import one_variant, pipeline_parameters, plan_model
from neuronhelpers.process.tree import last_json_line
from neuronhelpers.recipes import render
from neuronhelpers.run.harness import run_model
from neuronhelpers.store import schema
from neuronhelpers.twins import build, libraries, specs
from neuronhelpers.verdict.verify import verify_outputs

EMBEDDING_TWINS = ["tiny/st-bert", "tiny/st-qwen3"]
DIFFUSION_TWINS = ["tiny/t2i-stable-diffusion", "tiny/t2i-pixart-sigma"]
ST = ModelRef("tiny/st-bert", "/twins/st-bert", vocab.FEATURE_EXTRACTION, "bert", twin_of="bert")
SD = ModelRef("tiny/t2i-stable-diffusion", "/twins/t2i-stable-diffusion", vocab.TEXT_TO_IMAGE, "stable-diffusion",
              twin_of="stable-diffusion")


# ---- twins ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_twins_command_lists_a_twin_per_text_encoder_decoder_and_pipeline_family():
    """One sentence-transformers twin per text encoder transformers maps to AutoModelForMaskedLM (the two with a
    vision sub-config left out) plus the embedding decoders; one diffusers twin per AutoPipelineForText2Image key."""
    from diffusers.pipelines.auto_pipeline import AUTO_TEXT2IMAGE_PIPELINES_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    embedding = [spec.model_id for spec in build.architectures(vocab.FEATURE_EXTRACTION)]
    masked = {"tiny/st-" + t for t in MODEL_FOR_MASKED_LM_MAPPING_NAMES}
    assert masked - set(embedding) == {"tiny/st-modernvbert", "tiny/st-ultravbert"}
    assert set(embedding) - masked == {"tiny/st-" + t for t in specs.EMBEDDING_DECODERS}
    diffusion = [spec.model_id for spec in build.architectures(vocab.TEXT_TO_IMAGE)]
    installed = {"tiny/t2i-" + key for key in AUTO_TEXT2IMAGE_PIPELINES_MAPPING}
    # read from diffusers' source, with the families it adds only when sentencepiece is installed: counted either way,
    # so that their rows say what they need
    kolors = {"tiny/t2i-kolors", "tiny/t2i-kolors-pag"}
    assert installed <= set(diffusion) and set(diffusion) - installed <= kolors and kolors <= set(diffusion)
    assert set(EMBEDDING_TWINS) <= set(embedding) and set(DIFFUSION_TWINS) <= set(diffusion)
    for task, expected in ((vocab.FEATURE_EXTRACTION, embedding), (vocab.TEXT_TO_IMAGE, diffusion)):
        out = run_cli("twins", "--task", task).stdout
        assert all(twin in out for twin in expected) and "tiny/qwen3 " not in out


@pytest.mark.slow
def test_a_library_twin_is_its_own_twin_not_the_transformers_one_of_the_same_architecture():
    assert build.twin_spec("tiny/st-bert").task == vocab.FEATURE_EXTRACTION
    assert build.twin_spec("tiny/bert").task == vocab.TEXT_GENERATION
    ref = resolve_model("tiny/st-qwen3")
    assert (ref.task, ref.model_type, ref.twin_of) == (vocab.FEATURE_EXTRACTION, "qwen3", "qwen3")
    assert (build.build_twin("tiny/st-qwen3") / "modules.json").is_file()


@pytest.mark.slow
def test_an_encoder_and_a_decoder_twin_come_from_the_generic_shrink_with_their_pooling_and_a_table_model_says_why():
    """tiny/st-<type> wraps transformers' own base model of the type, shrunk like the text twins: mean pooling for an
    encoder, last-token for a decoder (left padding); a type the table marks (TAPAS reads tables) is refused with
    that reason, never built into a meaningless encoder."""
    for twin, model_type, pooling in (("tiny/st-mpnet", "mpnet", "mean"), ("tiny/st-mistral", "mistral", "lasttoken")):
        folder = build.build_twin(twin)
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == model_type and config["hidden_size"] == 64
        assert json.loads((folder / "1_Pooling" / "config.json").read_text())["pooling_mode"] == pooling
    assert json.loads((folder / "tokenizer_config.json").read_text())["padding_side"] == "left"
    with pytest.raises(build.TwinUnavailable, match="TAPAS encodes tables"):
        build.build_twin("tiny/st-tapas")


@pytest.mark.slow
def test_twins_are_real_library_checkpoints_built_offline_and_tiny():
    import torch
    from diffusers import DiffusionPipeline
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(build.build_twin("tiny/st-bert")), device="cpu")
    assert [type(m).__name__ for m in st] == ["Transformer", "Pooling", "Normalize"]
    assert st[0].auto_model.config.model_type == "bert"
    for twin, pipeline, denoiser in (("tiny/t2i-stable-diffusion", "StableDiffusionPipeline", "UNet2DConditionModel"),
                                     ("tiny/t2i-pixart-sigma", "PixArtSigmaPipeline", "PixArtTransformer2DModel")):
        pipe = DiffusionPipeline.from_pretrained(str(build.build_twin(twin)))
        assert type(pipe).__name__ == pipeline
        assert type(getattr(pipe, "unet", None) or pipe.transformer).__name__ == denoiser
        parameters = sum(p.numel() for c in pipe.components.values() if isinstance(c, torch.nn.Module)
                         for p in c.parameters())
        assert parameters < build.MAX_TWIN_PARAMETERS


def test_a_twin_that_does_not_run_eagerly_is_refused(tmp_path, monkeypatch):
    from neuronhelpers.recipes import sentence_transformers_encode

    spec = build.twin_spec("tiny/st-bert")
    folder = tmp_path / "twin"
    folder.mkdir()
    libraries.write_twin(spec, folder)

    def broken(model, params):
        raise RuntimeError("boom")

    monkeypatch.setattr(sentence_transformers_encode, "encode", broken)
    with pytest.raises(RuntimeError, match="boom") as info:
        libraries.check_twin_runs(spec, folder)
    assert info.value.twin_step == "eager check"


# ---- recipes ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ref, library, modules", [(ST, "sentence-transformers", {"sentence_transformers"}),
                                                   (SD, "diffusers", {"diffusers", "PIL"})])
def test_run_py_is_self_contained_stdlib_torch_and_the_library(tmp_path, ref, library, modules):
    """torch and the library (for diffusers also Pillow, its own dependency, which writes the PNG); no launcher and
    no note about one: these libraries are never split over cores (plan/cores.py)."""
    params = render.recipe_params(ref, get_backend("cpu"))
    assert params["library"] == library and "max_new_tokens" not in params
    text = render.render_run_py(params)
    assert render.params_of_run_py(text) == params
    path = tmp_path / "run.py"
    path.write_text(text)
    py_compile.compile(str(path), doraise=True)
    assert imported_modules(text) - set(sys.stdlib_module_names) == {"torch", *modules}
    order = [text.index(marker) for marker in ("PARAMS = {", "def main(", "def device_run(", "def load(",
                                               "def reference_run(", "def emit(")]
    assert order == sorted(order) and "render: " not in text and "def sharded_run(" not in text
    assert "# ---- sharded launch" not in text and "--cores N" not in text
    assert 'fullgraph=True, dynamic=False' in text


def test_requirements_pin_the_library():
    import diffusers
    import sentence_transformers

    st = render.render_requirements(get_backend("cpu"), vocab.FEATURE_EXTRACTION).splitlines()
    assert f"sentence-transformers=={sentence_transformers.__version__}" in st
    sd = render.render_requirements(get_backend("neuron"), vocab.TEXT_TO_IMAGE).splitlines()
    assert f"diffusers=={diffusers.__version__}" in sd and sd[0].startswith("#")


# ---- checks -----------------------------------------------------------------------------------------------

def _embeddings(rows):
    return {"embeddings": rows}


def test_embeddings_are_graded_exact_within_tolerance_or_mismatch_with_the_figures():
    params = {"dtype": "float32", "library": "sentence-transformers"}
    ref = _embeddings([[0.6, 0.8], [1.0, 0.0]])
    exact = verify_outputs(params, _embeddings([[0.6, 0.8], [1.0, 0.0]]), ref)
    assert (exact["result"], exact["verification"], exact["max_abs_diff"]) == ("PASS", "exact", 0.0)
    close = verify_outputs(params, _embeddings([[0.6 + 1e-6, 0.8], [1.0, 0.0]]), ref)
    assert (close["result"], close["verification"]) == ("PASS", "within_tolerance")
    assert close["tolerance"] == vocab.EMBEDDING_TOLERANCE["float32"]["max_abs_diff"]
    far = verify_outputs(params, _embeddings([[0.8, 0.6], [1.0, 0.0]]), ref)
    assert (far["result"], far["stage"], far["verification"]) == ("FAIL", "mismatch", None)
    assert far["max_abs_diff"] == pytest.approx(0.2) and far["min_cosine"] == pytest.approx(0.96)
    assert "float32 tolerance" in far["error"] and far["cause"]
    # The same difference is within bfloat16's tolerance.
    assert verify_outputs({**params, "dtype": "bfloat16"}, _embeddings([[0.6 + 1e-3, 0.8], [1.0, 0.0]]),
                          ref)["result"] == "PASS"


def test_images_are_graded_by_psnr_and_max_abs_difference():
    import torch

    from neuronhelpers.recipes.diffusers_pipeline import image_payload

    params = {"dtype": "float32", "library": "diffusers"}
    image = torch.linspace(0, 1, 3 * 8 * 8).reshape(3, 8, 8)
    ref = image_payload(image)
    assert verify_outputs(params, image_payload(image.clone()), ref)["verification"] == "exact"
    close = verify_outputs(params, image_payload(image + 1e-4), ref)
    assert (close["result"], close["verification"]) == ("PASS", "within_tolerance")
    assert close["psnr_db"] == pytest.approx(80.0, abs=0.1)
    noisy = image.clone()
    noisy[0, 0, 0] += 0.5
    far = verify_outputs(params, image_payload(noisy), ref)
    assert (far["result"], far["stage"]) == ("FAIL", "mismatch")
    assert far["max_abs_diff"] == pytest.approx(0.5) and (
        far["tolerance"] == vocab.IMAGE_TOLERANCE["float32"]["max_abs_diff"])
    resized = verify_outputs(params, image_payload(image[:, :4, :4]), ref)
    assert resized["result"] == "FAIL" and "size" in resized["error"]


def test_image_bounds_follow_what_compiled_runs_differ_by_where_that_was_measured():
    """On CPU in float32 the PSNR bound is IMAGE_MARGIN times (in amplitude) the largest compiled-against-reference
    difference measured, 56 dB where the dtype's is 40: an image off by 9e-3 everywhere (PSNR 41 dB, max abs within the
    dtype's 0.02) passes the dtype's bounds and fails the measured one; a backend without measurements keeps the
    dtype's; a measured bound is never looser than the dtype's."""
    import torch

    from neuronhelpers.recipes.diffusers_pipeline import image_payload

    image = torch.linspace(0, 1, 3 * 8 * 8).reshape(3, 8, 8)
    ref, off = image_payload(image), image_payload(image + 9e-3)
    cpu = {"dtype": "float32", "library": "diffusers", "backend": "cpu"}
    measured, dtype = vocab.image_tolerance("cpu", "float32"), vocab.IMAGE_TOLERANCE["float32"]
    assert measured["min_psnr_db"] > dtype["min_psnr_db"] and measured["max_abs_diff"] <= dtype["max_abs_diff"]
    assert verify_outputs(cpu, off, ref)["result"] == "FAIL"
    assert verify_outputs({**cpu, "backend": "neuron"}, off, ref)["result"] == "PASS"
    assert verify_outputs(cpu, image_payload(image + 1e-4), ref)["result"] == "PASS"


def test_the_png_in_the_payload_is_a_valid_png_of_the_image():
    import io

    import torch
    from PIL import Image

    from neuronhelpers.recipes.diffusers_pipeline import png_base64

    image = torch.rand(3, 5, 7)
    png = Image.open(io.BytesIO(base64.b64decode(png_base64(image))))
    assert png.size == (7, 5) and png.mode == "RGB"
    assert png.getpixel((6, 4)) == tuple(round(float(v) * 255) for v in image[:, 4, 6])


def test_the_card_states_the_tolerances():
    from neuronhelpers.store.card import render_card

    card = render_card()
    for dtype, bounds in vocab.EMBEDDING_TOLERANCE.items():
        assert f"{dtype}: {bounds['max_abs_diff']:g} / {bounds['min_cosine']:g}" in card
    for dtype, bounds in vocab.IMAGE_TOLERANCE.items():
        assert f"{dtype}: {bounds['max_abs_diff']:g} / {bounds['min_psnr_db']:g} dB" in card


# ---- models and the planner -------------------------------------------------------------------------------

@pytest.mark.slow
def test_local_folders_resolve_to_their_library_task(tmp_path):
    import shutil

    st = resolve_model(str(build.build_twin("tiny/st-bert")))
    assert (st.task, st.model_type, st.twin_of) == (vocab.FEATURE_EXTRACTION, "bert", None)
    sd = resolve_model(str(build.perturbed_twin("tiny/t2i-pixart-sigma", tmp_path / "pixart")))
    assert (sd.task, sd.model_type) == (vocab.TEXT_TO_IMAGE, "pixart-sigma")
    broken = tmp_path / "no-denoiser"
    shutil.copytree(tmp_path / "pixart", broken)
    index = json.loads((broken / "model_index.json").read_text())
    del index["transformer"]
    (broken / "model_index.json").write_text(json.dumps(index))
    with pytest.raises(UserError, match="has no denoiser"):
        resolve_model(str(broken))
    custom = tmp_path / "custom-module"
    shutil.copytree(build.build_twin("tiny/st-bert"), custom)
    modules = json.loads((custom / "modules.json").read_text())
    modules[1]["type"] = "my_package.MyPooling"
    (custom / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UserError, match="trust_remote_code"):
        resolve_model(str(custom))


@pytest.mark.slow
def test_the_planner_sums_a_pipelines_components():
    import torch
    from diffusers import DiffusionPipeline

    folder = build.build_twin("tiny/t2i-stable-diffusion")
    pipe = DiffusionPipeline.from_pretrained(str(folder))
    expected = sum(p.numel() for c in pipe.components.values() if isinstance(c, torch.nn.Module)
                   for p in c.parameters())
    assert pipeline_parameters(folder) == expected
    plan = plan_model(resolve_model("tiny/t2i-stable-diffusion"), get_backend("cpu"))
    assert (plan.cores, plan.parallelism, plan.parameters) == (1, "none", expected)
    assert "every component" in plan.weight_source
    st_plan = plan_model(resolve_model("tiny/st-qwen3"), get_backend("cpu"))
    assert st_plan.cores == 1 and st_plan.parameters == pipeline_parameters(build.build_twin("tiny/st-qwen3"))


def test_one_weight_variant_is_counted():
    names = ["diffusion_pytorch_model.fp16.safetensors", "diffusion_pytorch_model.safetensors"]
    assert one_variant(names) == ["diffusion_pytorch_model.safetensors"]
    sharded = ["model.fp16-00001-of-00002.safetensors", "model.fp16-00002-of-00002.safetensors"]
    assert one_variant(sharded) == sharded


def test_the_selected_list_plans_the_new_libraries_from_published_counts():
    from neuronhelpers.models.selected import SELECTED, selected_twins

    new = {e.model_id: e for e in SELECTED if e.task in libraries.LIBRARY_TASKS}
    assert {e.task for e in new.values()} == set(libraries.LIBRARY_TASKS)
    assert new["Qwen/Qwen3-Embedding-0.6B"].cores == 1 and new["stabilityai/stable-diffusion-xl-base-1.0"].cores == 1
    flux = new["black-forest-labs/FLUX.1-schnell"]
    assert flux.cores is None and flux.excluded.startswith("incompatible")
    assert all(e.cores == 1 for e in new.values() if not e.excluded)
    assert set(EMBEDDING_TWINS + DIFFUSION_TWINS) <= set(selected_twins())


# ---- end to end: run, verify, reproduce ---------------------------------------------------------------------

FIGURES = {vocab.FEATURE_EXTRACTION: ("min_cosine", "items_per_s"),
           vocab.TEXT_TO_IMAGE: ("psnr_db", "step_s", "image_s")}


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory):
    """One harness run per twin, shared by the tests that read it: (the row, its run folder). Two tests ask for
    st-qwen3 and t2i-stable-diffusion; running each once saves two runs (about 3 minutes of CI)."""
    runs = {}

    def run(model_id):
        if model_id not in runs:
            workdir = tmp_path_factory.mktemp("run")
            runs[model_id] = (run_model(model_id, workdir=workdir), workdir)
        return runs[model_id]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("model_id", EMBEDDING_TWINS + DIFFUSION_TWINS)
def test_a_twin_passes_against_its_cpu_reference_with_its_figures(model_id, twin_run):
    row, workdir = twin_run(model_id)
    assert row["result"] == "PASS", row["error"]
    assert row["verification"] in ("exact", "within_tolerance")
    assert row["library"] == render.LIBRARY_FOR_TASK[row["task"]] and row["library_version"]
    assert row["tolerance"] > 0 and row["max_abs_diff"] <= row["tolerance"]
    for column in ("load_s", "compile_s", "generate_s", "peak_memory_bytes", *FIGURES[row["task"]][1:]):
        assert row[column] is not None and row[column] >= 0, column
    assert row["tokens"] is None and row["neuron_cores"] == 1
    schema.validate_row(row)
    payload = last_json_line((workdir / "device.stdout.txt").read_text())
    assert payload["warm_equals_cold"]
    if row["task"] == vocab.TEXT_TO_IMAGE:
        assert payload["image_shape"] == [3, libraries.IMAGE_SIZE, libraries.IMAGE_SIZE]
        assert base64.b64decode(payload["image_png"]).startswith(b"\x89PNG")
        assert row["items_per_s"] == pytest.approx(1 / row["step_s"])
    else:
        assert len(payload["embeddings"]) == len(SENTENCES)


@pytest.mark.slow
def test_the_measuring_runs_nothing_eagerly_before_the_compiled_call_so_a_lazy_buffer_fails_as_run_py_alone():
    """Guards measuring 0.5.2. z-image's rope table is built on the model's first call, inside a `torch.device`
    context dynamo cannot enter. Run alone, the row's run.py compiles first and fails at compile; the measuring used to
    draw an image eagerly before compiling, which built the table, and recorded PASS (found by `rerun --sample 30`).
    Now the harness's verdict is run.py's own, and the eager evidence comes from its own process."""
    row = run_model("tiny/t2i-z-image-controlnet-inpaint")
    assert (row["result"], row["stage"]) == ("FAIL", "compile"), row["error"]
    assert row["cause"].startswith("Unsupported: Unsupported context manager"), row["cause"]
    assert "precompute_freqs_cis" in row["cause"]
    assert row["device_eager"] == vocab.DEVICE_EAGER_RAN and row["harness_version"] == "0.5.3"


@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["tiny/st-bert", "tiny/t2i-pixart-sigma"])
def test_a_perturbed_weight_fails_as_a_mismatch_with_the_figures(model_id, tmp_path):
    broken = build.perturbed_twin(model_id, tmp_path / "perturbed")
    row = run_model(str(broken), reference_model=model_id, workdir=tmp_path / "run")
    assert (row["result"], row["stage"]) == ("FAIL", "mismatch"), row["error"]
    assert row["max_abs_diff"] > row["tolerance"] and "tolerance" in row["error"]
    if row["task"] == vocab.FEATURE_EXTRACTION:
        assert row["min_cosine"] < vocab.EMBEDDING_TOLERANCE["float32"]["min_cosine"]
    else:
        assert row["psnr_db"] < vocab.IMAGE_TOLERANCE["float32"]["min_psnr_db"]
    schema.validate_row(row)


@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["tiny/st-qwen3", "tiny/t2i-stable-diffusion"])
def test_the_stored_run_py_alone_reproduces_the_output(model_id, twin_run, tmp_path):
    row, workdir = twin_run(model_id)
    original = last_json_line((workdir / "device.stdout.txt").read_text())
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "run.py").write_text(row["run_py"])
    proc = subprocess.run([sys.executable, "run.py"], cwd=alone, capture_output=True, text=True, timeout=900)
    again = last_json_line(proc.stdout)
    assert proc.returncode == 0 and again["ok"], proc.stderr[-2000:]
    check = verify_outputs(render.params_of_run_py(row["run_py"]), again, original)
    assert check["result"] == "PASS"
    if row["task"] == vocab.TEXT_TO_IMAGE:
        assert again["image_sha256"] == original["image_sha256"]  # the same image
    else:
        assert check["max_abs_diff"] <= vocab.EMBEDDING_TOLERANCE["float32"]["max_abs_diff"]
        assert not math.isnan(check["min_cosine"])
