"""Convolution and deconvolution (spec 4.3.1) and the separable compounds (4.9.2) as torch convolution calls.

conv is one F.conv{1,2,3}d call with its own (symmetric) padding when the border is zero-valued; otherwise the
input is padded explicitly first. deconv is one F.conv_transpose call whose padding and output_padding select
the NNEF output window when they can; otherwise the full transposed convolution is cropped (or zero-extended)
to it, with the input first extended by the border where the NNEF definition reads outside it.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_border import Padding, device_of, pad_border, resolve_padding
from nnef_torch.ops.torch_common import is_literal, static_dtype, static_shape

Shape = tuple[int, ...]

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_ZERO_BORDERS = ("constant", "ignore")  # a filter has nothing to ignore: outside values count as zeros


def _spatial_rank(op: str, shape: Shape) -> int:
    k = len(shape) - 2
    if k not in _CONV:
        raise NNEFUnsupportedError(f"{op}: torch convolutions take 1 to 3 spatial dimensions, "
                                   f"found input shape {list(shape)}")
    return k


def _bias_vector(bias: Any, channels: int, like: Any) -> Any:
    """The bias as F.conv takes it: None for a literal 0, else a [channels] vector (a singular bias expanded)."""
    if is_literal(bias):
        if bias == 0:
            return None
        return torch.full((channels,), float(bias), dtype=static_dtype(like), device=device_of(like))
    if prod(static_shape(bias)) == channels:
        return bias.reshape(channels)
    return bias.reshape(1).expand(channels)


def _defaults(values: Sequence[int], k: int) -> tuple[int, ...]:
    return tuple(values) or (1,) * k


def conv_nd(x: Any, shape: Shape, filter: Any, bias: Any, *, border: str, padding: Padding, stride: Sequence[int],
            dilation: Sequence[int], groups: int) -> tuple[Any, Shape]:
    """conv of `x` (of static `shape`, also for intermediate values); returns the result and its shape."""
    fshape = static_shape(filter)
    k = _spatial_rank("conv", shape)
    stride, dilation = _defaults(stride, k), _defaults(dilation, k)
    pads = resolve_padding(shape[2:], fshape[2:], padding, stride, dilation)
    out = tuple((p + n + q - (f - 1) * d - 1) // s + 1
                for n, f, (p, q), s, d in zip(shape[2:], fshape[2:], pads, stride, dilation))
    b = _bias_vector(bias, fshape[0], x)
    groups = groups or shape[1]
    if border in _ZERO_BORDERS and all(p == q >= 0 for p, q in pads):
        y = _CONV[k](x, filter, b, stride, [p for p, _ in pads], dilation, groups)
    else:
        y = _CONV[k](pad_border(x, [(0, 0), (0, 0)] + pads, border, shape=shape), filter, b, stride, 0, dilation,
                     groups)
    return y, (shape[0], fshape[0]) + out


def transposed_conv(x: Any, shape: Shape, filter: Any, bias: Any, border: str, pads: Padding,
                    stride: Sequence[int], dilation: Sequence[int], upscaled: Sequence[int], groups: int) -> Any:
    """The reverse window op on [N, C, *spatial] `x`: out[i] = sum_j x~[(i + p - j * d) / s] * filter[j] over the
    whole quotients, for i in [0, upscaled), with x~ the input extended by `border`."""
    fsize = static_shape(filter)[2:]
    k = len(fsize)
    full = [(n - 1) * s + (f - 1) * d + 1 for n, f, s, d in zip(shape[2:], fsize, stride, dilation)]
    extra = [big - length + 2 * p for big, length, (p, _) in zip(upscaled, full, pads)]
    if border in _ZERO_BORDERS and all(p >= 0 and 0 <= e < max(s, d)
                                       for (p, _), e, s, d in zip(pads, extra, stride, dilation)):
        return _CONV_T[k](x, filter, bias, stride, [p for p, _ in pads], extra, groups, dilation)
    reach = [(0, 0)] * k
    if border not in _ZERO_BORDERS:  # input positions the definition reads, beyond [0, n)
        reach = [(max(0, ((f - 1) * d - p) // s), max(0, (big - 1 + p) // s - (n - 1)))
                 for n, big, f, (p, _), s, d in zip(shape[2:], upscaled, fsize, pads, stride, dilation)]
    x = pad_border(x, [(0, 0), (0, 0)] + reach, border, shape=shape)
    lengths = [(n + a + b - 1) * s + (f - 1) * d + 1
               for n, (a, b), f, s, d in zip(shape[2:], reach, fsize, stride, dilation)]
    starts = [p + a * s for (p, _), (a, _), s in zip(pads, reach, stride)]
    crops = [(-start, big + start - length) for start, big, length in zip(starts, upscaled, lengths)]
    inside = all(p <= 0 and q <= 0 for p, q in crops)  # a pure crop: the bias can go into the conv call
    y = _CONV_T[k](x, filter, bias if inside else None, stride, 0, 0, groups, dilation)
    y = pad_border(y, [(0, 0), (0, 0)] + crops, shape=[shape[0], static_shape(filter)[1] * groups] + lengths)
    if bias is not None and not inside:
        y = y + bias.reshape((-1,) + (1,) * k)
    return y


def deconv_nd(x: Any, shape: Shape, filter: Any, bias: Any, *, border: str, padding: Padding,
              stride: Sequence[int], dilation: Sequence[int], output_shape: Sequence[int],
              groups: int) -> tuple[Any, Shape]:
    """deconv of `x` (of static `shape`); returns the result and its shape."""
    fshape = static_shape(filter)
    k = _spatial_rank("deconv", shape)
    stride, dilation = _defaults(stride, k), _defaults(dilation, k)
    groups = groups or (output_shape[1] if output_shape else shape[1])
    channels = fshape[1] * groups
    if output_shape:
        upscaled = tuple(output_shape[2:])
    elif padding:
        upscaled = tuple((n - 1) * s + (f - 1) * d + 1 - p - q
                         for n, f, (p, q), s, d in zip(shape[2:], fshape[2:], padding, stride, dilation))
    else:
        upscaled = tuple(n * s for n, s in zip(shape[2:], stride))
    pads = resolve_padding(upscaled, fshape[2:], padding, stride, dilation)
    b = _bias_vector(bias, channels, x)
    y = transposed_conv(x, shape, filter, b, border, pads, stride, dilation, upscaled, groups)
    return y, (shape[0], channels) + upscaled


@torch_op('conv')
def conv(input: Any, filter: Any, bias: Any = 0.0, *, border: str = "constant", padding: Padding = (),
         stride: Sequence[int] = (), dilation: Sequence[int] = (), groups: int = 1) -> Any:
    return conv_nd(input, static_shape(input), filter, bias, border=border, padding=padding, stride=stride,
                   dilation=dilation, groups=groups)[0]


@torch_op('deconv')
def deconv(input: Any, filter: Any, bias: Any = 0.0, *, border: str = "constant", padding: Padding = (),
           stride: Sequence[int] = (), dilation: Sequence[int] = (), output_shape: Sequence[int] = (),
           groups: int = 1) -> Any:
    return deconv_nd(input, static_shape(input), filter, bias, border=border, padding=padding, stride=stride,
                     dilation=dilation, output_shape=output_shape, groups=groups)[0]


@torch_op('separable_conv')
def separable_conv(input: Any, plane_filter: Any, point_filter: Any, bias: Any = 0.0, *, border: str = "constant",
                   padding: Padding = (), stride: Sequence[int] = (), dilation: Sequence[int] = (),
                   groups: int = 1) -> Any:
    # As its definition: a depthwise conv with plane_filter, then a conv with point_filter (automatic padding).
    filtered, shape = conv_nd(input, static_shape(input), plane_filter, 0.0, border=border, padding=padding,
                              stride=stride, dilation=dilation, groups=0)
    return conv_nd(filtered, shape, point_filter, bias, border="constant", padding=(), stride=(), dilation=(),
                   groups=groups)[0]


@torch_op('separable_deconv')
def separable_deconv(input: Any, plane_filter: Any, point_filter: Any, bias: Any = 0.0, *,
                     border: str = "constant", padding: Padding = (), stride: Sequence[int] = (),
                     dilation: Sequence[int] = (), output_shape: Sequence[int] = (), groups: int = 1) -> Any:
    # As its definition: a deconv with point_filter (automatic padding), then a depthwise deconv with plane_filter.
    filtered, shape = deconv_nd(input, static_shape(input), point_filter, 0.0, border="constant", padding=(),
                                stride=(), dilation=(), output_shape=(), groups=groups)
    return deconv_nd(filtered, shape, plane_filter, bias, border=border, padding=padding, stride=stride,
                     dilation=dilation, output_shape=output_shape, groups=0)[0]


__all__ = ["conv", "conv_nd", "deconv", "deconv_nd", "separable_conv", "separable_deconv", "transposed_conv"]
