"""Fake quantization as one torch op, `torch.ops.nnef_torch.fake_quantize`, with straight-through gradients.

The forward pass is the importer's implementation of the NNEF op (ops/torch_elementwise.py), so it equals the stdlib
definition to the bit, halfway cases rounded away from zero. The backward pass is the straight-through estimator:
- x: the incoming gradient where x lies inside the representable range, zero outside;
- the range or scale (when it requires grad): the derivative of the definition with each `round(v)` taken as
  `v + c`, c = round(v) - v held fixed (LSQ). Outside the range that is the derivative of the clamped end.
  `grad_scale` multiplies these gradients (LSQ's 1 / sqrt(numel * q_max)).

Being one op, fake quantization stays one node when a module is traced by torch.export, which is how the exporter
finds it and writes it as a graph.quant entry. Parameters broadcast NNEF-style: a per-channel vector applies along
axis 0.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from nnef_torch.ops import torch_elementwise as ops
from nnef_torch.ops.torch_common import align

OP_NAME = "nnef_torch::fake_quantize"
OPS = ("zero_point_linear_quantize", "min_max_linear_quantize", "linear_quantize", "logarithmic_quantize")
LEARNABLE = {"zero_point_linear_quantize": ("scale",), "min_max_linear_quantize": ("min", "max"),
             "linear_quantize": ("min", "max"), "logarithmic_quantize": ()}


def _forward(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool,
             symmetric: bool) -> torch.Tensor:
    if op == "zero_point_linear_quantize":
        return ops.zero_point_linear_quantize(x, a, b, bits=bits, signed=signed, symmetric=symmetric)
    if op == "min_max_linear_quantize":
        return ops.min_max_linear_quantize(x, a, b, bits=bits, signed=signed, symmetric=symmetric)
    if op == "linear_quantize":
        return ops.linear_quantize(x, a, b, bits=bits)
    if op == "logarithmic_quantize":
        return ops.logarithmic_quantize(x, a, bits=bits)
    raise ValueError(f"unknown quantization op {op!r}; expected one of {', '.join(OPS)}")


def _computed(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool,
              symmetric: bool) -> torch.Tensor:
    # one precision throughout, as the backward: float64 for float64 x, else float32 (float32 parameters of a
    # float64 x would otherwise make max - min a float32 value)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    a, b = (t.to(wide) if t.is_floating_point() else t for t in (a, b))
    return _forward(x.to(wide), a, b, op, bits, signed, symmetric).to(x.dtype)


@torch.library.custom_op(OP_NAME, mutates_args=())
def fake_quantize(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool,
                  symmetric: bool, grad_scale: float) -> torch.Tensor:
    """`op` applied to x. a, b: (zero_point, scale), (min, max), or (max, unused) for logarithmic_quantize."""
    return _computed(x, a, b, op, bits, signed, symmetric)


@fake_quantize.register_fake
def _(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool, symmetric: bool,
      grad_scale: float) -> torch.Tensor:
    return torch.empty_like(x)


def zero_point_range(bits: int, signed: bool, symmetric: bool) -> tuple[float, float]:
    """The smallest and largest code of zero_point_linear_quantize."""
    high = float(2 ** (bits - 1) - 1 if signed else 2 ** bits - 1)
    low = 0.0 if not signed else (-high if symmetric else -high - 1.0)
    return low, high


def _reduce_to(grad: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """Sum a gradient computed at x's shape back to the shape of an NNEF-broadcast (left-aligned) parameter."""
    aligned = align(param, grad.dim()) if param.dim() < grad.dim() else param
    dims = [d for d in range(grad.dim()) if aligned.shape[d] == 1 and grad.shape[d] != 1]
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape(param.shape).to(param.dtype)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    x, a, b = ctx.saved_tensors
    op, bits, signed, symmetric, grad_scale = ctx.attributes
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    g = grad.to(wide)
    xw = x.to(wide)
    grad_a = grad_b = None
    if op == "zero_point_linear_quantize":
        z, scale = (align(t.to(wide), x.dim()) for t in (a, b))
        low, high = zero_point_range(bits, signed, symmetric)
        v = xw / scale
        codes = ops.round_half_away(v) + z
        inside = (codes >= low) & (codes <= high)
        if ctx.needs_input_grad[2]:
            d_scale = torch.where(inside, ops.round_half_away(v) - v, torch.where(codes < low, low - z, high - z))
            grad_b = _reduce_to(g * d_scale * grad_scale, b)
    elif op in ("min_max_linear_quantize", "linear_quantize"):
        lo, hi = (align(t.to(wide), x.dim()) for t in (a, b))
        r = float(2 ** bits - 1 - int(op == "min_max_linear_quantize" and signed and symmetric))
        inside = (xw >= lo) & (xw <= hi)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            u = (torch.clamp(xw, lo, hi) - lo) / (hi - lo) * r
            c = (ops.round_half_away(u) - u) / r  # y = clamp(x) + c * (hi - lo)
            if ctx.needs_input_grad[1]:
                grad_a = _reduce_to(g * torch.where(inside, -c, (xw < lo).to(wide)) * grad_scale, a)
            if ctx.needs_input_grad[2]:
                grad_b = _reduce_to(g * torch.where(inside, c, (xw > hi).to(wide)) * grad_scale, b)
    else:
        top = align(torch.ceil(torch.log2(a.to(wide))), x.dim())
        magnitude = torch.log2(torch.abs(xw))
        inside = (magnitude >= top - float(2 ** bits - 1)) & (magnitude <= top)
    grad_x = (grad * inside.to(grad.dtype)) if ctx.needs_input_grad[0] else None
    return grad_x, grad_a, grad_b, None, None, None, None, None


def _setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, a, b, op, bits, signed, symmetric, grad_scale = inputs
    if op == "logarithmic_quantize" and (a.requires_grad or b.requires_grad):
        raise ValueError("logarithmic_quantize has no learnable parameters: its range max enters through ceil")
    if op == "zero_point_linear_quantize" and a.requires_grad:
        raise ValueError("the zero point of zero_point_linear_quantize is an integer and cannot be learned")
    ctx.save_for_backward(x, a, b)
    ctx.attributes = (op, bits, signed, symmetric, grad_scale)


fake_quantize.register_autograd(_backward, setup_context=_setup)


class _StraightThrough(torch.autograd.Function):
    """The op's body and its autograd formula (`_setup`, `_backward`) for eager calls."""

    @staticmethod
    def forward(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool,
                symmetric: bool, grad_scale: float) -> torch.Tensor:
        return _computed(x, a, b, op, bits, signed, symmetric)

    setup_context = staticmethod(_setup)
    backward = staticmethod(_backward)


def quantize(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, op: str, bits: int, signed: bool, symmetric: bool,
             grad_scale: float) -> torch.Tensor:
    """`fake_quantize(...)`, the same values and gradients; eager calls on plain tensors run the op's body and
    autograd formula without the op, since the first call of a torch custom op imports torch._dynamo (seconds on a
    small machine), which a quantized model's forward does not need. Under torch.compile, torch.export, jit
    tracing, a dispatch mode (make_fx, fake tensors), torch.func transforms or with tensor subclasses the op is
    called, so that traced graphs hold fake quantization as one node."""
    if _eager(x, a, b):
        return _StraightThrough.apply(x, a, b, op, bits, signed, symmetric, grad_scale)
    return fake_quantize(x, a, b, op, bits, signed, symmetric, grad_scale)


def _eager(*tensors: torch.Tensor) -> bool:
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if any(type(t) is not torch.Tensor for t in tensors):
        return False
    return _get_current_dispatch_mode() is None and not torch._C._are_functorch_transforms_active()


__all__ = ["LEARNABLE", "OPS", "OP_NAME", "fake_quantize", "quantize", "zero_point_range"]
