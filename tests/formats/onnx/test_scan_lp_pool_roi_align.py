"""Scan, LpPool and GlobalLpPool, IsInf, ReverseSequence and the window functions read from small ONNX models made
with onnx.helper, compared with onnxruntime running the same file; LpPool's gradient compared with torch's
lp_pool2d; one saved NNEF run by the Khronos executor."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_more_ops import check, one_node  # noqa: E402

X = np.random.RandomState(1).randn(2, 3, 6, 5).astype(np.float32)


def model_of(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(a), name) for name, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def floats(name, shape=None):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# ------------------------------------------------------------------------------------------------ Scan
def cumulative_scan(directions, output_directions, axis=0):
    """Scan over x's `axis`: state s += slice (a row of 4), scan output s * 2."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "row"], ["s_next"]),
         helper.make_node("Mul", ["s_next", "two"], ["out"])], "body",
        [floats("s", [4]), floats("row", [4])], [floats("s_next", [4]), floats("out", [4])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    node = helper.make_node("Scan", ["init", "x"], ["final", "y"], body=body, num_scan_inputs=1,
                            scan_input_axes=[axis], scan_input_directions=directions,
                            scan_output_axes=[axis], scan_output_directions=output_directions)
    shape = [5, 4] if axis == 0 else [4, 5]
    return model_of([node], [floats("x", shape)], [floats("final", [4]), floats("y", shape)],
                    [("init", np.arange(4, dtype=np.float32))])


@pytest.mark.parametrize("directions, output_directions, axis",
                         [([0], [0], 0), ([1], [0], 0), ([1], [1], 0), ([0], [1], 1)])
def test_scan_cumulative_sum(tmp_path, directions, output_directions, axis):
    x = np.random.RandomState(2).randn(5, 4).astype(np.float32)
    check(tmp_path, cumulative_scan(directions, output_directions, axis), x if axis == 0 else x.T.copy())


def test_scan_of_unequal_lengths_is_refused(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["a", "c"], ["o"])], "body", [floats("a", [4]), floats("c", [4])],
                             [floats("o", [4])])
    node = helper.make_node("Scan", ["x", "z"], ["y"], body=body, num_scan_inputs=2)
    model = model_of([node], [floats("x", [5, 4])], [floats("y", [5, 4])], [("z", np.zeros((3, 4), np.float32))])
    onnx.save_model(model, tmp_path / "m.onnx")
    with pytest.raises(ForeignFormatError, match="different lengths"):
        nnef_torch.load(tmp_path / "m.onnx")


# ------------------------------------------------------------------------------------------------ LpPool
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2]},
                                   {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}])
def test_lp_pool(tmp_path, p, attrs):
    check(tmp_path, one_node("LpPool", list(X.shape), attrs={"p": p, **attrs}), X)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(tmp_path, p):
    check(tmp_path, one_node("GlobalLpPool", list(X.shape), attrs={"p": p}), X)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_pool_gradient_matches_torch(tmp_path, p):
    path = check(tmp_path, one_node("LpPool", list(X.shape), attrs={"p": p, "kernel_shape": [2, 2],
                                                                    "strides": [2, 2]}), X)
    x = torch.from_numpy(X).requires_grad_()
    nnef_torch.load(path)(x).sum().backward()
    twin = torch.from_numpy(X).requires_grad_()
    # ONNX sums |x|^p; torch sums x^p (no absolute value): the twin pools |x|
    torch.nn.functional.lp_pool2d(twin.abs(), p, 2, 2).sum().backward()
    torch.testing.assert_close(x.grad, twin.grad, rtol=1e-4, atol=1e-5)


def test_lp_pool_p0_is_refused(tmp_path):
    node = helper.make_node("LpPool", ["x"], ["y"], p=0, kernel_shape=[2, 2])
    onnx.save_model(model_of([node], [floats("x", list(X.shape))], [floats("y", [2, 3, 5, 4])]), tmp_path / "m.onnx")
    with pytest.raises(ForeignFormatError, match="p 0"):
        nnef_torch.load(tmp_path / "m.onnx")


# ------------------------------------------------------------------------------------------------ IsInf
SPECIAL = np.array([[np.inf, -np.inf, np.nan, 0.0, 3.4e38, -3.4e38, 1.5, -2.0]], np.float32)


@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                   {"detect_positive": 0, "detect_negative": 0}])
def test_is_inf(tmp_path, attrs):
    check(tmp_path, one_node("IsInf", list(SPECIAL.shape), attrs=attrs), SPECIAL)


# ------------------------------------------------------------------------------------------------ ReverseSequence
@pytest.mark.parametrize("batch_axis, time_axis, lengths", [(1, 0, [3, 0, 5]), (0, 1, [2, 4])])
def test_reverse_sequence(tmp_path, batch_axis, time_axis, lengths):
    shape = [5, 3, 2] if batch_axis == 1 else [2, 4, 3]
    x = np.random.RandomState(3).randn(*shape).astype(np.float32)
    model = one_node("ReverseSequence", shape, attrs={"batch_axis": batch_axis, "time_axis": time_axis},
                     initializers=[("lens", np.array(lengths, np.int64))], extra_inputs=["lens"])
    check(tmp_path, model, x)


# ------------------------------------------------------------------------------------------------ windows
@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_functions(tmp_path, op, periodic):
    nodes = [helper.make_node(op, ["size"], ["w"], periodic=periodic),
             helper.make_node("Add", ["x", "w"], ["y0"])]
    model = model_of(nodes, [floats("x", [3, 7])], [floats("y0", [3, 7])],
                     [("size", np.array(7, np.int64))], opset=17)
    check(tmp_path, model, np.random.RandomState(4).randn(3, 7).astype(np.float32))


# ------------------------------------------------------------------------------------------------ saved NNEF
def test_saved_lp_pool_and_scan_run_in_the_khronos_executor(tmp_path):
    pytest.importorskip("nnef")
    from onnxruntime_oracle import assert_saved_nnef_runs
    lp = check(tmp_path, one_node("LpPool", list(X.shape), attrs={"p": 2, "kernel_shape": [2, 2]}), X)
    assert_saved_nnef_runs(lp, tmp_path / "lp_nnef")
    scan = check(tmp_path, cumulative_scan([1], [0]), np.random.RandomState(2).randn(5, 4).astype(np.float32))
    assert_saved_nnef_runs(scan, tmp_path / "scan_nnef")


# ------------------------------------------------------------------------------------------------ RoiAlign
ROIS = np.array([[0.0, 0.0, 4.0, 5.0], [1.2, 0.7, 3.9, 4.4], [2.5, 1.0, 4.5, 5.5]], np.float32)  # inside the input


@pytest.mark.parametrize("attrs", [{"output_height": 2, "output_width": 3, "sampling_ratio": 2},
                                   {"output_height": 3, "output_width": 2, "sampling_ratio": 1,
                                    "spatial_scale": 0.5}])
def test_roi_align(tmp_path, attrs):
    rois = ROIS / attrs.get("spatial_scale", 1.0)
    model = one_node("RoiAlign", list(X.shape), attrs=attrs, extra_inputs=["rois", "batch"],
                     initializers=[("rois", rois), ("batch", np.array([0, 1, 1], np.int64))])
    check(tmp_path, model, X)


@pytest.mark.parametrize("attrs, message", [({"sampling_ratio": 0}, "sampling_ratio 0"),
                                            ({"sampling_ratio": 2, "mode": "max"}, "mode"),
                                            ({"sampling_ratio": 2, "coordinate_transformation_mode":
                                              "output_half_pixel"}, "coordinate_transformation_mode")])
def test_roi_align_refusals(tmp_path, attrs, message):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attrs)
    model = model_of([node], [floats("x", list(X.shape))], [floats("y", [3, 3, 1, 1])],
                     [("rois", ROIS), ("batch", np.array([0, 1, 1], np.int64))])
    onnx.save_model(model, tmp_path / "m.onnx")
    with pytest.raises(ForeignFormatError, match=message):
        nnef_torch.load(tmp_path / "m.onnx")


def test_roi_align_with_regions_given_at_the_call(tmp_path):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=2, output_width=2,
                            sampling_ratio=2, spatial_scale=0.5)
    model = model_of([node], [floats("x", list(X.shape)), floats("rois", [3, 4])], [floats("y", [3, 3, 2, 2])],
                     [("batch", np.array([1, 0, 1], np.int64))])
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path)
    rois = ROIS * 2
    expected = ort.InferenceSession(str(path)).run(None, {"x": X, "rois": rois})[0]
    got = nnef_torch.load(path)(torch.from_numpy(X), torch.from_numpy(rois))
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-4, atol=1e-5)
