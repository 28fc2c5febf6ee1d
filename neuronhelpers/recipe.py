"""The recipe: render the one run.py template into a standalone script and its requirements.txt.

The loading / compile / generate logic lives only in ``run_py_template.py``; this module fills in
the model's parameters. The harness executes exactly the rendered file and keeps its text in the row.
"""

from __future__ import annotations

import pprint
import re
from pathlib import Path

from .backends import Backend
from .models import IMAGE_TEXT_TO_TEXT, ModelRef
from .versions import distribution_version

TEMPLATE_PATH = Path(__file__).with_name("run_py_template.py")
MAX_NEW_TOKENS = 32
PROMPTS = {
    "text-generation": "Write a short story about a robot who learns to paint.",
    IMAGE_TEXT_TO_TEXT: "Describe this image in one sentence.",
}
_PARAMS_BLOCK = re.compile(r"(# --- parameters \(rendered\) ---\n).*?(\n# --- end parameters ---)", re.S)


def template_text() -> str:
    return TEMPLATE_PATH.read_text()


def recipe_params(model: ModelRef, backend: Backend, *, dtype: str | None = None, trust_remote_code: bool = False,
                  revision: str | None = None, cores: int = 1, parallelism: str = "none") -> dict:
    """The parameters that make the template this model's run.py."""
    if (cores > 1) != (parallelism != "none"):
        raise ValueError(f"{cores} core(s) with parallelism '{parallelism}' is not a plan")
    return {
        "model_id": model.model_id,
        "model_path": model.path,
        "task": model.task,
        "backend": backend.name,
        "device": backend.device,
        "compile_backend": backend.compile_backend,
        "dtype": dtype or backend.dtype,
        "cores": cores,
        "parallelism": parallelism,
        "dist_backend": backend.dist_backend,
        "max_new_tokens": MAX_NEW_TOKENS,
        "prompt": PROMPTS[model.task],
        "trust_remote_code": bool(trust_remote_code),
        "revision": revision,
        "top_k": 5,
    }


def render_run_py(params: dict) -> str:
    """The standalone run.py for these parameters (see ``recipe_params``)."""
    block = "PARAMS = " + pprint.pformat(params, sort_dicts=False, width=100)
    text, count = _PARAMS_BLOCK.subn(lambda m: m.group(1) + block + m.group(2), template_text(), count=1)
    if count != 1:
        raise RuntimeError(f"{TEMPLATE_PATH} lost its parameters block")
    return text


def params_of_run_py(text: str) -> dict:
    """Read the parameters back out of a rendered run.py (a literal, never executed)."""
    import ast

    match = _PARAMS_BLOCK.search(text)
    if not match:
        raise ValueError("not a neuronhelpers run.py: no parameters block")
    block = text[match.end(1) : match.start(2)]
    return ast.literal_eval(block.split("=", 1)[1].strip())


def render_requirements(backend: Backend, task: str) -> str:
    """requirements.txt: what to pip install on top of the Neuron SDK (or next to torch elsewhere)."""
    def pin(name):
        version = distribution_version(name)
        # A local build label (torch's "+cpu") is not on PyPI: pin the public release.
        return f"{name}=={version.split('+')[0]}" if version else name

    lines = []
    if backend.name == "neuron":
        lines.append("# Neuron SDK (preinstalled on the Neuron Deep Learning AMI / container): "
                     + ", ".join(pin(n) for n in ("torch", "torch-neuronx", "neuronx-cc")))
    else:
        lines.append(pin("torch"))
    lines += [pin("transformers"), pin("accelerate"), pin("safetensors"), pin("tokenizers")]
    if task == IMAGE_TEXT_TO_TEXT:
        lines.append(pin("pillow"))
    return "\n".join(lines) + "\n"
