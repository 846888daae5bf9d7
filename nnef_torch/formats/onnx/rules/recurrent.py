"""ONNX's recurrent operators LSTM, GRU and RNN (opsets 7 to 21; `layout` from opset 14), unrolled over their
static sequence length by the cells of `formats.recurrent_cells`.

W (D, G*H, C), R (D, G*H, H), B (D, 2*G*H) and P (D, 3*H) are sliced per direction inside the graph, so that
gradients reach the file's initializers. ONNX stacks an LSTM's gates i, o, f, c and a GRU's z, r, h. The activations
may be Sigmoid, Tanh or Relu (those without alpha or beta); `clip` clamps every gate's pre-activation. Every batch
item must run the whole sequence: sequence_lens is absent, or known and full for each item. Outputs: Y (T, D, N, H),
or (N, T, D, H) with layout 1; Y_h and Y_c (D, N, H), or (N, D, H)."""
from __future__ import annotations

from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.formats.recurrent_cells import DEFAULT_ACTIVATIONS, Cell, CellKind, unroll
from nnef_torch.ir import limits
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
MODES = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}
GATE_ORDERS = {"lstm": "iofg", "gru": "zrn", "rnn": "n"}
ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
ONNX_NAMES = {nnef: onnx for onnx, nnef in ACTIVATIONS.items()}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
MAX_CELL_STEPS = 1 << 10  # the cell is unrolled: a dozen operations or so per step


def _kinds(node: OnnxNode, mode: str, directions: int) -> list[CellKind]:
    """The cell of each direction, from the attributes activations, activation_alpha/beta, clip and the mode's own."""
    per_direction = len(DEFAULT_ACTIVATIONS[mode])
    default = [ONNX_NAMES[name] for name in DEFAULT_ACTIVATIONS[mode]] * directions
    names = [name.decode("utf-8", errors="replace") if isinstance(name, bytes) else str(name)
             for name in node.attr("activations", default)]
    if len(names) != per_direction * directions:
        raise node.fail(f"activations {names} must name {per_direction} function(s) per direction "
                        f"({directions} direction(s))")
    unknown = sorted({name for name in names if name not in ACTIVATIONS})
    if unknown:
        raise node.fail(f"activation(s) {unknown} are not supported (supported: {sorted(ACTIVATIONS)})")
    for key in ("activation_alpha", "activation_beta"):
        if node.attr(key) is not None:
            raise node.fail(f"attribute '{key}' is not supported (only activations without parameters are)")
    clip = node.attr("clip")
    if clip is not None and not float(clip) > 0.0:
        raise node.fail(f"clip must be positive, found {clip}")
    reset_after = True
    if mode == "lstm":
        node.only("input_forget", (0,), 0)
    elif mode == "gru":
        reset_after = bool(node.only("linear_before_reset", (0, 1), 0))
    return [CellKind(mode, GATE_ORDERS[mode],
                     tuple(ACTIVATIONS[name] for name in names[d * per_direction:(d + 1) * per_direction]),
                     reset_after=reset_after, gate_clip=None if clip is None else float(clip))
            for d in range(directions)]


def _check_shape(node: OnnxNode, position: int, what: str, expected: list[int]) -> Any:
    """Input `position` as a tensor of shape `expected`."""
    if list(node.shape(position)) != expected:
        raise node.fail(f"input {what} must have shape {expected}, found {list(node.shape(position))}")
    return node.tensor(position)


def _kept_row(b: Builder, tensor: Any, d: int, axis: int = 0) -> Any:
    """Row d of a per-direction tensor (D, ...) along `axis`, which it keeps as an axis of extent 1."""
    if b.shape(tensor)[axis] == 1:
        return tensor
    return b.op("slice", tensor, axes=[axis], begin=[d], end=[d + 1])


def _row(b: Builder, tensor: Any, d: int, axis: int = 0) -> Any:
    """Row d of a per-direction tensor (D, ...) along `axis`, without that axis."""
    return b.op("squeeze", _kept_row(b, tensor, d, axis), axes=[axis])


def _columns(b: Builder, row: Any, width: int, count: int) -> list[Any]:
    """A (1, count*width) row cut into `count` pieces (1, width)."""
    return [b.op("slice", row, axes=[1], begin=[k * width], end=[(k + 1) * width]) for k in range(count)]


def _check_lengths(node: OnnxNode, steps: int, batch: int) -> None:
    if not node.has(4):
        return
    if not node.known(4):
        raise node.fail("sequence_lens is computed in the graph; nnef_torch unrolls the whole sequence and reads "
                        "sequence_lens only when it is known while converting and full for every batch item")
    lengths = node.ints(4, "sequence_lens")
    if lengths != [steps] * batch:
        raise node.fail(f"sequence_lens {lengths} must be the full length {steps} for each of the {batch} batch "
                        "items (sequences of different lengths are not supported)")


@import_rule("linear", ONNX, "LSTM", "GRU", "RNN")
def recurrent(b: Builder, node: OnnxNode) -> Any:
    mode = MODES[node.op]
    direction = node.only("direction", tuple(DIRECTIONS), "forward")
    directions = DIRECTIONS[direction]
    layout = node.only("layout", (0, 1), 0)
    kinds = _kinds(node, mode, directions)
    if node.rank(0) != 3:
        raise node.fail(f"X must have rank 3, found shape {list(node.shape(0))}")
    x = node.tensor(0)
    if layout == 1:
        x = b.op("transpose", x, axes=[1, 0, 2])
    steps, batch, channels = b.shape(x)
    gates = len(GATE_ORDERS[mode])
    hidden = int(node.attr("hidden_size", node.shape(2)[-1] if node.has(2) else 0))
    if hidden <= 0:
        raise node.fail(f"hidden_size must be positive, found {hidden}")
    limits.check_count(f"{node.where}: cell steps (time steps x directions)", steps * directions, MAX_CELL_STEPS,
                       Location(file=node.file), error=ForeignFormatError)
    _check_lengths(node, steps, batch)
    w = _check_shape(node, 1, "W", [directions, gates * hidden, channels])
    r = _check_shape(node, 2, "R", [directions, gates * hidden, hidden])
    bias = _check_shape(node, 3, "B", [directions, 2 * gates * hidden]) if node.has(3) else None
    state_shape = [batch, directions, hidden] if layout == 1 else [directions, batch, hidden]
    initial_h = _check_shape(node, 5, "initial_h", state_shape) if node.has(5) else None
    initial_c = _check_shape(node, 6, "initial_c", state_shape) if mode == "lstm" and node.has(6) else None
    peepholes = _check_shape(node, 7, "P", [directions, 3 * hidden]) if mode == "lstm" and node.has(7) else None
    zeros = b.op("constant", shape=[batch, hidden], value=[0.0], generic="scalar", out_shape=(batch, hidden))
    sequences, finals_h, finals_c = [], [], []
    for d, kind in enumerate(kinds):
        b_ih, b_hh = _columns(b, _kept_row(b, bias, d), gates * hidden, 2) if bias is not None else (0.0, 0.0)
        peephole = None
        if peepholes is not None:
            p_i, p_o, p_f = _columns(b, _kept_row(b, peepholes, d), hidden, 3)
            peephole = (p_i, p_f, p_o)
        h, c = (zeros if state is None else _row(b, state, d, layout) for state in (initial_h, initial_c))
        c = c if mode == "lstm" else None
        cell = Cell(b, kind, hidden, _row(b, r, d), b_hh, peepholes=peephole)
        sequence, h, c = unroll(b, cell, x, _row(b, w, d), b_ih, h, c,
                                reverse=direction == "reverse" or d == 1)
        sequences.append(sequence)
        finals_h.append(h)
        finals_c.append(c)
    y = _stack(b, sequences, 2 if layout == 1 else 1)
    if layout == 1:
        y = b.op("transpose", y, axes=[1, 0, 2, 3])
    outputs = [y, _stack(b, finals_h, layout)]
    return tuple(outputs + [_stack(b, finals_c, layout)]) if mode == "lstm" else tuple(outputs)


def _stack(b: Builder, tensors: list[Any], axis: int) -> Any:
    return b.op("stack", tensors, axis=axis) if len(tensors) > 1 else b.op("unsqueeze", tensors[0], axes=[axis])
