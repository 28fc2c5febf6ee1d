"""The result vocabulary: the one definition of what a row's task, result, stage, verification, parallelism and
library can be, and which library tests which task.

Everything else (harness, dataset validation, card, explorer) reads these names and tables; no other module of the
package spells one of these words as a literal (the rendered run.py, which must be self-contained, is the one
exception, and a test checks that every word it writes is defined here; the measuring around it, run/measure.py,
spells the device_eager words, checked the same way). The dataset card's explanations are
generated from the descriptions here. Taught in notebook 03.
"""

import math
import re

# Tasks the catalog tests (the Hub's pipeline tags).
TEXT_GENERATION = "text-generation"
IMAGE_TEXT_TO_TEXT = "image-text-to-text"
FEATURE_EXTRACTION = "feature-extraction"
TEXT_TO_IMAGE = "text-to-image"
AUTOMATIC_SPEECH_RECOGNITION = "automatic-speech-recognition"
TASKS = {
    TEXT_GENERATION: "A causal language model generates text from a text prompt (transformers, AutoModelForCausalLM).",
    IMAGE_TEXT_TO_TEXT: "A vision-language model generates text from an image and a prompt (transformers, "
    "AutoModelForImageTextToText).",
    FEATURE_EXTRACTION: "A sentence-embedding model encodes a fixed batch of sentences (sentence-transformers).",
    TEXT_TO_IMAGE: "A diffusion pipeline draws an image from a prompt (diffusers).",
    AUTOMATIC_SPEECH_RECOGNITION: "A speech recognition model transcribes a fixed synthetic audio clip (transformers, "
    "AutoModelForSpeechSeq2Seq).",
}

PASS = "PASS"
FAIL = "FAIL"
EXCLUDED = "EXCLUDED"
UNTESTED = "UNTESTED"

RESULTS = {
    PASS: "The model loaded with from_pretrained and ran compiled with fullgraph=True (a text model: 32 greedy "
    "tokens with a static KV cache; an embedding model: a fixed batch of sentences; a diffusion pipeline: a few "
    "denoising steps and the decoder), and its output passed the check named in `verification`. PASS says "
    "nothing about throughput or longer generations.",
    FAIL: "The model failed under the recipe: the run did not complete or its output did not pass the check. "
    "`stage` says where it failed, `cause` gives a short signature shared by failures of the same origin, and "
    "`error` names the exception and the first line of its message, the cause a user should read first "
    "(`traceback` holds the whole of it).",
    EXCLUDED: "Deliberately not run; `error` gives the reason (e.g. 'not a priority yet', 'incompatible: ...', "
    "or that it needs more than 16 cores).",
    UNTESTED: "No verdict about the model could be reached where the test ran, for a reason that is not the "
    "model's: `stage` says which (see Untested reasons) and `error` says what to do. Neither a PASS nor a FAIL.",
}

# Where a FAIL happened: the row's `stage`.
STAGE_LOAD = "load"
STAGE_COMPILE = "compile"
STAGE_RUN = "run"
STAGE_OOM = "oom"
STAGE_TIMEOUT = "timeout"
STAGE_MISMATCH = "mismatch"
STAGE_REFERENCE = "reference"
STAGES = {
    STAGE_LOAD: "from_pretrained of the model, tokenizer or processor failed, or the checkpoint could not be placed on "
    "the device.",
    STAGE_COMPILE: "torch.compile with the backend's compiler failed while tracing or compiling the forward pass.",
    STAGE_RUN: "The compiled model failed while generating, or the process crashed (e.g. a segmentation fault).",
    STAGE_OOM: "The run exhausted device or host memory.",
    STAGE_TIMEOUT: "The run did not finish within its time limit and was stopped.",
    STAGE_MISMATCH: "The outputs differ from the CPU reference beyond what the check allows: generated tokens at a "
    "position where the reference was not near a tie, or embeddings / an image beyond the dtype's tolerance.",
    STAGE_REFERENCE: "The CPU eager reference run itself failed; the model's device run is not blamed.",
}

# A twin no builder was written for: not tried, so its row is EXCLUDED (never UNTESTED); the reason opens with this.
NO_TWIN_WRITTEN = "not a priority yet: no tiny twin was written for it"

# Why a row is UNTESTED: it goes in the row's `stage` column (FAIL rows use STAGES).
UNTESTED_TWIN = "twin"
UNTESTED_DEPENDENCY = "dependency"
UNTESTED_INFRASTRUCTURE = "infrastructure"
UNTESTED_INPUT = "input"
UNTESTED_STAGES = {
    UNTESTED_TWIN: "No tiny twin of the architecture could be built and run eagerly here (its config cannot be shrunk, "
    "its processor cannot be built offline, it is not a text model despite the mapping, ...). One rule for the three "
    "words: a twin that was tried and failed is UNTESTED (twin); a missing package is always UNTESTED (dependency), "
    "whether the build or the run found it missing; a family no twin builder was written for is EXCLUDED (not a "
    "priority yet), since nothing was tried.",
    UNTESTED_DEPENDENCY: "The model needs a package that is not installed where the test ran (the error names it); "
    "install it and run again.",
    UNTESTED_INFRASTRUCTURE: "The machines running the test failed it: a worker node or process died repeatedly, or "
    "no node of the cluster has the cores its plan needs, or a process was killed from outside without the kernel "
    "recording an out-of-memory kill (after one retry); the model itself never reported a result, and the next "
    "sweep runs it again.",
    UNTESTED_INPUT: "A file of the model was damaged before it ran: cut short, unparseable, or a size or name that "
    "contradicts its own header or index (`error` names the file). Files that are whole but describe a model that "
    "does not load are a FAIL at load instead. Download or save the file again; the next sweep runs it again.",
}
# An attempt, not a verdict: an UNTESTED row of these stages never hides an older PASS or FAIL of the same model and
# version pair (store/dataset.newest_per_model shows it beside the verdict as its last attempt), and a sweep runs the
# model again without being asked to.
ATTEMPT_STAGES = (UNTESTED_INFRASTRUCTURE, UNTESTED_INPUT)


def is_attempt(result, stage) -> bool:
    """Is a row an attempt that reached no verdict for a reason of the machine or of the files (ATTEMPT_STAGES)?"""
    return result == UNTESTED and stage in ATTEMPT_STAGES

# Verification: how a PASS was established.
EXACT = "exact"
NEAR_TIE = "near_tie"
WITHIN_TOLERANCE = "within_tolerance"
JUDGE_LM = "judge_lm"
JUDGE_LEXICAL = "judge_lexical"
VERIFICATIONS = {
    EXACT: "All generated tokens equal those of a CPU eager run of the same checkpoint, dtype and prompt.",
    NEAR_TIE: "The tokens first differ from the CPU reference at a position where the reference's top-1/top-2 "
    "logit margin is under the near-tie tolerance and the device's token is in the reference's top-k; "
    "`first_divergence` and `divergence_margin` give where and by how much.",
    WITHIN_TOLERANCE: "The outputs (embeddings, an image) differ from a CPU eager run of the same checkpoint and "
    "inputs by no more than the tolerance stated for the dtype; `tolerance`, `max_abs_diff` and the library's own "
    "figure (`min_cosine` for embeddings, `psnr_db` for images) record it.",
    JUDGE_LM: "Sharded run without an affordable CPU reference: a small causal LM (the row's `judge`) scored the "
    "text as sound English.",
    JUDGE_LEXICAL: "Sharded run without an affordable CPU reference and without an LM judge: a word-frequency "
    "judge found the text to be sound English.",
}

# Whether the model ran eagerly (nothing compiled) on the same device: the row's `device_eager`, a word and, after
# "failed" and "not tried", a colon and the reason. The measuring around run.py (run/measure.py) writes them.
DEVICE_EAGER_RAN = "ran"
DEVICE_EAGER_FAILED = "failed"
DEVICE_EAGER_NOT_TRIED = "not tried"
DEVICE_EAGER = {
    DEVICE_EAGER_RAN: "The model ran eagerly on the device the compiled run used: beside a PASS, the run the speed-up "
    "is measured against (same process, same inputs and cache, back to back; where a call takes under 2 s, three eager "
    "calls alternate with compiled ones and each side keeps its best decode rate); beside a FAIL, proof that the "
    "device can run the model and the compiler is the obstacle. After a failure it is a fresh process that loads "
    "run.py's model and runs it with the recipe's static cache (on CPU too: the CPU reference uses a dynamic cache).",
    DEVICE_EAGER_FAILED: "The model failed eagerly on the device too (the reason follows): not only the compiler.",
    DEVICE_EAGER_NOT_TRIED: "No eager run (the reason follows): sharded runs, models above the parameter bound, and "
    "runs that timed out are not given one.",
}

# The level of evidence behind a verdict: the row's `evidence`, strongest first within PASS and within FAIL.
EVIDENCE_EXACT = EXACT  # a PASS's level is its verification, where that is a comparison with the reference
EVIDENCE_NEAR_TIE = NEAR_TIE
EVIDENCE_WITHIN_TOLERANCE = WITHIN_TOLERANCE
EVIDENCE_JUDGED = "judged"
EVIDENCE_INSENSITIVE = "insensitive_check"
EVIDENCE_EAGER_RAN = "compiled_failed_eager_ran"
EVIDENCE_EAGER_SAME_TOKENS = "eager_wrote_the_same"
EVIDENCE_EAGER_FAILED = "eager_failed_too"
EVIDENCE_EAGER_UNKNOWN = "eager_not_tried"
EVIDENCE_REFERENCE_FAILED = "reference_failed"
EVIDENCE = {
    EVIDENCE_EXACT: "PASS: every token equals the CPU eager reference's.",
    EVIDENCE_NEAR_TIE: "PASS: the tokens equal the reference's up to a position where the reference was nearly tied.",
    EVIDENCE_WITHIN_TOLERANCE: "PASS: embeddings or an image within the dtype's tolerance of the CPU reference.",
    EVIDENCE_JUDGED: "PASS: no affordable CPU reference; a judge read the text (the row's `judge`).",
    EVIDENCE_INSENSITIVE: "PASS, but the check did not catch a deliberate change to the model (`check_sensitive` is "
    "false): the same model with its middle layer perturbed matched the reference too, so this match proves little "
    "about the compiled numbers (`verification` still says how the outputs compared).",
    EVIDENCE_EAGER_RAN: "FAIL under the compiler, but the model ran eagerly on the same device: the compiler (or the "
    "model's compile support) is what to fix, not the device.",
    EVIDENCE_EAGER_SAME_TOKENS: "FAIL at mismatch, but the same generate() run eagerly on the device wrote the same "
    "tokens as the compiled one: the device's eager run (or its static cache) differs from the CPU reference, not "
    "the compiler.",
    EVIDENCE_EAGER_FAILED: "FAIL, and the model failed eagerly on the device too.",
    EVIDENCE_EAGER_UNKNOWN: "FAIL; whether the device runs it eagerly was not tried (`device_eager` says why).",
    EVIDENCE_REFERENCE_FAILED: "FAIL before the device ran: the CPU eager reference itself failed, so neither the "
    "device nor the compiler was tried (the row's `error` says why the reference failed).",
}
# PASS levels in order, strongest first: a row whose level falls in this list is worth reporting (`diff`).
PASS_EVIDENCE_ORDER = [EVIDENCE_EXACT, EVIDENCE_NEAR_TIE, EVIDENCE_WITHIN_TOLERANCE, EVIDENCE_JUDGED,
                       EVIDENCE_INSENSITIVE]

# How a model's weights were spread over cores: the row's `parallelism`.
NO_PARALLELISM = "none"
TENSOR_PARALLEL = "tp"
EXPERT_PARALLEL = "ep"
TENSOR_AND_EXPERT_PARALLEL = "tp+ep"
PARALLELISMS = {
    NO_PARALLELISM: "The whole model on one core.",
    TENSOR_PARALLEL: "Tensor parallelism: each layer's weights split over the cores (transformers' TP plan).",
    EXPERT_PARALLEL: "Expert parallelism: a mixture-of-experts model's experts spread over the cores, the rest "
    "replicated.",
    TENSOR_AND_EXPERT_PARALLEL: "Both: attention split by its TP plan and the experts spread over the same cores.",
}

# Where a row's weights came from: the kind before the colon of its `weights` column (part of the resume key).
WEIGHTS_HUB = "hub"
WEIGHTS_SHELF = "shelf"
WEIGHTS_TWIN = "twin"
WEIGHTS_FOLDER = "folder"
WEIGHTS_KINDS = {
    WEIGHTS_HUB: "The Hub checkpoint itself (its commit in `revision`).",
    WEIGHTS_SHELF: "A real checkpoint a registry package ships (a GGUF dequantized to float32, or the Hub folder "
    "zipped): evidence here, not the Hub checkpoint's result, so never published.",
    WEIGHTS_TWIN: "A tiny twin: the architecture's code with shrunk dimensions and random weights.",
    WEIGHTS_FOLDER: "A local checkpoint folder.",
}

# What a row ran on, in words (derived from its `backend` and the kind of its `weights`, never stored): the label the
# explorer and the card show beside a verdict, so a CPU twin's row is never read as a Trainium measurement.
RAN_ON_TRAINIUM = "Trainium"
RAN_ON = {
    RAN_ON_TRAINIUM: "Measured on AWS Trainium (backend neuron, compiler neuronx-cc) with the Hub checkpoint.",
    "Trainium twin": "A tiny twin run on AWS Trainium: the architecture's code with random weights.",
    "CPU twin": "A tiny twin run on CPU under inductor: it says whether the architecture compiles with the recipe, "
    "not how the real checkpoints behave on Trainium.",
    "CPU real checkpoint": "A real checkpoint (a shelf copy from a registry package, a local folder, or the Hub's) run "
    "on CPU under inductor: evidence that twins predict real checkpoints, not a Trainium result.",
    "CUDA twin": "A tiny twin run on a CUDA GPU under inductor.",
    "CUDA real checkpoint": "A real checkpoint run on a CUDA GPU under inductor.",
}
# The device part of a label, by backend, and the kind of weights part.
RAN_ON_DEVICE = {"neuron": RAN_ON_TRAINIUM, "cpu": "CPU", "cuda": "CUDA"}
RAN_ON_TWIN, RAN_ON_REAL = "twin", "real checkpoint"

# Where the answer for a Hub id comes from, best first: a row measured on Trainium, else the shelf's real checkpoint
# run on CPU, else the model's own twin (its config.json, sizes shrunk: twins/own.py), else its architecture's twin
# (the default config). The label says which.
ANSWER_TRAINIUM, ANSWER_MODEL_TWIN, ANSWER_ARCHITECTURE_TWIN = "measured on Trainium", "model twin", "architecture twin"
ANSWER_SHELF = "real checkpoint on CPU"
ANSWERS = {
    ANSWER_TRAINIUM: "The Hub checkpoint itself, run on AWS Trainium: the answer.",
    ANSWER_SHELF: "The Hub checkpoint's own config and tokenizer with weights a registry package ships (the shelf; the "
    "row's `weights` says which), run through the same recipe on CPU: evidence about the model, not its Trainium "
    "result.",
    ANSWER_MODEL_TWIN: "A prediction from the model's own config: every field that shapes the graph (sliding window, "
    "layer pattern, rope scaling, experts' routing, ...) is the model's, only sizes are shrunk (config_changes lists "
    "them), and the weights are random.",
    ANSWER_ARCHITECTURE_TWIN: "A prediction from the architecture's default config: the model's own config may differ "
    "in a field that decides the verdict.",
}

# The libraries whose models the catalog tests (their PyPI names, as the row's `library`), and which one tests a task.
TRANSFORMERS = "transformers"
SENTENCE_TRANSFORMERS = "sentence-transformers"
DIFFUSERS = "diffusers"
LIBRARIES = {
    TRANSFORMERS: "Hugging Face transformers: causal and vision-language models, generate() with a static KV cache.",
    SENTENCE_TRANSFORMERS: "sentence-transformers: embedding models, encode() of a fixed batch.",
    DIFFUSERS: "diffusers: text-to-image pipelines, a few denoising steps and the decoder.",
}
LIBRARY_FOR_TASK = {TEXT_GENERATION: TRANSFORMERS, IMAGE_TEXT_TO_TEXT: TRANSFORMERS,
                    FEATURE_EXTRACTION: SENTENCE_TRANSFORMERS, TEXT_TO_IMAGE: DIFFUSERS,
                    AUTOMATIC_SPEECH_RECOGNITION: TRANSFORMERS}

# Near-tie tolerance on the reference's top-1 minus top-2 logit, by dtype: a device may legitimately pick
# the runner-up when the two are closer than the numeric noise of that dtype.
NEAR_TIE_MARGIN = {"float32": 1e-3, "bfloat16": 0.25, "float16": 0.05}
NEAR_TIE_TOP_K = 5

# Can the check fail? The measuring runs the model once more, eagerly, with every weight of one block in the middle
# of the model (the middle block of its largest stack of repeated blocks: a decoder layer, an encoder layer, a
# denoiser block) shifted by Gaussian noise of this size relative to that weight's mean absolute value, and checks
# the output against the unperturbed CPU reference with the run's own rule. The row's `check_sensitive` says
# whether the check caught it (null where no eager run is made: sharded, above the eager bound, or a failed run).
# A denoiser's twin keeps its library's own initialisation, and one block of a DiT changes the image little: at 0.1
# thirteen families (flux, auraflow, qwenimage, ...) moved it by 3.2e-4 to 8.8e-3 max abs, inside the measured image
# bound (vocab.IMAGE_TOLERANCE_MEASURED), so their check could not fail. Measured on nine of them (2026-12-05, the
# middle block perturbed, the eager image against the reference): at 1.0 all but auraflow (59.9 dB) leave the bound;
# at 2.0 auraflow is at 44.7 dB. Diffusers' size is the smallest tried that takes every family measured out of it.
PERTURBATION_SIZE = {TRANSFORMERS: 0.1, SENTENCE_TRANSFORMERS: 0.1, DIFFUSERS: 2.0}
# A generate() check over fewer distinct tokens than this (of 32) proves little even where the perturbation moved one:
# the row counts among the checks that could not have failed (verdict/verify.check_sensitivity); twins are built to
# write at least this many (twins/weights.py).
MIN_DISTINCT_TOKENS = 8
CHECK_SENSITIVE = {
    True: "The check caught a deliberate change: the model with its middle block perturbed wrote "
    "other output than the reference, so a compiled graph computing numbers that wrong would have failed.",
    False: "The check did not catch it: the perturbed model's output passed against the reference too. The PASS stands "
    "for 'compiled and ran', not for correct numbers (evidence `insensitive_check`).",
}

# Outputs compared as numbers, by dtype: a compiled run may differ from the CPU eager reference by the rounding of
# its dtype, not by more. Embeddings (sentence-transformers): the largest absolute difference of any component and
# the lowest cosine similarity of any sentence's embedding. Images (diffusers, pixel values in [0, 1], drawn from the
# same seeded latents): the largest absolute pixel difference and the lowest PSNR (dB, peak 1.0). A run passes when it
# is within both bounds; the row's `tolerance` records the max-abs bound that applied.
EMBEDDING_TOLERANCE = {
    "float32": {"max_abs_diff": 1e-4, "min_cosine": 0.99999},
    "bfloat16": {"max_abs_diff": 5e-2, "min_cosine": 0.99},
    "float16": {"max_abs_diff": 1e-2, "min_cosine": 0.999},
}
IMAGE_TOLERANCE = {
    "float32": {"max_abs_diff": 2e-2, "min_psnr_db": 40.0},
    "bfloat16": {"max_abs_diff": 0.25, "min_psnr_db": 25.0},
    "float16": {"max_abs_diff": 0.1, "min_psnr_db": 30.0},
}
# Where compiled runs have been measured, the image bounds come from what they differ by, not from the dtype alone
# (a bound far above that hides a wrong image: 40 dB passed every perturbed pipeline whose image moved by less), and
# are never looser than the dtype's. The largest compiled-against-reference difference over the catalog's diffusers
# PASS rows (CPU, float32, inductor 2.13.0 and 2.14.1) and a fresh build of every twin (2026-12-05): max abs 5.02e-3,
# lowest PSNR 70.0 dB (tiny/t2i-kandinsky22: 1.7e-4 / 96.7 dB in the sweep before, 5.0e-3 / 70.0 dB from a fresh
# build, the same twin's weights drawn again). Times IMAGE_MARGIN in amplitude: max abs 0.025, looser than the dtype's
# 0.02, which is kept; PSNR 70.0 - 20*log10(IMAGE_MARGIN) = 56 dB instead of 40. Other backends keep IMAGE_TOLERANCE
# until compiled runs there are measured (neuron: on Trainium; cuda float32: no run yet).
IMAGE_MARGIN = 5
IMAGE_TOLERANCE_MEASURED = {
    ("cpu", "float32"): {
        "max_abs_diff": min(round(5.02e-3 * IMAGE_MARGIN, 4), IMAGE_TOLERANCE["float32"]["max_abs_diff"]),
        "min_psnr_db": round(70.0 - 20 * math.log10(IMAGE_MARGIN), 1)},
}


def image_tolerance(backend: str | None, dtype: str) -> dict:
    """The image bounds a run on ``backend`` in ``dtype`` is held to: measured where IMAGE_TOLERANCE_MEASURED has them,
    else the dtype's."""
    return IMAGE_TOLERANCE_MEASURED.get((backend, dtype)) or IMAGE_TOLERANCE.get(dtype, IMAGE_TOLERANCE["float32"])


# A mismatch the compiler did not cause: transformers' own generate() with the recipe's static cache, run eagerly on
# CPU with nothing compiled, already writes the device's tokens, and its dynamic cache (the reference) writes others.
# The row stays FAIL at mismatch (the recipe's run does not match), with this cause; `causes` ranks it apart.
CAUSE_STATIC_CACHE = ("transformers' static cache writes other tokens than its dynamic cache, on CPU with nothing "
                      "compiled (not the compiler)")
# Causes whose blame is not the compiler's (ranked apart from compiler failures by `causes`).
NOT_THE_COMPILER = (CAUSE_STATIC_CACHE,)


class VocabularyError(ValueError):
    pass


# A Hub model id: org/name (what resolving a model, a judge and the published dataset's rows accept as one).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def is_hub_id(text) -> bool:
    """Whether ``text`` reads as a Hub id (org/name), not a path or a bare name."""
    return isinstance(text, str) and bool(_HUB_ID.match(text))


def check_value(kind: str, value) -> None:
    """Raise VocabularyError naming the value when it is not in the vocabulary (None is allowed for all but the
    result)."""
    table = {"result": RESULTS, "stage": {**STAGES, **UNTESTED_STAGES}, "verification": VERIFICATIONS,
             "parallelism": PARALLELISMS, "library": LIBRARIES, "task": TASKS, "evidence": EVIDENCE}[kind]
    if value is None and kind != "result":
        return
    if value not in table:
        raise VocabularyError(f"unknown {kind} value {value!r}: expected one of {', '.join(table)}")


# What a remedy that passed means on Trainium: one word each, derived from what the remedy run compiled
# (run/remedies.py) and judged against TorchNeuron's documented contract: static shapes, every new shape a neuronx-cc
# compile (a NEFF), dynamic=True rejected, native dynamic shapes "not yet available", no fallback to eager (AWS's
# torch.compile reference, read on TRN2_CONTRACT_READ).
TRN2_CONTRACT_READ = "2026-10-14"
# A PASS whose check could not have failed (the perturbed model gave the same output): counted apart, a row's or a
# remedy's alike, never as a PASS.
PASS_COULD_NOT_FAIL = "PASS whose check could not have failed"
TRN2_READY = "trn2-ready"
TRN2_COSTLY = "costly on trn2"
NOT_ON_TRN2 = "not on trn2"
REMEDY_NOT_APPLICABLE = "not applicable"
TRN2_WORDS = {
    TRN2_READY: "static shapes, one compiled graph, no recompile: TorchNeuron compiles it once, into one NEFF",
    TRN2_COSTLY: "static shapes, but graph breaks or several graphs: each graph a NEFF of its own and each break a "
    "return to the host on every step",
    NOT_ON_TRN2: "a symbolic size or integer (neuronx-cc compiles static shapes; dynamic=True is rejected), or a "
    "compile for every generated token",
    REMEDY_NOT_APPLICABLE: "the remedy is exact only within a limit the test exceeds (its sequence is longer than the "
    "model's attention window): its result does not count",
}
