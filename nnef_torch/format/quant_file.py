"""graph.quant (spec 5.3 and 7): quantization ops attached to tensors by identifier; read and print."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nnef_torch.errors import Location, NNEFError, NNEFQuantizationError
from nnef_torch.format import ast
from nnef_torch.format.parser import parse_quantization
from nnef_torch.format.printer import print_literal
from nnef_torch.stdlib import standard_fragments

QUANTIZATION_OPS = ("linear_quantize", "logarithmic_quantize", "min_max_linear_quantize", "zero_point_linear_quantize")


@dataclass(frozen=True)
class QuantSpec:
    """`op` applied to a tensor with these arguments; tensor-typed arguments may be per-channel nested lists."""

    op: str
    args: dict[str, Any]
    location: Location | None = field(default=None, compare=False)


def read_quantization(text: str, fragments: Mapping[str, ast.Fragment], file: str | None = "graph.quant"
                      ) -> dict[str, QuantSpec]:
    """Parse and check graph.quant against the declarations in `fragments` (standard and the document's)."""
    try:
        entries = parse_quantization(text, file)
        specs: dict[str, QuantSpec] = {}
        for entry in entries:
            if entry.tensor in specs:
                raise NNEFQuantizationError(f"tensor '{entry.tensor}' is quantized twice", entry.loc)
            specs[entry.tensor] = _check_entry(entry, fragments)
        return specs
    except NNEFError as error:
        if not isinstance(error, NNEFQuantizationError):
            error = NNEFQuantizationError(error.message, error.location, error.source_line)
        raise error.with_source(text, file) from None


def _check_entry(entry: ast.QuantEntry, fragments: Mapping[str, ast.Fragment]) -> QuantSpec:
    call = entry.invocation
    fragment = fragments.get(call.name)
    custom = fragment is not None and call.name not in standard_fragments() and _is_quantizer(fragment)
    if call.name not in QUANTIZATION_OPS and not custom:
        known = ", ".join(QUANTIZATION_OPS)
        raise NNEFQuantizationError(f"unknown quantization operation '{call.name}' (known: {known}, or a fragment "
                                    "of the document taking one tensor and attributes)", call.loc)
    params = {param.name: param for param in fragment.params[1:]}
    args: dict[str, Any] = {}
    for arg in call.args:
        if arg.name is None:
            raise NNEFQuantizationError("graph.quant arguments must be named; the quantized tensor is implicit",
                                        arg.loc)
        if arg.name not in params:
            raise NNEFQuantizationError(f"'{call.name}' has no parameter '{arg.name}'", arg.loc)
        if arg.name in args:
            raise NNEFQuantizationError(f"parameter '{arg.name}' is given twice", arg.loc)
        args[arg.name] = _constant(arg.value, params[arg.name].type, arg.name)
    for name, param in params.items():
        if name not in args:
            if param.default is None:
                raise NNEFQuantizationError(f"'{call.name}' needs '{name}'", call.loc)
            args[name] = _constant(param.default, param.type, name)
    return QuantSpec(call.name, args, entry.loc)


def _is_quantizer(fragment: ast.Fragment) -> bool:
    first = fragment.params[0].type if fragment.params else None
    return isinstance(first, ast.TensorType) and all(
        not isinstance(param.type, ast.ArrayType) or not isinstance(param.type.item, ast.TensorType)
        for param in fragment.params[1:])


def _constant(expr: ast.Expr, type_: ast.Type, name: str) -> Any:
    """A literal argument value, checked against the parameter type (arrays allowed for tensor parameters)."""
    if isinstance(expr, ast.UnaryExpr) and expr.op == "-" and isinstance(expr.operand, ast.Literal) \
            and expr.operand.kind in ("integer", "scalar"):
        return _constant(ast.Literal(-expr.operand.value, expr.operand.kind, expr.loc), type_, name)
    if isinstance(type_, ast.TensorType):
        if isinstance(expr, ast.ArrayExpr):
            return [_constant(item, type_, name) for item in expr.items]
        item = type_.item.name if type_.item is not None else None
        return _primitive(expr, item, name, tensor=True)
    if isinstance(type_, ast.ArrayType):
        if not isinstance(expr, ast.ArrayExpr):
            raise NNEFQuantizationError(f"'{name}' must be an array", expr.loc)
        return [_constant(item, type_.item, name) for item in expr.items]
    if isinstance(type_, ast.TupleType):
        if not isinstance(expr, ast.TupleExpr) or len(expr.items) != len(type_.items):
            raise NNEFQuantizationError(f"'{name}' must be a tuple of {len(type_.items)}", expr.loc)
        return tuple(_constant(item, t, name) for item, t in zip(expr.items, type_.items))
    return _primitive(expr, type_.name, name, tensor=False)


def _primitive(expr: ast.Expr, kind: str | None, name: str, tensor: bool) -> Any:
    if not isinstance(expr, ast.Literal):
        raise NNEFQuantizationError(f"'{name}' must be a literal value (graph.quant holds no tensor identifiers "
                                    "or expressions)", expr.loc)
    if kind in (None, "?") or expr.kind == kind:
        return expr.value
    if tensor and kind == "scalar" and expr.kind == "integer":
        return float(expr.value)  # a whole number written without a decimal point
    raise NNEFQuantizationError(f"'{name}' must be {kind}, found {expr.kind} {print_literal(expr.value)}", expr.loc)


def print_quantization(specs: Mapping[str, QuantSpec]) -> str:
    """Canonical graph.quant text, one line per tensor in the given order."""
    lines = []
    for tensor, spec in specs.items():
        args = ", ".join(f"{key} = {print_literal(value)}" for key, value in spec.args.items())
        key = tensor.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'"{key}": {spec.op}({args});')
    return "\n".join(lines) + ("\n" if lines else "")
