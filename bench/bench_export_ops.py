"""Graph size of our exports against the Khronos tools (issue 27, "graph quality"): operations and variables as the
Khronos parser reads each exported folder, per model.

Usage: python bench/bench_export_ops.py [--quick] [--models mlp,resnet18,...] [--zoo] [--t2n] [--verbose]

Each model (bench/export_models.py; with --zoo also every model of the test zoo, tests/exporter/zoo.py, eval mode)
is exported in eval mode by

- ours:      nnef_torch.export(module, inputs), as `nnef_torch.save` writes it;
- ours+fold: the same with fold_batch_norm=True: each inference batch norm folded into the convolution or linear
             layer before it, as torch.onnx does in eval mode (the like-for-like comparison with onnx+nt);
- onnx+nt:   torch.onnx.export(dynamo=False, opset 14) + nnef_tools.convert --fold-constants
             (bench/bench_export.py `export_onnx_nnef_tools`);
- t2n:       torch_to_nnef's KhronosNNEF target (with --t2n; slow on the larger models).

Each folder is read with `nnef.load_graph(folder, lowered=<fragments it defines>)` + `nnef.infer_shapes`; the
counts are its operations (variables and externals included) and its variables. `var-shape ops` counts, in ours,
the shape operations (unsqueeze, squeeze, reshape, transpose) applied to a variable: the declaration could have
the shape instead (nnef_torch.exporter.variable_shapes). The ratio is ours+fold / onnx+nt (<= 1: ours is no
larger). With --verbose, each model's operation kinds whose counts differ between ours+fold and onnx+nt are listed.
Nothing is asserted; this script only counts.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]  # export_models, bench_export, tests.exporter.zoo and this checkout's nnef_torch

SHAPE_OPS = ("unsqueeze", "squeeze", "reshape", "transpose")
TOOLS = ("ours", "ours+fold", "onnx+nt", "t2n")


def export_ours(module, inputs, out: str, work: str, fold: bool = False) -> None:
    import nnef_torch
    nnef_torch.export(module, inputs, fold_batch_norm=fold).save(out)


def exporters(with_t2n: bool) -> dict[str, Callable[..., object]]:
    import bench_export
    tools: dict[str, Callable[..., object]] = {
        "ours": export_ours,
        "ours+fold": lambda module, inputs, out, work: export_ours(module, inputs, out, work, fold=True),
        "onnx+nt": bench_export.export_onnx_nnef_tools}
    if with_t2n:
        tools["t2n"] = bench_export.export_t2n
    return tools


def khronos_ops(folder: str) -> tuple[Counter, int]:
    """The operation kinds of the folder's graph as the Khronos tools read it, and how many shape operations
    take a variable."""
    import nnef
    text = open(os.path.join(folder, "graph.nnef"), encoding="utf-8").read()
    graph = nnef.load_graph(folder, lowered=re.findall(r"^\s*fragment\s+(\w+)", text, flags=re.M))
    nnef.infer_shapes(graph)
    variables = {op.outputs["output"] for op in graph.operations if op.name == "variable"}
    on_variables = sum(1 for op in graph.operations
                       if op.name in SHAPE_OPS and op.inputs.get("input") in variables)
    return Counter(op.name for op in graph.operations), on_variables


def count_model(build: Callable[[], tuple], tools: dict[str, Callable[..., object]], work: str
                ) -> dict[str, tuple[Counter, int] | str]:
    """Per tool: (operation kinds, shape ops on variables), or the error that stopped it."""
    found: dict[str, tuple[Counter, int] | str] = {}
    for tool, export in tools.items():
        module, inputs = build()
        out = tempfile.mkdtemp(dir=work)
        folder = os.path.join(out, "model.nnef")
        try:
            with warnings.catch_warnings(), _silenced():
                warnings.simplefilter("ignore")
                export(module, tuple(inputs), folder, out)
                found[tool] = khronos_ops(folder)
        except Exception as error:  # noqa: BLE001 - one tool failing on one model is a result
            found[tool] = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:120]}"
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
    return found


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """stdout and stderr to /dev/null, at the file-descriptor level too: torch.onnx and nnef_tools print from C++
    and to the streams they captured at import (graph dumps, conversion warnings)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _cell(result: tuple[Counter, int] | str | None) -> str:
    if result is None:
        return f"{'-':>10}"
    if isinstance(result, str):
        return f"{'FAILED':>10}"
    ops = result[0]
    return f"{sum(ops.values()):>5} ({ops['variable']:>3})"


def print_row(name: str, found: dict[str, tuple[Counter, int] | str], tools: list[str], verbose: bool) -> None:
    fold, onnx = found.get("ours+fold"), found.get("onnx+nt")
    ratio = "-"
    if isinstance(fold, tuple) and isinstance(onnx, tuple):
        ratio = f"{sum(fold[0].values()) / sum(onnx[0].values()):.2f}"
    ours = found.get("ours")
    shape_ops = str(ours[1]) if isinstance(ours, tuple) else "-"
    print(f"  {name:22} " + " ".join(f"{_cell(found.get(tool)):>12}" for tool in tools)
          + f" {ratio:>10} {shape_ops:>14}")
    for tool in tools:
        if isinstance(found.get(tool), str):
            print(f"      {tool} failed: {found[tool]}")
    if verbose and isinstance(fold, tuple) and isinstance(onnx, tuple):
        kinds = sorted(set(fold[0]) | set(onnx[0]))
        diff = [f"{kind} {fold[0][kind]}/{onnx[0][kind]}" for kind in kinds if fold[0][kind] != onnx[0][kind]]
        if diff:
            print(f"      ours+fold/onnx+nt differ: {', '.join(diff)}")


def main() -> None:
    import export_models
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(export_models.QUICK)}")
    parser.add_argument("--models", default=",".join(export_models.MODELS),
                        help=f"comma-separated subset of {','.join(export_models.MODELS)} ('' for none)")
    parser.add_argument("--zoo", action="store_true", help="also every model of tests/exporter/zoo.py (eval mode)")
    parser.add_argument("--t2n", action="store_true", help="also torch_to_nnef (KhronosNNEF target)")
    parser.add_argument("--verbose", action="store_true", help="list the operation kinds that differ")
    args = parser.parse_args()
    names = list(export_models.QUICK) if args.quick else [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - set(export_models.MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; choose from {', '.join(export_models.MODELS)}")
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    warnings.filterwarnings("ignore")
    builds: dict[str, Callable[[], tuple]] = {name: (lambda n=name: export_models.build(n)) for name in names}
    if args.zoo:
        from tests.exporter.zoo import ZOO, make
        builds.update({f"zoo/{name}": (lambda n=name: make(n, "eval")) for name in ZOO})
    tools = exporters(args.t2n)
    print("operations (variables) as the Khronos parser reads each export; ratio = ours+fold / onnx+nt; "
          "var-shape ops = shape operations on a variable in ours")
    print(f"  {'model':22} " + " ".join(f"{tool:>12}" for tool in tools) + f" {'ratio':>10} {'var-shape ops':>14}")
    with tempfile.TemporaryDirectory(prefix="nnef_export_ops_", dir="/tmp") as work:
        for name, build in builds.items():
            try:
                found = count_model(build, tools, work)
            except Exception:  # noqa: BLE001 - report and go on with the other models
                print(f"  {name}: FAILED\n{traceback.format_exc()}")
                continue
            print_row(name, found, list(tools), args.verbose)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
