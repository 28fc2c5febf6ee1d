"""The planner: the fewest cores whose memory holds a model's weights, and how to split it over them.

Rule (documented in the card and printed by ``neuronhelpers plan``): a core may hold weights up to
``1 - HEADROOM`` of its memory; the rest is kept for the KV cache, activations and the runtime. The
core count is the smallest of 1, 2, 4, 8, 16 that holds the weights and over which the architecture
splits: tensor parallelism (TP) needs the attention heads and key/value heads divisible by the count,
expert parallelism (EP) needs the experts divisible. Architectures with a TP plan in transformers use
TP (MoE ones TP+EP); MoE architectures without one use EP alone; others cannot be split.

Taught in notebook 04.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from neuronhelpers.core import settings, vocab
from neuronhelpers.core.backends import Backend, GiB
from neuronhelpers.core.errors import UserError
from neuronhelpers.core.integrity import parameter_count, read_json, safetensors_header

CORE_COUNTS = (1, 2, 4, 8, 16)
MAX_CORES = CORE_COUNTS[-1]
HEADROOM = 0.20
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "int8": 1}
_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
                      "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
# Architectures whose MLP is two matrices (up, down) rather than three (gate, up, down).
_UNGATED_MLP = {"gpt2", "gpt_neox", "falcon", "starcoder2", "gpt_bigcode", "phi", "opt", "bloom"}


@dataclass
class Plan:
    cores: int | None
    parallelism: str  # none, tp, ep, tp+ep
    weight_bytes: int
    weight_source: str
    parameters: int
    core_bytes: int
    reasons: list[str] = field(default_factory=list)
    excluded: str | None = None

    def describe(self) -> str:
        head = (f"EXCLUDED: {self.excluded}" if self.excluded
                else f"{self.cores} core{'s' if self.cores != 1 else ''}, parallelism {self.parallelism}")
        return "\n".join([head, *(f"  - {r}" for r in self.reasons)])


def core_bytes(backend: Backend) -> int:
    """Memory of one core: on trn2 96 GiB per chip over its logical cores (24 GiB at the default LNC=2, 12 at LNC=1);
    elsewhere NEURONHELPERS_CORE_GIB (default the same 24)."""
    if backend.name == "neuron":
        from neuronhelpers.core.topology import one_chip

        return one_chip().bytes_per_core
    return int(settings.core_gib() * GiB)


def host_reference_budget() -> int:
    """Host memory a CPU reference may use (NEURONHELPERS_HOST_GIB, default half of this machine's RAM)."""
    if settings.host_gib() is not None:
        return int(settings.host_gib() * GiB)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def _text(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _experts(config) -> int:
    text = _text(config)
    for name in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 1:
            return value
    return 0


def estimate_parameters(config) -> int:
    """Parameter count of a decoder from its config alone (the fallback when no weights can be read)."""
    text = _text(config)
    hidden, layers = text.hidden_size, text.num_hidden_layers
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    vocab = text.vocab_size
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    matrices = 2 if text.model_type in _UNGATED_MLP else 3
    experts = _experts(config)
    if experts:
        expert_size = getattr(text, "moe_intermediate_size", None) or text.intermediate_size
        mlp = experts * matrices * hidden * expert_size + hidden * experts
        shared = getattr(text, "shared_expert_intermediate_size", None) or 0
        mlp += matrices * hidden * shared
    else:
        intermediate = getattr(text, "intermediate_size", None) or getattr(text, "n_inner", None) or 4 * hidden
        mlp = matrices * hidden * intermediate
    embeddings = vocab * hidden * (1 if getattr(config, "tie_word_embeddings", False) else 2)
    return layers * (attention + mlp) + embeddings


def safetensors_parameters(folder: str | Path) -> int | None:
    """Parameter count from the safetensors headers of a local checkpoint (reads headers only)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    return _safetensors_headers(files) if files else None


_SAFETENSORS_NAME = re.compile(r"^(?P<base>[^.]+?)(?:\.(?P<variant>[A-Za-z0-9_]+))?(?:-\d{5}-of-\d{5})?\.safetensors$")


def one_variant(names: list[str]) -> list[str]:
    """The safetensors files of one weight variant: diffusers folders may hold the same weights twice
    (``diffusion_pytorch_model.safetensors`` and ``....fp16.safetensors``); the plain variant counts, else the first."""
    variants: dict[str | None, list[str]] = {}
    for name in names:
        match = _SAFETENSORS_NAME.match(Path(name).name)
        if match:
            variants.setdefault(match.group("variant"), []).append(name)
    if not variants:
        return []
    return variants.get(None) or variants[sorted(k for k in variants if k)[0]]


def _safetensors_headers(paths: list[Path]) -> int:
    """The parameters the files' headers hold, each header read (and checked against its file) by core.integrity: a
    file cut short is named (DamagedFile), never a JSONDecodeError from deep in planning."""
    return sum(parameter_count(safetensors_header(path)) for path in paths)


def component_folders(folder: str | Path) -> list[str] | None:
    """The folders holding a sentence-transformers model's or a diffusers pipeline's weights, relative to ``folder``
    ("" is the folder itself): modules.json's module paths, or model_index.json's components. None for a plain
    transformers checkpoint."""
    folder = Path(folder)
    if (folder / "model_index.json").is_file():
        index = read_json(folder / "model_index.json")
        return sorted(name for name, value in index.items() if not name.startswith("_") and isinstance(value, list)
                      and len(value) == 2 and value[0])
    if (folder / "modules.json").is_file():
        return sorted({module.get("path") or "" for module in read_json(folder / "modules.json")})
    return None


def pipeline_parameters(folder: str | Path) -> int | None:
    """Parameter count of a sentence-transformers model or diffusers pipeline in a local folder: the sum over its
    modules' or components' safetensors (one weight variant each). None when there are none to read."""
    folder = Path(folder)
    parts = component_folders(folder) or []
    files = [path for part in parts for path in one_variant(sorted((folder / part).glob("*.safetensors")))]
    return _safetensors_headers(files) if files else None


def hub_pipeline_parameters(repo_id: str, parts: list[str]) -> int | None:
    """The same sum from the Hub's safetensors headers, component by component, when the Hub is reachable."""
    from neuronhelpers.core.network import hub_reachable

    if not hub_reachable():
        return None
    try:
        from huggingface_hub import HfApi

        api = HfApi()
        names = api.list_repo_files(repo_id)
        total = 0
        for part in parts:
            inside = [n for n in names if n.endswith(".safetensors") and os.path.dirname(n) == part]
            for name in one_variant(inside):
                total += sum(api.parse_safetensors_file_metadata(repo_id, name).parameter_count.values())
        return total or None
    except Exception:  # noqa: BLE001 - offline, gated, no safetensors
        return None


def hub_parameters(repo_id: str) -> int | None:
    """Parameter count from the Hub's safetensors metadata, when the Hub is reachable."""
    from neuronhelpers.core.network import hub_reachable

    if not hub_reachable():
        return None
    try:
        from huggingface_hub import get_safetensors_metadata

        meta = get_safetensors_metadata(repo_id)
        return int(sum(meta.parameter_count.values()))
    except Exception:  # noqa: BLE001 - offline, gated, no safetensors: fall back to the config
        return None


def meta_parameters(config, task: str) -> int | None:
    """The exact parameter count of a config's model, counted on the meta device (no weights read or allocated);
    None where the class cannot be built so (then ``estimate_parameters`` answers)."""
    import torch
    import transformers

    auto = transformers.AutoModelForImageTextToText if task == vocab.IMAGE_TEXT_TO_TEXT else \
        transformers.AutoModelForCausalLM
    try:
        with torch.device("meta"):
            model = auto.from_config(config)
    except Exception:  # noqa: BLE001 - a class that needs more than its config: the estimate answers
        return None
    return sum(p.numel() for p in model.parameters())


def config_plan(config, task: str, backend: Backend, *, dtype: str | None = None, cores: int | None = None,
                where: str = "a config") -> Plan:
    """Plan a model from its config alone (offline, no weights at hand): parameters counted on the meta device, else
    estimated, and the plan says so."""
    counted = meta_parameters(config, task)
    parameters, source = (counted, f"counted from {where} without weights") if counted else \
        (estimate_parameters(config), f"estimated from {where}")
    return plan_cores(config, parameters, dtype=dtype or backend.dtype, core_memory=core_bytes(backend),
                      cores=cores, source=source)


def parameters_of(path: str, config) -> tuple[int, str]:
    """(parameter count, where it came from) for a checkpoint path or Hub id."""
    if os.path.isdir(path):
        count = safetensors_parameters(path)
        if count:
            return count, "safetensors headers"
    else:
        count = hub_parameters(path)
        if count:
            return count, "Hub safetensors metadata"
    return estimate_parameters(config), "estimated from the config"


def splits(config, cores: int) -> tuple[str | None, str]:
    """How the architecture splits over ``cores``: (parallelism or None, why)."""
    text = _text(config)
    if cores == 1:
        return vocab.NO_PARALLELISM, "one core: no split"
    if config is None:  # a sentence-transformers model or diffusers pipeline: the recipe runs it whole on one core
        return None, "the sentence-transformers and diffusers recipes run a model whole on one core: cannot be split"
    has_tp = bool(getattr(text, "base_model_tp_plan", None))
    experts = _experts(config)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    if has_tp:
        if heads % cores or kv_heads % cores:  # a rank holds whole heads: say which count does not divide
            uneven = [f"{n} {name}" for n, name in ((heads, "attention heads"), (kv_heads, "key-value heads"))
                      if n % cores]
            return None, f"TP over {cores}: {' and '.join(uneven)} are not divisible by {cores}"
        if experts:
            if experts % cores:
                return None, f"TP+EP over {cores}: {experts} experts are not divisible by {cores}"
            return vocab.TENSOR_AND_EXPERT_PARALLEL, (f"TP+EP over {cores}: {heads} heads, {kv_heads} kv heads and "
                                                      f"{experts} experts divide evenly")
        return vocab.TENSOR_PARALLEL, f"TP over {cores}: {heads} heads and {kv_heads} kv heads divide evenly"
    if experts:  # no TP plan: the experts alone are split
        if experts % cores:
            return None, f"EP over {cores}: {experts} experts are not divisible by {cores}"
        return vocab.EXPERT_PARALLEL, f"EP over {cores}: no TP plan in transformers; {experts} experts divide evenly"
    return None, f"no tensor-parallel plan in transformers for '{text.model_type}' and no experts: cannot be split"


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def plan_cores(config, parameters: int, *, dtype: str, core_memory: int, cores: int | None = None,
               source: str = "given") -> Plan:
    """Decide the core count and parallelism for a model of ``parameters`` parameters in ``dtype`` (``cores``: the
    count asked for with --cores, else the planner's)."""
    weight_bytes = parameters * DTYPE_BYTES[dtype]
    usable = int(core_memory * (1 - HEADROOM))
    needed = max(1, math.ceil(weight_bytes / usable))
    plan = Plan(None, vocab.NO_PARALLELISM, weight_bytes, source, parameters, core_memory)
    plan.reasons.append(f"weights: {_count(parameters)} parameters x {DTYPE_BYTES[dtype]} bytes ({dtype}) = "
                        f"{weight_bytes / GiB:.2f} GiB ({source})")
    plan.reasons.append(f"per core: {core_memory / GiB:.0f} GiB, of which {usable / GiB:.1f} GiB for weights "
                        f"({HEADROOM:.0%} kept for KV cache and activations) -> at least {needed} core(s)")
    if cores is not None:
        if cores not in CORE_COUNTS:
            raise UserError(f"--cores {cores}: choose one of {', '.join(map(str, CORE_COUNTS))}")
        parallelism, why = splits(config, cores)
        if parallelism is None:
            raise UserError(f"--cores {cores}: {why}")
        plan.cores, plan.parallelism = cores, parallelism
        plan.reasons.append(f"forced to {cores} core(s) (--cores): {why}")
        if cores < needed:
            plan.reasons.append(f"warning: {cores} core(s) hold less than the weights need")
        return plan
    if needed > MAX_CORES:
        plan.excluded = (f"incompatible: needs more than {MAX_CORES} cores "
                         f"({weight_bytes / GiB:.0f} GiB of weights, {usable / GiB:.1f} GiB usable per core)")
        return plan
    for count in CORE_COUNTS:
        if count < needed:
            continue
        parallelism, why = splits(config, count)
        plan.reasons.append(why)
        if parallelism is not None:
            plan.cores, plan.parallelism = count, parallelism
            return plan
        if count == needed and "cannot be split" in why:
            break
    plan.excluded = f"incompatible: needs {needed}+ cores but {plan.reasons[-1]}"
    return plan


def plan_model(model, backend: Backend, *, dtype: str | None = None, cores: int | None = None) -> Plan:
    """Plan a resolved ModelRef on a backend (reads its config and weight sizes)."""
    import transformers

    from neuronhelpers.core.vocab import FEATURE_EXTRACTION, TEXT_TO_IMAGE

    if model.task in (FEATURE_EXTRACTION, TEXT_TO_IMAGE):
        parameters, source = library_parameters_of(model)
        return plan_cores(None, parameters, dtype=dtype or backend.dtype, core_memory=core_bytes(backend),
                          cores=cores, source=source)
    config = transformers.AutoConfig.from_pretrained(model.path)
    parameters, source = parameters_of(model.path, config)
    plan = plan_cores(config, parameters, dtype=dtype or backend.dtype, core_memory=core_bytes(backend),
                      cores=cores, source=source)
    note = chip_crossing_note(plan)
    if note:
        plan.reasons.append(note)
    return plan


def chip_crossing_note(plan: Plan) -> str | None:
    """A sharded plan wider than one trn2 chip says so: the documented advice is "Keep TP4 within a chip", and TP
    over 8 or 16 cores sends every layer's collectives between chips (slower, and a different code path)."""
    from neuronhelpers.core.topology import one_chip

    chip = one_chip()
    per_chip = chip.cores_per_chip
    if not plan.cores or plan.cores <= per_chip or plan.parallelism == vocab.NO_PARALLELISM:
        return None
    chips = -(-plan.cores // per_chip)
    return (f"note: {plan.parallelism.upper()} over {plan.cores} cores spans {chips} chips ({per_chip} "
            f"logical cores per trn2 chip at LNC={chip.lnc}): collectives cross chips (\"Keep TP4 within a chip\")")


def library_parameters_of(model) -> tuple[int, str]:
    """(parameter count, where it came from) of a sentence-transformers model or diffusers pipeline: its modules' or
    components' safetensors summed, from a local folder or the Hub's headers; else (sentence-transformers) estimated
    from the transformer's config."""
    import transformers

    if os.path.isdir(model.path):
        count = pipeline_parameters(model.path)
        if count:
            return count, "safetensors headers of every component"
    else:
        from huggingface_hub import snapshot_download

        try:  # resolve_model fetched model_index.json / modules.json into the local cache
            local = snapshot_download(model.path, allow_patterns=["model_index.json", "modules.json"],
                                      local_files_only=True)
        except Exception:  # noqa: BLE001
            local = None
        parts = component_folders(local) if local else None
        count = hub_pipeline_parameters(model.path, parts) if parts is not None else None
        if count:
            return count, "Hub safetensors metadata of every component"
    if model.task != vocab.TEXT_TO_IMAGE:
        config = transformers.AutoConfig.from_pretrained(model.path)
        return estimate_parameters(config), "estimated from the transformer's config"
    raise UserError(f"cannot count the weights of '{model.model_id}' here: no safetensors in the folder and the Hub's "
                    "metadata is out of reach")


def per_rank_layout(config, cores: int, parallelism: str) -> dict:
    """What each rank holds when split over ``cores``: heads, key/value heads and experts per rank."""
    text = _text(config)
    heads = text.num_attention_heads
    kv = getattr(text, "num_key_value_heads", None) or heads
    experts = _experts(config)
    tensor_parallel = parallelism in (vocab.TENSOR_PARALLEL, vocab.TENSOR_AND_EXPERT_PARALLEL)
    ep = parallelism in (vocab.EXPERT_PARALLEL, vocab.TENSOR_AND_EXPERT_PARALLEL)
    return {
        "cores": cores,
        "parallelism": parallelism,
        "attention heads per rank": heads // cores if tensor_parallel else heads,
        "key/value heads per rank": kv // cores if tensor_parallel else kv,
        "experts per rank": (experts // cores if ep else experts) if experts else None,
        "tensor-parallel plan (transformers)": dict(getattr(text, "base_model_tp_plan", None) or {}),
    }
