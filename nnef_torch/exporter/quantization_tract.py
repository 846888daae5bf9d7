"""Fake quantization that tract cannot read as a graph.quant entry, written for the tract target as the arithmetic of
its NNEF definition (`stdlib.nnef`) in graph.nnef.

tract's graph.quant reader takes numbers only, so an entry with per-channel parameters (lists along axis 0) does
not load; tract reads an entry as a quantized type, so a variable with an entry must hold codes (weights=
"quantized"), and a quantized activation beside float weights does not run (its conv has no kernel for the mix);
and the standard fragments of the quantization ops convert types with `scalar(...)`, which tract's NNEF lacks, so
`inline=True` cannot write them either. So unless the weights are stored as codes (then every entry is per-tensor
and tract computes in its quantized types), each fake quantizer becomes the operations of its
definition, `div`, `round`, `clamp`, `mul` and so on, with its per-channel parameters as variables shaped
[C, 1, ..., 1] to broadcast along axis 0 (tract has no `constant`) and its per-tensor ones as literals. tract folds
them when they quantize a weight, and computes them in float32 as torch's fake quantization does: exact, halfway
cases rounded away from zero by tract's `round` as by the definition.
"""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.exporter.emitter import Emitter, Unmappable
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.ir.graph import Ref
from nnef_torch.quant.functional import zero_point_range

PARAMS = {"zero_point_linear_quantize": ("zero_point", "scale"), "min_max_linear_quantize": ("min", "max"),
          "linear_quantize": ("min", "max"), "logarithmic_quantize": ("max",)}


def per_channel(spec: QuantSpec) -> bool:
    """Whether `spec` has a parameter given per channel (a list), which tract's graph.quant cannot read."""
    return any(isinstance(spec.args.get(name), list) for name in PARAMS[spec.op])


def quantize_inline(e: Emitter, x: Ref, spec: QuantSpec, weights: str = "float") -> Ref:
    """`spec` applied to x by the operations of its definition, in the form tract reads. Unmappable for a
    per-channel quantizer when `weights` asks for codes stored by graph.quant entries (tract's quantized types
    hold one scale per tensor)."""
    if weights != "float":
        raise Unmappable(f"a per-channel {spec.op} has no form for tract with weights={weights!r}: tract computes "
                         "graph.quant entries in quantized types, which hold one scale per tensor; export with "
                         "weights='float', which writes fake quantization as float arithmetic tract runs exactly")
    rank = e.rank(x)
    params = {name: _parameter(e, spec.args[name], name, rank) for name in PARAMS[spec.op]}
    bits = int(spec.args["bits"])
    signed, symmetric = bool(spec.args.get("signed", False)), bool(spec.args.get("symmetric", False))
    if spec.op == "zero_point_linear_quantize":
        z, scale = params["zero_point"], params["scale"]
        low, high = zero_point_range(bits, signed, symmetric)
        codes = e.op("add", e.op("round", e.op("div", x, scale)), z)
        return e.op("mul", e.op("sub", e.op("clamp", codes, low, high), z), scale)
    if spec.op in ("min_max_linear_quantize", "linear_quantize"):
        low, high = params["min"], params["max"]
        r = float(2 ** bits - 1 - int(signed and symmetric))
        p = float(2 ** (bits - 1) - int(symmetric) if signed else 0)
        width = e.op("sub", high, low) if isinstance(high, Ref) or isinstance(low, Ref) else high - low
        clamped = e.op("clamp", x, low, high)
        q = e.op("sub", e.op("round", e.op("mul", e.op("div", e.op("sub", clamped, low), width), r)), p)
        return e.op("add", e.op("mul", e.op("div", e.op("add", q, p), r), width), low)
    top = params["max"]  # logarithmic_quantize
    m = e.op("ceil", e.op("log2", top)) if isinstance(top, Ref) else float(torch.ceil(torch.log2(torch.tensor(top))))
    r = float(2 ** bits - 1)
    floor = e.op("sub", m, r) if isinstance(m, Ref) else m - r
    q = e.op("round", e.op("clamp", e.op("log2", e.op("abs", x)), floor, m))
    return e.op("mul", e.op("sign", x), e.op("pow", 2.0, q))


def _parameter(e: Emitter, value: Any, name: str, rank: int) -> Any:
    """A float32 number as a literal, or a per-channel list as a variable [C, 1, ..., 1] (a zero point too: the
    definition casts it to scalar)."""
    if not isinstance(value, list):
        return float(torch.tensor(float(value), dtype=torch.float32))
    tensor = torch.tensor(value, dtype=torch.float32).reshape([len(value)] + [1] * max(rank - 1, 0))
    return e.variable(f"{e.node.name}/{name}", tensor)


__all__ = ["per_channel", "quantize_inline"]
