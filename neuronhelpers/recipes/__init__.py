"""The run.py recipes: a shared scaffold and one recipe per library, joined into one self-contained run.py.

``scaffold.py``              parameters, main, the JSON line, failures, memory, the sharded launcher
``transformers_generate.py`` transformers: from_pretrained, static cache, compile, 32 greedy tokens
``sentence_transformers_encode.py`` sentence-transformers: SentenceTransformer, compiled transformer module,
                             a fixed batch of sentences padded to one length, embeddings
``diffusers_pipeline.py``    diffusers: from_pretrained pipeline, compiled denoiser and VAE decoder, one image

``neuronhelpers.recipes.render.render_run_py`` joins them; edit these files, never a rendered run.py.
"""
