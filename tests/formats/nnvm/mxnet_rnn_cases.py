"""The fused RNN operator's fixtures: MXNet's `RNN` through the symbol API (one flat parameter vector, as
`Module.save_checkpoint` stores it) and Gluon's recurrent layers (named weights joined by `_rnn_param_concat`, and
`SwapAxis` for the batch-major layout). Imports MXNet: only `make_fixtures.py` imports it, never a test."""
from __future__ import annotations

import tempfile
from pathlib import Path

import mxnet as mx
import numpy as np

from formats.nnvm.mxnet_op_cases import Built, case, normal

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
T, N, C = 5, 3, 4  # sequence length, batch, input channels


def _flat_size(mode: str, hidden: int, layers: int, directions: int, projection: int | None) -> int:
    rows, width, size = GATES[mode] * hidden, projection or hidden, 0
    for layer in range(layers):
        fan_in = C if layer == 0 else width * directions
        size += directions * (rows * fan_in + rows * width + 2 * rows + (projection or 0) * hidden)
    return size


def symbol_rnn(name: str, mode: str, hidden: int, layers: int = 1, bidirectional: bool = False,
               state_outputs: bool = True, projection: int | None = None, p: float = 0.0) -> None:
    """`mx.sym.RNN` over a flat `rnn_parameters` vector, the states given as inputs."""
    def build(rs: np.random.RandomState) -> Built:
        directions = 2 if bidirectional else 1
        width = projection or hidden
        inputs = {"data": normal(rs, T, N, C), "state": normal(rs, layers * directions, N, width, scale=0.5)}
        arguments = dict(data=mx.sym.var("data"), parameters=mx.sym.var("rnn_parameters"),
                         state=mx.sym.var("state"), state_size=hidden, num_layers=layers, mode=mode,
                         bidirectional=bidirectional, state_outputs=state_outputs, p=p, name="rnn")
        if projection:
            arguments["projection_size"] = projection
        if mode == "lstm":
            inputs["state_cell"] = normal(rs, layers * directions, N, hidden, scale=0.5)
            arguments["state_cell"] = mx.sym.var("state_cell")
        flat = normal(rs, _flat_size(mode, hidden, layers, directions, projection), scale=0.4)
        return Built(mx.sym.RNN(**arguments), inputs, {"rnn_parameters": flat})
    case(name, "RNN", build)


def gluon_rnn(name: str, layer: str, hidden: int, layout: str = "TNC", **options: object) -> None:
    """A Gluon recurrent layer, hybridized and exported: its symbol with named weights, the states as inputs."""
    def build(rs: np.random.RandomState) -> Built:
        block = getattr(mx.gluon.rnn, layer)(hidden, layout=layout, input_size=C, prefix=f"{name}_", **options)
        block.initialize(mx.init.Uniform(0.4))
        block.hybridize()
        shape = (T, N, C) if layout == "TNC" else (N, T, C)
        x = normal(rs, *shape)
        states = [normal(rs, *state.shape, scale=0.5) for state in block.begin_state(batch_size=N)]
        block(mx.nd.array(x), [mx.nd.array(state) for state in states])
        with tempfile.TemporaryDirectory() as folder:
            prefix = str(Path(folder) / "block")
            block.export(prefix)
            symbol = mx.sym.load(prefix + "-symbol.json")
            params = {key.partition(":")[2]: value.asnumpy() for key, value in mx.nd.load(prefix + "-0000.params")
                      .items()}
        names = [arg for arg in symbol.list_arguments() if arg not in params]
        return Built(symbol, dict(zip(names, [x, *states])), params)
    case(name, "RNN", build)


symbol_rnn("rnn_lstm", "lstm", 6)
symbol_rnn("rnn_lstm_no_state_outputs", "lstm", 6, state_outputs=False)
symbol_rnn("rnn_lstm_2_layers_bidirectional", "lstm", 5, layers=2, bidirectional=True)
symbol_rnn("rnn_lstm_projection", "lstm", 6, layers=2, projection=3)
symbol_rnn("rnn_lstm_dropout_between_layers", "lstm", 4, layers=3, p=0.3)
symbol_rnn("rnn_gru", "gru", 6)
symbol_rnn("rnn_gru_2_layers_bidirectional", "gru", 5, layers=2, bidirectional=True)
symbol_rnn("rnn_tanh_bidirectional", "rnn_tanh", 6, bidirectional=True)
symbol_rnn("rnn_relu_2_layers", "rnn_relu", 6, layers=2, state_outputs=False)
gluon_rnn("gluon_lstm_bidirectional", "LSTM", 5, num_layers=2, bidirectional=True)
gluon_rnn("gluon_gru_batch_major", "GRU", 5, layout="NTC")
gluon_rnn("gluon_rnn_relu", "RNN", 4, activation="relu")
