"""Shape rules of the reductions (spec 4.4) and of the compounds built on them: moments, softmax, the
l1 / l2 normalizations and batch normalization (4.9).

Reductions keep the rank: reduced dimensions become 1. Axes must be unique and less than the input rank.
"""
from __future__ import annotations

from collections.abc import Sequence

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import Shape, check_axes, check_broadcastable_to, fail


def _reduce(op: str, input: Shape, axes: Sequence[int]) -> Shape:
    check_axes(op, 'axes', axes, len(input))
    reduced = set(axes)
    return tuple(1 if i in reduced else item for i, item in enumerate(input))


@shape_rule('sum_reduce')
def sum_reduce(input: Shape, *, axes: Sequence[int], normalize: bool) -> Shape:
    return _reduce('sum_reduce', input, axes)


@shape_rule('mean_reduce')
def mean_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('mean_reduce', input, axes)


@shape_rule('max_reduce')
def max_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('max_reduce', input, axes)


@shape_rule('min_reduce')
def min_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('min_reduce', input, axes)


@shape_rule('argmax_reduce')
def argmax_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('argmax_reduce', input, axes)


@shape_rule('argmin_reduce')
def argmin_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('argmin_reduce', input, axes)


@shape_rule('any_reduce')
def any_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('any_reduce', input, axes)


@shape_rule('all_reduce')
def all_reduce(input: Shape, *, axes: Sequence[int]) -> Shape:
    return _reduce('all_reduce', input, axes)


@shape_rule('moments')
def moments(input: Shape, *, axes: Sequence[int]) -> tuple[Shape, Shape]:
    reduced = _reduce('moments', input, axes)
    return reduced, reduced


@shape_rule('softmax')
def softmax(x: Shape, *, axes: Sequence[int]) -> Shape:
    check_axes('softmax', 'axes', axes, len(x))
    return tuple(x)


@shape_rule('l1_normalization')
def l1_normalization(input: Shape, *, axes: Sequence[int], bias: float, epsilon: float) -> Shape:
    check_axes('l1_normalization', 'axes', axes, len(input))
    return tuple(input)


@shape_rule('l2_normalization')
def l2_normalization(input: Shape, *, axes: Sequence[int], bias: float, epsilon: float) -> Shape:
    check_axes('l2_normalization', 'axes', axes, len(input))
    return tuple(input)


@shape_rule('batch_normalization')
def batch_normalization(input: Shape, mean: Shape, variance: Shape, offset: Shape, scale: Shape, *,
                        epsilon: float) -> Shape:
    # Like the Khronos tools, the statistics and affine parameters must broadcast to input, which keeps its shape.
    op = 'batch_normalization'
    for name, shape in (('mean', mean), ('variance', variance), ('offset', offset), ('scale', scale)):
        check_broadcastable_to(op, name, shape, 'input', input)
    if epsilon < 0:
        fail(op, f"'epsilon' must be non-negative, found {epsilon}")
    return tuple(input)


@shape_rule('batch_norm_moving')
def batch_norm_moving(input: Shape, mean: Shape, variance: Shape, offset: Shape, scale: Shape, *,
                      epsilon: float, momentum: float) -> Shape:
    # statistics and affine parameters are vectors (C,) of the channels on axis 1; offset and scale may be numbers
    op = 'batch_norm_moving'
    channels = input[1] if len(input) > 1 else None
    for name, shape in (('mean', mean), ('variance', variance), ('offset', offset), ('scale', scale)):
        if tuple(shape) != (channels,) and not (name in ('offset', 'scale') and tuple(shape) in ((), (1,))):
            fail(op, f"'{name}' must have shape [{channels}] (the channels of axis 1), found {list(shape)}")
    if epsilon < 0:
        fail(op, f"'epsilon' must be non-negative, found {epsilon}")
    if not 0.0 <= momentum <= 1.0:
        fail(op, f"'momentum' must be in [0, 1], found {momentum}")
    return tuple(input)


@shape_rule('dropout')
def dropout(input: Shape, *, rate: float, axes: Sequence[int]) -> Shape:
    if not 0.0 <= rate < 1.0:
        fail('dropout', f"'rate' must be in [0, 1), found {rate}")
    check_axes('dropout', 'axes', axes, len(input))
    return tuple(input)
