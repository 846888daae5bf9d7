"""MXNet's fused RNN operator (modes lstm, gru, rnn_tanh and rnn_relu; several layers; bidirectional; LSTM projection
and cell clipping), unrolled over its static sequence length into NNEF operations.

The data is (T, N, C). The flat parameter vector holds, for each layer and direction in the order l0, r0, l1, r1,
..., the input and hidden weights i2h (G*H, C) and h2h (G*H, H, or P with a projection), and h2r (P, H) with a
projection; then the biases i2h and h2h (G*H) in the same order. G is the number of gates: 4 for an LSTM (i, f, g,
o), 3 for a GRU (r, z, n), 1 otherwise. A vector read from the parameters is unpacked into named variables
(`<vector>/l0_i2h_weight`, ...), so that each weight is a Parameter of its own; one computed in the graph (Gluon's
`_rnn_param_concat` of its named weights) is sliced. Dropout `p` acts between layers in training mode only.
The cells are `formats.recurrent_cells`'.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.formats.recurrent_cells import DEFAULT_ACTIVATIONS, GATE_NAMES, Cell, CellKind, unroll
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
MAX_CELL_STEPS = 1 << 10  # the cell is unrolled: a dozen operations or so per step
DIRECTIONS = ("l", "r")


def parameter_layout(mode: str, layers: int, directions: int, inputs: int, hidden: int,
                     projection: int | None) -> list[tuple[str, tuple[int, ...]]]:
    """The named pieces of the flat parameter vector, in order, with their shapes."""
    rows = GATES[mode] * hidden
    width = projection or hidden  # what the hidden state holds between steps
    weights: list[tuple[str, tuple[int, ...]]] = []
    biases: list[tuple[str, tuple[int, ...]]] = []
    for layer in range(layers):
        fan_in = inputs if layer == 0 else width * directions
        for direction in DIRECTIONS[:directions]:
            prefix = f"{direction}{layer}_"
            weights += [(prefix + "i2h_weight", (rows, fan_in)), (prefix + "h2h_weight", (rows, width))]
            if projection:
                weights.append((prefix + "h2r_weight", (projection, hidden)))
            biases += [(prefix + "i2h_bias", (rows,)), (prefix + "h2h_bias", (rows,))]
    return weights + biases


def _pieces(b: Builder, node: OpNode, layout: Sequence[tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    total = sum(math.prod(shape) for _, shape in layout)
    flat = node.param(1, [total], "flat parameter vector")
    stored = node.param_data(1)
    pieces, offset = {}, 0
    for name, shape in layout:
        size = math.prod(shape)
        if stored is not None:
            label, values = stored
            data = np.ascontiguousarray(np.asarray(values).reshape(-1)[offset:offset + size].reshape(shape))
            pieces[name] = b.variable(f"{label}/{name}", b.dtype(flat), shape, data)
        else:
            part = b.op("slice", flat, axes=[0], begin=[offset], end=[offset + size])
            pieces[name] = b.op("reshape", part, shape=list(shape))
        if len(shape) == 1:  # a bias, laid out for `linear`
            pieces[name] = b.op("reshape", pieces[name], shape=[1, shape[0]])
        offset += size
    return pieces


def _initial(b: Builder, state: Any, index: int) -> Any:
    """Row `index` of a (L*D, N, X) state: (N, X)."""
    row = b.op("slice", state, axes=[0], begin=[index], end=[index + 1])
    return b.op("squeeze", row, axes=[0])


def _kind(mode: str, clip: tuple[float, float] | None) -> CellKind:
    """MXNet's gate orders (LSTM i, f, g, o; GRU r, z, n) and cell-state clipping."""
    base = {"rnn_tanh": "rnn", "rnn_relu": "rnn"}.get(mode, mode)
    activations = ("relu",) if mode == "rnn_relu" else DEFAULT_ACTIVATIONS[base]
    return CellKind(base, GATE_NAMES[base], activations, cell_clip=clip)


@import_rule("linear", NNVM, "RNN", params=(1,))
def rnn(b: Builder, node: OpNode) -> Any:
    mode = node.attrs.choice("mode", tuple(GATES))
    hidden, layers = node.attrs.int("state_size"), node.attrs.int("num_layers")
    directions = 2 if node.attrs.bool("bidirectional", False) else 1
    projection = node.attrs.int("projection_size", None)
    rate = node.attrs.float("p", 0.0)
    state_outputs = node.attrs.bool("state_outputs", False)
    low, high = node.attrs.float("lstm_state_clip_min", None), node.attrs.float("lstm_state_clip_max", None)
    if node.attrs.bool("lstm_state_clip_nan", False):
        raise node.fail("lstm_state_clip_nan is not supported")
    if node.attrs.bool("use_sequence_length", False):
        raise node.fail("use_sequence_length (sequences of different lengths in one batch) is not supported")
    if hidden <= 0 or layers <= 0:
        raise node.fail(f"state_size {hidden} and num_layers {layers} must be positive")
    if projection is not None and (mode != "lstm" or projection <= 0):
        raise node.fail(f"projection_size {projection} needs mode lstm and a positive size")
    if (low is None) != (high is None) or (low is not None and (mode != "lstm" or low > high)):
        raise node.fail("lstm_state_clip_min and lstm_state_clip_max are given together, for an LSTM, with min <= max")
    if not 0.0 <= rate < 1.0:
        raise node.fail(f"the dropout rate p must be in [0, 1), found {rate}")
    node.arity(4 if mode == "lstm" else 3)
    x = node.input(0)
    if b.rank(x) != 3:
        raise node.fail(f"the data must be (sequence, batch, channels), found shape {list(b.shape(x))}")
    steps, batch, channels = b.shape(x)
    node.results("cell steps (time steps x layers x directions)", steps * layers * directions, MAX_CELL_STEPS)
    width = projection or hidden
    states = [node.input(2)] + ([node.input(3)] if mode == "lstm" else [])
    for state, extent, what in zip(states, (width, hidden), ("state", "state_cell")):
        expected = [layers * directions, batch, extent]
        if list(b.shape(state)) != expected:
            raise node.fail(f"input '{what}' must have shape {expected}, found {list(b.shape(state))}")
    weights = _pieces(b, node, parameter_layout(mode, layers, directions, channels, hidden, projection))
    kind = _kind(mode, None if low is None else (float(low), float(high)))
    finals_h, finals_c = [], []
    for layer in range(layers):
        if layer > 0 and rate > 0.0:
            x = b.op("dropout", x, rate=float(rate))
        sequences = []
        for d in range(directions):
            prefix = f"{DIRECTIONS[d]}{layer}_"
            index = layer * directions + d
            h = _initial(b, states[0], index)
            c = _initial(b, states[1], index) if mode == "lstm" else None
            cell = Cell(b, kind, hidden, weights[prefix + "h2h_weight"], weights[prefix + "h2h_bias"],
                        projection=weights.get(prefix + "h2r_weight"))
            sequence, h, c = unroll(b, cell, x, weights[prefix + "i2h_weight"], weights[prefix + "i2h_bias"], h, c,
                                    reverse=d == 1)
            sequences.append(sequence)
            finals_h.append(h)
            finals_c.append(c)
        x = sequences[0] if directions == 1 else b.op("concat", sequences, axis=2)
    if not state_outputs:
        return x
    stacked = [b.op("stack", finals, axis=0) if len(finals) > 1 else b.op("unsqueeze", finals[0], axes=[0])
               for finals in ([finals_h, finals_c] if mode == "lstm" else [finals_h])]
    return (x, *stacked)
