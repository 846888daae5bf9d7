"""The syntax tree of an NNEF document (spec chapter 3.2), as plain frozen data.

Every node carries its source position in `loc`, which is left out of equality so that a parse/print/parse round
trip compares equal.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nnef_torch.errors import Location

_NOWHERE = Location()


def _loc():
    return field(default=_NOWHERE, compare=False, repr=False)


# Types (spec 3.3.1). `name` is 'integer', 'scalar', 'logical', 'string' or '?' (generic).
@dataclass(frozen=True)
class PrimitiveType:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TensorType:
    item: PrimitiveType | None  # None: the unbound tensor<>

    def __str__(self) -> str:
        return f"tensor<{self.item or ''}>"


@dataclass(frozen=True)
class ArrayType:
    item: Type

    def __str__(self) -> str:
        return f"{self.item}[]"


@dataclass(frozen=True)
class TupleType:
    items: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(item) for item in self.items) + ")"


Type = PrimitiveType | TensorType | ArrayType | TupleType


# Expressions (spec 3.2.3).
@dataclass(frozen=True)
class Literal:
    value: int | float | str | bool
    kind: str  # 'integer', 'scalar', 'string', 'logical'
    loc: Location = _loc()


@dataclass(frozen=True)
class Identifier:
    name: str
    loc: Location = _loc()


@dataclass(frozen=True)
class ArrayExpr:
    items: tuple[Expr, ...]
    loc: Location = _loc()


@dataclass(frozen=True)
class TupleExpr:
    items: tuple[Expr, ...]
    loc: Location = _loc()


@dataclass(frozen=True)
class UnaryExpr:
    op: str  # '+', '-', '!'
    operand: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class BinaryExpr:
    op: str  # '+', '-', '*', '/', '^', '<', '<=', '>', '>=', '==', '!=', '&&', '||', 'in'
    left: Expr
    right: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class IfElseExpr:
    condition: Expr
    then: Expr
    otherwise: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class Comprehension:
    iterators: tuple[tuple[str, Expr], ...]
    condition: Expr | None
    body: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class IndexExpr:
    value: Expr
    index: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class RangeExpr:
    value: Expr
    start: Expr | None
    end: Expr | None
    loc: Location = _loc()


@dataclass(frozen=True)
class BuiltinExpr:
    name: str  # 'shape_of', 'length_of', 'range_of', 'integer', 'scalar', 'logical', 'string'
    arg: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class Argument:
    name: str | None  # None: positional
    value: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class Invocation:
    name: str
    generic: PrimitiveType | None  # the type in name<type>(...), '?' to propagate
    args: tuple[Argument, ...]
    loc: Location = _loc()


Expr = (Literal | Identifier | ArrayExpr | TupleExpr | UnaryExpr | BinaryExpr | IfElseExpr | Comprehension
        | IndexExpr | RangeExpr | BuiltinExpr | Invocation)


# Declarations and the document.
@dataclass(frozen=True)
class Assignment:
    lhs: Expr  # Identifier, or ArrayExpr / TupleExpr of those
    rhs: Expr
    loc: Location = _loc()


@dataclass(frozen=True)
class Param:
    name: str
    type: Type
    default: Expr | None = None
    loc: Location = _loc()


@dataclass(frozen=True)
class Result:
    name: str
    type: Type
    loc: Location = _loc()


@dataclass(frozen=True)
class Fragment:
    name: str
    generic: bool
    generic_default: PrimitiveType | None
    params: tuple[Param, ...]
    results: tuple[Result, ...]
    body: tuple[Assignment, ...] | None  # None: declared without a body (primitive or custom op)
    loc: Location = _loc()


@dataclass(frozen=True)
class GraphDef:
    name: str
    params: tuple[str, ...]
    results: tuple[str, ...]
    body: tuple[Assignment, ...]
    loc: Location = _loc()
    param_locs: tuple[Location, ...] = field(default=(), compare=False, repr=False)  # one per param, if parsed
    result_locs: tuple[Location, ...] = field(default=(), compare=False, repr=False)  # one per result, if parsed


@dataclass(frozen=True)
class Document:
    version: str  # e.g. '1.0'
    extensions: tuple[str, ...]
    fragments: tuple[Fragment, ...]
    graph: GraphDef | None  # None only for fragment libraries such as the standard library
    loc: Location = _loc()
    version_loc: Location = _loc()  # the version number


@dataclass(frozen=True)
class QuantEntry:
    """One line of graph.quant: `"tensor": op(name = value, ...);`."""

    tensor: str
    invocation: Invocation
    loc: Location = _loc()
