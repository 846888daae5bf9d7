"""ONNX LSTM, GRU and RNN, unrolled by nnef_torch: the torch exports of `fixtures/recurrent/` (made by
make_recurrent_fixtures.py) match onnxruntime running the same file and the source torch module, outputs and
gradients; saved as NNEF they pass the Khronos parser and run in its executor (`nnef.Session`) to the same outputs.
Models written here with onnx.helper cover what torch does not export (reverse direction, layout 1, clip,
peepholes, GRU linear_before_reset=0, other activations, a full sequence_lens), checked against onnxruntime, or the
onnx reference evaluator where onnxruntime lacks the case; bad attributes and inputs name the node."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from exporter.consumers import close_all, khronos_parse
from formats.khronos_session import run_khronos
from torch import nn

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper = onnx.helper

HERE = Path(__file__).parent / "fixtures" / "recurrent"
MANIFEST = json.loads((HERE / "manifest.json").read_text())
FILES = [(case, name) for case, entry in MANIFEST.items() for name in entry["files"]]
IDS = [name.removesuffix(".onnx") for _, name in FILES]
RTOL, ATOL = 1e-4, 1e-5
# torch's gate blocks, as indices of ONNX's: LSTM torch i f g o <- ONNX i o f c; GRU torch r z n <- ONNX z r h
TORCH_GATES = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2], "RNN": [0]}


def _feeds(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    rs = np.random.RandomState(seed)
    return {i.name: rs.randn(*i.shape).astype(np.float32) for i in ort.InferenceSession(str(path)).get_inputs()}


def _run(module: torch.nn.Module, feeds: dict[str, Any]) -> list[torch.Tensor]:
    outputs = module(*(torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in feeds.values()))
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


@pytest.mark.parametrize(("case", "name"), FILES, ids=IDS)
def test_fixture_matches_onnxruntime(case: str, name: str) -> None:
    feeds = _feeds(HERE / name)
    expected = ort.InferenceSession(str(HERE / name)).run(None, feeds)
    with torch.no_grad():
        found = _run(nnef_torch.load(HERE / name), feeds)
    assert len(found) == len(expected)
    for f, e in zip(found, expected):
        np.testing.assert_allclose(f.numpy(), e, rtol=RTOL, atol=ATOL)


def _source(case: str) -> nn.Module:
    entry = MANIFEST[case]
    module = getattr(nn, entry["kind"])(4, 5, **entry["keywords"])
    with np.load(HERE / f"{case}.npz") as arrays:
        module.load_state_dict({key: torch.from_numpy(arrays[key]) for key in arrays.files})
    return module


def _torch_outputs(module: nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    y, final = module(inputs[0], None if len(inputs) == 1 else tuple(inputs[1:]) if len(inputs) == 3 else inputs[1])
    return [y, *final] if isinstance(final, tuple) else [y, final]


def _onnx_weights(path: Path) -> list[tuple[str, list[np.ndarray]]]:
    """Each recurrent node of the file, in order (one per layer): its op and the initializers W, R, B."""
    model = onnx.load(str(path))
    arrays = {tensor.name: onnx.numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    return [(node.op_type, [arrays[name] for name in node.input[1:4]]) for node in model.graph.node
            if node.op_type in TORCH_GATES]


def _parameter_holding(module: torch.nn.Module, value: np.ndarray) -> torch.nn.Parameter:
    """The module's Parameter read from an initializer, found by its value (whatever name the reader gave it)."""
    found = [p for p in module.parameters() if tuple(p.shape) == value.shape
             and np.array_equal(p.detach().numpy(), value)]
    assert len(found) == 1, f"{len(found)} parameters hold the initializer of shape {value.shape}"
    return found[0]


def _as_torch_layout(op: str, gradient: np.ndarray) -> np.ndarray:
    """ONNX rows of gate blocks (G*H, ...) in torch's gate order."""
    blocks = np.split(gradient, len(TORCH_GATES[op]), axis=0)
    return np.concatenate([blocks[k] for k in TORCH_GATES[op]], axis=0)


@pytest.mark.parametrize(("case", "name"), FILES, ids=IDS)
def test_fixture_matches_torch_outputs_and_gradients(case: str, name: str) -> None:
    """Outputs, and the gradients of a loss over every output w.r.t. the inputs and each weight, equal those of the
    source module; the weights compared through ONNX's gate order and its W/R/B layout."""
    feeds = _feeds(HERE / name, seed=1)
    source, loaded = _source(case), nnef_torch.load(HERE / name)
    theirs = [torch.from_numpy(v).requires_grad_() for v in feeds.values()]
    ours = [torch.from_numpy(v.copy()).requires_grad_() for v in feeds.values()]
    expected, found = _torch_outputs(source, theirs), _run(loaded, dict(zip(feeds, ours)))
    rs = np.random.RandomState(2)
    probes = [torch.from_numpy(rs.randn(*e.shape).astype(np.float32)) for e in expected]
    for outputs in (expected, found):
        sum((o * p).sum() for o, p in zip(outputs, probes)).backward()
    for f, e in zip(found, expected):
        np.testing.assert_allclose(f.detach().numpy(), e.detach().numpy(), rtol=RTOL, atol=ATOL)
    for f, e in zip(ours, theirs):
        np.testing.assert_allclose(f.grad.numpy(), e.grad.numpy(), rtol=RTOL, atol=ATOL)
    suffixes = ["", "_reverse"]
    torch_grads = {key: value.grad.numpy() for key, value in source.named_parameters()}
    for layer, (op, weights) in enumerate(_onnx_weights(HERE / name)):
        w_grad, r_grad, b_grad = (_parameter_holding(loaded, value).grad.numpy() for value in weights)
        for d in range(w_grad.shape[0]):
            tail = f"_l{layer}{suffixes[d]}"
            bias_ih, bias_hh = np.split(b_grad[d], 2)
            for key, value in (("weight_ih", w_grad[d]), ("weight_hh", r_grad[d]), ("bias_ih", bias_ih),
                               ("bias_hh", bias_hh)):
                np.testing.assert_allclose(_as_torch_layout(op, value), torch_grads[key + tail], rtol=RTOL,
                                           atol=ATOL, err_msg=key + tail)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in loaded.parameters())


@pytest.mark.parametrize(("case", "name"), FILES, ids=IDS)
def test_saved_nnef_runs_in_the_khronos_executor(case: str, name: str, tmp_path: Path) -> None:
    pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    feeds = _feeds(HERE / name, seed=3)
    expected = ort.InferenceSession(str(HERE / name)).run(None, feeds)
    module = nnef_torch.load(HERE / name)
    folder = tmp_path / "out"
    nnef_torch.save(module, folder, tuple(torch.from_numpy(v) for v in feeds.values()))
    khronos_parse(folder)
    close_all(run_khronos(folder, list(feeds.values())), expected, RTOL, "nnef.Session")


# ------------------------------------------------------------------------------- models written with onnx.helper
T, N, C, H = 5, 2, 3, 4
GATE_COUNT = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _model(op: str, attributes: dict, *, directions: int = 1, layout: int = 0, bias: bool = True,
           states: tuple[str, ...] = (), peepholes: bool = False, lengths: list[int] | None = None,
           outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"), lengths_input: bool = False) -> onnx.ModelProto:
    """One recurrent node whose weights are seeded initializers; `states` names the initial states that are graph
    inputs ('initial_h', 'initial_c'); an output named '' is unused."""
    rs, gates = np.random.RandomState(7), GATE_COUNT[op]
    x_shape = [N, T, C] if layout else [T, N, C]
    state_shape = [N, directions, H] if layout else [directions, N, H]
    initializers = [("W", [directions, gates * H, C]), ("R", [directions, gates * H, H])]
    initializers += [("B", [directions, 2 * gates * H])] if bias else []
    initializers += [("P", [directions, 3 * H])] if peepholes else []
    tensors = [helper.make_tensor(name, onnx.TensorProto.FLOAT, shape, (rs.randn(*shape) * 0.6).reshape(-1))
               for name, shape in initializers]
    graph_inputs = [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, x_shape)]
    graph_inputs += [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, state_shape) for name in states]
    if lengths is not None:
        tensors.append(helper.make_tensor("lengths", onnx.TensorProto.INT32, [N], lengths))
    if lengths_input:
        graph_inputs.append(helper.make_tensor_value_info("lengths", onnx.TensorProto.INT32, [N]))
    inputs = ["X", "W", "R", "B" if bias else "", "lengths" if lengths is not None or lengths_input else "",
              "initial_h" if "initial_h" in states else ""]
    if op == "LSTM":
        inputs += ["initial_c" if "initial_c" in states else "", "P" if peepholes else ""]
    names = list(outputs[:3 if op == "LSTM" else 2])
    attributes = {"hidden_size": H, **({"layout": layout} if layout else {}), **attributes}
    node = helper.make_node(op, inputs, names, name="cell", **attributes)
    y_shape = [N, T, directions, H] if layout else [T, directions, N, H]
    graph_outputs = [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, y_shape if k == 0 else state_shape)
                     for k, name in enumerate(names) if name]
    graph = helper.make_graph([node], "recurrent", graph_inputs, graph_outputs, tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14 if layout else 13)])


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs, or the onnx reference evaluator's where onnxruntime refuses the node (layout 1)."""
    try:
        session = ort.InferenceSession(model.SerializeToString())
    except Exception:  # noqa: BLE001  (onnxruntime's CPU kernels refuse layout 1)
        from onnx.reference import ReferenceEvaluator
        return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    return session.run(None, feeds)


HELPER_CASES = {
    "lstm_reverse_peepholes_clip_states": ("LSTM", {"direction": "reverse", "clip": 0.7},
                                           {"states": ("initial_h", "initial_c"), "peepholes": True}),
    "lstm_bidir_peepholes_full_lengths": ("LSTM", {"direction": "bidirectional"},
                                          {"directions": 2, "peepholes": True, "lengths": [T] * N}),
    "lstm_layout1_bidir_states": ("LSTM", {"direction": "bidirectional"},
                                  {"directions": 2, "layout": 1, "states": ("initial_h", "initial_c")}),
    "lstm_activations_no_bias_y_unused": ("LSTM", {"activations": ["Sigmoid", "Relu", "Tanh"]},
                                          {"bias": False, "outputs": ("", "Y_h", "Y_c")}),
    "gru_linear_before_reset_0_bidir": ("GRU", {"direction": "bidirectional", "linear_before_reset": 0},
                                        {"directions": 2, "states": ("initial_h",)}),
    "gru_reset_1_clip_reverse_activations": ("GRU", {"direction": "reverse", "linear_before_reset": 1, "clip": 0.5,
                                                     "activations": ["Sigmoid", "Relu"]}, {}),
    "gru_layout1": ("GRU", {"linear_before_reset": 0}, {"layout": 1, "states": ("initial_h",)}),
    "rnn_sigmoid_no_bias": ("RNN", {"activations": ["Sigmoid"]}, {"bias": False, "states": ("initial_h",)}),
    "rnn_bidir_relu_tanh_clip": ("RNN", {"direction": "bidirectional", "activations": ["Relu", "Tanh"], "clip": 1.0},
                                 {"directions": 2}),
}


@pytest.mark.parametrize("case", sorted(HELPER_CASES))
def test_attributes_torch_does_not_export(case: str, tmp_path: Path) -> None:
    op, attributes, options = HELPER_CASES[case]
    model = _model(op, attributes, **options)
    onnx.checker.check_model(model)
    path = tmp_path / f"{case}.onnx"
    path.write_bytes(model.SerializeToString())
    rs = np.random.RandomState(5)
    feeds = {i.name: rs.randn(*[d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    expected = _reference(model, feeds)
    module = nnef_torch.load(path)
    inputs = [torch.from_numpy(v).requires_grad_() for v in feeds.values()]
    found = _run(module, dict(zip(feeds, inputs)))
    assert len(found) == len(expected)
    for f, e in zip(found, expected):
        np.testing.assert_allclose(f.detach().numpy(), e, rtol=RTOL, atol=ATOL)
    sum(f.sum() for f in found).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    assert all(x.grad is not None for x in inputs)
    folder = tmp_path / "out"
    nnef_torch.save(module, folder, tuple(torch.from_numpy(v) for v in feeds.values()))
    close_all(run_khronos(folder, list(feeds.values())), expected, RTOL, "nnef.Session")


BAD_CASES = {
    "unsupported_activation": (("RNN", {"activations": ["Elu"]}, {}), r"activation\(s\) \['Elu'\] are not supported"),
    "activation_alpha": (("RNN", {"activations": ["Tanh"], "activation_alpha": [0.5]}, {}), "activation_alpha"),
    "computed_sequence_lens": (("GRU", {}, {"lengths_input": True}), "sequence_lens is computed in the graph"),
    "short_sequence_lens": (("LSTM", {}, {"lengths": [T, T - 1]}), r"sequence_lens \[5, 4\] must be the full"),
    "input_forget": (("LSTM", {"input_forget": 1}, {}), "'input_forget' = 1 is not supported"),
    "negative_clip": (("GRU", {"clip": -1.0}, {}), "clip must be positive"),
    "wrong_activation_count": (("LSTM", {"activations": ["Sigmoid", "Tanh"]}, {}), "must name 3 function"),
    "hidden_size_not_the_weights": (("LSTM", {"hidden_size": 3}, {}), r"input W must have shape \[1, 12, 3\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_recurrent_node_names_the_node(case: str, tmp_path: Path) -> None:
    (op, attributes, options), message = BAD_CASES[case]
    path = tmp_path / "bad.onnx"
    path.write_bytes(_model(op, attributes, **options).SerializeToString())
    with pytest.raises(ForeignFormatError, match=rf"node 0 'cell' \({op}\): .*{message}"):
        nnef_torch.load(path)
