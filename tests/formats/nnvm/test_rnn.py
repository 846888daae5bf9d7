"""The fused RNN operator beyond what MXNet's CPU build computes (its fixtures are in test_mxnet_fixtures.py): LSTM
cell clipping, which MXNet runs only with cuDNN, checked against a numpy LSTM written from cuDNN's definition (the
cell state clamped after each step); and the names of the unpacked weights."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.formats.nnvm.rules.rnn import parameter_layout

T, N, C, H = 6, 2, 3, 4


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, clip):
    outputs = []
    for t in range(x.shape[0]):
        i, f, g, o = np.split(x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
        c = np.clip(_sigmoid(f) * c + _sigmoid(i) * np.tanh(g), *clip)
        h = _sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


def _symbol(path: Path) -> None:
    nodes = [{"op": "null", "name": name, "inputs": []} for name in ("data", "lstm_parameters", "state", "cell")]
    nodes.append({"op": "RNN", "name": "lstm", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]],
                  "attrs": {"mode": "lstm", "state_size": str(H), "num_layers": "1", "state_outputs": "True",
                            "lstm_state_clip_min": "-0.25", "lstm_state_clip_max": "0.3"}})
    path.write_text(json.dumps({"nodes": nodes, "arg_nodes": [0, 1, 2, 3], "node_row_ptr": [0, 1, 2, 3, 4, 7],
                                "heads": [[4, 0, 0], [4, 1, 0], [4, 2, 0]]}))


def test_lstm_cell_clipping_follows_cudnn(tmp_path):
    rs = np.random.RandomState(1)
    layout = parameter_layout("lstm", 1, 1, C, H, None)
    assert [name for name, _ in layout] == ["l0_i2h_weight", "l0_h2h_weight", "l0_i2h_bias", "l0_h2h_bias"]
    pieces = {name: rs.standard_normal(shape).astype(np.float32) for name, shape in layout}
    flat = np.concatenate([pieces[name].reshape(-1) for name, _ in layout])
    _symbol(tmp_path / "lstm-symbol.json")
    module = nnef_torch.load(tmp_path / "lstm-symbol.json", params={"lstm_parameters": flat},
                             input_shapes={"data": [T, N, C], "state": [1, N, H], "cell": [1, N, H]})
    assert sorted(name for name, _ in module.named_parameters()) == sorted(f"lstm_parameters.{name}"
                                                                             for name in pieces)
    x, h, c = (rs.standard_normal(shape).astype(np.float32) for shape in ((T, N, C), (1, N, H), (1, N, H)))
    found = module(*(torch.from_numpy(v) for v in (x, h, c)))
    expected = numpy_lstm(x, h[0], c[0], pieces["l0_i2h_weight"], pieces["l0_h2h_weight"], pieces["l0_i2h_bias"],
                          pieces["l0_h2h_bias"], (-0.25, 0.3))
    np.testing.assert_allclose(found[0].detach().numpy(), expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(found[1].detach().numpy()[0], expected[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(found[2].detach().numpy()[0], expected[2], rtol=1e-5, atol=1e-6)
    assert float(found[2].abs().max()) <= 0.3 + 1e-6


def test_a_flat_vector_of_the_wrong_size_is_a_parameter_problem(tmp_path):
    _symbol(tmp_path / "lstm-symbol.json")
    message = "'lstm_parameters' (flat parameter vector of node 4 'lstm' (RNN)) has shape [7], expected [144]"
    with pytest.raises(nnef_torch.NNEFError, match=re.escape(message)):
        nnef_torch.load(tmp_path / "lstm-symbol.json", params={"lstm_parameters": np.zeros(7, np.float32)},
                        input_shapes={"data": [T, N, C], "state": [1, N, H], "cell": [1, N, H]})
