"""NNVM's tensor and vision operators (dmlc/nnvm `src/top/tensor`, `src/top/vision` and their TVM successors) that
MXNet does not share, or shares with another meaning: matmul, the element-wise and broadcast operators NNVM adds
(mod, pow, maximum, minimum, logical, indicator masks), the initializers (full, zeros, ones, *_like), collapse_sum,
argmax / argmin, broadcast_to, expand_like, reshape_like, flip, slice_like, gather_nd, _assign, and the vision
operators multibox_prior, yolo reorg, region and yolo. Integer bit shifts, box decoding and non-maximum suppression
are refused with the reason.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.formats.nnvm.rules.common import DTYPES, axes, broadcast_pair, dtype_of
from nnef_torch.formats.nnvm.rules.elementwise import _binary, fix
from nnef_torch.ir.builder import Builder, Unmappable
from nnef_torch.ir.limits import MAX_RESULTS
from nnef_torch.ops.registry import import_rule, refuse_import

NNVM = "nnvm"
EXACT_INDEX = 2 ** 24  # float32 holds every integer up to here: flat indices computed in scalar arithmetic


def _scalars(node: OpNode, b: Builder, *values: Any) -> None:
    """NNEF arithmetic is on scalars: integer tensors would need integer arithmetic NNEF does not have."""
    for value in values:
        if b.dtype(value) != "scalar":
            raise Unmappable(f"{node.op} on {b.dtype(value)} tensors: NNEF's arithmetic takes scalar tensors only")


# ------------------------------------------------------------------------------------------------------- matmul
@import_rule("matmul", NNVM, "matmul")
def matmul(b: Builder, node: OpNode) -> Any:
    """NNVM's matmul is numpy's dot: the last axis of lhs with the first of rhs; transposing reverses all axes;
    a vector is a matrix of one row."""
    node.arity(2)
    lhs, rhs = node.inputs
    transpose_a, transpose_b = node.attrs.bool("transpose_a", False), node.attrs.bool("transpose_b", False)
    lhs, rhs = (b.op("reshape", v, shape=[1, b.shape(v)[0]]) if b.rank(v) == 1 else v for v in (lhs, rhs))
    if b.rank(lhs) == 2 and b.rank(rhs) == 2:
        left = b.shape(lhs)[0 if transpose_a else 1]
        right = b.shape(rhs)[1 if transpose_b else 0]
        if left != right:
            raise node.fail(f"matmul contracts extents {left} and {right}, which differ")
        return b.op("matmul", lhs, rhs, transposeA=transpose_a, transposeB=transpose_b)
    if transpose_a:
        lhs = b.op("transpose", lhs, axes=list(range(b.rank(lhs)))[::-1])
    if transpose_b:
        rhs = b.op("transpose", rhs, axes=list(range(b.rank(rhs)))[::-1])
    left, right = b.shape(lhs), b.shape(rhs)
    if left[-1] != right[0]:
        raise node.fail(f"matmul contracts the last axis of {list(left)} with the first of {list(right)}: they differ")
    product = b.op("matmul", b.op("reshape", lhs, shape=[math.prod(left[:-1]), left[-1]]),
                   b.op("reshape", rhs, shape=[right[0], math.prod(right[1:])]))
    return b.op("reshape", product, shape=list(left[:-1]) + list(right[1:]))


# ------------------------------------------------------------------------------------------------------- element-wise
for _op, _names in {
    "add": ("__add_symbol__",), "sub": ("__sub_symbol__",), "mul": ("__mul_symbol__",), "div": ("__div_symbol__",),
    "pow": ("elemwise_pow", "broadcast_pow", "__pow_symbol__"), "max": ("broadcast_max", "__max_symbol__"),
    "min": ("broadcast_min", "__min_symbol__"), "gt": ("__greater_symbol__",),
    "lt": ("broadcast_less", "__less_symbol__"), "le": ("broadcast_less_equal", "__less_equal_symbol__"),
    "ge": ("__greater_equal_symbol__",), "eq": ("__equal_symbol__",), "ne": ("__not_equal_symbol__",),
}.items():
    import_rule(_op, NNVM, *_names)(_binary(_op))


@import_rule("sub", NNVM, "elemwise_mod", "broadcast_mod", "__mod_symbol__")
def mod(b: Builder, node: OpNode) -> Any:
    """TVM's mod is truncated (C's fmod): x - trunc(x / y) * y, with the sign of x. In float32 arithmetic the
    quotient can round across a whole number when x is within an ulp of a multiple of y."""
    node.arity(2)
    x, y = broadcast_pair(b, node.input(0), node.input(1))
    if node.op == "elemwise_mod" and b.shape(x) != b.shape(y):
        raise node.fail(f"element-wise operands must have equal shapes, found {list(b.shape(x))} and "
                        f"{list(b.shape(y))}")
    _scalars(node, b, x, y)
    return b.op("sub", x, b.op("mul", fix(b, b.op("div", x, y)), y))


def _truth(b: Builder, x: Any) -> Any:
    return x if b.dtype(x) == "logical" else b.op("ne", x, 0.0)


def _logical(op: str) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1 if op == "not" else 2)
        values = [_truth(b, value) for value in node.inputs]
        if len(values) == 2 and b.shape(values[0]) != b.shape(values[1]):
            raise node.fail(f"operands must have equal shapes, found {[list(b.shape(v)) for v in values]}")
        out = b.op(op, *values)
        # on logical tensors the result is logical; on numbers it is 1.0 or 0.0
        return out if all(b.dtype(v) == "logical" for v in node.inputs) else b.op("select", out, 1.0, 0.0)
    rule.__name__ = f"logical_{op}"
    return rule


import_rule("and", NNVM, "logical_and")(_logical("and"))
import_rule("or", NNVM, "logical_or")(_logical("or"))
import_rule("not", NNVM, "logical_not")(_logical("not"))

_SHIFT = "integer bit shifts have no NNEF form (NNEF's arithmetic is on scalars), and TVM shifts only integers"
refuse_import(NNVM, _SHIFT, "__lshift_scalar__", "broadcast_left_shift", "__left_shift_symbol__", "__rshift_scalar__",
              "broadcast_right_shift", "__right_shift_symbol__")
refuse_import(NNVM, "it stands for a gradient that does not exist and has no value", "__undef__")


@import_rule("add_n", NNVM, "elemwise_sum", "add_n", "ElementWiseSum")  # NNVM's name, then MXNet's two
def elemwise_sum(b: Builder, node: OpNode) -> Any:
    count = node.attrs.int("num_args", len(node.inputs))
    if count != len(node.inputs) or count < 1:
        raise node.fail(f"num_args is {count} but the node has {len(node.inputs)} inputs")
    if count == 1:
        return b.op("copy", node.input(0))
    return b.op("add_n", list(node.inputs))


@import_rule("copy", NNVM, "block_grad")
def block_grad(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    return b.op("copy", node.input(0))


# ------------------------------------------------------------------------------------------------------- initializers
def _typed(kind: str, value: float) -> Any:
    return bool(value) if kind == "logical" else int(value) if kind == "integer" else float(value)


def _filled(b: Builder, shape: Sequence[int], kind: str, value: float) -> Any:
    return b.op("constant", shape=list(shape), value=[_typed(kind, value)], generic=kind)


def _init(key: str | None, value: float = 0.0) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(0)
        shape = node.attrs.shape("shape", ())
        kind = dtype_of(np.dtype(DTYPES[node.attrs.choice("dtype", sorted(DTYPES), "float32")]))
        fill = node.attrs.float(key) if key else value
        if not shape or any(extent <= 0 for extent in shape):
            raise node.fail(f"shape {list(shape)} must be given, with positive extents")
        return _filled(b, shape, kind, fill)
    rule.__name__ = f"init_{key or int(value)}"
    return rule


import_rule("constant", NNVM, "full")(_init("fill_value"))
import_rule("constant", NNVM, "fill")(_init("value"))
import_rule("constant", NNVM, "zeros")(_init(None, 0.0))
import_rule("constant", NNVM, "ones")(_init(None, 1.0))


@import_rule("constant", NNVM, "full_like", "fill_like")
def full_like(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    if node.op == "fill_like":  # the first name of full_like, with the parameters of fill
        node.attrs.shape("shape", ())
        node.attrs.str("dtype", "float32")
    value = node.attrs.float("fill_value" if node.op == "full_like" else "value")
    return _filled(b, b.shape(x), b.dtype(x), value)


# ------------------------------------------------------------------------------------------------------- reductions
def reduce_axes(node: OpNode, rank: int) -> list[int]:
    """NNVM's reduction axes: `axis` (all axes when empty, whatever `exclude` says), or the others with `exclude`."""
    given = node.attrs.ints("axis", ())
    exclude = node.attrs.bool("exclude", False)
    if not given:
        return list(range(rank))
    chosen = axes(node, given, rank)
    return [a for a in range(rank) if a not in chosen] if exclude else sorted(chosen)


def _keep(b: Builder, node: OpNode, reduced: Any, chosen: list[int], rank: int) -> Any:
    if node.attrs.bool("keepdims", False):
        return reduced
    if len(chosen) == rank:
        return b.op("reshape", reduced, shape=[1])
    return b.op("squeeze", reduced, axes=chosen)


def search(b: Builder, op: str, x: Any, chosen: Sequence[int]) -> Any:
    """argmax_reduce or argmin_reduce over the axes `chosen` (the index counted row-major within them), written
    over one axis: the searched axes moved last and merged (the Khronos executor searches one axis only)."""
    if len(chosen) == 1:
        return b.op(op, x, axes=list(chosen))
    shape = b.shape(x)
    kept = [a for a in range(len(shape)) if a not in chosen]
    order = kept + sorted(chosen)
    moved = b.op("transpose", x, axes=order) if order != list(range(len(shape))) else x
    merged = b.op("reshape", moved, shape=[shape[a] for a in kept] + [math.prod(shape[a] for a in chosen)])
    found = b.op(op, merged, axes=[len(kept)])
    return b.op("reshape", found, shape=[1 if a in chosen else extent for a, extent in enumerate(shape)])


def _arg(op: str) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        x = node.input(0)
        rank = b.rank(x)
        chosen = reduce_axes(node, rank)
        mxnet = node.mxnet_version is not None  # MXNet gives the index as a float
        name = node.attrs.choice("dtype", sorted(DTYPES), "float32" if mxnet else "int32")
        kind = dtype_of(np.dtype(DTYPES[name]))
        _scalars(node, b, x)
        if not chosen:
            raise node.fail("exclude leaves no axis to reduce")
        found = _keep(b, node, search(b, op, x, chosen), chosen, rank)
        return found if kind == "integer" else b.op("cast", found, generic=kind)
    rule.__name__ = op
    return rule


import_rule("argmax_reduce", NNVM, "argmax")(_arg("argmax_reduce"))
import_rule("argmin_reduce", NNVM, "argmin")(_arg("argmin_reduce"))


def _mask(op: str) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        x = node.input(0)
        extreme = b.op(op, x, axes=reduce_axes(node, b.rank(x)))
        return b.op("select", b.op("eq", x, extreme), 1.0, 0.0)
    rule.__name__ = f"mask_{op}"
    return rule


import_rule("eq", NNVM, "_max_mask")(_mask("max_reduce"))
import_rule("eq", NNVM, "_min_mask")(_mask("min_reduce"))


@import_rule("sum_reduce", NNVM, "collapse_sum")
def collapse_sum(b: Builder, node: OpNode) -> Any:
    """The sum of data down to the shape of `as`, undoing numpy broadcasting."""
    node.arity(2)
    node.attrs.ints("axis", ())
    node.attrs.bool("keepdims", False)
    node.attrs.bool("exclude", False)
    x, like = node.inputs
    shape, target = b.shape(x), b.shape(like)
    lead = len(shape) - len(target)
    if lead < 0 or any(t not in (1, s) for s, t in zip(shape[lead:], target)):
        raise node.fail(f"shape {list(shape)} cannot be summed down to {list(target)}")
    reduced = list(range(lead)) + [lead + i for i, (s, t) in enumerate(zip(shape[lead:], target)) if t == 1 and s != 1]
    out = b.op("sum_reduce", x, axes=reduced) if reduced else x
    return b.op("reshape", out, shape=list(target))


# ------------------------------------------------------------------------------------------------------- shapes
def broadcast_to_shape(b: Builder, node: OpNode, x: Any, target: Sequence[int]) -> Any:
    shape = b.shape(x)
    if len(shape) != len(target) or any(s not in (1, t) for s, t in zip(shape, target)):
        raise node.fail(f"shape {list(shape)} cannot be broadcast to {list(target)}")
    repeats = [t // s for s, t in zip(shape, target)]
    return b.op("tile", x, repeats=repeats) if any(r > 1 for r in repeats) else b.op("copy", x)


@import_rule("tile", NNVM, "broadcast_to")
def broadcast_to(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    shape = node.attrs.shape("shape")
    if len(shape) != b.rank(x):
        raise node.fail(f"shape {list(shape)} must have one extent per input axis ({b.rank(x)})")
    return broadcast_to_shape(b, node, x, [s if t == 0 else t for s, t in zip(b.shape(x), shape)])


@import_rule("tile", NNVM, "expand_like")
def expand_like(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    x, like = node.inputs
    target = b.shape(like)
    given = node.attrs.ints("axis", ())
    exclude = node.attrs.bool("exclude", False)
    if b.rank(x) == len(target):
        return broadcast_to_shape(b, node, x, target)
    chosen = axes(node, given, len(target))
    if exclude:
        chosen = [a for a in range(len(target)) if a not in chosen]
    if b.rank(x) + len(chosen) != len(target):
        if b.rank(x) == 1 and len(chosen) == len(target):  # a scalar held in a vector: its first item, everywhere
            first = b.op("slice", x, axes=[0], begin=[0], end=[1]) if b.shape(x)[0] > 1 else x
            return broadcast_to_shape(b, node, b.op("reshape", first, shape=[1] * len(target)), target)
        raise node.fail(f"expanding shape {list(b.shape(x))} at axes {chosen} does not give rank {len(target)}")
    return broadcast_to_shape(b, node, b.op("unsqueeze", x, axes=sorted(chosen)), target)


@import_rule("reshape", NNVM, "reshape_like")
def reshape_like(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    x, like = node.inputs
    if math.prod(b.shape(x)) != math.prod(b.shape(like)):
        raise node.fail(f"shape {list(b.shape(x))} cannot be reshaped like {list(b.shape(like))}")
    return b.op("reshape", x, shape=list(b.shape(like)))


@import_rule("slice", NNVM, "flip")
def flip(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    shape = b.shape(x)
    chosen = axes(node, node.attrs.ints("axis", (0,)), len(shape))
    return b.op("slice", x, axes=chosen, begin=[-1] * len(chosen), end=[-shape[a] - 1 for a in chosen],
                stride=[-1] * len(chosen))


@import_rule("slice", NNVM, "slice_like")
def slice_like(b: Builder, node: OpNode) -> Any:
    """The leading part of data with the extents of the second input, on `axis` (MXNet: `axes`), or on every
    axis both have."""
    node.arity(2)
    x, like = node.inputs
    shape, target = b.shape(x), b.shape(like)
    key = "axes" if node.attrs.has("axes") else "axis"
    given = node.attrs.ints(key, ())
    chosen = axes(node, given, len(shape), key) if given else list(range(min(len(shape), len(target))))
    if any(a >= len(target) for a in chosen):
        raise node.fail(f"{key} {list(given)} names an axis the second input (shape {list(target)}) lacks")
    bad = [a for a in chosen if target[a] > shape[a]]
    if bad:
        raise node.fail(f"shape {list(target)} exceeds the input shape {list(shape)} on axes {bad}")
    cut = sorted(a for a in chosen if target[a] != shape[a])
    if not cut:
        return b.op("copy", x)
    return b.op("slice", x, axes=cut, begin=[0] * len(cut), end=[target[a] for a in cut])


@import_rule("gather", NNVM, "gather_nd")
def gather_nd(b: Builder, node: OpNode) -> Any:
    """data[indices[0, ...], ..., indices[M - 1, ...], :]: the M leading axes of data flattened into one, and
    gathered at the flat index (computed in scalar arithmetic, exact below 2^24)."""
    node.arity(2)
    data, index = node.inputs
    shape, positions = b.shape(data), b.shape(index)
    if len(positions) < 2 or positions[0] > len(shape):
        raise node.fail(f"indices of shape {list(positions)} must have rank 2 or more and at most {len(shape)} rows")
    count = positions[0]
    leading = math.prod(shape[:count])
    if leading > EXACT_INDEX:
        raise Unmappable(f"the {leading} items of the indexed axes exceed what scalar index arithmetic holds exactly")
    if b.dtype(index) == "integer":
        index = b.op("cast", index, generic="scalar")
    flat = None
    for i in range(count):
        row = b.op("squeeze", b.op("slice", index, axes=[0], begin=[i], end=[i + 1]), axes=[0])
        stride = math.prod(shape[i + 1:count])
        term = b.op("mul", row, float(stride)) if stride != 1 else row
        flat = term if flat is None else b.op("add", flat, term)
    source = b.op("reshape", data, shape=[leading] + list(shape[count:])) if count != 1 else data
    return b.op("gather", source, b.op("cast", flat, generic="integer"), axis=0)


@import_rule("update", NNVM, "_assign", params=(0,), state=(0,))
def assign(b: Builder, node: OpNode) -> Any:
    """lhs (a variable) takes the value of rhs, which is also the result."""
    node.arity(2)
    lhs, rhs = node.inputs
    if not any(variable.name == getattr(lhs, "name", None) for variable in b.variables):
        raise Unmappable("_assign writes its first input, which must be a variable (a parameter)")
    if b.shape(lhs) != b.shape(rhs):
        raise node.fail(f"_assign of shape {list(b.shape(rhs))} to a variable of shape {list(b.shape(lhs))}")
    b.update(lhs, rhs)
    return b.op("copy", rhs)


# ------------------------------------------------------------------------------------------------------- vision
def prior_boxes(height: int, width: int, sizes: Sequence[float], ratios: Sequence[float], steps: Sequence[float],
                offsets: Sequence[float]) -> np.ndarray:
    """multibox_prior's anchors [1, height * width * (sizes + ratios - 1), 4] as (left, top, right, bottom): per
    cell, one box per size at the first ratio, then one per further ratio at the first size."""
    step_y = steps[0] if steps[0] > 0 else 1.0 / height
    step_x = steps[1] if steps[1] > 0 else 1.0 / width
    halves = [(size * height / width / 2.0, size / 2.0) for size in sizes]
    halves += [(sizes[0] * height / width * math.sqrt(ratio) / 2.0, sizes[0] / math.sqrt(ratio) / 2.0)
               for ratio in ratios[1:]]
    half = np.array(halves, dtype=np.float64)  # [k, (w, h)]
    cy = (np.arange(height) + offsets[0]) * step_y
    cx = (np.arange(width) + offsets[1]) * step_x
    centre_x = np.broadcast_to(cx[None, :, None], (height, width, len(half)))
    centre_y = np.broadcast_to(cy[:, None, None], (height, width, len(half)))
    boxes = np.stack([centre_x - half[:, 0], centre_y - half[:, 1], centre_x + half[:, 0], centre_y + half[:, 1]], -1)
    return boxes.reshape(1, -1, 4).astype(np.float32)


@import_rule("constant", NNVM, "multibox_prior")
def multibox_prior(b: Builder, node: OpNode) -> Any:
    """Anchors depend on the input's shape only: a constant."""
    node.arity(1)
    shape = b.shape(node.input(0))
    if len(shape) != 4:
        raise node.fail(f"multibox_prior needs an NCHW input, found shape {list(shape)}")
    sizes, ratios = node.attrs.numbers("sizes", (1.0,)), node.attrs.numbers("ratios", (1.0,))
    steps, offsets = node.attrs.numbers("steps", (-1.0, -1.0)), node.attrs.numbers("offsets", (0.5, 0.5))
    if not sizes or not ratios or len(steps) != 2 or len(offsets) != 2 or any(r <= 0 for r in ratios):
        raise node.fail(f"sizes {sizes}, ratios {ratios} (positive), steps {steps} and offsets {offsets} (2 each)")
    node.computed("multibox_prior anchors", shape[2] * shape[3] * (len(sizes) + len(ratios) - 1) * 4)
    with np.errstate(all="ignore"):
        boxes = prior_boxes(shape[2], shape[3], sizes, ratios, steps, offsets)
    if node.attrs.bool("clip", False):
        boxes = np.clip(boxes, 0.0, 1.0)
    if not np.isfinite(boxes).all():
        raise node.fail(f"sizes {sizes}, ratios {ratios}, steps {steps} and offsets {offsets} give anchors beyond the "
                        "range of float32")
    return b.op("constant", shape=list(boxes.shape), value=[float(v) for v in boxes.reshape(-1)])


_DETECTION = ("its output is data-dependent: boxes are compacted by a score test or suppression loop and the rows "
              "past the valid count are left undefined, which no static NNEF graph expresses")
refuse_import(NNVM, _DETECTION, "multibox_transform_loc", "non_max_suppression", "nms")


@import_rule("transpose", NNVM, "yolo_reorg", "yolo2_reorg")
def yolo_reorg(b: Builder, node: OpNode) -> Any:
    """Darknet's reorg: the input read as [N, C / s^2, H * s, W * s] gives, for each offset (dy, dx) of an s x s
    cell, a group of C / s^2 channels: out[n, (dy * s + dx) * C / s^2 + c, y, x] = in'[n, c, y * s + dy, x * s + dx]
    over H x W, read as [N, C * s^2, H / s, W / s]. (TVM's kernel reads a wrong batch offset past the first
    sample; this is darknet's meaning.)"""
    node.arity(1)
    x = node.input(0)
    stride = node.attrs.int("stride", 1)
    shape = b.shape(x)
    if len(shape) != 4 or stride <= 0:
        raise node.fail(f"reorg needs an NCHW input and a positive stride, found shape {list(shape)}, stride {stride}")
    n, c, h, w = shape
    if c % (stride * stride) or h % stride or w % stride:
        raise node.fail(f"stride {stride} must divide the height and width, and its square the channels, of "
                        f"{list(shape)}")
    if stride == 1:
        return b.op("copy", x)
    cells = b.op("reshape", x, shape=[n, c // stride ** 2 * h, stride, w, stride])  # [n, c', h, dy, w, dx]
    moved = b.op("transpose", cells, axes=[0, 2, 4, 1, 3])  # [n, dy, dx, c', h, w]
    return b.op("reshape", moved, shape=[n, c * stride * stride, h // stride, w // stride])


def _by_channel(b: Builder, node: OpNode, x: Any, entries: int, sigmoids: Sequence[int], softmax_from: int | None
                ) -> Any:
    """The [N, boxes * entries, H, W] output of a darknet detection layer: entry e of each box takes sigmoid
    sigmoids[e] times, then entries from `softmax_from` on take a softmax over them."""
    n, c, h, w = b.shape(x)
    if c % entries:
        raise node.fail(f"{c} channels are not a whole number of boxes of {entries} entries")
    boxes = b.op("reshape", x, shape=[n, c // entries, entries, h, w])
    parts, start = [], 0
    while start < entries:
        end = start + 1
        while end < entries and sigmoids[end] == sigmoids[start] and end != softmax_from:
            end += 1
        part = b.op("slice", boxes, axes=[2], begin=[start], end=[end]) if (start, end) != (0, entries) else boxes
        for _ in range(sigmoids[start]):
            part = b.op("sigmoid", part)
        parts.append(part)
        start = end
    if softmax_from is not None and softmax_from < entries:
        bounds = [0]
        for part in parts:
            bounds.append(bounds[-1] + b.shape(part)[2])
        head = [part for part, low in zip(parts, bounds) if low < softmax_from]
        tail = [part for part, low in zip(parts, bounds) if low >= softmax_from]
        scores = b.op("concat", tail, axis=2) if len(tail) > 1 else tail[0]
        parts = head + [b.op("softmax", scores, axes=[2])]
    out = b.op("concat", parts, axis=2) if len(parts) > 1 else parts[0]
    return b.op("reshape", out, shape=[n, c, h, w])


@import_rule("sigmoid", NNVM, "yolo_region", "yolo2_region")
def yolo_region(b: Builder, node: OpNode) -> Any:
    """Darknet's region layer on [N, n * (classes + coords + 1), H, W]: sigmoid on entries 0 and 1 of each box, and
    on entry `coords` (the objectness) unless `background`; with `softmax`, a softmax over the entries from
    coords + (not background) on."""
    node.arity(1)
    count, classes = node.attrs.int("n"), node.attrs.int("classes")
    coords, background = node.attrs.int("coords"), node.attrs.bool("background", False)
    softmax = node.attrs.bool("softmax", False)
    entries = classes + coords + 1
    x = node.input(0)
    if b.rank(x) != 4 or b.shape(x)[1] != count * entries or min(count, classes, coords) < 0:
        raise node.fail(f"input of shape {list(b.shape(x))} does not hold n={count} boxes of "
                        f"classes + coords + 1 = {entries} entries")
    node.results("entries", entries, MAX_RESULTS)  # a list of flags, one per entry (YOLO9000: 9418 classes)
    sigmoids = [int(e < 2) + int(e == coords and not background) for e in range(entries)]
    return _by_channel(b, node, x, entries, sigmoids, coords + int(not background) if softmax else None)


@import_rule("sigmoid", NNVM, "yolov3_yolo")
def yolov3_yolo(b: Builder, node: OpNode) -> Any:
    """YOLOv3's yolo layer on [N, n * (classes + 5), H, W]: sigmoid on every entry of each box but 2 and 3 (the
    width and height)."""
    node.arity(1)
    count, classes = node.attrs.int("n"), node.attrs.int("classes")
    entries = classes + 5
    x = node.input(0)
    if b.rank(x) != 4 or b.shape(x)[1] != count * entries:
        raise node.fail(f"input of shape {list(b.shape(x))} does not hold n={count} boxes of classes + 5 = "
                        f"{entries} entries")
    node.results("entries", entries, MAX_RESULTS)  # a list of flags, one per entry (YOLO9000: 9418 classes)
    return _by_channel(b, node, x, entries, [0 if e in (2, 3) else 1 for e in range(entries)], None)
