"""Border handling of the sliding-window operations (spec 4.3) and the `pad` operation.

A border mode says what the input holds outside its extent: 'constant' (a value, 0 for the window ops),
'replicate' (the edge value), 'reflect' (mirrored about the edge, the edge not repeated: torch's 'reflect'),
'reflect-even' (mirrored with the edge repeated: numpy's 'symmetric', which torch lacks) and, for the window ops
only, 'ignore' (outside positions take no part: a sum skips them, a max never picks them, an average divides
by the number of inside positions). Negative padding crops. Reflections further than the extent repeat
periodically.

Also here: the automatic padding rule and the per-position counts of inside elements that 'ignore' divides by.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_common import static_dtype, static_shape

Padding = Sequence[tuple[int, int]]

BORDERS = ("ignore", "constant", "replicate", "reflect", "reflect-even")
_INDEXED = ("replicate", "reflect", "reflect-even")  # borders that read input values


def device_of(x: Any) -> torch.device | None:
    """Where to build a constant for `x`: its device when eager; None (CPU) while tracing, where the constant
    becomes a buffer that follows `.to(device)` of the module."""
    return x.device if isinstance(x, torch.Tensor) else None


def resolve_padding(extents: Sequence[int], size: Sequence[int], padding: Padding, stride: Sequence[int],
                    dilation: Sequence[int]) -> list[tuple[int, int]]:
    """The (before, after) padding per dimension; empty `padding` is automatic (output extent ceil(X / s))."""
    if padding:
        return [(int(p), int(q)) for p, q in padding]
    result = []
    for extent, f, s, d in zip(extents, size, stride, dilation):
        total = max(0, (-(-extent // s) - 1) * s + (f - 1) * d + 1 - extent)
        result.append((total // 2, total - total // 2))
    return result


def border_index(extent: int, before: int, after: int, border: str) -> list[int]:
    """For each position of the padded extent, the input position it reads under an indexed border mode."""
    result = []
    for i in range(-before, extent + after):
        if border == "replicate":
            result.append(min(max(i, 0), extent - 1))
        elif border == "reflect":
            period = 2 * (extent - 1)
            m = i % period if period else 0
            result.append(m if m < extent else period - m)
        else:  # reflect-even
            m = i % (2 * extent)
            result.append(m if m < extent else 2 * extent - 1 - m)
    return result


def _torch_pads(pads: Sequence[tuple[int, int]], first: int) -> list[int]:
    """F.pad's flat list (last dimension first) for dimensions `first`.. of `pads`."""
    flat: list[int] = []
    for p, q in reversed(pads[first:]):
        flat += [p, q]
    return flat


def _torch_mode_dims(shape: Sequence[int], pads: Sequence[tuple[int, int]], border: str) -> int | None:
    """How many trailing dimensions F.pad's replicate/reflect mode can pad here, or None if it cannot."""
    rank = len(shape)
    if border not in ("replicate", "reflect") or any(p < 0 or q < 0 for p, q in pads):
        return None
    if border == "reflect" and any(p >= n or q >= n for n, (p, q) in zip(shape, pads) if p or q):
        return None
    spanned = rank - min(i for i, pq in enumerate(pads) if pq != (0, 0))
    for dims in (rank - 2, rank - 1):  # torch takes [N, C, *dims] or [C, *dims] with 1 to 3 dims
        if spanned <= dims <= 3 and dims >= 1:
            return dims
    return None


def pad_border(x: Any, padding: Padding, border: str = "constant", value: float = 0.0,
               shape: Sequence[int] | None = None) -> Any:
    """`x` padded by (before, after) per leading dimension (missing trailing ones unpadded); negative crops.
    'ignore' pads with `value` like 'constant': the caller picks the value that is neutral for its reduction.
    `shape` is the static shape of `x`, needed when `x` is an intermediate value while tracing."""
    shape = tuple(static_shape(x) if shape is None else shape)
    pads = [(int(p), int(q)) for p, q in padding] + [(0, 0)] * (len(shape) - len(padding))
    if all(pq == (0, 0) for pq in pads):
        return x
    if border in ("constant", "ignore"):
        if any(n + min(p, 0) + min(q, 0) < 0 for n, (p, q) in zip(shape, pads)):  # F.pad crops first: grow first
            grown = [(max(p, 0), max(q, 0)) for p, q in pads]
            x = pad_border(x, grown, border, value, shape)
            return pad_border(x, [(min(p, 0), min(q, 0)) for p, q in pads], border, value,
                              [p + n + q for n, (p, q) in zip(shape, grown)])
        first = min(i for i, pq in enumerate(pads) if pq != (0, 0))
        return F.pad(x, _torch_pads(pads, first), value=float(value))
    if border not in _INDEXED:
        raise NNEFUnsupportedError(f"border must be one of {', '.join(map(repr, BORDERS))}, found {border!r}")
    dims = _torch_mode_dims(shape, pads, border)
    if dims is not None:
        return F.pad(x, _torch_pads(pads, len(shape) - dims), mode=border)
    for axis, (p, q) in enumerate(pads):
        if (p, q) != (0, 0):
            index = torch.tensor(border_index(shape[axis], p, q, border), dtype=torch.int64, device=device_of(x))
            x = x.index_select(axis, index)
    return x


def inside_counts(extent: int, size: int, before: int, stride: int, dilation: int, count: int) -> list[int]:
    """For each of `count` window positions, how many of its `size` taps fall inside [0, extent)."""
    return [sum(0 <= o * stride - before + j * dilation < extent for j in range(size)) for o in range(count)]


def inside_counts_transposed(extent: int, size: int, before: int, stride: int, dilation: int,
                             count: int) -> list[int]:
    """For each of `count` upscaled positions i, how many taps j reach it from an input position
    k = (i + p - j * d) / s that is whole and inside [0, extent) (the terms of a reverse window op)."""
    result = []
    for i in range(count):
        taps = [i + before - j * dilation for j in range(size)]
        result.append(sum(t % stride == 0 and 0 <= t // stride < extent for t in taps))
    return result


def count_tensor(counts: Sequence[Sequence[int]], like: Any) -> torch.Tensor:
    """The outer product of per-dimension counts, as a tensor of `like`'s float type (trailing dimensions)."""
    result = torch.ones((), dtype=static_dtype(like), device=device_of(like))
    for axis, items in enumerate(counts):
        shape = [1] * len(counts)
        shape[axis] = len(items)
        result = result * torch.tensor(items, dtype=static_dtype(like), device=device_of(like)).reshape(shape)
    return result


@torch_op('pad')
def pad(input: Any, *, padding: Padding, border: str = "constant", value: float = 0.0) -> Any:
    return pad_border(input, padding, border, value)


__all__ = ["BORDERS", "border_index", "count_tensor", "device_of", "inside_counts", "inside_counts_transposed",
           "pad", "pad_border", "resolve_padding"]
