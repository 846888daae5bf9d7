"""Tensor files <-> torch tensors for the variables of an imported model.

Loading keeps copies out: a byte-aligned .dat is decoded as a view of the file's bytes, which become the tensor's
storage; the tensor is then moved to its device and dtype one variable at a time, so a model bound for another
device never has all of its data on the host at once. Quantized data is dequantized into float values (the seed
layout by its header, the current layout's integer codes by the variable's graph.quant entry) and quantized
again the same way when saved. tract's block-quantized weights (Q4_0, Q8_1) load as the float32 values tract
computes and are saved as the same item type: the file's own bytes while the values are unchanged, else quantized
again min-max from the current values (`format/block_quant.py`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from nnef_torch.errors import Location, NNEFQuantizationError
from nnef_torch.format import tensor_file
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.format.tensor_file import TensorData

_WIDENED = {np.dtype("uint16"): np.int32, np.dtype("uint32"): np.int64, np.dtype("uint64"): np.int64}
_DEFAULTS = {"scalar": torch.float32, "integer": torch.int64, "logical": torch.bool}


@dataclass(frozen=True)
class Storage:
    """How a variable was stored, so that saving writes it back the same way."""

    dtype: np.dtype  # the item dtype written for unquantized data
    layout: str = "current"
    quantization: dict[str, Any] | None = None  # seed header quantization, or {'signed': ...} for codes
    spec: QuantSpec | None = None  # the graph.quant entry used to (de)quantize current-layout codes
    item_type: str | None = None  # tract's block format ('q4_0', 'q8_1'): values quantized again when written
    # a whole block-quantized .dat: written as it is while the values it decodes to are the current ones (as read),
    # or always when `fixed` (codes and scales given, as quantization-aware training makes them)
    kept: bytes | None = field(default=None, compare=False, repr=False)
    fixed: bool = False


def block_storage(item_type: str = "q4_0", *, codes: np.ndarray | None = None, scales: np.ndarray | None = None,
                  shape: tuple[int, ...] | None = None) -> Storage:
    """A variable written as tract's block item type: quantized min-max from its value when written, or with the
    int8 `codes` and f16 `scales` given (in the variable's `shape`, by default the codes')."""
    if item_type not in tensor_file.BLOCK_WRITE_CODES:
        raise ValueError(f"item_type must be one of {', '.join(tensor_file.BLOCK_WRITE_CODES)}, not {item_type!r}")
    kept = None
    if codes is not None and scales is not None:
        kept = tensor_file.encode_blocks(codes, scales, item_type=item_type, shape=shape)
    elif codes is not None or scales is not None:
        raise ValueError("give both codes and scales, or neither")
    return Storage(np.dtype(np.float32), "current", item_type=item_type, kept=kept, fixed=kept is not None)


def float_storage(dtype: Any = np.float32) -> Storage:
    """A variable written as plain float items of `dtype` (float16, float32 or float64)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize not in (2, 4, 8):
        raise ValueError(f"float storage takes float16, float32 or float64, not {dtype}")
    return Storage(dtype)


def as_float(storage: Storage) -> Storage:
    """`storage` written as plain float32 where it is a block or float16 item type (`save(weights='float')`)."""
    if storage.item_type is not None or (storage.dtype.kind == "f" and storage.dtype.itemsize < 4
                                         and storage.quantization is None):
        return Storage(np.dtype(np.float32), storage.layout)
    return storage


def declared_dtype(nnef_type: str, dtype: torch.dtype | None) -> torch.dtype:
    """The torch dtype of a tensor of NNEF type `nnef_type` when nothing is stored for it."""
    if nnef_type == "scalar" and dtype is not None:
        return dtype
    return _DEFAULTS[nnef_type]


def to_tensor(data: TensorData, spec: QuantSpec | None, *, name: str, file: str | None) -> tuple[torch.Tensor, Storage]:
    """The values of a decoded tensor file as a CPU tensor (sharing the file's bytes where it can)."""
    header = data.header
    if header.kind == "quantized" and header.layout == "current":
        if spec is None:
            raise NNEFQuantizationError(f"variable '{name}' stores quantized codes, but graph.quant has no entry for "
                                        "it that says how to read them", Location(file=file, offset=48))
        values = dequantize_codes(data.codes, spec, file)
        storage = Storage(data.codes.dtype, "current", {"signed": header.signed}, spec)
    elif header.kind == "quantized":
        values = data.array
        storage = Storage(np.dtype(np.float32), "seed", dict(data.quantization))
    elif header.block is not None:
        values = data.array
        storage = Storage(np.dtype(np.float32), "current", item_type=header.block, kept=data.source)
    else:
        values = data.array
        storage = Storage(values.dtype, header.layout)
    if values.dtype in _WIDENED:
        values = values.astype(_WIDENED[values.dtype])
    if not values.flags.writeable or not values.flags.aligned:
        values = np.array(values)
    return torch.from_numpy(values), storage


def encode(tensor: torch.Tensor, storage: Storage) -> bytes:
    """The tensor file of a variable's current value, in the way it was stored."""
    values = tensor.detach().cpu()
    if storage.item_type is not None:
        return _encode_blocks(values, storage)
    if storage.layout == "seed" and storage.quantization is not None:
        return tensor_file.encode(values.to(torch.float32).numpy(), quantization=storage.quantization, layout="seed")
    if storage.spec is not None:
        codes = quantize_codes(values.to(torch.float64).numpy(), storage.spec, storage.dtype)
        return tensor_file.encode(codes, quantization=storage.quantization)
    array = values.numpy() if values.dtype != torch.bfloat16 else values.float().numpy()
    return tensor_file.encode(array.astype(storage.dtype, copy=False), layout=storage.layout)


def _encode_blocks(values: torch.Tensor, storage: Storage) -> bytes:
    assert storage.item_type is not None
    if storage.kept is not None:
        if storage.fixed:
            return storage.kept
        array = values.to(torch.float32).numpy()
        kept = tensor_file.decode(storage.kept)
        if kept.array.size == array.size and np.array_equal(kept.array.reshape(array.shape), array):
            return storage.kept
    return tensor_file.encode(values.to(torch.float32).numpy(), item_type=storage.item_type)


def dequantize_codes(codes: np.ndarray, spec: QuantSpec, file: str | None) -> np.ndarray:
    args = {key: _param(value, codes.ndim) for key, value in spec.args.items()}
    q = codes.astype(np.float64)
    if spec.op == "zero_point_linear_quantize":
        values = (q - args["zero_point"]) * args["scale"]
    elif spec.op in ("linear_quantize", "min_max_linear_quantize"):
        r, p = _linear_range(spec, args)
        values = (q + p) / r * (args["max"] - args["min"]) + args["min"]
    else:
        raise NNEFQuantizationError(f"quantized codes cannot be read with '{spec.op}'; expected "
                                    "zero_point_linear_quantize, linear_quantize or min_max_linear_quantize",
                                    spec.location if spec.location is not None else Location(file=file))
    return values.astype(np.float32)


def quantize_codes(values: np.ndarray, spec: QuantSpec, dtype: np.dtype) -> np.ndarray:
    """The inverse of `dequantize_codes`, rounding halfway cases away from zero as the stdlib's `round`."""
    args = {key: _param(value, values.ndim) for key, value in spec.args.items()}
    if spec.op == "zero_point_linear_quantize":
        codes = _round(values / args["scale"]) + args["zero_point"]
        top = 2.0 ** (int(args["bits"]) - 1) - 1 if args.get("signed", False) else 2.0 ** int(args["bits"]) - 1
        bottom = 0.0 if not args.get("signed", False) else -top if args.get("symmetric", False) else -top - 1
        codes = np.clip(codes, bottom, top)  # the entry's code range (signed symmetric stops at -127, not -128)
    else:
        r, p = _linear_range(spec, args)
        clamped = np.clip(values, args["min"], args["max"])
        codes = _round((clamped - args["min"]) / (args["max"] - args["min"]) * r) - p
    info = np.iinfo(dtype)
    return np.clip(codes, info.min, info.max).astype(dtype)


def _linear_range(spec: QuantSpec, args: dict[str, Any]) -> tuple[float, float]:
    bits = int(args["bits"])
    signed = bool(args.get("signed", False))
    symmetric = bool(args.get("symmetric", False))
    r = 2 ** bits - 1 - int(signed and symmetric)
    p = 2 ** (bits - 1) - int(symmetric) if signed else 0
    return float(r), float(p)


def _param(value: Any, rank: int) -> Any:
    """A graph.quant argument broadcast NNEF-style (aligned from the left) against a tensor of `rank`."""
    if isinstance(value, (list, tuple)):
        array = np.asarray(value, dtype=np.float64)
        return array.reshape(array.shape + (1,) * max(0, rank - array.ndim))
    return value


def _round(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)
