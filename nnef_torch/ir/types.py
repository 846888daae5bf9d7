"""The NNEF type system (spec 3.3.1): casts, common types, generic substitution and deduction."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from nnef_torch.errors import Location
from nnef_torch.format.ast import ArrayType, Param, PrimitiveType, TensorType, TupleType, Type

INTEGER, SCALAR, LOGICAL, STRING, GENERIC = (PrimitiveType(name) for name in ("integer", "scalar", "logical",
                                                                              "string", "?"))


@dataclass(frozen=True)
class EmptyArrayType:
    """The type of the literal `[]`: castable to every array type, never declared."""

    def __str__(self) -> str:
        return "[]"


EMPTY_ARRAY = EmptyArrayType()
AnyType = Type | EmptyArrayType


def tensor(item: str | PrimitiveType | None) -> TensorType:
    return TensorType(PrimitiveType(item) if isinstance(item, str) else item)


def is_tensor(type_: AnyType) -> bool:
    return isinstance(type_, TensorType)


def contains_tensor(type_: AnyType) -> bool:
    if isinstance(type_, TensorType):
        return True
    if isinstance(type_, ArrayType):
        return contains_tensor(type_.item)
    if isinstance(type_, TupleType):
        return any(contains_tensor(item) for item in type_.items)
    return False


def is_attribute(type_: AnyType) -> bool:
    return not contains_tensor(type_)


def is_generic(type_: AnyType) -> bool:
    if isinstance(type_, PrimitiveType):
        return type_.name == "?"
    if isinstance(type_, TensorType):
        return type_.item is not None and type_.item.name == "?"
    if isinstance(type_, ArrayType):
        return is_generic(type_.item)
    if isinstance(type_, TupleType):
        return any(is_generic(item) for item in type_.items)
    return False


def can_cast(source: AnyType, target: AnyType) -> bool:
    """Whether `source` may be implicitly cast to `target` (equal types included)."""
    if source == target:
        return True
    if isinstance(target, TensorType):
        if target.item is None:  # tensor<> accepts every tensor and every primitive
            return isinstance(source, (TensorType, PrimitiveType)) and not _is_string(source)
        if isinstance(source, PrimitiveType):
            return source == target.item or (target.item.name == "?" and source.name != "string")
        if isinstance(source, TensorType):
            return source.item is not None and target.item.name == "?"
        return False
    if isinstance(target, PrimitiveType):
        return isinstance(source, PrimitiveType) and target.name == "?"
    if isinstance(target, ArrayType):
        if isinstance(source, EmptyArrayType):
            return True
        return isinstance(source, ArrayType) and can_cast(source.item, target.item)
    if isinstance(target, TupleType):
        return (isinstance(source, TupleType) and len(source.items) == len(target.items)
                and all(can_cast(s, t) for s, t in zip(source.items, target.items)))
    return False


def _is_string(type_: AnyType) -> bool:
    return isinstance(type_, PrimitiveType) and type_.name == "string"


def common_type(a: AnyType, b: AnyType) -> AnyType | None:
    """The type both can be cast to, if one of them can be cast to the other."""
    if can_cast(a, b):
        return b
    if can_cast(b, a):
        return a
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        item = common_type(a.item, b.item)
        return ArrayType(item) if item is not None else None
    return None


def substitute(type_: AnyType, generic: PrimitiveType | None) -> AnyType:
    """Replace the generic `?` in `type_` with `generic` (no change when `generic` is None)."""
    if generic is None:
        return type_
    if isinstance(type_, PrimitiveType):
        return generic if type_.name == "?" else type_
    if isinstance(type_, TensorType):
        return TensorType(generic) if type_.item is not None and type_.item.name == "?" else type_
    if isinstance(type_, ArrayType):
        return ArrayType(substitute(type_.item, generic))
    if isinstance(type_, TupleType):
        return TupleType(tuple(substitute(item, generic) for item in type_.items))
    return type_


def deduce(param: AnyType, arg: AnyType, found: set[str]) -> None:
    """Collect into `found` the primitive names that `?` in `param` would need to accept `arg`."""
    if isinstance(param, PrimitiveType) and param.name == "?":
        if isinstance(arg, PrimitiveType):
            found.add(arg.name)
    elif isinstance(param, TensorType) and param.item is not None and param.item.name == "?":
        if isinstance(arg, TensorType) and arg.item is not None:
            found.add(arg.item.name)
        elif isinstance(arg, PrimitiveType):
            found.add(arg.name)
    elif isinstance(param, ArrayType) and isinstance(arg, ArrayType):
        deduce(param.item, arg.item, found)
    elif isinstance(param, TupleType) and isinstance(arg, TupleType) and len(param.items) == len(arg.items):
        for p, a in zip(param.items, arg.items):
            deduce(p, a, found)


class Typing(Protocol):
    """A dialect's reading of types where the spec's is static: a dialect whose producer types values when it runs
    (tract: an integer and a scalar are one kind of number, an attribute may be a tensor whose value is known when
    the model is built) registers one (`registry.dialect_typing`). The checker asks it before refusing a cast and
    when the arguments of a generic operation disagree; the lowerer hands it each attribute argument and passes on
    what it returns (a tensor given for an attribute: its value). A standard document has none."""

    def can_cast(self, source: AnyType, target: AnyType) -> bool:
        """Whether `source` is read where `target` is declared (called where `can_cast` says no)."""

    def generic(self, found: set[str]) -> str | None:
        """The type of `?` when the arguments deduce several (`found`), or None: the spec's error."""

    def attribute(self, lowerer: Any, value: Any, param: Param, op: str, loc: Location) -> Any:
        """The value of attribute `param` of `op`, given `value` (which may hold tensors of the lowerer)."""


def tensor_dtype(type_: AnyType) -> str | None:
    """'scalar', 'integer', 'logical' (or '?' inside generic bodies) for a tensor type; None when unbound."""
    assert isinstance(type_, TensorType), type_
    return type_.item.name if type_.item is not None else None
