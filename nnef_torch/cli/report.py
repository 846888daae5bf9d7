"""`validate` and `info`: check a model with our own reader and describe it (no torch needed)."""
from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter

from nnef_torch.cli.common import (
    MODEL_HELP,
    add_input_shape,
    add_source_options,
    add_verb,
    input_shapes,
    source_options,
    volume,
)
from nnef_torch.errors import NNEFDeviationWarning
from nnef_torch.reader import ModelData, read_model


def describe(model: ModelData) -> str:
    """The report of `info`: inputs, outputs, operation histogram, parameters."""
    graph = model.graph
    origin = "" if model.format == "nnef" else f", converted from {model.format}"
    lines = [f"graph {graph.name} (NNEF {graph.version}{origin}) from {model.source}"]
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
    """One line: operations, variables, quantized tensors."""
    graph = model.graph
    return (f"{len(graph.operations)} operations, {len(graph.shared_variables())} variables, "
            f"{len(graph.quantization)} quantized tensors")


def _read(args: argparse.Namespace, lenient: bool = True) -> ModelData:
    return read_model(args.path, input_shapes=input_shapes(args.input_shape), batch_size=args.batch_size,
                      lenient=lenient, **source_options(args))


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
    """Strict by default: a deviation from the spec is an error; --lenient reports each as a warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NNEFDeviationWarning)
        model = _read(args, lenient=args.lenient)
    deviations = [w.message for w in caught if isinstance(w.message, NNEFDeviationWarning)]
    for warning in deviations:
        print(warning, file=sys.stderr)
    for w in caught:  # other warnings as Python shows them
        if not isinstance(w.message, NNEFDeviationWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    what = "valid NNEF" if model.format == "nnef" else f"valid {model.format} model, converted to valid NNEF"
    if deviations:
        what += f" read leniently, {len(deviations)} deviation{'s' if len(deviations) > 1 else ''} from the spec"
    print(f"{args.path}: {what} ({summary(model)})")
    return 0


def info(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():  # a description, not a check: what real producers write is read
        warnings.simplefilter("ignore", NNEFDeviationWarning)
        print(describe(_read(args)))
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    verbs = (("validate", validate, "check a model (graph, .dat files, graph.quant); exit status 0 if valid, 1 if not",
              ["validate model.tgz", "validate model/ --input-shape input=8,3,224,224",
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
        if name == "validate":
            command.add_argument("--lenient", action="store_true",
                                 help="read the deviations from the spec that real producers write (README, "
                                      "'Deviations read') and report each as a warning, not an error")
        command.set_defaults(handler=handler)
