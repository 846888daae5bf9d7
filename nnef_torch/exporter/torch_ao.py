"""torch.ao.quantization fake quantizers -> nnef_torch FakeQuantize, on a shallow copy of the module tree.

The torch.ao modules (FakeQuantize, FusedMovingAvgObsFakeQuantize, FixedQParamsFakeQuantize, _LearnableFakeQuantize,
as eager `prepare_qat` and FX `prepare_qat_fx` place them) branch on buffer values (`observer_enabled`,
`fake_quant_enabled`), which torch.export cannot trace. Before tracing, each one is replaced by the
zero_point_linear_quantize it computes, with its current scale and zero point: quant_min..quant_max 0..2^b-1 is
unsigned, -2^(b-1)..2^(b-1)-1 signed, -(2^(b-1)-1)..2^(b-1)-1 signed symmetric. A disabled one (fake_quant_enabled
0) is the identity. Observers are not run: the export holds the parameters of the last observed call
(`torch.ao.quantization.disable_observer` makes the torch module agree).

torch computes round(x * (1 / scale)) rounding halfway cases to even; NNEF computes round(x / scale) rounding them
away from zero. The two differ by one quantization step where x / scale lies (within float rounding) exactly
halfway between two codes.

The user's module is never changed: the modules on the path to each replaced quantizer are shallow copies sharing
their parameters, buffers, hooks and other attributes with the originals.
"""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.quant.modules import FakeQuantize


def _base() -> type | None:
    try:
        from torch.ao.quantization.fake_quantize import FakeQuantizeBase
    except ImportError:  # a torch build without torch.ao.quantization
        return None
    return FakeQuantizeBase


def substitute(module: torch.nn.Module) -> torch.nn.Module:
    """`module`, or a shallow copy of it whose torch.ao fake quantizers are nnef_torch FakeQuantize modules."""
    base = _base()
    if base is None or not isinstance(module, torch.nn.Module):
        return module
    if not any(isinstance(m, base) for m in module.modules()):
        return module
    problems: list[str] = []
    containing: dict[int, bool] = {}

    def contains(m: torch.nn.Module) -> bool:
        key = id(m)
        if key not in containing:
            containing[key] = False  # a module reachable from itself (never in practice) stops here
            containing[key] = isinstance(m, base) or any(contains(c) for c in m._modules.values() if c is not None)
        return containing[key]

    done: dict[int, torch.nn.Module] = {}  # shared submodules stay shared

    def rebuild(m: torch.nn.Module, path: str) -> torch.nn.Module:
        if id(m) in done:
            return done[id(m)]
        if isinstance(m, base):
            new = replacement(m, path or "(the module)", problems)
        elif not contains(m):
            return m
        else:
            new = object.__new__(type(m))
            new.__dict__ = dict(m.__dict__)
            new.__dict__["_modules"] = type(m._modules)(
                (name, None if child is None else rebuild(child, f"{path}.{name}" if path else name))
                for name, child in m._modules.items())
        done[id(m)] = new
        return new

    result = rebuild(module, "")
    if problems:
        raise ExportError(f"{type(module).__name__} has torch.ao fake quantization without an NNEF form "
                          f"({len(problems)} problem(s)):", problems)
    return result


def bits_of(quant_min: int, quant_max: int) -> tuple[int, bool, bool] | None:
    """(bits, signed, symmetric) of zero_point_linear_quantize's code range quant_min..quant_max; None if none."""
    for bits in range(1, 33):
        top = 2 ** (bits - 1) - 1
        if (quant_min, quant_max) == (0, 2 ** bits - 1):
            return bits, False, False
        if bits > 1 and (quant_min, quant_max) == (-top - 1, top):
            return bits, True, False
        if bits > 1 and (quant_min, quant_max) == (-top, top):
            return bits, True, True
    return None


def replacement(q: torch.nn.Module, path: str, problems: list[str]) -> torch.nn.Module:
    """The nnef_torch module computing what torch.ao fake quantizer `q` computes (identity when disabled)."""
    where = f"'{path}' ({type(q).__name__})"
    if not bool(q.fake_quant_enabled.reshape(-1)[0]):
        return torch.nn.Identity()
    qscheme = getattr(q, "qscheme", torch.per_tensor_affine)
    if qscheme not in (torch.per_tensor_affine, torch.per_tensor_symmetric, torch.per_channel_affine,
                       torch.per_channel_symmetric):
        problems.append(f"{where}: qscheme {qscheme} has no NNEF form (float zero points)")
        return torch.nn.Identity()
    per_channel = qscheme in (torch.per_channel_affine, torch.per_channel_symmetric)
    if per_channel and getattr(q, "ch_axis", 0) != 0:
        problems.append(f"{where}: per-channel along axis {q.ch_axis}; NNEF per-channel quantization parameters "
                        "apply along axis 0")
        return torch.nn.Identity()
    observer = getattr(q, "activation_post_process", None)
    quant_min = int(getattr(observer, "quant_min", getattr(q, "quant_min", 0)))
    quant_max = int(getattr(observer, "quant_max", getattr(q, "quant_max", 255)))
    form = bits_of(quant_min, quant_max)
    if form is None:
        problems.append(f"{where}: code range {quant_min}..{quant_max} is none of 0..2^b-1, -2^(b-1)..2^(b-1)-1, "
                        "-(2^(b-1)-1)..2^(b-1)-1")
        return torch.nn.Identity()
    learnable = type(q).__name__ == "_LearnableFakeQuantize"
    if not learnable and _unobserved(q, observer):
        problems.append(f"{where} has not observed any data, so its scale is a placeholder: run the model on "
                        "calibration (or training) data before exporting")
        return torch.nn.Identity()
    scale, zero = _qparams(q, quant_min, quant_max, learnable, per_channel)
    bits, signed, symmetric = form
    new = FakeQuantize("zero_point_linear_quantize", bits=bits, signed=signed, symmetric=symmetric,
                       channels=int(scale.shape[0]) if per_channel else None, scale=scale, zero_point=zero)
    return new.train(q.training)


def _qparams(q: Any, quant_min: int, quant_max: int, learnable: bool, per_channel: bool
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The scale and integer zero point `q`'s forward uses (a learnable one clamps and rounds them first)."""
    scale = q.scale.detach().float()
    zero = q.zero_point.detach()
    if learnable:
        scale = torch.clamp(scale, min=float(q.eps.reshape(-1)[0]))
        zero = torch.clamp(torch.round(zero.float()), quant_min, quant_max)
        if q.qscheme in (torch.per_tensor_symmetric, torch.per_channel_symmetric):
            zero = torch.zeros_like(zero)
    zero = zero.to(torch.int64)
    if not per_channel:
        scale, zero = scale.reshape(-1)[0], zero.reshape(-1)[0]
    return scale.clone(), zero.clone()


def _unobserved(q: Any, observer: Any) -> bool:
    """Whether `q` still has its initial placeholder parameters: its observer has never seen data."""
    low = getattr(observer, "min_val", None)
    if not isinstance(low, torch.Tensor) or not bool(q.observer_enabled.reshape(-1)[0]):
        return False
    return low.numel() == 0 or bool(torch.isinf(low).any())


__all__ = ["bits_of", "replacement", "substitute"]
