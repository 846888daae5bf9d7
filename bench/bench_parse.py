"""Parse and lower a generated 20,000-operation graph; compare with the Khronos parser on the same text.

Usage: python bench/bench_parse.py [--ops N] [--repeat R]
Prints seconds per run (best of R) and the ratio ours / Khronos. Both sides parse, check and infer shapes.
"""
from __future__ import annotations

import argparse
import time


def generate(ops: int) -> str:
    """A flat residual CNN-like graph with about `ops` operations (variables, convs, adds, activations, pools)."""
    lines = ["version 1.0;", "", "graph G( input ) -> ( output )", "{",
             "    input = external(shape = [1, 16, 32, 32]);"]
    count, x, i = 1, "input", 0
    while count < ops:
        lines += [f"    w{i} = variable(shape = [16, 16, 3, 3], label = 'block{i}/filter');",
                  f"    b{i} = variable(shape = [1, 16], label = 'block{i}/bias');",
                  f"    c{i} = conv({x}, w{i}, b{i}, padding = [(1, 1), (1, 1)], stride = [1, 1]);",
                  f"    r{i} = relu(c{i});",
                  f"    s{i} = add(r{i}, {x});",
                  f"    m{i} = max_pool(s{i}, size = [1, 1, 3, 3], stride = [1, 1, 1, 1], "
                  "padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'ignore');",
                  f"    y{i} = mul(m{i}, 0.5);"]
        x, count, i = f"y{i}", count + 7, i + 1
    lines += [f"    output = softmax({x}, axes = [1]);", "}", ""]
    return "\n".join(lines)


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from nnef_torch.format.parser import parse_document
    from nnef_torch.ir.lower import lower
    from nnef_torch.stdlib import standard_fragments

    standard_fragments()  # the stdlib is parsed once per process; do not count it
    text = generate(args.ops)

    def ours():
        return lower(parse_document(text), text=text)

    graph = ours()
    print(f"graph: {len(graph.operations)} operations, {len(text) / 1e6:.2f} MB of text")
    ours_parse = best_of(args.repeat, lambda: parse_document(text))
    ours_total = best_of(args.repeat, ours)
    print(f"nnef_torch parse only        {ours_parse:8.3f} s")
    print(f"nnef_torch parse+check+lower {ours_total:8.3f} s  ({len(graph.operations) / ours_total:,.0f} ops/s)")
    try:
        import nnef
    except ImportError:
        print("Khronos `nnef` package not installed: no anchor (pip install nnef)")
        return

    def khronos():
        g = nnef.parse_string(text, lowered=[])
        nnef.infer_shapes(g)
        return g

    theirs = khronos()
    assert len(theirs.operations) == len(graph.operations)
    k_parse = best_of(args.repeat, lambda: nnef.parse_string(text, lowered=[]))
    k_total = best_of(args.repeat, khronos)
    print(f"Khronos nnef parse (C++)     {k_parse:8.3f} s")
    print(f"Khronos nnef parse+shapes    {k_total:8.3f} s")
    print(f"ratio ours/Khronos: parse+lower {ours_total / k_total:.2f}x, parse alone {ours_parse / k_parse:.2f}x")


if __name__ == "__main__":
    main()
