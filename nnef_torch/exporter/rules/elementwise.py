"""Elementwise ATen operations: arithmetic, comparisons, logic and activations."""
from __future__ import annotations

import math
from typing import Any

from nnef_torch.exporter.rules.common import Emitter, Unmappable, align, binary, is_ref, leading, unary
from nnef_torch.ops.registry import export_rule

for _name, _aten in [("neg", "neg"), ("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"),
                     ("sinh", "sinh"), ("cosh", "cosh"), ("tanh", "tanh"), ("asin", "asin"), ("acos", "acos"),
                     ("atan", "atan"), ("asinh", "asinh"), ("acosh", "acosh"), ("atanh", "atanh"), ("abs", "abs"),
                     ("sign", "sign"), ("floor", "floor"), ("ceil", "ceil"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"),
                     ("rcp", "reciprocal"), ("relu", "relu"), ("sigmoid", "sigmoid"), ("silu", "silu"),
                     ("not", "logical_not")]:
    export_rule(_name, f"aten.{_aten}.default")(unary(_name))


def _arith(e: Emitter, name: str, x: Any, y: Any) -> Any:
    """Scalar arithmetic; integer operands go through `cast`, since NNEF arithmetic is defined on scalars."""
    kinds = {e.dtype(v) for v in (x, y) if is_ref(v)}
    if kinds <= {"scalar"}:
        return binary(e, name, x, y)
    if "logical" in kinds:
        raise Unmappable(f"{name} of logical tensors has no NNEF form")
    x, y = (e.op("cast", v, generic="scalar") if is_ref(v) and e.dtype(v) == "integer" else v for v in (x, y))
    result = binary(e, name, x, y)
    if name == "div":
        return result
    return e.op("cast", result, generic="integer")


def _scaled(e: Emitter, y: Any, alpha: Any) -> Any:
    if alpha == 1:
        return y
    return y * alpha if not is_ref(y) else _arith(e, "mul", y, alpha)


@export_rule("add", "aten.add.Tensor", "aten.add.Scalar")
def add(e: Emitter, x: Any, y: Any, *, alpha: Any = 1) -> Any:
    return _arith(e, "add", x, _scaled(e, y, alpha))


@export_rule("sub", "aten.sub.Tensor", "aten.sub.Scalar")
def sub(e: Emitter, x: Any, y: Any, *, alpha: Any = 1) -> Any:
    return _arith(e, "sub", x, _scaled(e, y, alpha))


@export_rule("sub", "aten.rsub.Tensor", "aten.rsub.Scalar")
def rsub(e: Emitter, x: Any, y: Any, *, alpha: Any = 1) -> Any:
    return _arith(e, "sub", y, _scaled(e, x, alpha))


@export_rule("mul", "aten.mul.Tensor", "aten.mul.Scalar")
def mul(e: Emitter, x: Any, y: Any) -> Any:
    if e.dtype(x) == "logical" and e.dtype(y) == "logical":
        return binary(e, "and", x, y)
    return _arith(e, "mul", x, y)


@export_rule("div", "aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode")
def div(e: Emitter, x: Any, y: Any, *, rounding_mode: str | None = None) -> Any:
    z = _arith(e, "div", x, y)
    if rounding_mode == "floor":
        z = e.op("floor", z)
    elif rounding_mode == "trunc":
        z = e.op("mul", e.op("sign", z), e.op("floor", e.op("abs", z)))
    if rounding_mode is not None and any(is_ref(v) and e.dtype(v) == "integer" for v in (x, y)):
        z = e.op("cast", z, generic="integer")
    return z


@export_rule("pow", "aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def pow_(e: Emitter, x: Any, y: Any) -> Any:
    special = {2: "sqr", 0.5: "sqrt", -1: "rcp", -2: "rsqr", -0.5: "rsqrt"}
    if is_ref(x) and not is_ref(y):
        if y == 1:
            return e.op("copy", x)
        if y in special:
            return e.op(special[y], x)
    return _arith(e, "pow", x, y)


@export_rule("max", "aten.maximum.default")
def maximum(e: Emitter, x: Any, y: Any) -> Any:
    return _arith(e, "max", x, y)


@export_rule("min", "aten.minimum.default")
def minimum(e: Emitter, x: Any, y: Any) -> Any:
    return _arith(e, "min", x, y)


def _compare(name: str):
    def rule(e: Emitter, x: Any, y: Any) -> Any:
        kinds = {e.dtype(v) for v in (x, y) if is_ref(v)}
        if "logical" in kinds and name in ("eq", "ne"):
            same = binary(e, "or", *(_both(e, x, y)))
            return same if name == "ne" else e.op("not", same)
        if "integer" in kinds:
            x_, y_ = (e.op("cast", v, generic="scalar") if is_ref(v) and e.dtype(v) == "integer" else v
                      for v in (x, y))
            return binary(e, name, x_, y_)
        return binary(e, name, x, y)
    rule.__name__ = name
    return rule


def _both(e: Emitter, x: Any, y: Any) -> tuple[Any, Any]:
    """For logical x != y: (x and not y, y and not x)."""
    return binary(e, "and", x, e.op("not", y) if is_ref(y) else not y), binary(e, "and", y, e.op("not", x)
                                                                                if is_ref(x) else not x)


for _name in ("lt", "gt", "le", "ge", "eq", "ne"):
    export_rule(_name, f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(_compare(_name))


@export_rule("and", "aten.logical_and.default", "aten.bitwise_and.Tensor")
def logical_and(e: Emitter, x: Any, y: Any) -> Any:
    _logical(e, x, y)
    return binary(e, "and", x, y)


@export_rule("or", "aten.logical_or.default", "aten.bitwise_or.Tensor")
def logical_or(e: Emitter, x: Any, y: Any) -> Any:
    _logical(e, x, y)
    return binary(e, "or", x, y)


@export_rule("not", "aten.bitwise_not.default")
def bitwise_not(e: Emitter, x: Any) -> Any:
    _logical(e, x)
    return e.op("not", x)


def _logical(e: Emitter, *xs: Any) -> None:
    if any(is_ref(x) and e.dtype(x) != "logical" for x in xs):
        raise Unmappable("bitwise operations on integers have no NNEF form; only logical (bool) tensors")


@export_rule("select", "aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(e: Emitter, condition: Any, x: Any, y: Any) -> Any:
    condition, x, y = align(e, condition, x, y)
    return e.op("select", condition, x, y)


@export_rule("clamp", "aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default",
             "aten.hardtanh.default")
def clamp(e: Emitter, x: Any, min: Any = None, max: Any = None) -> Any:
    if e.node.target.__name__.startswith("clamp_max"):
        min, max = None, min
    if e.node.target.__name__.startswith("hardtanh"):
        min, max = (-1.0 if min is None else min), (1.0 if max is None else max)
    if min is not None and max is not None:
        x, min, max = align(e, x, min, max)
        return e.op("clamp", x, min, max)
    if min is not None:
        return _arith(e, "max", x, min)
    if max is not None:
        return _arith(e, "min", x, max)
    return e.op("copy", x)


@export_rule("clamp", "aten.relu6.default", "aten.hardsigmoid.default")
def relu6(e: Emitter, x: Any) -> Any:
    if e.node.target.__name__.startswith("hardsigmoid"):
        return e.op("hard_sigmoid", x)
    return e.op("clamp", x, 0.0, 6.0)


@export_rule("hard_swish", "aten.hardswish.default")
def hardswish(e: Emitter, x: Any) -> Any:
    return e.op("hard_swish", x)


@export_rule("gelu", "aten.gelu.default")
def gelu(e: Emitter, x: Any, *, approximate: str = "none") -> Any:
    return e.op("gelu_tanh" if approximate == "tanh" else "gelu_erf", x)


@export_rule("erf_rational", "aten.erf.default")
def erf(e: Emitter, x: Any) -> Any:
    return e.op("erf_rational", x)


@export_rule("elu", "aten.elu.default")
def elu(e: Emitter, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Any:
    if input_scale != 1.0:
        raise Unmappable("elu with input_scale != 1 has no NNEF form")
    if scale != 1.0:
        selu_alpha, selu_lambda = alpha, scale
        return e.op("selu", x, alpha=float(selu_alpha), lambda_=float(selu_lambda))
    return e.op("elu", x, alpha=float(alpha))


@export_rule("leaky_relu", "aten.leaky_relu.default")
def leaky_relu(e: Emitter, x: Any, negative_slope: float = 0.01) -> Any:
    return e.op("leaky_relu", x, alpha=float(negative_slope))


@export_rule("prelu", "aten._prelu_kernel.default", "aten.prelu.default")
def prelu(e: Emitter, x: Any, weight: Any) -> Any:
    if e.rank(weight) == 1 and e.shape(weight)[0] > 1 and e.rank(x) >= 2:
        weight = e.op("unsqueeze", weight, axes=[0])  # per channel: [1, C] broadcasts over NNEF's axis 1
    return e.op("prelu", x, weight)


@export_rule("softplus", "aten.softplus.default")
def softplus(e: Emitter, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    if beta == 1:
        return e.op("softplus", x)
    return e.op("div", e.op("softplus", e.op("mul", x, float(beta))), float(beta))


@export_rule("round", "aten.round.default")
def round_(e: Emitter, x: Any) -> Any:
    """torch rounds halves to even, NNEF's `round` away from zero: halves are corrected where the floor is even."""
    floor = e.op("floor", x)
    frac = e.op("sub", x, floor)
    half = e.op("eq", frac, 0.5)
    odd = e.op("ne", e.op("mul", e.op("floor", e.op("mul", floor, 0.5)), 2.0), floor)
    up = e.op("or", e.op("gt", frac, 0.5), e.op("and", half, odd))
    return e.op("select", up, e.op("add", floor, 1.0), floor)


@export_rule("log", "aten.log2.default", "aten.log10.default", "aten.log1p.default", "aten.expm1.default",
             "aten.exp2.default")
def log_base(e: Emitter, x: Any) -> Any:
    name = e.node.target.__name__.split(".")[0]
    if name == "log1p":
        return e.op("log", e.op("add", x, 1.0))
    if name == "expm1":
        return e.op("sub", e.op("exp", x), 1.0)
    if name == "exp2":
        return e.op("pow", 2.0, x)
    return e.op("div", e.op("log", x), math.log(2.0 if name == "log2" else 10.0))


@export_rule("copy", "aten.trunc.default")
def trunc(e: Emitter, x: Any) -> Any:
    return e.op("mul", e.op("sign", x), e.op("floor", e.op("abs", x)))


@export_rule("sqr", "aten.square.default")
def square(e: Emitter, x: Any) -> Any:
    return e.op("sqr", x)


__all__ = ["leading"]
