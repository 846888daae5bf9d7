"""Variables declared in the shape their consumers read.

Export rules write a parameter in torch's shape and then reshape it where NNEF reads another one: a batch norm's
mean and variance, a bias ([C] in torch) go through `unsqueeze(axes = [0])` to broadcast as [1, C] against NNEF's
channel axis 1. `declare_read_shapes` moves such a shape operation into the declaration, as the Khronos converters
write it: a variable that is read only through a shape operation (`unsqueeze`, `squeeze`, `reshape`, `transpose`;
several identical ones count as one) is declared in that operation's result shape and layout, its data reshaped
or permuted (a view of the module's own tensor, never a copy), and the operation is left out; its readers read the
variable. Variables keep their names and labels. Chains (a `reshape` then a `transpose`) go step by step.

A variable stays as it is where the reshaped one would mean something else:
- it is read in another way too (tied weights read as they are and transposed, an `update` writing it);
- it shares its label with another variable (one tensor of data, read in two shapes), or with no data;
- its graph.quant entry has per-channel parameters (vectors along axis 0, which a reshape moves), or both it and
  the shape operation's result have an entry;
- the shape operation's result is a graph output or an `update`'s operand (its name is part of the interface);
- its data cannot be viewed in the new shape without a copy (a reshape after a transpose); a transpose moves only
  where every shape operation after it moves too (else the variable keeps torch's layout).
An entry on the shape operation's result (a fake quantizer after the reshape) moves to the variable.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from nnef_torch.ir.builder import replace_refs
from nnef_torch.ir.graph import Graph, Operation, Ref

__all__ = ["SHAPE_OPS", "declare_read_shapes", "shape_ops_on_variables"]

SHAPE_OPS = ("unsqueeze", "squeeze", "reshape", "transpose")  # operations that only move a tensor's items


def declare_read_shapes(graph: Graph, data: Mapping[str, Any]) -> tuple[Graph, dict[str, Any]]:
    """`graph` with each variable that is only read through a shape operation declared in that operation's result
    shape, and the variables' data (label -> tensor) to go with it. Neither argument is changed."""
    data = dict(data)
    while True:
        moves = _moves(graph, data)
        if not moves:
            return graph, data
        graph = _apply(graph, data, moves)


def shape_ops_on_variables(graph: Graph) -> list[Operation]:
    """The shape operations of `graph` whose input is a variable (what `declare_read_shapes` could not remove)."""
    variables = {variable.name for variable in graph.signature.variables}
    return [op for op in graph.operations if op.name in SHAPE_OPS
            and any(ref.name in variables for ref in op.input_refs())]


@dataclasses.dataclass(frozen=True)
class _Move:
    variable: Operation  # the `variable` operation
    readers: tuple[Operation, ...]  # its identical shape operations, each reading only it
    shape: tuple[int, ...]  # their result shape: the variable's new shape
    value: Any  # its data in that shape
    quant: Any  # the graph.quant entry the variable gets (None: none)


def _moves(graph: Graph, data: Mapping[str, Any]) -> list[_Move]:
    readers: dict[str, list[Operation]] = {}
    for op in graph.operations:
        for name in {ref.name for ref in op.input_refs()}:
            readers.setdefault(name, []).append(op)
    signature = graph.signature
    interface = set(signature.outputs) | {name for update in signature.updates
                                          for name in (update.variable, update.value, update.result)
                                          if isinstance(name, str)}
    shared = {key for key, group in graph.shared_variables().items() if len(group) > 1}
    variables = {variable.name: variable for variable in signature.variables}
    moves = []
    for op in graph.operations:
        if op.name != "variable":
            continue
        name = op.outputs["output"].name
        variable = variables.get(name)
        if variable is None or variable.key in shared or name in interface or data.get(variable.label) is None:
            continue
        move = _move(graph, op, readers, data[variable.label], interface)
        if move is not None:
            moves.append(move)
    return moves


def _move(graph: Graph, variable: Operation, readers: Mapping[str, list[Operation]], value: Any,
          interface: set[str]) -> _Move | None:
    """How `variable` is declared in its readers' shape, or None where it stays as it is. A transpose moves only
    when every shape operation after it moves too: a variable is not left in a layout of our own making that is
    still reshaped (bilinear's weight, transposed then flattened, which only a copy could hold)."""
    if not isinstance(value, torch.Tensor):
        return None
    name = variable.outputs["output"].name
    step = _step(graph, readers.get(name, []), value, interface)
    if step is None:
        return None
    first, moved = step
    quant = _quant_entry(graph, name, [op.outputs["output"].name for op in readers[name]])
    if quant is False:
        return None
    if first.name == "transpose":
        ahead, result = moved, first.outputs["output"].name
        while ahead is not None and readers.get(result) and all(op.name in SHAPE_OPS for op in readers[result]):
            later = _step(graph, readers[result], ahead, interface)
            if later is None:
                return None
            result, ahead = later[0].outputs["output"].name, later[1]
    return _Move(variable, tuple(readers[name]), tuple(moved.shape), moved, quant)


def _step(graph: Graph, readers: list[Operation], value: torch.Tensor, interface: set[str]
          ) -> tuple[Operation, torch.Tensor] | None:
    """The shape operation that all of `readers` are (identical ones), and `value` as it reads it; None where they
    are not one shape operation, its result is part of the interface, or it needs a copy."""
    if not readers:
        return None
    first = readers[0]
    if first.name not in SHAPE_OPS or any((op.name, op.attribs) != (first.name, first.attribs) for op in readers):
        return None
    results = [op.outputs["output"].name for op in readers]
    if any(name in interface for name in results):
        return None
    shape = graph.tensors[results[0]].shape
    if shape is None or len(shape) == 0:
        return None
    moved = _moved(value, first, tuple(shape))
    return None if moved is None else (first, moved)


def _quant_entry(graph: Graph, name: str, results: list[str]) -> Any:
    """The entry the reshaped variable gets (None: none), or False where the move would misplace one."""
    entries = graph.quantization
    own = entries.get(name)
    theirs = [entries[result] for result in results if result in entries]
    if own is not None:
        per_channel = any(isinstance(value, (list, tuple)) for value in own.args.values())
        return False if per_channel or theirs else own
    if not theirs:
        return None
    if len(theirs) != len(results) or any(entry != theirs[0] for entry in theirs):
        return False  # identical reads with different entries: each stays a tensor of its own
    return theirs[0]


def _moved(value: torch.Tensor, op: Operation, shape: tuple[int, ...]) -> torch.Tensor | None:
    """`value` as `op` reads it: a view of the same memory, or None where only a copy could hold it (a reshape of
    a transposed variable), so that the model's tensors stay the module's own."""
    value = value.detach()
    if op.name == "transpose":
        axes = [int(axis) for axis in op.attribs["axes"]]
        if sorted(axes) != list(range(len(axes))) or len(axes) > value.dim():
            return None
        moved = value.permute(*axes, *range(len(axes), value.dim()))
    elif value.numel() == _numel(shape):
        try:
            moved = value.view(shape)
        except RuntimeError:  # not viewable in that shape
            return None
    else:
        return None
    return moved if tuple(moved.shape) == shape else None


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def _apply(graph: Graph, data: dict[str, Any], moves: list[_Move]) -> Graph:
    """`graph` with every move made (`data` takes the moved values)."""
    swap: dict[str, Ref] = {}
    dropped: set[int] = set()
    declared: dict[int, Operation] = {}
    tensors = dict(graph.tensors)
    quantization = dict(graph.quantization)
    shapes: dict[str, tuple[int, ...]] = {}
    for move in moves:
        ref = move.variable.outputs["output"]
        shapes[ref.name] = move.shape
        declared[id(move.variable)] = dataclasses.replace(
            move.variable, attribs={**move.variable.attribs, "shape": list(move.shape)})
        tensors[ref.name] = dataclasses.replace(tensors[ref.name], shape=move.shape)
        data[move.variable.attribs["label"]] = move.value
        for reader in move.readers:
            result = reader.outputs["output"].name
            swap[result] = ref
            dropped.add(id(reader))
            tensors.pop(result, None)
            quantization.pop(result, None)
        if move.quant is None:
            quantization.pop(ref.name, None)
        else:
            quantization[ref.name] = move.quant
    operations = tuple(replace_refs(declared.get(id(op), op), swap) for op in graph.operations
                       if id(op) not in dropped)
    variables = tuple(dataclasses.replace(v, shape=shapes[v.name]) if v.name in shapes else v
                      for v in graph.signature.variables)
    signature = dataclasses.replace(graph.signature, variables=variables)
    return dataclasses.replace(graph, tensors=tensors, operations=operations, signature=signature,
                               quantization=quantization)
