"""Element-wise ONNX operators: arithmetic, comparisons and logic with numpy broadcasting (folded when every input is
known while converting), unary math and activations."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.rules.common import align, broadcast_pair
from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
_NUMPY: dict[str, Callable[..., Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power, "min": np.minimum,
    "max": np.maximum, "eq": np.equal, "lt": np.less, "gt": np.greater, "and": np.logical_and, "or": np.logical_or}


def _binary(op: str) -> Callable[[Builder, OnnxNode], Any]:
    def rule(b: Builder, node: OnnxNode) -> Any:
        if not node.inputs:
            raise node.fail("needs at least one input")
        if all(node.known(i) for i in range(len(node.inputs))):
            result = node.const(0)
            for i in range(1, len(node.inputs)):
                other = node.const(i)
                result = (result // other if op == "div" and result.dtype.kind in "iu" else
                          _NUMPY[op](result, other)).astype(np.result_type(result, other) if op not in
                                                             ("eq", "lt", "gt", "and", "or") else bool)
            return result
        result = node.tensor(0)
        for i in range(1, len(node.inputs)):
            x, y = broadcast_pair(b, result, node.tensor(i))
            result = b.op(op, x, y)
        return result
    rule.__name__ = f"binary_{op}"
    return rule


for _op, _names in {"add": ("Add",), "sub": ("Sub",), "mul": ("Mul",), "div": ("Div",), "pow": ("Pow",),
                    "min": ("Min",), "max": ("Max",), "eq": ("Equal",), "lt": ("Less",), "gt": ("Greater",),
                    "and": ("And",), "or": ("Or",)}.items():
    import_rule(_op, ONNX, *_names)(_binary(_op))


def _unary(op: str, fold: Callable[[np.ndarray], np.ndarray] | None = None) -> Callable[[Builder, OnnxNode], Any]:
    def rule(b: Builder, node: OnnxNode) -> Any:
        if fold is not None and node.known(0):
            return fold(node.const(0))
        return b.op(op, node.tensor(0))
    rule.__name__ = f"unary_{op}"
    return rule


for _op, _name, _fold in (("sqrt", "Sqrt", np.sqrt), ("exp", "Exp", np.exp), ("log", "Log", np.log),
                          ("neg", "Neg", np.negative), ("abs", "Abs", np.abs), ("tanh", "Tanh", None),
                          ("sigmoid", "Sigmoid", None), ("relu", "Relu", None), ("softplus", "Softplus", None),
                          ("not", "Not", np.logical_not), ("erf_rational", "Erf", None)):
    import_rule(_op, ONNX, _name)(_unary(_op, _fold))


@import_rule("leaky_relu", ONNX, "LeakyRelu")
def leaky_relu(b: Builder, node: OnnxNode) -> Any:
    return b.op("leaky_relu", node.tensor(0), alpha=float(node.attr("alpha", 0.01)))


@import_rule("elu", ONNX, "Elu")
def elu(b: Builder, node: OnnxNode) -> Any:
    return b.op("elu", node.tensor(0), alpha=float(node.attr("alpha", 1.0)))


@import_rule("selu", ONNX, "Selu")
def selu(b: Builder, node: OnnxNode) -> Any:
    return b.op("selu", node.tensor(0), alpha=float(node.attr("alpha", 1.67326319217681884765625)),
                lambda_=float(node.attr("gamma", 1.05070102214813232421875)))


@import_rule("clamp", ONNX, "HardSigmoid")
def hard_sigmoid(b: Builder, node: OnnxNode) -> Any:
    scaled = b.op("add", b.op("mul", node.tensor(0), float(node.attr("alpha", 0.2))), float(node.attr("beta", 0.5)))
    return b.op("clamp", scaled, 0.0, 1.0)


@import_rule("clamp", ONNX, "Clip")
def clip(b: Builder, node: OnnxNode) -> Any:
    x = node.tensor(0)
    low = float(node.const(1, "min").reshape(-1)[0]) if node.has(1) else float("-inf")
    high = float(node.const(2, "max").reshape(-1)[0]) if node.has(2) else float("inf")
    if low != float("-inf") and high != float("inf"):
        return b.op("clamp", x, low, high)
    if low != float("-inf"):
        return b.op("max", x, low)
    return b.op("min", x, high) if high != float("inf") else b.op("copy", x)


@import_rule("select", ONNX, "Where")
def where(b: Builder, node: OnnxNode) -> Any:
    if all(node.known(i) for i in range(3)):
        return np.where(node.const(0), node.const(1), node.const(2))
    rank = max(node.rank(i) for i in range(3))
    return b.op("select", *(align(b, node.tensor(i), rank) for i in range(3)))


for _op, _names in {"le": ("LessOrEqual",), "ge": ("GreaterOrEqual",), "ne": ("Xor",)}.items():
    import_rule(_op, ONNX, *_names)(_binary(_op))
_NUMPY.update({"le": np.less_equal, "ge": np.greater_equal, "ne": np.not_equal})

for _op, _name, _fold in (("floor", "Floor", np.floor), ("ceil", "Ceil", np.ceil), ("sign", "Sign", np.sign),
                          ("rcp", "Reciprocal", np.reciprocal), ("sin", "Sin", None), ("cos", "Cos", None),
                          ("tan", "Tan", None), ("asin", "Asin", None), ("acos", "Acos", None),
                          ("atan", "Atan", None), ("sinh", "Sinh", None), ("cosh", "Cosh", None),
                          ("asinh", "Asinh", None), ("acosh", "Acosh", None), ("atanh", "Atanh", None),
                          ("hard_swish", "HardSwish", None)):
    import_rule(_op, ONNX, _name)(_unary(_op, _fold))


@import_rule("round", ONNX, "Round")
def round_half_even(b: Builder, node: OnnxNode) -> Any:
    """ONNX rounds halves to even; NNEF's `round` rounds them away from zero: a half goes to the even neighbour."""
    if node.known(0):
        return np.round(node.const(0))
    x = node.tensor(0)
    low = b.op("floor", x)
    high = b.op("add", low, 1.0)
    fraction = b.op("sub", x, low)
    low_is_even = b.op("eq", b.op("sub", low, b.op("mul", b.op("floor", b.op("mul", low, 0.5)), 2.0)), 0.0)
    half = b.op("select", low_is_even, low, high)
    return b.op("select", b.op("lt", fraction, 0.5), low, b.op("select", b.op("gt", fraction, 0.5), high, half))


@import_rule("gelu", ONNX, "Gelu")
def gelu(b: Builder, node: OnnxNode) -> Any:
    exact = node.only("approximate", ("none", "tanh"), "none") == "none"
    return b.op("gelu_erf" if exact else "gelu_tanh", node.tensor(0))


@import_rule("prelu", ONNX, "PRelu")
def prelu(b: Builder, node: OnnxNode) -> Any:
    x, slope = broadcast_pair(b, node.tensor(0), node.tensor(1))
    return b.op("prelu", x, slope)


@import_rule("div", ONNX, "Softsign")
def softsign(b: Builder, node: OnnxNode) -> Any:
    x = node.tensor(0)
    return b.op("div", x, b.op("add", b.op("abs", x), 1.0))


@import_rule("mul", ONNX, "Mish")
def mish(b: Builder, node: OnnxNode) -> Any:
    x = node.tensor(0)
    return b.op("mul", x, b.op("tanh", b.op("softplus", x)))


@import_rule("select", ONNX, "ThresholdedRelu")
def thresholded_relu(b: Builder, node: OnnxNode) -> Any:
    x = node.tensor(0)
    return b.op("select", b.op("gt", x, float(node.attr("alpha", 1.0))), x, 0.0)


@import_rule("elu", ONNX, "Celu")
def celu(b: Builder, node: OnnxNode) -> Any:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)) is alpha * elu(x / alpha) with elu's alpha 1."""
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 0.0:
        raise node.fail("alpha 0 divides by zero")
    return b.op("mul", b.op("elu", b.op("div", node.tensor(0), alpha), alpha=1.0), alpha)


@import_rule("ne", ONNX, "IsNaN")
def is_nan(b: Builder, node: OnnxNode) -> Any:
    x = node.tensor(0)
    return b.op("ne", x, x)


FLOAT32_MAX = 3.4028234663852886e38  # past it, a float32 is infinite: no inf literal in the NNEF text


@import_rule("gt", ONNX, "IsInf")
def is_inf(b: Builder, node: OnnxNode) -> Any:
    """x > max float32 (positive infinity), x < -max float32 (negative), |x| > max float32 (either)."""
    positive, negative = bool(node.attr("detect_positive", 1)), bool(node.attr("detect_negative", 1))
    x = node.tensor(0)
    if b.dtype(x) != "scalar":
        raise node.fail("IsInf of an integer tensor is not supported")
    if positive and negative:
        return b.op("gt", b.op("abs", x), FLOAT32_MAX)
    if positive:
        return b.op("gt", x, FLOAT32_MAX)
    if negative:
        return b.op("lt", x, -FLOAT32_MAX)
    return b.op("lt", b.op("abs", x), -1.0)  # neither: false everywhere (NaN included)


def _n_ary(op: str, mean: bool) -> Callable[[Builder, OnnxNode], Any]:
    def rule(b: Builder, node: OnnxNode) -> Any:
        total = _binary("add")(b, node)
        count = len(node.inputs)
        if not mean or count == 1:
            return total if count > 1 or isinstance(total, np.ndarray) else b.op("copy", total)
        return total / count if isinstance(total, np.ndarray) else b.op("div", total, float(count))
    rule.__name__ = op
    return rule


import_rule("add", ONNX, "Sum")(_n_ary("sum", mean=False))
import_rule("div", ONNX, "Mean")(_n_ary("mean", mean=True))


@import_rule("select", ONNX, "Shrink")
def shrink(b: Builder, node: OnnxNode) -> Any:
    """x + bias below -lambd, x - bias above lambd, 0 between."""
    x = node.tensor(0)
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    upper = b.op("select", b.op("gt", x, lambd), b.op("sub", x, bias), 0.0)
    return b.op("select", b.op("lt", x, -lambd), b.op("add", x, bias), upper)


@import_rule("sub", ONNX, "Mod")
def mod(b: Builder, node: OnnxNode) -> Any:
    """fmod 1: the remainder with the dividend's sign (C's fmod), x - y trunc(x / y); fmod 0 (integers only, as
    the operator says before opset 28): with the divisor's sign, folded when both inputs are known."""
    truncated = bool(node.only("fmod", (0, 1), 0))
    if node.known(0) and node.known(1):
        x, y = node.const(0), node.const(1)
        return np.fmod(x, y) if truncated else np.mod(x, y)
    x, y = broadcast_pair(b, node.tensor(0), node.tensor(1))
    if b.dtype(x) != "scalar":
        raise node.fail("Mod of integer tensors computed from the inputs is not supported (NNEF divides scalars)")
    if not truncated:
        raise node.fail("fmod 0 on floating-point tensors is invalid before opset 28 (set fmod 1)")
    ratio = b.op("div", x, y)
    whole = b.op("mul", b.op("sign", ratio), b.op("floor", b.op("abs", ratio)))
    return b.op("sub", x, b.op("mul", y, whole))
