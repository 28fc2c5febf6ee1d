"""The test protocol's fixed inputs, defined once: how many tokens a text model generates, the prompts per task, the
batch an embedding model encodes and the inputs a diffusion pipeline draws from.

run.py is rendered with these values (``neuronhelpers.recipes.render``) and the dataset card states them
(``neuronhelpers.store.card``). Taught in notebook 02.
"""

from neuronhelpers.core.vocab import (
    AUTOMATIC_SPEECH_RECOGNITION,
    FEATURE_EXTRACTION,
    IMAGE_TEXT_TO_TEXT,
    TEXT_GENERATION,
    TEXT_TO_IMAGE,
)

MAX_NEW_TOKENS = 32
# The fixed batch a sentence-embedding model encodes (feature-extraction): its "prompt".
SENTENCES = [
    "A robot learns to paint the sea at night.",
    "The weather today is mild and the river runs quietly past the old mill.",
    "Children walk to school while the baker opens his shop.",
    "How many tokens per second does the model generate after compilation?",
    "She said that the answer was in the book on the table.",
    "In the morning the market fills with people who buy bread and flowers.",
    "Trainium runs the compiled graph on its NeuronCores.",
    "What colours do you see in this picture?",
]
PROMPTS = {
    TEXT_GENERATION: "Write a short story about a robot who learns to paint.",
    IMAGE_TEXT_TO_TEXT: "Describe this image in one sentence.",
    FEATURE_EXTRACTION: SENTENCES,
    TEXT_TO_IMAGE: "A robot painting the sea at night, oil on canvas.",
    AUTOMATIC_SPEECH_RECOGNITION: None,  # no text prompt: the model hears the audio clip alone
}
# Inputs beyond the prompt, per task: every sentence padded to one length (static shapes); the image's seed,
# denoising steps and size (None: the checkpoint's native size); the audio clip's length in seconds (a fixed sum of
# sines made in run.py, at the feature extractor's sampling rate).
TASK_INPUTS = {
    FEATURE_EXTRACTION: {"sequence_length": 64},
    TEXT_TO_IMAGE: {"seed": 0, "steps": 4, "image_size": None},
    AUTOMATIC_SPEECH_RECOGNITION: {"audio_seconds": 2.0},
}

# The eager run beside the compiled one (the speed-up, and whether the device runs the model at all): skipped for
# sharded runs (an eager pass would hold every rank's cores as long again) and above this many parameters (unfused
# eager decoding of a larger model costs minutes of device time per row).
EAGER_MAX_PARAMETERS = 3_000_000_000
