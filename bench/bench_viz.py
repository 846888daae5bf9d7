"""Drawing benchmark (issue 16): how long a 20,000-operation graph takes to become a scene, DOT text, a terminal tree
and a RelayViz document, against the Khronos parser reading the same text (the anchor), in one run.

Usage: python bench/bench_viz.py [--operations 20000] [--reps 3] [--smoke] [--out FILE]

The graph is generated: a chain of residual units (conv 3x3 with bias, relu, add of the unit's input), every
fourth unit a fragment invocation the document defines (so the clusters and `--collapse-fragments` have work), one
input of [1, 8, 16, 16]. Stages, each the median of `--reps` runs in this process: NNEF text -> IR (our reader,
`read_graph`), IR -> scene, scene -> DOT (with clusters, and collapsed), scene -> tree, IR -> RelayViz, and the
neighbourhood of the middle tensor at radius 3 (`--around`). The anchor is `nnef.parse_string` of the same text
(the Khronos parser, C++, without shape inference). Graphviz's layout (`dot -Tsvg`) of 20,000 operations takes
minutes and is not part of this benchmark; `--around` is how to look at a graph that large.

Ratios are anchor / stage, as bench/run.py prints them: above 1, ours is faster. Nothing is asserted. The results
go to bench/results/<date>-viz[-smoke].md or --out FILE.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]  # the nnef_torch of this checkout (installed or not)

FRAGMENT = """fragment unit( input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> )
    -> ( output: tensor<scalar> )
{
    c = conv(input, filter, bias, padding = [(1, 1), (1, 1)]);
    r = relu(c);
    output = add(r, input);
}
"""


def generated_text(operations: int) -> str:
    """A graph of about `operations` operations (conv, relu, add per unit; variables not counted)."""
    units = max(1, operations // 3)
    lines = ["version 1.0;", "extension KHR_enable_fragment_definitions;", "", FRAGMENT,
             "graph G( x ) -> ( y )", "{", "    x = external(shape = [1, 8, 16, 16]);"]
    previous = "x"
    for unit in range(units):
        lines.append(f"    f{unit} = variable(shape = [8, 8, 3, 3], label = 'u{unit}/filter');")
        lines.append(f"    b{unit} = variable(shape = [1, 8], label = 'u{unit}/bias');")
        out = "y" if unit == units - 1 else f"t{unit}"
        if unit % 4 == 0:
            lines.append(f"    {out} = unit({previous}, f{unit}, b{unit});")
        else:
            lines.append(f"    c{unit} = conv({previous}, f{unit}, b{unit}, padding = [(1, 1), (1, 1)]);")
            lines.append(f"    r{unit} = relu(c{unit});")
            lines.append(f"    {out} = add(r{unit}, {previous});")
        previous = out
    lines.append("}")
    return "\n".join(lines) + "\n"


def timed(function, reps: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="300 operations, one run (the test suite's setting)")
    parser.add_argument("--out", help="the .md file to write (default bench/results/<date>-viz.md)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.operations, args.reps = 300, 1

    import nnef

    from nnef_torch.reader import read_graph
    from nnef_torch.viz.dot import dot_text
    from nnef_torch.viz.from_ir import scene_of
    from nnef_torch.viz.relayviz_write import relayviz_document
    from nnef_torch.viz.select import neighbourhood
    from nnef_torch.viz.tree import tree_text

    text = generated_text(args.operations)
    load_start = os.getloadavg()[0]
    anchor, _ = timed(lambda: nnef.parse_string(text), args.reps)
    read, graph = timed(lambda: read_graph(text), args.reps)
    ops = sum(1 for op in graph.operations if op.name not in ("external", "variable"))
    scene_time, scene = timed(lambda: scene_of(graph), args.reps)
    collapsed_time, collapsed = timed(lambda: scene_of(graph, collapse=True), args.reps)
    dot_time, dot = timed(lambda: dot_text(scene), args.reps)
    collapsed_dot, _ = timed(lambda: dot_text(collapsed), args.reps)
    tree_time, tree = timed(lambda: tree_text(scene), args.reps)
    relayviz_time, _ = timed(lambda: relayviz_document(graph), args.reps)
    middle = next(graph.operations[len(graph.operations) // 2].output_refs()).name
    around_time, part = timed(lambda: dot_text(neighbourhood(scene, middle, 3)), args.reps)
    rows = [("Khronos nnef.parse_string (anchor)", anchor), ("NNEF text -> IR (read_graph)", read),
            ("IR -> scene", scene_time), ("IR -> scene, fragments collapsed", collapsed_time),
            ("scene -> DOT", dot_time), ("collapsed scene -> DOT", collapsed_dot), ("scene -> tree", tree_time),
            ("IR -> RelayViz document", relayviz_time), (f"--around {middle} --radius 3 -> DOT", around_time),
            ("file -> DOT in all (read + scene + DOT)", read + scene_time + dot_time)]
    lines = [f"# Drawing benchmark, {datetime.date.today()}", "",
             f"command: `python bench/bench_viz.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
             f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end  ",
             f"graph: {ops} operations, {len(graph.signature.variables)} variables, text {len(text):,} bytes; DOT "
             f"{len(dot):,} bytes; tree {len(tree.splitlines()):,} lines; neighbourhood {len(part.splitlines())} "
             "DOT lines", "", "| stage | median s | anchor / stage |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.3f} | {anchor / seconds:.2f}x |" for name, seconds in rows]
    report = "\n".join(lines) + "\n"
    print(report)
    out = args.out or os.path.join(HERE, "results",
                                   f"{datetime.date.today()}-viz{'-smoke' if args.smoke else ''}.md")
    if not args.smoke or args.out:
        with open(out, "w") as handle:
            handle.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
