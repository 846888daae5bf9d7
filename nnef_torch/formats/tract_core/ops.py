"""tract_core ops kept whole: shape rules and torch implementations with tract's semantics
(einsum, gather_elements, erf), in the tract_core op table (a standard document does not see them). torch is
imported by the implementations only, when a model is imported: reading a tract_core document (`read_graph`,
`validate`) does not load it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from nnef_torch.errors import NNEFShapeError
from nnef_torch.ops.registry import shape_rule, torch_op

if TYPE_CHECKING:
    import torch

Shape = tuple[int, ...]


def parse_einsum(expr: str, count: int) -> tuple[list[str], str]:
    """The operand and output axes of an einsum expression (one letter per axis, `->` required)."""
    if not isinstance(expr, str) or expr.count("->") != 1:
        raise NNEFShapeError(f"tract_core_einsum: expr {expr!r} must have the form 'ab,bc->ac'")
    left, out = expr.replace(" ", "").split("->")
    operands = left.split(",")
    if not all(part.isalpha() or part == "" for part in [*operands, out]):
        raise NNEFShapeError(f"tract_core_einsum: expr {expr!r} must name each axis by one letter")
    if len(operands) != count:
        raise NNEFShapeError(f"tract_core_einsum: expr {expr!r} has {len(operands)} operands, given {count}")
    missing = set(out) - set("".join(operands))
    if missing or len(set(out)) != len(out):
        raise NNEFShapeError(f"tract_core_einsum: output axes of {expr!r} must appear once and in an operand")
    return operands, out


@shape_rule("tract_core_einsum", dialect="tract_core")
def einsum_shape(inputs: list[Shape], *, expr: str, acc: str, output: str = "") -> Shape:
    operands, out = parse_einsum(expr, len(inputs))
    sizes: dict[str, int] = {}
    for axes, shape in zip(operands, inputs):
        if len(axes) != len(shape):
            raise NNEFShapeError(f"tract_core_einsum: operand '{axes}' of {expr!r} has rank {len(axes)}, the "
                                 f"input has shape {list(shape)}")
        for axis, size in zip(axes, shape):
            known = sizes.setdefault(axis, size)
            if known != size and 1 not in (known, size):
                raise NNEFShapeError(f"tract_core_einsum: axis '{axis}' of {expr!r} has sizes {known} and {size}")
            sizes[axis] = max(known, size)
    return tuple(sizes[axis] for axis in out)


@torch_op("tract_core_einsum", dialect="tract_core")
def einsum(inputs: list[torch.Tensor], *, expr: str, acc: str, output: str = "") -> torch.Tensor:
    import torch

    return torch.einsum(expr.replace(" ", ""), *inputs)


@shape_rule("tract_core_gather_elements", dialect="tract_core")
def gather_elements_shape(input: Shape, indices: Shape, *, axis: int) -> Shape:
    if len(input) != len(indices):
        raise NNEFShapeError(f"tract_core_gather_elements: input {list(input)} and indices {list(indices)} must "
                             "have the same rank")
    if not -len(input) <= axis < len(input):
        raise NNEFShapeError(f"tract_core_gather_elements: axis {axis} is out of range for rank {len(input)}")
    return tuple(indices)


@torch_op("tract_core_gather_elements", dialect="tract_core")
def gather_elements(input: torch.Tensor, indices: torch.Tensor, *, axis: int) -> torch.Tensor:
    import torch

    size = input.shape[axis]
    indices = indices.long()
    return torch.gather(input, axis, torch.where(indices < 0, indices + size, indices))  # tract wraps negatives


@shape_rule("tract_core_erf", dialect="tract_core")
def erf_shape(x: Shape) -> Shape:
    return tuple(x)


@torch_op("tract_core_erf", dialect="tract_core")
def erf(x: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.erf(x)


@shape_rule("external", dialect="tract_core")
def external_shape(*, shape: list[int]) -> Shape:
    """tract runs empty tensors: an input's extent may be 0 (a key-value cache before the first token)."""
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise NNEFShapeError(f"external: items in 'shape' must be non-negative, found {list(shape)}")
    return tuple(shape)
