"""`FakeQuantize`: one NNEF quantization op on a tensor, as a module with its parameters, switches and observer.

The parameters are buffers, or Parameters when `learnable` (the scale of zero_point_linear_quantize, the range of
the linear forms; a symmetric signed range learns one bound `max`, with min = -max). Per-tensor parameters are 0-d;
per-channel ones are vectors along axis 0 (NNEF broadcasting aligns from the left).
"""
from __future__ import annotations

import math
from typing import Any

import torch

from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.quant.functional import LEARNABLE, OPS, quantize, zero_point_range

_TINY = float(torch.finfo(torch.float32).tiny) * 2 ** 23  # the smallest scale or span set from an observed range


class FakeQuantize(torch.nn.Module):
    """Fake quantization of a tensor by `op` (an NNEF quantization op name).

    enabled: quantize in forward (else the identity). observer: when `observing`, forward records the tensor's
    range with it and sets the parameters from that range. learnable: ranges/scales are Parameters trained by LSQ
    gradients; grad_scale multiplies their gradients ("auto": 1 / sqrt(numel * q_max), LSQ's choice).
    """

    def __init__(self, op: str = "zero_point_linear_quantize", *, bits: int = 8, signed: bool = False,
                 symmetric: bool = False, channels: int | None = None, learnable: bool = False,
                 grad_scale: float | str = 1.0, observer: Any = None, **params: Any):
        super().__init__()
        if op not in OPS:
            raise ValueError(f"unknown quantization op {op!r}; expected one of {', '.join(OPS)}")
        if not 1 <= int(bits) <= 32:
            raise ValueError(f"bits must be in 1..32, not {bits}")
        if int(bits) < 2 and (signed or symmetric) and op != "logarithmic_quantize":
            raise ValueError(f"{op} needs at least 2 bits when signed or symmetric (1 bit leaves no range)")
        if op == "linear_quantize" and (signed or symmetric):
            raise ValueError("linear_quantize is unsigned and asymmetric; use min_max_linear_quantize")
        if learnable and not LEARNABLE[op]:
            raise ValueError(f"{op} has no learnable parameters")
        self.op, self.bits, self.signed, self.symmetric = op, int(bits), bool(signed), bool(symmetric)
        self.learnable, self.grad_scale = bool(learnable), grad_scale
        self.enabled = True
        self.observing = False
        self.observer = observer
        shape = () if channels is None else (int(channels),)
        given_min, given_max = params.get("min"), params.get("max")
        self._tied = (learnable and op == "min_max_linear_quantize" and signed and symmetric and
                      (given_min is None or torch.equal(torch.as_tensor(given_min, dtype=torch.float64),
                                                        -torch.as_tensor(given_max, dtype=torch.float64))))
        for name, default in self._defaults().items():
            value = params.pop(name, None)
            value = torch.full(shape, default) if value is None else torch.as_tensor(value)
            dtype = torch.int64 if name == "zero_point" else torch.float32
            self._set(name, value.to(dtype).reshape(value.shape if value.dim() else shape))
        if params:
            raise TypeError(f"{op} has no parameters {sorted(params)}")

    # ----------------------------------------------------------------------------------------- parameters
    def _defaults(self) -> dict[str, float]:
        if self.op == "zero_point_linear_quantize":
            return {"zero_point": 0.0 if self.signed else float(2 ** (self.bits - 1)) if self.symmetric else 0.0,
                    "scale": 1.0 / 2 ** (self.bits - 1)}
        if self.op == "logarithmic_quantize":
            return {"max": 1.0}
        return {"min": -1.0 if self.signed else 0.0, "max": 1.0}

    def _set(self, name: str, value: torch.Tensor) -> None:
        if self._tied and name == "min":
            return  # min = -max
        learn = self.learnable and name in LEARNABLE[self.op]
        old = getattr(self, name, None) if name in self._parameters or name in self._buffers else None
        if old is not None and old.shape == value.shape:
            with torch.no_grad():
                old.copy_(value.to(old.device, old.dtype))
            return
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        if learn:
            self.register_parameter(name, torch.nn.Parameter(value.clone()))
        else:
            self.register_buffer(name, value.clone())

    def set_learnable(self, learnable: bool = True) -> FakeQuantize:
        """Make the range or scale Parameters (trained by LSQ gradients), or buffers again."""
        if learnable and not LEARNABLE[self.op]:
            raise ValueError(f"{self.op} has no learnable parameters")
        if self._tied and not learnable:
            self.register_buffer("min", -self.max.detach().clone())
            self._tied = False
        self.learnable = bool(learnable)
        for name in LEARNABLE[self.op]:
            if name in self._parameters or name in self._buffers:
                value = getattr(self, name).detach().clone()
                self._parameters.pop(name, None)
                self._buffers.pop(name, None)
                self._set(name, value)
        return self

    def params(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The op's two tensor arguments: (zero_point, scale), (min, max), or (max, max) for logarithmic."""
        if self.op == "zero_point_linear_quantize":
            return self.zero_point, self.scale
        if self.op == "logarithmic_quantize":
            return self.max, self.max
        low = -self.max if self._tied else self.min
        return low, self.max

    @property
    def channels(self) -> int | None:
        first = self.params()[1]
        return int(first.shape[0]) if first.dim() else None

    # ----------------------------------------------------------------------------------------- forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.observing and self.observer is not None:
            with torch.no_grad():
                self.observer(x.detach())
                self.set_range(*self.observer.range())
        if not self.enabled:
            return x
        a, b = self.params()
        if a.device != x.device:
            a, b = a.to(x.device), b.to(x.device)
        return quantize(x, a, b, self.op, self.bits, self.signed, self.symmetric, self._grad_scale(x))

    def _grad_scale(self, x: torch.Tensor) -> float:
        if self.grad_scale != "auto":
            return float(self.grad_scale)
        per = x.numel() // (self.channels or 1)
        top = zero_point_range(self.bits, self.signed, self.symmetric)[1]
        return 1.0 / math.sqrt(max(per, 1) * top)

    # ----------------------------------------------------------------------------------------- ranges
    @torch.no_grad()
    def set_range(self, low: Any, high: Any) -> None:
        """Set the parameters so that [low, high] (numbers, or per-channel vectors) is representable; zero always
        is (the range is widened to include it), and a symmetric signed range becomes [-m, m],
        m = max(|low|, |high|)."""
        low = torch.clamp(torch.as_tensor(low, dtype=torch.float64), max=0.0)
        high = torch.clamp(torch.as_tensor(high, dtype=torch.float64), min=0.0)
        if self.op == "logarithmic_quantize":
            self._set("max", torch.clamp(torch.maximum(-low, high), min=_TINY).float())
            return
        symmetric = self.symmetric and (self.signed or self.op == "zero_point_linear_quantize")
        if symmetric:
            high = torch.clamp(torch.maximum(-low, high), min=_TINY)
            low = -high
        high = torch.maximum(high, low + _TINY)
        if self.op != "zero_point_linear_quantize":
            self._set("min", low.float())
            self._set("max", high.float())
            return
        q_low, q_high = zero_point_range(self.bits, self.signed, self.symmetric)
        if symmetric and self.signed:
            scale, zero = high / q_high, torch.zeros_like(high)
        elif symmetric:  # unsigned, centred: zero at the middle code
            zero = torch.full_like(high, float(2 ** (self.bits - 1)))
            scale = high / (q_high - zero)
        else:
            scale = (high - low) / (q_high - q_low)
            zero = torch.clamp(torch.round(q_low - low / scale), q_low, q_high)
        self._set("scale", scale.float())
        self._set("zero_point", zero.to(torch.int64))

    # ----------------------------------------------------------------------------------------- NNEF
    def spec(self) -> QuantSpec:
        """The graph.quant entry of this quantizer (per-channel parameters as lists)."""
        a, b = self.params()
        names = {"zero_point_linear_quantize": ("zero_point", "scale"), "logarithmic_quantize": ("max",)}
        args: dict[str, Any] = {}
        for name, value in zip(names.get(self.op, ("min", "max")), (a, b)):
            value = value.detach().cpu()
            args[name] = value.tolist() if value.dim() else value.item()
        args["bits"] = self.bits
        if self.op in ("zero_point_linear_quantize", "min_max_linear_quantize"):
            args["signed"], args["symmetric"] = self.signed, self.symmetric
        return QuantSpec(self.op, args)

    @classmethod
    def from_spec(cls, spec: QuantSpec, *, learnable: bool = False) -> FakeQuantize:
        """The quantizer of a graph.quant entry (one of the four standard quantization ops)."""
        args = dict(spec.args)
        flags = {key: args.pop(key) for key in ("bits", "signed", "symmetric") if key in args}
        tensors = {key: torch.as_tensor(value, dtype=torch.float64) for key, value in args.items()}
        vectors = [t for t in tensors.values() if t.dim() > 0]
        if any(t.dim() > 1 for t in vectors):
            raise ValueError(f"{spec.op} parameters of rank {max(t.dim() for t in vectors)}; per-channel "
                             "quantization here is along axis 0 (vectors)")
        channels = max((t.shape[0] for t in vectors), default=None)
        if channels is not None:
            tensors = {key: t.expand(channels) if t.dim() == 0 else t for key, t in tensors.items()}
        return cls(spec.op, channels=channels, learnable=learnable, **flags, **tensors)

    def extra_repr(self) -> str:
        flags = [f"bits={self.bits}"] + [name for name in ("signed", "symmetric", "learnable") if getattr(self, name)]
        if self.channels is not None:
            flags.append(f"channels={self.channels}")
        if not self.enabled:
            flags.append("disabled")
        return f"{self.op}, " + ", ".join(flags)


__all__ = ["FakeQuantize"]
