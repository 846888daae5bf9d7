"""Shape rules of the sliding-window operations (spec 4.3.1-4.3.3) and their compounds (separable convolutions,
pooling, 4.9.2-4.9.3).

Per dimension, with upscaled extent X, downscaled extent x, window size f, padding (p, q), stride s, dilation d:
the dilated window is fd = (f - 1) * d + 1, the basic ops give x = floor((p + X + q - fd) / s) + 1 (the numerator
must be non-negative) and the reverse ops give X = (x - 1) * s + fd - p - q. With automatic padding (empty
`padding`) the basic ops give x = ceil(X / s) and the reverse ops X = x * s. A non-empty `output_shape` of a reverse
op is its result, and must downscale to the input shape.

conv / deconv list padding, stride and dilation for the spatial dimensions only; the pooling family (box, debox,
argmax_pool, sample, desample, *_pool) for all dimensions.
"""
from __future__ import annotations

from collections.abc import Sequence

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import (
    ALL_BORDERS,
    FILTER_BORDERS,
    Shape,
    check_choice,
    check_length,
    check_positive,
    check_rank_at_least,
    fail,
    fmt,
)

Padding = Sequence[tuple[int, int]]

# The spec allows only 'constant' for desample; 'ignore' is taken too because it means the same for desample
# (only positions inside the input receive values) and pairs with max_pool_with_index(border = 'ignore').
DESAMPLE_BORDERS = ("constant", "ignore")


def _downscale(op: str, upscaled: Sequence[int], size: Sequence[int], padding: Padding, stride: Sequence[int],
               dilation: Sequence[int], first_dim: int) -> Shape:
    result = []
    for i, (big, f, s, d) in enumerate(zip(upscaled, size, stride, dilation)):
        if not padding:
            result.append(-(-big // s))
            continue
        (p, q), window = padding[i], (f - 1) * d + 1
        if p + big + q < window:
            fail(op, f"in dimension {first_dim + i}, the padded extent p + X + q = {p} + {big} + {q} must be at least "
                     f"the dilated window size (f - 1) * d + 1 = ({f} - 1) * {d} + 1 = {window}")
        result.append((p + big + q - window) // s + 1)
    return tuple(result)


def _upscale(op: str, downscaled: Sequence[int], size: Sequence[int], padding: Padding, stride: Sequence[int],
             dilation: Sequence[int], first_dim: int) -> Shape:
    result = []
    for i, (small, f, s, d) in enumerate(zip(downscaled, size, stride, dilation)):
        if not padding:
            result.append(small * s)
            continue
        (p, q), window = padding[i], (f - 1) * d + 1
        big = (small - 1) * s + window - p - q
        if big <= 0:
            fail(op, f"in dimension {first_dim + i}, the output extent (x - 1) * s + (f - 1) * d + 1 - p - q = "
                     f"({small} - 1) * {s} + ({f} - 1) * {d} + 1 - {p} - {q} = {big} must be strictly positive")
        result.append(big)
    return tuple(result)


def _window_attrs(op: str, dims: int, what: str, padding: Padding, stride: Sequence[int],
                  dilation: Sequence[int], output_shape: Sequence[int], rank: int) -> tuple[Shape, Shape]:
    """Check the lengths and ranges of the common window attributes; return stride and dilation, 1s if empty."""
    check_length(op, 'padding', padding, dims, what=what, allow_empty=True)
    check_length(op, 'stride', stride, dims, what=what, allow_empty=True)
    check_length(op, 'dilation', dilation, dims, what=what, allow_empty=True)
    check_positive(op, 'stride', stride)
    check_positive(op, 'dilation', dilation)
    check_length(op, 'output_shape', output_shape, rank, what="output dimension", allow_empty=True)
    check_positive(op, 'output_shape', output_shape)
    return tuple(stride) or (1,) * dims, tuple(dilation) or (1,) * dims


def _check_bias(op: str, bias: Shape, channels: int) -> None:
    for i, item in enumerate(bias):
        if item != 1 and not (i == 1 and item == channels):
            fail(op, f"bias shape {fmt(bias)} must be singular in every dimension but the channel dimension (1), "
                     f"where it must equal the output channels ({channels}) or 1")


def _conv_like(op: str, input: Shape, filter: Shape, bias: Shape, border: str, padding: Padding,
               stride: Sequence[int], dilation: Sequence[int], groups: int, output_shape: Sequence[int],
               transposed: bool, names: tuple[str, str] = ('input', 'filter')) -> Shape:
    """conv (transposed=False) or deconv (True); `names` name the input and the filter in messages."""
    in_name, f_name = names
    rank = len(input)
    check_rank_at_least(op, in_name, input, 2)
    if len(filter) != rank:
        fail(op, f"{f_name} rank must equal {in_name} rank, found {f_name} {fmt(filter)} and {in_name} {fmt(input)}")
    check_choice(op, 'border', border, FILTER_BORDERS)
    stride, dilation = _window_attrs(op, rank - 2, "spatial dimension", padding, stride, dilation, output_shape, rank)
    if groups < 0:
        fail(op, f"'groups' must be non-negative (0 for depthwise), found {groups}")
    count = groups or (output_shape[1] if transposed and output_shape else input[1])
    shown = f"groups ({count})" if groups else f"groups (0 = depthwise: {count})"
    if transposed:
        if filter[0] != input[1]:
            fail(op, f"{f_name} batch ({filter[0]}) must equal {in_name} channels ({input[1]})")
    elif filter[1] * count != input[1]:
        fail(op, f"{f_name} channels ({filter[1]}) times {shown} must equal {in_name} channels ({input[1]})")
    if filter[0] % count != 0:
        fail(op, f"{shown} must divide {f_name} batch ({filter[0]})")
    channels = filter[1] * count if transposed else filter[0]
    _check_bias(op, bias, channels)
    if output_shape:
        if output_shape[0] != input[0]:
            fail(op, f"'output_shape' batch ({output_shape[0]}) must equal {in_name} batch ({input[0]})")
        if output_shape[1] != channels:
            fail(op, f"'output_shape' channels ({output_shape[1]}) must equal {f_name} channels ({filter[1]}) "
                     f"times {shown}")
        expected = _downscale(op, output_shape[2:], filter[2:], padding, stride, dilation, 2)
        if expected != tuple(input[2:]):
            fail(op, f"'output_shape' {fmt(output_shape)} downscales to spatial extents {fmt(expected)}, "
                     f"which must equal the {in_name} spatial extents {fmt(input[2:])}")
        return tuple(output_shape)
    scale = _upscale if transposed else _downscale
    return (input[0], channels) + scale(op, input[2:], filter[2:], padding, stride, dilation, 2)


def _pool_like(op: str, input: Shape, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
               dilation: Sequence[int], output_shape: Sequence[int], transposed: bool,
               borders: Sequence[str] = ALL_BORDERS) -> Shape:
    rank = len(input)
    check_length(op, 'size', size, rank, what="input dimension")
    check_positive(op, 'size', size)
    check_choice(op, 'border', border, borders)
    stride, dilation = _window_attrs(op, rank, "input dimension", padding, stride, dilation, output_shape, rank)
    if output_shape:
        expected = _downscale(op, output_shape, size, padding, stride, dilation, 0)
        if expected != tuple(input):
            fail(op, f"'output_shape' {fmt(output_shape)} downscales to {fmt(expected)}, "
                     f"which must equal the input shape {fmt(input)}")
        return tuple(output_shape)
    scale = _upscale if transposed else _downscale
    return scale(op, input, size, padding, stride, dilation, 0)


# Convolution and deconvolution (spec 4.3.1) and the separable compounds (4.9.2).

@shape_rule('conv')
def conv(input: Shape, filter: Shape, bias: Shape, *, border: str, padding: Padding, stride: Sequence[int],
         dilation: Sequence[int], groups: int) -> Shape:
    return _conv_like('conv', input, filter, bias, border, padding, stride, dilation, groups, (), False)


@shape_rule('deconv')
def deconv(input: Shape, filter: Shape, bias: Shape, *, border: str, padding: Padding, stride: Sequence[int],
           dilation: Sequence[int], output_shape: Sequence[int], groups: int) -> Shape:
    return _conv_like('deconv', input, filter, bias, border, padding, stride, dilation, groups, output_shape, True)


@shape_rule('separable_conv')
def separable_conv(input: Shape, plane_filter: Shape, point_filter: Shape, bias: Shape, *, border: str,
                   padding: Padding, stride: Sequence[int], dilation: Sequence[int], groups: int) -> Shape:
    # As its definition: a depthwise conv with plane_filter, then a conv with point_filter (auto padding, stride 1).
    op = 'separable_conv'
    filtered = _conv_like(op, input, plane_filter, (), border, padding, stride, dilation, 0, (), False,
                          names=('input', 'plane_filter'))
    return _conv_like(op, filtered, point_filter, bias, 'constant', (), (), (), groups, (), False,
                      names=('plane-filtered input', 'point_filter'))


@shape_rule('separable_deconv')
def separable_deconv(input: Shape, plane_filter: Shape, point_filter: Shape, bias: Shape, *, border: str,
                     padding: Padding, stride: Sequence[int], dilation: Sequence[int], output_shape: Sequence[int],
                     groups: int) -> Shape:
    # As its definition: a deconv with point_filter (auto padding, stride 1), then a depthwise deconv with plane_filter.
    op = 'separable_deconv'
    filtered = _conv_like(op, input, point_filter, (), 'constant', (), (), (), groups, (), True,
                          names=('input', 'point_filter'))
    return _conv_like(op, filtered, plane_filter, bias, border, padding, stride, dilation, 0, output_shape, True,
                      names=('point-filtered input', 'plane_filter'))


# Box filter, index based sampling (spec 4.3.2-4.3.3) and pooling (4.9.3).

@shape_rule('box')
def box(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
        dilation: Sequence[int], normalize: bool) -> Shape:
    return _pool_like('box', input, size, border, padding, stride, dilation, (), False)


@shape_rule('debox')
def debox(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
          dilation: Sequence[int], output_shape: Sequence[int], normalize: bool) -> Shape:
    return _pool_like('debox', input, size, border, padding, stride, dilation, output_shape, True)


@shape_rule('argmax_pool')
def argmax_pool(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
                dilation: Sequence[int]) -> Shape:
    return _pool_like('argmax_pool', input, size, border, padding, stride, dilation, (), False)


@shape_rule('sample')
def sample(input: Shape, index: Shape, *, size: Sequence[int], border: str, padding: Padding,
           stride: Sequence[int], dilation: Sequence[int]) -> Shape:
    # 'ignore' is allowed because max_pool_with_index passes its border (typically 'ignore') on to sample.
    output = _pool_like('sample', input, size, border, padding, stride, dilation, (), False)
    # The spec: index has the shape of the output (as argmax_pool makes it). The Khronos tools compare it with
    # the input instead, which rejects every strided sample.
    if tuple(index) != output:
        fail('sample', f"index shape {fmt(index)} must equal the output shape {fmt(output)}")
    return output


@shape_rule('desample')
def desample(input: Shape, index: Shape, *, size: Sequence[int], border: str, padding: Padding,
             stride: Sequence[int], dilation: Sequence[int], output_shape: Sequence[int]) -> Shape:
    if tuple(index) != tuple(input):
        fail('desample', f"index shape {fmt(index)} must equal the input shape {fmt(input)}")
    return _pool_like('desample', input, size, border, padding, stride, dilation, output_shape, True,
                      DESAMPLE_BORDERS)


@shape_rule('max_pool_with_index')
def max_pool_with_index(input: Shape, *, size: Sequence[int], border: str, padding: Padding,
                        stride: Sequence[int], dilation: Sequence[int]) -> tuple[Shape, Shape]:
    output = _pool_like('max_pool_with_index', input, size, border, padding, stride, dilation, (), False)
    return output, output


@shape_rule('max_pool')
def max_pool(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
             dilation: Sequence[int]) -> Shape:
    return _pool_like('max_pool', input, size, border, padding, stride, dilation, (), False)


@shape_rule('avg_pool')
def avg_pool(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
             dilation: Sequence[int]) -> Shape:
    return _pool_like('avg_pool', input, size, border, padding, stride, dilation, (), False)


@shape_rule('rms_pool')
def rms_pool(input: Shape, *, size: Sequence[int], border: str, padding: Padding, stride: Sequence[int],
             dilation: Sequence[int]) -> Shape:
    return _pool_like('rms_pool', input, size, border, padding, stride, dilation, (), False)
