"""What the NNVM and MXNet import rules share: the fragment library, dtypes, axis and broadcasting helpers."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref

# The fragments these rules may write: this front end's own, on top of the exporter's.
LIBRARY = ("nnef_torch.formats.nnvm", "fragments.nnef", ("nnef_torch.stdlib", "extensions.nnef"))

# MXNet and NNVM dtype names -> numpy
DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "uint8": "uint8", "int8": "int8",
          "int32": "int32", "int64": "int64", "int16": "int16", "uint16": "uint16", "uint32": "uint32",
          "uint64": "uint64", "bool": "bool"}


def dtype_of(dtype: np.dtype) -> str:
    """The NNEF type of arrays of a numpy dtype."""
    if dtype.kind == "b":
        return "logical"
    return "scalar" if dtype.kind == "f" else "integer"


def axis(node: OpNode, value: int, rank: int, key: str = "axis") -> int:
    """A possibly negative axis made non-negative, checked against `rank`."""
    if not -rank <= value < rank:
        raise node.fail(f"attribute '{key}' is {value}, out of range for an input of rank {rank}")
    return value % rank


def axes(node: OpNode, values: Sequence[int], rank: int, key: str = "axis") -> list[int]:
    found = [axis(node, value, rank, key) for value in values]
    if len(set(found)) != len(found):
        raise node.fail(f"attribute '{key}' repeats an axis: {list(values)}")
    return found


def align(b: Builder, x: Any, rank: int) -> Any:
    """`x` with leading singleton dimensions up to `rank`: numpy broadcasting aligns shapes from the right, NNEF's
    from the left, so the shorter operand must be padded in front to broadcast the numpy way."""
    if not isinstance(x, Ref) or b.rank(x) >= rank:
        return x
    return b.op("unsqueeze", x, axes=list(range(rank - b.rank(x))))


def broadcast_pair(b: Builder, x: Any, y: Any) -> tuple[Any, Any]:
    rank = max(b.rank(x), b.rank(y))
    return align(b, x, rank), align(b, y, rank)


def channel_vector(b: Builder, x: Ref, rank: int, axis_: int = 1) -> Any:
    """A per-channel vector (C,) laid out to broadcast along `axis_` of a rank-`rank` tensor: [1, ..., C]."""
    if b.rank(x) != 1 or axis_ == 0:
        return x
    return b.op("reshape", x, shape=[1] * axis_ + [b.shape(x)[0]])


def batch_norm_arguments(b: Builder, node: OpNode) -> tuple[Any, int, int, tuple[Any, ...]]:
    """A batch norm's input, its rank, its channel axis (the `axis` attribute, 1 by default) and its four
    per-channel parameters (gamma, beta, moving mean, moving variance), each checked to have the channels' count."""
    x = node.input(0)
    rank = b.rank(x)
    channel = axis(node, node.attrs.int("axis", 1), rank)
    count = b.shape(x)[channel]
    params = tuple(node.param(i, [count], what) for i, what in
                   ((1, "gamma"), (2, "beta"), (3, "moving mean"), (4, "moving variance")))
    return x, rank, channel, params
