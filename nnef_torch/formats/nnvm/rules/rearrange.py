"""MXNet operators that repeat, join, reorder, split or mask items without computing new values: tile, repeat,
broadcast_axis (broadcast_axes), broadcast_like, stack, reverse, _split_v2 and SequenceMask. Each is a static
rearrangement in NNEF (tile, stack, slice, split, select); results with no items (a repeat count or an extent of 0)
are refused, since NNEF tensors are never empty."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nnef_torch.formats.nnvm.node import MAX_NODE_RESULTS, OpNode
from nnef_torch.formats.nnvm.rules.common import align, axes, axis
from nnef_torch.formats.nnvm.rules.nnvm_tensor import broadcast_to_shape
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"


def _tiled(b: Builder, x: Any, repeats: Sequence[int]) -> Any:
    return b.op("tile", x, repeats=list(repeats)) if any(r != 1 for r in repeats) else b.op("copy", x)


@import_rule("tile", NNVM, "tile")
def tile(b: Builder, node: OpNode) -> Any:
    """numpy's tile: `reps` and the input's shape are aligned from the right, the shorter padded with ones in
    front; no reps is a copy."""
    node.arity(1)
    x = node.input(0)
    reps = list(node.attrs.shape("reps"))
    if any(r <= 0 for r in reps):
        raise node.fail(f"reps {reps} must be positive (a 0 gives an array with no items, which NNEF lacks)")
    rank = max(b.rank(x), len(reps))
    return _tiled(b, align(b, x, rank), [1] * (rank - len(reps)) + reps)


@import_rule("tile", NNVM, "repeat")
def repeat(b: Builder, node: OpNode) -> Any:
    """numpy's repeat: each item `repeats` times along `axis`, or along the flattened input without one."""
    node.arity(1)
    x = node.input(0)
    count = node.attrs.int("repeats")
    given = node.attrs.int("axis", None)
    if count <= 0:
        raise node.fail(f"repeats is {count}; it must be positive (0 gives an array with no items, which NNEF lacks)")
    if given is None:
        x = b.op("reshape", x, shape=[math.prod(b.shape(x))]) if b.rank(x) != 1 else x
        given = 0
    shape = list(b.shape(x))
    dim = axis(node, given, len(shape))
    if count == 1:
        return b.op("copy", x)
    spread = b.op("tile", b.op("unsqueeze", x, axes=[dim + 1]),
                  repeats=[1] * (dim + 1) + [count] + [1] * (len(shape) - dim - 1))
    shape[dim] *= count
    return b.op("reshape", spread, shape=shape)


@import_rule("tile", NNVM, "broadcast_axis", "broadcast_axes")
def broadcast_axis(b: Builder, node: OpNode) -> Any:
    """Axes `axis` (of extent 1) repeated to extents `size`."""
    node.arity(1)
    x = node.input(0)
    shape = list(b.shape(x))
    given, sizes = node.attrs.ints("axis", ()), node.attrs.ints("size", ())
    if len(given) != len(sizes):
        raise node.fail(f"axis {list(given)} and size {list(sizes)} must have equal lengths")
    target = list(shape)
    for dim, size in zip(axes(node, given, len(shape)), sizes):
        if shape[dim] != 1 or size <= 0:
            raise node.fail(f"axis {dim} of shape {shape} must have extent 1 and a positive target size, found "
                            f"size {size}")
        target[dim] = size
    return broadcast_to_shape(b, node, x, target)


@import_rule("tile", NNVM, "broadcast_like")
def broadcast_like(b: Builder, node: OpNode) -> Any:
    """The first input broadcast to the shape of the second (whose values are not read): all of it when
    `lhs_axes` or `rhs_axes` is unset (equal ranks), else extent rhs_axes[i] of the second on axis lhs_axes[i]."""
    node.arity(2)
    x, like = node.inputs
    shape, other = list(b.shape(x)), list(b.shape(like))
    lhs, rhs = node.attrs.ints("lhs_axes", None), node.attrs.ints("rhs_axes", None)
    if lhs is None or rhs is None:
        if len(shape) != len(other):
            raise node.fail(f"shape {shape} cannot be broadcast like {other}: the ranks differ")
        return broadcast_to_shape(b, node, x, other)
    if len(lhs) != len(rhs) or not lhs:
        raise node.fail(f"lhs_axes {list(lhs)} and rhs_axes {list(rhs)} must be equally long and not empty")
    target = list(shape)
    for source, copied in zip(lhs, rhs):
        dim, dim_like = axis(node, source, len(shape), "lhs_axes"), axis(node, copied, len(other), "rhs_axes")
        if shape[dim] != 1:
            raise node.fail(f"axis {dim} of shape {shape} has extent {shape[dim]}, not 1: it cannot be broadcast")
        target[dim] = other[dim_like]
    return broadcast_to_shape(b, node, x, target)


@import_rule("stack", NNVM, "stack")
def stack(b: Builder, node: OpNode) -> Any:
    count = node.attrs.int("num_args")
    if count != len(node.inputs) or count < 1:
        raise node.fail(f"num_args is {count} but the node has {len(node.inputs)} inputs")
    shapes = {tuple(b.shape(value)) for value in node.inputs}
    if len(shapes) != 1:
        raise node.fail(f"stacked inputs must have equal shapes, found {sorted(list(s) for s in shapes)}")
    dim = axis(node, node.attrs.int("axis", 0), b.rank(node.input(0)) + 1)
    if count == 1:
        return b.op("unsqueeze", node.input(0), axes=[dim])
    return b.op("stack", list(node.inputs), axis=dim)


@import_rule("slice", NNVM, "reverse")
def reverse(b: Builder, node: OpNode) -> Any:
    """The items of axes `axis` in reverse order (MXNet's `flip` is this operator too; NNVM's rule reads it)."""
    node.arity(1)
    x = node.input(0)
    shape = b.shape(x)
    chosen = axes(node, node.attrs.ints("axis"), len(shape))
    if not chosen:
        return b.op("copy", x)
    return b.op("slice", x, axes=chosen, begin=[-1] * len(chosen), end=[-shape[a] - 1 for a in chosen],
                stride=[-1] * len(chosen))


def split_bounds(node: OpNode, extent: int) -> list[tuple[int, int]]:
    """_split_v2's parts as (begin, end) on the split axis: `sections` parts, the first extent % sections of them
    one item longer; or parts starting at each of `indices` (the first 0), each running to the next (the last to
    the end)."""
    sections = node.attrs.int("sections", 0)
    starts = list(node.attrs.ints("indices", (), max_items=MAX_NODE_RESULTS))
    if sections > 0:
        node.results("sections", sections)
        size, longer = divmod(extent, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + size + (1 if i < longer else 0))
        parts = list(zip(bounds, bounds[1:]))
    elif starts:
        parts = list(zip(starts, starts[1:] + [extent]))
    else:
        raise node.fail("_split_v2 needs positive 'sections' or some 'indices'")
    if parts[0][0] != 0:  # MXNet's shape inference needs the parts to make up the axis
        raise node.fail(f"indices {starts} must start at 0")
    bad = [(low, high) for low, high in parts if not 0 <= low < high <= extent]
    if bad:
        raise node.fail(f"parts {bad} of extent {extent} are empty or out of range (NNEF tensors are never empty)")
    return parts


@import_rule("split", NNVM, "_split_v2")
def split_v2(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    shape = b.shape(x)
    dim = axis(node, node.attrs.int("axis", 1), len(shape))
    parts = split_bounds(node, shape[dim])
    squeeze_axis = node.attrs.bool("squeeze_axis", False)
    if squeeze_axis and any(high - low != 1 for low, high in parts):
        raise node.fail(f"squeeze_axis needs parts of extent 1, found {[high - low for low, high in parts]}")
    if len(parts) == 1:
        found = [b.op("copy", x)]
    else:
        found = list(b.op("split", x, axis=dim, ratios=[high - low for low, high in parts]))
    if squeeze_axis and len(shape) > 1:
        found = [b.op("squeeze", part, axes=[dim]) for part in found]
    return tuple(found)


@import_rule("select", NNVM, "SequenceMask")
def sequence_mask(b: Builder, node: OpNode) -> Any:
    """Items of a batch of sequences (the sequence axis `axis`, 0 or 1, the batch the other) at positions from
    the sequence's length on set to `value`. The lengths (a vector over the batch) are truncated to whole
    numbers, as MXNet reads them (so is `value` for integer data); without use_sequence_length nothing is
    masked."""
    use_length = node.attrs.bool("use_sequence_length", False)
    value = float(node.attrs.float("value", 0.0))
    sequence_axis = node.attrs.int("axis", 0)
    node.arity(2 if use_length else 1)
    x = node.input(0)
    shape = b.shape(x)
    if len(shape) < 2 or sequence_axis not in (0, 1):
        raise node.fail(f"SequenceMask needs an input of rank 2 or more and axis 0 or 1, found shape {list(shape)} "
                        f"and axis {sequence_axis}")
    if not use_length:
        return b.op("copy", x)
    steps, batch = shape[sequence_axis], shape[1 - sequence_axis]
    lengths = node.input(1)
    if tuple(b.shape(lengths)) != (batch,):
        raise node.fail(f"sequence_length must have shape [{batch}], found {list(b.shape(lengths))}")
    if b.dtype(lengths) != "scalar":
        lengths = b.op("cast", lengths, generic="scalar")
    if b.dtype(x) == "logical":
        raise node.fail("SequenceMask of logical data: MXNet masks numbers only")
    position_shape, length_shape = ([steps, 1], [1, batch]) if sequence_axis == 0 else ([1, steps], [batch, 1])
    positions = b.op("constant", shape=position_shape,
                     value=[float(i) for i in range(node.computed("SequenceMask positions", steps))])
    # positions are whole numbers, so position < floor(length) is position < trunc(length) for the lengths that
    # mask anything (MXNet's kernel writes outside the tensor for negative ones)
    kept = b.op("lt", positions, b.op("floor", b.op("reshape", lengths, shape=length_shape)))
    if len(shape) > 2:  # spelled out to the data's shape: the Khronos executor crashes on a select broadcasting
        # its condition against a literal
        kept = b.op("tile", b.op("unsqueeze", kept, axes=list(range(2, len(shape)))), repeats=[1, 1, *shape[2:]])
    return b.op("select", kept, x, int(value) if b.dtype(x) == "integer" else value)  # MXNet casts it so
