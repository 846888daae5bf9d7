"""TensorLight's text form of a tensor (`tl_tensor_print`, `tl_tensor_fprint`), which LightNet's `print` and
`fprint` ops write after their message line: a pure function from an array to text.

Items are written in C order, each in its dtype's printf format (`%.3f` for floating types, a plain decimal for
integers, 0 or 1 for booleans); items of the innermost dimension are separated by one space. The first item opens
one bracket per dimension. Where an item starts a new block of the last k dimensions, the previous block is closed
with k brackets, a line break follows, then ndim - k spaces of indentation and k opening brackets. The last item
is followed by ndim closing brackets and a line break:

    [[2.000 3.000 4.000]
     [6.000 7.000 8.000]]
"""
from __future__ import annotations

import math

import numpy as np


def tensor_text(array: np.ndarray) -> str:
    """What `tl_tensor_print` writes for `array` (of rank 1 or more, as TensorLight's tensors are)."""
    array = np.asarray(array)
    if array.ndim == 0:
        array = array.reshape(1)
    shape = array.shape
    ndim = len(shape)
    blocks = [math.prod(shape[axis:]) for axis in range(ndim)]  # items in a block of the last ndim - axis dims
    item = _formatter(array.dtype)
    parts = []
    for index, value in enumerate(array.reshape(-1).tolist()):
        if index == 0:
            parts.append("[" * ndim)
        else:
            closed = sum(1 for size in blocks[1:] if index % size == 0)
            parts.append("]" * closed + "\n" + " " * (ndim - closed) + "[" * closed if closed else " ")
        parts.append(item(value))
    parts.append("]" * ndim + "\n")
    return "".join(parts)


def print_text(message: str, array: np.ndarray) -> str:
    """What LightNet's `print` op writes: its message on a line, then the tensor."""
    return f"{message}\n{tensor_text(array)}"


def _formatter(dtype: np.dtype):
    if dtype.kind == "f":
        return _float
    if dtype.kind == "b":
        return lambda value: "1" if value else "0"
    return str


def _float(value: float) -> str:
    """C's `%.3f`: glibc writes a NaN with its sign bit set as -nan."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return f"{value:.3f}"
