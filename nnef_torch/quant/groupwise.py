"""Q4_0 fake quantization of a weight, block by block, as tract stores it; trainable (straight-through and LSQ).

Layout (tract and ggml, `nnef_torch/format/block_quant.py`): a weight [OUT, ...] is read as rows [OUT, K], K the
flattened rest (a multiple of 32), split along K into blocks of 32; a block holds a float16 scale d and 32 codes in
[-8, 7], and tract computes `code * float32(d)`.

Forward: codes = clamp(floor(w * (1 / s) + 8.5), 0, 15) - 8 with s the block's float32 scale (tract's own rule,
bit for bit), times s rounded to float16, the scale the file stores; so the forward is what tract computes from the
written codes. At a min-max initialisation (s = the block's signed largest value / -8) it equals tract's and ggml's
quantizer. Backward (LSQ, Esser et al. 2020), the float16 rounding of s taken as the identity:
- w: the incoming gradient where the unclamped code lies in [-8, 7], zero outside;
- s (when it requires grad): per block, the sum of `g * (code - w / s)` inside and `g * code` at a clamped end,
  times `grad_scale` (LSQ's 1 / sqrt(32 * 7) by default).

Being one op (`torch.ops.nnef_torch.q4_0_fake_quantize`), it stays one node under torch.export, with the weight
and the scale as its inputs, so an exporter can write the node's codes (`q4_0_codes_of`) as a Q4_0 tensor.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from nnef_torch.format.block_quant import BLOCK

OP_NAME = "nnef_torch::q4_0_fake_quantize"
LOW, HIGH = -8, 7
GRAD_SCALE = 1.0 / math.sqrt(BLOCK * HIGH)  # LSQ: 1 / sqrt(values per scale * q_max)
_F16_MAX = float(torch.finfo(torch.float16).max)


def rows(shape: tuple[int, ...] | torch.Size) -> tuple[int, int]:
    """(OUT, K) of a weight's shape: its first extent and the product of the rest."""
    if len(shape) < 2:
        raise ValueError(f"Q4_0 needs a weight of 2 or more axes, got shape {list(shape)}")
    return int(shape[0]), math.prod(int(n) for n in shape[1:])


def _blocks(w: torch.Tensor) -> torch.Tensor:
    out, k = rows(w.shape)
    if k % BLOCK:
        raise ValueError(f"Q4_0 needs {k} values per row (weight shape {list(w.shape)}) to be a multiple of {BLOCK}")
    return w.reshape(out, k // BLOCK, BLOCK).float()


def _check_scale(w: torch.Tensor, scale: torch.Tensor) -> None:
    out, k = rows(w.shape)
    if tuple(scale.shape) != (out, k // BLOCK):
        raise ValueError(f"a Q4_0 scale for weight shape {list(w.shape)} has shape {[out, k // BLOCK]}, "
                         f"got {list(scale.shape)}")


def min_max_scale(w: torch.Tensor) -> torch.Tensor:
    """float32 scales [OUT, K // 32]: each block's first value of largest magnitude, with its sign, / -8."""
    blocks = _blocks(w.detach())
    if not torch.isfinite(blocks).all():
        raise ValueError("Q4_0 min-max initialisation needs finite weights")
    first = blocks.abs().argmax(dim=-1, keepdim=True)
    scale = torch.gather(blocks, -1, first)[..., 0] / -8.0
    if scale.abs().max() > _F16_MAX:
        raise ValueError(f"a Q4_0 scale of {scale.abs().max().item():g} does not fit float16 (max {_F16_MAX:g})")
    return scale


def _codes(blocks: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(unclamped codes, w * (1 / s)) per block, as tract computes them (float32, reciprocal 0 for s = 0)."""
    s = scale.float()[..., None]
    recip = torch.where(s == 0, torch.zeros_like(s), 1.0 / torch.where(s == 0, torch.ones_like(s), s))
    v = blocks * recip
    return torch.floor(v + 8.5) - 8.0, v


def _forward(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    raw, _ = _codes(_blocks(w), scale)
    d16 = scale.to(torch.float16).float()[..., None]
    return (raw.clamp(LOW, HIGH) * d16).reshape(w.shape).to(w.dtype)


@torch.library.custom_op(OP_NAME, mutates_args=())
def q4_0_fake_quantize(w: torch.Tensor, scale: torch.Tensor, grad_scale: float) -> torch.Tensor:
    """w [OUT, ...] fake-quantized to Q4_0 with float32 block scales [OUT, K // 32] (see the module's doc)."""
    return _forward(w, scale)


@q4_0_fake_quantize.register_fake
def _(w: torch.Tensor, scale: torch.Tensor, grad_scale: float) -> torch.Tensor:
    return torch.empty_like(w)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
    w, scale = ctx.saved_tensors
    raw, v = _codes(_blocks(w), scale)
    inside = (raw >= LOW) & (raw <= HIGH)
    grad_w = grad_s = None
    if ctx.needs_input_grad[0]:
        grad_w = grad * inside.reshape(w.shape).to(grad.dtype)
    if ctx.needs_input_grad[1]:
        g = grad.reshape(raw.shape).float()
        d_scale = torch.where(inside, raw - v, raw.clamp(LOW, HIGH))
        grad_s = ((g * d_scale).sum(dim=-1) * ctx.grad_scale).to(scale.dtype)
    return grad_w, grad_s, None


def _setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    w, scale, grad_scale = inputs
    _check_scale(w, scale)
    ctx.save_for_backward(w, scale)
    ctx.grad_scale = float(grad_scale)


q4_0_fake_quantize.register_autograd(_backward, setup_context=_setup)


class _StraightThrough(torch.autograd.Function):
    """The op's body and autograd formula for eager calls (no torch._dynamo import on a first forward)."""

    @staticmethod
    def forward(w: torch.Tensor, scale: torch.Tensor, grad_scale: float) -> torch.Tensor:
        return _forward(w, scale)

    setup_context = staticmethod(_setup)
    backward = staticmethod(_backward)


def _eager(*tensors: torch.Tensor) -> bool:
    # as quant.functional's rule, but a Parameter counts as a plain tensor (a parametrization is handed one)
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors):
        return False
    return _get_current_dispatch_mode() is None and not torch._C._are_functorch_transforms_active()


def q4_0_quantize(w: torch.Tensor, scale: torch.Tensor, grad_scale: float = GRAD_SCALE) -> torch.Tensor:
    """`q4_0_fake_quantize(w, scale, grad_scale)`: eager calls run its body without the op; traced ones call it."""
    _check_scale(w, scale)
    if _eager(w, scale):
        return _StraightThrough.apply(w, scale, grad_scale)
    return q4_0_fake_quantize(w, scale, grad_scale)


def q4_0_codes_of(w: torch.Tensor, scale: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """What to write for w: (int8 codes of w's shape, in [-8, 7]; float16 scales [OUT, K // 32]), the pair
    `format.block_quant.pack_q4_0` takes (codes flattened to rows [OUT, K])."""
    _check_scale(w, scale)
    with torch.no_grad():
        raw, _ = _codes(_blocks(w), scale)
        codes = raw.clamp(LOW, HIGH).to(torch.int8).reshape(w.shape)
        return codes.cpu().numpy(), scale.detach().to(torch.float16).cpu().numpy()


class Q4_0FakeQuantize(torch.nn.Module):
    """Q4_0 fake quantization of one weight, for `torch.nn.utils.parametrize` (forward(w) -> fake-quantized w).

    scale: float32 [OUT, K // 32], a Parameter when `learn_scale` (LSQ) else a buffer (the weight alone is trained,
    straight through). `from_weight` initialises it by min-max, tract's own quantizer.
    """

    def __init__(self, scale: torch.Tensor, *, learn_scale: bool = True, grad_scale: float = GRAD_SCALE):
        super().__init__()
        if scale.dim() != 2:
            raise ValueError(f"Q4_0 scales are [OUT, K // {BLOCK}], got shape {list(scale.shape)}")
        value = scale.detach().float().clone()
        if learn_scale:
            self.scale = torch.nn.Parameter(value)
        else:
            self.register_buffer("scale", value)
        self.grad_scale = float(grad_scale)

    @classmethod
    def from_weight(cls, w: torch.Tensor, *, learn_scale: bool = True,
                    grad_scale: float = GRAD_SCALE) -> Q4_0FakeQuantize:
        return cls(min_max_scale(w), learn_scale=learn_scale, grad_scale=grad_scale)

    @property
    def learn_scale(self) -> bool:
        return isinstance(self.scale, torch.nn.Parameter)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return q4_0_quantize(w, self.scale, self.grad_scale)

    def codes(self, w: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(int8 codes, float16 scales) of w under this quantizer: what the file holds."""
        return q4_0_codes_of(w, self.scale)

    def extra_repr(self) -> str:
        return f"blocks={list(self.scale.shape)}, learn_scale={self.learn_scale}, grad_scale={self.grad_scale:.4g}"


__all__ = ["GRAD_SCALE", "OP_NAME", "Q4_0FakeQuantize", "min_max_scale", "q4_0_codes_of", "q4_0_fake_quantize",
           "q4_0_quantize"]
