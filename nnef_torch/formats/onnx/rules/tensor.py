"""Tensor ONNX operators: constants and shapes (known while converting), reshaping, joining and splitting,
indexing, padding and casts. Known arrays are folded with numpy; the rest are NNEF operations."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"


@import_rule("constant", ONNX, "Constant")
def constant(b: Builder, node: OnnxNode) -> Any:
    from onnx import numpy_helper  # lazy: onnx is an optional extra, checked by reading
    value = node.attr("value")
    for key in ("value_float", "value_int", "value_floats", "value_ints"):
        found = node.attr(key)
        if found is not None:
            return np.array(found, np.float32 if "float" in key else np.int64)
    if value is None:
        raise node.fail("only the value, value_float(s) and value_int(s) attributes are supported")
    return numpy_helper.to_array(value)


@import_rule("constant", ONNX, "Shape")
def shape(b: Builder, node: OnnxNode) -> Any:
    extents = np.array(node.shape(0), np.int64)
    return extents[int(node.attr("start", 0)):node.attr("end", None)]


@import_rule("constant", ONNX, "ConstantOfShape")
def constant_of_shape(b: Builder, node: OnnxNode) -> Any:
    from onnx import numpy_helper  # lazy: onnx is an optional extra, checked by reading
    value = node.attr("value")
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    return np.full(node.ints(0, "shape"), fill[0], fill.dtype)


@import_rule("cast", ONNX, "Cast")
def cast(b: Builder, node: OnnxNode) -> Any:
    import onnx  # lazy: onnx is an optional extra, checked by reading
    node.only("saturate", (1,), 1)
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(node.attr("to"))))
    if node.known(0):
        return node.const(0).astype(dtype)
    target = "logical" if dtype.kind == "b" else "scalar" if dtype.kind == "f" else "integer"
    x = node.tensor(0)
    return b.op("copy", x) if b.dtype(x) == target else b.op("cast", x, generic=target)


@import_rule("cast", ONNX, "CastLike")
def cast_like(b: Builder, node: OnnxNode) -> Any:
    node.only("saturate", (1,), 1)
    if node.known(1):
        dtype = node.const(1).dtype
        if node.known(0):
            return node.const(0).astype(dtype)
        target = "logical" if dtype.kind == "b" else "scalar" if dtype.kind == "f" else "integer"
    else:
        target = b.dtype(node.raw(1))
    x = node.tensor(0)
    return b.op("copy", x) if b.dtype(x) == target else b.op("cast", x, generic=target)


def _reshaped(b: Builder, node: OnnxNode, shape: list[int]) -> Any:
    return node.const(0).reshape(shape) if node.known(0) else b.op("reshape", node.tensor(0), shape=shape)


@import_rule("reshape", ONNX, "Flatten")
def flatten(b: Builder, node: OnnxNode) -> Any:
    extents = node.shape(0)
    axis = node.axis(int(node.attr("axis", 1)), len(extents) + 1)
    return _reshaped(b, node, [math.prod(extents[:axis]), math.prod(extents[axis:])])


@import_rule("reshape", ONNX, "Reshape")
def reshape(b: Builder, node: OnnxNode) -> Any:
    extents, target = node.shape(0), node.ints(1, "shape")
    if node.attr("allowzero", 0) and 0 in target:
        raise node.fail("allowzero with a zero extent is not supported")
    target = [extents[i] if t == 0 else t for i, t in enumerate(target)]
    if target.count(-1) > 1:
        raise node.fail(f"shape {target} has more than one -1")
    if -1 in target:
        rest = math.prod(t for t in target if t != -1)
        target[target.index(-1)] = math.prod(extents) // rest if rest else 0
    if math.prod(target) != math.prod(extents):
        raise node.fail(f"cannot reshape {list(extents)} to {target}")
    return _reshaped(b, node, target)


@import_rule("transpose", ONNX, "Transpose")
def transpose(b: Builder, node: OnnxNode) -> Any:
    perm = [int(p) for p in node.attr("perm", list(reversed(range(node.rank(0)))))]
    if node.known(0):
        return np.transpose(node.const(0), perm)
    return b.op("transpose", node.tensor(0), axes=perm)


def _axes(node: OnnxNode, rank: int, position: int = 1) -> list[int] | None:
    found = node.attr("axes")
    if found is None and node.has(position):
        found = node.ints(position, "axes")
    return None if found is None else sorted(node.axis(int(a), rank, "axes") for a in found)


@import_rule("squeeze", ONNX, "Squeeze")
def squeeze(b: Builder, node: OnnxNode) -> Any:
    extents = node.shape(0)
    axes = _axes(node, len(extents))
    axes = [i for i, e in enumerate(extents) if e == 1] if axes is None else axes
    if node.known(0):
        return np.squeeze(node.const(0), tuple(axes))
    return b.op("squeeze", node.tensor(0), axes=axes)


@import_rule("unsqueeze", ONNX, "Unsqueeze")
def unsqueeze(b: Builder, node: OnnxNode) -> Any:
    given = node.attr("axes")
    given = node.ints(1, "axes") if given is None else given
    axes = sorted(node.axis(int(a), node.rank(0) + len(given), "axes") for a in given)
    if node.known(0):
        return np.expand_dims(node.const(0), tuple(axes))
    return b.op("unsqueeze", node.tensor(0), axes=axes)


@import_rule("concat", ONNX, "Concat")
def concat(b: Builder, node: OnnxNode) -> Any:
    axis = node.axis(int(node.attr("axis")), node.rank(0))
    if all(node.known(i) for i in range(len(node.inputs))):
        return np.concatenate([node.const(i) for i in range(len(node.inputs))], axis)
    return b.op("concat", [node.tensor(i) for i in range(len(node.inputs)) if math.prod(node.shape(i))],
                axis=axis)


@import_rule("split", ONNX, "Split")
def split(b: Builder, node: OnnxNode) -> Any:
    extents = node.shape(0)
    axis = node.axis(int(node.attr("axis", 0)), len(extents))
    sizes = node.attr("split")
    count = node.attr("num_outputs", node.outputs)
    if sizes is None and node.has(1):
        sizes = node.ints(1, "split")
    if sizes is None:
        step = -(-extents[axis] // count)
        sizes = [min(step, extents[axis] - i * step) for i in range(count)]
    if sum(sizes) != extents[axis] or len(sizes) != node.outputs or min(sizes) <= 0:
        raise node.fail(f"split sizes {list(sizes)} do not divide extent {extents[axis]} into {node.outputs}")
    x = node.tensor(0)
    starts = np.cumsum([0] + list(sizes))
    return tuple(b.op("slice", x, axes=[axis], begin=[int(s)], end=[int(e)])
                 for s, e in zip(starts[:-1], starts[1:]))


@import_rule("slice", ONNX, "Slice")
def slice_(b: Builder, node: OnnxNode) -> Any:
    extents = node.shape(0)
    starts, ends = node.ints(1, "starts"), node.ints(2, "ends")
    axes = node.ints(3, "axes") if node.has(3) else list(range(len(starts)))
    steps = node.ints(4, "steps") if node.has(4) else [1] * len(starts)
    if 0 in steps:
        raise node.fail(f"steps {steps}: a step of 0 is not allowed")
    axes = [node.axis(a, len(extents), "axes") for a in axes]
    # the spec's clamping: [0, n] for positive steps, starts to [0, n - 1] and ends to [-1, n - 1] for negative ones
    backwards = [int(t < 0) for t in steps]
    begin = [min(max(s + extents[a] if s < 0 else s, 0), extents[a] - k) for s, a, k in zip(starts, axes, backwards)]
    end = [min(max(e + extents[a] if e < 0 else e, -k), extents[a] - k) for e, a, k in zip(ends, axes, backwards)]
    if node.known(0):
        index = [slice(None)] * len(extents)
        for a, s, e, t in zip(axes, begin, end, steps):
            index[a] = slice(s, e if e >= 0 else None, t)
        return node.const(0)[tuple(index)]
    x = node.tensor(0)
    if all(t > 0 for t in steps):
        return b.op("slice", x, axes=axes, begin=begin, end=end, stride=steps)
    for a, s, e, t in zip(axes, begin, end, steps):  # a negative step: a gather of the indices it reads
        picked = np.arange(s, e, t, dtype=np.int64)
        if picked.size == 0:
            raise node.fail(f"the slice of axis {a} is empty (NNEF has no empty tensors)")
        x = b.op("gather", x, node.as_tensor(picked) if picked.size > 1 else
                 b.op("constant", shape=[1], value=[int(picked[0])], generic="integer", out_shape=(1,)), axis=a)
    return x


@import_rule("gather", ONNX, "Gather")
def gather(b: Builder, node: OnnxNode) -> Any:
    rank = node.rank(0)
    axis = node.axis(int(node.attr("axis", 0)), rank)
    if node.known(0) and node.known(1):
        return np.take(node.const(0), node.const(1), axis)
    if node.known(1) and node.const(1).ndim == 0:
        index = int(node.const(1)) % node.shape(0)[axis]
        part = b.op("slice", node.tensor(0), axes=[axis], begin=[index], end=[index + 1])
        return b.op("squeeze", part, axes=[axis])
    return b.op("gather", node.tensor(0), node.tensor(1), axis=axis)


@import_rule("tile", ONNX, "Expand", "Tile")
def expand(b: Builder, node: OnnxNode) -> Any:
    extents, given = node.shape(0), node.ints(1, "shape" if node.op == "Expand" else "repeats")
    if node.op == "Tile":
        repeats = given
    else:
        target = list(np.broadcast_shapes(tuple(extents), tuple(given)))
        extents = [1] * (len(target) - len(extents)) + list(extents)
        repeats = [t // e if e else 1 for t, e in zip(target, extents)]
    if node.known(0):
        return np.tile(node.const(0).reshape(extents), repeats)
    x = node.tensor(0)
    if len(extents) > b.rank(x):
        x = b.op("unsqueeze", x, axes=list(range(len(extents) - b.rank(x))))
    return b.op("tile", x, repeats=repeats)


@import_rule("pad", ONNX, "Pad")
def pad(b: Builder, node: OnnxNode) -> Any:
    mode = node.only("mode", ("constant", "reflect", "edge"), "constant")
    rank = node.rank(0)
    pads = node.ints(1, "pads")
    axes = [node.axis(a, rank, "axes") for a in node.ints(3, "axes")] if node.has(3) else list(range(rank))
    if len(pads) != 2 * len(axes) or min(pads, default=0) < 0:
        raise node.fail(f"pads {pads}: expected {2 * len(axes)} non-negative items")
    padding = [(0, 0)] * rank
    for i, a in enumerate(axes):
        padding[a] = (pads[i], pads[i + len(axes)])
    value = float(node.const(2, "constant_value").reshape(-1)[0]) if node.has(2) else 0.0
    border = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}[mode]
    return b.op("pad", node.tensor(0), padding=padding, border=border, value=value)
