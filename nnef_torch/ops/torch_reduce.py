"""Torch implementations of the reductions (spec 4.4) and of the compounds built on them: moments, softmax, the
l1 / l2 normalizations and batch normalization (4.9).

Reductions keep the rank: each reduced dimension becomes 1 (`keepdim=True`). An empty `axes` reduces nothing,
so those ops return their input unchanged (torch would read an empty dim list as "all dimensions"). Reshapes keep
an unreduced leading dimension as -1, so a graph declared with batch 1 also runs at other batch sizes.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_common import aligned, is_literal, static_dtype, static_rank, static_shape


def _dims(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(axes))


def _merged_shape(shape: Sequence[int], axes: Sequence[int]) -> list[int] | None:
    """The shape with the consecutive `axes` merged into one dimension, or None when they are not consecutive."""
    dims = _dims(axes)
    first, last = dims[0], dims[-1]
    if last - first + 1 != len(dims):
        return None
    merged = list(shape[:first]) + [math.prod(shape[first:last + 1])] + list(shape[last + 1:])
    return _free_batch(merged, dims)


def _free_batch(shape: list[int], axes: Sequence[int]) -> list[int]:
    if shape and 0 not in axes:
        shape[0] = -1
    return shape


@torch_op('sum_reduce')
def sum_reduce(input: torch.Tensor, *, axes: Sequence[int], normalize: bool = False) -> torch.Tensor:
    if not axes:
        return input
    if normalize:
        return torch.mean(input, _dims(axes), keepdim=True)
    return torch.sum(input, _dims(axes), keepdim=True)


@torch_op('mean_reduce')
def mean_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    return sum_reduce(input, axes=axes, normalize=True)


@torch_op('max_reduce')
def max_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    if not axes:
        return input
    return torch.amax(input, _dims(axes), keepdim=True)


@torch_op('min_reduce')
def min_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    if not axes:
        return input
    return torch.amin(input, _dims(axes), keepdim=True)


@torch_op('any_reduce')
def any_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    if not axes:
        return input
    return torch.any(input, _dims(axes), keepdim=True)


@torch_op('all_reduce')
def all_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    if not axes:
        return input
    return torch.all(input, _dims(axes), keepdim=True)


def _arg_reduce(input: torch.Tensor, axes: Sequence[int], pick: Any) -> torch.Tensor:
    """The index of the first extremum within the reduced axes, flattened row-major in increasing axis order.

    One axis: one torch call. Several: consecutive axes are merged by a reshape, others moved last first.
    """
    if not axes:
        return torch.zeros_like(input, dtype=torch.int64)
    dims = _dims(axes)
    if len(dims) == 1:
        return pick(input, dims[0], keepdim=True)
    shape = static_shape(input)
    output_shape = _free_batch([1 if i in dims else n for i, n in enumerate(shape)], dims)
    merged = _merged_shape(shape, dims)
    if merged is not None:
        return pick(input.reshape(merged), dims[0]).reshape(output_shape)
    kept = [i for i in range(len(shape)) if i not in dims]
    flat = _free_batch([shape[i] for i in kept] + [math.prod(shape[i] for i in dims)], dims)
    moved = input.permute(kept + list(dims)).reshape(flat)
    return pick(moved, -1).reshape(output_shape)


@torch_op('argmax_reduce')
def argmax_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    return _arg_reduce(input, axes, torch.argmax)


@torch_op('argmin_reduce')
def argmin_reduce(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    return _arg_reduce(input, axes, torch.argmin)


@torch_op('moments')
def moments(input: torch.Tensor, *, axes: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, mean of squared deviations) in one `torch.var_mean` call."""
    if not axes:
        return input, torch.zeros_like(input)
    variance, mean = torch.var_mean(input, _dims(axes), correction=0, keepdim=True)
    return mean, variance


@torch_op('softmax')
def softmax(x: torch.Tensor, *, axes: Sequence[int] = (1,)) -> torch.Tensor:
    """F.softmax over one axis, or over consecutive axes merged by a reshape; else the definition's formula."""
    if not axes:
        return torch.ones_like(x)  # exp(x - x) / exp(x - x)
    dims = _dims(axes)
    if len(dims) == 1:
        return F.softmax(x, dims[0])
    shape = static_shape(x)
    merged = _merged_shape(shape, dims)
    if merged is not None:
        return F.softmax(x.reshape(merged), dims[0]).reshape(_free_batch(list(shape), dims))
    e = torch.exp(x - torch.amax(x, dims, keepdim=True))
    return e / torch.sum(e, dims, keepdim=True)


def _normalize(input: torch.Tensor, axes: Sequence[int], bias: float, epsilon: float, p: int) -> torch.Tensor:
    """input / max(norm_p(input over axes) + bias, epsilon); F.normalize when there is no bias."""
    if not axes:
        sigma = torch.abs(input)  # the norm of one item
    elif bias == 0.0:
        return F.normalize(input, float(p), _dims(axes), epsilon)
    else:
        sigma = torch.linalg.vector_norm(input, p, _dims(axes), keepdim=True)
    return input / torch.clamp(sigma + bias, min=epsilon)


@torch_op('l1_normalization')
def l1_normalization(input: torch.Tensor, *, axes: Sequence[int], bias: float = 0.0,
                     epsilon: float = 0.0) -> torch.Tensor:
    return _normalize(input, axes, bias, epsilon, 1)


@torch_op('l2_normalization')
def l2_normalization(input: torch.Tensor, *, axes: Sequence[int], bias: float = 0.0,
                     epsilon: float = 0.0) -> torch.Tensor:
    return _normalize(input, axes, bias, epsilon, 2)


def _per_channel(input: Any, params: tuple[Any, ...], factor: Any, shift: Any) -> bool:
    """Parameters of the NNEF per-channel shape [1, C] for an input [N, C, ...] of floats, factor and shift
    tensors."""
    if is_literal(factor) or is_literal(shift) or not static_dtype(input).is_floating_point:
        return False
    channels = (1, static_shape(input)[1])
    return all(static_shape(param) == channels for param in params if not is_literal(param))


def _channel_multiply_add(input: Any, factor: Any, shift: Any) -> Any:
    """input * factor + shift along axis 1 by torch's inference batch norm with zero mean and unit variance (the
    same values as `addcmul`, in one pass of a kernel specialised for channels: about 1.7x faster on CPU);
    differentiable in input, factor and shift."""
    channels = static_shape(input)[1]
    dtype = static_dtype(input)
    zeros, ones = torch.zeros(channels, dtype=dtype), torch.ones(channels, dtype=dtype)
    return torch.batch_norm(input, factor.reshape(channels), shift.reshape(channels), zeros, ones, False, 0.0, 0.0,
                            torch.backends.cudnn.enabled)


@torch_op('batch_normalization')
def batch_normalization(input: torch.Tensor, mean: Any, variance: Any, offset: Any, scale: Any, *,
                        epsilon: float) -> torch.Tensor:
    """offset + scale * (input - mean) / sqrt(variance + epsilon) as one multiply-add over the input, with the
    per-channel factor scale / sqrt(variance + epsilon) and shift offset - mean * factor: what F.batch_norm computes
    in inference on CPU, but differentiable in mean and variance too (F.batch_norm refuses running statistics
    that require grad, and imported statistics are parameters).

    Parameters of one rank (the usual [1, C]) are combined at that rank and only factor and shift are aligned
    to the input: the same values, two views instead of four."""
    params = (mean, variance, offset, scale)
    ranks = {static_rank(param) for param in params if not is_literal(param)}
    rank = static_rank(input)
    missing = rank - max(ranks, default=rank)  # the views factor and shift need
    if len(ranks) > 1 or missing < 0:
        input, mean, variance, offset, scale = aligned(input, *params)
        missing = 0
    if is_literal(variance):
        inverse = 1.0 / math.sqrt(variance + epsilon)
    else:
        inverse = torch.rsqrt(variance + epsilon)
    factor = scale * inverse
    shift = offset - mean * factor
    if missing > 0 and _per_channel(input, params, factor, shift):
        return _channel_multiply_add(input, factor, shift)
    if missing > 0:
        factor, shift = (x if is_literal(x) else x[(Ellipsis,) + (None,) * missing] for x in (factor, shift))
    if is_literal(factor) or is_literal(shift):
        return input * factor + shift
    return torch.addcmul(shift, input, factor)
