"""tract's typing in a tract_core document: numbers are typed by their values, and an attribute may be given as a
tensor whose value is known when the model is built.

tract does not type a document before building it (sonos/tract, nnef/src/deser.rs): a value is what it is, an
inline number takes the type of the tensor it meets (nnef/src/registry.rs, binary operations), and an attribute
is coerced from the value it is given: a tensor whose value is known when the model is built (a constant, a
shape, integer arithmetic on them) where it reads a `TDim` (`slice`'s begin and end, `reshape`'s shape, `tile`'s
repeats), an array where the spec declares a tuple (`pad`'s and `conv`'s padding read as `TVec<TVec<usize>>`).
torch_to_nnef's `TractNNEF` target relies on it: its `dyn_slice` fragment declares every parameter
`tensor<scalar>`, is given integers, compares them with `0` and passes the bounds it computes to `slice`; the
shapes it computes with `tract_core_shape_of` reach `reshape` and `tile` as tensors; it writes `pad`'s padding
as `[[0, 0], [2, 0]]`.

This reader reads such a document so (`TractTyping`, the dialect's `registry.dialect_typing`):
- the checker: integer and scalar are one kind of number, in tensors and primitives alike (logical and string
  stay apart); a tensor may stand for a numeric or logical attribute, or for an array of them (a rank-1 tensor);
  an array may stand for a tuple of primitives. Where the arguments of a generic operation deduce integer and
  scalar, its static type is scalar: the lowerer types each operation by its values (`relaxed.py`).
- the lowerer: each attribute given as tensors becomes their value, folded from the operations already written
  (`fold.py`: the symbols are bound before lowering, so every shape is static), and arrays given for tuples
  become tuples. A tensor whose value depends on the graph's inputs is refused at its statement: tract reads it
  when the model runs, this reader when it is read. So is a `slice` end computed as 0 (`dyn_slice` of an empty
  range, `x[..., :-9]` on an axis of 5): tract reads it as the index 0, an empty slice, which this reader does not
  represent (extents are positive), and NNEF reads a written 0 as the end of the axis.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.errors import Location, NNEFSemanticError, NNEFShapeError, NNEFTypeError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.formats.tract_core.fold import fold
from nnef_torch.ir import types as T
from nnef_torch.ir.deviations import constant_value
from nnef_torch.ir.graph import Ref
from nnef_torch.ops.registry import dialect_typing

NUMBERS = frozenset({"integer", "scalar"})
_ANY = (None, "?")  # an item type that holds any value (`tensor<>`, a generic `?`)
# the array kinds (numpy `dtype.kind`) whose items an attribute of each type takes
_ARRAY_KINDS = {"integer": "iu", "scalar": "iuf", "logical": "b"}
# (op, attribute) whose computed 0 tract reads otherwise than NNEF reads a written 0 (see the module's docstring)
_ZERO_IS_EMPTY = frozenset({("slice", "end")})


def _kin(a: str | None, b: str | None) -> bool:
    """Whether values of item types `a` and `b` are read alike (the same, both numbers, or one is any)."""
    return a in _ANY or b in _ANY or a == b or (a in NUMBERS and b in NUMBERS)


def _item_name(type_: Any) -> str | None:
    item = type_.item if isinstance(type_, ast.TensorType) else type_
    return item.name if item is not None else None


def _attribute_from(tensor: ast.TensorType, target: Any) -> bool:
    """Whether a tensor of type `tensor` may give the value of an attribute of primitive type `target`."""
    return isinstance(target, ast.PrimitiveType) and target.name != "string" and _kin(_item_name(tensor), target.name)


@dialect_typing("tract_core")
class TractTyping:
    """tract's reading of types and attributes (`nnef_torch.ir.types.Typing`); see the module's docstring."""

    def can_cast(self, source: T.AnyType, target: T.AnyType) -> bool:
        if T.can_cast(source, target):
            return True
        if isinstance(target, ast.ArrayType):
            if isinstance(source, ast.ArrayType):
                return self.can_cast(source.item, target.item)
            return isinstance(source, ast.TensorType) and _attribute_from(source, target.item)  # a rank-1 tensor
        if isinstance(target, ast.TupleType):
            if isinstance(source, ast.TupleType):
                return len(source.items) == len(target.items) and all(
                    self.can_cast(item, into) for item, into in zip(source.items, target.items))
            return (isinstance(source, ast.ArrayType) and not T.contains_tensor(target)
                    and all(self.can_cast(source.item, into) for into in target.items))
        if isinstance(target, ast.TensorType):  # a number for a tensor of numbers, of either kind
            return isinstance(source, (ast.TensorType, ast.PrimitiveType)) and _item_name(source) != "string" \
                and _kin(_item_name(source), _item_name(target))
        if isinstance(target, ast.PrimitiveType):
            return isinstance(source, ast.TensorType) and _attribute_from(source, target)
        return False

    def generic(self, found: set[str]) -> str | None:
        if not found <= NUMBERS | {"?"}:
            return None  # logical with a number: the spec's error
        return "?" if "?" in found else "scalar"

    def attribute(self, lowerer: Any, value: Any, param: ast.Param, op: str, loc: Location) -> Any:
        return _read(lowerer, value, param.type, param, op, loc)


def _read(lowerer: Any, value: Any, type_: Any, param: ast.Param, op: str, loc: Location) -> Any:
    """`value` given for (part of) attribute `param`, of type `type_`: its tensors read as their values, its
    arrays given for tuples made tuples; `value` itself where nothing changes. Walks the type, not the value: as
    deep as the declaration."""
    if isinstance(value, Ref):
        return _tensor(lowerer, value, type_, param, op, loc)
    if isinstance(value, list) and isinstance(type_, ast.ArrayType):
        if isinstance(type_.item, ast.PrimitiveType) and not any(isinstance(item, Ref) for item in value):
            return value  # the common case, checked in one pass
        items = [_read(lowerer, item, type_.item, param, op, loc) for item in value]
        return value if all(new is old for new, old in zip(items, value)) else items
    if isinstance(value, (list, tuple)) and isinstance(type_, ast.TupleType):
        if len(value) != len(type_.items):
            raise NNEFTypeError(f"argument '{param.name}' of '{op}' must be {param.type}: an item has {len(value)} "
                                f"values, not {len(type_.items)}", loc)
        items = tuple(_read(lowerer, item, into, param, op, loc) for item, into in zip(value, type_.items))
        return value if isinstance(value, tuple) and all(new is old for new, old in zip(items, value)) else items
    return value


def _tensor(lowerer: Any, ref: Ref, type_: Any, param: ast.Param, op: str, loc: Location) -> Any:
    """The value of tensor `ref` given for attribute `param` (or an item of it) of type `type_`."""
    target = type_.item if isinstance(type_, ast.ArrayType) else type_
    if not isinstance(target, ast.PrimitiveType) or target.name == "string":
        return ref  # a tuple or a string: the shape rule reports it
    array = fold(lowerer, ref, loc)
    shown = lowerer.renames.get(ref.name, ref.name)
    if array is None:
        if type_ is target:  # one value: a constant or a variable of one item, or the located refusal
            return constant_value(lowerer.producers, lowerer.constants, ref, ast.Param(param.name, target), op, loc)
        producer = lowerer.producers.origin(ref.name)
        made = f"made by '{producer.name}'" if producer is not None else "not known here"
        raise NNEFSemanticError(f"argument '{param.name}' of '{op}' must be known when the model is read, but tensor "
                                f"'{shown}' is {made}, whose value depends on the graph's inputs (tract reads it when "
                                "the model runs)", loc)
    if target.name != "?" and array.dtype.kind not in _ARRAY_KINDS[target.name]:
        raise NNEFTypeError(f"argument '{param.name}' of '{op}' must be {param.type}, but tensor '{shown}' holds "
                            f"{array.dtype.name} values", loc)
    if (op, param.name) in _ZERO_IS_EMPTY and not array.all():
        raise NNEFUnsupportedError(f"argument '{param.name}' of '{op}' is computed as 0 (tensor '{shown}'): tract "
                                   "reads it as an empty slice, which this reader does not represent (extents are "
                                   "positive; a written 0 is the end of the axis)", loc)
    if type_ is target:
        if array.size != 1:
            raise NNEFShapeError(f"argument '{param.name}' of '{op}' is one {target.name}, but tensor '{shown}' "
                                 f"holds {array.size} values (shape {list(array.shape)})", loc)
        return _python(array.reshape(()).item(), target.name)
    if array.ndim > 1:
        raise NNEFShapeError(f"argument '{param.name}' of '{op}' is an array, but tensor '{shown}' has shape "
                             f"{list(array.shape)} (rank 1 or 0 is read as an array)", loc)
    return [_python(item, target.name) for item in array.reshape(-1).tolist()]


def _python(item: Any, kind: str) -> Any:
    if kind == "integer":
        return int(item)
    if kind == "scalar":
        return float(item)
    if kind == "logical":
        return bool(item)
    return item.item() if isinstance(item, np.generic) else item


__all__ = ["NUMBERS", "TractTyping"]
