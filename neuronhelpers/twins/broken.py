"""Deliberately broken copies of a built twin, for teaching (notebook 03) and tests: each fails in a known way.
The functions here break a copy of a folder; ``broken_twin`` and ``perturbed_twin`` (in build.py, re-exported by the
package) build the twin first and call them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from neuronhelpers.core.errors import UserError

BREAKAGES = {
    "perturbed": "one weight matrix shifted: runs, but its tokens differ from the unperturbed reference (mismatch)",
    "bad_config": "config.json names an activation transformers does not have: from_pretrained fails (load)",
    "no_tokenizer": "tokenizer files removed: refused before any run, with a one-line error",
}
# The weight each library twin's perturbed copy shifts (half of its output rows): (file inside the twin, tensor name).
# Shifting it changes the output far beyond any dtype's tolerance while the model still loads and runs.
PERTURBED_WEIGHT = {
    "st-bert": ("model.safetensors", "encoder.layer.1.output.dense.weight"),
    "st-qwen3": ("model.safetensors", "layers.1.mlp.down_proj.weight"),
    "t2i-stable-diffusion": ("unet/diffusion_pytorch_model.safetensors", "conv_out.weight"),
    # The random DiT's output barely reaches the image through the random VAE's group norms: shift the decoder's.
    "t2i-pixart-sigma": ("vae/diffusion_pytorch_model.safetensors", "decoder.conv_out.weight"),
}


def check_breakage(how: str) -> None:
    if how not in BREAKAGES:
        raise UserError(f"unknown breakage '{how}': choose one of {', '.join(BREAKAGES)}")


def check_perturbable(key: str, model_id: str) -> None:
    if key not in PERTURBED_WEIGHT:
        raise ValueError(f"'{model_id}' is not a sentence-transformers or diffusers twin")


def _fresh_copy(folder: Path, dest) -> Path:
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(folder, dest)
    return dest


def break_copy(folder: Path, dest, how: str) -> Path:
    """Copy the twin ``folder`` to ``dest`` and break it as ``how`` says (see BREAKAGES). Returns ``dest``."""
    check_breakage(how)
    dest = _fresh_copy(folder, dest)
    if how == "perturbed":
        from safetensors.torch import load_file, save_file

        weights = load_file(dest / "model.safetensors")
        name = next(k for k in sorted(weights) if k.endswith("mlp.down_proj.weight") and ".1." in k)
        weights[name] = weights[name] + 0.5 * weights[name].abs().max()
        save_file(weights, dest / "model.safetensors", metadata={"format": "pt"})
    elif how == "bad_config":
        config = json.loads((dest / "config.json").read_text())
        config["hidden_act"] = "no_such_activation"
        (dest / "config.json").write_text(json.dumps(config, indent=1))
    else:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            (dest / name).unlink(missing_ok=True)
    return dest


def perturb_copy(key: str, folder: Path, dest) -> Path:
    """Copy the library twin ``folder`` (named ``key``) to ``dest`` with one weight shifted (see PERTURBED_WEIGHT): it
    loads and runs, but its output differs from the unperturbed twin's (a mismatch). Returns ``dest``."""
    from safetensors.torch import load_file, save_file

    check_perturbable(key, key)
    dest = _fresh_copy(folder, dest)
    file, name = PERTURBED_WEIGHT[key]
    weights = load_file(dest / file)
    # Half of the output rows shifted: a shift of every row alike would be undone by a following LayerNorm.
    weight = weights[name].clone()
    weight[: weight.shape[0] // 2] += 0.5 * weight.abs().max()
    weights[name] = weight
    save_file(weights, dest / file, metadata={"format": "pt"})
    return dest
