"""Element-wise math, normalizations, reductions and rearrangements read from one-node ONNX models made with
onnx.helper, compared with onnxruntime running the same model; gradients compared with torch's own functions."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 18


def one_node(op, x_shape, out_count=1, attrs=None, initializers=(), extra_inputs=(), opset=OPSET):
    """A model `y = op(x, *extra_inputs)` with `initializers` (name, array) and its file bytes."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(out_count)]
    node = helper.make_node(op, ["x", *extra_inputs], [f"y{i}" for i in range(out_count)], **(attrs or {}))
    graph = helper.make_graph([node], "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), name) for name, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(tmp_path, model, x, rtol=1e-4, atol=1e-5):
    path = tmp_path / "m.onnx"
    model = onnx.shape_inference.infer_shapes(model)
    for output in model.graph.output:  # a function op's type is not inferred: float, as all those tested here
        if not output.type.tensor_type.elem_type:
            output.CopyFrom(helper.make_tensor_value_info(output.name, TensorProto.FLOAT, list(x.shape)))
    onnx.save_model(model, path)
    expected = ort.InferenceSession(str(path)).run(None, {"x": x})
    results = nnef_torch.load(path)(torch.from_numpy(x))
    results = results if isinstance(results, tuple) else (results,)
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got.detach().numpy().astype(want.dtype), want, rtol=rtol, atol=atol)
    return path


X = np.random.RandomState(0).randn(2, 4, 3, 5).astype(np.float32)
UNARY = ["Floor", "Ceil", "Sign", "Reciprocal", "Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "HardSwish",
         "Softsign", "Mish", "IsNaN"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(tmp_path, op):
    check(tmp_path, one_node(op, list(X.shape)), X)


@pytest.mark.parametrize("op", ["Asin", "Acos", "Atanh"])
def test_unary_on_the_unit_interval(tmp_path, op):
    check(tmp_path, one_node(op, list(X.shape)), np.tanh(X) * 0.9)


def test_acosh(tmp_path):
    check(tmp_path, one_node("Acosh", list(X.shape)), np.abs(X) + 1.5)


def test_round_halves_to_even(tmp_path):
    x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6, 3.7, 1e6 + 0.5]], np.float32)
    check(tmp_path, one_node("Round", list(x.shape)), x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_onnxruntime_and_torch_gradient(tmp_path, approximate):
    model = one_node("Gelu", list(X.shape), attrs={"approximate": approximate}, opset=20)
    module = nnef_torch.load(check(tmp_path, model, X))
    x = torch.from_numpy(X).requires_grad_()
    module(x).sum().backward()
    twin = torch.from_numpy(X).requires_grad_()
    torch.nn.functional.gelu(twin, approximate=approximate).sum().backward()
    torch.testing.assert_close(x.grad, twin.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op, attrs", [("ThresholdedRelu", {"alpha": 0.3}), ("Celu", {"alpha": 0.7})])
def test_parameterised_activations(tmp_path, op, attrs):
    check(tmp_path, one_node(op, list(X.shape), attrs=attrs), X)


def test_prelu_slope_is_a_parameter(tmp_path):
    slope = np.linspace(0.1, 0.4, 4, dtype=np.float32).reshape(4, 1, 1)
    module = nnef_torch.load(check(tmp_path, one_node("PRelu", list(X.shape), initializers=[("slope", slope)],
                                                      extra_inputs=["slope"]), X))
    module(torch.from_numpy(X)).sum().backward()
    assert [p.grad is not None for p in module.parameters()] == [True]


@pytest.mark.parametrize("op", ["LessOrEqual", "GreaterOrEqual"])
def test_comparisons(tmp_path, op):
    check(tmp_path, one_node(op, list(X.shape), initializers=[("t", np.float32(0.1))], extra_inputs=["t"]), X)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
def test_n_ary(tmp_path, op):
    a, c = np.ones((4, 1, 1), np.float32), np.full((5,), 2.0, np.float32)
    check(tmp_path, one_node(op, list(X.shape), initializers=[("a", a), ("c", c)], extra_inputs=["a", "c"]), X)


def test_instance_normalization(tmp_path):
    scale, bias = np.linspace(0.5, 2, 4, dtype=np.float32), np.linspace(-1, 1, 4, dtype=np.float32)
    check(tmp_path, one_node("InstanceNormalization", list(X.shape), attrs={"epsilon": 1e-3},
                             initializers=[("s", scale), ("b", bias)], extra_inputs=["s", "b"]), X)


def test_group_normalization(tmp_path):  # opset 21's per-channel scale (the checker refuses opset 18's)
    opset = 21
    scale, bias = np.linspace(0.5, 2, 4, dtype=np.float32), np.linspace(-1, 1, 4, dtype=np.float32)
    check(tmp_path, one_node("GroupNormalization", list(X.shape), attrs={"num_groups": 2, "epsilon": 1e-4},
                             initializers=[("s", scale), ("b", bias)], extra_inputs=["s", "b"], opset=opset), X,
          atol=1e-4)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(tmp_path, p):
    check(tmp_path, one_node("LpNormalization", list(X.shape), attrs={"p": p, "axis": 1}), X)


def test_local_response_normalization(tmp_path):
    x = np.random.RandomState(1).randn(1, 7, 3, 3).astype(np.float32)
    check(tmp_path, one_node("LRN", list(x.shape), attrs={"size": 3, "alpha": 0.01, "beta": 0.7, "bias": 1.5}), x)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_reductions(tmp_path, op, keepdims):
    check(tmp_path, one_node(op, list(X.shape), attrs={"axis": 1, "keepdims": keepdims}), X)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_norm_reductions_axes_as_input(tmp_path, op, keepdims):
    model = one_node(op, list(X.shape), attrs={"keepdims": keepdims}, initializers=[("axes", np.array([1, 3]))],
                     extra_inputs=["axes"])
    check(tmp_path, model, X)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(tmp_path, mode):
    x = np.random.RandomState(2).randn(1, 8, 2, 3).astype(np.float32)
    check(tmp_path, one_node("DepthToSpace", list(x.shape), attrs={"blocksize": 2, "mode": mode}), x)
    check(tmp_path, one_node("SpaceToDepth", [1, 2, 4, 6], attrs={"blocksize": 2}),
          np.random.RandomState(3).randn(1, 2, 4, 6).astype(np.float32))


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, 1), (0, -1)])
def test_trilu(tmp_path, upper, k):
    model = one_node("Trilu", list(X.shape), attrs={"upper": upper}, initializers=[("k", np.array(k))],
                     extra_inputs=["k"])
    check(tmp_path, model, X)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_values_and_indices(tmp_path, largest):
    x = np.random.RandomState(4).permutation(60).astype(np.float32).reshape(3, 4, 5)
    model = one_node("TopK", list(x.shape), out_count=2, attrs={"axis": 1, "largest": largest},
                     initializers=[("k", np.array([2]))], extra_inputs=["k"])
    check(tmp_path, model, x)


def test_range_and_size_are_known_while_reading(tmp_path):
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Range", ["zero", "n", "step"], ["r"]),
             helper.make_node("ReduceSum", ["r"], ["total"], keepdims=0),
             helper.make_node("Cast", ["total"], ["t"], to=TensorProto.FLOAT), helper.make_node("Add", ["x", "t"], ["y0"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.int64(0), "zero"),
                               numpy_helper.from_array(np.int64(2), "step")])
    check(tmp_path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]),
          np.zeros((2, 3), np.float32))


def test_saved_nnef_of_the_new_operations_parses_and_runs_in_the_khronos_executor(tmp_path):
    nnef = pytest.importorskip("nnef")
    nodes = [helper.make_node("HardSwish", ["x"], ["a"]), helper.make_node("Round", ["a"], ["b"]),
             helper.make_node("InstanceNormalization", ["x", "s", "o"], ["c"]),
             helper.make_node("Add", ["b", "c"], ["d"]), helper.make_node("ReduceL2", ["d", "axes"], ["y0"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
                              [helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones(4, np.float32), "s"),
                               numpy_helper.from_array(np.zeros(4, np.float32), "o"),
                               numpy_helper.from_array(np.array([3]), "axes")])
    path = check(tmp_path, helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), X)
    module = nnef_torch.load(path)
    nnef_torch.save(module, tmp_path / "out", torch.from_numpy(X))
    expected = ort.InferenceSession(str(path)).run(None, {"x": X})[0]
    fragments = ["hard_swish", "hard_sigmoid", "instance_norm", "clamp", "moments"]  # the document's own fragments, run by their bodies
    with nnef.Session(str(tmp_path / "out"), lowered=fragments) as session:
        got = session(X)[0]
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-4)


def test_a_refused_operator_says_why(tmp_path):
    model = one_node("NonZero", list(X.shape))
    onnx.save_model(model, tmp_path / "m.onnx")
    with pytest.raises(nnef_torch.NNEFError, match="NonZero.*depends on the data"):
        nnef_torch.load(tmp_path / "m.onnx")


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_and_pool_auto_pad(tmp_path, auto_pad):
    x = np.random.RandomState(5).randn(1, 3, 7, 8).astype(np.float32)
    weight = np.random.RandomState(6).randn(2, 3, 4, 3).astype(np.float32)
    check(tmp_path, one_node("Conv", list(x.shape), attrs={"auto_pad": auto_pad, "strides": [2, 3]},
                             initializers=[("w", weight)], extra_inputs=["w"]), x)
    check(tmp_path, one_node("MaxPool", list(x.shape), attrs={"auto_pad": auto_pad, "kernel_shape": [2, 3],
                                                              "strides": [2, 2]}), x)


@pytest.mark.parametrize("op, attrs", [("MaxPool", {}), ("AveragePool", {"count_include_pad": 0}),
                                       ("MaxPool", {"pads": [1, 0, 1, 0]})])
def test_pool_ceil_mode(tmp_path, op, attrs):
    x = np.random.RandomState(7).randn(1, 2, 10, 11).astype(np.float32)
    check(tmp_path, one_node(op, list(x.shape), attrs={"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                                       **attrs}), x)


@pytest.mark.parametrize("left, right", [((5,), (5, 3)), ((2, 4, 5), (5,)), ((5,), (5,))])
def test_matmul_of_vectors(tmp_path, left, right):
    other = np.random.RandomState(8).randn(*right).astype(np.float32)
    x = np.random.RandomState(9).randn(*left).astype(np.float32)
    check(tmp_path, one_node("MatMul", list(left), initializers=[("w", other)], extra_inputs=["w"]), x)


def test_cast_like_and_shrink_and_hardmax(tmp_path):
    like = np.zeros(1, np.int64)
    check(tmp_path, one_node("CastLike", list(X.shape), initializers=[("like", like)], extra_inputs=["like"]),
          X * 3)
    check(tmp_path, one_node("Shrink", list(X.shape), attrs={"lambd": 0.4, "bias": 0.1}), X)
    check(tmp_path, one_node("Hardmax", list(X.shape), attrs={"axis": 1}), X)


def test_mod_takes_the_dividends_sign(tmp_path):
    divisor = np.array([1.5, -0.7, 2.0, -2.5, 0.9], np.float32)
    check(tmp_path, one_node("Mod", list(X.shape), attrs={"fmod": 1}, initializers=[("d", divisor)],
                             extra_inputs=["d"]), X * 4)


def test_reduce_log_sum(tmp_path):
    model = one_node("ReduceLogSum", list(X.shape), attrs={"keepdims": 0}, initializers=[("axes", np.array([2]))],
                     extra_inputs=["axes"])
    check(tmp_path, model, np.abs(X) + 0.1)


def test_mean_variance_normalization(tmp_path):
    check(tmp_path, one_node("MeanVarianceNormalization", list(X.shape), attrs={"axes": [0, 2, 3]}), X)


@pytest.mark.parametrize("axis", [-1, 1])
def test_one_hot_of_the_input(tmp_path, axis):
    indices = helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])
    node = helper.make_node("OneHot", ["x", "depth", "values"], ["y0"], axis=axis)
    graph = helper.make_graph([node], "g", [indices], [helper.make_tensor_value_info("y0", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(4), "depth"),
                               numpy_helper.from_array(np.array([-1.0, 2.0], np.float32), "values")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    check(tmp_path, model, np.array([[0, 3, -1], [2, 1, -4]], np.int64))
