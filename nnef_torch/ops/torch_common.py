"""What every torch implementation of an NNEF op needs: static shapes and types, NNEF broadcasting, literals.

Op functions run two ways: eagerly on tensors (tests, custom use) and once per operation at load time on
`torch.fx.Proxy` inputs, where the importer has recorded each input's NNEF shape and torch dtype in the node's
`meta`. The helpers here answer the same question both ways, so an op function never needs to know which.
"""
from __future__ import annotations

from collections.abc import Sequence
from numbers import Number
from typing import Any

import torch
import torch.fx

SHAPE_KEY = "nnef_shape"
DTYPE_KEY = "nnef_dtype"


def is_literal(x: Any) -> bool:
    """A Python number (or bool) given in place of a tensor."""
    return isinstance(x, (Number, bool))


def static_shape(x: Any) -> tuple[int, ...]:
    """The shape of `x` as known at load time (a literal has shape ())."""
    if isinstance(x, torch.fx.Proxy):
        return tuple(x.node.meta[SHAPE_KEY])
    if is_literal(x):
        return ()
    return tuple(x.shape)


def static_rank(x: Any) -> int:
    return len(static_shape(x))


def static_dtype(x: Any) -> torch.dtype:
    """The torch dtype of `x` (a literal: the default dtype of its Python type)."""
    if isinstance(x, torch.fx.Proxy):
        return x.node.meta[DTYPE_KEY]
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    if isinstance(x, float):
        return torch.get_default_dtype()
    return x.dtype


def align(x: Any, rank: int) -> Any:
    """NNEF broadcasting aligns shapes from the left: append singleton dimensions up to `rank` (a view)."""
    missing = rank - static_rank(x)
    if is_literal(x) or missing <= 0:
        return x
    return x[(Ellipsis,) + (None,) * missing]


def aligned(*xs: Any) -> tuple[Any, ...]:
    """The arguments of an elementwise op, each aligned to the largest rank among them."""
    rank = max(static_rank(x) for x in xs)
    return tuple(align(x, rank) for x in xs)


def as_tensor(x: Any, like: Any = None, dtype: torch.dtype | None = None) -> Any:
    """A literal as a 0-d tensor (of `like`'s dtype and device when given); tensors pass through."""
    if not is_literal(x):
        return x
    if like is not None and not is_literal(like):
        return torch.full((), x, dtype=dtype or static_dtype(like), device=like.device)
    return torch.tensor(x, dtype=dtype or static_dtype(x))


def spatial(values: Sequence[Any], rank: int) -> list[Any]:
    """The spatial part (after batch and channel) of a per-dimension attribute, or all of it if already spatial."""
    values = list(values)
    return values[2:] if len(values) == rank else values


__all__ = ["DTYPE_KEY", "SHAPE_KEY", "align", "aligned", "as_tensor", "is_literal", "spatial", "static_dtype",
           "static_rank", "static_shape"]
