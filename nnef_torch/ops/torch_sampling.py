"""Torch implementations of up- and down-sampling (spec 4.3.4), the local normalizations (4.9.4) and the
region-of-interest ops (4.6).

The stdlib defines the resampling ops as box / debox / deconv with fixed windows; each maps here onto the torch
call that computes the same thing (a strided slice, F.avg_pool, F.interpolate where the interpolation rule is
provably the same, else F.conv_transpose with the fixed multilinear kernel). The local normalizations are built on
one normalized box over every dimension with automatic padding and zero ('constant') borders.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_border import device_of
from nnef_torch.ops.torch_common import static_dtype, static_shape

_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_LINEAR_MODE = {1: 'linear', 2: 'bilinear', 3: 'trilinear'}


def _flat_pads(pads: Sequence[tuple[int, int]]) -> list[int]:
    """(before, after) pairs per dimension, first to last, as F.pad wants them (last dimension first)."""
    return [item for pair in reversed(pads) for item in pair]


# Down-sampling: box windows of stride `factor`, no padding.

@torch_op('nearest_downsample')
def nearest_downsample(input: torch.Tensor, *, factor: Sequence[int]) -> torch.Tensor:
    """box(size = 1, stride = [1, 1] + factor): every factor-th element, one strided view."""
    if all(f == 1 for f in factor):
        return input
    return input[(slice(None), slice(None)) + tuple(slice(None, None, f) for f in factor)]


@torch_op('area_downsample')
def area_downsample(input: torch.Tensor, *, factor: Sequence[int]) -> torch.Tensor:
    """box(size = stride = [1, 1] + factor, normalize = true): the mean of each factor-sized block."""
    n = len(factor)
    if all(f == 1 for f in factor):
        return input
    if n in _AVG_POOL:
        return _AVG_POOL[n](input, list(factor), list(factor))
    shape = static_shape(input)
    blocks = [-1, shape[1]] + [item for x, f in zip(shape[2:], factor) for item in (x // f, f)]
    return input.reshape(blocks).mean([3 + 2 * i for i in range(n)])


# Up-sampling.

def _power_of_two(value: int) -> bool:
    return value & (value - 1) == 0


@torch_op('nearest_upsample')
def nearest_upsample(input: torch.Tensor, *, factor: Sequence[int]) -> torch.Tensor:
    """debox(size = stride = [1, 1] + factor): each element repeated factor times per spatial dimension.

    F.interpolate(mode='nearest') is exact for power-of-two factors (floor(i * 2^-k) has no rounding); other
    factors broadcast each element over a new axis and merge it (float scales like 1/3 could floor wrongly).
    """
    n = len(factor)
    if all(f == 1 for f in factor):
        return input
    if n in _AVG_POOL and all(_power_of_two(f) for f in factor):
        return F.interpolate(input, scale_factor=[float(f) for f in factor], mode='nearest')
    index: list[Any] = [slice(None)] * 2
    sizes, merges = [-1, -1], []
    for f in factor:
        index.append(slice(None))
        sizes.append(-1)
        if f > 1:  # a new axis of f copies right after this one, merged into it below
            merges.append(len(index) - 1)
            index.append(None)
            sizes.append(f)
    expanded = input[tuple(index)].expand(sizes)
    for position in reversed(merges):
        expanded = expanded.flatten(position, position + 1)
    return expanded


def _upsample_kernel(f: int, symmetric: bool) -> tuple[list[float], int]:
    """The 1-D multilinear deconv kernel for factor f and its front padding p.

    A deconv puts input j at output i = j * f + k - p. Symmetric: output i sits at input coordinate
    (i - f0) / f with f0 = (f - 1) / 2, so input j weighs 1 - |k - p - f0| / f. Asymmetric: coordinate i / f,
    weight 1 - |k - p| / f. Only strictly positive weights are kept.
    """
    if symmetric:
        p, size = f // 2, 2 * f - f % 2
        center = p + (f - 1) / 2
    else:
        p, size = f - 1, 2 * f - 1
        center = p
    return [1.0 - abs(k - center) / f for k in range(size)], p


def _border_pad(input: torch.Tensor, border: str, spatial: int) -> torch.Tensor:
    """Extend each spatial dimension by one element on both sides the way `border` reads outside the input."""
    mode = 'replicate' if border == 'reflect-even' else border  # reflect-even of one element repeats the edge
    extents = static_shape(input)[2:]
    if mode == 'reflect' and any(x == 1 for x in extents):
        # reflect needs two elements; a dimension of one can only repeat its element
        for d, x in enumerate(extents):
            pads = [(0, 0)] * spatial
            pads[d] = (1, 1)
            input = F.pad(input, _flat_pads(pads), mode='replicate' if x == 1 else 'reflect')
        return input
    return F.pad(input, [1] * (2 * spatial), mode=mode)


@torch_op('multilinear_upsample')
def multilinear_upsample(input: torch.Tensor, *, factor: Sequence[int], method: str = 'symmetric',
                         border: str = 'replicate') -> torch.Tensor:
    """Multilinear interpolation by integer factors (spec 4.3.4).

    'aligned' (corner points aligned: coordinate i * (x - 1) / (x * f - 1)) is F.interpolate with
    align_corners=True; 'symmetric' with a clamping border ('replicate', or 'reflect-even', which reads the same
    single element) is F.interpolate with align_corners=False (coordinate (i + 0.5) / f - 0.5, clamped). The other
    combinations are the depthwise deconv with the fixed kernel that the spec gives, on the input extended by
    one element per side according to `border` ('constant': zeros, nothing to extend).
    """
    n = len(factor)
    if all(f == 1 for f in factor):
        return input
    if n not in _CONV_TRANSPOSE:
        raise NNEFUnsupportedError(f"multilinear_upsample: {n} spatial dimensions are not supported (1 to 3)")
    scale = [float(f) for f in factor]
    if method == 'aligned':
        return F.interpolate(input, scale_factor=scale, mode=_LINEAR_MODE[n], align_corners=True)
    symmetric = method == 'symmetric'
    if symmetric and border in ('replicate', 'reflect-even'):
        return F.interpolate(input, scale_factor=scale, mode=_LINEAR_MODE[n], align_corners=False)

    channels = static_shape(input)[1]
    kernel = None
    padding, output_padding = [], []
    for f in factor:
        weights, p = _upsample_kernel(f, symmetric)
        row = torch.tensor(weights, dtype=static_dtype(input), device=device_of(input))
        kernel = row if kernel is None else kernel[..., None] * row
        output_padding.append(f + 2 * p - len(weights))
        padding.append(p if border == 'constant' else p + f)  # one extended element per side = f outputs
    kernel = kernel.expand((channels, 1) + tuple(kernel.shape)).contiguous()
    if border != 'constant':
        input = _border_pad(input, border, n)
    return _CONV_TRANSPOSE[n](input, kernel, stride=list(factor), padding=padding, output_padding=output_padding,
                              groups=channels)


# Local normalizations (spec 4.9.4): built on box(size, normalize = true) with the defaults border = 'constant',
# automatic padding and stride 1, so zeros outside the input count towards the window volume.

def _box_mean(input: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """The normalized box of `size` over every dimension, automatic padding, zero border."""
    rank = len(size)  # one item per dimension (`input` may be an intermediate with no recorded shape)
    active = [d for d, s in enumerate(size) if s > 1]
    if not active:
        return input
    pads = [((s - 1) // 2, s // 2) for s in size]  # total s - 1, the smaller half first
    first = min(active)
    if first >= 2 and 1 <= rank - 2 <= 3:
        pooled, kernel, kernel_pads, lift = input, size[2:], pads[2:], False
    elif first >= 1 and 1 <= rank - 1 <= 3:
        # the channel dimension is windowed too: pool [C, spatial...] of the [N, 1, C, spatial...] view
        pooled, kernel, kernel_pads, lift = input.unsqueeze(1), size[1:], pads[1:], True
    else:
        # any other layout: one padded 1-D window per dimension (the box is separable)
        output = input
        for d in active:
            window = size[d]
            output = F.pad(output, [0, 0] * (rank - 1 - d) + list(pads[d])).unfold(d, window, 1).mean(-1)
        return output
    k = len(kernel)
    if all(p == q for p, q in kernel_pads):
        output = _AVG_POOL[k](pooled, list(kernel), 1, [p for p, _ in kernel_pads])
    else:
        output = _AVG_POOL[k](F.pad(pooled, _flat_pads(kernel_pads)), list(kernel), 1)
    return output.squeeze(1) if lift else output


@torch_op('local_response_normalization')
def local_response_normalization(input: torch.Tensor, *, size: Sequence[int], alpha: float = 1.0,
                                 beta: float = 0.5, bias: float = 1.0) -> torch.Tensor:
    """input / (bias + alpha * box_mean(input^2)) ^ beta; F.local_response_norm where it is the same (a window
    over channels only, of odd size, which it pads evenly)."""
    rank = len(size)
    channels_only = rank >= 3 and all(s == 1 for d, s in enumerate(size) if d != 1)
    if channels_only and size[1] % 2 == 1:
        return F.local_response_norm(input, size[1], alpha=alpha, beta=beta, k=bias)
    sigma = _box_mean(input * input, size)
    sigma = sigma * alpha if alpha != 1 else sigma
    sigma = sigma + bias if bias != 0 else sigma
    return input / sigma.pow(beta) if beta != 1 else input / sigma


@torch_op('local_mean_normalization')
def local_mean_normalization(input: torch.Tensor, *, size: Sequence[int]) -> torch.Tensor:
    return input - _box_mean(input, size)


@torch_op('local_variance_normalization')
def local_variance_normalization(input: torch.Tensor, *, size: Sequence[int], bias: float = 0.0,
                                 epsilon: float = 0.0) -> torch.Tensor:
    sigma = torch.sqrt(_box_mean(input * input, size))
    sigma = sigma + bias if bias != 0 else sigma
    if bias < 0 or epsilon > 0:  # else sigma + bias >= 0 >= epsilon already
        sigma = torch.clamp(sigma, min=epsilon)
    return input / sigma


@torch_op('local_contrast_normalization')
def local_contrast_normalization(input: torch.Tensor, *, size: Sequence[int], bias: float = 0.0,
                                 epsilon: float = 0.0) -> torch.Tensor:
    centered = local_mean_normalization(input, size=size)
    return local_variance_normalization(centered, size=size, bias=bias, epsilon=epsilon)


# Region-of-interest ops (spec 4.6).
#
# Region bounds are tensor values, so no op here can slice a region out. Every op is separable over the spatial
# dimensions instead: for each dimension d a small [N, P_d, X_d] table (built from `rois` by comparisons with an
# index range) says which input positions (and with which weights) make output position p of region n. Averages
# and interpolations contract the input with each table (einsum); maxima take a masked maximum per dimension.
# `rois` rows are [begin_0, ..., begin_{M-1}, end_0, ..., end_{M-1}] (spec: (y0, x0, y1, x1) for M = 2); ends are
# exclusive.
#
# Where the spec text leaves a case open, we chose (and the tests pin):
# - roi_pool rounds coordinates half away from zero, like the NNEF `round`; cell i of a region [b, e) with
#   r = e - b starts at b + i * floor(r / P) and spans ceil(r / P) positions. A cell reaching past the input reads
#   zeros there ('constant' border, as in avg_pool / max_pool); avg divides by the whole cell volume. An empty cell
#   (r <= 0) gives 0.
# - roi_resample maps the region [b, e) of extent r onto P samples with the upsampling rules (the whole input as
#   region is multilinear_upsample): 'symmetric' b + (i + 0.5) * r / P - 0.5, 'asymmetric' b + i * r / P,
#   'aligned' b + i * (r - 1) / (P - 1); it interpolates linearly between the two neighbouring positions, clamped
#   to the input like the 'replicate' border.

_LETTERS = "defghijklm"


def _regions(input: torch.Tensor, batch_index: torch.Tensor) -> torch.Tensor:
    """The input feature map of each region: [N, C, X...]."""
    return input.index_select(0, batch_index.reshape(-1))


def _positions(rois: torch.Tensor, count: int) -> torch.Tensor:
    """0, 1, ..., count - 1 in the dtype and on the device of `rois` (a constant when traced)."""
    return torch.arange(count, dtype=static_dtype(rois), device=device_of(rois))


def _round(x: torch.Tensor) -> torch.Tensor:
    """Round half away from zero (the NNEF `round`, C's round), not torch's half to even."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def _contract(regions: torch.Tensor, tables: Sequence[torch.Tensor]) -> torch.Tensor:
    """output[n, c, p...] = sum over x... of regions[n, c, x...] * prod_d tables[d][n, p_d, x_d]."""
    letters = _LETTERS[:len(tables)]
    output = regions
    for d, table in enumerate(tables):
        source = "nc" + letters
        target = source.replace(letters[d], "z")
        output = torch.einsum(f"{source},nz{letters[d]}->{target}", output, table.type_as(output))
    return output


def _masked_max(regions: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """output[n, c, p...] = max of regions[n, c, x...] over the positions where every masks[d][n, p_d, x_d]."""
    spatial = len(masks)
    output = regions
    for d, mask in enumerate(masks):
        # output: [N, C, P_0..P_{d-1}, X_d, X_{d+1}...]; mask viewed as [N, 1, 1.., P_d, X_d, 1..]
        view = mask[(slice(None), None) + (None,) * d + (slice(None), slice(None)) + (None,) * (spatial - 1 - d)]
        output = torch.where(view, output.unsqueeze(2 + d), float('-inf')).amax(3 + d)
    return output


def _cells(rois: torch.Tensor, extents: Sequence[int], output_size: Sequence[int]):
    """Per spatial dimension: the cell masks [N, P, X], whether each cell reaches outside the input [N, P], and
    the cell extent [N] (roi_pool's rounded cells)."""
    spatial = len(extents)
    begin = _round(rois[:, :spatial])
    extent = _round(rois[:, spatial:]) - begin
    result = []
    for d, (x, p) in enumerate(zip(extents, output_size)):
        size = torch.ceil(extent[:, d] / p)
        start = begin[:, d, None] + _positions(rois, p) * torch.floor(extent[:, d] / p)[:, None]
        stop = start + size[:, None]
        index = _positions(rois, x)
        mask = (index >= start[..., None]) & (index < stop[..., None])
        outside = (start < 0) | (stop > x)
        result.append((mask, outside, size))
    return result


def _broadcast_cells(per_dim: Sequence[torch.Tensor]) -> torch.Tensor:
    """OR of per-dimension [N, P_d] flags as [N, 1, P_0, P_1, ...]."""
    spatial = len(per_dim)
    total = None
    for d, flag in enumerate(per_dim):
        view = flag[(slice(None), None) + (None,) * d + (slice(None),) + (None,) * (spatial - 1 - d)]
        total = view if total is None else total | view
    return total


@torch_op('avg_roi_pool')
def avg_roi_pool(input: torch.Tensor, rois: torch.Tensor, batch_index: torch.Tensor, *,
                 output_size: Sequence[int]) -> torch.Tensor:
    cells = _cells(rois, static_shape(input)[2:], output_size)
    tables = [mask / torch.clamp(size, min=1)[:, None, None] for mask, _, size in cells]
    return _contract(_regions(input, batch_index), tables)


@torch_op('max_roi_pool')
def max_roi_pool(input: torch.Tensor, rois: torch.Tensor, batch_index: torch.Tensor, *,
                 output_size: Sequence[int]) -> torch.Tensor:
    cells = _cells(rois, static_shape(input)[2:], output_size)
    output = _masked_max(_regions(input, batch_index), [mask for mask, _, _ in cells])
    outside = _broadcast_cells([flag for _, flag, _ in cells])
    empty = _broadcast_cells([(size <= 0)[:, None].expand(-1, p) for (_, _, size), p in zip(cells, output_size)])
    output = torch.where(outside, torch.clamp(output, min=0.0), output)  # zeros read past the input
    return torch.where(empty, 0.0, output)


def _resample_tables(rois: torch.Tensor, extents: Sequence[int], output_size: Sequence[int],
                     method: str) -> list[torch.Tensor]:
    """Per spatial dimension the [N, P, X] linear interpolation weights of roi_resample."""
    spatial = len(extents)
    begin, end = rois[:, :spatial], rois[:, spatial:]
    tables = []
    for d, (x, p) in enumerate(zip(extents, output_size)):
        extent = (end[:, d] - begin[:, d])[:, None]
        i = _positions(rois, p)
        if method == 'symmetric':
            coordinate = begin[:, d, None] + (i + 0.5) * extent / p - 0.5
        elif method == 'asymmetric':
            coordinate = begin[:, d, None] + i * extent / p
        else:  # 'aligned': first and last samples on the first and last positions of the region
            coordinate = begin[:, d, None] + i * (extent - 1) / max(p - 1, 1)
        low = torch.floor(coordinate)
        weight = (coordinate - low)[..., None]
        index = _positions(rois, x)
        below = (index == torch.clamp(low, 0, x - 1)[..., None])
        above = (index == torch.clamp(low + 1, 0, x - 1)[..., None])
        tables.append((1 - weight) * below + weight * above)
    return tables


@torch_op('roi_resample')
def roi_resample(input: torch.Tensor, rois: torch.Tensor, batch_index: torch.Tensor, *,
                 output_size: Sequence[int], method: str = 'symmetric') -> torch.Tensor:
    tables = _resample_tables(rois, static_shape(input)[2:], output_size, method)
    return _contract(_regions(input, batch_index), tables)


def _align_size(output_size: Sequence[int], sampling_rate: Sequence[int]) -> list[int]:
    return [p * s for p, s in zip(output_size, sampling_rate)]


@torch_op('avg_roi_align')
def avg_roi_align(input: torch.Tensor, rois: torch.Tensor, batch_index: torch.Tensor, *,
                  output_size: Sequence[int], sampling_rate: Sequence[int],
                  resize_method: str = 'symmetric') -> torch.Tensor:
    """avg_pool(roi_resample(size = output_size * sampling_rate), size = stride = [1, 1] + sampling_rate).

    The average of interpolations is an interpolation, so the pooling folds into the tables: each output row
    is the mean of its `sampling_rate` resampling rows, and the input is contracted once.
    """
    size = _align_size(output_size, sampling_rate)
    tables = _resample_tables(rois, static_shape(input)[2:], size, resize_method)
    extents = static_shape(input)[2:]
    folded = [table.reshape(-1, p, s, x).mean(2)
              for table, p, s, x in zip(tables, output_size, sampling_rate, extents)]
    return _contract(_regions(input, batch_index), folded)


@torch_op('max_roi_align')
def max_roi_align(input: torch.Tensor, rois: torch.Tensor, batch_index: torch.Tensor, *,
                  output_size: Sequence[int], sampling_rate: Sequence[int],
                  resize_method: str = 'symmetric') -> torch.Tensor:
    """max_pool(roi_resample(size = output_size * sampling_rate), size = stride = [1, 1] + sampling_rate)."""
    size = _align_size(output_size, sampling_rate)
    resized = roi_resample(input, rois, batch_index, output_size=size, method=resize_method)
    spatial = len(size)
    if spatial in _MAX_POOL:
        return _MAX_POOL[spatial](resized, list(sampling_rate), list(sampling_rate))
    blocks = [-1, static_shape(input)[1]] + [item for p, s in zip(output_size, sampling_rate) for item in (p, s)]
    return resized.reshape(blocks).amax([3 + 2 * i for i in range(spatial)])
