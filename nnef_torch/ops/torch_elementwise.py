"""Torch implementations of the elementwise operations (spec 4.2 with the simplifiers of 4.2.4), the activation
functions (4.9.1) and the quantization ops (4.9.5 and the later Khronos stdlib forms).

Each op maps onto the fewest torch calls that compute its NNEF definition. Binary and ternary ops broadcast
NNEF-style (`aligned`: trailing singleton dimensions implied) and take a Python number on either side; when every
argument is a number the result is still a (0-d) tensor. Integer and logical tensors pass through where torch
allows (`add`, `min`, comparisons, `and`, ...).
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import torch_op
from nnef_torch.ops.torch_common import aligned, as_tensor, is_literal, static_dtype, static_shape


def _operands(*xs: Any) -> tuple[Any, ...]:
    """Arguments aligned NNEF-style; when all are literals the first becomes a tensor so the result is one."""
    xs = aligned(*xs)
    if all(is_literal(x) for x in xs):
        xs = (as_tensor(xs[0]),) + xs[1:]
    return xs


def round_half_away(x: Any) -> Any:
    """Round halfway cases away from zero (C `round`, as the Khronos executor does), exactly for finite |x| below
    half the largest float: trunc(2x) - trunc(x) = trunc(x) + trunc(2 * frac(x)). Its gradient is zero."""
    return torch.trunc(x * 2.0) - torch.trunc(x)


# Unary operations (spec 4.2.1); a literal argument becomes a 0-d tensor, so every op returns a tensor.

@torch_op('copy')
def copy(x: Any) -> torch.Tensor:
    return as_tensor(x).clone()


@torch_op('neg')
def neg(x: Any) -> torch.Tensor:
    return torch.neg(as_tensor(x))


@torch_op('rcp')
def rcp(x: Any) -> torch.Tensor:
    return torch.reciprocal(as_tensor(x))


@torch_op('exp')
def exp(x: Any) -> torch.Tensor:
    return torch.exp(as_tensor(x))


@torch_op('erf')
def erf(x: Any) -> torch.Tensor:
    return torch.erf(as_tensor(x))


@torch_op('log')
def log(x: Any) -> torch.Tensor:
    return torch.log(as_tensor(x))


@torch_op('sin')
def sin(x: Any) -> torch.Tensor:
    return torch.sin(as_tensor(x))


@torch_op('cos')
def cos(x: Any) -> torch.Tensor:
    return torch.cos(as_tensor(x))


@torch_op('tan')
def tan(x: Any) -> torch.Tensor:
    return torch.tan(as_tensor(x))


@torch_op('sinh')
def sinh(x: Any) -> torch.Tensor:
    return torch.sinh(as_tensor(x))


@torch_op('cosh')
def cosh(x: Any) -> torch.Tensor:
    return torch.cosh(as_tensor(x))


@torch_op('tanh')
def tanh(x: Any) -> torch.Tensor:
    return torch.tanh(as_tensor(x))


@torch_op('asin')
def asin(x: Any) -> torch.Tensor:
    return torch.asin(as_tensor(x))


@torch_op('acos')
def acos(x: Any) -> torch.Tensor:
    return torch.acos(as_tensor(x))


@torch_op('atan')
def atan(x: Any) -> torch.Tensor:
    return torch.atan(as_tensor(x))


@torch_op('asinh')
def asinh(x: Any) -> torch.Tensor:
    return torch.asinh(as_tensor(x))


@torch_op('acosh')
def acosh(x: Any) -> torch.Tensor:
    return torch.acosh(as_tensor(x))


@torch_op('atanh')
def atanh(x: Any) -> torch.Tensor:
    return torch.atanh(as_tensor(x))


@torch_op('abs')
def abs_(x: Any) -> torch.Tensor:
    return torch.abs(as_tensor(x))


@torch_op('sign')
def sign(x: Any) -> torch.Tensor:
    return torch.sign(as_tensor(x))


@torch_op('not')
def not_(x: Any) -> torch.Tensor:
    return torch.logical_not(as_tensor(x))


@torch_op('floor')
def floor(x: Any) -> torch.Tensor:
    return torch.floor(as_tensor(x))


@torch_op('ceil')
def ceil(x: Any) -> torch.Tensor:
    return torch.ceil(as_tensor(x))


@torch_op('round')
def round_(x: Any) -> torch.Tensor:
    """Halfway cases round away from zero, not to even as `torch.round` does."""
    return round_half_away(as_tensor(x))


# Simplifiers (spec 4.2.4): x ^ 2, x ^ 0.5, x ^ -2, x ^ -0.5, log(x) / log(2).

@torch_op('sqr')
def sqr(x: Any) -> torch.Tensor:
    return torch.square(as_tensor(x))


@torch_op('sqrt')
def sqrt(x: Any) -> torch.Tensor:
    return torch.sqrt(as_tensor(x))


@torch_op('rsqr')
def rsqr(x: Any) -> torch.Tensor:
    return torch.pow(as_tensor(x), -2.0)


@torch_op('rsqrt')
def rsqrt(x: Any) -> torch.Tensor:
    return torch.rsqrt(as_tensor(x))


@torch_op('log2')
def log2(x: Any) -> torch.Tensor:
    """The exact base-2 logarithm (the definition's log(x) / log(2.0) misses exact powers of two by an ulp)."""
    return torch.log2(as_tensor(x))


# Binary operations (spec 4.2.2): Python operators, so a literal may stand on either side.

@torch_op('add')
def add(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x + y


@torch_op('sub')
def sub(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x - y


@torch_op('mul')
def mul(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x * y


@torch_op('div')
def div(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x / y


@torch_op('pow')
def pow_(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x ** y


@torch_op('lt')
def lt(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x < y


@torch_op('gt')
def gt(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x > y


@torch_op('le')
def le(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x <= y


@torch_op('ge')
def ge(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x >= y


@torch_op('eq')
def eq(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x == y


@torch_op('ne')
def ne(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x != y


@torch_op('and')
def and_(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x & y


@torch_op('or')
def or_(x: Any, y: Any) -> torch.Tensor:
    x, y = _operands(x, y)
    return x | y


def _extremum(x: Any, y: Any, pick: Any, clamp_key: str) -> torch.Tensor:
    """min / max: `pick` (torch.minimum / maximum) of two tensors, one `torch.clamp` against a literal."""
    x, y = _operands(x, y)
    if is_literal(y):
        return torch.clamp(x, **{clamp_key: y})
    if is_literal(x):
        return torch.clamp(y, **{clamp_key: x})
    return pick(x, y)


@torch_op('min')
def min_(x: Any, y: Any) -> torch.Tensor:
    """select(x < y, x, y)."""
    return _extremum(x, y, torch.minimum, "max")


@torch_op('max')
def max_(x: Any, y: Any) -> torch.Tensor:
    """select(x > y, x, y)."""
    return _extremum(x, y, torch.maximum, "min")


# Ternary operations (spec 4.2.3, 4.2.4).

def _broadcast_shape(*xs: Any) -> tuple[int, ...]:
    shapes = [static_shape(x) for x in xs]
    rank = max(len(shape) for shape in shapes)
    return tuple(max(shape[i] if i < len(shape) else 1 for shape in shapes) for i in range(rank))


@torch_op('select')
def select(condition: Any, true_value: Any, false_value: Any) -> torch.Tensor:
    """torch.where; a literal condition picks its branch at load time (broadcast only if the other is larger)."""
    if is_literal(condition):
        chosen = true_value if condition else false_value
        if not is_literal(chosen) and static_shape(chosen) == _broadcast_shape(condition, true_value, false_value):
            return chosen
    condition, true_value, false_value = aligned(condition, true_value, false_value)
    if is_literal(condition):
        like = false_value if is_literal(true_value) else true_value
        condition = as_tensor(bool(condition), like=like, dtype=torch.bool)
    return torch.where(condition, true_value, false_value)


@torch_op('clamp')
def clamp(x: Any, a: Any, b: Any) -> torch.Tensor:
    """max(min(x, b), a): `a` wins where a > b, so literal bounds become clamp(x, a, max(a, b))."""
    x, a, b = aligned(x, a, b)
    if is_literal(x):
        x = as_tensor(x, like=b if is_literal(a) else a)
    return _clamp(x, a, b)


def _clamp(x: Any, a: Any, b: Any) -> Any:
    """clamp of a tensor with bounds already aligned to it."""
    if is_literal(a) and is_literal(b):
        return torch.clamp(x, a, a if a > b else b)
    return torch.clamp(torch.clamp(x, max=b), min=a)


# Activation functions (spec 4.9.1).

@torch_op('relu')
def relu(x: Any) -> torch.Tensor:
    return F.relu(x)


@torch_op('sigmoid')
def sigmoid(x: Any) -> torch.Tensor:
    return torch.sigmoid(x)


@torch_op('softplus')
def softplus(x: Any) -> torch.Tensor:
    """log(exp(x) + 1), computed without the overflow of the literal formula (it returns x above 20)."""
    return F.softplus(x)


@torch_op('gelu')
def gelu(x: Any) -> torch.Tensor:
    """The stdlib's sigmoid approximation x * sigmoid(1.702 x), not torch's erf gelu."""
    return x * torch.sigmoid(x * 1.702)


@torch_op('silu')
def silu(x: Any) -> torch.Tensor:
    return F.silu(x)


@torch_op('softabs')
def softabs(x: Any, *, epsilon: float) -> torch.Tensor:
    return torch.sqrt(torch.square(x) + epsilon)


@torch_op('elu')
def elu(x: Any, *, alpha: float = 1.0) -> torch.Tensor:
    return F.elu(x, alpha)


@torch_op('selu')
def selu(x: Any, *, alpha: float = 1.67326319, lambda_: float = 1.05070102) -> torch.Tensor:
    """lambda * elu(x, alpha) in one call (F.selu has fixed, slightly different constants)."""
    return torch.ops.aten.elu(x, alpha, lambda_, 1.0)


@torch_op('leaky_relu')
def leaky_relu(x: Any, *, alpha: float) -> torch.Tensor:
    return F.leaky_relu(x, alpha)


@torch_op('prelu')
def prelu(x: Any, alpha: Any) -> torch.Tensor:
    """select(x < 0, alpha * x, x): F.prelu when alpha is one value or one per channel (shape [1, C, 1...])."""
    if is_literal(alpha):
        return F.leaky_relu(x, alpha)
    shape, alpha_shape = static_shape(x), static_shape(alpha)
    if len(alpha_shape) <= len(shape):
        volume = math.prod(alpha_shape)
        if volume == 1:
            return F.prelu(x, alpha.reshape(1))
        per_channel = len(shape) >= 2 and len(alpha_shape) >= 2 and alpha_shape[1] == shape[1]
        if per_channel and volume == shape[1]:
            return F.prelu(x, alpha.reshape(volume))
    x, alpha = aligned(x, alpha)
    return torch.where(x < 0.0, alpha * x, x)


# Quantization (spec 4.9.5 and the later Khronos stdlib): forward values, rounding half away from zero.

@torch_op('min_max_linear_quantize')
def min_max_linear_quantize(x: Any, min: Any, max: Any, *, bits: int, signed: bool,
                            symmetric: bool) -> torch.Tensor:
    """round((clamp(x, min, max) - min) / (max - min) * r) / r * (max - min) + min, r = 2^bits - 1 - (signed and
    symmetric); the definition's offset p is subtracted and added back to an integer value, so it cancels."""
    r = float(2 ** bits - 1 - int(signed and symmetric))
    divisor = as_tensor(r, like=x, dtype=static_dtype(x))  # CUDA divides by a Python number as a product with 1 / r
    x, low, high = aligned(x, min, max)
    span = high - low
    q = round_half_away((_clamp(x, low, high) - low) / span * r)
    return q / divisor * span + low


@torch_op('linear_quantize')
def linear_quantize(x: Any, min: Any, max: Any, *, bits: int) -> torch.Tensor:
    return min_max_linear_quantize(x, min, max, bits=bits, signed=False, symmetric=False)


@torch_op('zero_point_linear_quantize')
def zero_point_linear_quantize(x: Any, zero_point: Any, scale: Any, *, bits: int, signed: bool,
                               symmetric: bool) -> torch.Tensor:
    """(clamp(round(x / scale) + z, lo, r) - z) * scale with r = 2^(bits-1) - 1 (signed) or 2^bits - 1,
    lo = 0 (unsigned), -r (signed symmetric) or -r - 1 (signed)."""
    dtype = static_dtype(x)
    x, zero_point, scale = aligned(x, zero_point, scale)
    z = float(zero_point) if is_literal(zero_point) else zero_point.to(dtype)
    r = float(2 ** (bits - 1) - 1 if signed else 2 ** bits - 1)
    low = 0.0 if not signed else (-r if symmetric else -r - 1.0)
    q = torch.clamp(round_half_away(x / scale) + z, low, r)
    return (q - z) * scale


@torch_op('logarithmic_quantize')
def logarithmic_quantize(x: Any, max: Any, *, bits: int) -> torch.Tensor:
    """sign(x) * 2 ^ round(clamp(log2|x|, m - r, m)) with m = ceil(log2(max)), r = 2^bits - 1."""
    r = float(2 ** bits - 1)
    x, high = aligned(x, max)
    if is_literal(high):
        m = float(math.ceil(math.log2(high))) if high > 0 else math.nan
    else:
        m = torch.ceil(torch.log2(high))
    q = round_half_away(torch.clamp(torch.log2(torch.abs(x)), m - r, m))
    return torch.sign(x) * torch.exp2(q)
