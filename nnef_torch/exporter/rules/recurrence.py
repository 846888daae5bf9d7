"""Recurrent layers over a symbolic sequence length, for the tract target: `torch.ops.nnef_torch.lstm` and
`torch.ops.nnef_torch.gru` (the whole layer, kept as one op while tracing: `exporter/recurrent.py`) as one
`tract_core_scan` per layer.

Each layer is one invocation of a fragment of `formats/tract_core/recurrence.nnef` (`nnef_torch_lstm`,
`nnef_torch_gru`) over the time-major sequence [T, B, I]: the input's share of every gate is computed for all steps
at once, and the scan runs the step fragment once per step, carrying h (and c). The weights are the module's own
variables, cut per gate by `slice` (tract folds them when it loads); the biases of the input and the recurrence are
added where torch adds them. A missing initial state is zeros, tiled from one value to [1, B, H] (B may be
symbolic). The file's operations do not depend on T: tract runs it at any length, and nnef_torch's reader unrolls
the scan at the length of each call.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nnef_torch.exporter.rules.common import Emitter, Unmappable
from nnef_torch.ops.registry import export_rule

LSTM_GATES = 4  # i, f, g, o (torch's order)
GRU_GATES = 3  # r, z, n


def _gate(e: Emitter, weight: Any, index: int, hidden: int) -> Any:
    """Rows `index * hidden` .. of a stacked weight [G*H, K] as [1, H, K], or of a bias [G*H] as [1, 1, H]."""
    part = e.op("slice", weight, axes=[0], begin=[index * hidden], end=[(index + 1) * hidden])
    return e.op("unsqueeze", part, axes=[0] if e.rank(weight) == 2 else [0, 1])


def _zeros_bias(e: Emitter, hidden: int, name: str) -> Any:
    return e.variable(f"constants/{e.node.name}_{name}", torch.zeros(1, 1, hidden))


def _initial(e: Emitter, state: Any, layer: int, batch: Any, hidden: int, name: str) -> Any:
    """The initial state of `layer` as [1, B, H]: a slice of the given [L, B, H], or zeros."""
    if state is not None:
        return e.op("slice", state, axes=[0], begin=[layer], end=[layer + 1])
    one = e.variable(f"constants/{e.node.name}_{name}{layer}", torch.zeros(1, 1, 1))
    return e.op("tile", one, repeats=[1, batch, hidden])


def _check(e: Emitter, x: Any, params: Sequence[Any], num_layers: int, has_biases: bool, what: str) -> int:
    per_layer = 4 if has_biases else 2
    if e.target != "tract":
        raise Unmappable(f"{what} over a whole sequence is written as tract_core_scan, for target='tract' only")
    if e.rank(x) != 3 or len(params) != per_layer * num_layers:
        raise Unmappable(f"{what} takes a batched sequence (rank 3) and {per_layer} weights per layer; found rank "
                         f"{e.rank(x)} and {len(params)} weights for {num_layers} layer(s)")
    return per_layer


def _sequence(e: Emitter, x: Any, batch_first: bool) -> tuple[Any, Any]:
    """The input as [T, B, I] and its batch extent (an `Extent` when symbolic)."""
    axis = 0 if batch_first else 1
    symbolic = e.symbolic_shape(0)
    batch = e.extent(symbolic[axis]) if symbolic is not None else e.shape(x)[axis]
    return (e.op("transpose", x, axes=[1, 0, 2]) if batch_first else x), batch


def _finish(e: Emitter, output: Any, finals: list[list[Any]], batch_first: bool) -> tuple[Any, ...]:
    if batch_first:
        output = e.op("transpose", output, axes=[1, 0, 2])
    states = tuple(parts[0] if len(parts) == 1 else e.op("concat", parts, axis=0) for parts in finals)
    return (output,) + states


@export_rule("nnef_torch_lstm", "nnef_torch.lstm.default")
def lstm(e: Emitter, x: Any, hx: Any, cx: Any, params: Sequence[Any], num_layers: int, batch_first: bool,
         has_biases: bool) -> Any:
    per_layer = _check(e, x, params, num_layers, has_biases, "nn.LSTM")
    sequence, batch = _sequence(e, x, batch_first)
    e.define("nnef_torch_lstm_step")
    finals: list[list[Any]] = [[], []]
    for layer in range(num_layers):
        w_ih, w_hh = params[per_layer * layer], params[per_layer * layer + 1]
        hidden = e.shape(w_hh)[1]
        if has_biases:
            bias = e.op("add", params[per_layer * layer + 2], params[per_layer * layer + 3])
            biases = [_gate(e, bias, k, hidden) for k in range(LSTM_GATES)]
        else:
            biases = [_zeros_bias(e, hidden, f"bias{layer}")] * LSTM_GATES
        h0 = _initial(e, hx, layer, batch, hidden, "h")
        c0 = _initial(e, cx, layer, batch, hidden, "c")
        steps, width = e.shape(sequence)[0], e.shape(sequence)[1]
        state = (1, width, hidden)
        sequence, h_n, c_n = e.op(
            "nnef_torch_lstm", sequence, h0, c0, *[_gate(e, w_ih, k, hidden) for k in range(LSTM_GATES)],
            *[_gate(e, w_hh, k, hidden) for k in range(LSTM_GATES)], *biases,
            out_shape=((steps, width, hidden), state, state))
        finals[0].append(h_n)
        finals[1].append(c_n)
    return _finish(e, sequence, finals, batch_first)


@export_rule("nnef_torch_gru", "nnef_torch.gru.default")
def gru(e: Emitter, x: Any, hx: Any, params: Sequence[Any], num_layers: int, batch_first: bool,
        has_biases: bool) -> Any:
    per_layer = _check(e, x, params, num_layers, has_biases, "nn.GRU")
    sequence, batch = _sequence(e, x, batch_first)
    e.define("nnef_torch_gru_step")
    finals: list[list[Any]] = [[]]
    for layer in range(num_layers):
        w_ih, w_hh = params[per_layer * layer], params[per_layer * layer + 1]
        hidden = e.shape(w_hh)[1]
        if has_biases:
            b_ih, b_hh = params[per_layer * layer + 2], params[per_layer * layer + 3]
            # r and z add both biases before the gate; n adds b_hn to the recurrence, scaled by r
            b_r = e.op("add", _gate(e, b_ih, 0, hidden), _gate(e, b_hh, 0, hidden))
            b_z = e.op("add", _gate(e, b_ih, 1, hidden), _gate(e, b_hh, 1, hidden))
            biases = [b_r, b_z, _gate(e, b_ih, 2, hidden), _gate(e, b_hh, 2, hidden)]
        else:
            biases = [_zeros_bias(e, hidden, f"bias{layer}")] * 4
        h0 = _initial(e, hx, layer, batch, hidden, "h")
        steps, width = e.shape(sequence)[0], e.shape(sequence)[1]
        sequence, h_n = e.op(
            "nnef_torch_gru", sequence, h0, *[_gate(e, w_ih, k, hidden) for k in range(GRU_GATES)],
            *[_gate(e, w_hh, k, hidden) for k in range(GRU_GATES)], *biases,
            out_shape=((steps, width, hidden), (1, width, hidden)))
        finals[0].append(h_n)
    return _finish(e, sequence, finals, batch_first)
