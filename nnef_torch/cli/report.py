"""`validate` and `info`: check a model with our own reader and describe it (no torch needed)."""
from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import Any

from nnef_torch.cli.common import (
    MODEL_HELP,
    add_input_shape,
    add_source_options,
    add_strict,
    add_verb,
    input_shapes,
    source_options,
    volume,
    warnings_reported,
)
from nnef_torch.cli.symbolic import Shapes, read_batch, read_symbolic, shape_text
from nnef_torch.errors import NNEFDeviationWarning
from nnef_torch.formats.dialects import UnboundDimensionError
from nnef_torch.ir.graph import Graph
from nnef_torch.reader import ModelData, read_model

# the operations that introduce tensors (spec 4.1): declarations, not counted as operations
DECLARATIONS = frozenset({"external", "variable", "constant"})


def operations(graph: Graph) -> Counter[str]:
    """The operations of a graph by name, without the declarations that introduce tensors (external, variable,
    constant): what every verb counts as its operations."""
    return Counter(op.name for op in graph.operations if op.name not in DECLARATIONS)


def describe(model: ModelData, shapes: Shapes | None = None) -> str:
    """The report of `info`: inputs, outputs, operation histogram, parameters; `shapes`: the inputs' and outputs'
    shapes with their symbols, for a model read with dimensions no option binds."""
    graph = model.graph
    origin = "" if model.format == "nnef" else f", converted from {model.format}"
    lines = [f"graph {graph.name} (NNEF {graph.version}{origin}) from {model.source}"]
    if graph.extensions:
        lines.append("extensions: " + ", ".join(graph.extensions))
    if shapes is not None:
        lines.append(shapes.note)
    lines.append("inputs:")
    lines += [f"  {ext.name}: {ext.dtype}"
              f"{shape_text(shapes.inputs.get(ext.name, list(ext.shape)) if shapes else list(ext.shape))}"
              for ext in graph.signature.externals]
    lines.append("outputs:")
    for name in graph.outputs:
        tensor = graph.tensors[name]
        shape = list(tensor.shape) if tensor.shape is not None else None
        lines.append(f"  {name}: {tensor.dtype}{shape_text(shapes.outputs.get(name, shape) if shapes else shape)}")
    histogram = operations(graph)
    lines.append(f"operations: {sum(histogram.values())}")
    lines += [f"  {name:<28}{count:>6}" for name, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines.append(variables_line(model))
    if graph.signature.updates:
        lines.append("updated variables: " + ", ".join(update.variable for update in graph.signature.updates))
    if graph.quantization:
        lines.append(quantization_line(model))
    return "\n".join(lines)


def variables_line(model: ModelData) -> str:
    groups = model.graph.shared_variables()
    count = sum(volume(variables[0].shape) for variables in groups.values())
    stored = sum(data.header.data_length for data in model.tensors.values())
    return f"variables: {len(groups)} tensors, {count:,} parameters, {stored:,} bytes stored"


def quantization_line(model: ModelData) -> str:
    ops = Counter(spec.op for spec in model.graph.quantization.values())
    return (f"quantized tensors: {len(model.graph.quantization)} ("
            + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items())) + ")")


def summary(model: ModelData) -> str:
    """One line: operations (as `operations` counts them), variables, quantized tensors."""
    graph = model.graph
    return (f"{sum(operations(graph).values())} operations, {len(graph.shared_variables())} variables, "
            f"{len(graph.quantization)} quantized tensors")


def _reader(args: argparse.Namespace) -> Callable[..., ModelData]:
    """read_model of the verb's model with its options; keywords replace them."""
    options = source_options(args)
    shapes = input_shapes(args.input_shape, args.path, options)

    def read(**changes: Any) -> ModelData:
        probed = changes.pop("input_shapes", None) or {}  # a symbol's value, under the shapes the user gave
        keywords: dict[str, Any] = {"batch_size": args.batch_size, "lenient": not args.strict, **options, **changes}
        return read_model(args.path, input_shapes={**probed, **shapes}, **keywords)
    return read


def add_batch_size(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=positive, metavar="N",
                        help="the batch size (axis 0) of every input --input-shape does not name: for a model "
                             "exported with a variable batch size")


def positive(text: str) -> int:
    """argparse type of a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def validate(args: argparse.Namespace) -> int:
    """Read as every verb reads: a deviation from the spec real producers write is a warning (exit status 0), an
    error with --strict (exit status 1)."""
    with warnings_reported() as shown:
        model = _reader(args)()
    deviations = sum(isinstance(warning, NNEFDeviationWarning) for warning in shown)
    what = "valid NNEF" if model.format == "nnef" else f"valid {model.format} model, converted to valid NNEF"
    if deviations:
        what += (f" read leniently, {deviations} deviation{'s' if deviations > 1 else ''} from the spec "
                 "(warnings above; --strict refuses them)")
    print(f"{args.path}: {what} ({summary(model)})")
    return 0


def info(args: argparse.Namespace) -> int:
    read = _reader(args)
    try:
        model = read()
    except UnboundDimensionError as error:  # tract symbols: shown as declared, counted at a value they take
        model, shapes = read_symbolic(args.path, read, source_options(args), error)
    else:
        unbound = model.format == "nnef" and args.batch_size is None and not args.input_shape
        shapes = read_batch(model, read) if unbound else None
    print(describe(model, shapes))
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    verbs = (("validate", validate, "check a model (graph, .dat files, graph.quant); exit status 0 if valid, 1 if not",
              ["validate model.tgz", "validate model/ --strict             # a deviation from the spec is an error",
               "validate model/ --input-shape input=8,3,224,224", "validate model/ --input-shape 8,3,224,224",
               "validate model/ --batch-size 16",
               "validate resnet-symbol.json --input-shape data=1,3,224,224"]),
             ("info", info, "inputs, outputs, operation histogram, parameter count and bytes",
              ["info model/", "info model.tgz --input-shape input=1,3,512,512",
               "info resnet-symbol.json --params resnet-0000.params --input-shape data=1,3,224,224"]))
    for name, handler, text, examples in verbs:
        command = add_verb(commands, name, text, examples)
        command.add_argument("path", help=MODEL_HELP)
        add_input_shape(command)
        add_batch_size(command)
        add_source_options(command)
        add_strict(command)
        command.set_defaults(handler=handler)
