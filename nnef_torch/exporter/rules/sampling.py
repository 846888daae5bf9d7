"""Sampling ATen operations that NNEF has no operation for: bicubic up-sampling and `grid_sample`, written with
standard operations and constant interpolation weights.

Both are separable: the weight of input pixel (i, j) for an output point is a product a(i) * b(j), so each rule
contracts the width with one `matmul` and the height with a second product, never a dense
[H_out*W_out, H_in*W_in] matrix. Constant tables are written as variables (labelled `constants/...`), which every
consumer reads (tract's standard NNEF has no `constant`). The per-axis weight matrices and `resample`, which applies
them, are shared with the linear up-sampling rule of `nn` (linear, bilinear and trilinear at sizes that are no
integer factor, and antialiased bilinear).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from nnef_torch.exporter.rules.common import Emitter, Unmappable
from nnef_torch.ops.registry import export_rule

CUBIC_A = -0.75  # torch's bicubic coefficient (Keys' kernel)
ANTIALIAS_A = -0.5  # the coefficient of its antialiasing filter (as PIL's)
LARGEST = 1 << 27  # refuse grid sampling whose intermediate tensors would hold more items (512 MiB of float32)
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _table(e: Emitter, values: torch.Tensor, what: str) -> Any:
    return e.variable(f"constants/{e.node.name}_{what}", values.to(torch.float32).contiguous())


# ------------------------------------------------------------------------------------------------ bicubic
def _keys(x: float, a: float) -> float:
    """Keys' cubic convolution kernel (torch's cubic_convolution1 for |x| <= 1, cubic_convolution2 up to 2)."""
    x = abs(x)
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def _antialias_cubic(x: float) -> float:
    return _keys(x, ANTIALIAS_A)


def tent(x: float) -> float:
    """torch's antialiasing filter for bilinear resampling (the triangle of half-width 1)."""
    return max(1.0 - abs(x), 0.0)


def _step(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> float:
    """Input pixels per output pixel (torch's area_pixel_compute_scale)."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def cubic_matrix(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> torch.Tensor:
    """[n_out, n_in] bicubic interpolation weights along one axis, in float64, as torch's CPU kernel computes them:
    source index from area_pixel_compute_source_index (not clamped at 0 for cubic), index and fraction guarded
    (index at most n_in - 1, fraction in [0, 1]), tap indices clamped to the border."""
    step = _step(n_in, n_out, align_corners, scale)
    matrix = torch.zeros(n_out, n_in, dtype=torch.float64)
    for o in range(n_out):
        real = step * o if align_corners else step * (o + 0.5) - 0.5
        index = min(math.floor(real), n_in - 1)
        t = min(max(real - index, 0.0), 1.0)
        for k, w in enumerate(_keys(d, CUBIC_A) for d in (t + 1, t, 1 - t, 2 - t)):  # taps index-1 .. index+2
            matrix[o, min(max(index - 1 + k, 0), n_in - 1)] += w
    return matrix


def linear_matrix(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> torch.Tensor:
    """[n_out, n_in] linear interpolation weights along one axis, in float64, as torch's CPU kernel computes them:
    source index from area_pixel_compute_source_index (clamped at 0 without aligned corners), index at most
    n_in - 1 and fraction in [0, 1], the second tap clamped to the border; an axis whose size is unchanged is
    copied, as torch does even for an explicit scale factor other than 1."""
    if n_in == n_out:
        return torch.eye(n_in, dtype=torch.float64)
    step = _step(n_in, n_out, align_corners, scale)
    matrix = torch.zeros(n_out, n_in, dtype=torch.float64)
    for o in range(n_out):
        real = step * o if align_corners else max(step * (o + 0.5) - 0.5, 0.0)
        index = min(math.floor(real), n_in - 1)
        t = min(max(real - index, 0.0), 1.0)
        matrix[o, index] += 1.0 - t
        matrix[o, min(index + 1, n_in - 1)] += t
    return matrix


def antialias_matrix(n_in: int, n_out: int, align_corners: bool, scale: float | None,
                     kernel: Callable[[float], float] = _antialias_cubic, interp_size: int = 4) -> torch.Tensor:
    """[n_out, n_in] weights of torch's antialiased resampling along one axis, bicubic by default (`kernel` and
    its width `interp_size`: `tent` and 2 for bilinear): the filter widened by the down-sampling step, truncated
    to the input and normalised to sum 1; an axis whose size is unchanged is copied, as torch does."""
    if n_in == n_out:
        return torch.eye(n_in, dtype=torch.float64)
    step = _step(n_in, n_out, align_corners, scale)
    support = interp_size / 2 * step if step >= 1 else interp_size / 2
    stretch = 1.0 / step if step >= 1 else 1.0
    taps = math.ceil(support) * 2 + 1
    matrix = torch.zeros(n_out, n_in, dtype=torch.float64)
    for o in range(n_out):
        center = step * (o + 0.5)
        first = max(int(center - support + 0.5), 0)
        count = min(max(min(int(center + support + 0.5), n_in) - first, 0), taps)
        weights = [kernel((j + first - center + 0.5) * stretch) for j in range(count)]
        total = sum(weights)
        for j, w in enumerate(weights):
            matrix[o, first + j] = w / total if total != 0 else w
    return matrix


def _apply_last(e: Emitter, x: Any, matrix: torch.Tensor, what: str) -> Any:
    """x [..., n_in] @ matrix^T -> [..., n_out] (x flattened to 2-D for the product)."""
    shape = list(e.shape(x))
    flat = e.op("reshape", x, shape=[-1, shape[-1]])
    y = e.op("matmul", flat, _table(e, matrix.t(), what))
    return e.op("reshape", y, shape=shape[:-1] + [matrix.shape[0]])


def scale_factors(scales: Sequence[Any], spatial: int) -> list[float | None]:
    """The per-axis scale factors of an up-sampling ATen op: `.vec` passes one list or None, `.default` one
    optional scale per spatial axis."""
    if len(scales) == 1 and (scales[0] is None or isinstance(scales[0], (list, tuple))):
        return list(scales[0]) if scales[0] is not None else [None] * spatial
    return list(scales) + [None] * (spatial - len(scales))


def resample(e: Emitter, x: Any, matrices: Sequence[torch.Tensor]) -> Any:
    """Apply one constant [out, in] matrix along each spatial axis of x [N, C, ...], the last axis first, each
    other axis moved last with `transpose` and back; identity matrices are skipped (a `copy` when all are)."""
    rank = e.rank(x)
    names = ("depths", "rows", "columns")[3 - len(matrices):]  # 1 to 3 spatial axes
    y = x
    for k in reversed(range(len(matrices))):
        matrix, axis = matrices[k], rank - len(matrices) + k
        if torch.equal(matrix, torch.eye(matrix.shape[1], dtype=matrix.dtype)):
            continue
        if axis == rank - 1:
            y = _apply_last(e, y, matrix, names[k])
            continue
        swap = list(range(rank))
        swap[axis], swap[-1] = swap[-1], swap[axis]
        y = e.op("transpose", y, axes=swap)
        y = _apply_last(e, y, matrix, names[k])
        y = e.op("transpose", y, axes=swap)
    return y if y is not x else e.op("copy", x)


@export_rule("matmul", "aten.upsample_bicubic2d.vec", "aten.upsample_bicubic2d.default",
             "aten._upsample_bicubic2d_aa.vec", "aten._upsample_bicubic2d_aa.default")
def upsample_bicubic(e: Emitter, x: Any, output_size: Any, align_corners: bool, *scales: Any) -> Any:
    """Bicubic resampling to any size, with or without antialias: one constant [out, in] matrix per spatial axis,
    applied with `matmul` (the height after moving it last with `transpose`). Exact up to float32 rounding of the
    weights. The gradient with respect to the input is the transposed product; torch's own backward (without
    antialias) copies the gradient when the output has the input's size even where its forward, given an
    explicit scale factor, is no copy: there the re-imported gradient is the true one and differs from torch's."""
    antialias = str(e.node.target).startswith("aten._upsample_bicubic2d_aa")
    weights = antialias_matrix if antialias else cubic_matrix
    sizes = zip(e.shape(x)[2:], (int(d) for d in e.out.shape[2:]), scale_factors(scales, 2))
    return resample(e, x, [weights(n_in, n_out, bool(align_corners), s) for n_in, n_out, s in sizes])


# ------------------------------------------------------------------------------------------------ grid_sample
def _source(e: Emitter, g: Any, size: int, padding: str, align_corners: bool) -> Any:
    """Grid coordinates in [-1, 1] -> pixel coordinates, padded, in torch CPU kernel's order of operations
    (ComputeLocation: unnormalize, then reflect and/or clip)."""
    if align_corners:
        p = e.op("mul", e.op("add", g, 1.0), (size - 1) / 2)
        low, twice_span = 0.0, 2.0 * (size - 1)
    else:
        p = e.op("sub", e.op("mul", e.op("add", g, 1.0), size / 2), 0.5)
        low, twice_span = -0.5, 2.0 * size
    if padding == "reflection":
        if twice_span == 0:  # one pixel with aligned corners: every point reflects onto it
            p = e.op("mul", p, 0.0)
        else:  # a triangle wave of period twice_span that runs through [low, low + span]
            d = e.op("abs", e.op("sub", p, low) if low else p)
            turns = e.op("floor", e.op("div", d, twice_span))
            extra = e.op("sub", d, e.op("mul", turns, twice_span))
            p = e.op("min", extra, e.op("sub", twice_span, extra))
            if low:
                p = e.op("add", p, low)
    if padding in ("border", "reflection"):
        p = e.op("clamp", p, 0.0, float(size - 1))
    return p


def _weights(e: Emitter, p: Any, positions: Any, mode: str, what: str, size: int) -> Any:
    """The weight of each pixel position for coordinates p: the tent max(0, 1 - |p - i|) (bilinear) or 1 where i
    is p rounded half to even, the rounding of torch's nearest mode (nearest)."""
    d = e.op("abs", e.op("sub", p, positions))
    if mode == "bilinear":
        return e.op("relu", e.op("sub", 1.0, d))
    # torch rounds halves to even (NNEF's `round`, away from zero). |p - i| is exact near 0.5, so i is the rounding
    # of p when |p - i| < 0.5, or = 0.5 with i even: an even position takes the tie with a bound just above 0.5
    # (the next float32), an odd one does not.
    half = torch.tensor([0.5 if i % 2 else float(torch.nextafter(torch.tensor(0.5), torch.tensor(1.0)))
                         for i in range(size)])
    bound = _table(e, half.reshape(e.shape(positions)), f"{what}_bound")
    return e.op("select", e.op("lt", d, bound), 1.0, 0.0)


@export_rule("matmul", "aten.grid_sampler_2d.default", "aten.grid_sampler.default")
def grid_sampler(e: Emitter, x: Any, grid: Any, interpolation: int, padding_mode: int, align_corners: bool) -> Any:
    """`F.grid_sample` on 4-D input, modes bilinear and nearest, every padding and both align_corners.

    The sample of input pixel (i, j) for an output point at pixel coordinates (px, py) weighs a(py, i) * b(px, j),
    both computed against constant position vectors; the width is contracted by a batched `matmul`, the height by a
    product and `sum_reduce`. Memory: the weights hold N * P * (W_in + H_in) items and the height product
    N * C * H_in * P (P = H_out * W_out), against N * P * H_in * W_in for a dense weight matrix; exports needing
    more than LARGEST items in one tensor are refused. Gradients (input and, for bilinear, grid) are torch's except
    at kinks: points exactly on a pixel line or on a clipping/reflection border, where the one-sided derivatives
    differ and torch picks one convention and the re-imported ops (abs, relu, clamp, min) another."""
    mode, padding = _MODES.get(interpolation), _PADDINGS.get(padding_mode)
    if e.rank(x) != 4:
        raise Unmappable("grid sampling of 5-D (volumetric) input has no export rule; only 4-D input is exported")
    if mode not in ("bilinear", "nearest") or padding is None:
        raise Unmappable(f"grid_sample with mode={mode or interpolation!r} has no export rule (bilinear and nearest "
                         "are exported)")
    if e.dtype(x) != "scalar" or e.dtype(grid) != "scalar":
        raise Unmappable("grid_sample of non-floating tensors has no NNEF form")
    n, c, h_in, w_in = e.shape(x)
    _, h_out, w_out, _ = e.shape(grid)
    points = h_out * w_out
    largest = max(n * points * max(w_in, h_in), n * c * h_in * points)
    if largest > LARGEST:
        raise Unmappable(f"grid_sample from {h_in}x{w_in} to {h_out}x{w_out} points would need intermediate tensors "
                         f"of {largest} items (limit {LARGEST}); sample fewer points or a smaller input")
    flat = e.op("reshape", grid, shape=[n, points, 2])
    gx = e.op("slice", flat, axes=[2], begin=[0], end=[1])  # [N, P, 1]: x indexes the width
    gy = e.op("reshape", e.op("slice", flat, axes=[2], begin=[1], end=[2]), shape=[n, 1, 1, points])
    px = _source(e, gx, w_in, padding, bool(align_corners))
    py = _source(e, gy, h_in, padding, bool(align_corners))
    columns = _table(e, torch.arange(w_in, dtype=torch.float32).reshape(1, 1, w_in), "columns")
    rows = _table(e, torch.arange(h_in, dtype=torch.float32).reshape(1, 1, h_in, 1), "rows")
    b = _weights(e, px, columns, mode, "columns", w_in)  # [N, P, W_in]
    a = _weights(e, py, rows, mode, "rows", h_in)  # [N, 1, H_in, P]
    t = e.op("matmul", e.op("reshape", x, shape=[n, c * h_in, w_in]), b, transposeB=True)  # [N, C*H_in, P]
    t = e.op("mul", e.op("reshape", t, shape=[n, c, h_in, points]), a)
    y = e.op("sum_reduce", t, axes=[2])  # [N, C, 1, P]
    return e.op("reshape", y, shape=[n, c, h_out, w_out])
