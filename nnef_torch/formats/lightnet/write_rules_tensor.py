"""LightNet write rules of the elementwise and tensor operations: elew with its broadcasting made explicit, clamp,
reshapes, transpose, slice and split, concat as pairs, copies, nearest resizes, and the print ops of the LightNet
front end.

LightNet's `elew` takes two tensors of one shape. NNEF broadcasts (shapes extended with trailing singleton
dimensions, then singleton extents repeated), so each operand is first given the result's shape: a value becomes a
`create` (small constants broadcast whole; weights, and larger constants, with their own items), and a tensor with
singleton extents is repeated along them by an `upsample` with integer scales (nearest neighbour, which from an
extent of 1 copies the one item).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nnef_torch.formats.lightnet.rules.tensor import nearest_indices
from nnef_torch.formats.lightnet.write import FORMAT, Const, Unmappable, Writer
from nnef_torch.ir.graph import Operation
from nnef_torch.ops.registry import write_rule

Shape = tuple[int, ...]


def aligned(shape: Shape, rank: int) -> Shape:
    """`shape` extended with trailing singleton dimensions to `rank` (NNEF broadcasting)."""
    return tuple(shape) + (1,) * (rank - len(shape))


def expand(w: Writer, name: str, shape: Shape) -> str:
    """Tensor `name` repeated along its singleton dimensions to `shape` (of the same rank)."""
    have = w.tensor_shape(name)
    if have == tuple(shape):
        return name
    if len(have) != len(shape) or any(h not in (1, s) for h, s in zip(have, shape)):
        raise AssertionError(f"cannot broadcast {list(have)} to {list(shape)}")
    scales = [s // h for h, s in zip(have, shape)]
    [out] = w.emit("upsample", {"src": name}, {"mode": "TL_NEAREST", "scales": scales},
                   {"dst": w.temp(f"{name}_expand", shape)})
    return out


def operand(w: Writer, x: Any, shape: Shape) -> str:
    """Input `x` as a LightNet tensor of exactly `shape`, broadcast as NNEF does."""
    own = w.shape(x)
    if len(own) > len(shape) or any(o not in (1, s) for o, s in zip(own, shape)):
        raise Unmappable(f"an operand of shape {list(own)} does not broadcast to {list(shape)}")
    found = w.value(x)
    if isinstance(found, Const) and (math.prod(own) == math.prod(shape) or
                                     (not found.stored and math.prod(shape) <= FULL_CONSTANT)):
        return w.tensor(x, shape)  # small constants are written out whole
    return expand(w, w.tensor(x, aligned(own, len(shape))), shape)


# constants (not weights, which keep their items) broadcast to at most this many items are written whole
FULL_CONSTANT = 1024


def binary(w: Writer, op: Operation, elew_op: str, x: Any, y: Any) -> None:
    shape = w.result_shape(op)
    a, b = operand(w, x, shape), operand(w, y, shape)
    w.emit("elew", {"src1": a, "src2": b}, {"elew_op": elew_op}, {"dst": w.result(op)})


def _elew(elew_op: str) -> Callable[[Writer, Operation], None]:
    def rule(w: Writer, op: Operation) -> None:
        binary(w, op, elew_op, op.inputs["x"], op.inputs["y"])
    rule.__name__ = f"elew_{elew_op[3:].lower()}"
    return rule


for _op, _elew_op in (("add", "TL_SUM"), ("sub", "TL_SUB"), ("mul", "TL_MUL"), ("div", "TL_DIV"), ("max", "TL_MAX"),
                      ("min", "TL_MIN"), ("pow", "TL_POW")):
    write_rule(_op, FORMAT)(_elew(_elew_op))


@write_rule("neg", FORMAT)
def neg(w: Writer, op: Operation) -> None:
    """x * -1 (exact, the sign of zero included)."""
    binary(w, op, "TL_MUL", op.inputs["x"], -1.0)


@write_rule("abs", FORMAT)
def abs_(w: Writer, op: Operation) -> None:
    """max(x, x * -1)."""
    x = op.inputs["x"]
    shape = w.result_shape(op)
    src = w.tensor(x)
    [negated] = w.emit("elew", {"src1": src, "src2": operand(w, -1.0, shape)}, {"elew_op": "TL_MUL"},
                       {"dst": w.temp(f"{w.base(op)}_neg", shape)})
    w.emit("elew", {"src1": src, "src2": negated}, {"elew_op": "TL_MAX"}, {"dst": w.result(op)})


@write_rule("clamp", FORMAT)
def clamp(w: Writer, op: Operation) -> None:
    """max(min(x, b), a), as NNEF defines it; min(relu(x), b) where a is 0."""
    x, a, b = op.inputs["x"], op.inputs["a"], op.inputs["b"]
    shape = w.result_shape(op)
    base = w.base(op)
    low = w.array(a)
    if low is not None and low.size and not low.any() and w.value(x).shape == shape:
        [floor] = w.emit("relu", {"src": w.tensor(x)}, {}, {"dst": w.temp(f"{base}_relu", shape)})
        w.emit("elew", {"src1": floor, "src2": operand(w, b, shape)}, {"elew_op": "TL_MIN"}, {"dst": w.result(op)})
        return
    [upper] = w.emit("elew", {"src1": operand(w, x, shape), "src2": operand(w, b, shape)}, {"elew_op": "TL_MIN"},
                     {"dst": w.temp(f"{base}_min", shape)})
    w.emit("elew", {"src1": upper, "src2": operand(w, a, shape)}, {"elew_op": "TL_MAX"}, {"dst": w.result(op)})


# ---------------------------------------------------------------------------------------------- shapes
@write_rule("copy", FORMAT)
def copy(w: Writer, op: Operation) -> None:
    w.alias(op, w.tensor(op.inputs["x"]))


def _reshaped(w: Writer, op: Operation) -> None:
    w.alias(op, w.tensor(op.inputs["input"]))


@write_rule("reshape", FORMAT)
def reshape(w: Writer, op: Operation) -> None:
    _reshaped(w, op)


@write_rule("squeeze", FORMAT)
def squeeze(w: Writer, op: Operation) -> None:
    _reshaped(w, op)


@write_rule("unsqueeze", FORMAT)
def unsqueeze(w: Writer, op: Operation) -> None:
    _reshaped(w, op)


@write_rule("tile", FORMAT)
def tile(w: Writer, op: Operation) -> None:
    """Repeats along singleton dimensions by one `upsample` (as broadcasting), along others by concats."""
    x = op.inputs["input"]
    repeats = list(op.attribs["repeats"])
    shape = list(w.shape(x))
    name = w.tensor(x)
    singleton = [count if extent == 1 else 1 for extent, count in zip(shape, repeats)]
    if any(count > 1 for count in singleton):
        shape = [extent * count for extent, count in zip(shape, singleton)]
        name = expand(w, name, tuple(shape))
    base = w.base(op)
    for axis, (extent, count) in enumerate(zip(w.shape(x), repeats)):
        if extent == 1 or count == 1:
            continue
        piece = name
        for _ in range(count - 1):
            shape[axis] += extent
            [name] = w.emit("concat", {"src1": name, "src2": piece}, {"axis": axis},
                            {"dst": w.temp(f"{base}_tile", tuple(shape))})
    w.alias(op, name)


@write_rule("transpose", FORMAT)
def transpose(w: Writer, op: Operation) -> None:
    x = op.inputs["input"]
    rank = w.rank(x)
    axes = list(op.attribs["axes"]) + list(range(len(op.attribs["axes"]), rank))
    if axes == list(range(rank)):
        w.alias(op, w.tensor(x))
        return
    w.emit("transpose", {"src": w.tensor(x)}, {"axes": axes}, {"dst": w.result(op)})


def slice_ranges(shape: Shape, axes: list[int], begin: list[int], end: list[int],
                 stride: list[int]) -> dict[int, tuple[int, int]]:
    """(start, length) per sliced axis, as the NNEF shape rule reads begin and end; refuses strides but 1."""
    ranges = {}
    for i, axis in enumerate(axes):
        step = stride[i] if stride else 1
        if step != 1:
            raise Unmappable(f"LightNet's slice takes every item of a range; stride {step} on axis {axis}")
        size = shape[axis]
        first, last = begin[i], end[i]
        first = first + size if first < 0 else first
        last = last + size if last < 0 else (size if last == 0 else last)
        first, last = min(max(first, 0), size), min(max(last, 0), size)
        if (first, last) != (0, size):
            ranges[axis] = (first, last - first)
    return ranges


def sliced(w: Writer, name: str, ranges: dict[int, tuple[int, int]], out: str | None, base: str) -> str:
    """`name` sliced on each axis of `ranges` in turn (the last slice is named `out`)."""
    shape = list(w.tensor_shape(name))
    for n, (axis, (start, length)) in enumerate(sorted(ranges.items())):
        shape[axis] = length
        last = n == len(ranges) - 1
        target = out if last and out is not None else w.temp(f"{base}_slice", tuple(shape))
        [name] = w.emit("slice", {"src": name}, {"axis": axis, "start": start, "len": length}, {"dst": target})
    return name


@write_rule("slice", FORMAT)
def slice_(w: Writer, op: Operation) -> None:
    x = op.inputs["input"]
    a = op.attribs
    ranges = slice_ranges(w.shape(x), list(a["axes"]), list(a["begin"]), list(a["end"]), list(a.get("stride") or []))
    if not ranges:
        w.alias(op, w.tensor(x))
        return
    sliced(w, w.tensor(x), ranges, w.result(op), w.base(op))


@write_rule("split", FORMAT)
def split(w: Writer, op: Operation) -> None:
    x = op.inputs["value"]
    axis, ratios = op.attribs["axis"], list(op.attribs["ratios"])
    name = w.tensor(x)
    unit = w.shape(x)[axis] // sum(ratios)
    start = 0
    for index, ratio in enumerate(ratios):
        length = unit * ratio
        if length == w.shape(x)[axis]:
            w.alias(op, name, "values", index)
        else:
            w.emit("slice", {"src": name}, {"axis": axis, "start": start, "len": length},
                   {"dst": w.result(op, "values", index)})
        start += length


@write_rule("concat", FORMAT)
def concat(w: Writer, op: Operation) -> None:
    """LightNet's concat joins two tensors: more are joined in pairs, left to right."""
    values = list(op.inputs["values"])
    axis = op.attribs["axis"]
    names = [w.tensor(value) for value in values]
    if len(names) == 1:
        w.alias(op, names[0])
        return
    joined = names[0]
    base = w.base(op)
    for n, name in enumerate(names[1:], start=2):
        shape = list(w.tensor_shape(joined))
        shape[axis] += w.tensor_shape(name)[axis]
        target = w.result(op) if n == len(names) else w.temp(f"{base}_concat", tuple(shape))
        [joined] = w.emit("concat", {"src1": joined, "src2": name}, {"axis": axis}, {"dst": target})


@write_rule("gather", FORMAT)
def gather(w: Writer, op: Operation) -> None:
    """A gather whose indices are those of TensorLight's nearest resize along the axis (what the front end reads
    `resize` and `upsample` as): `resize` to the new extent."""
    x, indices, axis = op.inputs["input"], op.inputs["indices"], op.attribs["axis"]
    index = w.array(indices)
    shape = w.shape(x)
    if index is None or index.ndim != 1 or not 0 <= axis < len(shape):
        raise Unmappable("LightNet gathers only as a resize: the indices must be a 1-D value")
    if not np.array_equal(index, nearest_indices(shape[axis], index.size)):
        raise Unmappable(f"LightNet gathers only as a resize: indices {index.tolist()[:8]} are not those of a "
                         f"nearest resize from {shape[axis]} to {index.size} items")
    dims = list(shape)
    dims[axis] = int(index.size)
    src = w.tensor(x)
    before = w.producer(src)
    if before is not None and before["optype"] == "resize":  # resized along another axis first: one resize
        source = before["tensors_in"][0]["name"]
        if w.tensor_shape(source)[axis] == shape[axis]:
            src = source
    w.emit("resize", {"src": src}, {"mode": "TL_NEAREST", "dims": dims}, {"dst": w.result(op)})


@write_rule("lightnet_print", FORMAT)
def lightnet_print(w: Writer, op: Operation) -> None:
    src = w.tensor(op.inputs["input"])
    w.emit("print", {"src": src}, {"msg": op.attribs["msg"]}, {})
    w.alias(op, src)


@write_rule("lightnet_fprint", FORMAT)
def lightnet_fprint(w: Writer, op: Operation) -> None:
    src = w.tensor(op.inputs["input"])
    w.emit("fprint", {"src": src}, {"msg": op.attribs["msg"], "file": op.attribs["file"]}, {})
    w.alias(op, src)
