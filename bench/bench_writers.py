"""Benchmark: several processes appending to one dataset folder at once, and a reader reading it meanwhile.

    .venv/bin/python bench/bench_writers.py [--writers 4] [--appends 250] [--runs 3]

Each writer appends its rows one per ``append_rows`` call (as separate sweeps, or a sweep and a contribute, would);
a reader loads the folder in a loop until they finish. Prints, per run, the rows kept of those written, the appends
that raised, the reader's loads and the files it skipped or failed on; then the kept / written ratio over all runs
and the cost of one append (the folder lock's included).
"""

import argparse
import multiprocessing
import tempfile
import time
import warnings

from neuronhelpers.store import dataset, schema


def row(writer: int, index: int) -> dict:
    return schema.new_row(model_id=f"org/writer{writer}-model{index}", task="text-generation", result="PASS",
                          verification="exact", backend="cpu", compiler="inductor", compiler_version="2.14.1",
                          library="transformers", library_version="5.23.0", neuron_cores=1, wall_s=1.0)


def writer(folder: str, number: int, appends: int, failures) -> None:
    for index in range(appends):
        try:
            dataset.append_rows(folder, [row(number, index)])
        except Exception as exc:  # noqa: BLE001 - counted: an append that raised is a row lost loudly
            failures.put(f"writer {number}: {type(exc).__name__}: {exc}"[:200])


def reader(folder: str, stop, report) -> None:
    loads = skipped = errors = 0
    while not stop.is_set():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                df = dataset.load_results(folder, validate=False)
            skipped += len(df.attrs["skipped"])
        except Exception:  # noqa: BLE001 - counted: a reader that fails on a file replaced under it
            errors += 1
        loads += 1
    report.put((loads, skipped, errors))


def one_run(writers: int, appends: int) -> dict:
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        failures, report, stop = context.Queue(), context.Queue(), context.Event()
        read = context.Process(target=reader, args=(folder, stop, report))
        read.start()
        t0 = time.perf_counter()
        procs = [context.Process(target=writer, args=(folder, n, appends, failures)) for n in range(writers)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        elapsed = time.perf_counter() - t0
        stop.set()
        loads, skipped, errors = report.get()
        read.join()
        raised = []
        while not failures.empty():
            raised.append(failures.get())
        kept = len(dataset.load_results(folder, validate=False))
    return {"written": writers * appends, "kept": kept, "raised": raised, "loads": loads, "skipped": skipped,
            "reader_errors": errors, "seconds": elapsed}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--appends", type=int, default=250)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    written = kept = 0
    seconds = 0.0
    for run in range(args.runs):
        result = one_run(args.writers, args.appends)
        written, kept, seconds = written + result["written"], kept + result["kept"], seconds + result["seconds"]
        print(f"run {run + 1}: {result['kept']} of {result['written']} rows kept "
              f"({result['written'] - result['kept']} lost; {len(result['raised'])} appends raised"
              f"{': ' + result['raised'][0] if result['raised'] else ''}); reader: {result['loads']} loads, "
              f"{result['skipped']} files skipped, {result['reader_errors']} errors; {result['seconds']:.1f} s")
    print(f"kept / written: {kept / written:.4f}")
    print(f"one append: {seconds / written * args.writers * 1000:.1f} ms (wall time per call in one writer)")


if __name__ == "__main__":
    main()
