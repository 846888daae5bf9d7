"""`viz`: draw a model (any format the reader opens, a RelayViz JSON file, or a traced `package.module:factory`)
as RelayViz JSON, DOT, SVG/PNG/PDF, an HTML viewer or a terminal tree."""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

from nnef_torch.cli.common import (
    MODEL_HELP,
    CLIError,
    add_source_options,
    add_verb,
    input_shapes,
    named_shape,
    shape,
    source_options,
)
from nnef_torch.cli.export import INPUT_DTYPES, build_module, example_inputs


def input_shape(text: str) -> tuple[str | None, list[int]]:
    """argparse type of 'NAME=D0,D1,...' (a model's input) or 'D0,D1,...' (a factory's positional input)."""
    if "=" in text:
        return named_shape(text)
    return None, shape(text)


def _is_factory(source: str) -> bool:
    module, sep, attribute = source.partition(":")
    return bool(sep and module and attribute) and not os.path.exists(source) and "/" not in module \
        and os.sep not in module


def _source(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """What to draw and the options that open it."""
    named = {name: dims for name, dims in args.input_shape if name is not None}
    positional = [dims for name, dims in args.input_shape if name is None]
    if _is_factory(args.source):
        if named or not positional:
            raise CLIError(f"drawing the factory '{args.source}' traces it: give the shape of each positional input "
                           "of forward as --input-shape D0,D1,...")
        module = build_module(args.source)
        module.eval()
        return module, {"example_inputs": example_inputs(positional, args.input_dtype, 0)}
    options = {key: value for key, value in source_options(args).items() if value is not None}
    if args.input_shape:  # NAME=D0,D1,..., or D0,D1,... in the order of the graph's inputs
        options["input_shapes"] = input_shapes(args.input_shape, args.source, options)
    return args.source, options


def execute(args: argparse.Namespace) -> int:
    from nnef_torch import viz  # lazy: the viewer is loaded only when used

    source, options = _source(args)
    if args.radius is not None and args.around is None:
        raise CLIError("--radius needs --around NAME")
    drawing = {"collapse_fragments": args.collapse_fragments, "around": args.around,
               "radius": 2 if args.radius is None else args.radius, "clusters": not args.no_clusters}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.export's internal deprecation notices
        if args.output == "-":
            drawing.pop("clusters")
            sys.stdout.write(viz.tree(source, **drawing, **options))
            return 0
        if args.embed_weights and viz.OUTPUTS.get(os.path.splitext(args.output)[1].lower()) != "relayviz":
            raise CLIError("--embed-weights writes RelayViz Const nodes: it applies to .json output only")
        written = viz.draw(source, args.output, embed_weights=args.embed_weights, **drawing, **options)
    print(f"wrote {written}")
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    command = add_verb(
        commands, "viz", "draw a model: RelayViz JSON, DOT, SVG/PNG/PDF, an HTML viewer or a terminal tree",
        ["viz model.tgz -o model.svg",
         "viz model/ -o model.html                 # one self-contained page: pan, zoom, search",
         "viz resnet-symbol.json -o - --collapse-fragments",
         "viz model.tgz -o part.svg --around conv5 --radius 3",
         "viz mymodels:build_net -o net.dot --input-shape 1,3,224,224",
         "viz model.tgz -o model.json --embed-weights   # RelayViz with the weights as Const nodes",
         "viz graph.json -o graph.svg              # a RelayViz document written by another tool"],
        "OUT's suffix picks the output: .json RelayViz, .dot/.gv Graphviz text, .svg/.png/.pdf rendered with\n"
        "Graphviz's dot, .html a self-contained viewer laid out in the browser (no Graphviz needed), .txt or '-'\n"
        "(standard output) a tree. Without dot on the PATH, .svg/.png/.pdf write the .dot instead, with how to\n"
        "install Graphviz.")
    command.add_argument("source", metavar="SOURCE",
                         help=MODEL_HELP + ", a RelayViz JSON file, or package.module:factory (traced)")
    command.add_argument("-o", "--output", required=True, metavar="OUT", help="the file to write, or - for the tree")
    command.add_argument("--input-shape", action="append", default=[], type=input_shape, metavar="SHAPE",
                         help="a model: NAME=D0,D1,... replaces an input's shape, or D0,D1,... once per input in the "
                              "graph's order; a factory: D0,D1,... per positional input of forward, in order")
    command.add_argument("--input-dtype", action="append", default=[], choices=INPUT_DTYPES, metavar="DTYPE",
                         help="a factory: the dtype of each input, or one for all (default float32)")
    add_source_options(command)
    command.add_argument("--embed-weights", action="store_true",
                         help="RelayViz: write variables as Const nodes with their values")
    command.add_argument("--collapse-fragments", action="store_true",
                         help="draw each invocation of a fragment the document defines as one node")
    command.add_argument("--no-clusters", action="store_true",
                         help="do not box the operations expanded from a fragment invocation")
    command.add_argument("--around", metavar="NAME", help="draw only the neighbourhood of this tensor or operation")
    command.add_argument("--radius", type=int, metavar="K", help="with --around: how many edges away (default 2)")
    command.set_defaults(handler=execute)
