"""Element-wise operators: MXNet's elemwise_*, broadcast_*, _*_scalar families and unary math (with hard_sigmoid,
smooth_l1, rint, cbrt, rcbrt, degrees, radians, erfinv, _contrib_div_sqrt_dim, and MXNet 2's log_sigmoid and mish),
and NNVM's names for the same (`__add_scalar__`, ...). Broadcasting is numpy's (shapes aligned from the right);
comparisons give 1.0 or 0.0 in the input's type, as MXNet's do."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.formats.nnvm.rules.common import broadcast_pair
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"
_COMPARE = {"eq", "ne", "lt", "gt", "le", "ge"}


def _apply(b: Builder, op: str, x: Any, y: Any) -> Any:
    if op in _COMPARE:
        return b.op("select", b.op(op, x, y), 1.0, 0.0)
    if op == "sub_reversed":
        return b.op("sub", y, x)
    return b.op(op, x, y)


def _binary(op: str) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(2)
        x, y = broadcast_pair(b, node.input(0), node.input(1))
        if node.op.startswith("elemwise_") or node.op in ("_plus", "_minus", "_mul", "_div", "_Plus", "_Minus",
                                                           "_Mul", "_Div", "_add", "_sub"):
            if b.shape(x) != b.shape(y):
                raise node.fail(f"element-wise operands must have equal shapes, found {list(b.shape(x))} and "
                                f"{list(b.shape(y))} (broadcast_* operators broadcast)")
        return _apply(b, op, x, y)
    rule.__name__ = f"binary_{op}"
    return rule


def _scalar(op: str, reverse: bool = False) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        node.attrs.bool("is_int", False)  # MXNet 1.9 marks integer scalars; the value reads the same
        value = float(node.attrs.float("scalar"))
        x = node.input(0)
        return _apply(b, op, value, x) if reverse else _apply(b, op, x, value)
    rule.__name__ = f"scalar_{op}{'_reversed' if reverse else ''}"
    return rule


for _op, _names in {
    "add": ("elemwise_add", "broadcast_add", "broadcast_plus", "_plus", "_Plus", "_add"),
    "sub": ("elemwise_sub", "broadcast_sub", "broadcast_minus", "_minus", "_Minus", "_sub"),
    "mul": ("elemwise_mul", "broadcast_mul", "_mul", "_Mul"),
    "div": ("elemwise_div", "broadcast_div", "_div", "_Div"),
    "pow": ("broadcast_power", "_power", "_Power"),
    "max": ("broadcast_maximum", "_maximum", "_Maximum"),
    "min": ("broadcast_minimum", "_minimum", "_Minimum"),
    "eq": ("broadcast_equal", "_equal"),
    "ne": ("broadcast_not_equal", "_not_equal"),
    "gt": ("broadcast_greater", "_greater", "greater"),
    "ge": ("broadcast_greater_equal", "_greater_equal", "greater_equal"),
    "lt": ("broadcast_lesser", "_lesser", "less"),
    "le": ("broadcast_lesser_equal", "_lesser_equal", "less_equal"),
}.items():
    import_rule(_op, NNVM, *_names)(_binary(_op))

for _op, _names, _reverse in (
    ("add", ("_plus_scalar", "_PlusScalar", "__add_scalar__"), False),
    ("sub", ("_minus_scalar", "_MinusScalar", "__sub_scalar__"), False),
    ("sub", ("_rminus_scalar", "_RMinusScalar", "__rsub_scalar__"), True),
    ("mul", ("_mul_scalar", "_MulScalar", "__mul_scalar__"), False),
    ("div", ("_div_scalar", "_DivScalar", "__div_scalar__"), False),
    ("div", ("_rdiv_scalar", "_RDivScalar", "__rdiv_scalar__"), True),
    ("pow", ("_power_scalar", "_PowerScalar", "__pow_scalar__"), False),
    ("pow", ("_rpower_scalar", "_RPowerScalar", "__rpow_scalar__"), True),
    ("max", ("_maximum_scalar", "_MaximumScalar"), False),
    ("min", ("_minimum_scalar", "_MinimumScalar"), False),
    ("eq", ("_equal_scalar",), False),
    ("ne", ("_not_equal_scalar",), False),
    ("gt", ("_greater_scalar",), False),
    ("ge", ("_greater_equal_scalar",), False),
    ("lt", ("_lesser_scalar",), False),
    ("le", ("_lesser_equal_scalar",), False),
):
    import_rule(_op, NNVM, *_names)(_scalar(_op, _reverse))


def _unary(write: Callable[[Builder, Any], Any]) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        return write(b, node.input(0))
    rule.__name__ = f"unary_{write.__name__}"
    return rule


def _standard(op: str) -> Callable[[Builder, Any], Any]:
    def write(b: Builder, x: Any) -> Any:
        return b.op(op, x)
    write.__name__ = op
    return write


for _op, _names in {
    "exp": ("exp",), "log": ("log",), "sqrt": ("sqrt",), "rsqrt": ("rsqrt",), "sqr": ("square",),
    "abs": ("abs",), "neg": ("negative",), "sign": ("sign",), "floor": ("floor",), "ceil": ("ceil",),
    "round": ("round",), "rcp": ("reciprocal",), "sin": ("sin",), "cos": ("cos",), "tan": ("tan",),
    "asin": ("arcsin",), "acos": ("arccos",), "atan": ("arctan",), "sinh": ("sinh",), "cosh": ("cosh",),
    "tanh": ("tanh",), "asinh": ("arcsinh",), "acosh": ("arccosh",), "atanh": ("arctanh",), "sigmoid": ("sigmoid",),
    "relu": ("relu",), "log2": ("log2",), "softplus": ("softrelu",), "softsign": ("softsign",),
}.items():
    import_rule(_op, NNVM, *_names)(_unary(_standard(_op)))


def log1p(b: Builder, x: Any) -> Any:
    return b.op("log", b.op("add", x, 1.0))


def expm1(b: Builder, x: Any) -> Any:
    return b.op("sub", b.op("exp", x), 1.0)


def log10(b: Builder, x: Any) -> Any:
    return b.op("div", b.op("log", x), math.log(10.0))


def erf(b: Builder, x: Any) -> Any:
    return b.op("erf_rational", x)


def fix(b: Builder, x: Any) -> Any:  # toward zero
    return b.op("mul", b.op("sign", x), b.op("floor", b.op("abs", x)))


for _write, _op, _names in ((log1p, "log", ("log1p",)), (expm1, "exp", ("expm1",)), (log10, "log", ("log10",)),
                            (erf, "erf_rational", ("erf",)), (fix, "floor", ("fix", "trunc"))):
    import_rule(_op, NNVM, *_names)(_unary(_write))


# MXNet's further unary operators: parametrized activations, rounding, cube roots, angle units -----------
@import_rule("clamp", NNVM, "hard_sigmoid")
def hard_sigmoid(b: Builder, node: OpNode) -> Any:
    """alpha * x + beta, clamped to [0, 1]."""
    node.arity(1)
    alpha, beta = float(node.attrs.float("alpha", 0.2)), float(node.attrs.float("beta", 0.5))
    return b.op("clamp", b.op("add", b.op("mul", node.input(0), alpha), beta), 0.0, 1.0)


@import_rule("select", NNVM, "smooth_l1")
def smooth_l1(b: Builder, node: OpNode) -> Any:
    """0.5 * (sigma * x)^2 where |x| <= 1 / sigma^2, else |x| - 0.5 / sigma^2 (sigma is `scalar`), with MXNet's
    float32 constants."""
    node.arity(1)
    node.attrs.bool("is_int", True)
    sigma = np.float32(node.attrs.float("scalar", 1.0))
    square = np.float32(sigma * sigma)
    bound = np.float32(np.float32(1.0) / square)
    x = node.input(0)
    magnitude = b.op("abs", x)
    inner = b.op("mul", b.op("mul", b.op("mul", x, 0.5), x), float(square))
    return b.op("select", b.op("gt", magnitude, float(bound)),
                b.op("sub", magnitude, float(np.float32(0.5) * bound)), inner)


def rint(b: Builder, x: Any) -> Any:
    """The nearer of floor(x) and ceil(x), floor(x) when as near: MXNet's kernel rounds halfway cases down, not to
    even as its documentation says."""
    low, high = b.op("floor", x), b.op("ceil", x)
    return b.op("select", b.op("le", b.op("sub", x, low), b.op("sub", high, x)), low, high)


def cbrt(b: Builder, x: Any) -> Any:
    return b.op("mul", b.op("sign", x), b.op("pow", b.op("abs", x), 1.0 / 3.0))


def rcbrt(b: Builder, x: Any) -> Any:
    return b.op("rcp", cbrt(b, x))


def degrees(b: Builder, x: Any) -> Any:
    return b.op("mul", x, 180.0 / math.pi)


def radians(b: Builder, x: Any) -> Any:
    return b.op("mul", x, math.pi / 180.0)


def log_sigmoid(b: Builder, x: Any) -> Any:  # MXNet 2
    return b.op("neg", b.op("softplus", b.op("neg", x)))


def mish(b: Builder, x: Any) -> Any:  # MXNet 2: x * tanh(softplus(x))
    return b.op("mul", x, b.op("tanh", b.op("softplus", x)))


def erfinv(b: Builder, x: Any) -> Any:
    return b.op("erfinv_polynomial", x)


for _write, _op, _names in ((rint, "round", ("rint",)), (cbrt, "pow", ("cbrt",)), (rcbrt, "rcp", ("rcbrt",)),
                            (degrees, "mul", ("degrees",)), (radians, "mul", ("radians",)),
                            (log_sigmoid, "softplus", ("log_sigmoid",)), (mish, "tanh", ("mish",)),
                            (erfinv, "erfinv_polynomial", ("erfinv",))):
    import_rule(_op, NNVM, *_names)(_unary(_write))


@import_rule("div", NNVM, "_contrib_div_sqrt_dim")
def div_sqrt_dim(b: Builder, node: OpNode) -> Any:
    """x / sqrt(extent of the last axis), the scaling of attention scores."""
    node.arity(1)
    x = node.input(0)
    return b.op("div", x, float(np.float32(math.sqrt(b.shape(x)[-1]))))
