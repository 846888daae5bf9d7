"""Standard operations read as tract reads them, in a tract_core document only.

tract accepts some standard operations beyond the spec (sonos/tract, nnef/src/ops/nnef/deser.rs and
nnef/src/registry.rs), and torch_to_nnef's `TractNNEF` target writes them:
- `conv` / `deconv` bias: tract drops every unit axis of the bias, so any bias whose other axes leave one of the
  output channels (or 1) is read, a rank-1 `[C]` among them; it is read as `reshape(bias, [1, C])`.
- `deconv` filter and output shape: tract reads the filter as [out, in/groups, ...] (as a `conv` filter) where NNEF
  has [in, out/groups, ...], and `output_shape` as the spatial extents only; read as the standard `deconv` of the
  filter transposed per group.
- `linear` on batched operands of one rank (3 and more): tract's `matmul` (which `linear` invokes) multiplies
  batches, broadcasting unit batch axes; read as `matmul(input, filter, transposeB = true) + bias`. Operands of
  different ranks are refused, as tract refuses them.
- `pad` with the border tract names `replicated` (NNEF's `replicate`, which tract refuses).
- binary arithmetic and comparisons (`add sub mul min max lt gt le ge eq ne`) on integer tensors, both operands
  of one type (relaxed.nnef); the integer operation is kept (exact), and written with casts on a standard save.
The table `RULES` is consulted by the lowerer only for a document that declares the tract_core registry; a
standard document reads these operations by the spec. How such a document is typed (numbers by value, attributes
given as tensors, arrays for tuples: `pad`'s nested padding) is `by_value.py`'s.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from nnef_torch.errors import Location, NNEFTypeError
from nnef_torch.format import ast
from nnef_torch.format.parser import parse_fragments
from nnef_torch.formats.tract_core.lowering import call
from nnef_torch.ir.graph import Ref
from nnef_torch.stdlib import standard_fragments

DECLARATIONS_FILE = "relaxed.nnef"
NUMERIC = ("scalar", "integer")


@lru_cache(maxsize=1)
def declarations() -> dict[str, ast.Fragment]:
    """The generic declarations of the binary operations tract reads on integers (they replace the standard ones
    for the checker in a tract_core document)."""
    text = resources.files(__package__).joinpath(DECLARATIONS_FILE).read_text(encoding="utf-8")
    return {fragment.name: fragment for fragment in parse_fragments(text, DECLARATIONS_FILE)}


def _shape(lowerer: Any, value: Any) -> tuple[int, ...] | None:
    return lowerer.tensors[value.name].shape if isinstance(value, Ref) else ()


def _standard(lowerer: Any, name: str, args: dict, loc: Location, hint: ast.Expr | None) -> Any:
    """`name` read by the spec (the table set aside meanwhile, so the op is not read again here)."""
    table, lowerer.relaxed = lowerer.relaxed, {}
    try:
        return lowerer.invoke(name, [(key, value, loc) for key, value in args.items()], None, loc, None, hint)
    finally:
        lowerer.relaxed = table


def _binary(name: str) -> Any:
    def rule(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
        kind = value_type.name if value_type is not None else "scalar"
        if kind == "scalar":  # the standard operation
            return lowerer.emit(standard_fragments()[name], args, None, loc, hint)
        if kind not in NUMERIC:
            raise NNEFTypeError(f"'{name}' takes scalar or integer tensors (both of one type), found {kind}", loc)
        return lowerer.emit(declarations()[name], args, value_type, loc, hint)
    rule.__name__ = f"relaxed_{name}"
    return rule


def _conv(name: str) -> Any:
    def rule(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
        bias = args["bias"]
        shape = _shape(lowerer, bias)
        if shape is not None and len(shape) and not (len(shape) == 2 and shape[0] == 1):
            kept = [extent for extent in shape if extent != 1]
            if len(kept) <= 1:  # tract's reading: the bias without its unit axes (else the shape rule reports it)
                reshaped = call(lowerer, "reshape", loc, input=bias, shape=[1, kept[0] if kept else 1])
                args = {**args, "bias": reshaped}
        if name == "deconv":
            args = _tract_deconv(lowerer, args, loc)
        return _standard(lowerer, name, args, loc, hint)
    rule.__name__ = f"relaxed_{name}"
    return rule


def _tract_deconv(lowerer: Any, args: dict, loc: Location) -> dict:
    """tract's `deconv` as NNEF's: tract reads the filter as [out, in/groups, ...] (groups 0: as many groups as
    the filter's first extent) and `output_shape` as the spatial extents, ignoring one of any other length
    (deser.rs `conv_like`, `read_conv_parameters`); NNEF reads [in, out/groups, ...] and the whole output shape."""
    x, w = args["input"], args["filter"]
    xs, ws = _shape(lowerer, x), _shape(lowerer, w)
    if not xs or not ws or len(ws) < 3 or len(xs) != len(ws):
        return args  # the standard rule reports these
    groups = args.get("groups") or ws[0]
    if not isinstance(groups, int) or ws[0] % groups:
        return args
    spatial = list(range(2, len(ws)))
    if groups == 1:
        w = call(lowerer, "transpose", loc, input=w, axes=[1, 0, *spatial])
    else:
        w = call(lowerer, "reshape", loc, input=w, shape=[groups, ws[0] // groups, *ws[1:]])
        w = call(lowerer, "transpose", loc, input=w, axes=[0, 2, 1, *(a + 1 for a in spatial)])
        w = call(lowerer, "reshape", loc, input=w, shape=[groups * ws[1], ws[0] // groups, *ws[2:]])
    extents = list(args.get("output_shape") or [])
    output_shape = [xs[0], ws[0], *extents] if len(extents) == len(spatial) else []
    return {**args, "filter": w, "output_shape": output_shape, "groups": groups}


def linear(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    x, w, bias = args["input"], args["filter"], args["bias"]
    xs, ws = _shape(lowerer, x), _shape(lowerer, w)
    if xs is None or ws is None or len(xs) != len(ws) or len(xs) <= 2:
        return _standard(lowerer, "linear", args, loc, hint)  # the standard rule reads (or reports) these
    product = call(lowerer, "matmul", loc, A=x, B=w, transposeB=True)
    if not isinstance(bias, Ref) and bias == 0.0:
        return product
    return call(lowerer, "add", loc, x=product, y=bias)


def pad(lowerer: Any, args: dict, value_type: Any, loc: Location, hint: ast.Expr | None) -> Any:
    """tract names NNEF's `replicate` border `replicated` (deser.rs `pad_mode`), and refuses `replicate`."""
    if args.get("border") == "replicated":
        args = {**args, "border": "replicate"}
    return _standard(lowerer, "pad", args, loc, hint)


RULES = {**{name: _binary(name) for name in ("add", "sub", "mul", "min", "max", "lt", "gt", "le", "ge", "eq", "ne")},
         "conv": _conv("conv"), "deconv": _conv("deconv"), "linear": linear, "pad": pad}


__all__ = ["RULES", "declarations"]
