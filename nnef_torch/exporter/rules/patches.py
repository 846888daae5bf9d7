"""Sliding-window patches: `nn.Unfold` (im2col) and `nn.Fold` (col2im) as convolutions with one-hot filters."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nnef_torch.exporter.rules.common import Emitter, Unmappable, pairs
from nnef_torch.ops.registry import export_rule


def _pair(values: Any) -> list[int]:
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    return values * 2 if len(values) == 1 else values


def _one_hot(e: Emitter, channels: int, kernel: Sequence[int], what: str) -> Any:
    """[channels * kh * kw, 1, kh, kw]: filter c * kh * kw + i * kw + j is 1 at (i, j), as torch orders the patch
    items (channel, then kernel row, then column)."""
    kh, kw = kernel
    eye = torch.eye(kh * kw).reshape(kh * kw, 1, kh, kw).repeat(channels, 1, 1, 1)
    return e.constant(eye, f"constants/{e.node.name}_{what}")


def _grid(size: Sequence[int], kernel: Sequence[int], dilation: Sequence[int], padding: Sequence[int],
          stride: Sequence[int]) -> list[int]:
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in zip(size, kernel, dilation, padding, stride)]


@export_rule("conv", "aten.im2col.default")
def im2col(e: Emitter, x: Any, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> Any:
    """nn.Unfold: a depthwise convolution whose filters each pick one kernel position, flattened to
    [N, C * kh * kw, L]."""
    kernel, dilation, padding, stride = (_pair(v) for v in (kernel_size, dilation, padding, stride))
    unbatched = e.rank(x) == 3
    if unbatched:
        x = e.op("unsqueeze", x, axes=[0])
    if e.rank(x) != 4:
        raise Unmappable(f"unfold of a rank-{e.rank(x)} input; torch's takes [N, C, H, W] or [C, H, W]")
    n, c = e.shape(x)[:2]
    filters = _one_hot(e, c, kernel, "filter")
    y = e.op("conv", x, filters, 0.0, padding=pairs(padding), stride=stride, dilation=dilation, groups=c)
    y = e.op("reshape", y, shape=[n, c * kernel[0] * kernel[1], -1])
    return e.op("squeeze", y, axes=[0]) if unbatched else y


@export_rule("deconv", "aten.col2im.default")
def col2im(e: Emitter, x: Any, output_size: Any, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> Any:
    """nn.Fold: the transposed convolution with the same one-hot filters sums each patch item into its place."""
    size, kernel, dilation, padding, stride = (_pair(v) for v in (output_size, kernel_size, dilation, padding, stride))
    unbatched = e.rank(x) == 2
    if unbatched:
        x = e.op("unsqueeze", x, axes=[0])
    if e.rank(x) != 3:
        raise Unmappable(f"fold of a rank-{e.rank(x)} input; torch's takes [N, C * kh * kw, L] or [C * kh * kw, L]")
    n, ck, length = e.shape(x)
    grid = _grid(size, kernel, dilation, padding, stride)
    if grid[0] * grid[1] != length or ck % (kernel[0] * kernel[1]):
        raise Unmappable(f"fold of {list(e.shape(x))} into {size}: the shape does not match the blocks")
    c = ck // (kernel[0] * kernel[1])
    cells = e.op("reshape", x, shape=[n, ck] + grid)
    filters = _one_hot(e, c, kernel, "filter")
    y = e.op("deconv", cells, filters, 0.0, padding=pairs(padding), stride=stride, dilation=dilation,
             output_shape=[n, c] + size, groups=c)
    return e.op("squeeze", y, axes=[0]) if unbatched else y
