"""Box filters, index-based sampling (spec 4.3.2-4.3.3) and pooling (4.9.3) as torch pooling calls.

These ops take a window over every dimension. The dimensions the window touches (size, stride or padding not
trivial) are moved last when they are not already, 1 to 3 at a time, into a layout torch pooling takes. Sums,
means and maxima are separable, so more than 3 such dimensions run as several passes; the arg-max is not, and
falls back to unfolded windows there. Zero-valued padding goes into the pooling call when torch allows it
(symmetric, at most half the window); other borders pad explicitly first.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_border import (
    Padding,
    count_tensor,
    device_of,
    inside_counts,
    inside_counts_transposed,
    pad_border,
    resolve_padding,
)
from nnef_torch.ops.torch_common import static_dtype, static_shape
from nnef_torch.ops.torch_conv import transposed_conv

Shape = tuple[int, ...]

_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_MAX = {1: F.max_pool1d_with_indices, 2: F.max_pool2d_with_indices, 3: F.max_pool3d_with_indices}
_MAX_VALUES = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_INDEXED = ("replicate", "reflect", "reflect-even")


@dataclass(frozen=True)
class Window:
    """Per-dimension window geometry over all dimensions, padding resolved, stride and dilation defaulted."""

    size: Shape
    pads: tuple[tuple[int, int], ...]
    stride: Shape
    dilation: Shape

    @staticmethod
    def of(extents: Sequence[int], size: Sequence[int], padding: Padding, stride: Sequence[int],
           dilation: Sequence[int]) -> Window:
        stride, dilation = tuple(stride) or (1,) * len(size), tuple(dilation) or (1,) * len(size)
        pads = resolve_padding(extents, size, padding, stride, dilation)
        return Window(tuple(size), tuple(pads), stride, dilation)

    def active(self) -> list[int]:
        """The dimensions the window changes (elsewhere size 1, stride 1, no padding: the identity)."""
        return [i for i, (f, pq, s) in enumerate(zip(self.size, self.pads, self.stride))
                if f != 1 or s != 1 or pq != (0, 0)]

    def downscaled(self, extents: Sequence[int]) -> Shape:
        return tuple((p + n + q - (f - 1) * d - 1) // s + 1
                     for n, f, (p, q), s, d in zip(extents, self.size, self.pads, self.stride, self.dilation))

    def pick(self, dims: Sequence[int]) -> Window:
        return Window(*(tuple(items[i] for i in dims) for items in (self.size, self.pads, self.stride,
                                                                     self.dilation)))

    def with_pads(self, pads: Sequence[tuple[int, int]]) -> Window:
        return Window(self.size, tuple(pads), self.stride, self.dilation)


class Planes:
    """A tensor with window dimensions `dims` moved last, shaped as torch pooling takes it: the tensor itself when
    they already are its last 1-3 dimensions after 1 or 2 others, else [M, *window extents] (or [M, 1, ...] when
    `channel`), and back."""

    def __init__(self, shape: Shape, dims: Sequence[int], channel: bool = False):
        rank, k = len(shape), len(dims)
        self.shape, self.dims = shape, tuple(dims)
        self.trailing = tuple(range(rank - k, rank))
        self.moved = self.dims != self.trailing
        self.others = [n for i, n in enumerate(shape) if i not in self.dims]
        self.flat = self.moved or channel or rank not in (k + 1, k + 2)
        self.lead = (2 if channel else 1) if self.flat else rank - k  # dimensions before the window ones
        self.channel = channel
        window = [shape[i] for i in self.dims]
        self.layout = tuple([prod(self.others)] + [1] * channel + window if self.flat else self.others + window)

    def gather(self, x: Any) -> Any:
        if self.moved:
            x = torch.movedim(x, self.dims, self.trailing)
        if self.flat:
            x = x.reshape([-1] + [1] * self.channel + [self.shape[i] for i in self.dims])
        return x

    def scatter(self, y: Any, extents: Sequence[int]) -> tuple[Any, Shape]:
        """`y` (window dims of new `extents`) back in the original layout, and its shape."""
        if self.flat:
            y = y.reshape(self.others + list(extents))
        if self.moved:
            y = torch.movedim(y, self.trailing, self.dims)
        shape = list(self.shape)
        for i, n in zip(self.dims, extents):
            shape[i] = n
        return y, tuple(shape)


def _chunks(dims: Sequence[int]) -> list[list[int]]:
    """Groups of at most 3 dimensions, the last dimensions first (they need no move)."""
    dims = list(dims)
    return [dims[max(0, end - 3):end] for end in range(len(dims), 0, -3)]


def _torch_padding(window: Window) -> list[int] | None:
    """The symmetric padding torch pooling can do itself (at most half the window), or None."""
    if all(p == q and 0 <= p <= f // 2 for (p, q), f in zip(window.pads, window.size)):
        return [p for p, _ in window.pads]
    return None


def _max_padding(window: Window, extents: Sequence[int]) -> list[int] | None:
    """For max pooling: torch's symmetric padding p where NNEF pads (p, q) with q <= p and both give the same output
    extents. The windows are then the same, and the extra end padding torch adds is -inf, which no maximum takes."""
    out = window.downscaled(extents)
    padding = []
    for (p, q), f, s, d, n, o in zip(window.pads, window.size, window.stride, window.dilation, extents, out):
        if not (0 <= q <= p <= f // 2) or (n + 2 * p - d * (f - 1) - 1) // s + 1 != o:
            return None
        padding.append(p)
    return padding


def _all_outside(shape: Shape, window: Window, border: str) -> bool:
    """Whether every window lies wholly outside a zero-valued input (a crop beyond the extent on one side, the
    output made of the other side's padding): the result is a constant then."""
    return border in ("constant", "ignore") and any(n + min(p, 0) + min(q, 0) <= 0
                                                     for n, (p, q) in zip(shape, window.pads))


def _prepare(x: Any, shape: Shape, window: Window, border: str, fill: float | None) -> tuple[Any, Shape, Window]:
    """Apply what of the padding must be explicit: all of it for indexed borders and when `fill` is given (the
    value of a 'constant' border), else only the negative (cropping) part. Returns what remains to pad."""
    if border in _INDEXED or fill is not None:
        pads = window.pads
        rest = [(0, 0)] * len(pads)
    else:
        pads = [(min(p, 0), min(q, 0)) for p, q in window.pads]
        rest = [(max(p, 0), max(q, 0)) for p, q in window.pads]
    x = pad_border(x, pads, border, fill or 0.0, shape=shape)
    shape = tuple(p + n + q for n, (p, q) in zip(shape, pads))
    return x, shape, window.with_pads(rest)


def _avg(y: Any, window: Window, padding: Sequence[int], include_pad: bool, divisor: int | None) -> Any:
    k = len(window.size)
    if k == 1 and divisor is not None:  # avg_pool1d has no divisor_override: pool a [.., 1, W] plane instead
        return F.avg_pool2d(y.unsqueeze(-2), (1, window.size[0]), (1, window.stride[0]), (0, padding[0]), False,
                            include_pad, divisor).squeeze(-2)
    if k == 1:
        return F.avg_pool1d(y, window.size, window.stride, padding, False, include_pad)
    return _AVG[k](y, window.size, window.stride, padding, False, include_pad, divisor)


def _box(x: Any, like: Any, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
         dilation: Sequence[int], normalize: bool) -> Any:
    """box of `x`, which has the static shape and type of the op input `like`."""
    shape, dtype, device = static_shape(like), static_dtype(like), device_of(like)
    window = Window.of(shape, size, padding, stride, dilation)
    ignore = border == "ignore"
    if _all_outside(shape, window, border):
        return x.new_full(window.downscaled(shape), float("nan") if ignore and normalize else 0.0)
    x, shape, window = _prepare(x, shape, window, border, None)
    for dims in _chunks(window.active()):
        part = window.pick(dims)
        dilated = any(d > 1 and f > 1 for f, d in zip(part.size, part.dilation))
        planes = Planes(shape, dims, channel=dilated)
        y = planes.gather(x)
        extents = [shape[i] for i in dims]
        out = part.downscaled(extents)
        padding = _torch_padding(part)
        if len(dims) == 3 and any(n < f for n, f in zip(extents, part.size)):
            padding = None  # avg_pool3d refuses an input smaller than the window, even when padded
        if not dilated and padding is not None:
            y = _avg(y, part, padding, not ignore, None if normalize else 1)
        else:
            y = pad_border(y, [(0, 0)] * planes.lead + list(part.pads), shape=planes.layout)
            mean = normalize and not ignore
            if not dilated:
                y = _avg(y, part, [0] * len(dims), True, None if mean else 1)
            else:
                ones = torch.full((1, 1) + part.size, 1.0 / prod(part.size) if mean else 1.0,
                                  dtype=dtype, device=device)
                y = _CONV[len(dims)](y, ones, None, part.stride, 0, part.dilation)
            if normalize and ignore:
                y = y / count_tensor([inside_counts(n, f, p, s, d, o) for n, f, (p, _), s, d, o in
                                      zip(extents, part.size, part.pads, part.stride, part.dilation, out)], like)
        x, shape = planes.scatter(y, out)
    return x


@torch_op('box')
def box(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
        stride: Sequence[int] = (), dilation: Sequence[int] = (), normalize: bool = False) -> Any:
    return _box(input, input, size, border, padding, stride, dilation, normalize)


@torch_op('avg_pool')
def avg_pool(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
             stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> Any:
    return _box(input, input, size, border, padding, stride, dilation, True)


@torch_op('rms_pool')
def rms_pool(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
             stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> Any:
    return torch.sqrt(_box(input * input, input, size, border, padding, stride, dilation, True))


def _upscaled(shape: Shape, size: Sequence[int], padding: Padding, stride: Sequence[int],
              dilation: Sequence[int], output_shape: Sequence[int]) -> tuple[Shape, Window]:
    """The result extents of a reverse op and its window (automatic padding resolved against them)."""
    stride, dilation = tuple(stride) or (1,) * len(size), tuple(dilation) or (1,) * len(size)
    if output_shape:
        upscaled = tuple(output_shape)
    elif padding:
        upscaled = tuple((n - 1) * s + (f - 1) * d + 1 - p - q
                         for n, f, (p, q), s, d in zip(shape, size, padding, stride, dilation))
    else:
        upscaled = tuple(n * s for n, s in zip(shape, stride))
    return upscaled, Window.of(upscaled, size, padding, stride, dilation)


@torch_op('debox')
def debox(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
          stride: Sequence[int] = (), dilation: Sequence[int] = (), output_shape: Sequence[int] = (),
          normalize: bool = False) -> Any:
    shape = static_shape(input)
    upscaled, window = _upscaled(shape, size, padding, stride, dilation, output_shape)
    active = window.active()
    if all(window.size[i] == window.stride[i] and (window.dilation[i] == 1 or window.size[i] == 1)
           and window.pads[i] == (0, 0) and upscaled[i] == shape[i] * window.stride[i] for i in active):
        # each upscaled position gets exactly one input value: 'ignore' divides by that one
        return _repeat(input, shape, window.stride, 1.0 / prod(size) if normalize and border != "ignore" else 1.0)
    x = input
    for chunk in _chunks(active):
        part = window.pick(chunk)
        planes = Planes(shape, chunk, channel=True)
        extents, big = [shape[i] for i in chunk], [upscaled[i] for i in chunk]
        mean = normalize and border != "ignore"
        ones = torch.full((1, 1) + part.size, 1.0 / prod(part.size) if mean else 1.0, dtype=static_dtype(input),
                          device=device_of(input))
        y = transposed_conv(planes.gather(x), planes.layout, ones, None, border, part.pads, part.stride,
                            part.dilation, big, 1)
        if normalize and border == "ignore":  # positions no input reaches stay 0 (an empty sum)
            y = y / count_tensor([[max(c, 1) for c in inside_counts_transposed(n, f, p, s, d, o)] for
                                  n, f, (p, _), s, d, o in
                                  zip(extents, part.size, part.pads, part.stride, part.dilation, big)], input)
        x, shape = planes.scatter(y, big)
    return x


def _repeat(x: Any, shape: Shape, factors: Sequence[int], scale: float) -> Any:
    """Each element repeated `factors` times along each dimension (debox with non-overlapping windows)."""
    split = [item for n, f in zip(shape, factors) for item in ((n, 1) if f > 1 else (n,))]
    grown = [item for n, f in zip(shape, factors) for item in ((n, f) if f > 1 else (n,))]
    if split != list(shape):
        x = x.reshape(split).expand(grown).reshape([n * f for n, f in zip(shape, factors)])
    return x * scale if scale != 1.0 else x


def _window_index(index: Any, extents: Sequence[int], window: Window, padding: Sequence[int],
                  out: Sequence[int], like: Any) -> Any:
    """Turn torch pooling's flat position within each plane (of window `extents`, implicitly padded by
    `padding`) into the NNEF index: the row-major position within the window.

    With c_i the coordinates of the flat position, the window index is sum_i j_i * W_i where
    j_i = (c_i - (o_i * s_i - p_i)) / d_i and W_i the volume of the window after dimension i. Scaled by
    D = prod(d) it is sum_i c_i * V_i - B(o) with V_i = W_i * D / d_i; with g_i = flat // (volume of the extents
    after dimension i), c_i = g_i - E_i * g_(i-1), so the sum telescopes into one floor division per dimension
    but the last."""
    k = len(extents)
    scale = prod(window.dilation)
    v = [prod(window.size[i + 1:]) * scale // window.dilation[i] for i in range(k)]
    result = index * v[-1] if v[-1] != 1 else index
    for i in range(k - 1):
        coefficient = v[i] - extents[i + 1] * v[i + 1]
        if coefficient:
            result = result + (index // prod(extents[i + 1:])) * coefficient
    base = torch.zeros((), dtype=torch.int64, device=device_of(like))
    for i in range(k):
        shape = [1] * k
        shape[i] = out[i]
        starts = torch.arange(out[i], dtype=torch.int64, device=device_of(like)) * window.stride[i] - padding[i]
        base = base + (starts * v[i]).reshape(shape)
    result = result - base
    return result // scale if scale != 1 else result


def _max_pool(x: Any, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
              dilation: Sequence[int], with_index: bool) -> tuple[Any, Any]:
    """Values and (if `with_index`) NNEF window indices of the maxima."""
    shape = static_shape(x)
    window = Window.of(shape, size, padding, stride, dilation)
    if _all_outside(shape, window, border):
        out = window.downscaled(shape)
        return (x.new_full(out, float("-inf") if border == "ignore" else 0.0),
                x.new_zeros(out, dtype=torch.int64) if with_index else None)
    x, shape, window = _prepare(x, shape, window, border, None if border == "ignore" else 0.0)
    active = window.active()
    if not active:
        return x, (x.new_zeros(shape, dtype=torch.int64) if with_index else None)
    if with_index and len(active) > 3:
        return _max_unfolded(x, shape, window, active)
    index = None
    for dims in _chunks(active):
        part = window.pick(dims)
        planes = Planes(shape, dims)
        y = planes.gather(x)
        extents = [shape[i] for i in dims]
        out = part.downscaled(extents)
        padding = _torch_padding(part) or _max_padding(part, extents)
        if padding is None:
            y = pad_border(y, [(0, 0)] * planes.lead + list(part.pads), value=float("-inf"), shape=planes.layout)
            extents = [p + n + q for n, (p, q) in zip(extents, part.pads)]
            padding = [0] * len(dims)
        if with_index:
            result = _MAX[len(dims)](y, part.size, part.stride, padding, part.dilation)
            y = result[0]
            index, _ = planes.scatter(_window_index(result[1], extents, part, padding, out, x), out)
        else:
            y = _MAX_VALUES[len(dims)](y, part.size, part.stride, padding, part.dilation)
        x, shape = planes.scatter(y, out)
    return x, index


def _max_unfolded(x: Any, shape: Shape, window: Window, active: Sequence[int]) -> tuple[Any, Any]:
    """Maxima and their window indices from the unfolded windows (any number of window dimensions)."""
    x = pad_border(x, window.pads, "ignore", float("-inf"), shape=shape)
    padded = [p + n + q for n, (p, q) in zip(shape, window.pads)]
    out = list(window.with_pads([(0, 0)] * len(shape)).downscaled(padded))
    for i in active:
        f, s, d = window.size[i], window.stride[i], window.dilation[i]
        x = x.unfold(i, (f - 1) * d + 1, s)
        if d > 1:
            x = x[..., ::d]
    result = torch.max(x.reshape(out + [-1]), -1)
    return result[0], result[1]


@torch_op('max_pool')
def max_pool(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
             stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> Any:
    return _max_pool(input, size, border, padding, stride, dilation, False)[0]


@torch_op('max_pool_with_index')
def max_pool_with_index(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
                        stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> tuple[Any, Any]:
    return _max_pool(input, size, border, padding, stride, dilation, True)


@torch_op('argmax_pool')
def argmax_pool(input: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
                stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> Any:
    return _max_pool(input, size, border, padding, stride, dilation, True)[1]


def _tap_positions(index: Any, window: Window, padded: Sequence[int], out: Sequence[int], like: Any) -> Any:
    """Flat positions in a tensor of extents `padded` read by window `index` at each output position:
    sum_n (o_n * s_n + j_n * d_n) * Q_n with j_n the coordinates of `index` in the window (row-major) and Q_n the
    volume of `padded` after n. The window part telescopes as in `_window_index`."""
    if static_dtype(index) != torch.int64:
        index = index.long()
    q = [prod(padded[n + 1:]) for n in range(len(padded))]
    taps = [n for n, f in enumerate(window.size) if f > 1]
    u = [window.dilation[n] * q[n] for n in taps]
    f = [window.size[n] for n in taps]
    result = None
    for i in range(len(taps)):
        coefficient = u[i] - (f[i + 1] * u[i + 1] if i + 1 < len(taps) else 0)
        if coefficient:
            term = (index // prod(f[i + 1:]) if i + 1 < len(taps) else index) * coefficient
            result = term if result is None else result + term
    base = torch.zeros(out, dtype=torch.int64, device=device_of(like))
    for n in range(len(out)):
        shape = [1] * len(out)
        shape[n] = out[n]
        base = base + (torch.arange(out[n], dtype=torch.int64, device=device_of(like))
                       * (window.stride[n] * q[n])).reshape(shape)
    return base if result is None else result + base


@torch_op('sample')
def sample(input: Any, index: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
           stride: Sequence[int] = (), dilation: Sequence[int] = ()) -> Any:
    shape = static_shape(input)
    window = Window.of(shape, size, padding, stride, dilation)
    x = pad_border(input, window.pads, border)
    padded = [p + n + q for n, (p, q) in zip(shape, window.pads)]
    return torch.take(x, _tap_positions(index, window, padded, window.downscaled(shape), input))


@torch_op('desample')
def desample(input: Any, index: Any, *, size: Sequence[int], border: str = "constant", padding: Padding = (),
             stride: Sequence[int] = (), dilation: Sequence[int] = (), output_shape: Sequence[int] = ()) -> Any:
    # Each input value goes to the upscaled position its index names; positions in the padding are dropped.
    shape = static_shape(input)
    upscaled, window = _upscaled(shape, size, padding, stride, dilation, output_shape)
    padded = [p + n + q for n, (p, q) in zip(upscaled, window.pads)]
    taps = _tap_positions(index, window, padded, shape, input)
    y = torch.put(input.new_zeros(padded), taps, input, accumulate=True)
    return pad_border(y, [(-p, -q) for p, q in window.pads], shape=padded)


__all__ = ["Planes", "Window", "argmax_pool", "avg_pool", "box", "debox", "desample", "max_pool",
           "max_pool_with_index", "rms_pool", "sample"]
