"""Load time against graph size: does `nnef_torch.load` scale linearly up to 20,000 operations?

Usage: python bench/bench_load_scaling.py [--sizes 2500,5000,10000,20000] [--repeat 3] [--threads 1]

Each size is a generated residual CNN-like NNEF folder (bench/bench_parse.py's graph: variables, convolutions,
additions, activations, pools; small tensors, so that the time is the graph's, not the data's). Per size: our load
(parse, lower, generate the module, read the .dat files) and the Khronos tools' (`nnef.load_graph` + their PyTorch
interpreter's NNEFModule), best of `--repeat`, in operations per second. Linear scaling means a flat rate: the last
line gives the time per operation at the largest size over that at the smallest (1.00 = perfectly linear).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_parse import best_of, generate  # noqa: E402


def write_folder(folder: str, ops: int) -> int:
    """An NNEF folder of about `ops` operations; its operation count as the Khronos parser reads it."""
    import nnef

    from nnef_torch.format.tensor_file import encode
    text = generate(ops)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "graph.nnef"), "w") as handle:
        handle.write(text)
    graph = nnef.parse_string(text, lowered=[])
    rng = np.random.default_rng(0)
    for op in graph.operations:
        if op.name == "variable":
            path = os.path.join(folder, op.attribs["label"] + ".dat")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = rng.standard_normal(op.attribs["shape"]).astype(np.float32) * 0.1
            with open(path, "wb") as handle:
                handle.write(encode(data))
    return len(graph.operations)


def measure(sizes: list[int], repeat: int) -> list[tuple[int, float, float | None]]:
    """(operations, our seconds, Khronos seconds or None) per size."""
    import nnef_torch
    try:
        from nnef_tools.interpreter.pytorch import NNEFModule
    except ImportError:
        NNEFModule = None
    rows = []
    with tempfile.TemporaryDirectory() as work:
        write_folder(os.path.join(work, "warm"), 50)  # first-call costs (imports, the stdlib) are not counted
        nnef_torch.load(os.path.join(work, "warm"))
        for size in sizes:
            folder = os.path.join(work, str(size))
            count = write_folder(folder, size)
            ours = best_of(repeat, lambda folder=folder: nnef_torch.load(folder))
            theirs = best_of(repeat, lambda folder=folder: NNEFModule(model=folder)) if NNEFModule else None
            rows.append((count, ours, theirs))
    return rows


def report(rows: list[tuple[int, float, float | None]]) -> list[str]:
    lines = ["| operations | ours | ours ops/s | Khronos | Khronos ops/s | Khronos / ours |",
             "|---:|---:|---:|---:|---:|---:|"]
    for count, ours, theirs in rows:
        anchor = f"{theirs:.3f} s | {count / theirs:,.0f} | {theirs / ours:.2f}x" if theirs else "n/a | n/a | n/a"
        lines.append(f"| {count} | {ours:.3f} s | {count / ours:,.0f} | {anchor} |")
    (small, t_small, _), (large, t_large, _) = rows[0], rows[-1]
    lines.append(f"\ntime per operation at {large} ops / at {small} ops: {(t_large / large) / (t_small / small):.2f} "
                 "(1.00 = linear)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2500,5000,10000,20000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    rows = measure([int(size) for size in args.sizes.split(",")], args.repeat)
    print("\n".join(report(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
