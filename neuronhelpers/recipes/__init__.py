"""The run.py recipes, the only source of run.py: a shared scaffold and one recipe per library, joined by render.

``scaffold.py``              parameters, main, the Trainium contract, the sharded launcher, the JSON line, failures
``transformers_generate.py`` transformers: from_pretrained, static cache, compile, 32 greedy tokens cold then warm
``sentence_transformers_encode.py`` sentence-transformers: compiled transformer module, a fixed padded batch
``diffusers_pipeline.py``    diffusers: from_pretrained pipeline, compiled denoiser and VAE decoder, one image
``render.py``                joins them into one self-contained run.py with the model's parameters

Edit these files, never a rendered run.py. The measuring around a run (``run/measure.py``) is not here.
"""
