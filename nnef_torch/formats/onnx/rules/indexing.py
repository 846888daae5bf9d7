"""Index-driven ONNX operators written with standard NNEF operations: CumSum (a log-step prefix sum of shifted
copies), GatherElements (a `gather` from the flattened input at linear indices) and Resize (NNEF's up-sampling
where it computes the same thing, else per-axis `gather`s of the neighbouring items weighted by constants)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
EXACT_INDEX = 1 << 24  # linear indices computed on scalars (float32) are exact below this


def _indices(b: Builder, node: OnnxNode, index: np.ndarray) -> Any:
    """Integer indices known while converting as an NNEF tensor (a constant even when it holds one item)."""
    if index.size > 1 or index.ndim > 1:
        return node.as_tensor(index.astype(np.int64))
    return b.op("constant", shape=list(index.shape), value=[int(i) for i in index.reshape(-1)], generic="integer",
                out_shape=tuple(index.shape))


# ------------------------------------------------------------------------------------------------ CumSum
def _shifted(b: Builder, x: Any, axis: int, shift: int, reverse: bool) -> Any:
    """`x` moved by `shift` along `axis` (towards the end, or the start when `reverse`), zeros coming in."""
    n, rank = b.shape(x)[axis], b.rank(x)
    kept = b.op("slice", x, axes=[axis], begin=[shift if reverse else 0], end=[n if reverse else n - shift])
    padding = [(0, 0)] * rank
    padding[axis] = (0, shift) if reverse else (shift, 0)
    return b.op("pad", kept, padding=padding, border="constant", value=0.0)


@import_rule("add", ONNX, "CumSum")
def cumsum(b: Builder, node: OnnxNode) -> Any:
    """Hillis and Steele's scan: ceil(log2 n) steps, each adding the running sums shifted by 1, 2, 4, ... items."""
    exclusive, reverse = bool(node.attr("exclusive", 0)), bool(node.attr("reverse", 0))
    axis_given = node.const(1, "axis").reshape(-1)
    if axis_given.size != 1:
        raise node.fail(f"axis has {axis_given.size} items; expected one")
    rank = node.rank(0)
    axis = node.axis(int(axis_given[0]), rank)
    if node.known(0):
        x = node.const(0)
        flipped = np.flip(x, axis) if reverse else x
        total = np.cumsum(flipped, axis, dtype=x.dtype)
        if exclusive:
            total = total - flipped
        return np.flip(total, axis) if reverse else total
    y = node.tensor(0)
    if b.dtype(y) != "scalar":
        raise node.fail(f"CumSum of a {b.dtype(y)} tensor computed from the graph's inputs is not supported "
                        "(NNEF's arithmetic is on scalars)")
    n = b.shape(y)[axis]
    shift = 1
    while shift < n:
        y = b.op("add", y, _shifted(b, y, axis, shift, reverse))
        shift *= 2
    if exclusive:
        y = _shifted(b, y, axis, 1, reverse) if n > 1 else b.op("mul", y, 0.0)
    return y if y is not node.raw(0) else b.op("copy", y)


# ------------------------------------------------------------------------------------------------ GatherElements
@import_rule("gather", ONNX, "GatherElements")
def gather_elements(b: Builder, node: OnnxNode) -> Any:
    """out[..., i, ...] = data[..., index[..., i, ...], ...] along `axis`: data (cut to the index's extents on the
    other axes) flattened and read with `gather` at index * stride + offset, the offset being each item's place
    on the other axes (a constant)."""
    shape, ishape = list(node.shape(0)), list(node.shape(1))
    rank = len(shape)
    axis = node.axis(int(node.attr("axis", 0)), rank)
    if len(ishape) != rank or any(i > n for d, (i, n) in enumerate(zip(ishape, shape)) if d != axis):
        raise node.fail(f"indices of shape {ishape} do not fit data of shape {shape} on the axes other than {axis}")
    if node.known(1):
        index = node.const(1).astype(np.int64)
        if index.size and (index.min() < -shape[axis] or index.max() >= shape[axis]):
            raise node.fail(f"indices outside [-{shape[axis]}, {shape[axis] - 1}]")
        index = np.where(index < 0, index + shape[axis], index)
        if node.known(0):
            cut = node.const(0)[tuple(slice(None) if d == axis else slice(0, i) for d, i in enumerate(ishape))]
            return np.take_along_axis(cut, index, axis)
    x = node.tensor(0)
    for d in range(rank):
        if d != axis and ishape[d] < shape[d]:
            x = b.op("slice", x, axes=[d], begin=[0], end=[ishape[d]])
    kept = [n if d == axis else ishape[d] for d, n in enumerate(shape)]
    count = math.prod(kept)
    strides = [math.prod(kept[d + 1:]) for d in range(rank)]
    offset = sum((np.arange(ishape[d]) * strides[d]).reshape([-1 if k == d else 1 for k in range(rank)])
                 for d in range(rank) if d != axis) + np.zeros(ishape, np.int64)
    flat = b.op("reshape", x, shape=[count])
    if node.known(1):
        return b.op("gather", flat, _indices(b, node, index * strides[axis] + offset), axis=0)
    if count > EXACT_INDEX:
        raise node.fail(f"gathering from {count} items: linear indices computed from the graph's inputs are "
                        f"computed on scalars, exact only up to {EXACT_INDEX}")
    scaled = b.op("cast", node.tensor(1), generic="scalar")
    scaled = b.op("select", b.op("lt", scaled, 0.0), b.op("add", scaled, float(shape[axis])), scaled)
    if strides[axis] != 1:
        scaled = b.op("mul", scaled, float(strides[axis]))
    if offset.any():
        scaled = b.op("add", scaled, node.as_tensor(offset.astype(np.float32)))
    return b.op("gather", flat, b.op("cast", scaled, generic="integer"), axis=0)


# ------------------------------------------------------------------------------------------------ Resize
RESIZE_MODES = ("nearest", "linear", "cubic")
COORDINATES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(i: np.ndarray, n_in: int, n_out: int, scale: float, mode: str) -> np.ndarray:
    """Input coordinates of output positions `i` along one axis (the spec's coordinate_transformation_mode)."""
    if mode == "align_corners":
        return i * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "pytorch_half_pixel" and n_out <= 1:
        return np.zeros_like(i)
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        return n_in / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
    return (i + 0.5) / scale - 0.5


def _nearest(x: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "floor":
        return np.floor(x)
    if rounding == "ceil":
        return np.ceil(x)
    half = np.floor(x) + 0.5
    return np.where(x == half, np.floor(x) if rounding == "round_prefer_floor" else np.ceil(x), np.round(x))


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' kernel at distances `t`."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _taps(x: np.ndarray, n_in: int, mode: str, rounding: str, a: float, exclude_outside: bool) \
        -> list[tuple[np.ndarray, np.ndarray]]:
    """(input index, weight) per tap for source coordinates `x`: one tap (nearest), two (linear) or four (cubic);
    indices outside the input read its edge, as the spec's reference pads it."""
    if mode == "nearest":
        return [(np.clip(_nearest(x, rounding), 0, n_in - 1).astype(np.int64), np.ones_like(x))]
    base = np.floor(x)
    offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
    taps = []
    for k in offsets:
        position = base + k
        weight = 1 - np.abs(x - position) if mode == "linear" else _cubic(x - position, a)
        if exclude_outside:
            weight = np.where((position < 0) | (position > n_in - 1), 0.0, weight)
        taps.append((np.clip(position, 0, n_in - 1).astype(np.int64), weight))
    if exclude_outside:
        total = sum(weight for _, weight in taps)
        taps = [(index, weight / total) for index, weight in taps]
    return taps


def _resampled(b: Builder, node: OnnxNode, x: Any, axis: int, taps: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """The sum over taps of `x` gathered along `axis` at the tap's indices times its weights."""
    rank = b.rank(x)
    view = [-1 if d == axis else 1 for d in range(rank)]
    total = None
    for index, weight in taps:
        if not weight.any():
            continue
        part = b.op("gather", x, _indices(b, node, index), axis=axis)
        if not np.all(weight == 1):
            part = b.op("mul", part, node.as_tensor(weight.astype(np.float32).reshape(view)))
        total = part if total is None else b.op("add", total, part)
    return total


def _native(b: Builder, node: OnnxNode, x: Any, factors: list[float], mode: str, coordinates: str,
            rounding: str) -> Any:
    """NNEF's own up-sampling where it computes the same thing as Resize (integer factors on the spatial axes
    only) and consumers run it, else None (Resize is then written with gathers)."""
    rank = len(factors)
    if not 3 <= rank <= 5 or factors[0] != 1 or factors[1] != 1 or any(f < 1 or f != int(f) for f in factors):
        return None
    factor = [int(f) for f in factors[2:]]
    if mode == "nearest" and coordinates == "asymmetric" and rounding == "floor":
        return b.op("nearest_upsample", x, factor=factor)
    spatial = b.shape(x)[2:]
    if mode != "linear" or (coordinates == "pytorch_half_pixel" and any(n * f == 1 for n, f in zip(spatial, factor))):
        return None
    method = {"half_pixel": "symmetric", "pytorch_half_pixel": "symmetric", "asymmetric": "asymmetric"}.get(coordinates)
    if method is None or rank != 4 or any(f != 2 for f in factor):
        return None  # the forms the Khronos executor computes (factor 2, two spatial axes, not 'aligned')
    return b.op("multilinear_upsample", x, factor=factor, method=method, border="replicate")


def _resize_targets(node: OnnxNode, shape: tuple[int, ...]) -> tuple[list[int], list[float]]:
    """Output extents and the scales of the coordinate transformation, per axis."""
    rank = len(shape)
    axes = node.attr("axes")
    axes = list(range(rank)) if axes is None else [node.axis(int(a), rank, "axes") for a in axes]
    policy = node.only("keep_aspect_ratio_policy", ("stretch",), "stretch")
    scales = node.const(2, "scales").reshape(-1) if node.has(2) else np.zeros(0)
    sizes = node.ints(3, "sizes") if node.has(3) else []
    if scales.size and sizes:
        raise node.fail("both scales and sizes are given; the spec allows one")
    if not scales.size and not sizes:
        raise node.fail("neither scales nor sizes is given")
    given: list[float] = [float(v) for v in (sizes or scales)]
    if len(given) != len(axes):
        raise node.fail(f"{'sizes' if sizes else 'scales'} has {len(given)} items for {len(axes)} axes")
    extents, factors = list(shape), [1.0] * rank
    for a, value in zip(axes, given):
        if sizes:
            extents[a], factors[a] = int(value), int(value) / shape[a]
        else:
            extents[a], factors[a] = int(math.floor(shape[a] * value)), float(value)
    if min(extents) <= 0 or min(factors) <= 0:
        raise node.fail(f"the output shape {extents} (policy {policy}) has an empty or negative extent")
    return extents, factors


@import_rule("multilinear_upsample", ONNX, "Resize")
def resize(b: Builder, node: OnnxNode) -> Any:
    mode = node.only("mode", RESIZE_MODES, "nearest")
    coordinates = node.attr("coordinate_transformation_mode", "half_pixel")
    if coordinates not in COORDINATES:
        raise node.fail(f"coordinate_transformation_mode '{coordinates}' is not supported (supported: "
                        f"{list(COORDINATES)}; tf_crop_and_resize reads a region of interest)")
    rounding = node.only("nearest_mode", NEAREST_MODES, "round_prefer_floor")
    a = float(node.attr("cubic_coeff_a", -0.75))
    exclude_outside = bool(node.attr("exclude_outside", 0))
    node.attr("extrapolation_value")  # read by tf_crop_and_resize only, refused above
    node.only("antialias", (0,), 0)
    shape = node.shape(0)
    extents, factors = _resize_targets(node, shape)
    if node.known(0) or b.dtype(node.raw(0)) != "scalar":
        raise node.fail("only Resize of a float tensor computed from the graph's inputs is supported")
    x = node.tensor(0)
    if extents == list(shape) and all(f == 1 for f in factors):
        return b.op("copy", x)
    if not exclude_outside:
        exact = [float(e) / n for e, n in zip(extents, shape)]
        if exact == factors:
            native = _native(b, node, x, factors, mode, coordinates, rounding)
            if native is not None:
                return native
    for axis, (n_in, n_out, scale) in enumerate(zip(shape, extents, factors)):
        if n_in == n_out and scale == 1:
            continue
        source = _source(np.arange(n_out, dtype=np.float64), n_in, n_out, scale, coordinates)
        x = _resampled(b, node, x, axis, _taps(source, n_in, mode, rounding, a, exclude_outside))
    return x
