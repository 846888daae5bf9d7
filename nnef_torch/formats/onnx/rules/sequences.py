"""ONNX sequence operators, resolved while converting: a sequence value is a Python list, known while converting,
whose items are IR tensors (`Ref`) or arrays known while converting. Its length and the positions read or written
must be known too; what reaches the graph is the tensors taken from it (SequenceAt) or joined from it
(ConcatFromSequence). torch.jit.script writes them for a Python list appended to in a loop, which the Loop rule
(control.py) unrolls, threading the list from one iteration to the next. A sequence is no NNEF tensor, so one
that reaches a graph output is refused (convert.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
MAX_ITEMS = 4096  # items one sequence may hold (each an NNEF tensor once joined)
# the operators that read a sequence input (others refuse one: convert.py); If reads none, Loop carries them
READERS = frozenset({"SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength", "ConcatFromSequence",
                     "Identity", "Loop"})


def _sequence(node: OnnxNode, position: int) -> list[Any]:
    value = node.raw(position)
    if not isinstance(value, list):
        raise node.fail(f"input {position} is a tensor; expected a sequence")
    return value


def _position(node: OnnxNode, position: int, length: int, default: int, end_allowed: bool = False) -> int:
    """Input `position` (an index into a sequence of `length` items, negative from the end), or `default`."""
    if not node.has(position):
        return default
    values = node.ints(position, "the position")
    if len(values) != 1:
        raise node.fail(f"the position (input {position}) has {len(values)} items; expected one")
    index, top = values[0], length + 1 if end_allowed else length
    if not -length <= index < top:
        raise node.fail(f"position {index} is out of range for a sequence of {length} item(s)")
    return index + length if index < 0 else index


def _grown(node: OnnxNode, items: list[Any]) -> list[Any]:
    if len(items) > MAX_ITEMS:
        raise node.fail(f"the sequence grows past {MAX_ITEMS} items, the most nnef_torch holds")
    return items


def _shape(b: Builder, item: Any) -> tuple[int, ...]:
    return tuple(item.shape) if isinstance(item, np.ndarray) else b.shape(item)


@import_rule("copy", ONNX, "SequenceEmpty")
def sequence_empty(b: Builder, node: OnnxNode) -> Any:
    node.attr("dtype")  # the item type: items bring their own
    return []


@import_rule("copy", ONNX, "SequenceConstruct")
def sequence_construct(b: Builder, node: OnnxNode) -> Any:
    return _grown(node, [node.raw(i) for i in range(len(node.inputs))])


@import_rule("copy", ONNX, "SequenceInsert")
def sequence_insert(b: Builder, node: OnnxNode) -> Any:
    items = _sequence(node, 0)
    at = _position(node, 2, len(items), len(items), end_allowed=True)
    return _grown(node, items[:at] + [node.raw(1)] + items[at:])  # a new list: the input may be read again


@import_rule("copy", ONNX, "SequenceAt")
def sequence_at(b: Builder, node: OnnxNode) -> Any:
    items = _sequence(node, 0)
    if not node.has(1):
        raise node.fail("the position (input 1) is missing")
    return items[_position(node, 1, len(items), 0)]


@import_rule("copy", ONNX, "SequenceErase")
def sequence_erase(b: Builder, node: OnnxNode) -> Any:
    items = _sequence(node, 0)
    if not items:
        raise node.fail("the sequence is empty: nothing to erase")
    at = _position(node, 1, len(items), len(items) - 1)
    return items[:at] + items[at + 1:]


@import_rule("copy", ONNX, "SequenceLength")
def sequence_length(b: Builder, node: OnnxNode) -> Any:
    return np.array(len(_sequence(node, 0)), np.int64)


@import_rule("concat", ONNX, "ConcatFromSequence")
def concat_from_sequence(b: Builder, node: OnnxNode) -> Any:
    items = _sequence(node, 0)
    new_axis = node.only("new_axis", (0, 1), 0)
    axis = node.attr("axis")
    if axis is None:
        raise node.fail("attribute 'axis' is missing")
    if not items:
        raise node.fail("the sequence is empty (NNEF has no empty tensors)")
    shapes = {_shape(b, item) for item in items}
    rank = len(next(iter(shapes)))
    axis = node.axis(int(axis), rank + new_axis)
    if new_axis and len(shapes) > 1:
        raise node.fail(f"items of shapes {sorted(shapes)} cannot be stacked (new_axis 1 needs equal shapes)")
    if all(isinstance(item, np.ndarray) for item in items):
        return np.stack(items, axis) if new_axis else np.concatenate(items, axis)
    parts = [node.as_tensor(item) for item in items]
    if new_axis:
        parts = [b.op("unsqueeze", part, axes=[axis]) for part in parts]
    return b.op("concat", parts, axis=axis)


@import_rule("split", ONNX, "SplitToSequence")
def split_to_sequence(b: Builder, node: OnnxNode) -> Any:
    extents = node.shape(0)
    axis = node.axis(int(node.attr("axis", 0)), len(extents))
    keepdims = node.only("keepdims", (0, 1), 1)
    extent = extents[axis]
    if node.has(1):  # sizes, or one chunk size (the last chunk smaller); keepdims does not apply
        sizes = node.ints(1, "split")
        if node.const(1, "split").ndim == 0:
            if sizes[0] <= 0:
                raise node.fail(f"split chunk size {sizes[0]} is not positive")
            sizes = [min(sizes[0], extent - start) for start in range(0, extent, sizes[0])]
        if sum(sizes) != extent or not sizes or min(sizes) <= 0:
            raise node.fail(f"split sizes {sizes} do not divide extent {extent}")
        squeeze = False
    else:  # one item per index of the axis, the axis dropped unless keepdims
        sizes, squeeze = [1] * extent, not keepdims
    _grown(node, sizes)
    starts = np.cumsum([0] + sizes)
    if node.known(0):
        array = node.const(0)
        parts = np.split(array, starts[1:-1], axis)
        return [np.squeeze(part, axis) if squeeze else part for part in parts]
    x = node.tensor(0)
    parts = [b.op("slice", x, axes=[axis], begin=[int(s)], end=[int(e)]) for s, e in zip(starts[:-1], starts[1:])]
    return [b.op("squeeze", part, axes=[axis]) for part in parts] if squeeze else parts
