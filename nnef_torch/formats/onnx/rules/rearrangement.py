"""ONNX operators that rearrange or pick items: DepthToSpace and SpaceToDepth (reshape and transpose), Trilu (a mask
known from the shape), TopK (the stable top-k fragment), and Range, Size and EyeLike (known while converting)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"


def _block(node: OnnxNode) -> tuple[int, int, int, int, int]:
    shape = node.shape(0)
    size = int(node.attr("blocksize", 0))
    if len(shape) != 4 or size <= 0:
        raise node.fail(f"needs a rank-4 input and a positive blocksize (got rank {len(shape)}, blocksize {size})")
    return (*shape, size)  # type: ignore[return-value]


@import_rule("reshape", ONNX, "DepthToSpace")
def depth_to_space(b: Builder, node: OnnxNode) -> Any:
    n, c, h, w, s = _block(node)
    if c % (s * s):
        raise node.fail(f"{c} channels are not a multiple of blocksize² {s * s}")
    mode = node.only("mode", ("DCR", "CRD"), "DCR")
    if mode == "DCR":
        split, order = [n, s, s, c // (s * s), h, w], [0, 3, 4, 1, 5, 2]
    else:
        split, order = [n, c // (s * s), s, s, h, w], [0, 1, 4, 2, 5, 3]
    moved = b.op("transpose", b.op("reshape", node.tensor(0), shape=split), axes=order)
    return b.op("reshape", moved, shape=[n, c // (s * s), h * s, w * s])


@import_rule("reshape", ONNX, "SpaceToDepth")
def space_to_depth(b: Builder, node: OnnxNode) -> Any:
    n, c, h, w, s = _block(node)
    if h % s or w % s:
        raise node.fail(f"height {h} and width {w} are not multiples of blocksize {s}")
    split = b.op("reshape", node.tensor(0), shape=[n, c, h // s, s, w // s, s])
    moved = b.op("transpose", split, axes=[0, 3, 5, 1, 2, 4])
    return b.op("reshape", moved, shape=[n, c * s * s, h // s, w // s])


@import_rule("select", ONNX, "Trilu")
def trilu(b: Builder, node: OnnxNode) -> Any:
    shape = node.shape(0)
    if len(shape) < 2:
        raise node.fail("needs an input of rank 2 or more")
    k = int(node.const(1, "k").reshape(-1)[0]) if node.has(1) else 0
    keep = (np.triu if node.attr("upper", 1) else np.tril)(np.ones(shape[-2:], dtype=bool), k)
    if node.known(0):
        return np.where(keep, node.const(0), np.zeros((), node.const(0).dtype))
    zero = 0.0 if b.dtype(node.tensor(0)) == "scalar" else 0
    mask = node.as_tensor(keep.reshape((1,) * (len(shape) - 2) + keep.shape))
    return b.op("select", mask, node.tensor(0), zero)


@import_rule("stable_topk", ONNX, "TopK")
def top_k(b: Builder, node: OnnxNode) -> Any:
    shape = node.shape(0)
    axis = node.axis(int(node.attr("axis", -1)), len(shape))
    k = int(node.const(1, "k").reshape(-1)[0])
    node.attr("sorted")  # the fragment's items are always sorted, which sorted=0 allows too
    if not 1 <= k <= shape[axis]:
        raise node.fail(f"k {k} is outside 1..{shape[axis]} (NNEF tensors are not empty)")
    view = [1] * len(shape)
    view[axis] = shape[axis]
    positions = node.as_tensor(np.arange(shape[axis], dtype=np.float32).reshape(view))
    x = node.tensor(0)
    if b.dtype(x) != "scalar":
        raise node.fail("TopK of an integer tensor is not supported")
    out = list(shape)
    out[axis] = k
    return b.op("stable_topk", x, positions, axis=axis, k=k, largest=bool(node.attr("largest", 1)),
                out_shape=(tuple(out), tuple(out)))


@import_rule("constant", ONNX, "Range")
def range_(b: Builder, node: OnnxNode) -> Any:
    start, limit, delta = (node.const(i, what).reshape(-1)[0] for i, what in enumerate(("start", "limit", "delta")))
    if delta == 0:
        raise node.fail("delta is 0")
    count = max(math.ceil((limit - start) / delta), 0)
    if count > 1 << 24:
        raise node.fail(f"Range of {count} items is larger than the limit of {1 << 24}")
    return (start + np.arange(count) * delta).astype(np.result_type(start, limit, delta))


@import_rule("constant", ONNX, "Size")
def size(b: Builder, node: OnnxNode) -> Any:
    return np.array(math.prod(node.shape(0)), dtype=np.int64)


@import_rule("constant", ONNX, "EyeLike")
def eye_like(b: Builder, node: OnnxNode) -> Any:
    shape = node.shape(0)
    if len(shape) != 2:
        raise node.fail("needs a rank-2 input")
    dtype = node.attr("dtype")
    from onnx import helper  # lazy: onnx is an optional extra, checked by reading
    kind = helper.tensor_dtype_to_np_dtype(dtype) if dtype else (
        node.const(0).dtype if node.known(0) else np.float32)
    return np.eye(shape[0], shape[1], int(node.attr("k", 0)), dtype=kind)


@import_rule("select", ONNX, "OneHot")
def one_hot(b: Builder, node: OnnxNode) -> Any:
    """values[1] where the index equals the position along the new `axis` (negative indices count from depth),
    values[0] elsewhere; depth and values known while converting."""
    depth = int(node.const(1, "depth").reshape(-1)[0])
    values = node.const(2, "values").reshape(-1)
    if depth <= 0 or values.size != 2:
        raise node.fail(f"depth {depth} must be positive and values hold two items (got {values.size})")
    shape = node.shape(0)
    axis = node.axis(int(node.attr("axis", -1)), len(shape) + 1)
    view = [1] * (len(shape) + 1)
    view[axis] = depth
    positions = np.arange(depth, dtype=np.int64).reshape(view)
    if node.known(0):
        indices = np.expand_dims(node.const(0).astype(np.int64), axis)
        indices = np.where(indices < 0, indices + depth, indices)
        return np.where(indices == positions, values[1], values[0])
    if depth > 1 << 24:
        raise node.fail(f"depth {depth} is past 2^24, where NNEF's scalar comparison of indices stops being exact")
    indices = b.op("unsqueeze", node.tensor(0), axes=[axis])
    if b.dtype(indices) != "scalar":  # NNEF compares scalars: exact for indices below 2^24
        indices = b.op("cast", indices, generic="scalar")
    wrapped = b.op("select", b.op("lt", indices, 0.0), b.op("add", indices, float(depth)), indices)
    on, off = (v.item() if values.dtype.kind != "f" else float(v) for v in values[::-1])
    return b.op("select", b.op("eq", wrapped, node.as_tensor(positions.astype(np.float32))), on, off)


@import_rule("gather", ONNX, "ReverseSequence")
def reverse_sequence(b: Builder, node: OnnxNode) -> Any:
    """The first sequence_lens[i] items of batch item i reversed along time_axis: a `gather` from the flattened
    input at a known table of positions (the table reversed the same way in numpy)."""
    shape = node.shape(0)
    rank = len(shape)
    batch_axis = node.axis(int(node.attr("batch_axis", 1)), rank, "batch_axis")
    time_axis = node.axis(int(node.attr("time_axis", 0)), rank, "time_axis")
    if rank < 2 or {batch_axis, time_axis} != {0, 1}:
        raise node.fail(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 (in either order)")
    lengths = node.const(1, "sequence_lens").astype(np.int64).reshape(-1)
    if lengths.size != shape[batch_axis] or lengths.min() < 0 or lengths.max() > shape[time_axis]:
        raise node.fail(f"sequence_lens {lengths.tolist()} must hold {shape[batch_axis]} lengths in "
                        f"0..{shape[time_axis]}")
    table = np.moveaxis(np.arange(math.prod(shape), dtype=np.int64).reshape(shape), (batch_axis, time_axis), (0, 1))
    for item, length in enumerate(lengths):
        table[item, :length] = table[item, :length][::-1].copy()
    table = np.moveaxis(table, (0, 1), (batch_axis, time_axis))
    if node.known(0):
        return node.const(0).reshape(-1)[table]
    flat = b.op("reshape", node.tensor(0), shape=[math.prod(shape)])
    return b.op("gather", flat, node.as_tensor(table), axis=0)


def _window_function(name: str, terms: tuple[float, ...]) -> Any:
    """A window sum_k (-1)^k terms[k] cos(2 pi k n / N), N = size (periodic) or size - 1, known while converting."""
    def rule(b: Builder, node: OnnxNode) -> Any:
        from onnx import helper  # lazy: onnx is an optional extra, checked by reading
        size = int(node.const(0, "size").reshape(-1)[0])
        periodic = bool(node.only("periodic", (0, 1), 1))
        kind = helper.tensor_dtype_to_np_dtype(int(node.attr("output_datatype", 1)))
        if size < 2:
            raise node.fail(f"size {size} is not supported (at least 2)")
        phase = 2 * np.pi * np.arange(size) / (size if periodic else size - 1)
        return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(terms)).astype(kind)
    rule.__name__ = name
    return rule


import_rule("constant", ONNX, "HannWindow")(_window_function("hann_window", (0.5, 0.5)))
import_rule("constant", ONNX, "HammingWindow")(_window_function("hamming_window", (25 / 46, 21 / 46)))
import_rule("constant", ONNX, "BlackmanWindow")(_window_function("blackman_window", (0.42, 0.5, 0.08)))
