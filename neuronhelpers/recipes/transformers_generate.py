"""run.py: does this Hugging Face model run unmodified on Trainium? The TorchNeuron recipe, from neuronhelpers.

Top-down: the parameters, main, the Trainium contract, then the recipe: from_pretrained, a static KV cache and
torch.compile(fullgraph=True, dynamic=False) with the backend's compiler, 32 greedy tokens generated twice (cold:
traced and compiled; warm: the compiled graphs; compile_s is cold minus warm), the text and one JSON line.
Sharded (PARAMS["cores"] > 1), it starts one process per core itself, each loading its shard through transformers'
own tensor (and expert) parallelism. Needs only torch, transformers and requirements.txt. Rendered by
neuronhelpers.recipes.render from neuronhelpers/recipes/: edit those, never a rendered copy.

    python3 run.py               # the recipe on the device
    python3 run.py --reference   # the CPU eager reference: same checkpoint, dtype and prompt, nothing compiled
"""

# The recipe's own imports, for the package (its tests and the twins call its functions); run.py has one imports
# section, the scaffold's, so the renderer takes this file's docstring and sections, not these lines.
import time

from .scaffold import compile_options, failed, peak_memory_bytes

# ---- the recipe --------------------------------------------------------------------------------------------
# What the measuring (neuronhelpers/run/measure.py) may read or wrap, and only that: rename on both sides.
MEASURED = ("PARAMS", "main", "emit", "failed", "pin_neuron_contract", "device_run", "generate", "load",
            "compiled_generation_kwargs", "new_tokens", "NotCompiled", "rank_main")


def device_run(params, rank=None):
    """Load on the device, compile through a static cache, generate 32 greedy tokens cold and then warm."""
    device = params["device"] if rank is None or params["device"] == "cpu" else f"{params['device']}:{rank}"
    stage, timings = "load", {}
    try:
        t0 = time.perf_counter()
        model, tokenizer, inputs = load(params, device, sharded=rank is not None)
        timings["load_s"] = time.perf_counter() - t0
        kwargs = compiled_generation_kwargs(params, device, tokenizer)
        stage = "compile"  # the cold call traces the decode step and compiles it
        t0 = time.perf_counter()
        cold = generate(model, inputs, kwargs)
        timings["first_call_s"] = time.perf_counter() - t0
        if getattr(model, "_compiled_call", None) is None:  # generate() fell back to the eager forward, silently
            raise NotCompiled(model)
        stage = "run"  # the warm call runs the compiled graphs
        t0 = time.perf_counter()
        warm = generate(model, inputs, kwargs)
        timings["generate_s"] = time.perf_counter() - t0
        timings["compile_s"] = max(timings["first_call_s"] - timings["generate_s"], 0.0)
        tokens = new_tokens(model, warm, inputs)
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        return {"ok": True, "mode": "device", "tokens": tokens, "text": text, "prompt_tokens": prompt_length(inputs),
                "warm_equals_cold": tokens == new_tokens(model, cold, inputs), "timings": timings,
                "peak_memory_bytes": peak_memory_bytes(device)}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a result with its stage
        return failed(exc, stage, timings)


def compiled_generation_kwargs(params, device, tokenizer):
    """generate()'s arguments: 32 greedy tokens, a static KV cache, the forward compiled whole by the backend."""
    import importlib

    import transformers

    remedy = params.get("remedy") or {}  # where a remedy is tried: its settings (recipes/remedies.py in neuronhelpers)
    for path, value in remedy.get("config", {}).items():  # by dotted name: torch._dynamo.config.recompile_limit
        setattr(importlib.import_module(path.rpartition(".")[0]), path.rpartition(".")[2], value)
    cache_utils = importlib.import_module("transformers.cache_utils")
    for kind, name in remedy.get("cache_layers", {}).items():  # the static cache's layer class, per layer type
        cache_utils.STATIC_LAYER_TYPE_MAPPING[kind] = getattr(cache_utils, name)
    compile_config = transformers.CompileConfig(**{
        "backend": params["compile_backend"], "fullgraph": True, "dynamic": False, "mode": "default",
        "options": compile_options(params["compile_backend"]), **remedy.get("compile", {})})
    if not str(device).startswith(("neuron", "cuda")):
        compile_config._compile_all_devices = True  # generate() compiles by itself only on accelerators
    # Whisper's generate() returns its new tokens without its start token unless asked for its output object: asked
    as_output = {"return_dict_in_generate": True} if params.get("task") == "automatic-speech-recognition" else {}
    return {**generation_kwargs(tokenizer, params["max_new_tokens"]), "cache_implementation": "static",
            "compile_config": compile_config, **as_output, **remedy.get("generate", {})}


def generation_kwargs(tokenizer, n):
    """Exactly n greedy tokens (an early end-of-sequence would shorten the comparison)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "pad_token_id": pad}


def generate(model, inputs, kwargs):
    """One generate() call (the measuring wraps this function when the harness runs the file)."""
    import torch

    torch.manual_seed(0)  # a model that draws noise in generate() (VibeVoice ASR's audio latents) draws it alike
    with torch.inference_mode():
        return model.generate(**inputs, **kwargs)


def generated_tokens(model, sequences, prompt_len, decoder_prompt_len=1):
    """The first sequence's new tokens (an encoder-decoder's: after its decoder prompt), of generate()'s output."""
    sequences = getattr(sequences, "sequences", sequences)
    start = decoder_prompt_len if getattr(model.config, "is_encoder_decoder", False) else prompt_len
    return sequences[0, start:].tolist()


def new_tokens(model, output, inputs):
    """The new tokens of generate()'s output: after the prompt, or after the one start token generate() makes given no
    input_ids (audio alone); an encoder-decoder's after its decoder prompt (a speech model's language and task)."""
    return generated_tokens(model, output, prompt_length(inputs) or 1,
                            prompt_length(inputs, "decoder_input_ids") or 1)


def prompt_length(inputs, name="input_ids"):
    """A prompt's length in tokens (``input_ids``, or an encoder-decoder's ``decoder_input_ids``); 0 if not given."""
    ids = inputs.get(name)
    return ids.shape[1] if ids is not None else 0


class NotCompiled(RuntimeError):
    """generate() ran without the compiled forward the recipe asks for."""

    def __init__(self, model=None):
        config = getattr(model, "generation_config", None)  # Yi-1.5, Qwen3-4B: their config.json says use_cache false
        why = ("its config sets use_cache: false, so nothing was compiled; pass use_cache=True to generate()"
               if getattr(config, "use_cache", None) is False else "transformers did not compile it (no compileable "
               "static cache for this architecture, or it opts out of compilation)")
        super().__init__(f"generate() ran the forward eagerly: {why}")


# ---- loading -----------------------------------------------------------------------------------------------
def load(params, device, sharded=False):
    """from_pretrained the model and its tokenizer or processor, and its inputs, by its task's loader (below)."""
    import torch

    dtype = getattr(torch, params["dtype"])
    common = {"trust_remote_code": params["trust_remote_code"], "revision": params["revision"]}
    remedy = (params.get("remedy") or {}).get("load", {})  # a remedy's from_pretrained arguments, where one is tried
    weights = {**common, **remedy, **(sharding_kwargs(params) if sharded else {})}
    model, tokenizer, inputs = LOADERS[params["task"]](params, dtype, common, weights)
    model.eval()
    if sharded:
        device = model.device  # transformers placed each shard on this rank's device
    else:
        model.to(device)
    inputs = {k: (v.to(device).to(dtype) if v.is_floating_point() else v.to(device)) for k, v in inputs.items()}
    return model, tokenizer, inputs


LOADERS = {}  # task -> its loader: (params, dtype, common, weights) -> (model, tokenizer, inputs)


# ---- loading: sharded ----------------------------------------------------------------------------------------
def sharding_kwargs(params):
    """from_pretrained's arguments for transformers' own tensor (and expert) parallelism (its DistributedConfig)."""
    import transformers

    tp, ep = params["parallelism"].startswith("tp"), "ep" in params["parallelism"]
    return {"distributed_config": transformers.DistributedConfig(tp_plan="auto" if tp else None,
                                                                 enable_expert_parallel=ep)}


# ---- loading: text-generation ------------------------------------------------------------------------------
def load_text_generation(params, dtype, common, weights):
    """A causal LM and its tokenizer; the prompt in the chat template if it has one."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(params["model_path"], **common)
    model = transformers.AutoModelForCausalLM.from_pretrained(params["model_path"], dtype=dtype, **weights)
    messages = [{"role": "user", "content": params["prompt"]}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) \
        if tokenizer.chat_template else params["prompt"]
    return model, tokenizer, tokenizer(text, return_tensors="pt")


LOADERS["text-generation"] = load_text_generation


# ---- loading: image-text-to-text ---------------------------------------------------------------------------
def load_image_text_to_text(params, dtype, common, weights):
    """An image-text model and its processor; the test image and the prompt, in the chat template if it has one."""
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(params["model_path"], **common)
    model = transformers.AutoModelForImageTextToText.from_pretrained(params["model_path"], dtype=dtype, **weights)
    if getattr(processor, "chat_template", None):
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": params["prompt"]}]}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    else:  # a plain prompt, after the image token where the processor names one
        text = (getattr(processor, "image_token", None) or "") + params["prompt"]
    return model, processor.tokenizer, processor(text=text, images=[test_image()], return_tensors="pt")


LOADERS["image-text-to-text"] = load_image_text_to_text


def test_image():
    """A deterministic 64x64 RGB gradient as a PIL image: no file, no download."""
    from PIL import Image

    pixels = bytes(channel for y in range(64) for x in range(64)
                   for channel in ((x * 4) % 256, (y * 4) % 256, ((x + y) * 2) % 256))
    return Image.frombytes("RGB", (64, 64), pixels)


# ---- loading: automatic-speech-recognition -----------------------------------------------------------------
def load_automatic_speech_recognition(params, dtype, common, weights):
    """A speech-to-text model and its processor; no text prompt: the audio clip alone (or a transcription request)."""
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(params["model_path"], **common)
    model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(params["model_path"], dtype=dtype, **weights)
    return model, processor.tokenizer, speech_inputs(processor, params.get("audio_seconds", 2.0))


LOADERS["automatic-speech-recognition"] = load_automatic_speech_recognition


def test_audio(sampling_rate, seconds=2.0):
    """A deterministic mono clip (float32 samples in [-1, 1], a numpy array): three sines under a slow swell; no file,
    no download."""
    import math

    import torch

    def sample(t):
        swell = 0.1 * (1.0 + math.sin(2 * math.pi * 0.5 * t))
        return swell * sum(math.sin(2 * math.pi * f * t) for f in (220.0, 440.0, 660.0))

    samples = [sample(i / sampling_rate) for i in range(int(sampling_rate * seconds))]
    return torch.tensor(samples, dtype=torch.float32).numpy()  # the array feature extractors take


# The instruction after the audio where the processor has no transcription request of its own: a model card's.
TRANSCRIBE = {None: "Transcribe the audio.",
              "GraniteSpeechProcessor": "can you transcribe the speech into a written format?"}


def speech_inputs(processor, seconds):
    """The processor's inputs for the test clip at its feature extractor's sampling rate: the clip alone (English, where
    the processor must be told the language), or an audio-language model's transcription request."""
    import inspect

    extractor = getattr(processor, "feature_extractor", None) or getattr(processor, "audio_processor", processor)
    rate = extractor.sampling_rate  # (granite's is its audio_processor)
    required = [p.name for p in inspect.signature(processor.__call__).parameters.values()
                if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    clip = test_audio(rate, seconds)
    if "text" in required:
        inputs = transcription_request(processor, clip, rate)
    else:
        language = {"language": "en"} if "language" in required else {}
        inputs = processor(audio=clip, sampling_rate=rate, return_tensors="pt", **language)
    # the tensors the model takes: no bookkeeping (cohere_asr's chunk index, an audio-language model's token counts)
    unused = set(getattr(processor, "unused_input_names", None) or ())
    return {k: v for k, v in inputs.items() if hasattr(v, "is_floating_point") and k not in unused}


def transcription_request(processor, clip, rate):
    """An audio-language model's prompt and features, as its checkpoints want them: the processor's own transcription
    request, else its chat template with the clip and an instruction, else its audio token and the instruction."""
    import inspect

    instruction = TRANSCRIBE.get(type(processor).__name__, TRANSCRIBE[None])
    request = getattr(processor, "apply_transcription_request", None)
    if request is not None:
        # English; Voxtral's (mistral-common) also wants the array's rate and a format, and a model name it ignores
        known = {"language": "en", "sampling_rate": rate, "format": "wav", "model_id": None}
        accepted = inspect.signature(request).parameters
        return request(clip, **{k: v for k, v in known.items() if k in accepted})
    if getattr(processor, "chat_template", None):
        messages = [{"role": "user", "content": [{"type": "audio", "audio": clip},
                                                 {"type": "text", "text": instruction}]}]
        return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                             return_tensors="pt")
    text = processor.audio_token + instruction  # in the tokenizer's chat template where it has one (a model card's)
    if getattr(processor.tokenizer, "chat_template", None):
        text = processor.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                       tokenize=False)
    return processor(text=text, audio=clip, sampling_rate=rate, return_tensors="pt")


# ---- the reference -----------------------------------------------------------------------------------------
def reference_run(params):
    """The same checkpoint, dtype and prompt on the CPU, eagerly: the tokens to match and their top logits."""
    import torch

    try:
        model, tokenizer, inputs = load({**params, "remedy": None}, "cpu")  # the recipe as it is, remedy or not
        torch.manual_seed(0)  # the same noise as the device's generate() draws (see generate)
        with torch.inference_mode():
            out = model.generate(**inputs, **generation_kwargs(tokenizer, params["max_new_tokens"]),
                                 output_logits=True, return_dict_in_generate=True)
        top = [torch.topk(step[0].float(), params["top_k"]) for step in out.logits]  # per generated position
        tokens = new_tokens(model, out, inputs)
        return {"ok": True, "mode": "reference", "tokens": tokens,
                "text": tokenizer.decode(tokens, skip_special_tokens=True), "top_ids": [ids.tolist() for _, ids in top],
                "top_logits": [[round(v, 6) for v in values.tolist()] for values, _ in top]}
    except BaseException as exc:  # noqa: BLE001
        return failed(exc, "reference", {})
