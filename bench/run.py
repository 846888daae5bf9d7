"""The benchmark entry point: import (load), forward, training step and export of the same models, for nnef_torch,
native torch and the anchors, measured in one run and printed as one table of times and ratios.

Usage: python bench/run.py [--quick | --smoke] [--models mlp,lstm,transformer,resnet50] [--threads 1] [--out FILE]

Each model of bench/import_models.py is written as an NNEF folder (batch 1) together with its hand-written torch
twin, which computes the same function from the same weights. Per model:

| metric     | ours                    | native torch                      | anchors                              |
| ---------- | ----------------------- | --------------------------------- | ------------------------------------ |
| load       | nnef_torch.load(folder) | torch.export.load(.pt2).module()  | Khronos NNEFModule(folder); tract    |
|            |                         |                                   | nnef().load(folder).into_runnable()  |
| load cold  | the same, each in a new process, its import included (bench/load_stages.py)                       |
| forward b1 | the loaded module       | the twin                          | NNEFModule(x)[0]; tract run([x])     |
| forward b8 | the same at batch 8     | the twin                          | NNEFModule(x)[0]                     |
| train step | loaded module, SGD, b8  | the twin, the same step           | (none: the anchors do not train)     |
| export     | nnef_torch.save(twin)   | torch.export.export + .save(.pt2) | torch_to_nnef (KhronosNNEF target);  |
|            |                         |                                   | torch.onnx (opset 14) + nnef_tools   |

Native torch for load and export is torch's own graph-plus-weights format (torch.export / .pt2): the same work
(trace a module into a graph and write it with its weights; read both back into a runnable module). Forward and
training step compare with the twin, i.e. what a user would have written by hand.

Ratios are column / ours: above 1, ours is faster. Times are medians over interleaved rounds (the tools take turns,
the order rotating every round), after warm-up calls; load is timed in this process with a warm page cache (see
bench/bench_import.py for fresh-process load times and load memory, bench/bench_export.py for six more export
models). "load cold" loads in a new process per sample, the tool's import included (torch's is not); the notes give
our warm load by stage (parse, lower, generate, rest) and the cold load over the read floor (reading every .dat).
Before timing, every runtime's batch-1 output is compared with the twin's, and the first export of each
NNEF exporter is checked with the Khronos parser and shape inference; both are reported under Notes.

--quick: mlp, lstm, transformer, few rounds (a few minutes on 2 cores). --smoke: one tiny MLP, one round each (the
test suite runs it; its numbers mean nothing). The results go to bench/results/<date>[-quick|-smoke].md and .json,
or to --out FILE (and FILE with .json). Nothing is asserted: this script only measures and prints.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]  # the sibling scripts as modules, and the nnef_torch of this checkout

import report  # noqa: E402
from report import Row  # noqa: E402
from runners import RUNTIMES, failure, native_program_path, rounds  # noqa: E402

MODELS = ("mlp", "lstm", "transformer", "resnet50")
QUICK_MODELS = ("mlp", "lstm", "transformer")
SMOKE_MODEL = "tiny"  # an MLP 32-64-10, only for --smoke
EXPORT_TOOLS = ("ours", "native", "t2n", "onnx+nt")
TRAIN_BATCH = {"resnet50": 1}  # default 8; ResNet-50 at batch 8 takes ~8 s a step on one thread
AGREE = 1e-4  # relative difference from the twin above which a runtime's output is flagged


@dataclass(frozen=True)
class Settings:
    reps: int  # rounds of forward / train-step samples (bench_import.interleaved)
    train_reps: int
    load_reps: int  # rounds of load calls
    export_reps: int  # rounds of exports (each on a fresh copy of the twin)
    min_sample: float  # seconds a forward/train sample lasts at least (fast calls repeat inside it)
    budget: float  # seconds per forward measurement in which fast calls get extra rounds
    cold_rounds: int = 3  # rounds of cold loads (a new process each: bench/load_stages.py)
    scaling_sizes: tuple[int, ...] = ()  # graph sizes of the load-scaling note (bench/bench_load_scaling.py)


SETTINGS = {
    "smoke": Settings(reps=1, train_reps=1, load_reps=1, export_reps=1, min_sample=0.0, budget=0.0, cold_rounds=1),
    "quick": Settings(reps=7, train_reps=5, load_reps=7, export_reps=3, min_sample=0.02, budget=0.5, cold_rounds=3,
                      scaling_sizes=(1000, 4000)),
    "full": Settings(reps=11, train_reps=7, load_reps=7, export_reps=3, min_sample=0.05, budget=2.0, cold_rounds=5,
                     scaling_sizes=(2500, 5000, 10000, 20000)),
}


def say(text: str) -> None:
    print(text, flush=True)


def write_model(name: str, folder: str):
    """The NNEF folder and the twin of `name`, and a batch-1 and a training-batch input."""
    import import_models
    import torch
    if name == SMOKE_MODEL:
        twin = import_models.write_mlp(folder, sizes=(32, 64, 10))
        shape: tuple[int, ...] = (32,)
    else:
        twin = import_models.write_model(name, folder)
        shape = import_models.INPUT_SHAPES[name]
    generator = torch.Generator().manual_seed(1)
    x1 = torch.randn((1,) + shape, generator=generator)
    xt = torch.randn((TRAIN_BATCH.get(name, 8),) + shape, generator=generator)
    return twin.eval(), x1, xt


def relative_difference(found: Any, expected: Any) -> float:
    return (found - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)


def at_batch(folder: str, loaded: Any, x: Any) -> Any:
    """`loaded` if it runs a batch of x's size as loaded, else the model loaded again with x's shape."""
    import torch

    import nnef_torch
    try:
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):  # fx prints the failing generated line
            if loaded(x).shape[0] == x.shape[0]:
                return loaded
    except Exception:  # noqa: BLE001 - a shape baked into the graph: load it again at this batch
        pass
    return nnef_torch.load(folder, input_shapes={"input": list(x.shape)})


def bench_load_forward(name: str, folder: str, twin: Any, x1: Any, s: Settings, notes: list[str]) -> list[Row]:
    import torch
    load_row, forward_row = Row(name, "load"), Row(name, "forward b1")
    loaded: dict[str, Any] = {}

    def loader(runtime: str):
        def call() -> None:
            loaded[runtime] = RUNTIMES[runtime].load(folder)
        return call
    load_row.seconds, load_row.failures = rounds({r: loader(r) for r in RUNTIMES}, s.load_reps)
    forward_row.failures = {runtime: report.LOAD_FAILED for runtime in load_row.failures}

    with torch.no_grad():
        expected = twin(x1)
        forwards = {"native": lambda: twin(x1)}
        agreement = []
        for runtime in ("ours", "khronos", "tract"):
            if runtime not in loaded:
                continue
            handle, forward = loaded[runtime], RUNTIMES[runtime].forward
            try:
                difference = relative_difference(forward(handle, x1), expected)
            except Exception as error:  # noqa: BLE001
                forward_row.failures[runtime] = failure(error)
                continue
            agreement.append(f"{runtime} {difference:.1e}" + (" DIFFERS" if difference > AGREE else ""))
            if difference > AGREE:
                forward_row.flagged[runtime] = f"its output differs from the twin's by {difference:.1e} (relative)"
            forwards[runtime] = lambda handle=handle, forward=forward: forward(handle, x1)
        notes.append(f"{name}: max |out - twin| / max |twin| at batch 1: {', '.join(agreement)}")
        from bench_import import interleaved
        forward_row.seconds = interleaved(forwards, s.reps, s.min_sample, budget=s.budget)
    say(f"[{name}] load and forward b1 measured")
    return [load_row, forward_row, bench_forward_b8(name, folder, twin, loaded, x1, s)]


def bench_forward_b8(name: str, folder: str, twin: Any, loaded: dict[str, Any], x1: Any, s: Settings) -> Row:
    """Forward at batch 8: ours (loaded again at batch 8 where its graph fixes batch 1), the twin, the Khronos
    interpreter (tract's model is built for batch 1 as declared)."""
    import torch
    from bench_import import interleaved
    row = Row(name, "forward b8")
    x8 = torch.randn((8,) + tuple(x1.shape[1:]), generator=torch.Generator().manual_seed(8))
    forwards = {"native": lambda: twin(x8)}
    with torch.no_grad():
        expected = twin(x8)
        for runtime in ("ours", "khronos"):
            if runtime not in loaded:
                continue
            handle = at_batch(folder, loaded[runtime], x8) if runtime == "ours" else loaded[runtime]
            forward = RUNTIMES[runtime].forward
            try:
                difference = relative_difference(forward(handle, x8), expected)
            except Exception as error:  # noqa: BLE001
                row.failures[runtime] = failure(error)
                continue
            if difference > AGREE:
                row.flagged[runtime] = f"its output differs from the twin's by {difference:.1e} (relative)"
            forwards[runtime] = lambda handle=handle, forward=forward: forward(handle, x8)
        row.seconds = interleaved(forwards, s.reps, s.min_sample, budget=s.budget)
    say(f"[{name}] forward b8 measured")
    return row


def bench_cold_load(name: str, folder: str, s: Settings, notes: list[str]) -> Row:
    """Load in a new process per sample (the tool's import included), and ours by stage (warm)."""
    import torch
    from load_stages import cold_loads, stage_breakdown
    row = Row(name, "load cold")
    seconds, failed = cold_loads(folder, s.cold_rounds, torch.get_num_threads())
    floor = seconds.pop("floor", None)
    row.seconds = seconds
    row.failures = {runtime: reason for runtime, reason in failed.items() if runtime != "floor"}
    stages = stage_breakdown(folder)
    parts = ", ".join(f"{stage} {value * 1e3:.1f}" for stage, value in stages.items())
    cold = seconds.get("ours")
    notes.append(f"{name}: load stages, warm (ms): {parts}; cold load / read floor: "
                 + (f"{cold / floor:.2f}x ({cold * 1e3:.0f} ms / {floor * 1e3:.1f} ms)" if cold and floor else "n/a"))
    say(f"[{name}] cold load and stages measured")
    return row


def bench_train(name: str, folder: str, twin: Any, xt: Any, s: Settings) -> Row:
    import torch
    from bench_import import interleaved, train_step_fn

    import nnef_torch
    row = Row(name, "train step", note=f"batch {xt.shape[0]}")
    ours = at_batch(folder, nnef_torch.load(folder), xt)
    with torch.no_grad():
        target = torch.randn(twin(xt).shape, generator=torch.Generator().manual_seed(4))
    steps = {"ours": train_step_fn(ours, xt, target), "native": train_step_fn(copy.deepcopy(twin), xt, target)}
    row.seconds = interleaved(steps, s.train_reps, s.min_sample, warmup=2, budget=s.budget)
    say(f"[{name}] train step (batch {xt.shape[0]}) measured")
    return row


def bench_export(name: str, twin: Any, x1: Any, s: Settings, work: str, notes: list[str]) -> Row:
    import bench_export as exporters
    row = Row(name, "export")
    results = {tool: exporters.Result() for tool in EXPORT_TOOLS}
    check = importlib.util.find_spec("nnef") is not None  # the Khronos parser, to check the exported folders
    for r in range(s.export_reps):
        for tool in EXPORT_TOOLS[r % len(EXPORT_TOOLS):] + EXPORT_TOOLS[:r % len(EXPORT_TOOLS)]:
            if results[tool].error:
                continue
            module = copy.deepcopy(twin)  # torch_to_nnef leaves its tensor subclass in the module it exports
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                exporters.run_once(tool, module, (x1,), work, results[tool], check and r == 0 and tool != "native",
                                   None, name)
    for tool, result in results.items():
        if result.error:
            row.failures[tool] = result.error
            continue
        row.seconds[tool] = sorted(result.seconds)[len(result.seconds) // 2]
        if result.parse and not result.parse.startswith("ok"):
            row.flagged[tool] = f"the exported folder does not pass the Khronos parser: {result.parse}"
    parses = [f"{tool} {results[tool].parse}" for tool in EXPORT_TOOLS if tool != "native" and results[tool].parse]
    if parses:
        notes.append(f"{name}: exported folders in the Khronos parser + infer_shapes: {'; '.join(parses)}")
    phases = results["ours"].phases
    if phases:
        notes.append(f"{name}: ours export = nnef_torch.export {min(phases['export']) * 1e3:.0f} ms + save "
                     f"{min(phases['write']) * 1e3:.0f} ms (fastest run)")
    say(f"[{name}] export measured")
    return row


def warm_exporters(work: str) -> None:
    """First-call costs (imports, torch.export's caches) of every exporter, on a tiny model, before any timing."""
    import bench_export as exporters
    import torch
    with contextlib.redirect_stdout(io.StringIO()):
        exporters.warm_up(work)
    tiny = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    exporters.run_once("native", tiny, (torch.randn(1, 4),), work, exporters.Result(), False, None, "warm")


def bench_model(name: str, s: Settings, work: str, notes: list[str]) -> list[Row]:
    folder = os.path.join(work, name)
    started = time.perf_counter()
    twin, x1, xt = write_model(name, folder)
    say(f"[{name}] written in {time.perf_counter() - started:.1f} s")
    rows: list[Row] = []
    export_row = bench_export(name, twin, x1, s, work, notes)
    try:  # the .pt2 that native load reads
        import torch
        torch.export.save(torch.export.export(copy.deepcopy(twin), (x1,)), native_program_path(folder))
    except Exception as error:  # noqa: BLE001
        notes.append(f"{name}: no .pt2 for native load: {failure(error)}")
    rows += bench_load_forward(name, folder, twin, x1, s, notes)
    rows.append(bench_cold_load(name, folder, s, notes))
    rows.append(bench_train(name, folder, twin, xt, s))
    rows.append(export_row)
    return rows


def load_scaling(sizes: tuple[int, ...]) -> str:
    """Our load rate (operations per second) on generated graphs up to 20,000 operations (bench_load_scaling.py)."""
    import bench_load_scaling
    rows = bench_load_scaling.measure(list(sizes), repeat=2)
    rates = ", ".join(f"{count} ops {count / ours:,.0f} ops/s" + (f" (Khronos {count / theirs:,.0f})" if theirs else "")
                      for count, ours, theirs in rows)
    (small, t_small, _), (large, t_large, _) = rows[0], rows[-1]
    say("[scaling] load rate measured")
    return (f"load scaling (generated CNN-like graphs): {rates}; time per operation at {large} / at {small} "
            f"operations: {(t_large / large) / (t_small / small):.2f} (1.00 = linear)")


def default_out(mode: str) -> str:
    suffix = "" if mode == "full" else f"-{mode}"
    return os.path.join(HERE, "results", f"{time.strftime('%Y-%m-%d')}{suffix}.md")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help=f"models {','.join(QUICK_MODELS)}, few rounds")
    mode.add_argument("--smoke", action="store_true", help="one tiny MLP, one round each (for the tests)")
    parser.add_argument("--models", help=f"comma-separated subset of {','.join(MODELS)} (default: all; --quick: "
                                         f"{','.join(QUICK_MODELS)})")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every tool (default 1: the most "
                                                               "stable on a shared machine)")
    parser.add_argument("--out", help="results file (markdown; the JSON goes next to it); default "
                                      "bench/results/<date>[-quick|-smoke].md")
    args = parser.parse_args(argv)
    args.mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.smoke:
        args.names = [SMOKE_MODEL]
    else:
        args.names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else \
            list(QUICK_MODELS if args.quick else MODELS)
        unknown = sorted(set(args.names) - set(MODELS))
        if unknown:
            parser.error(f"unknown models {unknown}; choose from {', '.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch_to_nnef").setLevel(logging.ERROR)
    s = SETTINGS[args.mode]
    run = report.Run(started=report.now(), command=shlex.join(["python", "bench/run.py", *sys.argv[1:]]
                                                               if argv is None else ["python", "bench/run.py", *argv]),
                     machine=report.machine(), versions=report.versions(REPO),
                     settings={"mode": args.mode, "models": ",".join(args.names), "torch threads": args.threads,
                               **{key: value for key, value in vars(s).items()}})
    say(f"benchmark {run.started}, {args.mode}, models {', '.join(args.names)}, torch threads {args.threads}, "
        f"{run.machine['cores']} cores, load average {run.machine['load average at start (1, 5, 15 min)']}")
    started = time.perf_counter()
    work = tempfile.mkdtemp(prefix="nnef_bench_run_")
    try:
        warm_exporters(work)
        for name in args.names:
            try:
                run.rows += bench_model(name, s, work, run.notes)
            except Exception as error:  # noqa: BLE001 - report and go on with the other models
                run.notes.append(f"{name}: benchmark FAILED: {failure(error)}")
                say(f"[{name}] FAILED: {failure(error)}")
        if s.scaling_sizes:
            run.notes.append(load_scaling(s.scaling_sizes))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    run.finished, run.load_end = report.now(), report.load_average()
    busy = report.busy_warning()
    if busy:
        run.notes.insert(0, busy)
    run.notes.append(f"total {time.perf_counter() - started:.0f} s")
    md_path, json_path = report.write(run, args.out or default_out(args.mode))
    say("\n" + report.RATIO_LEGEND)
    say(report.table(run.rows))
    for text in report.failures(run.rows) + run.notes:
        say(f"  {text}")
    say(f"load average at end {run.load_end}; results in {md_path} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
