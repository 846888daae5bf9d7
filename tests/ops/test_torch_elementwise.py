"""Torch implementations of the elementwise ops, activations and quantization ops against the Khronos executor
(`nnef.Session`) where it runs the op, else against numpy references written from the stdlib definitions.

Each row of CASES is checked eagerly and traced; the rows of GRAD_CASES (differentiable ops, inputs kept away from
kinks and jumps) also go through `torch.autograd.gradcheck` in float64.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ops.torch_harness import (
    OpCase,
    assert_close,
    case_ids,
    check_case,
    gradcheck_case,
    run_eager,
    run_reference,
    run_traced,
)

import nnef_torch.ops.torch_elementwise  # noqa: F401  (registers the ops)

rng = np.random.default_rng(0)

CASES: list[OpCase] = []
GRAD_CASES: list[OpCase] = []
FUNCTION_CASES: list[OpCase] = []  # no one-op document can express these: checked eagerly and traced only


def row(op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, *, grad: bool = False,
        table: list[OpCase] = CASES, **options: Any) -> None:
    # Contiguous copies: the executor's binding reads a sliced (strided) array as if it were contiguous.
    inputs = {name: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v for name, v in inputs.items()}
    case = OpCase(op, inputs, attribs or {}, **options)
    table.append(case)
    if grad:
        GRAD_CASES.append(case)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def uniform(low: float, high: float, *shape: int) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def away_from_zero(*shape: int) -> np.ndarray:
    """Magnitudes in [0.2, 2) with random signs: no kink of abs / sign / relu within gradcheck's step."""
    return (uniform(0.2, 2.0, *shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def off_integers(*shape: int) -> np.ndarray:
    """Values in (-3, 3) at least 0.1 from any integer (floor / ceil jumps) and from halves (round jumps)."""
    return (rng.integers(-3, 3, shape) + rng.choice([0.15, 0.3, 0.7, 0.85], shape)).astype(np.float32)


def np_round(x: Any) -> Any:
    """Halfway cases away from zero, as the stdlib's `round` (not numpy's round-half-to-even)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def np_aligned(*xs: Any) -> list[Any]:
    """NNEF broadcasting: trailing singleton dimensions up to the largest rank."""
    rank = max(np.ndim(x) for x in xs)
    return [np.reshape(x, np.shape(x) + (1,) * (rank - np.ndim(x))) if isinstance(x, np.ndarray) else x
            for x in xs]


X = normal(2, 3, 4)
POSITIVE = uniform(0.2, 3.0, 2, 3, 4)
UNIT = uniform(-0.9, 0.9, 2, 3, 4)
NONZERO = away_from_zero(2, 3, 4)
CHANNEL = normal(1, 3)  # a per-channel [1, C] parameter against [N, C, W]

# Unary ops: the executor's float kernels.
for op, x in [("copy", X), ("neg", X), ("rcp", NONZERO), ("exp", X), ("log", POSITIVE), ("sin", X), ("cos", X),
              ("tan", UNIT), ("sinh", X), ("cosh", X), ("tanh", X), ("asin", UNIT), ("acos", UNIT), ("atan", X),
              ("asinh", X), ("acosh", POSITIVE + 1.1), ("atanh", UNIT), ("abs", NONZERO), ("sign", NONZERO),
              ("floor", off_integers(2, 3, 4)), ("ceil", off_integers(2, 3, 4)), ("round", off_integers(2, 3, 4)),
              ("sqr", X), ("sqrt", POSITIVE), ("rsqr", NONZERO), ("rsqrt", POSITIVE), ("log2", POSITIVE)]:
    row(op, {"x": x}, grad=True)
row("sign", {"x": np.array([-2.0, -0.0, 0.0, 3.0], np.float32)}, id="sign_zero")
row("abs", {"x": np.array([-2.0, 0.0, 3.0], np.float32)}, id="abs_zero")
row("copy", {"x": np.arange(6, dtype=np.int32).reshape(2, 3)}, id="copy_integer")
row("copy", {"x": X > 0}, id="copy_logical", ref=np.copy)  # the executor copies as float: heap corruption
row("not", {"x": X > 0})
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 8388609.0, -8388607.5, 0.0],
                  np.float32)
row("round", {"x": HALVES}, id="round_half_away_from_zero")  # std::round: 0.5 -> 1, 2.5 -> 3, -2.5 -> -3
row("log2", {"x": np.array([1.0, 2.0, 8.0, 1024.0, 8192.0, 0.25], np.float32)}, id="log2_powers_of_two",
    ref=lambda x: np.log2(x))  # exact; the executor's log(x) / log(2) gives 13.000001 for 8192

# Binary arithmetic: same shapes, NNEF (left-aligned) broadcasting, literals on either side.
for op in ("add", "sub", "mul", "div"):
    y = NONZERO if op == "div" else normal(2, 3, 4)
    row(op, {"x": X, "y": y}, grad=True)
    row(op, {"x": X, "y": CHANNEL}, id=f"{op}_broadcast_channel", grad=True)
    row(op, {"x": CHANNEL, "y": NONZERO}, id=f"{op}_broadcast_left", grad=True)
    row(op, {"x": X, "y": 1.5}, id=f"{op}_literal_right", grad=True)
    row(op, {"x": -2.0, "y": NONZERO}, id=f"{op}_literal_left", grad=True)
row("pow", {"x": POSITIVE, "y": X}, grad=True)
row("pow", {"x": POSITIVE, "y": 2.5}, id="pow_literal_exponent", grad=True)
row("pow", {"x": 2.0, "y": X}, id="pow_literal_base", grad=True)
row("pow", {"x": POSITIVE, "y": normal(2, 3)}, id="pow_broadcast", grad=True)

# Comparisons (ties included) and logical ops return logical tensors.
TIES = rng.integers(0, 3, (2, 3, 4)).astype(np.float32)
for op in ("lt", "gt", "le", "ge", "eq", "ne"):
    row(op, {"x": TIES, "y": rng.integers(0, 3, (2, 3, 4)).astype(np.float32)})
    row(op, {"x": TIES, "y": 1.0}, id=f"{op}_literal_right")
    row(op, {"x": 1.0, "y": TIES[:, :2]}, id=f"{op}_literal_left")
    row(op, {"x": TIES, "y": TIES[:, :, 0]}, id=f"{op}_broadcast")
B1, B2 = X > 0, normal(2, 3, 4) > 0
for op in ("and", "or"):
    row(op, {"x": B1, "y": B2})
    row(op, {"x": B1, "y": True}, id=f"{op}_literal_true")
    row(op, {"x": False, "y": B1}, id=f"{op}_literal_left")
    row(op, {"x": B1, "y": B2[:, :, 0]}, id=f"{op}_broadcast")

# min / max: select(x < y, x, y) and select(x > y, x, y).
for op in ("min", "max"):
    row(op, {"x": X, "y": normal(2, 3, 4)}, grad=True)
    row(op, {"x": X, "y": 0.25}, id=f"{op}_literal_right", grad=True)
    row(op, {"x": -0.25, "y": X}, id=f"{op}_literal_left", grad=True)
    row(op, {"x": X, "y": CHANNEL}, id=f"{op}_broadcast", grad=True)

# Integer tensors (the stdlib types these ops tensor<scalar>, so documents cannot use them, but custom code and
# tensor operators may) and all-literal arguments (a graph needs an input): numpy references, function only.
def function_row(op: str, inputs: dict[str, Any], **options: Any) -> None:
    row(op, inputs, table=FUNCTION_CASES, **options)


INT_X = rng.integers(-5, 5, (2, 3, 4))
INT_Y = rng.integers(-5, 5, (2, 3))
function_row("add", {"x": INT_X, "y": INT_Y}, id="add_integer", ref=lambda x, y: np.add(*np_aligned(x, y)))
function_row("add", {"x": INT_X, "y": 3}, id="add_integer_literal", ref=lambda x, y: x + y)
function_row("mul", {"x": INT_X, "y": INT_Y}, id="mul_integer", ref=lambda x, y: np.multiply(*np_aligned(x, y)))
function_row("min", {"x": INT_X, "y": INT_Y}, id="min_integer", ref=lambda x, y: np.minimum(*np_aligned(x, y)))
function_row("max", {"x": INT_X, "y": 0}, id="max_integer_literal", ref=lambda x, y: np.maximum(x, y))
function_row("min", {"x": 2, "y": INT_X}, id="min_integer_literal_left", ref=lambda x, y: np.minimum(x, y))
function_row("lt", {"x": INT_X, "y": INT_Y}, id="lt_integer", ref=lambda x, y: np.less(*np_aligned(x, y)))
function_row("eq", {"x": INT_X, "y": 0}, id="eq_integer_literal", ref=lambda x, y: x == y)
function_row("add", {"x": 1.5, "y": 2.0}, id="add_literals", ref=lambda x, y: np.float32(x + y))
function_row("sub", {"x": 1, "y": 3}, id="sub_integer_literals", ref=lambda x, y: np.int64(x - y))
function_row("pow", {"x": 2.0, "y": 3.0}, id="pow_literals", ref=lambda x, y: np.float32(x ** y))
function_row("lt", {"x": 1.0, "y": 2.0}, id="lt_literals", ref=lambda x, y: np.bool_(x < y))
function_row("and", {"x": True, "y": False}, id="and_literals", ref=lambda x, y: np.bool_(x and y))
function_row("max", {"x": 1.0, "y": -2.0}, id="max_literals", ref=lambda x, y: np.float32(max(x, y)))
function_row("neg", {"x": 2.0}, id="neg_literal", ref=lambda x: np.float32(-x))

# select(condition, true_value, false_value).
row("select", {"condition": B1, "true_value": X, "false_value": normal(2, 3, 4)}, grad=True)
row("select", {"condition": B1[:, :, 0], "true_value": X, "false_value": CHANNEL}, id="select_broadcast", grad=True)
row("select", {"condition": B1, "true_value": 1.0, "false_value": X}, id="select_literal_value", grad=True)
row("select", {"condition": B1, "true_value": 1.0, "false_value": -1.0}, id="select_literal_values")
row("select", {"condition": True, "true_value": X, "false_value": 0.0}, id="select_literal_condition", grad=True)
row("select", {"condition": False, "true_value": X, "false_value": CHANNEL[:, :1]}, id="select_literal_broadcast",
    ref=lambda c, t, f: np.broadcast_to(f[:, :, None], t.shape), grad=True)
row("select", {"condition": B1, "true_value": INT_X, "false_value": INT_Y}, id="select_integer",
    ref=lambda c, t, f: np.where(*np_aligned(c, t, f)))


def np_clamp(x: Any, a: Any, b: Any) -> Any:
    """max(min(x, b), a), with min / max as select(x < y, x, y) / select(x > y, x, y)."""
    x, a, b = np_aligned(x, a, b)
    low = np.where(x < b, x, b)
    return np.where(low > a, low, a).astype(np.float32)


row("clamp", {"x": X, "a": -0.5, "b": 0.75}, ref=np_clamp, grad=True)
row("clamp", {"x": X, "a": 0.5, "b": -0.5}, id="clamp_literal_bounds_crossed", ref=np_clamp)
row("clamp", {"x": X, "a": CHANNEL - 0.5, "b": CHANNEL + 0.5}, id="clamp_tensor_bounds", ref=np_clamp, grad=True)
row("clamp", {"x": X, "a": normal(2, 3), "b": normal(2, 3)}, id="clamp_tensor_bounds_crossed", ref=np_clamp)
row("clamp", {"x": X, "a": CHANNEL, "b": 1.0}, id="clamp_mixed_bounds", ref=np_clamp, grad=True)
row("clamp", {"x": 0.25, "a": CHANNEL, "b": 1.0}, id="clamp_literal_x", ref=np_clamp)

# Activations: the executor has kernels for these (gelu as x / (1 + exp(-1.702 x)), as the stdlib defines it).
for op, attribs in [("relu", {}), ("sigmoid", {}), ("softplus", {}), ("gelu", {}), ("silu", {}), ("elu", {}),
                    ("elu", {"alpha": 0.5}), ("selu", {}), ("selu", {"alpha": 1.5, "lambda_": 2.0}),
                    ("leaky_relu", {"alpha": 0.2}), ("leaky_relu", {"alpha": -0.5})]:
    suffix = "".join(f"_{key.rstrip('_')}{value}" for key, value in attribs.items())
    row(op, {"x": NONZERO * 3.0}, attribs, id=f"{op}{suffix}", grad=True)
# log(exp(x) + 1) without its float overflow (the executor returns inf from x = 89 on).
row("softplus", {"x": np.array([-100.0, -20.0, 0.0, 15.0, 25.0, 100.0], np.float32)}, id="softplus_large",
    ref=lambda x: np.logaddexp(np.float32(0.0), x))


def np_softabs(x: Any, epsilon: float) -> Any:
    return np.sqrt(np.square(x) + np.float32(epsilon))


def np_prelu(x: Any, alpha: Any) -> Any:
    x, alpha = np_aligned(x, alpha)
    return np.where(x < 0.0, alpha * x, x).astype(np.float32)


row("softabs", {"x": X}, {"epsilon": 0.01}, ref=np_softabs, grad=True)
row("prelu", {"x": NONZERO, "alpha": uniform(0.1, 0.5, 1, 3)}, id="prelu_per_channel", ref=np_prelu, grad=True)
row("prelu", {"x": NONZERO, "alpha": uniform(0.1, 0.5, 1, 3, 1)}, id="prelu_per_channel_rank3", ref=np_prelu,
    grad=True)
row("prelu", {"x": NONZERO, "alpha": np.array([[0.3]], np.float32)}, id="prelu_one_value", ref=np_prelu, grad=True)
row("prelu", {"x": NONZERO, "alpha": 0.2}, id="prelu_literal", ref=np_prelu, grad=True)
row("prelu", {"x": NONZERO, "alpha": uniform(0.1, 0.5, 2, 3, 4)}, id="prelu_elementwise", ref=np_prelu, grad=True)
row("prelu", {"x": NONZERO, "alpha": uniform(0.1, 0.5, 1, 1, 4)}, id="prelu_last_axis", ref=np_prelu, grad=True)
row("prelu", {"x": NONZERO[0, 0], "alpha": uniform(0.1, 0.5, 4)}, id="prelu_rank1", ref=np_prelu, grad=True)


# Quantization: numpy from the stdlib bodies (the executor runs none of them), in float32 like the executor.

def np_min_max_linear_quantize(x: Any, min: Any, max: Any, bits: int, signed: bool, symmetric: bool) -> Any:
    x, min, max = np_aligned(x, np.float32(min), np.float32(max))
    r = np.float32(2 ** bits - 1 - int(signed and symmetric))
    z = np_clamp(x, min, max)
    p = np.float32(2 ** (bits - 1) - int(symmetric) if signed else 0)
    q = np_round((z - min) / (max - min) * r) - p
    return ((q + p) / r * (max - min) + min).astype(np.float32)


def np_linear_quantize(x: Any, min: Any, max: Any, bits: int) -> Any:
    return np_min_max_linear_quantize(x, min, max, bits, False, False)


def np_zero_point_linear_quantize(x: Any, zero_point: Any, scale: Any, bits: int, signed: bool,
                                  symmetric: bool) -> Any:
    x, zero_point, scale = np_aligned(x, zero_point, np.float32(scale))
    z = np.float32(zero_point) if np.ndim(zero_point) == 0 else zero_point.astype(np.float32)
    s = np_round(x / scale) + z
    r = np.float32(2 ** (bits - 1) - 1 if signed else 2 ** bits - 1)
    low = np.float32(0.0 if not signed else (-r if symmetric else -r - 1.0))
    q = np_clamp(s, low, r)
    return ((q - z) * scale).astype(np.float32)


def np_logarithmic_quantize(x: Any, max: Any, bits: int) -> Any:
    x, max = np_aligned(x, np.float32(max))
    with np.errstate(divide="ignore"):
        m = np.ceil(np.log2(max))  # exact log2 (see log2_powers_of_two)
        r = np.float32(2 ** bits - 1)
        q = np_round(np_clamp(np.log2(np.abs(x)), m - r, m))
    return (np.sign(x) * np.float32(2.0) ** q).astype(np.float32)


WIDE = (normal(2, 3, 4) * 2.0).astype(np.float32)
QUARTERS = (rng.integers(-24, 24, (2, 3, 4)) * 0.25).astype(np.float32)  # x / 0.5 hits exact halves
LOW, HIGH = uniform(-1.5, -0.5, 1, 3), uniform(0.5, 1.5, 1, 3)
row("linear_quantize", {"x": WIDE, "min": -1.0, "max": 1.0}, {"bits": 4}, ref=np_linear_quantize)
row("linear_quantize", {"x": WIDE, "min": LOW, "max": HIGH}, {"bits": 3}, id="linear_quantize_per_channel",
    ref=np_linear_quantize)
row("linear_quantize", {"x": QUARTERS, "min": 0.0, "max": 15.0}, {"bits": 4}, id="linear_quantize_halves",
    ref=np_linear_quantize)
for signed, symmetric in [(False, False), (True, False), (True, True), (False, True)]:
    attribs = {"bits": 8, "signed": signed, "symmetric": symmetric}
    name = f"{'signed' if signed else 'unsigned'}{'_symmetric' if symmetric else ''}"
    row("min_max_linear_quantize", {"x": WIDE, "min": -2.0, "max": 1.5}, attribs, id=f"min_max_{name}",
        ref=np_min_max_linear_quantize)
    row("min_max_linear_quantize", {"x": WIDE, "min": LOW, "max": HIGH}, dict(attribs, bits=4),
        id=f"min_max_{name}_per_channel", ref=np_min_max_linear_quantize)
    row("zero_point_linear_quantize", {"x": QUARTERS, "zero_point": 3, "scale": 0.5}, dict(attribs, bits=4),
        id=f"zero_point_{name}", ref=np_zero_point_linear_quantize)
    row("zero_point_linear_quantize",
        {"x": WIDE, "zero_point": rng.integers(-2, 3, (1, 3)), "scale": uniform(0.1, 0.4, 1, 3)},
        dict(attribs, bits=3), id=f"zero_point_{name}_per_channel", ref=np_zero_point_linear_quantize)
LOG_X = np.concatenate([WIDE.ravel(), [0.0, 1.5, -3.0, 2.0 ** -9, 100.0]]).astype(np.float32)
row("logarithmic_quantize", {"x": LOG_X, "max": 4.0}, {"bits": 3}, ref=np_logarithmic_quantize)
row("logarithmic_quantize", {"x": LOG_X, "max": 8192.0}, {"bits": 4}, id="logarithmic_quantize_power_of_two",
    ref=np_logarithmic_quantize)
row("logarithmic_quantize", {"x": WIDE, "max": uniform(0.5, 6.0, 1, 3)}, {"bits": 2},
    id="logarithmic_quantize_per_channel", ref=np_logarithmic_quantize)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_elementwise(case: OpCase) -> None:
    check_case(case)


@pytest.mark.parametrize("case", FUNCTION_CASES, ids=case_ids(FUNCTION_CASES))
def test_elementwise_function(case: OpCase) -> None:
    expected = run_reference(case)
    assert_close(run_eager(case), expected, case.tol, f"{case.name()} (eager)")
    assert_close(run_traced(case), expected, case.tol, f"{case.name()} (traced)")


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_elementwise_gradient(case: OpCase) -> None:
    gradcheck_case(case)
