"""Re-encoding a variable's .dat file in another layout: the current item types the Khronos tools write, or the NNEF
1.0.0 (seed) codes with their range in the header. Quantized data stays codes; the result is checked to hold the
same codes or values. tract's block-quantized files (Q4_0, Q8_1) are a current-layout vendor type: kept byte for
byte, and refused in the seed layout, which has no form for them. Pure functions over decoded tensors and bytes
(`nnef-torch convert` uses them)."""
from __future__ import annotations

import math

import numpy as np

from nnef_torch.errors import NNEFTensorFileError
from nnef_torch.format import tensor_file
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.format.tensor_file import TensorData

LAYOUTS = ("keep", "current", "seed")
CODE_READERS = ("zero_point_linear_quantize", "linear_quantize", "min_max_linear_quantize")  # read current codes
_SEED_LINEAR = ("linear_quantize", "min_max_linear_quantize")


def _fail(label: str, name: str, message: str) -> NNEFTensorFileError:
    return NNEFTensorFileError(f"tensor '{label}' (variable '{name}'): {message}")


def _seed_range(spec: QuantSpec | None) -> dict | None:
    """The seed header quantization equal to a graph.quant entry, or None where the seed layout cannot hold it
    (one unsigned min/max range over the whole tensor)."""
    if spec is None or spec.op not in _SEED_LINEAR:
        return None
    args = spec.args
    if args.get("signed", False) or args.get("symmetric", False):
        return None
    if isinstance(args["min"], list) or isinstance(args["max"], list):
        return None
    return {"op": "linear_quantize", "min": float(args["min"]), "max": float(args["max"]), "bits": int(args["bits"])}


def grid_values(codes: np.ndarray, quantization: dict) -> np.ndarray:
    """Seed-layout codes as float64 values exactly on their grid, so that encoding them gives the same codes."""
    bits = int(quantization["bits"])
    if quantization["op"] == "linear_quantize":
        low, high = float(np.float32(quantization["min"])), float(np.float32(quantization["max"]))
        return codes.astype(np.float64) / float((1 << bits) - 1) * (high - low) + low
    signed = bool(quantization["signed"])
    magnitude_bits = bits - 1 if signed else bits
    r, m = (1 << magnitude_bits) - 1, math.ceil(math.log2(float(np.float32(quantization["max"]))))
    unsigned = codes.astype(np.uint64)
    exponent = m - (r - (unsigned & np.uint64(r)).astype(np.int64))
    sign = np.where(unsigned >> np.uint64(magnitude_bits), -1.0, 1.0) if signed else 1.0
    return sign * np.ldexp(1.0, exponent)


def recode(data: TensorData, raw: bytes | bytearray, spec: QuantSpec | None, layout: str, *, label: str,
           name: str) -> bytes:
    """The bytes of a variable's tensor file in `layout` ('keep' copies them); quantized data stays codes.
    `label` (its .dat file) and `name` (the variable in graph.nnef and graph.quant) place the errors."""
    header = data.header
    codes_kept = header.kind == "quantized" and header.layout == "current" and layout != "seed"
    if codes_kept and (spec is None or spec.op not in CODE_READERS):
        have = f"its graph.quant entry is {spec.op}" if spec is not None else "graph.quant has no entry for it"
        raise _fail(label, name, f"the current layout stores quantized codes whose meaning comes from graph.quant, "
                                 f"but {have} (expected one of {', '.join(CODE_READERS)})")
    if layout == "keep" or (header.block is not None and layout == "current"):
        return bytes(raw)
    if header.block is not None:
        raise _fail(label, name, f"tract's {header.block} blocks have no seed-layout form; use --tensor-layout "
                                 "current or keep")
    if header.kind == "logical" and layout == "seed":
        raise _fail(label, name, "the seed layout has no logical item type; use --tensor-layout current or keep")
    if header.kind == "quantized":
        encoded = _recode_codes(data, label, name, spec, layout)
    else:
        encoded = tensor_file.encode(data.array, layout=layout)
    _check_same(data, tensor_file.decode(encoded), label, name)
    return encoded


def _recode_codes(data: TensorData, label: str, name: str, spec: QuantSpec | None, layout: str) -> bytes:
    """Quantized codes in `layout`: the same codes, with their meaning in the header (seed) or graph.quant (current)."""
    header, codes = data.header, data.codes
    assert codes is not None and header.quantization is not None  # decode gives both for quantized files
    if header.layout == "current" and layout == "current":
        return tensor_file.encode(codes, quantization={"signed": header.signed})
    if header.layout == "current":  # codes -> the seed header's range
        quantization = _seed_range(spec)
        if quantization is None:
            entry = f"follow {spec.op}{_args(spec)}" if spec is not None else "have no graph.quant entry"
            raise _fail(label, name, f"its codes {entry}, which the seed layout cannot express (it holds one "
                                     "unsigned min/max range per tensor); keep the current layout")
        return tensor_file.encode(grid_values(codes, quantization), quantization=quantization, layout="seed")
    wanted = header.quantization
    if layout == "seed":
        return tensor_file.encode(grid_values(codes, wanted), quantization=wanted, layout="seed")
    # seed codes -> current codes, read back through a graph.quant entry that must say the same
    if wanted["op"] != "linear_quantize":
        raise _fail(label, name, "logarithmic codes have no current-layout form; keep the seed layout")
    found = _seed_range(spec)
    if found is None or any(np.float32(found[key]) != np.float32(wanted[key]) for key in ("min", "max", "bits")):
        entry = f'"{name}": linear_quantize(min = {wanted["min"]}, max = {wanted["max"]}, ' \
                f'bits = {wanted["bits"]});'
        raise _fail(label, name, "the current layout stores codes whose range comes from graph.quant; it needs "
                                 f"the entry {entry} (add it with --quant) or keep the seed layout")
    return tensor_file.encode(codes, quantization={"signed": False})


def _args(spec: QuantSpec) -> str:
    return "(" + ", ".join(f"{key} = {value}" for key, value in spec.args.items()) + ")"


def _check_same(before: TensorData, after: TensorData, label: str, name: str) -> None:
    """The re-encoded file holds the same codes (quantized) or the same values and dtype."""
    if before.codes is not None:
        old, new = before.codes, after.codes
    else:
        old, new = before.array, after.array
        if old.dtype != new.dtype:
            new = None
    same = new is not None and old.shape == new.shape and np.array_equal(old, new, equal_nan=old.dtype.kind == "f")
    if not same:
        raise _fail(label, name, "re-encoding changed the stored values (a bug in nnef_torch)")


__all__ = ["CODE_READERS", "LAYOUTS", "grid_values", "recode"]
