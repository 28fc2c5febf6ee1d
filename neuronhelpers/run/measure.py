"""The measuring around a recipe: what the harness learns from a run beyond what run.py itself prints.

The harness runs ``python -m neuronhelpers.run.measure run.py`` in the run's own process tree. This module imports
the rendered run.py as a module (exactly the text the row stores), wraps the file's own functions and calls its
``main``, so the recipe runs as a user runs it while the measuring records around its steps:

- the token clock (time to first token, decode rate): a generate() streamer on each call;
- the eager comparison: the same call with nothing compiled, in the same process, timed the same way (where calls
  are quick, TIMING_ROUNDS eager calls alternate with compiled ones and each side keeps its best rate: one call on a
  shared machine can lose tenfold to a neighbour). Bounded: never sharded, nor above the parameter bound;
- dynamo's figures (graph breaks, unique graphs, recompiles and the guards that failed) and the compile cache's
  counters; sentences per second, seconds per denoising step;
- whether the check can fail: the outputs once more, eagerly, with the middle block perturbed (verdict/perturb.py).

``python -m neuronhelpers.run.measure run.py --eager`` loads the recipe's model on the device and runs it once with
nothing compiled: after a compiled failure, does the device run it at all? On a sharded run every rank is measured
and the row carries rank 0's figures (a failing rank's, when one fails). ``core.versions.MEASURING_VERSION`` is the
row's ``harness_version``: it changes when this file does (tests/test_measure.py fails until it is bumped), while
the recipe is identified by its run.py's code (core/code_identity.py).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import time

from neuronhelpers.core import settings, vocab
from neuronhelpers.core.versions import MEASURING_VERSION
from neuronhelpers.run.instruments import (
    RecompileLog,
    StepClock,
    TokenClock,
    compile_cache_counters,
    dynamo_figures,
    dynamo_traced,
)
from neuronhelpers.verdict.perturb import decoder_or_model, outputs_with, perturbation_target, perturbed_outputs

TIMING_ROUNDS = 3  # eager calls alternating with compiled ones, where a call is quick
QUICK_CALL_S = 2.0
REASONS_KEPT = 3  # the last recompile reasons a row keeps


def load_run_py(path: str):
    """The rendered run.py as a module (not run as __main__), to be wrapped and called. The measuring reads or replaces
    only the names the recipe declares in its ``MEASURED`` (tests/test_measure.py holds this file to them); a file
    that declares none, or lacks one it declares, is refused here in one line rather than somewhere deep in a run."""
    spec = importlib.util.spec_from_file_location("run_py", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    declared = getattr(module, "MEASURED", None)
    if declared is None:
        raise RuntimeError(f"{path} declares no MEASURED names: not a run.py this measuring "
                           f"(measuring {MEASURING_VERSION}) knows; render it again (neuronhelpers render MODEL)")
    sharded = module.PARAMS.get("cores", 1) > 1
    missing = [name for name in declared if not hasattr(module, name) and (name != "rank_main" or sharded)]
    if missing:
        raise RuntimeError(f"{path} declares {', '.join(missing)} in MEASURED but defines no such name: render it "
                           "again (neuronhelpers render MODEL)")
    return module


def main(argv: list[str]) -> int:
    """``run.py [--eager | run.py's own flags]``: the recipe with the measuring around it, one JSON line."""
    path, flags = argv[0], argv[1:]
    module = load_run_py(path)
    params = module.PARAMS
    if "--eager" not in flags:
        instrument(module, params, sharded=params["cores"] > 1)
        if params["cores"] > 1:
            module.rank_main = functools.partial(measured_rank, path)  # each spawned rank is measured the same way
        return module.main(flags)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as run.py's main sets it
    if params["device"] == "neuron":
        module.pin_neuron_contract()
    result = eager_run(module, params)
    result["model_id"] = params["model_id"]
    module.emit(result)
    return 0 if result["ok"] else 1


def measured_rank(path: str, rank, cores, port, params, results) -> None:
    """One rank of a sharded run, started by run.py's own launcher, with the measuring around it: the row carries
    rank 0's figures, or those of the rank that failed first."""
    module = load_run_py(path)
    instrument(module, params, sharded=True)
    module.rank_main(rank, cores, port, params, results)


def instrument(module, params: dict, *, sharded: bool) -> None:
    """Wrap the recipe's own functions in ``module`` with the measuring of its library."""
    library = params.get("library", vocab.TRANSFORMERS)
    {vocab.TRANSFORMERS: _TransformersMeasuring, vocab.SENTENCE_TRANSFORMERS: _EncodeMeasuring,
     vocab.DIFFUSERS: _PipelineMeasuring}[library](module, params, sharded).install()


class _Measuring:
    """What every library's measuring shares: the recompile log, the exception a wrapped call raised, and the
    figures added to the recipe's result."""

    call = ""  # the recipe's function that runs the model once (generate, encode, draw)
    log_every_call = False  # the recompile log covers the cold call only (transformers: the warm one too)

    def __init__(self, module, params: dict, sharded: bool):
        self.module, self.params, self.sharded = module, params, sharded
        self.recompiles = RecompileLog()
        self.error = None
        self.eager: dict = {}
        self.perturbed: dict = {}  # the outputs with the middle block perturbed (verdict/perturb.py)
        self.calls = 0
        self.original = {name: getattr(module, name) for name in ("device_run", self.call)}

    def install(self) -> None:
        setattr(self.module, self.call, self.measured_call)
        self.module.device_run = self.device_run

    def measured_call(self, *args):
        self.calls += 1
        try:
            if self.calls == 1 or self.log_every_call:
                with self.recompiles:
                    return self.original[self.call](*args)
            return self.original[self.call](*args)
        except BaseException as exc:
            self.error = exc
            raise

    def device_run(self, params, rank=None):
        result = self.original["device_run"](params, rank)
        backend = params["compile_backend"]
        result.update(recompile_reasons=self.recompiles.reasons[-REASONS_KEPT:],
                      dynamo=dynamo_figures(self.recompiles, backend, self.error))
        if self.eager:
            result["eager"] = self.eager
        if result["ok"]:
            try:
                self.add_figures(result)
            except Exception as exc:  # noqa: BLE001 - a figure the run cannot give fails it, as inside run.py
                failure = self.module.failed(exc, "run", result["timings"])
                return {**failure, "recompile_reasons": result["recompile_reasons"], "dynamo": result["dynamo"],
                        **({"eager": self.eager} if self.eager else {})}
            result.update(compile_cache=compile_cache_counters(backend), retraced=dynamo_traced(),
                          torch=_version("torch"), **{params["library"].replace("-", "_"): _version(params["library"])})
            if self.perturbed:
                result["perturbed"] = self.perturbed
        return result

    def add_figures(self, result: dict) -> None:
        """The library's own figures of a run that succeeded."""

    def perturbed_run(self, root, parameters: int, call, within=None) -> None:
        """``call()`` once more, eagerly, with the middle block of ``root`` (or of ``within``, a part of it) perturbed
        (verdict/perturb.py): within the eager bounds, like every eager call on the device."""
        why = eager_not_tried(self.params, self.sharded, parameters)
        size = vocab.PERTURBATION_SIZE[self.params.get("library", vocab.TRANSFORMERS)]
        self.perturbed = {"not_measured": why} if why else perturbed_outputs(root, size, call, within)

    def eager_after_compiled(self, result: dict, parameters: int, call, figure, target, outputs) -> None:
        """After the compiled calls, the same call eagerly on the device twice (the second timed, as the compiled one
        is), its seconds as the library's column (``figure(seconds)`` -> (column, value)), then once more with
        ``target``'s block perturbed (``outputs()``: the outputs as run.py reports them). torch's ``force_eager``
        stance runs the compiled modules' own code. Never before compiling: an eager call first would build what a
        model builds lazily on its first call (z-image's rope table), and the compiled run would no longer be the one
        run.py makes alone."""
        import torch

        with torch.compiler.set_stance("force_eager"):
            out = eager_seconds(self.params, self.sharded, parameters, call, warm_up=True)
            why = eager_not_tried(self.params, self.sharded, parameters)
            size = vocab.PERTURBATION_SIZE[self.params["library"]]
            self.perturbed = {"not_measured": why} if why else outputs_with(target, size, outputs)
        if "seconds" in out:
            out.update([figure(out.pop("seconds"))])
        self.eager = result["eager"] = out


class _TransformersMeasuring(_Measuring):
    """generate(): a token clock on the warm call; after it, the same call eagerly for the speed-up."""

    call = "generate"
    log_every_call = True

    def __init__(self, module, params, sharded):
        super().__init__(module, params, sharded)
        self.last = None  # (model, inputs, kwargs, clock) of the last call

    def measured_call(self, model, inputs, kwargs):
        clock = TokenClock()
        cold = self.calls == 0  # the cold call as run.py makes it: no streamer in the way of its compile time
        output = super().measured_call(model, inputs, kwargs if cold else {**kwargs, "streamer": clock})
        if cold and dynamo_traced() is False:  # generate() compiled nothing that dynamo traced: it ran eagerly
            self.error = self.module.NotCompiled(model)
            raise self.error
        self.last = (model, inputs, kwargs, clock)
        return output

    def add_figures(self, result):
        model, inputs, kwargs, clock = self.last
        timings = result["timings"]
        timings.update(clock.figures())
        eager = self.eager_comparison(model, inputs, kwargs, result["tokens"], clock.figures(), timings["generate_s"])
        timings.update(eager.pop("compiled_best", {}))  # the compiled rate as measured beside the eager one
        result.update(eager=eager, declared_fullgraph=getattr(type(model), "_can_compile_fullgraph", None))
        generate = self.original["generate"]
        self.perturbed_run(model, sum(p.numel() for p in model.parameters()), lambda: {"tokens": new_tokens(
            self.module, model, generate(model, inputs, {**kwargs, "disable_compile": True}), inputs)},
            within=decoder_or_model(model))

    def eager_comparison(self, model, inputs, kwargs, compiled_tokens, compiled_figures, compiled_s):
        """The same generate() with the same static cache, eagerly, right after the warm compiled call."""
        generate = self.original["generate"]
        rounds = TIMING_ROUNDS if compiled_s < QUICK_CALL_S else 1
        eager_calls, compiled_calls = [], [compiled_figures]

        def call(**extra):
            clock = TokenClock()
            output = generate(model, inputs, {**kwargs, "streamer": clock, **extra})
            return clock.figures(), new_tokens(self.module, model, output, inputs)

        def alternate():
            for i in range(rounds):
                eager_calls.append(call(disable_compile=True))
                if i < rounds - 1:
                    compiled_calls.append(call()[0])

        out = eager_seconds(self.params, self.sharded, sum(p.numel() for p in model.parameters()), alternate)
        if out["device_eager"] == "ran":  # the decode rates from the token clock, as the compiled call's
            out.pop("seconds")

            def rate(figures):
                return figures.get("decode_tokens_per_s") or 0.0

            out.update(eager_decode_tokens_per_s=max(rate(f) for f, _ in eager_calls) or None,
                       eager_equals_compiled=eager_calls[0][1] == compiled_tokens,
                       compiled_best=max(compiled_calls, key=rate))
        return out


class _EncodeMeasuring(_Measuring):
    """sentence-transformers: sentences per second, warm; after it, the batch encoded eagerly."""

    call = "encode"

    def install(self):
        super().install()
        compile_transformer = self.module.compile_transformer

        def measured_compile(model, backend):
            self.model, self.target = model, perturbation_target(model)  # named before a wrapper renames it
            return compile_transformer(model, backend)

        self.module.compile_transformer = measured_compile

    def add_figures(self, result):
        sentences, encode, model = len(self.params["prompt"]), self.original["encode"], self.model
        result["figures"] = {"items_per_s": sentences / result["timings"]["generate_s"]}
        self.eager_after_compiled(result, sum(p.numel() for p in model.parameters()),
                                  lambda: encode(model, self.params),
                                  lambda seconds: ("eager_items_per_s", sentences / seconds), self.target,
                                  lambda: {"embeddings": encode(model, self.params).tolist()})


class _PipelineMeasuring(_Measuring):
    """diffusers: seconds per warm denoising step, from a clock on the final stage's main denoiser's calls and the
    start of decoding (the image's return, in pixel space); after it, one image drawn eagerly. A multi-stage
    pipeline's steps are its final stage's."""

    call = "draw"

    def install(self):
        super().install()
        compile_pipeline, self.clock = self.module.compile_pipeline, StepClock(self.params["device"])

        def measured_compile(pipe, backend):
            resolve = self.module.resolve
            main = self.module.denoiser_name(pipe)
            self.pipe, self.target = pipe, perturbation_target(resolve(pipe, main))
            names = compile_pipeline(pipe, backend)
            # resolved again after compiling: the main denoiser is now its compiled wrapper, so the hook stays outside
            # the compiled graph
            resolve(pipe, main).register_forward_pre_hook(self.clock.denoiser_called)
            path = self.module.image_decoder(pipe)
            if path is not None:  # a pixel-space pipeline has no decoder: the image is done when draw returns
                decoder = resolve(pipe, path)
                decode = decoder.decode

                def timed_decode(*args, **kwargs):
                    self.clock.decode_called()
                    return decode(*args, **kwargs)

                decoder.decode = timed_decode
            return names

        self.module.compile_pipeline = measured_compile

    def measured_call(self, pipe, params):
        self.clock.reset()
        image = super().measured_call(pipe, params)
        self.clock.decode_called()  # no decoder (pixel space): the last step ended when the image came back
        return image

    def add_figures(self, result):
        timings = result["timings"]
        timings.update(step_s=self.clock.step_s(self.params["steps"]), image_s=timings["generate_s"])
        # seconds per warm denoising step, steps per second, seconds for one warm image
        result["figures"] = {"step_s": timings["step_s"], "items_per_s": 1.0 / timings["step_s"],
                             "image_s": timings["image_s"]}
        draw, pipe = self.original["draw"], self.pipe
        self.eager_after_compiled(result, _pipeline_parameters(pipe), lambda: draw(pipe, self.params),
                                  lambda seconds: ("eager_image_s", seconds), self.target,
                                  lambda: self.module.image_payload(draw(pipe, self.params)))


def eager_run(module, params: dict) -> dict:
    """`--eager`: the recipe's model loaded on the device and run once with nothing compiled; ok, or the failure at
    its stage (load or run)."""
    device, library = params["device"], params.get("library", vocab.TRANSFORMERS)
    stage = "load"
    try:
        if library == vocab.TRANSFORMERS:
            model, tokenizer, inputs = module.load(params, device)
            kwargs = module.compiled_generation_kwargs(params, device, tokenizer)
            stage = "run"
            output = module.generate(model, inputs, {**kwargs, "disable_compile": True})
            tokens = new_tokens(module, model, output, inputs)
            return {"ok": True, "mode": "eager", "tokens": tokens, "timings": {},
                    "text": tokenizer.decode(tokens, skip_special_tokens=True)}
        model = module.load(params, device)
        stage = "run"
        (module.encode if library == vocab.SENTENCE_TRANSFORMERS else module.draw)(model, params)
        return {"ok": True, "mode": "eager", "timings": {}}
    except BaseException as exc:  # noqa: BLE001 - the failure is the answer
        return module.failed(exc, stage, {})


# ---- the instruments -----------------------------------------------------------------------------------------


def new_tokens(module, model, output, inputs):
    """The generated tokens as the run.py counts them (``new_tokens``: after a decoder prompt too, for speech)."""
    return module.new_tokens(model, output, inputs)


def eager_not_tried(params: dict, sharded: bool, parameters: int) -> str | None:
    """Why the eager run beside the compiled one is skipped (its bounds, stated in the card), or None."""
    if sharded:
        return f"sharded over {params['cores']} ranks: an eager pass would hold every rank's cores as long again"
    bound = settings.eager_max_parameters()
    if bound <= 0:
        return "eager runs were turned off for this run"
    if parameters > bound:
        return (f"{count_text(parameters)} parameters, above the {count_text(bound)} bound for an eager run on "
                "the device")
    return None


def count_text(n: float) -> str:
    """A parameter count people read: 135M, 2.7B, 3B."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def eager_seconds(params: dict, sharded: bool, parameters: int, call, warm_up: bool = False) -> dict:
    """Time ``call()`` run eagerly on the device (once more first with ``warm_up``), within the eager bounds:
    {"device_eager": "ran", "seconds": s}, or the reason it failed or was not tried (evidence, not the verdict)."""
    why = eager_not_tried(params, sharded, parameters)
    if why:
        return {"device_eager": f"not tried: {why}"}
    try:
        if warm_up:
            call()
        t0 = time.perf_counter()
        call()
        return {"device_eager": "ran", "seconds": time.perf_counter() - t0}
    except Exception as exc:  # noqa: BLE001 - the compiled run is the verdict; this is what it is measured against
        reason = str(exc).splitlines()[0][:200] if str(exc) else ""
        return {"device_eager": f"failed: {type(exc).__name__}: {reason}"}


def _pipeline_parameters(pipe) -> int:
    import torch

    return sum(p.numel() for m in pipe.components.values() if isinstance(m, torch.nn.Module) for p in m.parameters())


def _version(library: str) -> str | None:
    return getattr(sys.modules.get(library.replace("-", "_")), "__version__", None)  # the release the run imported


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
