"""Elementwise ATen operations: arithmetic, comparisons, logic and activations."""
from __future__ import annotations

import math
from typing import Any

from nnef_torch.exporter.emitter import nnef_type
from nnef_torch.exporter.rules.common import Emitter, Unmappable, align, binary, is_ref, leading
from nnef_torch.ops.registry import export_rule


def as_scalar(e: Emitter, x: Any) -> Any:
    """`x` as a scalar tensor: NNEF arithmetic is defined on scalars, so integer and logical tensors are cast (exact
    for integers up to 2^24 in magnitude)."""
    return e.op("cast", x, generic="scalar") if is_ref(x) and e.dtype(x) != "scalar" else x


def like_out(e: Emitter, y: Any) -> Any:
    """`y` cast to the NNEF type of the node's torch result, where they differ."""
    target = nnef_type(e.out.dtype)
    return e.op("cast", y, generic=target) if is_ref(y) and e.dtype(y) != target else y


def numeric(name: str):
    """The rule of a unary NNEF op defined on scalars; integer inputs are cast there and the result back."""
    def rule(e: Emitter, x: Any) -> Any:
        return like_out(e, e.op(name, as_scalar(e, x)))
    rule.__name__ = name
    return rule


for _name, _aten in [("neg", "neg"), ("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"),
                     ("sinh", "sinh"), ("cosh", "cosh"), ("tanh", "tanh"), ("asin", "asin"), ("acos", "acos"),
                     ("atan", "atan"), ("asinh", "asinh"), ("acosh", "acosh"), ("atanh", "atanh"), ("abs", "abs"),
                     ("sign", "sign"), ("floor", "floor"), ("ceil", "ceil"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"),
                     ("relu", "relu"), ("sigmoid", "sigmoid"), ("silu", "silu"), ("sqr", "square")]:
    export_rule(_name, f"aten.{_aten}.default")(numeric(_name))

_LOGICAL_ARITHMETIC = {"add": "or", "mul": "and", "max": "or", "min": "and"}  # torch on two bool tensors


def _arith(e: Emitter, name: str, x: Any, y: Any) -> Any:
    """Binary arithmetic with torch's type promotion: computed on scalars, cast to the result's type."""
    if nnef_type(e.out.dtype) == "logical":
        if name not in _LOGICAL_ARITHMETIC:
            raise Unmappable(f"{name} of logical tensors has no NNEF form")
        return binary(e, _LOGICAL_ARITHMETIC[name], x, y)
    return like_out(e, binary(e, name, as_scalar(e, x), as_scalar(e, y)))


def _scaled(e: Emitter, y: Any, alpha: Any) -> Any:
    if alpha == 1:
        return y
    return y * alpha if not is_ref(y) else binary(e, "mul", as_scalar(e, y), alpha)


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
    return _arith(e, "mul", x, y)


@export_rule("div", "aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div(e: Emitter, x: Any, y: Any, *, rounding_mode: str | None = None) -> Any:
    z = binary(e, "div", as_scalar(e, x), as_scalar(e, y))
    if rounding_mode == "floor":
        z = e.op("floor", z)
    elif rounding_mode == "trunc":
        z = _trunc(e, z)
    return like_out(e, z)


@export_rule("div", "aten.reciprocal.default")
def reciprocal(e: Emitter, x: Any) -> Any:
    """1 / x as a division: exact, and read by consumers that lack the standard `rcp` (tract)."""
    return e.op("div", 1.0, x)


def _modulo(e: Emitter, x: Any, y: Any, rounding: str) -> Any:
    """x - round(x / y) * y, with `floor` (torch.remainder: the sign of y) or truncation (torch.fmod: the sign of
    x); integers are computed as scalars and cast back."""
    x, y = align(e, as_scalar(e, x), as_scalar(e, y))
    ratio = e.op("div", x, y)
    whole = e.op("floor", ratio) if rounding == "floor" else _trunc(e, ratio)
    return like_out(e, e.op("sub", x, e.op("mul", whole, y)))


@export_rule("sub", "aten.remainder.Tensor", "aten.remainder.Scalar")
def remainder(e: Emitter, x: Any, y: Any) -> Any:
    return _modulo(e, x, y, "floor")


@export_rule("sub", "aten.fmod.Tensor", "aten.fmod.Scalar")
def fmod(e: Emitter, x: Any, y: Any) -> Any:
    return _modulo(e, x, y, "trunc")


@export_rule("pow", "aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def pow_(e: Emitter, x: Any, y: Any) -> Any:
    special = {2: "sqr", 0.5: "sqrt", -2: "rsqr", -0.5: "rsqrt"}
    if is_ref(x) and not is_ref(y):
        if y == 1:
            return e.op("copy", x)
        if y == -1:
            return like_out(e, reciprocal(e, as_scalar(e, x)))
        if y in special:
            return like_out(e, e.op(special[y], as_scalar(e, x)))
    return _arith(e, "pow", x, y)


@export_rule("max", "aten.maximum.default")
def maximum(e: Emitter, x: Any, y: Any) -> Any:
    return _arith(e, "max", x, y)


@export_rule("min", "aten.minimum.default")
def minimum(e: Emitter, x: Any, y: Any) -> Any:
    return _arith(e, "min", x, y)


def _compare(name: str):
    def rule(e: Emitter, x: Any, y: Any) -> Any:
        kinds = {e.dtype(v) for v in (x, y)}
        if kinds == {"logical"} and name in ("eq", "ne"):
            differ = binary(e, "or", *(_both(e, x, y)))
            return differ if name == "ne" else e.op("not", differ)
        return binary(e, name, as_scalar(e, x), as_scalar(e, y))
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


@export_rule("or", "aten.logical_xor.default", "aten.bitwise_xor.Tensor")
def logical_xor(e: Emitter, x: Any, y: Any) -> Any:
    """x != y on logicals: (x and not y) or (y and not x)."""
    _logical(e, x, y)
    return binary(e, "or", *_both(e, x, y))


@export_rule("not", "aten.bitwise_not.default")
def bitwise_not(e: Emitter, x: Any) -> Any:
    _logical(e, x)
    return e.op("not", x)


@export_rule("not", "aten.logical_not.default")
def logical_not(e: Emitter, x: Any) -> Any:
    """not x; a number is false where it is zero."""
    return e.op("not", x) if e.dtype(x) == "logical" else e.op("eq", as_scalar(e, x), 0.0)


def _logical(e: Emitter, *xs: Any) -> None:
    if any(is_ref(x) and e.dtype(x) != "logical" for x in xs):
        raise Unmappable("bitwise operations on integers have no NNEF form; only logical (bool) tensors")


@export_rule("select", "aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(e: Emitter, condition: Any, x: Any, y: Any) -> Any:
    """select, with both branches in the type torch promotes them to."""
    kind = nnef_type(e.out.dtype)
    x, y = (as_scalar(e, v) if kind == "scalar" else v for v in (x, y))
    return aligned_select(e, condition, x, y, kind)


def aligned_select(e: Emitter, condition: Any, x: Any, y: Any, kind: str = "scalar") -> Any:
    """select with torch's broadcasting. (The Khronos executor crashes on a literal branch when the condition is
    broadcast; rules of their own should not write that.)"""
    condition, x, y = align(e, condition, x, y)
    return e.op("select", condition, x, y, generic=kind)


@export_rule("clamp", "aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default",
             "aten.hardtanh.default")
def clamp(e: Emitter, x: Any, min: Any = None, max: Any = None) -> Any:
    if e.node.target.__name__.startswith("clamp_max"):
        min, max = None, min
    if e.node.target.__name__.startswith("hardtanh"):
        min, max = (-1.0 if min is None else min), (1.0 if max is None else max)
    if min is not None and max is not None:
        x, min, max = align(e, as_scalar(e, x), as_scalar(e, min), as_scalar(e, max))
        return like_out(e, e.op("clamp", x, min, max))
    if min is not None:
        return _arith(e, "max", x, min)
    if max is not None:
        return _arith(e, "min", x, max)
    return e.op("copy", x)


@export_rule("clamp", "aten.relu6.default", "aten.hardsigmoid.default")
def relu6(e: Emitter, x: Any) -> Any:
    if e.node.target.__name__.startswith("hardsigmoid"):
        return e.op("hard_sigmoid", x)
    return like_out(e, e.op("clamp", as_scalar(e, x), 0.0, 6.0))


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


@export_rule("sub", "aten.log_sigmoid_forward.default")
def log_sigmoid(e: Emitter, x: Any) -> Any:
    """log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), which overflows for no x."""
    tail = e.op("log", e.op("add", e.op("exp", e.op("neg", e.op("abs", x))), 1.0))
    return e.op("sub", e.op("min", x, 0.0), tail), None


@export_rule("round", "aten.round.default")
def round_(e: Emitter, x: Any) -> Any:
    """torch rounds halves to even, NNEF's `round` away from zero: halves are corrected where the floor is even."""
    return _round_half_even(e, x)


@export_rule("round", "aten.round.decimals")
def round_decimals(e: Emitter, x: Any, *, decimals: int = 0) -> Any:
    """Rounded to `decimals` digits as torch does it: round(x * 10^d) / 10^d (for d < 0: round(x / 10^-d) * 10^-d)."""
    if decimals == 0:
        return _round_half_even(e, x)
    scale = float(10 ** abs(decimals))
    if decimals > 0:
        return e.op("div", _round_half_even(e, e.op("mul", x, scale)), scale)
    return e.op("mul", _round_half_even(e, e.op("div", x, scale)), scale)


def _round_half_even(e: Emitter, x: Any) -> Any:
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


@export_rule("atan", "aten.atan2.default")
def atan2(e: Emitter, y: Any, x: Any) -> Any:
    """atan(y / x), moved by +-pi where x < 0 (x = 0 gives atan(+-inf) = +-pi/2; y = x = 0 gives NaN, not 0)."""
    y, x = align(e, as_scalar(e, y), as_scalar(e, x))
    base = e.op("atan", e.op("div", y, x))
    turned = binary(e, "add", base, e.op("select", e.op("ge", y, 0.0), math.pi, -math.pi))
    return aligned_select(e, e.op("lt", x, 0.0), turned, base)


@export_rule("sqrt", "aten.hypot.default")
def hypot(e: Emitter, x: Any, y: Any) -> Any:
    return e.op("sqrt", binary(e, "add", e.op("sqr", as_scalar(e, x)), e.op("sqr", as_scalar(e, y))))


@export_rule("ne", "aten.isnan.default")
def isnan(e: Emitter, x: Any) -> Any:
    """NaN is the one value unequal to itself."""
    x = as_scalar(e, x)
    return e.op("ne", x, x)


def _trunc(e: Emitter, x: Any) -> Any:
    """Rounding toward zero: sign(x) * floor(|x|)."""
    return e.op("mul", e.op("sign", x), e.op("floor", e.op("abs", x)))


@export_rule("mul", "aten.trunc.default")
def trunc(e: Emitter, x: Any) -> Any:
    return _trunc(e, x)


__all__ = ["as_scalar", "leading", "like_out"]
