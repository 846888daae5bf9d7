"""Recurrent cells (LSTM, GRU, plain RNN) unrolled over a static sequence into NNEF operations: the part of a fused
recurrent operator that does not depend on the file format (MXNet's RNN, ONNX's LSTM, GRU and RNN).

A cell's weights are laid out for NNEF's `linear`: an input weight (G*H, C), a hidden weight (G*H, H) and biases
(1, G*H) or 0.0, where G gates of H rows each are stacked in an order each format names with letters: `i f g o` for
an LSTM's input, forget, cell and output gates (MXNet and torch; ONNX stacks `i o f g`), `r z n` for a GRU's reset,
update and new gates (ONNX: `z r n`), `n` for a plain RNN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref

GATE_NAMES = {"lstm": "ifgo", "gru": "rzn", "rnn": "n"}
DEFAULT_ACTIVATIONS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh"), "rnn": ("tanh",)}


@dataclass(frozen=True)
class CellKind:
    """What a cell computes. `activations` are NNEF ops: an LSTM's (gates, cell input, cell output), a GRU's
    (gates, new gate), a plain RNN's one. `reset_after`: a GRU's reset gate scales the hidden projection, bias
    included (torch, MXNet, ONNX linear_before_reset=1), rather than the hidden state before it. `gate_clip`
    clamps every gate's pre-activation to [-clip, clip] (ONNX); `cell_clip` clamps an LSTM's cell state after each
    step (MXNet)."""
    mode: str
    order: str
    activations: tuple[str, ...]
    reset_after: bool = True
    gate_clip: float | None = None
    cell_clip: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        assert sorted(self.order) == sorted(GATE_NAMES[self.mode]), (self.mode, self.order)
        assert len(self.activations) == len(DEFAULT_ACTIVATIONS[self.mode]), (self.mode, self.activations)

    @property
    def gates(self) -> int:
        return len(self.order)


class Cell:
    """One direction of one layer: its hidden weights and the step function of its kind. `peepholes` (LSTM only)
    are the (1, H) weights of the cell state added to the input, forget and output gates (ONNX's P);
    `projection` (LSTM only) the (P, H) weight that projects the hidden state (MXNet's h2r)."""

    def __init__(self, b: Builder, kind: CellKind, hidden: int, w_hh: Any, b_hh: Any, *,
                 peepholes: tuple[Any, Any, Any] | None = None, projection: Any = None):
        self.b, self.kind, self.hidden = b, kind, hidden
        self.w_hh, self.b_hh, self.peepholes, self.projection = w_hh, b_hh, peepholes, projection
        if kind.mode == "gru" and not kind.reset_after:  # the new gate's hidden rows apply to r * h, apart
            self.w_hh, self.b_hh, self.w_new, self.b_new = self._split_new_gate(w_hh, b_hh)

    def _split_new_gate(self, w_hh: Any, b_hh: Any) -> tuple[Any, Any, Any, Any]:
        """The hidden weight (G*H, H) and bias (1, G*H) cut into the rows of the reset and update gates and those
        of the new gate."""
        b, h, at = self.b, self.hidden, self.kind.order.index("n")
        others = [k for k in range(3) if k != at]

        def cut(tensor: Any, axis: int) -> tuple[Any, Any]:
            if not isinstance(tensor, Ref):  # a literal bias
                return tensor, tensor
            new = b.op("slice", tensor, axes=[axis], begin=[at * h], end=[(at + 1) * h])
            if others[1] == others[0] + 1:
                return b.op("slice", tensor, axes=[axis], begin=[others[0] * h], end=[(others[1] + 1) * h]), new
            parts = [b.op("slice", tensor, axes=[axis], begin=[k * h], end=[(k + 1) * h]) for k in others]
            return b.op("concat", parts, axis=axis), new

        (w_others, w_new), (b_others, b_new) = cut(w_hh, 0), cut(b_hh, 1)
        return w_others, b_others, w_new, b_new

    def _split(self, x: Any, order: str) -> dict[str, Any]:
        parts = self.b.op("split", x, axis=1, ratios=[1] * len(order)) if len(order) > 1 else [x]
        return dict(zip(order, parts))

    def _activate(self, which: int, pre: Any) -> Any:
        if self.kind.gate_clip is not None:
            pre = self.b.op("clamp", pre, -self.kind.gate_clip, self.kind.gate_clip)
        return self.b.op(self.kind.activations[which], pre)

    def step(self, projected: Any, h: Any, c: Any) -> tuple[Any, Any]:
        """One time step: the input's projection (N, G*H), with its bias, and the states (N, H): the new states."""
        b, mode = self.b, self.kind.mode
        recurrent = b.op("linear", h, self.w_hh, self.b_hh)
        if mode == "rnn":
            return self._activate(0, b.op("add", projected, recurrent)), None
        if mode == "gru":
            return self._gru(projected, recurrent, h), None
        gates = self._split(b.op("add", projected, recurrent), self.kind.order)
        i, f, g, o = (gates[name] for name in "ifgo")
        if self.peepholes is not None:
            p_i, p_f, p_o = self.peepholes
            i, f = b.op("add", i, b.op("mul", p_i, c)), b.op("add", f, b.op("mul", p_f, c))
        c = b.op("add", b.op("mul", self._activate(0, f), c), b.op("mul", self._activate(0, i), self._activate(1, g)))
        if self.kind.cell_clip is not None:
            c = b.op("clamp", c, self.kind.cell_clip[0], self.kind.cell_clip[1])
        if self.peepholes is not None:
            o = b.op("add", o, b.op("mul", self.peepholes[2], c))
        h = b.op("mul", self._activate(0, o), b.op(self.kind.activations[2], c))
        if self.projection is not None:
            h = b.op("linear", h, self.projection, 0.0)
        return h, c

    def _gru(self, projected: Any, recurrent: Any, h: Any) -> Any:
        b, order = self.b, self.kind.order
        x = self._split(projected, order)
        hidden = self._split(recurrent, order if self.kind.reset_after else order.replace("n", ""))
        r = self._activate(0, b.op("add", x["r"], hidden["r"]))
        z = self._activate(0, b.op("add", x["z"], hidden["z"]))
        if self.kind.reset_after:
            reset = b.op("mul", r, hidden["n"])
        else:
            reset = b.op("linear", b.op("mul", r, h), self.w_new, self.b_new)
        n = self._activate(1, b.op("add", x["n"], reset))
        return b.op("add", n, b.op("mul", z, b.op("sub", h, n)))  # (1 - z) * n + z * h


def unroll(b: Builder, cell: Cell, x: Any, w_ih: Any, b_ih: Any, h: Any, c: Any,
           reverse: bool) -> tuple[Any, Any, Any]:
    """Run one direction over the sequence x (T, N, C) from the states h and c (N, H; c None but for an LSTM): its
    outputs (T, N, H) and final states."""
    steps, batch, channels = b.shape(x)
    flat = b.op("reshape", x, shape=[steps * batch, channels])
    projected = b.op("reshape", b.op("linear", flat, w_ih, b_ih), shape=[steps, batch, cell.kind.gates * cell.hidden])
    inputs = b.op("unstack", projected, axis=0) if steps > 1 else [b.op("squeeze", projected, axes=[0])]
    outputs: list[Any] = [None] * steps
    for t in (reversed(range(steps)) if reverse else range(steps)):
        h, c = cell.step(inputs[t], h, c)
        outputs[t] = h
    sequence = b.op("stack", outputs, axis=0) if steps > 1 else b.op("unsqueeze", outputs[0], axes=[0])
    return sequence, h, c
