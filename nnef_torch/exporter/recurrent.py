"""Recurrent layers kept whole while tracing, so that their time axis can stay symbolic.

torch's nn.LSTM and nn.GRU loop over time while torch.export traces them, which fixes the sequence length ("You
marked T as dynamic but your code specialized it"). For the tract target, where a recurrence becomes one
`tract_core_scan` (`exporter/rules/recurrence.py`), each nn.LSTM / nn.GRU is replaced before tracing by a module
that calls one custom op (`torch.ops.nnef_torch.lstm`, `torch.ops.nnef_torch.gru`) over the whole sequence: its
eager implementation is torch's own kernel, its fake implementation gives the symbolic result shapes.

`substitute` works on a shallow copy of the module tree (as `torch_ao.substitute` does): the replaced layers are
copies of the originals with another class, sharing their parameters, so the labels and the weights are the
module's own. Only the layers the scan form covers are replaced (unidirectional, no projection, no dropout
while training); the others stay as they are.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

HIDDEN = {"nnef_torch::lstm": 2, "nnef_torch::gru": 1}  # op -> number of state tensors (h, c)


def _run(mode: str, input: torch.Tensor, hx: torch.Tensor | None, cx: torch.Tensor | None,
         params: list[torch.Tensor], num_layers: int, batch_first: bool, has_biases: bool) -> tuple[Any, ...]:
    hidden = params[1].shape[1]
    batch = input.shape[0 if batch_first else 1]
    zeros = input.new_zeros(num_layers, batch, hidden)
    h0 = zeros if hx is None else hx
    if mode == "lstm":
        c0 = zeros if cx is None else cx
        output, h_n, c_n = torch.lstm(input, (h0, c0), params, has_biases, num_layers, 0.0, False, False,
                                      batch_first)
        return output, h_n, c_n
    output, h_n = torch.gru(input, h0, params, has_biases, num_layers, 0.0, False, False, batch_first)
    return output, h_n


def _fake(input: torch.Tensor, params: list[torch.Tensor], num_layers: int, batch_first: bool, states: int
          ) -> tuple[torch.Tensor, ...]:
    hidden = params[1].shape[1]
    batch, steps = (input.shape[0], input.shape[1]) if batch_first else (input.shape[1], input.shape[0])
    shape = (batch, steps, hidden) if batch_first else (steps, batch, hidden)
    return (input.new_empty(shape),) + tuple(input.new_empty(num_layers, batch, hidden) for _ in range(states))


@torch.library.custom_op("nnef_torch::lstm", mutates_args=())
def lstm(input: torch.Tensor, hx: torch.Tensor | None, cx: torch.Tensor | None, params: list[torch.Tensor],
         num_layers: int, batch_first: bool, has_biases: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """torch.nn.LSTM (unidirectional, without projection) over the whole of `input`: (output, h_n, c_n)."""
    return _run("lstm", input, hx, cx, params, num_layers, batch_first, has_biases)


@lstm.register_fake
def _lstm_fake(input: torch.Tensor, hx: torch.Tensor | None, cx: torch.Tensor | None, params: list[torch.Tensor],
               num_layers: int, batch_first: bool, has_biases: bool) -> tuple[torch.Tensor, ...]:
    return _fake(input, params, num_layers, batch_first, 2)


@torch.library.custom_op("nnef_torch::gru", mutates_args=())
def gru(input: torch.Tensor, hx: torch.Tensor | None, params: list[torch.Tensor], num_layers: int,
        batch_first: bool, has_biases: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.nn.GRU (unidirectional) over the whole of `input`: (output, h_n)."""
    return _run("gru", input, hx, None, params, num_layers, batch_first, has_biases)


@gru.register_fake
def _gru_fake(input: torch.Tensor, hx: torch.Tensor | None, params: list[torch.Tensor], num_layers: int,
              batch_first: bool, has_biases: bool) -> tuple[torch.Tensor, ...]:
    return _fake(input, params, num_layers, batch_first, 1)


def _weights(m: nn.RNNBase) -> list[torch.Tensor]:
    return [getattr(m, name) for name in m._flat_weights_names]


class ScannedLSTM(nn.LSTM):
    """An nn.LSTM traced as one `nnef_torch.lstm` op (a copy of the user's layer, sharing its parameters)."""

    def forward(self, input: Any, hx: Any = None) -> Any:  # type: ignore[override]
        if not isinstance(input, torch.Tensor) or input.dim() != 3:  # packed or unbatched: torch's own loop
            return nn.LSTM.forward(self, input, hx)
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = lstm(input, h0, c0, _weights(self), self.num_layers, self.batch_first, self.bias)
        return output, (h_n, c_n)


class ScannedGRU(nn.GRU):
    """An nn.GRU traced as one `nnef_torch.gru` op (a copy of the user's layer, sharing its parameters)."""

    def forward(self, input: Any, hx: Any = None) -> Any:  # type: ignore[override]
        if not isinstance(input, torch.Tensor) or input.dim() != 3:
            return nn.GRU.forward(self, input, hx)
        output, h_n = gru(input, hx, _weights(self), self.num_layers, self.batch_first, self.bias)
        return output, h_n


REPLACEMENTS: dict[type, type] = {nn.LSTM: ScannedLSTM, nn.GRU: ScannedGRU}


def _covered(m: Any) -> bool:
    """Whether `m` is an nn.LSTM / nn.GRU (exactly: not a subclass with a forward of its own) that the scan form
    covers."""
    return (type(m) in REPLACEMENTS and not m.bidirectional and not getattr(m, "proj_size", 0)
            and not (m.training and m.dropout and m.num_layers > 1))


def has_recurrence(module: nn.Module) -> bool:
    """Whether `module` holds a recurrent layer `substitute` replaces."""
    return isinstance(module, nn.Module) and any(_covered(m) for m in module.modules())


def substitute(module: nn.Module) -> nn.Module:
    """`module`, or a shallow copy of it whose nn.LSTM / nn.GRU layers are traced as one op each."""
    if not has_recurrence(module):
        return module
    containing: dict[int, bool] = {}

    def contains(m: nn.Module) -> bool:
        key = id(m)
        if key not in containing:
            containing[key] = False  # a module reachable from itself stops here
            containing[key] = _covered(m) or any(contains(c) for c in m._modules.values() if c is not None)
        return containing[key]

    done: dict[int, nn.Module] = {}  # shared submodules stay shared

    def rebuild(m: nn.Module) -> nn.Module:
        if id(m) in done:
            return done[id(m)]
        if not contains(m):
            return m
        new: nn.Module = object.__new__(REPLACEMENTS[type(m)] if _covered(m) else type(m))
        new.__dict__ = dict(m.__dict__)
        new.__dict__["_modules"] = type(m._modules)(
            (name, None if child is None else rebuild(child)) for name, child in m._modules.items())
        done[id(m)] = new
        return new

    return rebuild(module)


__all__ = ["ScannedGRU", "ScannedLSTM", "gru", "has_recurrence", "lstm", "substitute"]
