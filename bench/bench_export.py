"""Export benchmark (issue 4): `nnef_torch.save` against torch_to_nnef and torch.onnx + the Khronos ONNX->NNEF
converter, on the plain-torch models of bench/export_models.py, in one run.

Usage: python bench/bench_export.py [--quick] [--models mlp,resnet18,...] [--repeat N] [--threads N] [--keep DIR]

Each tool turns the same eval-mode module and batch-1 input into an NNEF model folder under a temporary folder:

- ours:      nnef_torch.save(module, folder, (x,)), run as its two steps nnef_torch.export(...).save(folder) to
             time them apart (torch.export + ATen export rules; then the atomic, fsync'ed write)
- t2n:       torch_to_nnef.export_model_to_nnef(module, (x,), folder, KhronosNNEF(check_io=False),
             compression_level=None)   (the Khronos target; TractNNEF downloads a tract binary)
- onnx+nt:   torch.onnx.export(dynamo=False, opset 14) to a .onnx file, then nnef_tools.convert (onnx -> nnef,
             --fold-constants), in process. The dynamo exporter's opset-18 graphs are refused by nnef_tools 1.0.11
             (ReduceMean with an `axes` input, LayerNormalization, Gelu), so the TorchScript exporter is used.

Per model and tool: wall seconds (min over --repeat runs, tools interleaved; each tool is warmed on a tiny model
first, every run gets a freshly built module (torch_to_nnef leaves its own tensor subclass in the module it
exports), and `os.sync()` runs before every timed export so one tool's dirty pages do not land on the next one's
fsync), MB written (the NNEF folder; for onnx+nt also the intermediate .onnx), MB/s (NNEF MB / s), and whether the
output parses: `nnef.load_graph(folder, lowered=<fragments it defines>)` + `nnef.infer_shapes`, with its operation
and variable counts so that an empty or truncated graph shows (bench/bench_export_ops.py compares those counts,
with ours also exported with fold_batch_norm=True as torch.onnx folds batch norms). Ratios are tool seconds / ours
(> 1: ours is faster).
Target (issue 4): ours >= 3x faster than torch_to_nnef. No timing is asserted anywhere; this script only prints.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]  # export_models, and the nnef_torch of this checkout (installed or not)

from report import version  # noqa: E402  (bench/ is on sys.path from here)

TOOLS = ("ours", "t2n", "onnx+nt")
TARGET_T2N = 3.0
ONNX_OPSET = 14


# -- the three exporters: each writes an NNEF folder at `out` and returns {phase: seconds} for its sub-steps --

def export_ours(module, inputs, out: str, work: str) -> dict[str, float]:
    """What nnef_torch.save(module, out, inputs) does for a torch module, timed in its two steps."""
    import nnef_torch
    start = time.perf_counter()
    model = nnef_torch.export(module, inputs)
    middle = time.perf_counter()
    model.save(out)
    return {"export": middle - start, "write": time.perf_counter() - middle}


def export_t2n(module, inputs, out: str, work: str) -> dict[str, float]:
    from torch_to_nnef import KhronosNNEF, export_model_to_nnef
    target = KhronosNNEF(KhronosNNEF.OFFICIAL_SUPPORTED_VERSIONS[0], check_io=False)
    written = export_model_to_nnef(module, inputs, out, target, input_names=["x"], output_names=["y"],
                                   compression_level=None, log_level=logging.ERROR)
    if os.path.abspath(written) != os.path.abspath(out):
        os.rename(written, out)
    return {}


def export_onnx_nnef_tools(module, inputs, out: str, work: str) -> dict[str, float]:
    import torch
    from nnef_tools import convert
    onnx_path = os.path.join(work, "model.onnx")
    start = time.perf_counter()
    torch.onnx.export(module, inputs, onnx_path, dynamo=False, opset_version=ONNX_OPSET, input_names=["x"],
                      output_names=["y"])
    middle = time.perf_counter()
    args = argparse.Namespace(
        input_model=onnx_path, output_model=out, input_format="onnx", output_format="nnef", input_shapes=None,
        io_transpose=None, fold_constants=True, optimize=False, dequantize=False, custom_converters=None,
        custom_shapes=None, custom_fragments=None, custom_optimizers=None, mirror_unsupported=False,
        generate_custom_fragments=False, keep_io_names=False, decompose=None, input_names=None, output_names=None,
        static_only=False, tensor_mapping=None, annotate_shapes=False, compress=None)
    messages = io.StringIO()
    with contextlib.redirect_stdout(messages):
        status = convert.main(args)
    if status != 0 or not os.path.isdir(out):
        lines = [line for line in messages.getvalue().splitlines() if line.strip()]
        raise RuntimeError(f"nnef_tools.convert returned {status}: " + " | ".join(dict.fromkeys(lines[-5:])))
    return {"onnx": middle - start, "convert": time.perf_counter() - middle, "onnx_mb": _megabytes(onnx_path)}


def export_native(module, inputs, out: str, work: str) -> dict[str, float]:
    """torch's own way to a graph-and-weights file: torch.export.export, then torch.export.save (a .pt2 archive).
    Not an NNEF export: the baseline that bench/run.py compares the NNEF exporters with (`native` is not in TOOLS)."""
    import torch
    start = time.perf_counter()
    program = torch.export.export(module, tuple(inputs))
    middle = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    torch.export.save(program, os.path.join(out, "model.pt2"))
    return {"export": middle - start, "write": time.perf_counter() - middle}


EXPORTERS: dict[str, Callable[..., dict[str, float]]] = {
    "ours": export_ours, "t2n": export_t2n, "onnx+nt": export_onnx_nnef_tools, "native": export_native}


# -- measuring one export --

@dataclass
class Result:
    seconds: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=dict)
    mb: float = 0.0
    parse: str = ""
    error: str = ""

    @property
    def best(self) -> float:
        return min(self.seconds) if self.seconds else float("nan")


def _megabytes(path: str) -> float:
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names) / 1e6


def parse_check(folder: str) -> str:
    """'ok (N ops, V variables)' when the Khronos parser and shape inference accept the folder, else the error."""
    import nnef
    text = open(os.path.join(folder, "graph.nnef"), encoding="utf-8").read()
    fragments = re.findall(r"^\s*fragment\s+(\w+)", text, flags=re.M)
    try:
        graph = nnef.load_graph(folder, lowered=fragments)
        nnef.infer_shapes(graph)
    except Exception as error:  # noqa: BLE001 - the parser's verdict is the result
        message = str(error).strip().replace(os.path.join(folder, ""), "")  # the temporary path says nothing
        return "FAIL: " + (message.splitlines() or [type(error).__name__])[0][:200]
    variables = sum(1 for op in graph.operations if op.name == "variable")
    return f"ok ({len(graph.operations)} ops, {variables} variables)"


def run_once(tool: str, module, inputs, work: str, result: Result, check: bool, keep: str | None,
             name: str) -> None:
    out = os.path.join(work, f"{tool.replace('+', '_')}.nnef")
    scratch = tempfile.mkdtemp(dir=work)
    os.sync()
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            phases = EXPORTERS[tool](module, inputs, out, scratch)
        result.seconds.append(time.perf_counter() - start)
        for key, value in phases.items():
            result.phases.setdefault(key, []).append(value)
        result.mb = _megabytes(out)
        if check:
            result.parse = parse_check(out)
        if keep:
            shutil.copytree(out, os.path.join(keep, name, tool.replace("+", "_")), dirs_exist_ok=True)
    except Exception as error:  # noqa: BLE001 - one tool failing on one model is a result, not the end
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        result.error = f"{type(error).__name__}: {first[:200]}"
        if os.environ.get("BENCH_TRACEBACK"):
            traceback.print_exc()
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def warm_up(work: str) -> None:
    """Import every tool and run it once on a tiny model, so that first-call costs stay out of the timings."""
    import torch
    for tool in TOOLS:
        tiny = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 6 * 6, 2)).eval()
        result = Result()
        with contextlib.redirect_stderr(io.StringIO()):
            run_once(tool, tiny, (torch.randn(1, 3, 8, 8),), work, result, False, None, "warm")
        if result.error:
            print(f"warm-up of {tool} failed: {result.error}")


def bench_model(name: str, args, work: str) -> dict[str, Result]:
    import export_models
    results = {tool: Result() for tool in TOOLS}
    for repeat in range(args.repeat):
        for tool in TOOLS:
            result = results[tool]
            if result.error:
                continue
            # a fresh module for every run: torch_to_nnef leaves its NamedTensor subclass in the parameters of the
            # module it exports, which slows every later torch.export of that module down by ~1.5x
            module, inputs = export_models.build(name)
            with contextlib.redirect_stderr(io.StringIO()):  # torch.onnx and torch_to_nnef talk a lot
                run_once(tool, module, inputs, work, result, repeat == 0, args.keep, name)
    return results


# -- report --

def _fmt(seconds: float) -> str:
    return f"{seconds:7.2f}" if seconds == seconds else "      -"


def print_model(name: str, results: dict[str, Result], params_mb: float) -> None:
    ours = results["ours"].best
    print(f"\n[{name}] parameters + buffers {params_mb:.1f} MB")
    print(f"  {'tool':8} {'seconds':>8} {'MB':>7} {'MB/s':>7} {'x ours':>7}  parses (Khronos nnef)")
    for tool in TOOLS:
        result = results[tool]
        if result.error:
            print(f"  {tool:8} FAILED  {result.error}")
            continue
        ratio = result.best / ours if ours == ours else float("nan")
        spread = f" (runs {', '.join(f'{s:.2f}' for s in result.seconds)})" if len(result.seconds) > 1 else ""
        phases = "; ".join(f"{key} {min(values):.2f}" + (" MB" if key.endswith("_mb") else " s")
                           for key, values in result.phases.items())
        print(f"  {tool:8} {_fmt(result.best)} {result.mb:7.1f} {result.mb / result.best:7.1f} {ratio:7.2f}  "
              f"{result.parse}{spread}" + (f"  [{phases}]" if phases else ""))


def print_summary(table: dict[str, dict[str, Result]]) -> None:
    print("\nsummary: seconds (min over runs) and ratios tool / ours (> 1: ours is faster)")
    print(f"  {'model':12} {'ours':>7} {'t2n':>7} {'onnx+nt':>7} {'t2n/ours':>9} {'onnx+nt/ours':>13}  parses "
          "ours/t2n/onnx+nt")
    ratios = []
    for name, results in table.items():
        best = {tool: (results[tool].best if not results[tool].error else float("nan")) for tool in TOOLS}
        t2n = best["t2n"] / best["ours"]
        onnx = best["onnx+nt"] / best["ours"]
        if t2n == t2n:
            ratios.append(t2n)
        parses = "/".join("FAILED" if r.error else ("ok" if r.parse.startswith("ok") else "NO") for r in
                          results.values())
        print(f"  {name:12} {_fmt(best['ours'])} {_fmt(best['t2n'])} {_fmt(best['onnx+nt'])} {t2n:9.2f} "
              f"{onnx:13.2f}  {parses}")
    if ratios:
        geo = statistics.geometric_mean(ratios)
        verdict = "meets" if min(ratios) >= TARGET_T2N else "does NOT meet"
        print(f"  t2n/ours: geometric mean {geo:.2f}, min {min(ratios):.2f} over {len(ratios)} models: "
              f"{verdict} the >= {TARGET_T2N:.0f}x target on every model")


def main() -> None:
    import export_models
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(export_models.QUICK)}")
    parser.add_argument("--models", default=",".join(export_models.MODELS),
                        help=f"comma-separated subset of {','.join(export_models.MODELS)}")
    parser.add_argument("--repeat", type=int, default=1, help="timed exports per tool and model (min is reported)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: cores)")
    parser.add_argument("--keep", help="copy every tool's output folder under this folder")
    args = parser.parse_args()
    names = list(export_models.QUICK) if args.quick else [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - set(export_models.MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; choose from {', '.join(export_models.MODELS)}")

    import torch
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch_to_nnef").setLevel(logging.ERROR)
    print(f"export benchmark, {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), nnef_torch {version('nnef-torch')}, "
          f"torch_to_nnef {version('torch_to_nnef')}, nnef_tools {version('nnef_tools')}, onnx {version('onnx')}, "
          f"nnef {version('nnef')}, Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("NOTE: wall-clock timings on a shared machine are noisy (other processes, page cache, disk flushes: ours "
          "fsyncs every file, the others do not); compare ratios, rerun with --repeat 3 before trusting a number.")
    started = time.perf_counter()
    table: dict[str, dict[str, Result]] = {}
    with tempfile.TemporaryDirectory(prefix="nnef_export_bench_", dir="/tmp") as work:
        warm_up(work)
        for name in names:
            try:
                results = bench_model(name, args, work)
            except Exception:  # noqa: BLE001 - report and go on with the other models
                print(f"[{name}] benchmark FAILED:\n{traceback.format_exc()}")
                continue
            table[name] = results
            module, _ = export_models.build(name)
            print_model(name, results, export_models.parameter_bytes(module) / 1e6)
            sys.stdout.flush()
    print_summary(table)
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
