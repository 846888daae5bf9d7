"""Fake quantization -> NNEF quantization: the export rule of `torch.ops.nnef_torch.fake_quantize` and the passes
that write weights quantized.

By default a fake quantizer becomes a graph.quant entry on the tensor it quantizes; the node's value is that same
tensor. When the tensor is also read unquantized (another user, an alias, a graph output), is a graph input (a
consumer computing in quantized types, tract, would then expect quantized inputs; except an imported document's
input that its own graph.quant quantizes, `exporter/naming.py`) or already has an entry, a `copy` is written and
the entry goes on the copy. The parameters (zero point and scale, or the range) are folded
to numbers from the module's state; their variables are left out of the graph when nothing else reads them.

Options (`QuantExport`, or a dict of its fields, given as `quantization=` to `nnef_torch.export` / `save`):

- `op`: write every entry in one form. zero_point <-> min_max forms describe the same grid: min = (lo - z) * s,
  max = (hi - z) * s with lo..hi the code range, and back s = (max - min) / r, z = lo - min / s (only when zero
  is a grid point, else an error). linear_quantize is min_max_linear_quantize unsigned: a signed symmetric
  quantizer (2^b - 1 levels) has no linear_quantize form. The forms round differently at exact halfway points:
  zero_point rounds x / s half away from zero, the min/max forms round (x - min) / step half up, so a negative x
  exactly halfway between two grid points goes to the other neighbour (and float rounding of the converted
  parameters can move points within an ulp).
- `inline`: write the quantization ops in graph.nnef instead (per-channel parameters as `constant`, or as the
  module's own variables). For target="tract", graph.quant entries are written only with weights="quantized"
  (tract computes in its quantized types, one scale per tensor); otherwise each quantizer is written as the
  arithmetic of its definition, exact in float (`quantization_tract.py`).
- `weights`: "float" keeps .dat files float. "quantized" stores variables with a zero_point / linear entry as
  integer codes (8-bit containers up to 8 bits, 16 or 32 beyond; signed per the entry), and gives the float bias
  of a conv / deconv / linear whose input and filter have zero_point entries the entry
  zero_point_linear_quantize(zero_point = 0, scale = s_in * s_w, bits = 32, signed = true) with int32 codes.
  "seed" stores them in the seed spec's quantized layout (one linear or logarithmic range per tensor).
- `block_weights`: "q4_0" stores each float variable that only `linear` reads as its filter (or `matmul` as its B
  with transposeB), of rank >= 2 with rows (shape[1:]) of a multiple of 32 values and no graph.quant entry, as
  tract's Q4_0 blocks quantized min-max from its value (`format/block_quant.py`), 4.5 bits per weight.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.emitter import Emitter, Unmappable
from nnef_torch.exporter.quantization_tract import per_channel, quantize_inline
from nnef_torch.format.quant_file import QuantSpec, print_quantization
from nnef_torch.importer.weights import Storage, block_storage
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.ops.registry import export_rule
from nnef_torch.quant.functional import OPS, zero_point_range
from nnef_torch.quant.modules import FakeQuantize
from nnef_torch.quant.prepare import known_fields

WEIGHTS = ("float", "quantized", "seed")
BLOCK_WEIGHTS = ("q4_0",)  # tract 0.23 also reads Q8_1 but has no matmul kernel for it
# the tensor parameters of each op (in order) and its attributes
PARAMS = {"zero_point_linear_quantize": ("zero_point", "scale"), "min_max_linear_quantize": ("min", "max"),
          "linear_quantize": ("min", "max"), "logarithmic_quantize": ("max",)}
FLAGS = {"zero_point_linear_quantize": ("bits", "signed", "symmetric"),
         "min_max_linear_quantize": ("bits", "signed", "symmetric"), "linear_quantize": ("bits",),
         "logarithmic_quantize": ("bits",)}
LINEAR = ("zero_point_linear_quantize", "min_max_linear_quantize", "linear_quantize")
BIASED = ("conv", "deconv", "linear")  # ops whose bias gets a 32-bit entry when weights are stored quantized


@dataclass(frozen=True)
class QuantExport:
    """How fake quantization is exported: `op` (None: each quantizer's own form, or one of the four quantization
    op names), `inline` (ops in graph.nnef instead of graph.quant), `weights` ("float", "quantized" or "seed")."""

    op: str | None = None
    inline: bool = False
    weights: str = "float"
    block_weights: str | None = None

    def __post_init__(self) -> None:
        if self.block_weights is not None and self.block_weights not in BLOCK_WEIGHTS:
            raise ExportError(f"quantization block_weights must be None or one of {', '.join(BLOCK_WEIGHTS)}, not "
                              f"{self.block_weights!r}")
        if self.op is not None and self.op not in OPS:
            raise ExportError(f"quantization op must be None or one of {', '.join(OPS)}, not {self.op!r}")
        if self.weights not in WEIGHTS:
            raise ExportError(f"quantization weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}")
        if self.inline and self.weights != "float":
            raise ExportError(f"weights={self.weights!r} stores weights by their graph.quant entries, and "
                              "inline=True writes none: use one or the other")


def quant_options(value: Any) -> QuantExport:
    """`quantization=` as given to export / save: None, a dict of QuantExport fields, or a QuantExport."""
    if value is None:
        return QuantExport()
    if isinstance(value, QuantExport):
        return value
    if isinstance(value, Mapping):
        return QuantExport(**known_fields(QuantExport, value, "quantization option", ExportError))
    raise ExportError(f"quantization must be None, a dict or a QuantExport, not {type(value).__name__}")


def check_calibrated(module: torch.nn.Module) -> None:
    """ExportError naming every nnef_torch FakeQuantize still observing: its parameters change on every call."""
    if not isinstance(module, torch.nn.Module):
        return  # tracing reports it
    observing = [name or "(the module)" for name, m in module.named_modules()
                 if isinstance(m, FakeQuantize) and m.observing and m.observer is not None]
    if observing:
        raise ExportError(f"{len(observing)} fake quantizer(s) still observing: finish calibration first (set "
                          "`observing = False`), so that their ranges are fixed numbers:",
                          [f"'{name}'" for name in observing])


# ---------------------------------------------------------------------------------------------- the export rule

@export_rule("zero_point_linear_quantize", "nnef_torch.fake_quantize.default")
def fake_quantize(e: Emitter, x: Any, a: Any, b: Any, op: str, bits: int, signed: bool, symmetric: bool,
                  grad_scale: float = 1.0) -> Any:
    """A graph.quant entry on x (or on a copy of it), or with `inline` the quantization op itself."""
    if op not in OPS:
        raise Unmappable(f"unknown quantization op {op!r}")
    if not isinstance(x, Ref) or e.dtype(x) != "scalar":
        raise Unmappable("fake quantization of a non-float tensor has no NNEF form")
    options = e.quant_options or QuantExport()
    nodes = dict(zip(PARAMS[op], e.node.args[1:3]))
    given = dict(zip(PARAMS[op], (a, b)))
    values = {name: _fold(e, node, name, e.shape(x)) for name, node in nodes.items()}
    flags = dict(zip(("bits", "signed", "symmetric"), (int(bits), bool(signed), bool(symmetric))))
    spec = QuantSpec(op, {**values, **{key: flags[key] for key in FLAGS[op]}})
    if options.op is not None and options.op != op:
        spec, given = convert_spec(spec, options.op), {}
    if e.target == "tract" and (options.inline or options.weights == "float" or per_channel(spec)):
        return quantize_inline(e, x, spec, options.weights)  # the form tract reads (quantization_tract.py)
    if options.inline:
        return _inline(e, x, spec, given)
    if _read_elsewhere(e, x):
        x = e.op("copy", x)
    e.quantization[x.name] = spec
    return x


def _fold(e: Emitter, node: Any, name: str, shape: tuple[int, ...]) -> Any:
    """A parameter as a graph.quant value: a number, or a per-channel list (a vector along axis 0)."""
    if not isinstance(node, torch.fx.Node):
        return node
    try:
        value = e.fold(node)
    except Unmappable as why:
        raise Unmappable(f"its {name} cannot be folded to numbers: {why}") from None
    value = torch.as_tensor(value).detach().cpu()
    if value.dim() > 1 or (value.dim() == 1 and len(shape) > 0 and value.shape[0] not in (1, shape[0])):
        raise Unmappable(f"its {name} has shape {list(value.shape)}: NNEF quantization parameters are numbers or "
                         f"per-channel vectors along axis 0 (extent {shape[0] if shape else 1} here)")
    if not torch.isfinite(value.double()).all():
        raise Unmappable(f"its {name} is not finite ({value.tolist()})")
    if name == "zero_point" and value.is_floating_point() and not torch.equal(value, torch.round(value)):
        raise Unmappable(f"its zero point {value.tolist()} is not a whole number")
    value = value.to(torch.int64 if name == "zero_point" else torch.float32)
    return value.tolist() if value.dim() else value.item()


def _read_elsewhere(e: Emitter, x: Ref) -> bool:
    """Whether an entry on x itself would also quantize reads of x that the module makes unquantized, or x is a
    graph input (unless an imported document, traced, has its own entry on this input of its own)."""
    source = e.node.args[0]
    external = any(external.name == x.name for external in e.externals)
    if external and e.document_tensor is not None and e.document_tensor(e.node) == x.name:
        external = False
    return len(source.users) > 1 or x.name in e.shared or x.name in e.quantization or external


def _inline(e: Emitter, x: Ref, spec: QuantSpec, given: dict[str, Any]) -> Ref:
    tensors = []
    for name in PARAMS[spec.op]:
        value = spec.args[name]
        if not isinstance(value, list):
            tensors.append(value)
            continue
        kind = "integer" if name == "zero_point" else "scalar"
        ref = given.get(name)
        if isinstance(ref, Ref) and e.dtype(ref) == kind and e.shape(ref) == (len(value),):
            tensors.append(ref)  # the module's own variable (or the ops computing it from variables)
        else:
            dtype = torch.int64 if kind == "integer" else torch.float32
            tensors.append(e.constant(torch.tensor(value, dtype=dtype), f"{e.node.name}/{name}"))
    return e.op(spec.op, x, *tensors, **{key: spec.args[key] for key in FLAGS[spec.op]})


# ------------------------------------------------------------------------------------------------ conversions

def _array(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def _value(array: np.ndarray, integer: bool = False) -> Any:
    """A numpy parameter back as a graph.quant value (float32-exact numbers, or integers)."""
    array = np.rint(array).astype(np.int64) if integer else array.astype(np.float32)
    return array.tolist() if array.ndim else array.item()


def convert_spec(spec: QuantSpec, op: str) -> QuantSpec:
    """`spec` written as `op` (same grid; see the module docstring for exactness); Unmappable where impossible."""
    if spec.op == op:
        return spec
    if "logarithmic_quantize" in (spec.op, op):
        raise Unmappable(f"{spec.op} cannot be written as {op}: logarithmic and linear grids differ")
    bits = int(spec.args["bits"])
    signed, symmetric = bool(spec.args.get("signed", False)), bool(spec.args.get("symmetric", False))
    if spec.op == "zero_point_linear_quantize":
        lo, hi = zero_point_range(bits, signed, symmetric)
        z, s = _array(spec.args["zero_point"]), _array(spec.args["scale"])
        low, high = (lo - z) * s, (hi - z) * s
    else:
        low, high = _array(spec.args["min"]), _array(spec.args["max"])
    if op == "linear_quantize":
        if signed and symmetric:
            raise Unmappable(f"{spec.op} signed and symmetric has 2^bits - 1 levels, linear_quantize 2^bits: use "
                             "op='min_max_linear_quantize' or 'zero_point_linear_quantize'")
        return QuantSpec(op, {"min": _value(low), "max": _value(high), "bits": bits})
    if op == "min_max_linear_quantize":
        return QuantSpec(op, {"min": _value(low), "max": _value(high), "bits": bits, "signed": signed,
                              "symmetric": symmetric})
    r = 2.0 ** bits - 1 - float(signed and symmetric)
    scale = (high - low) / r
    lo = zero_point_range(bits, signed, symmetric)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = lo - low / scale
    if not (np.all(scale > 0) and np.all(np.abs(zero - np.rint(zero)) <= 1e-3)):
        raise Unmappable(f"{spec.op} range [{low.tolist()}, {high.tolist()}] has no zero point: 0 is not one of "
                         "its grid points, which zero_point_linear_quantize needs")
    return QuantSpec(op, {"zero_point": _value(zero, integer=True), "scale": _value(scale), "bits": bits,
                          "signed": signed, "symmetric": symmetric})


# --------------------------------------------------------------------------------------- weights in .dat files

def quant_text(graph: Graph) -> str | None:
    return print_quantization(graph.quantization) if graph.quantization else None


def store_weights(graph: Graph, data: Mapping[str, torch.Tensor], options: QuantExport
                  ) -> tuple[Graph, dict[str, Storage]]:
    """How each variable's .dat is written (label -> Storage; float when absent), and the graph with the bias
    entries that `weights="quantized"` adds."""
    blocks = block_weights(graph, options.block_weights) if options.block_weights is not None else {}
    if options.weights == "float" or not graph.quantization:
        return graph, blocks
    entries = dict(graph.quantization)
    if options.weights == "quantized":
        entries.update(_bias_entries(graph, entries))
    storage: dict[str, Storage] = {}
    for variable in graph.signature.variables:
        spec = entries.get(variable.name)
        if spec is None or variable.dtype != "scalar":
            continue
        where = f"variable '{variable.label}'"
        if options.weights == "quantized":
            stored = _codes_storage(spec)
        else:
            stored = _seed_storage(spec, data[variable.label], where)
        if stored is not None:
            storage[variable.label] = stored
    return dataclasses.replace(graph, quantization=entries), {**blocks, **storage}


def block_weights(graph: Graph, item_type: str) -> dict[str, Storage]:
    """label -> block Storage for each variable tract can read as `item_type` blocks (see `block_weights` above)."""
    uses: dict[str, list[bool]] = {}
    for op in graph.operations:
        for key, value in op.inputs.items():
            for ref in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(ref, Ref):
                    uses.setdefault(ref.name, []).append(
                        (op.name == "linear" and key == "filter")
                        or (op.name == "matmul" and key == "B" and bool(op.attribs.get("transposeB"))))
    found: dict[str, Storage] = {}
    for variable in graph.signature.variables:
        shape = variable.shape
        read = uses.get(variable.name, [])
        if (variable.dtype == "scalar" and read and all(read) and variable.name not in graph.outputs
                and variable.name not in graph.quantization and len(shape) >= 2
                and int(np.prod(shape[1:])) % 32 == 0):
            found[variable.label] = block_storage(item_type)
    return found


def _codes_storage(spec: QuantSpec) -> Storage | None:
    if spec.op not in LINEAR:
        return None  # logarithmic codes have no integer layout: stays float
    bits = int(spec.args["bits"])
    signed = bool(spec.args.get("signed", False))
    width = next(w for w in (8, 16, 32, 64) if w >= bits)
    return Storage(np.dtype(f"{'i' if signed else 'u'}{width // 8}"), "current", {"signed": signed}, spec)


def _seed_storage(spec: QuantSpec, values: torch.Tensor, where: str) -> Storage:
    """The seed layout's header quantization holding the entry's grid (one range per tensor)."""
    if any(isinstance(spec.args[name], list) for name in PARAMS[spec.op]):
        raise ExportError(f"{where}: the seed layout stores one range per tensor, and its {spec.op} entry is "
                          "per-channel; use weights='quantized'")
    bits = int(spec.args["bits"])
    if spec.op == "logarithmic_quantize":
        if bool((values == 0).any()):
            raise ExportError(f"{where} holds zeros, which the seed layout's logarithmic codes cannot represent "
                              "(logarithmic_quantize keeps them)")
        signed = bool((values < 0).any())  # the seed layout spends one bit on the sign
        return Storage(np.dtype(np.float32), "seed", {"op": "logarithmic_quantize", "max": spec.args["max"],
                                                      "bits": bits + int(signed), "signed": signed})
    try:
        linear = convert_spec(spec, "linear_quantize")
    except Unmappable as why:
        raise ExportError(f"{where} cannot be stored in the seed layout: {why}") from None
    return Storage(np.dtype(np.float32), "seed", {"op": "linear_quantize", **linear.args})


def _bias_entries(graph: Graph, entries: Mapping[str, QuantSpec]) -> dict[str, QuantSpec]:
    """32-bit entries (scale s_in * s_w, zero point 0) for float biases of conv / deconv / linear ops whose input
    and filter have zero_point entries."""
    producers = {ref.name: op for op in graph.operations for ref in op.output_refs()}
    reads: dict[str, int] = {}
    for op in graph.operations:
        for ref in op.input_refs():
            reads[ref.name] = reads.get(ref.name, 0) + 1
    found: dict[str, QuantSpec] = {}
    for op in graph.operations:
        if op.name not in BIASED:
            continue
        given, weight, bias = (op.inputs.get(key) for key in ("input", "filter", "bias"))
        specs = [entries.get(ref.name) if isinstance(ref, Ref) else None for ref in (given, weight)]
        if any(spec is None or spec.op != "zero_point_linear_quantize" for spec in specs):
            continue
        variable = _source_variable(bias, producers, reads)
        if variable is None or variable in entries or variable in found:
            continue
        s_in, s_w = _array(specs[0].args["scale"]), _array(specs[1].args["scale"])
        if s_in.ndim or (s_w.ndim and (op.name == "deconv" or s_w.shape[0] != graph.tensors[variable].shape[-1])):
            continue  # the product is not one scale per output channel
        found[variable] = QuantSpec("zero_point_linear_quantize", {
            "zero_point": 0, "scale": _value(s_in * s_w), "bits": 32, "signed": True, "symmetric": False})
    return found


def _source_variable(ref: Any, producers: Mapping[str, Operation], reads: Mapping[str, int]) -> str | None:
    """The float variable that `ref` is, through unsqueeze / reshape, when nothing else reads it on the way."""
    while isinstance(ref, Ref) and reads.get(ref.name, 0) == 1:
        op = producers.get(ref.name)
        if op is None:
            return None
        if op.name == "variable":
            return ref.name if op.dtype == "scalar" else None
        if op.name not in ("unsqueeze", "reshape"):
            return None
        ref = op.inputs.get("input")
    return None


__all__ = ["BLOCK_WEIGHTS", "QuantExport", "block_weights", "check_calibrated", "convert_spec", "quant_options",
           "quant_text", "store_weights"]
