"""Torch implementations of the tensor-introducing `constant`, the tensor shape ops (spec 4.5 and the later
Khronos stdlib: tile, gather, cast), matrix multiplication (4.7), `linear` (4.9.2), `copy_n` and `add_n`.

Each function maps its op onto one torch call where one computes exactly the NNEF definition. All attribute logic
runs on static shapes, so the same code traces; a leading batch dimension that an op merely carries along stays
dynamic in the generated code (`-1` in a reshape, `:` in a slice), so a graph declared with batch 1 also runs at
other batch sizes where the op allows.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_common import align, as_tensor, is_literal, static_rank, static_shape


def _volume(shape: Sequence[int]) -> int:
    result = 1
    for item in shape:
        result *= item
    return result


# Tensor introducing operations (spec 4.1).

@torch_op('constant', typed=True)
def constant(*, shape: Sequence[int], value: Sequence[Any], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of `shape` filled from `value`: one item broadcast to the whole shape, or every item in order."""
    shape = tuple(shape)
    if len(value) == 1:
        return torch.full(shape, value[0], dtype=dtype)
    return torch.tensor(list(value), dtype=dtype).reshape(shape)


# Reshaping (spec 4.5.1 with axis_start / axis_count), squeezing, transposing (4.5.2).

@torch_op('reshape')
def reshape(input: torch.Tensor, *, shape: Sequence[int], axis_start: int = 0, axis_count: int = -1) -> torch.Tensor:
    """Reshape dimensions [axis_start, axis_start + axis_count) to `shape` (0 copies an input extent, -1 infers).

    The target is resolved statically; when its leading extent is the input's, a multiple of it (leading axes
    merged) or a divisor of it (the leading axis split), that extent becomes -1, so the batch size stays free.
    """
    source = static_shape(input)
    rank = len(source)
    stop = rank if axis_count == -1 else axis_start + axis_count
    new = [source[axis_start + i] if item == 0 else item for i, item in enumerate(shape)]
    if -1 in new:
        known = _volume(item for item in new if item != -1)
        new[new.index(-1)] = _volume(source[axis_start:stop]) // known
    target = list(source[:axis_start]) + new + list(source[stop:])
    if target == list(source):
        return input
    if target and source and target[0] > 0 and source[0] > 0 and _volume(target[1:]) > 0 and (
            target[0] % source[0] == 0 or source[0] % target[0] == 0):
        target[0] = -1  # the leading extent kept, merged with the next ones ([B, S, K] -> [B*S, K]) or split
    return input.reshape(target)


@torch_op('squeeze')
def squeeze(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    if not axes:
        return input
    return torch.squeeze(input, tuple(axes))


@torch_op('unsqueeze')
def unsqueeze(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    """Insert singleton dimensions at the listed output positions (one indexing view)."""
    if not axes:
        return input
    if is_literal(input):  # a number is a tensor of shape []
        input = as_tensor(input)
    rank = static_rank(input) + len(axes)
    return input[tuple(None if i in axes else slice(None) for i in range(rank))]


@torch_op('transpose')
def transpose(input: torch.Tensor, *, axes: Sequence[int]) -> torch.Tensor:
    """Permute the leading len(axes) dimensions; the others keep their places."""
    perm = list(axes) + list(range(len(axes), static_rank(input)))
    if perm == sorted(perm):
        return input
    return input.permute(perm)


# Splitting and concatenation (spec 4.5.3).

@torch_op('concat')
def concat(values: Sequence[torch.Tensor], *, axis: int) -> torch.Tensor:
    return torch.cat(list(values), axis)


@torch_op('split')
def split(value: torch.Tensor, *, axis: int, ratios: Sequence[int]) -> list[torch.Tensor]:
    unit = static_shape(value)[axis] // sum(ratios)
    parts = torch.split(value, [unit * ratio for ratio in ratios], axis)
    return [parts[i] for i in range(len(ratios))]  # indexed, not iterated: a traced result is one Proxy


@torch_op('stack')
def stack(values: Sequence[torch.Tensor], *, axis: int) -> torch.Tensor:
    return torch.stack(list(values), axis)


@torch_op('unstack')
def unstack(value: torch.Tensor, *, axis: int) -> list[torch.Tensor]:
    parts = torch.unbind(value, axis)
    return [parts[i] for i in range(static_shape(value)[axis])]


# Slicing (spec 4.5.4, in the 1.0.5 form with strides).

@torch_op('slice')
def slice_(input: torch.Tensor, *, axes: Sequence[int], begin: Sequence[int], end: Sequence[int],
           stride: Sequence[int] = ()) -> torch.Tensor:
    """Python-like slicing with the IR's resolution rules (see the `slice` shape rule): negative begin/end count
    from the end, end == 0 means the extent where the stride is 1, both are clamped to [-1, extent].

    Positive strides are one indexing view; a negative stride takes the same elements with a positive stride
    and flips them (torch has no negative-step slicing).
    """
    shape = static_shape(input)
    index: list[Any] = [slice(None)] * len(shape)
    flips = []
    for i, axis in enumerate(axes):
        size = shape[axis]
        step = stride[i] if stride else 1
        first, last = begin[i], end[i]
        first = first + size if first < 0 else first
        last = last + size if last < 0 else (size if last == 0 and step == 1 else last)
        first, last = min(max(first, -1), size), min(max(last, -1), size)
        count = -((first - last) // step)
        if step > 0:
            index[axis] = slice(first, first + (count - 1) * step + 1, step)
        else:
            low = first + (count - 1) * step
            index[axis] = slice(low, first + 1, -step)
            if count > 1:
                flips.append(axis)
        if index[axis] == slice(0, size, 1):
            index[axis] = slice(None)
    output = input
    if any(item != slice(None) for item in index):
        output = output[tuple(index)]
    if flips:
        output = torch.flip(output, flips)
    return output


# Later stdlib additions: tile, gather, cast.

@torch_op('tile')
def tile(input: torch.Tensor, *, repeats: Sequence[int]) -> torch.Tensor:
    if all(count == 1 for count in repeats):
        return input
    return input.repeat(list(repeats))


@torch_op('gather')
def gather(input: torch.Tensor, indices: torch.Tensor, *, axis: int = 0) -> torch.Tensor:
    """output[i..., j..., k...] = input[i..., indices[j...], k...] (result shape input[:axis] + indices + rest)."""
    indices = as_tensor(indices, dtype=torch.int64)
    return input[(slice(None),) * axis + (indices,)]


@torch_op('cast', typed=True)
def cast(input: torch.Tensor, *, dtype: torch.dtype) -> torch.Tensor:
    """Convert to `dtype` (a float truncates towards zero into integers; nonzero is true)."""
    return as_tensor(input).to(dtype)


# Matrix multiplication (spec 4.7) and the linear layer (4.9.2).

@torch_op('matmul')
def matmul(A: torch.Tensor, B: torch.Tensor, *, transposeA: bool = False, transposeB: bool = False) -> torch.Tensor:
    """Batched matmul; A and B have equal ranks, so NNEF and torch batch broadcasting coincide. A 1-D operand
    (read leniently) follows numpy, as torch.matmul does; a transpose flag leaves a vector as it is."""
    rank_a, rank_b = len(static_shape(A)), len(static_shape(B))
    if rank_a == 1 or rank_b == 1:
        return torch.matmul(A.mT if transposeA and rank_a == 2 else A, B.mT if transposeB and rank_b == 2 else B)
    if transposeA:
        A = A.mT
    if transposeB:
        B = B.mT
    return torch.matmul(A, B)


@torch_op('linear')
def linear(input: torch.Tensor, filter: torch.Tensor, bias: Any = 0.0) -> torch.Tensor:
    """matmul(input, filter, transposeB = true) + bias as one F.linear; a [1, M] or [1, 1] bias (or a literal)
    rides along in the call, any other broadcastable bias is added NNEF-style (aligned from the left)."""
    if is_literal(bias):
        output = F.linear(input, filter)
        return output + bias if bias != 0 else output
    bias = align(bias, 2)
    if static_shape(bias)[0] == 1:
        return F.linear(input, filter, bias)
    return F.linear(input, filter) + bias


# Miscellaneous (spec 4.9.6).

@torch_op('copy_n')
def copy_n(x: torch.Tensor, *, times: int) -> list[torch.Tensor]:
    return [x] * times


@torch_op('add_n')
def add_n(x: Sequence[torch.Tensor]) -> torch.Tensor:
    """x[0] + (x[1] + (... + x[n-1])): the definition's right fold, in its order of additions."""
    values = list(x)
    output = values[-1]
    for value in reversed(values[:-1]):
        output = torch.add(value, output)
    return output
