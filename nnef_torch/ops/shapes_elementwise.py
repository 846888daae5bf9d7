"""Shape rules of the elementwise operations (spec 4.2), the activation functions and the quantization ops.

Unary ops keep the shape of their argument. Binary and ternary ops broadcast NNEF-style (aligned from the left,
trailing singleton dimensions implied); the result rank is the largest argument rank. Functions whose NNEF name
is a Python keyword or builtin get a trailing underscore (`and_`, `min_`, `round_`); the attribute `lambda` of
`selu` is received as `lambda_` for the same reason.
"""
from __future__ import annotations

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import Shape, broadcast, check_broadcastable_to, fail


def _same(x: Shape) -> Shape:
    return tuple(x)


# Unary operations (spec 4.2.1, 4.2.4).

@shape_rule('copy')
def copy(x: Shape) -> Shape:
    return _same(x)


@shape_rule('neg')
def neg(x: Shape) -> Shape:
    return _same(x)


@shape_rule('rcp')
def rcp(x: Shape) -> Shape:
    return _same(x)


@shape_rule('exp')
def exp(x: Shape) -> Shape:
    return _same(x)


@shape_rule('erf')
def erf(x: Shape) -> Shape:
    """The error function: an operation real producers write (read leniently, see `nnef_torch.ir.deviations`)."""
    return _same(x)


@shape_rule('log')
def log(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sin')
def sin(x: Shape) -> Shape:
    return _same(x)


@shape_rule('cos')
def cos(x: Shape) -> Shape:
    return _same(x)


@shape_rule('tan')
def tan(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sinh')
def sinh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('cosh')
def cosh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('tanh')
def tanh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('asin')
def asin(x: Shape) -> Shape:
    return _same(x)


@shape_rule('acos')
def acos(x: Shape) -> Shape:
    return _same(x)


@shape_rule('atan')
def atan(x: Shape) -> Shape:
    return _same(x)


@shape_rule('asinh')
def asinh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('acosh')
def acosh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('atanh')
def atanh(x: Shape) -> Shape:
    return _same(x)


@shape_rule('abs')
def abs_(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sign')
def sign(x: Shape) -> Shape:
    return _same(x)


@shape_rule('not')
def not_(x: Shape) -> Shape:
    return _same(x)


@shape_rule('floor')
def floor(x: Shape) -> Shape:
    return _same(x)


@shape_rule('ceil')
def ceil(x: Shape) -> Shape:
    return _same(x)


@shape_rule('round')
def round_(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sqr')
def sqr(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sqrt')
def sqrt(x: Shape) -> Shape:
    return _same(x)


@shape_rule('rsqr')
def rsqr(x: Shape) -> Shape:
    return _same(x)


@shape_rule('rsqrt')
def rsqrt(x: Shape) -> Shape:
    return _same(x)


@shape_rule('log2')
def log2(x: Shape) -> Shape:
    return _same(x)


# Binary operations (spec 4.2.2, 4.2.4).

@shape_rule('add')
def add(x: Shape, y: Shape) -> Shape:
    return broadcast('add', ('x', x), ('y', y))


@shape_rule('sub')
def sub(x: Shape, y: Shape) -> Shape:
    return broadcast('sub', ('x', x), ('y', y))


@shape_rule('mul')
def mul(x: Shape, y: Shape) -> Shape:
    return broadcast('mul', ('x', x), ('y', y))


@shape_rule('div')
def div(x: Shape, y: Shape) -> Shape:
    return broadcast('div', ('x', x), ('y', y))


@shape_rule('pow')
def pow_(x: Shape, y: Shape) -> Shape:
    return broadcast('pow', ('x', x), ('y', y))


@shape_rule('lt')
def lt(x: Shape, y: Shape) -> Shape:
    return broadcast('lt', ('x', x), ('y', y))


@shape_rule('gt')
def gt(x: Shape, y: Shape) -> Shape:
    return broadcast('gt', ('x', x), ('y', y))


@shape_rule('le')
def le(x: Shape, y: Shape) -> Shape:
    return broadcast('le', ('x', x), ('y', y))


@shape_rule('ge')
def ge(x: Shape, y: Shape) -> Shape:
    return broadcast('ge', ('x', x), ('y', y))


@shape_rule('eq')
def eq(x: Shape, y: Shape) -> Shape:
    return broadcast('eq', ('x', x), ('y', y))


@shape_rule('ne')
def ne(x: Shape, y: Shape) -> Shape:
    return broadcast('ne', ('x', x), ('y', y))


@shape_rule('and')
def and_(x: Shape, y: Shape) -> Shape:
    return broadcast('and', ('x', x), ('y', y))


@shape_rule('or')
def or_(x: Shape, y: Shape) -> Shape:
    return broadcast('or', ('x', x), ('y', y))


@shape_rule('min')
def min_(x: Shape, y: Shape) -> Shape:
    return broadcast('min', ('x', x), ('y', y))


@shape_rule('max')
def max_(x: Shape, y: Shape) -> Shape:
    return broadcast('max', ('x', x), ('y', y))


# Ternary operations (spec 4.2.3, 4.2.4).

@shape_rule('select')
def select(condition: Shape, true_value: Shape, false_value: Shape) -> Shape:
    return broadcast('select', ('condition', condition), ('true_value', true_value), ('false_value', false_value))


@shape_rule('clamp')
def clamp(x: Shape, a: Shape, b: Shape) -> Shape:
    return broadcast('clamp', ('x', x), ('a', a), ('b', b))


# Activation functions (spec 4.9.1): compounds whose scalar attributes do not affect the shape.

@shape_rule('relu')
def relu(x: Shape) -> Shape:
    return _same(x)


@shape_rule('sigmoid')
def sigmoid(x: Shape) -> Shape:
    return _same(x)


@shape_rule('softplus')
def softplus(x: Shape) -> Shape:
    return _same(x)


@shape_rule('gelu')
def gelu(x: Shape) -> Shape:
    return _same(x)


@shape_rule('silu')
def silu(x: Shape) -> Shape:
    return _same(x)


@shape_rule('softabs')
def softabs(x: Shape, *, epsilon: float) -> Shape:
    return _same(x)


@shape_rule('elu')
def elu(x: Shape, *, alpha: float) -> Shape:
    return _same(x)


@shape_rule('selu')
def selu(x: Shape, *, alpha: float, lambda_: float) -> Shape:
    return _same(x)


@shape_rule('leaky_relu')
def leaky_relu(x: Shape, *, alpha: float) -> Shape:
    return _same(x)


@shape_rule('prelu')
def prelu(x: Shape, alpha: Shape) -> Shape:
    # Like the Khronos tools, alpha (a per-channel parameter) must broadcast to x and the result keeps x's shape.
    check_broadcastable_to('prelu', 'alpha', alpha, 'x', x)
    return _same(x)


# Quantization operations (spec 4.9.5 and the later Khronos stdlib): the result has the shape of x, and the
# range parameters must broadcast to it.

def _quantize(op: str, x: Shape, params: tuple[tuple[str, Shape], ...], bits: int) -> Shape:
    for name, shape in params:
        check_broadcastable_to(op, name, shape, 'x', x)
    if bits <= 0:
        fail(op, f"'bits' must be strictly positive, found {bits}")
    return _same(x)


@shape_rule('linear_quantize')
def linear_quantize(x: Shape, min: Shape, max: Shape, *, bits: int) -> Shape:
    return _quantize('linear_quantize', x, (('min', min), ('max', max)), bits)


@shape_rule('logarithmic_quantize')
def logarithmic_quantize(x: Shape, max: Shape, *, bits: int) -> Shape:
    return _quantize('logarithmic_quantize', x, (('max', max),), bits)


@shape_rule('min_max_linear_quantize')
def min_max_linear_quantize(x: Shape, min: Shape, max: Shape, *, bits: int, signed: bool, symmetric: bool) -> Shape:
    return _quantize('min_max_linear_quantize', x, (('min', min), ('max', max)), bits)


@shape_rule('zero_point_linear_quantize')
def zero_point_linear_quantize(x: Shape, zero_point: Shape, scale: Shape, *, bits: int, signed: bool,
                               symmetric: bool) -> Shape:
    return _quantize('zero_point_linear_quantize', x, (('zero_point', zero_point), ('scale', scale)), bits)
