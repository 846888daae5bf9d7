"""MXNet import benchmark (issue item 9): Gluon's ResNet-50 v1 symbol, imported with `nnef_torch.load`, against its
hand-written torch twin (forward) and against the floor of reading its `.params` bytes (load), in one run.

Usage: python bench/bench_mxnet.py [--smoke] [--batches 1,8] [--threads 1,default] [--reps 11] [--load-reps 5]
                                   [--warm-loads 5] [--size 224] [--steady-malloc] [--out FILE]

The model is bench/data/resnet50_v1-symbol.json.gz (Gluon's `resnet50_v1`, classes=1000, exported by MXNet:
bench/make_mxnet_resnet50.py) with a `.params` file (102.5 MB, MXNet's NDArray list, `arg:`/`aux:` names) written into
a temporary folder from seeded arrays (bench/mxnet_models.py, bench/mxnet_params.py); MXNet is not needed. The twin
is Gluon's ResNetV1 / BottleneckV1 written in torch (stride on the first 1x1 convolution, BatchNorm eps 1e-5), eval
mode, holding the same arrays by name. Before timing, its output and ours are compared on a seeded input at every
batch (max |ours - twin| / max |twin|; flagged † above 1e-4).

For each torch thread setting (`--threads`: 1 and torch's default, the same in every process):

- forward, batch 1 and 8 (no_grad, eval): ours (loaded with input_shapes at that batch) and the twin take turns
  (bench_import.interleaved: warm-up calls, then `--reps` samples each, the order rotating); median per call;
- load: rounds of three new processes, the order rotating: `nnef_torch.load(symbol, params=..., input_shapes=...)`
  in a process that has imported torch and nnef_torch but never loaded anything (cold: the importer, the op table
  and the front end are loaded by this call), then `--warm-loads` more loads in that process (warm: median; each
  after an untimed gc.collect(), which frees the module before, whose fx graph holds reference cycles); the
  floor, `open(params, 'rb').read()`, in a process of its own; and `numpy.fromfile(params, uint8)` in another. The
  page cache is warm for all (the file was just written, and every round reads it). Also measured in the load
  process: the peak RSS of the cold load over the file's size (bench/memory.py), and a breakdown of one more warm
  load by stage (the stages' functions wrapped with timers where the caller looks them up: symbol JSON, .params
  parse, conversion to NNEF IR, the document lowered to the flat IR (handed over in memory, no text), fx graph
  generation, module build, and the rest: slots, tensors, waiting on the reader).

Allocator noise: with glibc's default malloc, every batch-8 forward call of either module takes tens of thousands
of fresh pages from the kernel (the largest activations, ~26 MB, are mmapped and unmapped again, or the heap is
trimmed), and how many varies from call to call and with what ran before: ~40-60k minor page faults, ~10% of a
call. The notes give the page faults per call. `--steady-malloc` runs the script again with MALLOC_MMAP_THRESHOLD_
and MALLOC_TRIM_THRESHOLD_ set so that freed memory is kept (no page faults after warm-up): the compute alone. The
load processes keep glibc's defaults either way (under the variables, np.fromfile of the file took 25-120 ms instead
of 23-40 ms).

Ratios are column / ours, as bench/run.py prints them: above 1, ours is faster. Forward: twin / ours (goal 1.02x or
better). Load: floor / ours (below 1; 1 would be loading as fast as reading the file). The results (date, command,
machine and load average at start and end, versions, settings, table, notes) go to
bench/results/<date>-mxnet[-smoke][-steady-malloc].md and .json, or to --out FILE. --smoke: batch 1, one thread, one
sample of each (the test suite runs it, about 10-20 s; its numbers mean nothing). Nothing is asserted: this script
only measures.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]  # the sibling scripts as modules, and the nnef_torch of this checkout

import report  # noqa: E402
from load_stages import instrument  # noqa: E402
from report import Row  # noqa: E402

MODEL = "resnet50_v1"
COLUMNS = {"ours": "ours", "twin": "torch twin", "read": "read() floor", "fromfile": "np.fromfile floor"}
LEGEND = ("times are medians; (x) = that column's time / ours, so > 1 means ours is faster: forward against the "
          "hand-written twin (goal 1.02x or better), load against the floor of reading the .params bytes in a new "
          "process (below 1: 1 would be loading as fast as reading the file)")
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(16 << 30)}
AGREE = 1e-4  # relative difference from the twin above which our output is flagged
SEED = 0


@dataclass(frozen=True)
class Settings:
    reps: int  # forward samples of each (bench_import.interleaved)
    min_sample: float  # seconds a forward sample lasts at least
    budget: float  # seconds per forward measurement in which fast calls get extra samples
    load_reps: int  # rounds of load processes
    warm_loads: int  # warm loads per load process


SETTINGS = {
    "smoke": Settings(reps=1, min_sample=0.0, budget=0.0, load_reps=1, warm_loads=1),
    "full": Settings(reps=11, min_sample=0.0, budget=3.0, load_reps=5, warm_loads=5),
}


def say(text: str) -> None:
    print(text, flush=True)


def relative_difference(found: Any, expected: Any) -> float:
    return (found - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)


# -- load workers: one new process each, printing one JSON line --

STAGES = (  # (stage, module, attribute): the functions a load goes through, wrapped with timers by `instrument`
    ("symbol JSON", "nnef_torch.formats", "read_json"),
    ("symbol JSON", "nnef_torch.formats.nnvm.convert", "read_json"),
    ("symbol JSON", "nnef_torch.formats.nnvm.convert", "parse_graph"),
    (".params parse", "nnef_torch.formats.nnvm.convert", "load_parameters"),
    ("to NNEF IR", "nnef_torch.formats.nnvm.convert", "convert_graph"),
    ("NNEF document -> flat IR", "nnef_torch.importer.load", "read_document"),
    ("fx graph", "nnef_torch.importer.load", "GraphBuilder.build"),
    ("module build", "nnef_torch.importer.load", "NNEFModule.__init__"),
)


def worker(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {}
    if args.worker == "read":
        start = time.perf_counter()
        with open(args.params, "rb") as handle:
            data = handle.read()
        result["seconds"] = time.perf_counter() - start
        result["bytes"] = len(data)
    elif args.worker == "fromfile":
        import numpy as np
        start = time.perf_counter()
        data = np.fromfile(args.params, dtype=np.uint8)
        result["seconds"] = time.perf_counter() - start
        result["bytes"] = int(data.nbytes)
    else:
        import torch
        torch.set_num_threads(args.threads)
        warnings.filterwarnings("ignore")
        from memory import reset_peak, rss_status

        import nnef_torch

        def load() -> Any:
            return nnef_torch.load(args.symbol, params=args.params, input_shapes={"data": args.shape})
        result["hwm_reset"] = reset_peak()
        before = rss_status()["VmRSS"]
        start = time.perf_counter()
        module = load()
        result["seconds"] = time.perf_counter() - start
        result["peak_bytes"] = rss_status()["VmHWM"] - before
        del module
        warm = []
        for _ in range(args.warm_loads):
            gc.collect()  # the last module (the fx graph holds cycles) is freed before the next load, not during it
            start = time.perf_counter()
            module = load()
            warm.append(time.perf_counter() - start)
            del module
        result["warm_seconds"] = warm
        spent: dict[str, float] = {}
        result["not_instrumented"], _ = instrument(STAGES, spent)
        gc.collect()
        start = time.perf_counter()
        module = load()
        total = time.perf_counter() - start
        result["stages"] = {**spent, "rest": total - sum(spent.values())}
        result["stages_total"] = total
    print(json.dumps(result))


def run_worker(kind: str, args: argparse.Namespace, symbol: str, params: str, shape: list[int],
               threads: int) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--symbol", symbol, "--params", params,
           "--shape", ",".join(map(str, shape)), "--threads", str(threads), "--warm-loads", str(args.warm_loads)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, HERE, os.environ.get("PYTHONPATH")])))
    if args.steady_malloc:  # the load processes run with glibc's defaults, as a program loading a model would
        for name in STEADY_MALLOC:
            env.pop(name, None)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the measurements --

def bench_forward(symbol: str, params: str, twin: Any, args: argparse.Namespace, s: Settings,
                  notes: list[str]) -> list[Row]:
    import torch
    from bench_import import MINIMA, interleaved

    import nnef_torch
    rows = []
    modules, inputs, flagged = {}, {}, {}
    agreement = []
    for batch in args.batch_list:
        shape = [batch, 3, args.size, args.size]
        modules[batch] = nnef_torch.load(symbol, params=params, input_shapes={"data": shape}).eval()
        inputs[batch] = torch.randn(shape, generator=torch.Generator().manual_seed(100 + batch))
        with torch.no_grad():
            expected = twin(inputs[batch])
            difference = relative_difference(modules[batch](inputs[batch]), expected)
        agreement.append(f"batch {batch} {difference:.1e}" + (" DIFFERS" if difference > AGREE else ""))
        if difference > AGREE:
            flagged[batch] = f"its output differs from the twin's by {difference:.1e} (relative)"
    notes.append(f"{MODEL}: max |ours - twin| / max |twin| (eval, seeded input): {', '.join(agreement)}")
    say(f"[{MODEL}] ours and the twin agree: {', '.join(agreement)}")
    for threads in args.thread_list:
        torch.set_num_threads(threads)
        for batch in args.batch_list:
            module, x = modules[batch], inputs[batch]
            with torch.no_grad():
                seconds = interleaved({"ours": lambda module=module, x=x: module(x), "twin": lambda x=x: twin(x)},
                                      s.reps, s.min_sample, budget=s.budget)
                fastest = dict(MINIMA)
                faults = page_faults({"ours": lambda module=module, x=x: module(x), "twin": lambda x=x: twin(x)})
            row = Row(f"{MODEL} b{batch}", f"forward, {_threads(threads, args)}", seconds=dict(seconds))
            if batch in flagged:
                row.flagged["ours"] = flagged[batch]
            rows.append(row)
            notes.append(f"forward b{batch}, {_threads(threads, args)}: twin / ours of the fastest samples "
                         f"{fastest['twin'] / fastest['ours']:.3f}x (medians {seconds['twin'] / seconds['ours']:.3f}"
                         f"x); minor page faults per call (fresh pages the allocator took from the kernel), calls "
                         f"alternating: ours {faults['ours']:,}, twin {faults['twin']:,}")
            say(f"[{MODEL}] forward b{batch}, {_threads(threads, args)}: ours {seconds['ours'] * 1e3:.1f} ms, twin "
                f"{seconds['twin'] * 1e3:.1f} ms, twin / ours {seconds['twin'] / seconds['ours']:.3f}x")
    return rows


def page_faults(fns: dict[str, Callable[[], Any]], calls: int = 3) -> dict[str, int]:
    """The median minor page faults of one call of each function, the functions taking turns (getrusage; 0 where the
    platform has no such counter)."""
    try:
        import resource
    except ImportError:
        return dict.fromkeys(fns, 0)
    counts: dict[str, list[int]] = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            fn()
            counts[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return {name: int(statistics.median(values)) for name, values in counts.items()}


def bench_load(symbol: str, params: str, args: argparse.Namespace, s: Settings, notes: list[str]) -> list[Row]:
    size = os.path.getsize(params)
    shape = [1, 3, args.size, args.size]
    rows = []
    for threads in args.thread_list:
        kinds = ["ours", "read", "fromfile"]
        found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        for r in range(s.load_reps):
            for kind in kinds[r % 3:] + kinds[:r % 3]:
                found[kind].append(run_worker(kind, args, symbol, params, shape, threads))
        floors = {kind: statistics.median(item["seconds"] for item in found[kind]) for kind in ("read", "fromfile")}
        cold = statistics.median(item["seconds"] for item in found["ours"])
        warm = statistics.median(statistics.median(item["warm_seconds"]) for item in found["ours"])
        label = _threads(threads, args)
        rows.append(Row(MODEL, f"load cold, {label}", seconds={"ours": cold, **floors}))
        rows.append(Row(MODEL, f"load warm, {label}", seconds={"ours": warm, **floors}))
        stages: dict[str, list[float]] = {}
        for item in found["ours"]:
            for stage, seconds in item["stages"].items():
                stages.setdefault(stage, []).append(seconds)
        total = statistics.median(item["stages_total"] for item in found["ours"])
        parts = ", ".join(f"{stage} {statistics.median(values) * 1e3:.0f}" for stage, values in stages.items())
        missing = sorted({name for item in found["ours"] for name in item["not_instrumented"]})
        notes.append(f"load, {label}: ours / read() floor: cold {cold / floors['read']:.2f}x, warm "
                     f"{warm / floors['read']:.2f}x; ours / np.fromfile floor: cold {cold / floors['fromfile']:.2f}x, "
                     f"warm {warm / floors['fromfile']:.2f}x; cold - warm (first-call imports and caches) "
                     f"{(cold - warm) * 1e3:.0f} ms; floor throughput {size / floors['read'] / 1e9:.2f} GB/s "
                     f"({size / 1e6:.1f} MB)")
        notes.append(f"load breakdown, {label} (ms, median over processes, one warm load each, total "
                     f"{total * 1e3:.0f}): {parts}" + (f"; not found: {', '.join(missing)}" if missing else ""))
        peaks = [item["peak_bytes"] for item in found["ours"]]
        reset = all(item["hwm_reset"] for item in found["ours"])
        notes.append(f"load memory, {label}: peak RSS of the cold load over the .params size "
                     f"{statistics.median(peaks) / size:.2f}x" + ("" if reset else
                                                                  " (VmHWM not reset: includes the imports)"))
        say(f"[{MODEL}] load, {label}: ours cold {cold * 1e3:.0f} ms, warm {warm * 1e3:.0f} ms; floors read() "
            f"{floors['read'] * 1e3:.0f} ms, np.fromfile {floors['fromfile'] * 1e3:.0f} ms")
    return rows


def _threads(threads: int, args: argparse.Namespace) -> str:
    text = f"{threads} thread{'s' if threads != 1 else ''}"
    return text + " (default)" if threads == args.default_threads and threads != 1 else text


def default_out(mode: str, steady: bool) -> str:
    suffix = ("-mxnet" if mode == "full" else f"-mxnet-{mode}") + ("-steady-malloc" if steady else "")
    return os.path.join(HERE, "results", f"{time.strftime('%Y-%m-%d')}{suffix}.md")


def steady_malloc(argv: list[str] | None) -> None:
    """Run this script again with glibc's malloc told to keep freed memory (STEADY_MALLOC), unless it already is:
    glibc reads these variables only when a process starts."""
    if all(os.environ.get(name) == value for name, value in STEADY_MALLOC.items()):
        return
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)],
              {**os.environ, **STEADY_MALLOC})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="batch 1, one thread, one sample of each (for the tests)")
    parser.add_argument("--batches", help="comma-separated batch sizes of the forward pass (default 1,8)")
    parser.add_argument("--threads", help="comma-separated torch thread counts, or 'default' (torch's own; default "
                                          "1,default)")
    parser.add_argument("--reps", type=int, help="forward samples of each (default 11)")
    parser.add_argument("--load-reps", type=int, help="rounds of load processes (default 5)")
    parser.add_argument("--warm-loads", type=int, help="warm loads in each load process (default 5)")
    parser.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    parser.add_argument("--steady-malloc", action="store_true",
                        help="glibc malloc keeps freed memory (MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_="
                             "16 GiB): no page faults per forward call, less noise at batch 8")
    parser.add_argument("--out", help="results file (markdown; the JSON goes next to it); default "
                                      "bench/results/<date>-mxnet[-smoke].md")
    parser.add_argument("--worker", choices=("ours", "read", "fromfile"), help=argparse.SUPPRESS)
    parser.add_argument("--symbol", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.mode = "smoke" if args.smoke else "full"
    if args.worker:
        args.shape = [int(extent) for extent in args.shape.split(",")]
        args.threads = int(args.threads)
        return args
    if args.steady_malloc:
        steady_malloc(argv)  # before anything is imported: this process is replaced
    import torch
    args.default_threads = torch.get_num_threads()
    batches = args.batches or ("1" if args.smoke else "1,8")
    threads = args.threads or ("1" if args.smoke else "1,default")
    args.batch_list = [int(b) for b in batches.split(",") if b.strip()]
    args.thread_list = list(dict.fromkeys(args.default_threads if t.strip() == "default" else int(t)
                                          for t in threads.split(",") if t.strip()))
    defaults = SETTINGS[args.mode]
    args.settings = Settings(reps=args.reps or defaults.reps, min_sample=defaults.min_sample, budget=defaults.budget,
                             load_reps=args.load_reps or defaults.load_reps,
                             warm_loads=args.warm_loads or defaults.warm_loads)
    args.warm_loads = args.settings.warm_loads
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    import torch
    warnings.filterwarnings("ignore")
    s = args.settings
    command = shlex.join(["python", "bench/bench_mxnet.py", *(sys.argv[1:] if argv is None else argv)])
    run = report.Run(started=report.now(), command=command, machine=report.machine(),
                     versions=report.versions(REPO), columns=COLUMNS, legend=LEGEND,
                     settings={"mode": args.mode, "model": f"{MODEL} (Gluon model zoo, classes=1000), input "
                                                           f"3x{args.size}x{args.size}",
                               "batches": ",".join(map(str, args.batch_list)),
                               "torch threads": ", ".join(_threads(t, args) for t in args.thread_list),
                               "malloc": "steady: " + ", ".join(f"{k}={v}" for k, v in STEADY_MALLOC.items())
                               if args.steady_malloc else "glibc's defaults",
                               **vars(s)})
    say(f"MXNet import benchmark {run.started}, {args.mode}, {MODEL}, batches {run.settings['batches']}, torch "
        f"threads {run.settings['torch threads']}, {run.machine['cores']} cores, load average "
        f"{run.machine['load average at start (1, 5, 15 min)']}")
    started = time.perf_counter()
    work = tempfile.mkdtemp(prefix="nnef_bench_mxnet_")
    try:
        import mxnet_models
        begun = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            symbol, params, twin = mxnet_models.write_resnet50(work, seed=SEED)
        say(f"[{MODEL}] symbol and seeded .params ({os.path.getsize(params) / 1e6:.1f} MB) written, twin built, in "
            f"{time.perf_counter() - begun:.1f} s")
        torch.set_num_threads(args.default_threads)
        run.rows += bench_forward(symbol, params, twin, args, s, run.notes)
        run.rows += bench_load(symbol, params, args, s, run.notes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run.finished, run.load_end = report.now(), report.load_average()
    busy = report.busy_warning()
    if busy:
        run.notes.insert(0, busy)
    run.notes.append(f"total {time.perf_counter() - started:.0f} s")
    md_path, json_path = report.write(run, args.out or default_out(args.mode, args.steady_malloc))
    say("\n" + LEGEND)
    say(report.table(run.rows, COLUMNS))
    for text in report.failures(run.rows, COLUMNS) + run.notes:
        say(f"  {text}")
    say(f"load average at start {run.machine['load average at start (1, 5, 15 min)']}, at end {run.load_end}; "
        f"results in {md_path} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
