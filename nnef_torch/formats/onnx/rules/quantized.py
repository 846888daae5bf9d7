"""ONNX import rules: quantization (QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul) as NNEF fake
quantization, graph.quant entries that `nnef_torch.load` turns into trainable `FakeQuantize` modules.

ONNX's Q and DQ are NNEF's `zero_point_linear_quantize` cut in two: Q computes the codes
clamp(round(x / scale) + zero_point, lo, hi), DQ maps them back, (q - zero_point) * scale. The mapping:

- Q -> DQ with the same parameters on a tensor x (the pattern of onnxruntime's QDQ format) is x's copy with a
  graph.quant entry `zero_point_linear_quantize(zero_point, scale, bits = 8, signed, symmetric = false)`
  (uint8: unsigned, int8: signed; the clamp range is the type's, as ONNX saturates). The copy keeps the float x
  unquantized for any other reader of x.
- DQ of a constant integer initializer (quantized weights, int32 biases) is a float variable holding the
  dequantized values, with the graph.quant entry on the variable: it trains as a quantization-aware weight and
  is saved with its entry (int32 biases as 32-bit signed entries).
- Per-axis parameters (a 1-D scale and zero point along `axis`) are per-channel entries. NNEF's quantization
  parameters broadcast along axis 0, so a tensor quantized along another axis is transposed to bring that axis
  first (a variable is stored so), quantized, and transposed back.
- QLinearConv and QLinearMatMul are dequantize -> Conv / MatMul -> quantize (the rules of Conv and MatMul run on
  the dequantized tensors); the bias of QLinearConv is int32 with scale x_scale * w_scale.
- A Q whose codes are read by anything but a matching DQ computes them as float values with NNEF operations,
  and a DQ of such values computes (q - zero_point) * scale: the values are right, but rounding passes no
  gradient there.

Refused, naming the node: zero points of other types than uint8 and int8 (int32 too for the DQ of a constant:
the biases onnxruntime writes), so int16, uint16, int4, uint4 and float8; blocked quantization (opset 21's
`block_size` other than 0); scales and zero points computed from the inputs (dynamic quantization).
Rounding halves: ONNX rounds them to even, NNEF away from zero, so a value exactly halfway between two codes
may land one code apart.

Limits: the quantizers' scales are buffers, as graph.quant entries load (`module.set_quantization(learnable=True)`
makes them Parameters); each DQ of one Q makes its own copy and quantizer, and each DQ of one initializer its own
variable; a saved module writes its weights as float .dat files with their entries (an imported module saves the
graph.quant it was read with; `quantization=` applies to exported torch modules).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np

from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.formats.names import label_base, label_problem
from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.formats.onnx.rules import nn
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
OP = "zero_point_linear_quantize"
TYPES = {"uint8": (8, False), "int8": (8, True)}  # code type -> (bits, signed)
CONSTANT_TYPES = {**TYPES, "int32": (32, True)}  # what DequantizeLinear reads from initializers


@dataclass(frozen=True)
class Params:
    """The parameters of one Q or DQ: scale and zero point (0-d, or 1-D along `axis`) and the code type."""

    scale: np.ndarray  # float32
    zero_point: np.ndarray  # int64, the shape of scale
    axis: int | None  # None: per tensor
    code: str  # numpy name of the code type

    @property
    def bits(self) -> int:
        return CONSTANT_TYPES[self.code][0]

    @property
    def signed(self) -> bool:
        return CONSTANT_TYPES[self.code][1]

    def same(self, other: Params) -> bool:
        return self.axis == other.axis and self.code == other.code and \
            np.array_equal(self.scale, other.scale) and np.array_equal(self.zero_point, other.zero_point)

    def spec(self) -> QuantSpec:
        """The graph.quant entry (per-channel parameters as lists)."""
        zero = self.zero_point.tolist() if self.axis is not None else int(self.zero_point)
        scale = [float(v) for v in self.scale] if self.axis is not None else float(self.scale)
        return QuantSpec(OP, {"zero_point": zero, "scale": scale, "bits": self.bits, "signed": self.signed,
                              "symmetric": False})

    def aligned(self, value: np.ndarray, rank: int) -> np.ndarray:
        """`value` (scale or zero point) shaped [1, .., C, .., 1] to broadcast along `axis` of a rank `rank`
        tensor."""
        return value if self.axis is None else value.reshape((1,) * self.axis + (-1,) + (1,) * (rank - 1 - self.axis))


@dataclass(frozen=True)
class Codes:
    """What a QuantizeLinear computed: the codes of `source` under `params`."""

    source: Any
    params: Params


# the codes tensors of each builder's QuantizeLinear nodes, by tensor name (a DequantizeLinear folds into them)
_CODES: WeakKeyDictionary[Builder, dict[str, Codes]] = WeakKeyDictionary()


def _params(node: OnnxNode, scale_at: int, zero_at: int, rank: int, axis: int | None, code: str | None,
            types: dict[str, tuple[int, bool]] = TYPES) -> Params:
    """Scale (input `scale_at`) and zero point (input `zero_at`, optional); `axis` is where a 1-D scale applies,
    `code` the code type when the zero point is absent (None: uint8)."""
    scale = _known(node, scale_at, "scale")
    if scale.dtype.kind != "f":
        raise node.fail(f"scale (input {scale_at}) has type {scale.dtype.name}; expected a float type")
    zero = _known(node, zero_at, "zero point") if node.has(zero_at) else None
    if zero is not None:
        code = zero.dtype.name
    code = code or "uint8"
    if code not in types:
        allowed = ", ".join(types)
        raise node.fail(f"quantized type {code} is not supported (supported: {allowed}); the zero point "
                        f"(input {zero_at}) or the codes give the type")
    if scale.ndim > 1 or (zero is not None and (zero.ndim > 1 or zero.size != scale.size)):
        found = list(scale.shape) if zero is None else f"{list(scale.shape)} and {list(zero.shape)}"
        raise node.fail(f"scale and zero point of shapes {found}: expected scalars or 1-D of one size "
                        "(per axis; blocked quantization is not supported)")
    zero_point = np.zeros(scale.shape, np.int64) if zero is None else zero.astype(np.int64).reshape(scale.shape)
    if scale.size == 1 or axis is None:  # one value is per tensor, in whatever shape
        if scale.size != 1:
            raise node.fail(f"a scale of {scale.size} values where one is expected (per tensor)")
        return Params(scale.reshape(()).astype(np.float32), zero_point.reshape(()), None, code)
    return Params(scale.astype(np.float32), zero_point, node.axis(axis, rank), code)


def _known(node: OnnxNode, position: int, what: str) -> np.ndarray:
    """Input `position` known while converting; a float initializer (a variable) counts, as its value."""
    value = node.raw(position)
    variable = next((v for v in node.builder.variables if v.name == value.name), None) \
        if isinstance(value, Ref) else None
    if variable is not None:
        return np.asarray(node.builder.data[variable.label])  # a scalar's shape is [1]: read as per tensor
    return node.const(position, what)


def _per_axis(node: OnnxNode, params: Params, shape: tuple[int, ...]) -> Params:
    """`params` checked against the shape of the tensor it applies to."""
    if not np.all(params.scale > 0):
        raise node.fail(f"scale must be positive, found {params.scale.min()}")
    if params.axis is not None and params.scale.size != shape[params.axis]:
        raise node.fail(f"{params.scale.size} scales along axis {params.axis} of a tensor of shape {list(shape)}")
    return params


def _check_block(node: OnnxNode) -> None:
    block = int(node.attr("block_size", 0))
    if block != 0:
        raise node.fail(f"blocked quantization (block_size = {block}) is not supported; per tensor and per axis "
                        "are")


# ------------------------------------------------------------------------------------------------- building blocks
def quantize(b: Builder, node: OnnxNode, x: Any, params: Params) -> Ref:
    """The codes of float tensor `x`, computed as float values; recorded so that a DQ with the same parameters
    folds them into a graph.quant entry on x (the computation is then dead and left out)."""
    x = node.as_tensor(x)
    rank = b.rank(x)
    params = _per_axis(node, params, b.shape(x))
    low, high = (-(2 ** (params.bits - 1)), 2 ** (params.bits - 1) - 1) if params.signed else (0, 2 ** params.bits - 1)
    scaled = b.op("div", x, node.as_tensor(params.aligned(params.scale, rank)))
    shifted = b.op("add", b.op("round", scaled), node.as_tensor(params.aligned(params.zero_point.astype(np.float32),
                                                                                rank)))
    codes = b.op("clamp", shifted, float(low), float(high))
    b.created.discard(codes.name)  # keeps its name, which `_CODES` knows it by
    _CODES.setdefault(b, {})[codes.name] = Codes(x, params)
    return codes


def dequantize(b: Builder, node: OnnxNode, q: Any, params: Params) -> Any:
    """The float values of codes `q`: a quantized copy of the tensor a matching Q read, a quantized variable for
    constant codes, else (q - zero_point) * scale computed."""
    if isinstance(q, np.ndarray):
        return _constant(b, node, q, params)
    found = _CODES.get(b, {}).get(q.name) if isinstance(q, Ref) else None
    params = _per_axis(node, params, b.shape(q))
    if found is not None and found.params.same(params):
        return _quantized(b, found.source, params)
    rank = b.rank(q)
    centred = b.op("sub", q, node.as_tensor(params.aligned(params.zero_point.astype(np.float32), rank)))
    return b.op("mul", centred, node.as_tensor(params.aligned(params.scale, rank)))


def _quantized(b: Builder, x: Ref, params: Params) -> Ref:
    """x with the graph.quant entry of `params` (per channel: along axis 0, x transposed to it and back)."""
    if params.axis in (None, 0):
        y = b.op("copy", x)
        b.quantization[y.name] = params.spec()
        return y
    order = _first(params.axis, b.rank(x))
    moved = b.op("transpose", x, axes=order)
    b.quantization[moved.name] = params.spec()
    return b.op("transpose", moved, axes=list(np.argsort(order).tolist()))


def _constant(b: Builder, node: OnnxNode, codes: np.ndarray, params: Params) -> Ref:
    """A float variable of the dequantized `codes` (moved so the quantization axis is first) with its entry."""
    if codes.dtype.name != params.code:
        raise node.fail(f"codes of type {codes.dtype.name} with a zero point of type {params.code}")
    params = _per_axis(node, params, codes.shape)
    rank = codes.ndim
    values = (codes.astype(np.int64) - params.aligned(params.zero_point, rank)).astype(np.float32) * \
        params.aligned(params.scale, rank)
    shape = codes.shape or (1,)
    order = _first(params.axis, rank) if params.axis not in (None, 0) else None
    stored = values.reshape(shape) if order is None else np.ascontiguousarray(values.transpose(order))
    variable = b.variable(_label(b, _weight_name(node, codes) or b.prefix or "dequantized"), "scalar", stored.shape,
                          stored)
    b.quantization[variable.name] = params.spec()
    if order is not None:
        return b.op("transpose", variable, axes=list(np.argsort(order).tolist()))
    return variable if codes.shape else b.op("reshape", variable, shape=[])


def _weight_name(node: OnnxNode, codes: np.ndarray) -> str | None:
    """The file's name of the initializer holding `codes`, less the '_quantized' onnxruntime's quantizer appends."""
    name = next((name for name, value in zip(node.input_names, node.inputs) if value is codes), None)
    return name[:-len("_quantized")] if name and name.endswith("_quantized") else name


def _first(axis: int, rank: int) -> list[int]:
    return [axis] + [d for d in range(rank) if d != axis]


def _label(b: Builder, name: str) -> str:
    """A label made from `name` (as `formats.names.Labels` makes them) that no variable has yet."""
    base = label_base(name)
    taken = {variable.label.lower() for variable in b.variables}
    label, count = base, 0
    while label.lower() in taken or label_problem(label) is not None:
        count += 1
        label = f"{base}_{count}"
    return label


# ------------------------------------------------------------------------------------------------- rules
@import_rule(OP, ONNX, "QuantizeLinear")
def quantize_linear(b: Builder, node: OnnxNode) -> Any:
    _check_block(node)
    node.attr("saturate", 1)  # applies to float8 codes only, which are refused
    rank = node.rank(0)
    output = node.attr("output_dtype", 0)
    code = {0: None, 2: "uint8", 3: "int8"}.get(int(output), f"ONNX type {output}")
    params = _params(node, 1, 2, rank, int(node.attr("axis", 1)), code)
    if output and code != params.code:
        raise node.fail(f"output_dtype {output} differs from the zero point's type {params.code}")
    return quantize(b, node, node.raw(0), params)


@import_rule(OP, ONNX, "DequantizeLinear")
def dequantize_linear(b: Builder, node: OnnxNode) -> Any:
    _check_block(node)
    q = node.raw(0)
    rank = node.rank(0)
    code = _code_of(b, q)
    types = CONSTANT_TYPES if isinstance(q, np.ndarray) else TYPES
    params = _params(node, 1, 2, rank, int(node.attr("axis", 1)), code, types)
    if code is not None and code != params.code:
        raise node.fail(f"codes of type {code} with a zero point of type {params.code}")
    return dequantize(b, node, q, params)


def _code_of(b: Builder, q: Any) -> str | None:
    """The code type of `q` where it is known: a constant's, or a QuantizeLinear's result."""
    if isinstance(q, np.ndarray):
        return q.dtype.name
    found = _CODES.get(b, {}).get(q.name) if isinstance(q, Ref) else None
    return found.params.code if found is not None else None


@import_rule("conv", ONNX, "QLinearConv")
def qlinear_conv(b: Builder, node: OnnxNode) -> Any:
    """dequantize(x), dequantize(w), int32 bias at scale x_scale * w_scale -> Conv -> quantize."""
    rank = node.rank(0)
    x_params = _params(node, 1, 2, rank, None, _code_of(b, node.raw(0)))
    w_params = _params(node, 4, 5, node.rank(3), 0, _code_of(b, node.raw(3)))
    y_params = _params(node, 6, 7, rank, None, None)
    inputs = [dequantize(b, node, node.raw(0), x_params), dequantize(b, node, node.raw(3), w_params)]
    if node.has(8):
        bias = node.const(8, "bias")
        if bias.dtype.name != "int32":
            raise node.fail(f"bias of type {bias.dtype.name}; expected int32")
        scale = (x_params.scale * w_params.scale).astype(np.float32)
        per_channel = scale.ndim == 1 and scale.size > 1
        bias_params = Params(scale if per_channel else scale.reshape(()), np.zeros(scale.shape, np.int64)
                             if per_channel else np.zeros((), np.int64), 0 if per_channel else None, "int32")
        inputs.append(dequantize(b, node, bias, bias_params))
    return quantize(b, node, nn.conv(b, _with_inputs(node, inputs)), y_params)


@import_rule("matmul", ONNX, "QLinearMatMul")
def qlinear_matmul(b: Builder, node: OnnxNode) -> Any:
    """dequantize(a) (per row), dequantize(b) (per column) -> MatMul -> quantize."""
    a_rank, b_rank = node.rank(0), node.rank(3)
    a_params = _params(node, 1, 2, a_rank, a_rank - 2 if a_rank >= 2 else None, _code_of(b, node.raw(0)))
    b_params = _params(node, 4, 5, b_rank, b_rank - 1, _code_of(b, node.raw(3)))
    y_params = _params(node, 6, 7, max(a_rank, b_rank), None, None)
    inputs = [dequantize(b, node, node.raw(0), a_params), dequantize(b, node, node.raw(3), b_params)]
    return quantize(b, node, nn.matmul(b, _with_inputs(node, inputs)), y_params)


def _with_inputs(node: OnnxNode, inputs: list[Any]) -> OnnxNode:
    """`node` seen with other inputs (its attributes, and the record of those read, shared)."""
    seen = copy.copy(node)
    seen.inputs = inputs
    return seen
