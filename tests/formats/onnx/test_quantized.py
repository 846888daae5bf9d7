"""Quantized ONNX (QuantizeLinear / DequantizeLinear, QLinearConv, QLinearMatMul) read as fake quantization:
compared with onnxruntime running the same file, trained, saved as NNEF with graph.quant entries that the Khronos
parser reads, and read back."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "quantized").glob("*.onnx"))
IDS = [path.stem for path in FIXTURES]
# one of each model and format, for the slower checks
SOME = [path for path in FIXTURES if path.stem in ("cnn13_qdq_u8s8_pc", "cnn17_qop_u8s8", "mlp17_qdq_s8s8",
                                                   "mlp13_qop_u8s8_pc")]


def _input(session, seed: int) -> np.ndarray:
    spec = session.get_inputs()[0]
    return np.random.RandomState(seed).randn(*spec.shape).astype(np.float32)


def _output_step(path: Path) -> float:
    """The scale of the last quantization in the file (its output's, or the last quantized layer's), read with
    onnx."""
    model = onnx.load(str(path))
    scales = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    last = [node for node in model.graph.node if node.op_type in ("QuantizeLinear", "QLinearConv", "QLinearMatMul")][-1]
    return float(scales[last.input[1] if last.op_type == "QuantizeLinear" else last.input[6]])


def test_fixtures_exist():
    assert len(FIXTURES) == 24


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_outputs_match_onnxruntime(path):
    # onnxruntime runs the quantized layers in integers (QLinearConv, QLinearMatMul; QDQ groups fused into them),
    # requantizing each result with its own rounding (halves to even), where fake quantization computes in float32
    # and rounds halves away from zero: a value near a rounding boundary may land one code away. Allowed: one step
    # of the last quantization anywhere, and at most 1% of the values beyond half a step. (The fixtures use
    # reduce_range so that onnxruntime's u8s8 kernels do not saturate; they then agree to the float rounding.)
    session = ort.InferenceSession(str(path))
    module = nnef_torch.load(path)
    step = _output_step(path)
    differences = []
    for seed in range(5):
        x = _input(session, seed)
        expected = session.run(None, {session.get_inputs()[0].name: x})[0]
        differences.append(np.abs(module(torch.from_numpy(x)).detach().numpy() - expected).ravel())
    difference = np.concatenate(differences)
    assert difference.max() <= step * 1.001
    assert (difference <= step / 2).mean() >= 0.99


@pytest.mark.parametrize("path", [p for p in FIXTURES if "_qdq_" in p.stem], ids=[p.stem for p in FIXTURES
                                                                                 if "_qdq_" in p.stem])
def test_each_dequantize_is_one_fake_quantizer(path):
    model = onnx.load(str(path))
    module = nnef_torch.load(path)
    dequantized = [node for node in model.graph.node if node.op_type == "DequantizeLinear"]
    found = module.quantizers()
    assert len(found) == len(dequantized)
    per_channel = [q for q in found.values() if q.channels is not None]
    assert bool(per_channel) == path.stem.endswith("_pc")


@pytest.mark.parametrize("path", SOME, ids=[p.stem for p in SOME])
def test_trains(path):
    module = nnef_torch.load(path).train()
    x = torch.from_numpy(_input(ort.InferenceSession(str(path)), 0))
    # a target inside the output quantizer's range: outside it, straight-through gradients are zero
    target = (module(x) * 0.5).detach()
    params = list(module.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01)
    losses = []
    for step in range(6):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(module(x), target)
        loss.backward()
        if step == 0:
            assert params and all(p.grad is not None for p in params)
            assert all(float(p.grad.abs().sum()) > 0 for p in params)
        losses.append(loss.item())
        optimizer.step()
    assert losses[-1] < losses[0]


def test_learnable_scales_get_gradients():
    module = nnef_torch.load(SOME[0]).train().set_quantization(learnable=True)
    x = torch.from_numpy(_input(ort.InferenceSession(str(SOME[0])), 0))
    module(x).square().sum().backward()
    scales = [p for name, p in module.named_parameters() if name.endswith(".scale")]
    assert len(scales) == len(module.quantizers())
    assert any(float(p.grad.abs().sum()) > 0 for p in scales)


@pytest.mark.parametrize("path", SOME, ids=[p.stem for p in SOME])
def test_saved_graph_quant_reads_in_khronos_and_back(path, tmp_path):
    nnef = pytest.importorskip("nnef")
    module = nnef_torch.load(path)
    x = torch.from_numpy(_input(ort.InferenceSession(str(path)), 3))
    nnef_torch.save(module, tmp_path / "out", x)
    assert (tmp_path / "out" / "graph.quant").is_file()
    graph = nnef.load_graph(str(tmp_path / "out"))
    quantized = {name: t.quantization for name, t in graph.tensors.items() if t.quantization}
    assert set(quantized) == set(module.quantizers())
    for name, entry in quantized.items():
        assert entry["op-name"] == "zero_point_linear_quantize"
        assert np.allclose(entry["scale"], module.quantizers()[name].scale.numpy())
    again = nnef_torch.load(tmp_path / "out")
    assert len(again.quantizers()) == len(quantized)
    torch.testing.assert_close(again(x), module(x), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------------------- hand-made graphs
def _model(tmp_path, nodes, inputs, outputs, initializers, opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n)
                                                             for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    path = tmp_path / "q.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _run(path, x):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options).run(None, {"x": x})[0]


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])


def test_per_axis_activation_on_axis_1(tmp_path):
    scale, zero = np.array([0.02, 0.05, 0.1], np.float32), np.array([-3, 0, 7], np.int8)
    path = _model(tmp_path, [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, saturate=1),
                             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
                  [X], [Y], {"s": scale, "z": zero})
    x = np.random.RandomState(0).randn(2, 3, 4).astype(np.float32) * 3
    module = nnef_torch.load(path)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _run(path, x), rtol=0, atol=1e-6)
    (quantizer,) = module.quantizers().values()
    assert quantizer.channels == 3 and quantizer.signed


def test_codes_and_other_parameters_are_computed(tmp_path):
    # the codes as a graph output, and a DequantizeLinear with other parameters than its QuantizeLinear's
    codes = helper.make_tensor_value_info("q", TensorProto.UINT8, [2, 3, 4])
    path = _model(tmp_path, [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                             helper.make_node("DequantizeLinear", ["q", "s2", "z"], ["y"])],
                  [X], [Y, codes], {"s": np.array(0.05, np.float32), "s2": np.array(0.1, np.float32),
                                    "z": np.array(100, np.uint8)})
    x = np.random.RandomState(1).randn(2, 3, 4).astype(np.float32) * 4
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected_y, expected_q = ort.InferenceSession(str(path), options).run(None, {"x": x})
    y, q = nnef_torch.load(path)(torch.from_numpy(x))
    np.testing.assert_allclose(y.detach().numpy(), expected_y, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(q.detach().numpy(), expected_q.astype(np.float32))


def test_block_size_is_refused(tmp_path):
    weights = np.ones((4, 4), np.int8)
    path = _model(tmp_path, [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["d"], axis=1, block_size=2),
                             helper.make_node("Add", ["x", "d"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                  {"w": weights, "s": np.ones((4, 2), np.float32), "z": np.zeros((4, 2), np.int8)})
    with pytest.raises(ForeignFormatError, match=r"node 0 .*\(DequantizeLinear\): blocked quantization "
                                                 r"\(block_size = 2\)"):
        nnef_torch.load(path)


@pytest.mark.parametrize("code", [np.int16, np.uint16])
def test_16_bit_zero_point_is_refused(tmp_path, code):
    path = _model(tmp_path, [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                  [X], [Y], {"s": np.array(0.1, np.float32), "z": np.array(0, code)})
    with pytest.raises(ForeignFormatError, match=rf"node 0 .*\(QuantizeLinear\): quantized type "
                                                 rf"{np.dtype(code).name} is not supported"):
        nnef_torch.load(path)


def test_4_bit_weights_are_refused(tmp_path):
    weights = helper.make_tensor("w", TensorProto.INT4, [2, 4], [1, -2, 3, 0, 1, 1, 2, -8])
    zero = helper.make_tensor("z", TensorProto.INT4, [], [0])
    graph = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["d"]),
                               helper.make_node("MatMul", ["x", "d"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
                              [weights, zero, numpy_helper.from_array(np.array(0.1, np.float32), "s")])
    path = tmp_path / "q4.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                                       ir_version=10).SerializeToString())
    with pytest.raises(ForeignFormatError, match=r"node 0 .*\(DequantizeLinear\): quantized type int4 is not "
                                                 "supported"):
        nnef_torch.load(path)
