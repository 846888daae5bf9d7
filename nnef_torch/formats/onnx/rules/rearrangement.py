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
