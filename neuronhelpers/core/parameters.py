"""run.py's parameters (its ``PARAMS``), declared once: each name, the types it takes, what it means, which runs carry
it, and whether only the device run reads it.

``recipe_parameters`` makes a run's PARAMS in the declared order (recipes/render.py renders them and refuses a name
or type not declared here); ``local_parameters`` gives the same for a local folder run eagerly on the CPU (the twins'
checks and the repro scripts load a twin through the recipe with it); the CPU reference cache ignores the parameters
only the device reads (run/reference.py); the dataset card lists them (store/card.py). Adding a parameter is one
entry here and the recipe that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronhelpers.core import vocab
from neuronhelpers.core.protocol import MAX_NEW_TOKENS, PROMPTS, TASK_INPUTS

_NONE = type(None)


@dataclass(frozen=True)
class Parameter:
    name: str
    types: tuple[type, ...]
    meaning: str
    libraries: tuple[str, ...] | None = None  # the libraries whose run.py carries it (None: every one)
    tasks: tuple[str, ...] | None = None  # the tasks whose run.py carries it (None: every one)
    device_only: bool = False  # where and how the device run happens: the CPU reference does not read it
    optional: bool = False  # carried only where it is given


PARAMETERS = (
    Parameter("model_id", (str,), "the model the row is about: a Hub id, `tiny/<name>` for a twin, or a folder",
              device_only=True),
    Parameter("model_path", (str,), "what `from_pretrained` reads: the Hub id, or a local folder (for a twin or a "
              "shelf copy, its id: run.py finds its folder)"),
    Parameter("twin_files", (dict,), "a twin's: the digest of its files and the neuronhelpers, torch and transformers "
              "that build them (run.py builds the twin where it runs, with those files)", optional=True),
    Parameter("shelf_files", (dict,), "a shelf copy's: the digest of its files and the command that makes them "
              "(run.py finds them on the shelf or in the Hugging Face cache where it runs)", optional=True),
    Parameter("task", (str,), "the task tested (see Tasks)"),
    Parameter("library", (str,), "the library whose recipe the run.py is (see Libraries)"),
    Parameter("backend", (str,), "`neuron`, `cuda` or `cpu`", device_only=True),
    Parameter("device", (str,), "the torch device the model runs on", device_only=True),
    Parameter("compile_backend", (str,), "`torch.compile`'s backend: `neuron` on Trainium, `inductor` elsewhere",
              device_only=True),
    Parameter("dtype", (str,), "the weights' dtype (`bfloat16` on Trainium, `float32` on CPU)"),
    Parameter("cores", (int,), "the cores (ranks) the model is sharded over", device_only=True),
    Parameter("parallelism", (str,), "how the weights are spread: `none`, `tp`, `ep` or `tp+ep`", device_only=True),
    Parameter("dist_backend", (str, _NONE), "`torch.distributed`'s backend for a sharded run", device_only=True),
    Parameter("max_new_tokens", (int,), "the greedy tokens `generate()` writes", libraries=(vocab.TRANSFORMERS,)),
    Parameter("prompt", (str, list, _NONE), "the fixed prompt (the sentences an embedding model encodes; none for "
              "speech: the model hears the clip alone)"),
    Parameter("trust_remote_code", (bool,), "whether the Hub repository's own code may run (only when a person asks)"),
    Parameter("revision", (str, _NONE), "the Hub commit read (none: the newest)"),
    Parameter("top_k", (int,), "how many of the reference's best tokens a device token may be, at a near tie",
              libraries=(vocab.TRANSFORMERS,)),
    Parameter("sequence_length", (int,), "the tokens every sentence is padded or cut to (one static shape)",
              tasks=(vocab.FEATURE_EXTRACTION,)),
    Parameter("seed", (int,), "the seed of the pipeline's noise (drawn on the CPU)", tasks=(vocab.TEXT_TO_IMAGE,)),
    Parameter("steps", (int,), "the denoising steps", tasks=(vocab.TEXT_TO_IMAGE,)),
    Parameter("image_size", (int, _NONE), "the image's side in pixels (none: the checkpoint's native size)",
              tasks=(vocab.TEXT_TO_IMAGE,)),
    Parameter("audio_seconds", (float,), "the length of the generated test clip",
              tasks=(vocab.AUTOMATIC_SPEECH_RECOGNITION,)),
    Parameter("remedy", (dict,), "a remedy, where one is tried after a FAIL: its name and its settings for the "
              "recipe's extension points (see What would make a FAIL run)", device_only=True, optional=True),
)
BY_NAME = {parameter.name: parameter for parameter in PARAMETERS}
DEVICE_ONLY = tuple(parameter.name for parameter in PARAMETERS if parameter.device_only)


def _carried(parameter: Parameter, library: str, task: str) -> bool:
    return ((parameter.libraries is None or library in parameter.libraries)
            and (parameter.tasks is None or task in parameter.tasks))


def recipe_parameters(*, task: str, given: dict) -> dict:
    """A run's PARAMS, in the declared order: ``given`` (every parameter of the run but the protocol's fixed inputs)
    with the prompt and the task's inputs of core/protocol.py, each parameter only where its library and task carry
    it. A name not declared, or one missing, raises ValueError naming it."""
    library = vocab.LIBRARY_FOR_TASK[task]
    fixed = {"task": task, "library": library, "max_new_tokens": MAX_NEW_TOKENS, "prompt": PROMPTS[task],
             "top_k": vocab.NEAR_TIE_TOP_K, **TASK_INPUTS.get(task, {})}
    values = {**fixed, **given}
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise ValueError(f"run.py has no parameter {', '.join(unknown)} (core/parameters.py declares them)")
    params = {}
    for parameter in PARAMETERS:
        if not _carried(parameter, library, task) or (parameter.optional and parameter.name not in values):
            continue
        if parameter.name not in values:
            raise ValueError(f"run.py's parameter {parameter.name} was not given")
        params[parameter.name] = values[parameter.name]
    check_parameters(params)
    return params


def check_parameters(params: dict) -> None:
    """Every parameter declared, each of a declared type (ValueError naming the first that is not)."""
    for name, value in params.items():
        parameter = BY_NAME.get(name)
        if parameter is None:
            raise ValueError(f"run.py has no parameter {name} (core/parameters.py declares them)")
        if type(value) not in parameter.types:  # bool is not int here: exact types, as a literal carries them
            kinds = " or ".join("None" if t is _NONE else t.__name__ for t in parameter.types)
            raise ValueError(f"run.py's parameter {name} is {value!r}, not {kinds}")


def local_parameters(folder, task: str, **overrides) -> dict:
    """PARAMS for a local folder run eagerly on the CPU in float32 (a twin's own check, a repro script's capture):
    the protocol's inputs unless ``overrides`` (declared names, held to ``recipe_parameters``' rules) say otherwise;
    an override the task's run.py does not carry is left out, as from any run.py."""
    given = {"model_id": str(folder), "model_path": str(folder), "backend": "cpu", "device": "cpu",
             "compile_backend": "inductor", "dtype": "float32", "cores": 1, "parallelism": vocab.NO_PARALLELISM,
             "dist_backend": None, "trust_remote_code": False, "revision": None}
    return recipe_parameters(task=task, given={**given, **overrides})
