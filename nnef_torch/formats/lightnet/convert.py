"""LightNet JSON IR with its weights -> IR graph and NNEF text (see `formats.Converted`).

Ops run in file order, each through its optype's import rule (the op table's `lightnet` facet), which writes NNEF
operations through a `Builder`; every result is named after its LightNet tensor.

- Inputs: the `create`d tensors named in `inputs=` (what LightNet's caller fills with `ln_context_set_data`) are the
  graph's externals, in that order, with the `create`'s dims (or those `input_shapes=` gives) and dtype. A model
  with none has one nothing reads (`no_inputs`, an NNEF graph has at least one input; the module's is optional).
- Constants: every other `create` is a variable labelled with its tensor's name (a Parameter of the module for
  floating types, a buffer otherwise), holding its weights (`from_file: true`), random numbers (`ran`), zeros
  (`data: [0]`) or `data`.
- Outputs: the tensors named in `outputs=`, in that order; by default every tensor no op reads, in the order they
  are defined, where `print` and `fprint` do not count as readers (they observe, so a printed tensor that nothing
  else reads is still an output). An output that is an input or a constant is given through a `copy`.
- `print` and `fprint` stay in the graph though nothing reads their results.
- In place: LightNet's rearange, sort1d and sort1d_by_key write into their input's memory (which reshape and
  forward outputs share); reading such a tensor after the write, where LightNet sees the new values, is refused.

Missing or misfitting weights are reported together after the walk; weights no `create` reads are warned about
(LightNet ignores them too).
"""
from __future__ import annotations

import bisect
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral
from typing import Any

from nnef_torch.errors import (
    ForeignFormatError,
    Location,
    NNEFError,
    NNEFOptionError,
    NNEFShapeError,
    NNEFUnsupportedError,
)
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.formats import Converted
from nnef_torch.formats.json_file import parse_json, read_bytes
from nnef_torch.formats.lightnet import rules  # noqa: F401  (registers the lightnet import rules)
from nnef_torch.formats.lightnet.ir_json import IR, parse_ir
from nnef_torch.formats.lightnet.node import Context, LnNode
from nnef_torch.formats.lightnet.rules.common import LIBRARY, LIGHTNET, nnef_type
from nnef_torch.formats.lightnet.weights import Weights, load_weights
from nnef_torch.formats.names import graph_name
from nnef_torch.ir.builder import Builder, Unmappable, fragment_library
from nnef_torch.ir.document import as_nnef, graph_file
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.ir.limits import check_shape
from nnef_torch.ops.registry import import_rules

FORMAT = LIGHTNET
OBSERVERS = ("print", "fprint")  # optypes that read a tensor without consuming it
SIDE_EFFECTS = ("lightnet_print", "lightnet_fprint")  # their NNEF operations, kept though nothing reads them
NO_INPUTS = "no_inputs"  # the NNEF input of a model that takes none


def convert_ir(ir: IR, weights: Weights, inputs: Sequence[str] = (), outputs: Sequence[str] | None = None,
               name: str = "G", input_shapes: Mapping[str, Any] | None = None
               ) -> tuple[Graph, GraphFile, dict[str, Any]]:
    """The IR graph, its NNEF document (printed when asked for) and the variables' values by label. `input_shapes`
    replaces the dims of inputs (a batch size, say), by name."""
    table = import_rules(FORMAT)
    missing_rules = sorted({op.optype for op in ir.ops if op.optype not in table})
    assert not missing_rules, f"optypes without import rules: {missing_rules}"
    names = output_names(ir, outputs)
    check_in_place(ir, names)
    library = fragment_library(*LIBRARY)
    builder = Builder(library)
    context = Context(builder, ir, weights)
    _declare_inputs(context, list(inputs), dict(input_shapes or {}))
    if not inputs:  # an NNEF graph has at least one input: one that nothing reads (the module's is optional)
        builder.external(NO_INPUTS, "scalar", [1])
    declared = {ref.name for ref in builder.externals}  # names of externals and variables, kept up to date
    for op in ir.ops:
        node = LnNode(op, context)
        builder.begin(op.name)
        variables = len(builder.variables)
        try:
            result = table[op.optype].fn(builder, node)
        except Unmappable as error:
            raise NNEFUnsupportedError(f"{op.where}: {error}", op.location) from None
        except NNEFShapeError as error:
            raise ForeignFormatError(f"{op.where}: {error.message}", op.location) from None
        except (ZeroDivisionError, OverflowError, ValueError) as error:
            if isinstance(error, NNEFError):
                raise
            raise ForeignFormatError(f"{op.where}: invalid params ({error})", op.location) from None
        declared.update(variable.name for variable in builder.variables[variables:])
        _bind(builder, node, result if isinstance(result, tuple) else (result,), declared)
    if context.problems:
        raise ForeignFormatError(f"{len(context.problems)} weight problem(s):\n" +
                                 "\n".join(f"  {problem}" for problem in context.problems),
                                 Location(weights.file or ir.file))
    unused = [key for key in weights.arrays if key not in weights.used] + list(weights.other_names)
    if unused:
        total = len(unused) - len(weights.other_names) + weights.others
        shown = ", ".join(unused[:10]) + (f" and {total - 10} more" if total > 10 else "")
        warnings.warn(f"{weights.file or 'params'}: ignoring {total} weight(s) no create op with from_file "
                      f"reads: {shown}", stacklevel=3)
    results = _outputs(context, names)
    graph = builder.graph(builder.fresh(graph_name(name)), results, keep=SIDE_EFFECTS)
    return graph, graph_file(graph, builder.fragments, library, as_nnef(ir.file)), dict(builder.data)


# LightNet ops whose outputs share their inputs' memory (`owner` in the op definitions), and those of them that
# write into it: a tensor sharing memory with a written one changes under its readers there, never here.
OWNERS = {"reshape": (("dst", "src"),), "forward": (("dst", "src"),), "rearange": (("dst", "src"),),
          "sort1d": (("dst_key", "src_key"),), "sort1d_by_key": (("dst_key", "src_key"), ("dst_val", "src_val"))}
IN_PLACE = ("rearange", "sort1d", "sort1d_by_key")


def check_in_place(ir: IR, outputs: Sequence[str]) -> None:
    """Refuse reading a tensor after an op rewrote the memory it shares (LightNet's in-place rearange and sorts):
    LightNet reads the new values there, nnef_torch's tensors never change. Linear in the ops: each memory keeps
    the indexes of the ops that write it, in order, and a read looks up the first write after its tensor's
    definition."""
    group: dict[str, str] = {}

    def root(tensor: str) -> str:
        while group.get(tensor, tensor) != tensor:
            tensor = group[tensor]
        return tensor

    defined = {tensor: op.index for tensor, (op, _) in ir.producers.items()}
    writes: dict[str, list[int]] = {}  # memory (its root tensor) -> indexes of the ops that write it, ascending
    for op in ir.ops:
        for out, source in OWNERS.get(op.optype, ()):
            group[op.tensors_out[out]] = root(op.tensors_in[source])  # an output is new: its own root till now
            if op.optype in IN_PLACE:
                writes.setdefault(root(op.tensors_in[source]), []).append(op.index)
    if not writes:
        return
    readers = [(op.index, op.where, op.location, tensor) for op in ir.ops for tensor in op.tensors_in.values()]
    readers += [(len(ir.ops), "the model's outputs", Location(ir.file), tensor) for tensor in outputs]
    for index, where, location, tensor in readers:
        memory = writes.get(root(tensor))
        if memory is None:
            continue
        after = bisect.bisect_right(memory, defined[tensor])
        if after < len(memory) and memory[after] < index:
            writer = ir.ops[memory[after]]
            raise NNEFUnsupportedError(
                f"{where} reads '{tensor}' after {writer.where} rewrote it: LightNet's {writer.optype} writes "
                f"into its input's memory, which '{tensor}' shares, and nnef_torch's tensors do not alias; read "
                f"{writer.where.split(' ')[1]}'s output instead", location)


def _declare_inputs(context: Context, inputs: list[str], shapes: dict[str, Any]) -> None:
    """Externals for the tensors of `inputs=`, each made by a `create` op, in the order given, with the dims of the
    `create` or of `input_shapes`."""
    file = Location(context.ir.file)
    if len(set(inputs)) != len(inputs):
        raise NNEFOptionError(f"inputs= names a tensor twice: {_shown(inputs)}", file)
    unknown = sorted(set(shapes) - set(inputs), key=str)
    if unknown:
        raise NNEFOptionError(f"input_shapes names {_shown(unknown)}, which are not inputs of the model (inputs=: "
                              f"{_shown(inputs)})", file)
    creates = {op.tensors_out["dst"]: op for op in context.ir.ops if op.optype == "create"}
    wrong = [name for name in inputs if name not in creates]
    if wrong:
        defined = [name for name in wrong if name in context.ir.producers]
        detail = f" ({', '.join(defined[:10])} computed by ops)" if defined else ""
        raise NNEFOptionError(f"inputs= names {_shown(wrong)}, which no create op makes{detail}; the created "
                              f"tensors: {_shown(sorted(creates))}", file)
    for name in inputs:
        op = creates[name]
        dtype = op.params["dtype"]
        context.builder.begin(op.name)
        if name in shapes:
            dims = _given_shape(name, shapes[name], file)
        else:
            dims = list(check_shape(f"{op.where}: 'dims'", op.params["dims"], op.location, error=ForeignFormatError))
        context.externals[name] = context.builder.external(name, nnef_type(dtype), dims)


def _given_shape(name: str, shape: Any, file: Location) -> list[int]:
    """The shape `input_shapes` gives an input: positive integers, of a volume NNEF can hold."""
    items = list(shape) if isinstance(shape, Iterable) and not isinstance(shape, (str, bytes, Mapping)) else None
    if not items or any(not isinstance(extent, Integral) or isinstance(extent, bool) or extent <= 0
                        for extent in items):
        raise NNEFOptionError(f"input_shapes gives '{name}' the shape {shape!r:.200}; a shape is a non-empty list "
                              "of positive integers", file)
    return list(check_shape(f"input_shapes['{name}']", [int(extent) for extent in items], file,
                            error=NNEFOptionError))


def _shown(names: Sequence[Any], limit: int = 20) -> str:
    """A list of names for a message, the first `limit` of them."""
    shown = ", ".join(repr(name)[:100] for name in names[:limit])
    return f"[{shown}{f', ... ({len(names)} in all)' if len(names) > limit else ''}]"


def _bind(builder: Builder, node: LnNode, results: tuple[Any, ...], declared: set[str]) -> None:
    """Record the op's results under its output tensors' names (and name the NNEF tensors after them); `declared`:
    the names of the graph's externals and variables (kept as they are)."""
    op = node.op
    args = node.op.definition.tensors_out
    assert len(results) == len(args), f"{op.optype} rule returned {len(results)} results for {args}"
    first = next(iter(op.tensors_in), None)
    for arg, value in zip(args, results):
        tensor = op.tensors_out[arg]
        if isinstance(value, Ref) and value.name in builder.created and value.name not in declared:
            value = builder.rename(value, _identifier(tensor))
        node.context.values[tensor] = value
        node.context.dtypes[tensor] = node.out_dtypes.get(arg) or node.dtype(first)


def output_names(ir: IR, names: Sequence[str] | None) -> list[str]:
    """The tensors `outputs=` names, or by default those no op reads (print and fprint observe, they do not read),
    in the order they are defined."""
    if names is None:
        read = {tensor for op in ir.ops if op.optype not in OBSERVERS for tensor in op.tensors_in.values()}
        return [tensor for tensor in ir.producers if tensor not in read]
    unknown = [name for name in names if not isinstance(name, str) or name not in ir.producers]
    if unknown:
        raise NNEFOptionError(f"outputs= names {_shown(unknown)}, which are not tensors of the model; its tensors: "
                              f"{_shown(list(ir.producers))}", Location(ir.file))
    if not names:
        raise NNEFOptionError("outputs= names no tensor", Location(ir.file))
    return list(names)


def _outputs(context: Context, names: Sequence[str]) -> list[Ref]:
    builder = context.builder
    results: list[Ref] = []
    taken: set[str] = set()
    declared = {ref.name for ref in builder.externals} | {ref.name for ref in builder.variables}
    for name in names:
        value = context.values[name]
        if value.name in declared or value.name in taken:
            producer = context.ir.producers.get(name)
            builder.begin(producer[0].name if producer else name)
            value = builder.op("copy", value, out_name=f"{_identifier(name)}_output")
        results.append(value)
        taken.add(value.name)
    return results


def _identifier(name: str) -> str:
    base = "".join(c if c.isascii() and c.isalnum() or c == "_" else "_" for c in name) or "t"
    return base if base[0].isalpha() or base[0] == "_" else "t_" + base


def read(path: str | os.PathLike, *, document: Any = None, params: Any = None, inputs: Sequence[str] | None = None,
         outputs: Sequence[str] | None = None, input_shapes: Mapping[str, Any] | None = None) -> Any:
    """Read a LightNet JSON IR file and its weights (see `formats.convert`). The file is refused past the JSON
    reader's size limit before it is read; its weights are read once its ops are checked, and only those its
    `create` ops read from file are kept."""
    file = os.fspath(path)
    if document is None:
        text: bytes | None = read_bytes(file)
        document = parse_json(text, file)
    else:  # parsed already (the format was detected): the text only places errors
        try:
            text = read_bytes(file)
        except ForeignFormatError:
            text = None
    ir = parse_ir(document, file, text)
    del text
    if isinstance(inputs, str):
        inputs = [inputs]
    if isinstance(outputs, str):
        outputs = [outputs]
    inputs = list(inputs or ())
    outputs = None if outputs is None else list(outputs)
    wanted = {op.tensors_out["dst"] for op in ir.ops if op.optype == "create" and op.params["from_file"] is True}
    weights = load_weights(params, file, wanted)
    stem = os.path.splitext(os.path.basename(file))[0]
    graph, document, tensors = convert_ir(ir, weights, inputs, outputs, stem, input_shapes)
    return Converted(FORMAT, file, graph, document, tensors,
                     options={"params": weights.origin, "inputs": list(inputs),
                              "outputs": None if outputs is None else list(outputs),
                              "input_shapes": dict(input_shapes or {})})
