"""Gradients through a re-imported export: the `.grad` of inputs and parameters after one backward pass must equal
those of the original torch module (the independent reference)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

import nnef_torch
from exporter.consumers import close


def _outputs(value: Any) -> list[torch.Tensor]:
    return [v for v in (value if isinstance(value, (tuple, list)) else [value]) if v.is_floating_point()]


def _backward(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """Input gradients of sum(output * w) with fixed weights w per output."""
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    outs = _outputs(module(*leaves))
    gen = torch.Generator().manual_seed(7)
    loss = sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outs)
    loss.backward()
    return [x.grad for x in leaves if x.is_floating_point()]


def check_gradients(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], folder: Path,
                    rtol: float = 1e-4) -> torch.nn.Module:
    """Re-import the export saved in `folder`; its input and parameter gradients must equal the module's."""
    original = copy.deepcopy(module)
    loaded = nnef_torch.load(folder)
    expected, found = _backward(original, inputs), _backward(loaded, inputs)
    assert len(found) == len(expected) and all(g is not None for g in found)
    for f, x in zip(found, expected):
        close(f, x, rtol)
    params = dict(loaded.named_parameters())
    for name, p in original.named_parameters():
        assert name in params, f"parameter {name} missing after re-import"
        close(params[name].grad.reshape(p.grad.shape), p.grad, rtol)  # declared as read: a bias is [1, C]
    return loaded
