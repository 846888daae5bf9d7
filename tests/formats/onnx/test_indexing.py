"""CumSum, GatherElements and Resize read from fixtures/ops (make_op_fixtures.py): torch.onnx's forms at opsets 13
and 17 (F.interpolate nearest, linear, bilinear, trilinear and bicubic, with scales and sizes, aligned or not;
torch.cumsum; torch.gather with constant and computed indices) and hand-written ones (CumSum's exclusive and
reverse, negative indices, Resize's axes, half_pixel_symmetric, pytorch_half_pixel, exclude_outside, nearest
roundings). Outputs against onnxruntime on the same file, gradients against the source torch module, saved NNEF
parsed by the Khronos parser; unsupported Resize attributes refused by name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from onnxruntime_oracle import assert_same_input_gradients, assert_saved_nnef_runs, inputs_of  # this folder

import nnef_torch
from nnef_torch.errors import ForeignFormatError

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
FIXTURES = Path(__file__).parent / "fixtures" / "ops"
TORCH_EXPORTED = ("resize_nearest_x2", "resize_nearest_size", "resize_bilinear_x2", "resize_bilinear_aligned",
                  "resize_bilinear_size", "resize_bilinear_size_aligned", "resize_bicubic", "resize_bicubic_aligned",
                  "resize_linear_1d", "resize_trilinear", "cumsum", "gather_elements_const", "gather_elements_topk")
HAND = ("hand_cumsum_e0r0", "hand_cumsum_e0r1", "hand_cumsum_e1r0", "hand_cumsum_e1r1", "hand_gather_elements_neg",
        "hand_resize_axes18", "hand_resize_symmetric19", "hand_resize_cubic_exclude", "hand_resize_cubic_down",
        "hand_resize_nearest_ceil", "hand_resize_nearest_down", "hand_resize_linear_asym", "hand_resize_pytorch_half")
CASES = [f"{name}{opset}" for name in TORCH_EXPORTED for opset in (13, 17)] + list(HAND)


@pytest.mark.parametrize("name", CASES)
def test_outputs_match_onnxruntime(name):
    path = FIXTURES / f"{name}.onnx"
    xs = inputs_of(path)
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {spec.name: x for spec, x in zip(session.get_inputs(), xs)})[0]
    got = nnef_torch.load(path)(*(torch.from_numpy(x) for x in xs))
    assert tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["resize_nearest_size", "resize_bilinear_x2", "resize_bilinear_size",
                                  "resize_bicubic", "resize_trilinear", "cumsum", "gather_elements_topk"])
def test_input_gradients_match_source_module(name):
    import make_op_fixtures  # tests/formats/onnx, on the path of the tests of this folder
    source = make_op_fixtures.torch_cases()[name][0]
    loaded = nnef_torch.load(FIXTURES / f"{name}17.onnx")
    xs = [torch.from_numpy(x) for x in inputs_of(FIXTURES / f"{name}17.onnx")]
    assert_same_input_gradients(source, loaded, xs)


def test_resize_uses_nnef_upsampling_where_it_is_the_same():
    from nnef_torch.formats.onnx import read
    ops = {name: {op.name for op in read(FIXTURES / f"{name}.onnx").graph.operations}
           for name in ("resize_nearest_x213", "resize_bilinear_x217", "resize_bilinear_aligned13", "resize_bicubic13")}
    assert "nearest_upsample" in ops["resize_nearest_x213"]
    assert "multilinear_upsample" in ops["resize_bilinear_x217"]
    # the Khronos executor has no 'aligned' multilinear_upsample (nor factors other than 2, nor one spatial axis)
    assert "gather" in ops["resize_bilinear_aligned13"] and "multilinear_upsample" not in ops["resize_bilinear_aligned13"]
    assert "gather" in ops["resize_bicubic13"]


@pytest.mark.parametrize("name", ["resize_bicubic17", "resize_nearest_x217", "hand_resize_symmetric19",
                                  "resize_bilinear_aligned17", "resize_linear_1d17", "resize_trilinear17",
                                  "hand_resize_linear_asym", "hand_cumsum_e1r1", "gather_elements_topk17"])
def test_saved_nnef_runs_in_the_khronos_executor(name, tmp_path):
    pytest.importorskip("nnef")
    assert_saved_nnef_runs(FIXTURES / f"{name}.onnx", tmp_path / "out")


@pytest.mark.parametrize("name, message", [("refused_resize_antialias", "'antialias' = 1 is not supported"),
                                           ("refused_resize_policy", "'keep_aspect_ratio_policy' = 'not_larger'")])
def test_unsupported_resize_attributes_are_refused(name, message):
    with pytest.raises(ForeignFormatError, match="Resize") as caught:
        nnef_torch.load(FIXTURES / f"{name}.onnx")
    assert message in str(caught.value)
