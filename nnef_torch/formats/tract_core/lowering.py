"""tract_core ops with a standard form, written as standard operations while lowering (`registry.lowering_rule`):
tract's `cast`, `gather`, `shape_of` and `range` (the last two on static shapes; range's bounds may be tensors
computed from shapes, folded here). Gathers whose indices are known when the model is read (constants, shape
arithmetic) have them checked against the input here, so an index out of range is refused at its statement
rather than met at the first forward."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.errors import Location, NNEFSemanticError, NNEFShapeError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.formats.tract_core.fold import fold, fold_integer
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.limits import check_computed
from nnef_torch.ops.registry import lowering_rule

# tract's datum types (`DatumType` names) by NNEF type
_KINDS = {"scalar": ("f16", "f32", "f64"),
          "integer": ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "tdim"),
          "logical": ("bool",)}
DATUM_TYPES = {name: kind for kind, names in _KINDS.items() for name in names}


def nnef_kind(datum_type: Any, param: str, op: str, loc: Location) -> str:
    kind = DATUM_TYPES.get(datum_type) if isinstance(datum_type, str) else None
    if kind is None:
        raise NNEFSemanticError(f"{op}: {param} = {datum_type!r} is not a tract datum type this reader maps "
                                f"(expected one of {', '.join(DATUM_TYPES)})", loc)
    return kind


def call(lowerer: Any, name: str, loc: Location, generic: str | None = None, hint: ast.Expr | None = None,
         **args: Any) -> Any:
    """Invoke a standard operation on the lowerer (arguments by name)."""
    explicit = ast.PrimitiveType(generic) if generic is not None else None
    return lowerer.invoke(name, [(key, value, loc) for key, value in args.items()], explicit, loc, None, hint)


@lowering_rule("tract_core_cast", dialect="tract_core")
def cast(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    kind = nnef_kind(args["to"], "to", "tract_core_cast", loc)
    return call(lowerer, "cast", loc, kind, input=args["input"])


def charge(lowerer: Any, loc: Location, *, steps: int = 0, items: int = 0) -> None:
    """Charge work the dialect does while lowering (`steps`, as the evaluator counts them) and the items of the
    arrays it builds to the reading's compile-time budget, before doing it; past the budget, its located error."""
    budget = lowerer.budget
    budget.steps -= steps
    budget.items -= items
    if budget.steps < 0 or budget.items < 0:
        raise budget.exhausted(loc)


def check_indices(lowerer: Any, op: str, input: Any, indices: Any, axis: Any, loc: Location) -> None:
    """Refuse indices known when the model is read (`fold`) that fall outside [-n, n) for the extent n of `input`
    along `axis` (tract and the torch implementations read a negative index from the end)."""
    shape = lowerer.tensors[input.name].shape if isinstance(input, Ref) else None
    if shape is None or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        return  # the shape rule reports a bad axis
    values = fold(lowerer, indices, loc)
    if values is None or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
        return
    extent = shape[axis]
    outside = (values < -extent) | (values >= extent)
    if outside.any():
        bad = int(values[outside].reshape(-1)[0])
        raise NNEFShapeError(f"{op}: index {bad} is out of range for axis {axis} of the input of shape "
                             f"{list(shape)} (indices from {-extent} to {extent - 1})", loc)


@lowering_rule("tract_core_gather", dialect="tract_core")
def gather(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    check_indices(lowerer, "tract_core_gather", args["input"], args["indices"], args["axis"], loc)
    return call(lowerer, "gather", loc, input=args["input"], indices=args["indices"], axis=args["axis"])


@lowering_rule("tract_core_gather_elements", dialect="tract_core")
def gather_elements(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    """Kept whole (ops.py); its constant indices checked first."""
    from nnef_torch.formats.tract_core import declarations  # cycle: the package imports this module (nnef_kind)

    check_indices(lowerer, "tract_core_gather_elements", args["input"], args["indices"], args["axis"], loc)
    return lowerer.emit(declarations()["tract_core_gather_elements"], args, value_type, loc, hint)


@lowering_rule("tract_core_shape_of", dialect="tract_core")
def shape_of(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    value = args["input"]
    shape = list(lowerer.tensors[value.name].shape) if isinstance(value, Ref) else []
    if not shape:
        raise NNEFUnsupportedError("tract_core_shape_of of a scalar (rank 0) has no NNEF form", loc)
    return call(lowerer, "constant", loc, "integer", shape=[len(shape)], value=shape)


@lowering_rule("tract_core_range", dialect="tract_core")
def range_(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    bounds = [fold_integer(lowerer, args[key], loc) for key in ("start", "end", "step")]
    if any(bound is None for bound in bounds):
        raise NNEFUnsupportedError("tract_core_range reads start, end and step known when the model is read (literals, "
                                   "or shape arithmetic on static shapes): a range whose length depends on tensor "
                                   "values has no static shape", loc)
    start, end, step = bounds
    if step == 0:
        raise NNEFSemanticError("tract_core_range: step must not be 0", loc)
    count = max(0, (end - start + step - 1) // step if step > 0 else (start - end - step - 1) // -step)
    check_computed(f"tract_core_range({start}, {end}, {step})", count, loc)
    if not count:
        raise NNEFUnsupportedError(f"tract_core_range({start}, {end}, {step}) is empty", loc)
    charge(lowerer, loc, items=count)
    return call(lowerer, "constant", loc, "integer", shape=[count], value=list(range(start, end, step)))
