"""Benchmark: what the perturbed run (issue 37: can the check fail?) adds to a row.

    .venv/bin/python bench/bench_perturbation.py [MODEL ...]

For each model: one warm harness run (run_model, twin and caches warm) for the row's wall time, then in this process
the recipe's own model loaded from its run.py, one eager call (generate with nothing compiled, encode, draw) and the
same call with the middle block perturbed (verdict/perturb.py), each the median of ROUNDS. Prints each model's figures
and, last, the ratio of the perturbed calls' total to the rows' total wall time: the share of a sweep the check costs.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

from neuronhelpers import run_model
from neuronhelpers.core import vocab
from neuronhelpers.core.backends import get_backend
from neuronhelpers.models.resolve import resolve_model
from neuronhelpers.recipes import render
from neuronhelpers.run.measure import load_run_py
from neuronhelpers.verdict.perturb import decoder_or_model, middle_block, perturbed_outputs

DEFAULT_MODELS = ["tiny/llama", "tiny/qwen3", "tiny/gpt2", "tiny/st-bert", "tiny/t2i-stable-diffusion"]
ROUNDS = 3


def eager_call(module, params):
    """(the module perturbed, the call) for the recipe's model, loaded on the CPU as run.py loads it."""
    library = params["library"]
    if library == vocab.TRANSFORMERS:
        model, tokenizer, inputs = module.load(params, "cpu")
        kwargs = {**module.compiled_generation_kwargs(params, "cpu", tokenizer), "disable_compile": True}

        def generate():
            return {"tokens": module.new_tokens(model, module.generate(model, inputs, kwargs), inputs)}

        return decoder_or_model(model), generate  # the measuring's own block for generate(): the decoder's middle one
    model = module.load(params, "cpu")
    if library == vocab.SENTENCE_TRANSFORMERS:
        return model, lambda: {"embeddings": module.encode(model, params).tolist()}
    return module.resolve(model, module.denoiser_name(model)), lambda: module.image_payload(module.draw(model, params))


def median_seconds(call) -> float:
    seconds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(models: list[str]) -> None:
    totals = {"wall": 0.0, "perturbed": 0.0}
    for model_id in models:
        run_model(model_id, workdir=tempfile.mkdtemp(prefix="nh-bench-perturb-"))  # warm: twin, caches
        row = run_model(model_id, workdir=tempfile.mkdtemp(prefix="nh-bench-perturb-"))
        params = render.recipe_params(resolve_model(model_id), get_backend("cpu"))
        script = Path(tempfile.mkdtemp(prefix="nh-bench-perturb-")) / "run.py"
        script.write_text(render.render_run_py(params))
        module = load_run_py(str(script))
        root, call = eager_call(module, params)
        call()  # warm
        size = vocab.PERTURBATION_SIZE[params["library"]]
        eager_s = median_seconds(call)
        perturbed_s = median_seconds(lambda: perturbed_outputs(root, size, call))  # noqa: B023 - used at once
        totals["wall"] += row["wall_s"]
        totals["perturbed"] += perturbed_s
        print(f"{model_id}: block {middle_block(root)[0]}, eager call {eager_s:.2f} s, perturbed call "
              f"{perturbed_s:.2f} s, row wall {row['wall_s']:.1f} s, check_sensitive {row.get('check_sensitive')}")
    print(f"perturbed calls / row wall time, {len(models)} twins: {totals['perturbed'] / totals['wall']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT_MODELS)
