"""The limits every reader applies to what it computes from a file, before anything is allocated.

NNEF's own shape rules and compile-time evaluation check against these, and so does every front end (NNVM/MXNet,
LightNet, ONNX) and dialect (tract_core) when it turns attribute values into extents, counts or constant data:
one set of numbers, one wording, a located error.
"""
from __future__ import annotations

from collections.abc import Sequence

from nnef_torch.errors import Location, NNEFError, NNEFShapeError
from nnef_torch.format.lexer import MAX_INTEGER

MAX_RESULTS = 1 << 16  # tensors one operation returns as an array (unstack, copy_n, split)
MAX_COMPUTED_ITEMS = 1 << 22  # items of one array a reader computes itself (compile-time arrays, arange, one-hot)

__all__ = ["MAX_COMPUTED_ITEMS", "MAX_INTEGER", "MAX_RESULTS", "check_computed", "check_count", "check_shape"]


def _shown(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(e) if abs(e) <= MAX_INTEGER else f"~2^{e.bit_length() - 1}" for e in shape) + "]"


def check_shape(what: str, shape: Sequence[int], loc: Location | None = None, *,
                error: type[NNEFError] = NNEFShapeError) -> tuple[int, ...]:
    """`shape` as a tuple, once every extent is a non-negative integer and the volume fits a signed 64-bit integer
    (as NNEF's literals do). `what` starts the message ('conv: result shape', "node 3 'fc1': input shape")."""
    shape = tuple(shape)
    for extent in shape:
        if not isinstance(extent, int) or isinstance(extent, bool) or extent < 0 or extent > MAX_INTEGER:
            shown = _shown(shape[:16]) if all(isinstance(e, int) for e in shape[:16]) else str(list(shape[:16]))
            raise error(f"{what} {shown}{'...' if len(shape) > 16 else ''} has an extent that is not an integer "
                        "from 0 to 2^63 - 1", loc)
    volume = 0 if 0 in shape else 1
    for extent in shape:
        volume *= extent
        if volume > MAX_INTEGER:  # stops at once: the product of a long shape of huge extents is never formed
            raise error(f"{what} {_shown(shape[:16])}{'...' if len(shape) > 16 else ''} has a volume beyond "
                        "2^63 - 1", loc)
    return shape


def check_count(what: str, count: int, limit: int, loc: Location | None = None, *,
                error: type[NNEFError] = NNEFShapeError) -> int:
    """`count` once it is from 0 to `limit`; the message says '{what} gives {count}, more than the limit of ...'."""
    if count < 0:
        raise error(f"{what} gives a negative count ({count})", loc)
    if count > limit:
        raise error(f"{what} gives {count:,}, more than the limit of {limit:,}", loc)
    return count


def check_computed(what: str, count: int, loc: Location | None = None, *,
                   error: type[NNEFError] = NNEFShapeError) -> int:
    """The item count of an array a reader is about to build itself (not read from a tensor file), checked against
    MAX_COMPUTED_ITEMS before it is allocated."""
    return check_count(f"{what} (items computed while reading)", count, MAX_COMPUTED_ITEMS, loc, error=error)
