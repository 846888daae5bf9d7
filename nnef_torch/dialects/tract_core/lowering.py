"""tract_core ops with a standard form, written as standard operations while lowering (`registry.lowering_rule`):
tract's `cast`, `gather`, `shape_of` and `range` (the last two on static shapes; range's bounds may be tensors
computed from shapes, folded here)."""
from __future__ import annotations

from typing import Any

from nnef_torch.errors import Location, NNEFSemanticError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.ir.graph import Ref
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


@lowering_rule("tract_core_cast")
def cast(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    kind = nnef_kind(args["to"], "to", "tract_core_cast", loc)
    return call(lowerer, "cast", loc, kind, input=args["input"])


@lowering_rule("tract_core_gather")
def gather(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    return call(lowerer, "gather", loc, input=args["input"], indices=args["indices"], axis=args["axis"])


@lowering_rule("tract_core_shape_of")
def shape_of(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    value = args["input"]
    shape = list(lowerer.tensors[value.name].shape) if isinstance(value, Ref) else []
    if not shape:
        raise NNEFUnsupportedError("tract_core_shape_of of a scalar (rank 0) has no NNEF form", loc)
    return call(lowerer, "constant", loc, "integer", shape=[len(shape)], value=shape)


@lowering_rule("tract_core_range")
def range_(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    from nnef_torch.dialects.tract_core.fold import fold_integer

    bounds = [fold_integer(lowerer, args[key]) for key in ("start", "end", "step")]
    if any(bound is None for bound in bounds):
        raise NNEFUnsupportedError("tract_core_range reads start, end and step known when the model is read (literals, "
                                   "or shape arithmetic on static shapes): a range whose length depends on tensor "
                                   "values has no static shape", loc)
    start, end, step = bounds
    if step == 0:
        raise NNEFSemanticError("tract_core_range: step must not be 0", loc)
    values = list(range(start, end, step))
    if not values:
        raise NNEFUnsupportedError(f"tract_core_range({start}, {end}, {step}) is empty", loc)
    return call(lowerer, "constant", loc, "integer", shape=[len(values)], value=values)
