"""What export rules share: torch's right-aligned broadcasting written as NNEF's left-aligned one, axes, padding."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nnef_torch.exporter.emitter import Emitter, Unmappable
from nnef_torch.ir.graph import Ref

__all__ = ["Emitter", "Ref", "Unmappable", "align", "axis", "axes", "binary", "is_ref", "leading", "unary"]


def is_ref(x: Any) -> bool:
    return isinstance(x, Ref)


def axis(dim: int, rank: int) -> int:
    """A torch dim (possibly negative) as an NNEF axis."""
    return dim + rank if dim < 0 else dim


def axes(dims: Any, rank: int) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(axis(d, rank) for d in dims)


def leading(e: Emitter, x: Any, rank: int) -> Any:
    """`x` with singleton axes added in front up to `rank`: torch broadcasting aligns shapes from the right,
    NNEF's from the left, so lower-rank operands are unsqueezed at the front."""
    if not is_ref(x) or e.rank(x) >= rank:
        return x
    return e.op("unsqueeze", x, axes=list(range(rank - e.rank(x))))


def align(e: Emitter, *xs: Any) -> list[Any]:
    rank = max(e.rank(x) for x in xs)
    return [leading(e, x, rank) for x in xs]


def binary(e: Emitter, name: str, x: Any, y: Any) -> Any:
    x, y = align(e, x, y)
    return e.op(name, x, y)


def unary(name: str) -> Callable[[Emitter, Any], Any]:
    def rule(e: Emitter, x: Any) -> Any:
        return e.op(name, x)
    rule.__name__ = name
    return rule


def pairs(padding: Sequence[int]) -> list[tuple[int, int]]:
    return [(int(p), int(p)) for p in padding]


def scalar_only(e: Emitter, x: Any, what: str) -> None:
    if e.dtype(x) != "scalar":
        raise Unmappable(f"{what} of {e.dtype(x)} tensors has no NNEF form (NNEF defines it on scalar tensors)")
