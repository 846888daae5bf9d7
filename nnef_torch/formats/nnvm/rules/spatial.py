"""MXNet operators on the height and width of NCHW images: Crop, space_to_depth, depth_to_space and
_contrib_BilinearResize2D (every mode, both corner conventions, sampled as MXNet's CPU kernel samples)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.limits import check_computed
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"
MAX_EXTENT = 2 ** 15 - 1  # BilinearResize2D computes output extents in int16


def _images(b: Builder, node: OpNode, x: Any) -> tuple[int, int, int, int]:
    shape = b.shape(x)
    if len(shape) != 4:
        raise node.fail(f"{node.op} needs an NCHW input of rank 4, found shape {list(shape)}")
    return tuple(shape)  # type: ignore[return-value]


@import_rule("slice", NNVM, "Crop")
def crop(b: Builder, node: OpNode) -> Any:
    """The legacy Crop: an h x w window of the height and width, with h_w (one input) or the extents of the
    second input (whose values are not read), at `offset` (y, x) or centred (the offset rounded down)."""
    count = node.attrs.int("num_args")
    offset = node.attrs.ints("offset", (0, 0), length=2)
    h_w = node.attrs.ints("h_w", (0, 0), length=2)
    centred = node.attrs.bool("center_crop", False)
    if count not in (1, 2):
        raise node.fail(f"num_args is {count}: Crop takes the data and at most one input to crop like")
    node.arity(count)
    x = node.input(0)
    _, _, height, width = _images(b, node, x)
    if count == 2:
        like = b.shape(node.input(1))
        if len(like) < 4:
            raise node.fail(f"the input to crop like must have rank 4 or more, found shape {list(like)}")
        size = like[2:4]
    else:
        size = h_w
    if not (1 <= size[0] <= height and 1 <= size[1] <= width):
        raise node.fail(f"crop size {list(size)} must be positive and fit in {height} x {width}")
    if centred:
        begin = [(height - size[0]) // 2, (width - size[1]) // 2]
    else:
        begin = list(offset)
        if not (0 <= begin[0] <= height - size[0] and 0 <= begin[1] <= width - size[1]):
            raise node.fail(f"offset {begin} puts the {list(size)} window outside {height} x {width}")
    if (size[0], size[1]) == (height, width):
        return b.op("copy", x)
    return b.op("slice", x, axes=[2, 3], begin=begin, end=[begin[0] + size[0], begin[1] + size[1]])


@import_rule("transpose", NNVM, "depth_to_space")
def depth_to_space(b: Builder, node: OpNode) -> Any:
    """Channels read as [block, block, C / block^2] spread over block x block cells: out[n, c, y * s + i,
    x * s + j] = in[n, (i * s + j) * C / s^2 + c, y, x]. Written as two transposes of rank 5 and 4 (the Khronos
    executor transposes up to rank 5): j moved behind the width, then i behind the height."""
    node.arity(1)
    x = node.input(0)
    block = node.attrs.int("block_size")
    n, c, h, w = _images(b, node, x)
    if block <= 0 or c % (block * block):
        raise node.fail(f"block_size {block} must be positive, its square dividing the {c} channels")
    depth = c // block ** 2
    cells = b.op("reshape", x, shape=[n * block, block, depth, h, w])  # [(n, i), j, c', h, w]
    rows = b.op("reshape", b.op("transpose", cells, axes=[0, 2, 3, 4, 1]), shape=[n, block, depth * h, w * block])
    moved = b.op("transpose", rows, axes=[0, 2, 1, 3])  # [n, (c', h), i, (w, j)]
    return b.op("reshape", moved, shape=[n, depth, h * block, w * block])


@import_rule("transpose", NNVM, "space_to_depth")
def space_to_depth(b: Builder, node: OpNode) -> Any:
    """The inverse of depth_to_space: each block x block cell becomes channels, cell offset major. Written as
    two transposes of rank 4 and 3: i moved before the channels, then j."""
    node.arity(1)
    x = node.input(0)
    block = node.attrs.int("block_size")
    n, c, h, w = _images(b, node, x)
    if block <= 0 or h % block or w % block:
        raise node.fail(f"block_size {block} must be positive and divide the height and width {h} x {w}")
    height, width = h // block, w // block
    rows = b.op("reshape", x, shape=[n, c * height, block, w])  # [n, (c, h'), i, (w', j)]
    cells = b.op("reshape", b.op("transpose", rows, axes=[0, 2, 1, 3]), shape=[n * block, c * height * width, block])
    moved = b.op("transpose", cells, axes=[0, 2, 1])  # [(n, i), j, (c, h', w')]
    return b.op("reshape", moved, shape=[n, c * block * block, height, width])


def _extent(node: OpNode, extent: int, value: Any) -> int:
    """An output extent as MXNet computes it: a float32 product truncated to int16."""
    result = int(value)
    if not 1 <= result <= MAX_EXTENT:
        raise node.fail(f"the output extent {result} (from input extent {extent}) must be in [1, {MAX_EXTENT}]")
    return result


def resize_extents(node: OpNode, height: int, width: int, like: Sequence[int] | None) -> tuple[int, int]:
    """BilinearResize2D's output height and width for its mode (`BilinearSampleOpInferShape`)."""
    mode = node.attrs.choice("mode", ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down",
                                      "to_odd_up"), "size")
    size = node.attrs.int("height", 1), node.attrs.int("width", 1)
    scale = node.attrs.float("scale_height", None), node.attrs.float("scale_width", None)
    f32 = np.float32
    if mode in ("size", "odd_scale") and scale[0] is not None and scale[1] is None:
        raise node.fail(f"mode {mode!r} with scale_height needs scale_width too")
    if mode == "size":
        if scale[0] is None:  # MXNet reads scale_width only when scale_height is given
            return _extent(node, height, size[0]), _extent(node, width, size[1])
        return (_extent(node, height, f32(scale[0]) * f32(height)), _extent(node, width, f32(scale[1]) * f32(width)))
    if mode == "odd_scale":
        if scale[0] is None:
            raise node.fail("mode 'odd_scale' needs scale_height and scale_width")
        return tuple(_extent(node, e, f32(s) * f32(e)) if e % 2 == 0 else _extent(node, e, int(f32(s) * f32(e - 1)) + 1)
                     for e, s in ((height, scale[0]), (width, scale[1])))  # type: ignore[return-value]
    if mode == "like":
        assert like is not None
        return like[2], like[3]
    even = mode.startswith("to_even")
    step = -1 if mode.endswith("down") else 1
    return tuple(_extent(node, e, e if (e % 2 == 0) == even else e + step)
                 for e in (height, width))  # type: ignore[return-value]


def _constant(b: Builder, values: np.ndarray, kind: str) -> Any:
    items = [int(v) for v in values.reshape(-1)] if kind == "integer" else [float(v) for v in values.reshape(-1)]
    return b.op("constant", shape=list(values.shape), value=items[:1] if len(set(items)) == 1 else items,
                generic=kind)


def _linear_axis(b: Builder, x: Any, dim: int, size: int, align_corners: bool) -> Any:
    """Axis `dim` of `x` resampled to `size` items as MXNet's CPU kernel does, in float32: source coordinate
    scale * i (corners aligned: scale (in - 1) / (out - 1)), or scale * (i + 0.5) - 0.5 clamped at 0 (scale
    in / out, the product in float64); then (1 - t) * x[k] + t * x[min(k + 1, in - 1)], k the coordinate's
    integer part and t the rest."""
    extent = b.shape(x)[dim]
    if extent == size:  # the source coordinates are the output's: a copy
        return x
    f32 = np.float32
    check_computed(f"resizing axis {dim} to {size:,} items", size)
    if size > 1:
        scale = f32(extent - 1) / f32(size - 1) if align_corners else f32(extent) / f32(size)
    else:
        scale = f32(0.0)
    if align_corners:
        source = scale * np.arange(size, dtype=np.float32)
    else:  # (i + 0.5) is a double in MXNet's kernel, so is the product; the coordinate is rounded to float32
        source = np.maximum((np.float64(scale) * (np.arange(size) + 0.5) - 0.5).astype(np.float32), f32(0.0))
    low = source.astype(np.int64)
    high = np.where(low < extent - 1, low + 1, low)
    far = (source - low.astype(np.float32)).astype(np.float32)
    near = (f32(1.0) - far).astype(np.float32)
    shape = [1] * b.rank(x)
    shape[dim] = size
    first = b.op("gather", x, _constant(b, low, "integer"), axis=dim)
    second = b.op("gather", x, _constant(b, high, "integer"), axis=dim)
    return b.op("add", b.op("mul", _constant(b, near.reshape(shape), "scalar"), first),
                b.op("mul", _constant(b, far.reshape(shape), "scalar"), second))


@import_rule("gather", NNVM, "_contrib_BilinearResize2D")
def bilinear_resize(b: Builder, node: OpNode) -> Any:
    """Bilinear resizing of the height and width, the width interpolated first (as MXNet's kernel groups its
    sums); mode 'like' takes the extents of the second input, whose values are not read."""
    like_mode = node.attrs.raw("mode", "size").strip() == "like"
    node.arity(2 if like_mode else 1)
    x = node.input(0)
    _, _, height, width = _images(b, node, x)
    like = _images(b, node, node.input(1)) if like_mode else None
    size = resize_extents(node, height, width, like)
    align_corners = node.attrs.bool("align_corners", True)
    if b.dtype(x) != "scalar":
        raise node.fail(f"BilinearResize2D of {b.dtype(x)} data: only scalar data is supported")
    out = _linear_axis(b, _linear_axis(b, x, 3, size[1], align_corners), 2, size[0], align_corners)
    return b.op("copy", x) if out is x else out
