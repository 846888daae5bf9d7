"""Export time with 0, 1, 3 and 6 symbolic extents (`dynamic_shapes=`), against torch.export alone, in one run.

Usage: python bench/bench_symbolic_export.py [--reps 5] [--out FILE]

The module takes three inputs [A, B, 16], [C, D, 16], [E, F, 16]: a linear layer, heads split and merged, a slice
from the end and a sum each, so that every symbol reaches reshapes and slices. With k symbols, the first k of
A, C, E, B, D, F are `torch.export.Dim`s. For each k: the first export in a fresh process (`first`, what a user
waits for), the median of `--reps` exports in one process (`median`), and torch.export.export with the same
dynamic_shapes (`torch.export`, the tracing alone, which every export pays). Ratios: median / torch.export, and
median / median at 0 symbols (the cost of the symbols). Nothing is asserted. The results go to
bench/results/<date>-symbolic-export.md or --out FILE.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the nnef_torch of this checkout (installed or not)

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.export import Dim  # noqa: E402

COUNTS = (0, 1, 3, 6)
AXES = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]  # (input, axis) made symbolic, in order
SHAPES = [(2, 8, 16), (3, 6, 16), (4, 5, 16)]


class Three(nn.Module):
    def __init__(self):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))

    def forward(self, x, y, z):
        outputs = []
        for linear, value in zip(self.linears, (x, y, z)):
            a, b, _ = value.shape
            h = linear(value).view(a, b, 4, 4).transpose(1, 2).reshape(a, 4, b * 4)
            outputs.append(torch.relu(h[:, :, 1:]).sum(-1))
        return tuple(outputs)


def spec(count: int) -> tuple[dict[int, Dim], ...]:
    dims: list[dict[int, Dim]] = [{} for _ in SHAPES]
    for index, (which, axis) in enumerate(AXES[:count]):
        dims[which][axis] = Dim(f"s{index}", min=2, max=1024)
    return tuple(dims)


def inputs() -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(shape) for shape in SHAPES)


def one_export(count: int) -> float:
    import nnef_torch
    module = Three().eval()
    start = time.perf_counter()
    nnef_torch.export(module, inputs(), dynamic_shapes=spec(count) if count else None)
    return time.perf_counter() - start


def torch_export(count: int) -> float:
    module = Three().eval()
    start = time.perf_counter()
    torch.export.export(module, inputs(), dynamic_shapes=spec(count) if count else None, strict=False)
    return time.perf_counter() - start


def first_in_fresh_process(count: int) -> float:
    code = (f"import sys; sys.path[:0] = {[HERE, os.path.dirname(HERE)]!r}; import warnings; "
            "warnings.simplefilter('ignore'); import bench_symbolic_export as b; "
            f"print(b.one_export({count}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    rows = []
    for count in COUNTS:
        print(f"{count} symbol(s): first export in a fresh process ...", file=sys.stderr, flush=True)
        first = first_in_fresh_process(count)
        one_export(count)  # warm-up in this process
        ours = statistics.median(one_export(count) for _ in range(args.reps))
        native = statistics.median(torch_export(count) for _ in range(args.reps))
        rows.append({"symbols": count, "first": first, "median": ours, "torch.export": native})
    base = rows[0]["median"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [f"# Export time by number of symbols ({datetime.date.today()}, torch {torch.__version__}, "
             f"load average {load:.2f}, {args.reps} reps)", "",
             "| symbols | first (fresh process) | median | torch.export | median / torch.export | "
             "median / median at 0 |", "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| {row['symbols']} | {row['first']:.3f} s | {row['median']:.3f} s | "
                     f"{row['torch.export']:.3f} s | {row['median'] / row['torch.export']:.2f} | "
                     f"{row['median'] / base:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.out or os.path.join(HERE, "results", f"{datetime.date.today()}-symbolic-export.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as file:
        file.write(text)
    print(json.dumps(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
