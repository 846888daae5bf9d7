"""The syntax tree of an NNEF document (spec chapter 3.2), as plain frozen data.

Every node carries its source position in `loc`, which is left out of equality so that a parse/print/parse round
trip compares equal.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

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
    items: tuple[Expr, ...] | NumberItems | NameItems
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


class NumberItems(Sequence["Literal | UnaryExpr"]):
    """The items of an array written with numbers only (`[1, -2, 3]`, all integers or all scalars) or logicals only
    (`[true, false]`), kept as one machine number and one position per item instead of a node per item: a 1M-item
    line then costs about 17 bytes an item. It reads as the tuple of nodes the parser would otherwise make (a
    negative number is a minus applied to a literal); `values()` gives the values at once."""

    __slots__ = ("kind", "file", "_numbers", "_minus", "_lines", "_columns")

    def __init__(self, kind: str, file: str | None):
        self.kind = kind  # 'integer', 'scalar' or 'logical'
        self.file = file
        self._numbers = array({"integer": "q", "scalar": "d", "logical": "b"}[kind])  # signed values
        self._minus = bytearray()  # 1 where the item is written with a minus (also -0)
        self._lines = array("I")
        self._columns = array("I")  # of the number, or of its minus sign (the number then follows it directly)

    def append(self, value: int | float, minus: bool, line: int, column: int) -> None:
        self._numbers.append(-value if minus else value)
        self._minus.append(minus)
        self._lines.append(line)
        self._columns.append(column)

    def values(self) -> list[Any]:
        """The items' values, as evaluation gives them."""
        if self.kind == "logical":
            return [value != 0 for value in self._numbers]
        return self._numbers.tolist()

    def __len__(self) -> int:
        return len(self._numbers)

    @overload
    def __getitem__(self, index: int) -> Literal | UnaryExpr: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Literal | UnaryExpr, ...]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        value, line, column = self._numbers[index], self._lines[index], self._columns[index]
        if self.kind == "logical":
            return Literal(value != 0, self.kind, Location(self.file, line, column))
        if not self._minus[index]:
            return Literal(value, self.kind, Location(self.file, line, column))
        number = Literal(-value, self.kind, Location(self.file, line, column + 1))
        return UnaryExpr("-", number, Location(self.file, line, column))

    def __iter__(self) -> Iterator[Literal | UnaryExpr]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NumberItems):
            return (self.kind == other.kind and self._numbers == other._numbers
                    and self._minus == other._minus)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"NumberItems({self.kind}, {self.values()!r})"


class NameItems(Sequence["Identifier"]):
    """The items of an array written with identifiers only (`[a, b, a]`), kept as one shared name and one position
    per item instead of a node per item (about 16 bytes an item, so that `[x, x, x, ...]` costs a few times its
    text). It reads as the tuple of `Identifier` nodes the parser would otherwise make; `names()` gives the names."""

    __slots__ = ("file", "_names", "_lines", "_columns", "_interned")

    def __init__(self, file: str | None):
        self.file = file
        self._names: list[str] = []
        self._lines = array("I")
        self._columns = array("I")
        self._interned: dict[str, str] = {}  # one string object per distinct name

    def append(self, name: str, line: int, column: int) -> None:
        self._names.append(self._interned.setdefault(name, name))
        self._lines.append(line)
        self._columns.append(column)

    def names(self) -> list[str]:
        """The items' names, in order."""
        return list(self._names)

    def first_places(self) -> dict[str, int]:
        """Each distinct name and the index of its first item, in order of first appearance."""
        first: dict[str, int] = {}
        for index, name in enumerate(self._names):
            first.setdefault(name, index)
        return first

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, index: int) -> Identifier: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Identifier, ...]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        return Identifier(self._names[index], Location(self.file, self._lines[index], self._columns[index]))

    def __iter__(self) -> Iterator[Identifier]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NameItems):
            return self._names == other._names
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"NameItems({self._names!r})"


Expr = (Literal | Identifier | ArrayExpr | TupleExpr | UnaryExpr | BinaryExpr | IfElseExpr | Comprehension
        | IndexExpr | RangeExpr | BuiltinExpr | Invocation)


def unwind(expr: Expr) -> tuple[Expr, list[BinaryExpr | IndexExpr | RangeExpr]]:
    """Split a left-deep chain (`a + b - c`, `x[0][1:]`: binary operators and subscripts, which the parser groups
    to the left and repeats without nesting) into its innermost operand and its links from the inside out, so
    that walkers fold a chain of any length in a loop instead of recursing once per link."""
    links: list[BinaryExpr | IndexExpr | RangeExpr] = []
    while True:
        kind = type(expr)
        if kind is BinaryExpr:
            links.append(expr)
            expr = expr.left
        elif kind is IndexExpr or kind is RangeExpr:
            links.append(expr)
            expr = expr.value
        else:
            links.reverse()
            return expr, links


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
