"""The values the lowerer evaluates: tensor references, literals bound to tensor parameters, plain literals and
their arrays and tuples, and the NNEF type of each."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnef_torch.format import ast
from nnef_torch.ir import types as T
from nnef_torch.ir.graph import Ref, Tensor


@dataclass(frozen=True)
class TensorLiteral:
    """A literal bound to a tensor-typed parameter of an expanded fragment: operators on it emit operations
    (as its static type says), and it reaches an emitted operation's inputs as the plain literal."""

    value: Any


@dataclass(frozen=True)
class Extent:
    """An integer that is a symbolic extent (`S`, `4*S`), for a document that declares its symbols (tract's
    `extension tract_symbol S;`): written as the expression, its value at the example inputs used for shapes."""

    expr: str
    value: int

    def __repr__(self) -> str:
        return f"Extent({self.expr!r}={self.value})"


def is_tensor_value(value: Any) -> bool:
    return isinstance(value, (Ref, TensorLiteral))


def as_tensor(value: Any) -> Any:
    """Mark the literals in a tensor-typed argument, keeping their static tensor type."""
    if isinstance(value, list):
        return [as_tensor(item) for item in value]
    if isinstance(value, tuple):
        return tuple(as_tensor(item) for item in value)
    return value if isinstance(value, (Ref, TensorLiteral)) else TensorLiteral(value)


def plain(value: Any) -> Any:
    """`value` with each `TensorLiteral` as its literal and each `Extent` as its value at the example inputs."""
    if isinstance(value, (TensorLiteral, Extent)):
        return value.value
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    return value


def literal_dtype(value: Any) -> str:
    if isinstance(value, bool):
        return "logical"
    return "integer" if isinstance(value, int) else "scalar"


def type_of(value: Any, tensors: Mapping[str, Tensor]) -> Any:
    """The NNEF type of a runtime value (for generic deduction)."""
    if isinstance(value, Ref):
        return T.tensor(tensors[value.name].dtype)
    if isinstance(value, TensorLiteral):
        return T.tensor(type_of(value.value, tensors).name)
    if isinstance(value, bool):
        return T.LOGICAL
    if isinstance(value, int):
        return T.INTEGER
    if isinstance(value, float):
        return T.SCALAR
    if isinstance(value, str):
        return T.STRING
    if isinstance(value, list):
        return ast.ArrayType(type_of(value[0], tensors)) if value else T.EMPTY_ARRAY
    return ast.TupleType(tuple(type_of(item, tensors) for item in value))
