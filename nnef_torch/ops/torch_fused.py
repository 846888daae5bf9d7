"""Torch implementations and shape rules of the operations the importer's fusion passes write
(`nnef_torch/importer/fragments.nnef`): one torch call each where the unfused form takes several."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import Shape, shape_rule, torch_op
from nnef_torch.ops.shapes_common import check_broadcastable_to, fail, fmt
from nnef_torch.ops.torch_common import is_literal, static_shape


def trailing(axes: Sequence[int], rank: int) -> bool:
    """Whether `axes` are the last len(axes) axes of a rank-`rank` tensor (at least one)."""
    return len(axes) > 0 and sorted(axes) == list(range(rank - len(axes), rank))


def _affine(value: Any, normalized: tuple[int, ...], identity: float) -> tuple[Any, Any]:
    """(layer_norm's weight or bias, a literal to apply afterwards): a tensor shaped [1, ..., 1, *normalized]
    becomes `normalized`-shaped; a literal is applied after the call unless it is the identity."""
    if is_literal(value):
        return None, (None if value == identity else value)
    return value.reshape(normalized), None


@torch_op('fused_layer_norm')
def fused_layer_norm(input: torch.Tensor, scale: Any = 1.0, offset: Any = 0.0, *, axes: Sequence[int],
                     epsilon: float) -> torch.Tensor:
    shape = static_shape(input)
    normalized = shape[len(shape) - len(axes):]
    weight, factor = _affine(scale, normalized, 1.0)
    bias, shift = _affine(offset, normalized, 0.0)
    if factor is not None and bias is not None:  # the bias must come after the literal scale
        bias, shift = None, offset
    output = F.layer_norm(input, normalized, weight, bias, epsilon)
    if factor is not None:
        output = output * factor
    if shift is not None:
        output = output + _aligned(shift, len(shape))
    return output


def _aligned(x: Any, rank: int) -> Any:
    return x if is_literal(x) else x.reshape(static_shape(x) + (1,) * (rank - len(static_shape(x))))


@torch_op('fused_gelu_tanh')
def fused_gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate='tanh')


@shape_rule('fused_layer_norm')
def fused_layer_norm_shape(input: Shape, scale: Shape = (), offset: Shape = (), *, axes: Sequence[int],
                           epsilon: float) -> Shape:
    if not trailing(axes, len(input)):
        fail('fused_layer_norm', f"axes must be the trailing axes of the input, found {fmt(axes)} for input "
                                 f"shape {fmt(input)}")
    expected = (1,) * (len(input) - len(axes)) + tuple(input[len(input) - len(axes):])
    for name, shape in (("scale", scale), ("offset", offset)):
        if shape and tuple(shape) + (1,) * (len(input) - len(shape)) != expected:
            fail('fused_layer_norm', f"{name} must be a literal or have shape {fmt(expected)}, found {fmt(shape)}")
        check_broadcastable_to('fused_layer_norm', name, shape, "input", input)
    return tuple(input)


@shape_rule('fused_gelu_tanh')
def fused_gelu_tanh_shape(x: Shape) -> Shape:
    return tuple(x)
