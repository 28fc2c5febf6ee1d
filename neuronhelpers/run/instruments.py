"""The instruments the measuring (run/measure.py) puts around a recipe's steps: clocks on a generate() and on a
pipeline's denoising steps, dynamo's recompile log and figures, the compile cache's counters. They run inside the
run's own process and import nothing of the package; the measuring's version covers this file too.
"""

from __future__ import annotations

import re
import time


class TokenClock:
    """A generate() streamer that timestamps each new token: time to first token and decode rate."""

    def __init__(self):
        self.start = time.perf_counter()
        self.stamps: list[float] = []
        self.prompt_seen = False

    def put(self, value):
        if not self.prompt_seen:  # generate() first hands the streamer the prompt
            self.prompt_seen = True
            return
        self.stamps.append(time.perf_counter())

    def end(self):
        pass

    def figures(self) -> dict:
        out = {}
        if self.stamps:
            out["ttft_s"] = self.stamps[0] - self.start
            if len(self.stamps) > 1:
                out["decode_tokens_per_s"] = (len(self.stamps) - 1) / (self.stamps[-1] - self.stamps[0])
        return out


class StepClock:
    """Stamps each denoiser call and the start of decoding: seconds per denoising step, whatever the pipeline."""

    def __init__(self, device):
        self.device = str(device)
        self.reset()

    def reset(self):
        self.calls, self.decoded = [], None

    def denoiser_called(self, module, args):
        self.calls.append(time.perf_counter())

    def decode_called(self):
        if self.decoded is None:
            synchronize(self.device)  # the steps queued on an accelerator have finished
            self.decoded = time.perf_counter()

    def step_s(self, steps):
        return (self.decoded - self.calls[0]) / steps


class RecompileLog:
    """Collects dynamo's recompilation reasons (the guard that failed), so a run that hits the recompile limit can
    say which guard kept failing; and what the compiled graphs take that is not static (an int input made symbolic, a
    tensor input of symbolic size, a data-dependent value inside), read from each graph's code as dynamo traced it:
    Trainium's static shapes refuse those, and none means every shape was static. (dynamo names a symbol for many a
    value it then leaves out of the graph, so its symbol log alone would overstate it.)"""

    LOGGER = "torch._dynamo.guards.__recompiles"  # torch's "recompiles" log artifact
    GRAPH_LOGGER = "torch._dynamo.output_graph.__graph_code"  # the "graph_code" artifact: each traced graph's code
    _INPUTS = re.compile(r"def forward\(self, (.*?)\):")
    _INPUT = re.compile(r'(\w+): "([^"]*)"')
    _SIZE_SYMBOL = re.compile(r"\b[su]\d+\b")
    _UNBACKED = re.compile(r'"Sym\((u\d+)\)"')

    def __init__(self):
        import logging

        self.reasons: list[str] = []
        self.symbols: list[str] = []
        self.handler = logging.Handler()
        self.handler.emit = lambda record: self.reasons.append(record.getMessage()[:1500])  # the guard comes first
        # a filter, not a handler: it reads each graph and drops the record, so the graph is not printed (torch's
        # logging set-up, redone at the first compile, would restore a removed handler)
        self.graph_filter = logging.Filter()
        self.graph_filter.filter = lambda record: self.symbols.extend(self.not_static(record.getMessage())) or False

    @classmethod
    def not_static(cls, graph_code: str) -> list[str]:
        """What one traced graph takes that is not static, in words: its symbolic inputs, then its data-dependent
        values."""
        found = []
        inputs = cls._INPUTS.search(graph_code)
        for name, annotation in cls._INPUT.findall(inputs.group(1) if inputs else ""):
            what = "a symbolic int" if annotation.startswith("Sym(") else "a tensor of symbolic size" if \
                cls._SIZE_SYMBOL.search(annotation.split("]")[0]) else None
            if what:
                found.append(f"{name.removeprefix('L_').strip('_')} ({what})")
        found += [f"{symbol} (a data-dependent value)" for symbol in dict.fromkeys(cls._UNBACKED.findall(graph_code))]
        return found

    def __enter__(self):
        import logging

        import torch

        torch._logging.set_logs(recompiles=True, graph_code=True)
        logging.getLogger(self.LOGGER).addHandler(self.handler)
        logging.getLogger(self.GRAPH_LOGGER).addFilter(self.graph_filter)  # a model's graph: thousands of lines
        return self

    def __exit__(self, *exc):
        import logging

        logging.getLogger(self.LOGGER).removeHandler(self.handler)
        logging.getLogger(self.GRAPH_LOGGER).removeFilter(self.graph_filter)
        return False


def dynamo_traced() -> bool | None:
    """Did dynamo trace Python code in this process (False when it compiled nothing)?"""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"]) > 0
    except Exception:  # noqa: BLE001 - a torch without these counters
        return None


SYMBOLS_KEPT = 20


def dynamo_figures(recompiles: RecompileLog, compile_backend: str, exc: BaseException | None = None) -> dict:
    """What the compiler saw, from torch's own counters: graph breaks (0 under fullgraph, where a break is an error:
    then 1), unique graphs compiled, recompilations, the symbols its graphs were traced with (each once); on neuron,
    the ops torch-neuronx ran on the CPU instead."""
    try:
        import torch
        from torch._dynamo.utils import counters

        breaks = sum(int(n) for n in counters["graph_break"].values())
        if exc is not None and isinstance(exc, getattr(torch._dynamo.exc, "Unsupported", ())):
            breaks = max(breaks, 1)  # fullgraph=True raises at the first break instead of counting it
        figures = {"graph_breaks": breaks, "unique_graphs": int(counters["stats"]["unique_graphs"]),
                   "recompiles": len(recompiles.reasons),
                   "symbolic_shapes": list(dict.fromkeys(recompiles.symbols))[:SYMBOLS_KEPT]}
    except Exception:  # noqa: BLE001 - a torch without these counters: the row leaves them empty
        return {}
    if compile_backend == "neuron":
        try:
            import torch_neuronx

            figures["fallback_ops"] = sorted(str(op) for op in torch_neuronx.get_fallback_ops())
        except Exception:  # noqa: BLE001 - a release without get_fallback_ops: not recorded rather than guessed
            pass
    return figures


def compile_cache_counters(compile_backend: str) -> dict | None:
    """This process's compile-cache hits and misses from the compiler's own counters: inductor's FX-graph cache, or
    torch-neuronx's persistent NEFF cache (counted when TORCH_NEURONX_METRICS_ENABLED=1, which run.py sets on neuron).
    None where no counter can be read: the harness then compares the cache folder before and after."""
    try:
        if compile_backend == "neuron":
            from torch_neuronx import metrics

            hits = metrics.get_counter_value("CompilationCache.PersistentHits")
            misses = metrics.get_counter_value("CompilationCache.PersistentMisses")
            return None if hits is None and misses is None else {"hits": int(hits or 0), "misses": int(misses or 0)}
        if compile_backend != "inductor":
            return None
        from torch._dynamo.utils import counters

        inductor = counters["inductor"]
        return {"hits": int(inductor["fxgraph_cache_hit"]), "misses": int(inductor["fxgraph_cache_miss"])}
    except Exception:  # noqa: BLE001 - another compiler, or a release without these counters
        return None


def synchronize(device: str) -> None:
    import torch

    if device.startswith("neuron"):
        torch.neuron.synchronize()
    elif device.startswith("cuda"):
        torch.cuda.synchronize()
