"""Consecutive shape operations on computed tensors, written as one.

torch's programs reshape in small steps (`view` after `view`, `unsqueeze` before a `permute` that `squeeze` undoes,
`select` after `select` along one axis), and each step is an operation of its own in the traced graph. Where the
intermediate results are read by nothing else, `merge_shape_chains` writes the chain as the one operation it
amounts to, as the Khronos converters' graphs read:

- `reshape`, `squeeze` or `unsqueeze` of a `reshape`, `squeeze` or `unsqueeze` -> one `reshape` to the last shape
  (nothing at all where that is the first input's shape);
- `transpose` of a `transpose` -> one `transpose` (nothing where the axes compose to the identity);
- `unsqueeze`, `transpose`, `squeeze` that removes exactly the axes the unsqueeze added -> one `transpose`;
- every index of an axis `slice`d out one by one and each `squeeze`d -> one `unstack` along that axis.

The last operation of a chain keeps its result's name; the intermediate tensors are left out. A tensor that is a
graph output, an `update`'s operand or has a graph.quant entry is never left out. Shapes must be static (the
example extents): the pass is for exports without symbolic or variable extents, whose `reshape`s write shapes.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from nnef_torch.ir.builder import replace_refs
from nnef_torch.ir.graph import Graph, Operation, Ref

__all__ = ["merge_shape_chains"]

RESHAPING = ("reshape", "squeeze", "unsqueeze")


def merge_shape_chains(graph: Graph) -> Graph:
    """`graph` with each chain of shape operations through tensors read by nothing else written as one operation."""
    while True:
        merged = _merge_once(graph)
        if merged is graph:
            return graph
        graph = merged


def _merge_once(graph: Graph) -> Graph:
    readers: dict[str, list[Operation]] = {}
    for op in graph.operations:
        for name in {ref.name for ref in op.input_refs()}:
            readers.setdefault(name, []).append(op)
    kept = _kept(graph)
    writers = {ref.name: op for op in graph.operations for ref in op.output_refs()}

    def private(name: str) -> bool:  # an intermediate result that may be left out
        return name not in kept and len(readers.get(name, ())) == 1

    def source_of(op: Operation, kinds: tuple[str, ...]) -> Operation | None:  # its input's writer, if private
        source = writers.get(_input(op).name) if isinstance(_input(op), Ref) else None
        return source if source is not None and source.name in kinds and private(_output(source)) else None

    for op in graph.operations:  # the longest pattern first: its first step would otherwise merge with another
        transpose = source_of(op, ("transpose",)) if op.name == "squeeze" else None
        first = source_of(transpose, ("unsqueeze",)) if transpose is not None else None
        replacement = _unsqueezed_transpose(graph, first, transpose, op) if first is not None else None
        if replacement is not None:
            return _replace(graph, [first, transpose, op], replacement, op)
    for op in graph.operations:
        unstack = _unstack(graph, op, readers, kept)
        if unstack is not None:
            return unstack
    for op in graph.operations:
        source = source_of(op, RESHAPING + ("transpose",)) if op.name in RESHAPING + ("transpose",) else None
        replacement = _pair(graph, source, op) if source is not None else None
        if replacement is not None:
            return _replace(graph, [source, op], replacement, op)
    return graph


def _kept(graph: Graph) -> set[str]:
    """Tensors that must stay: graph outputs, update operands and tensors with a graph.quant entry."""
    signature = graph.signature
    names = set(signature.outputs) | set(graph.quantization)
    for update in signature.updates:
        names.update(name for name in (update.variable, update.value, update.result) if isinstance(name, str))
    return names


def _input(op: Operation) -> Any:
    return op.inputs.get("input")


def _output(op: Operation) -> str:
    return op.outputs["output"].name


def _shape(graph: Graph, name: str) -> Any:
    """The shape of tensor `name`; None where the graph has none (an update's result)."""
    tensor = graph.tensors.get(name)
    return tensor.shape if tensor is not None else None


def _static(shape: Any) -> bool:
    return shape is not None and all(type(extent) is int for extent in shape)


def _pair(graph: Graph, first: Operation, second: Operation) -> Operation | None | str:
    """What `second` of `first` amounts to: an operation on `first`'s input, or 'identity'; None: no merge."""
    source = _input(first)
    if not isinstance(source, Ref):
        return None
    if first.name in RESHAPING and second.name in RESHAPING:
        before, after = _shape(graph, source.name), _shape(graph, _output(second))
        if not (_static(before) and _static(after)):
            return None
        if tuple(before) == tuple(after):
            return "identity"
        return dataclasses.replace(second, name="reshape", inputs={"input": source},
                                   attribs={"shape": list(after), "axis_start": 0, "axis_count": -1})
    if first.name == "transpose" and second.name == "transpose":
        outer, inner = _axes(second), _axes(first)
        rank = max(len(outer), len(inner))
        outer, inner = _padded(outer, rank), _padded(inner, rank)
        composed = [inner[axis] for axis in outer]
        if composed == list(range(rank)):
            return "identity"
        return dataclasses.replace(second, inputs={"input": source}, attribs={**second.attribs, "axes": composed})
    return None


def _axes(op: Operation) -> list[int]:
    return [int(axis) for axis in op.attribs["axes"]]


def _padded(axes: list[int], rank: int) -> list[int]:
    """A transpose's axes for `rank` axes (NNEF leaves the trailing axes in place)."""
    return axes + list(range(len(axes), rank))


def _unsqueezed_transpose(graph: Graph, unsqueeze: Operation, transpose: Operation, squeeze: Operation
                          ) -> Operation | str | None:
    """unsqueeze -> transpose -> squeeze as one transpose of the unsqueeze's input, where the squeeze removes
    exactly the axes the unsqueeze added; None otherwise."""
    source = _input(unsqueeze)
    added = set(_axes(unsqueeze))
    shape = _shape(graph, _output(unsqueeze))
    if shape is None:
        return None
    perm = _padded(_axes(transpose), len(shape))
    landed = {position for position, axis in enumerate(perm) if axis in added}
    if landed != set(_axes(squeeze)) or not isinstance(source, Ref):
        return None
    kept = [axis for axis in range(len(perm)) if axis not in added]  # the input's axes, in the unsqueezed tensor
    order = [kept.index(axis) for axis in perm if axis not in added]
    if order == list(range(len(order))):
        return "identity"
    return dataclasses.replace(squeeze, name="transpose", inputs={"input": source}, attribs={"axes": order})


def _unstack(graph: Graph, op: Operation, readers: dict[str, list[Operation]], kept: set[str]) -> Graph | None:
    """The graph with `op`'s result, when its readers slice out each index of one axis and squeeze it (torch's
    `select` of every index, `unbind` in steps), unstacked once instead; None otherwise."""
    results = list(op.output_refs())
    if len(results) != 1:
        return None
    name = results[0].name
    shape = _shape(graph, name)
    slices = readers.get(name, [])
    if not _static(shape) or len(slices) < 2 or any(s.name != "slice" for s in slices):
        return None
    axes = {tuple(s.attribs.get("axes", ())) for s in slices}
    if len(axes) != 1 or len(next(iter(axes))) != 1:
        return None
    axis = next(iter(axes))[0]
    if len(slices) != shape[axis] or any(any(int(step) != 1 for step in s.attribs.get("stride") or ()) for s in slices):
        return None
    order: dict[int, Operation] = {}  # index -> the squeeze of its slice
    for s in slices:
        begin, end = int(s.attribs["begin"][0]), int(s.attribs["end"][0])
        squeezes = readers.get(_output(s), [])
        if begin < 0 or end != begin + 1 or _output(s) in kept or len(squeezes) != 1:
            return None
        squeeze = squeezes[0]
        if squeeze.name != "squeeze" or _axes(squeeze) != [axis] or begin in order:
            return None
        order[begin] = squeeze
    outputs = [order[index].outputs["output"] for index in range(shape[axis])]
    first = min((order[index] for index in order), key=graph.operations.index)
    unstack = dataclasses.replace(first, name="unstack", inputs={"value": Ref(name)}, attribs={"axis": axis},
                                  outputs={"values": outputs})
    gone = {id(s) for s in slices} | {id(q) for q in order.values()}
    operations = []
    for each in graph.operations:
        if each is first:
            operations.append(unstack)
        elif id(each) not in gone:
            operations.append(each)
    tensors = {key: value for key, value in graph.tensors.items() if key not in {_output(s) for s in slices}}
    return dataclasses.replace(graph, operations=tuple(operations), tensors=tensors)


def _replace(graph: Graph, gone: list[Operation], replacement: Operation | str, last: Operation) -> Graph:
    """`graph` with the operations of `gone` replaced by `replacement` in the place of `last` (or, for 'identity',
    with `last`'s result read as the chain's first input)."""
    removed = {id(op) for op in gone}
    dropped = {_output(op) for op in gone if op is not last}
    operations = [op for op in graph.operations if id(op) not in removed or op is last]
    tensors = {key: value for key, value in graph.tensors.items() if key not in dropped}
    if replacement == "identity":
        result = _output(last)
        if result in _kept(graph):  # the name is part of the interface: a copy keeps it
            replacement = dataclasses.replace(last, name="copy", inputs={"x": _input(gone[0])}, attribs={},
                                              outputs={"y": last.outputs["output"]})
        else:
            swap = {result: _input(gone[0])}
            operations = [replace_refs(op, swap) for op in operations if op is not last]
            tensors.pop(result, None)
            return dataclasses.replace(graph, operations=tuple(operations), tensors=tensors)
    operations = [replacement if op is last else op for op in operations]
    return dataclasses.replace(graph, operations=tuple(operations), tensors=tensors)
