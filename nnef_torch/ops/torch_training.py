"""Operations whose behaviour follows the module's training mode, implemented as submodules of the imported module
(`registry.torch_module`): batch normalization that keeps moving statistics, and dropout. In eval mode each computes
its NNEF definition (inference batch normalization; a copy), so a saved model means the same to every consumer."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch.ops.registry import torch_module
from nnef_torch.ops.torch_reduce import batch_normalization


def _channel_vector(value: Any, channels: int, like: torch.Tensor, neutral: float) -> torch.Tensor | None:
    """An affine parameter ((C,), (1,) or a number) as the (C,) vector F.batch_norm takes; None for `neutral`."""
    if isinstance(value, torch.Tensor):
        return value if value.shape == (channels,) else value.reshape(-1).expand(channels)
    if float(value) == neutral:
        return None
    return torch.full((channels,), float(value), dtype=like.dtype, device=like.device)


@torch_module("batch_norm_moving", state=("mean", "variance"))
class BatchNormMoving(torch.nn.Module):
    """Batch normalization over axis 1 with moving statistics (C,) and affine parameters (C,) or numbers.
    Training mode normalizes with the batch's statistics (biased variance) and moves the statistics toward them:
    s <- (1 - momentum) * s + momentum * batch, where momentum is torch's convention (MXNet's momentum m is 1 - momentum
    here). Eval mode uses the moving ones."""

    def __init__(self, epsilon: float, momentum: float):
        super().__init__()
        self.epsilon = float(epsilon)
        self.momentum = float(momentum)

    def forward(self, input: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, offset: Any,
                scale: Any) -> torch.Tensor:
        channels = input.shape[1]
        weight, bias = _channel_vector(scale, channels, input, 1.0), _channel_vector(offset, channels, input, 0.0)
        if not self.training:
            if mean.requires_grad or variance.requires_grad:  # statistics a caller made trainable
                return batch_normalization(input, *(value.reshape(1, -1) if isinstance(value, torch.Tensor) else value
                                                    for value in (mean, variance, offset, scale)),
                                           epsilon=self.epsilon)
            return F.batch_norm(input, mean, variance, weight, bias, False, 0.0, self.epsilon)
        output = F.batch_norm(input, None, None, weight, bias, True, 0.0, self.epsilon)
        with torch.no_grad():
            dims = [0] + list(range(2, input.dim()))
            batch_variance, batch_mean = torch.var_mean(input.detach(), dim=dims, correction=0)
            mean.lerp_(batch_mean.to(mean.dtype), self.momentum)
            variance.lerp_(batch_variance.to(variance.dtype), self.momentum)
        return output

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}, momentum={self.momentum}"


@torch_module("dropout")
class Dropout(torch.nn.Module):
    """Zeroes items with probability `rate` in training mode, scaling the rest by 1 / (1 - rate); items along
    `axes` share one decision (MXNet's variational dropout). A copy in eval mode."""

    def __init__(self, rate: float, axes: Sequence[int] = ()):
        super().__init__()
        self.rate = float(rate)
        self.axes = tuple(int(axis) for axis in axes)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.rate == 0.0:
            return input
        if not self.axes:
            return F.dropout(input, self.rate, True)
        shape = [1 if axis in self.axes else extent for axis, extent in enumerate(input.shape)]
        keep = torch.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1.0 - self.rate)
        return input * keep / (1.0 - self.rate)

    def extra_repr(self) -> str:
        return f"rate={self.rate}" + (f", axes={self.axes}" if self.axes else "")
