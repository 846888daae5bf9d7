"""The `nnef-torch` command line: validate and inspect NNEF models."""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from importlib import resources

from nnef_torch.errors import NNEFError
from nnef_torch.reader import ModelData, read_model

DEMO_MODEL = "tiny_cnn"


def demo_model_path() -> str:
    """The small model shipped inside the package."""
    return str(resources.files("nnef_torch").joinpath("models", DEMO_MODEL))


def _input_shapes(values: list[str]) -> dict[str, list[int]]:
    shapes = {}
    for value in values:
        name, _, dims = value.partition("=")
        try:
            shapes[name] = [int(dim) for dim in dims.split(",")]
        except ValueError:
            raise SystemExit(f"nnef-torch: error: --input-shape expects NAME=D0,D1,..., got '{value}'") from None
    return shapes


def describe(model: ModelData) -> str:
    """The report of `info`: inputs, outputs, operation histogram, parameters."""
    graph = model.graph
    lines = [f"graph {graph.name} (NNEF {graph.version}) from {model.source}"]
    if graph.extensions:
        lines.append("extensions: " + ", ".join(graph.extensions))
    lines.append("inputs:")
    lines += [f"  {ext.name}: {ext.dtype}{list(ext.shape)}" for ext in graph.signature.externals]
    lines.append("outputs:")
    for name in graph.outputs:
        tensor = graph.tensors[name]
        shape = list(tensor.shape) if tensor.shape is not None else "unknown shape"
        lines.append(f"  {name}: {tensor.dtype}{shape}")
    histogram = Counter(op.name for op in graph.operations
                        if op.name not in ("external", "variable", "constant"))
    lines.append(f"operations: {sum(histogram.values())}")
    lines += [f"  {name:<28}{count:>6}" for name, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))]
    groups = graph.shared_variables()
    count = sum(_volume(variables[0].shape) for variables in groups.values())
    stored = sum(data.header.data_length for data in model.tensors.values())
    lines.append(f"variables: {len(groups)} tensors, {count:,} parameters, {stored:,} bytes stored")
    if graph.signature.updates:
        lines.append("updated variables: " + ", ".join(update.variable for update in graph.signature.updates))
    if graph.quantization:
        ops = Counter(spec.op for spec in graph.quantization.values())
        lines.append(f"quantized tensors: {len(graph.quantization)} ("
                     + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())) + ")")
    return "\n".join(lines)


def _volume(shape) -> int:
    volume = 1
    for extent in shape:
        volume *= extent
    return volume


def _cmd_validate(args: argparse.Namespace) -> int:
    model = read_model(args.path, input_shapes=_input_shapes(args.input_shape))
    graph = model.graph
    print(f"{args.path}: valid NNEF ({len(graph.operations)} operations, "
          f"{len(graph.shared_variables())} variables, {len(graph.quantization)} quantized tensors)")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    print(describe(read_model(args.path, input_shapes=_input_shapes(args.input_shape))))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    path = demo_model_path()
    print(f"demo model shipped with nnef_torch: {path}\n")
    print(describe(read_model(path)))
    print("\nvalid: the graph, its .dat files and graph.quant all check out")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnef-torch", description="Validate and inspect Khronos NNEF models (folders, graph.nnef, .tgz).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  nnef-torch validate model.tgz\n  nnef-torch info model/ --input-shape input=8,3,224,224\n"
               "  nnef-torch demo")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler, text in (("validate", _cmd_validate, "check a model; exit status 0 if valid, 1 if not"),
                                ("info", _cmd_info, "inputs, outputs, operation histogram, parameters")):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("path", help="a model folder, a graph.nnef file, or a .tar/.tgz/.tar.gz archive")
        command.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                             help="replace the shape of an input (may be repeated)")
        command.set_defaults(handler=handler)
    demo = commands.add_parser("demo", help="validate and describe the model shipped inside the package")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except NNEFError as error:
        print(error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
