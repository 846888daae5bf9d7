"""Helpers shared by the shape rules: formatting, broadcasting and argument checks.

Every check raises `NNEFShapeError` with a message that starts with the op name and says what was expected and
what was found; the caller attaches the location. Shapes are tuples of ints. NNEF shapes are conceptually
infinite with trailing singleton dimensions, so broadcasting aligns shapes from the LEFT (the shorter shape is
padded with trailing 1s), unlike numpy.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from nnef_torch.errors import NNEFShapeError
from nnef_torch.ir.limits import MAX_RESULTS

Shape = tuple[int, ...]

# Border modes of spec chapter 4.3. Filters (conv and its relatives) have no 'ignore' mode.
ALL_BORDERS = ("ignore", "constant", "replicate", "reflect", "reflect-even")
FILTER_BORDERS = ("constant", "replicate", "reflect", "reflect-even")
# Interpolation methods of multilinear_upsample and the roi resampling ops.
RESIZE_METHODS = ("symmetric", "asymmetric", "aligned")


def fail(op: str, message: str) -> NoReturn:
    raise NNEFShapeError(f"{op}: {message}")


def fmt(shape: Sequence[object]) -> str:
    """A shape or an attribute list as NNEF writes it: [4,16,32,32]; a long one cut after 16 items, with its
    length (a message never holds a whole long list of the input)."""
    if len(shape) > 16:
        return "[" + ",".join(str(item) for item in shape[:16]) + f",... ({len(shape):,} items)]"
    return "[" + ",".join(str(item) for item in shape) + "]"


def extent(shape: Sequence[int], axis: int) -> int:
    """The extent of `shape` along `axis`, 1 past its rank (trailing singleton dimensions)."""
    return shape[axis] if axis < len(shape) else 1


def volume(shape: Sequence[int]) -> int:
    result = 1
    for item in shape:
        result *= item
    return result


def broadcast(op: str, *named: tuple[str, Sequence[int]]) -> Shape:
    """The broadcast shape of several (name, shape) pairs; the result rank is the largest rank."""
    rank = max(len(shape) for _, shape in named)
    result = []
    for axis in range(rank):
        extents = {extent(shape, axis) for _, shape in named} - {1}
        if len(extents) > 1:
            found = ", ".join(f"{name} {fmt(shape)}" for name, shape in named)
            fail(op, f"shapes must be broadcast compatible (extents equal or 1 in each dimension), "
                     f"found {found} differing in dimension {axis}")
        result.append(extents.pop() if extents else 1)
    return tuple(result)


def check_broadcastable_to(op: str, name: str, shape: Sequence[int], target_name: str,
                           target: Sequence[int]) -> None:
    """`shape` must broadcast to `target` without changing it: each extent equal to the target's or 1."""
    for axis in range(max(len(shape), len(target))):
        have = extent(shape, axis)
        if have != 1 and have != extent(target, axis):
            fail(op, f"{name} shape {fmt(shape)} cannot be broadcast to {target_name} shape {fmt(target)} "
                     f"(dimension {axis}: {have} vs {extent(target, axis)})")


def check_rank_at_least(op: str, name: str, shape: Sequence[int], rank: int) -> None:
    if len(shape) < rank:
        fail(op, f"{name} must have rank at least {rank}, found shape {fmt(shape)}")


def check_axis(op: str, name: str, axis: int, rank: int) -> None:
    if not 0 <= axis < rank:
        fail(op, f"'{name}' must be in range [0,{rank}), found {axis}")


def check_axes(op: str, name: str, axes: Sequence[int], rank: int) -> None:
    """Items of `axes` must be unique and in [0, rank)."""
    for axis in axes:
        if not 0 <= axis < rank:
            fail(op, f"items in '{name}' must be in range [0,{rank}), found {fmt(axes)}")
    if len(set(axes)) != len(axes):
        fail(op, f"items in '{name}' must be unique, found {fmt(axes)}")


def check_length(op: str, name: str, values: Sequence[object], length: int, *, what: str,
                 allow_empty: bool = False) -> None:
    """`values` must have `length` items (one per `what`), or none when `allow_empty`."""
    if len(values) != length and not (allow_empty and not values):
        expected = f"{length} (one per {what})" + (" or 0" if allow_empty else "")
        fail(op, f"length of '{name}' must be {expected}, found {len(values)}: {fmt(values)}")


def check_result_count(op: str, what: str, count: int) -> None:
    """An operation returning `count` tensors: checked before any list of that length is made."""
    if count > MAX_RESULTS:
        fail(op, f"{what} gives {count} result tensors, more than the limit of {MAX_RESULTS}")


def check_positive(op: str, name: str, values: Sequence[int]) -> None:
    if any(value <= 0 for value in values):
        fail(op, f"items in '{name}' must be strictly positive, found {fmt(values)}")


def check_choice(op: str, name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        options = ", ".join(f"'{choice}'" for choice in choices)
        fail(op, f"'{name}' must be one of {options}, found '{value}'")
