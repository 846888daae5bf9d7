"""ONNX rules read from fixtures/ops (make_op_fixtures.py): ConvTranspose, Pad, Expand, Tile, Where, comparisons,
Reduce* (axes attribute at opset 13, axes input at 18), Clip, Split (split input, num_outputs at 18), Softmax's
axis, Slice with negative steps, and a small CNN and transformer-like block from the dynamo exporter (opset 18+). Each loaded module's outputs
are compared with onnxruntime's on the same file; gradients with the source torch module's; saved NNEF is parsed
by the Khronos parser."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from onnxruntime_oracle import assert_same_input_gradients, assert_saved_nnef_runs, inputs_of  # this folder

import nnef_torch

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
FIXTURES = Path(__file__).parent / "fixtures" / "ops"
TORCH_EXPORTED = ("conv_transpose", "conv_transpose_dilated", "pad_constant", "pad_reflect", "pad_edge", "expand",
                  "tile", "where", "compare", "reduce", "clip", "split", "softmax_axis")
CASES = [f"{name}{opset}" for name in TORCH_EXPORTED for opset in (13, 17)] + \
    ["hand_reduce13", "hand_reduce18", "hand_split18", "hand_clip13", "hand_slice_negative", "dynamo_cnn",
     "dynamo_block"]


def compare_with_onnxruntime(path: Path) -> nnef_torch.NNEFModule:
    xs = inputs_of(path)
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {spec.name: x for spec, x in zip(session.get_inputs(), xs)})
    module = nnef_torch.load(path)
    got = module(*(torch.from_numpy(x) for x in xs))
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert tuple(mine.shape) == theirs.shape
        np.testing.assert_allclose(mine.detach().numpy(), theirs, rtol=1e-4, atol=1e-5)
    return module


@pytest.mark.parametrize("name", CASES)
def test_outputs_match_onnxruntime(name):
    compare_with_onnxruntime(FIXTURES / f"{name}.onnx")


def _source(name: str) -> torch.nn.Module:
    """The fixture's torch module, with the file's initializers as its parameters."""
    import make_op_fixtures  # tests/formats/onnx, on the path of the tests of this folder
    from onnx import numpy_helper
    module = make_op_fixtures.torch_cases()[name][0].eval()
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
               for t in onnx.load(str(FIXTURES / f"{name}13.onnx")).graph.initializer}
    module.load_state_dict({key: weights[key] for key in module.state_dict()})
    return module


@pytest.mark.parametrize("name", ["conv_transpose", "pad_reflect", "pad_edge", "tile", "where", "softmax_axis"])
def test_gradients_match_source_module(name):
    loaded, source = nnef_torch.load(FIXTURES / f"{name}13.onnx"), _source(name)
    xs = [torch.from_numpy(x) for x in inputs_of(FIXTURES / f"{name}13.onnx")]
    assert_same_input_gradients(source, loaded, xs)
    named = dict(source.named_parameters())
    for key, parameter in loaded.named_parameters():
        match = [value for label, value in named.items() if label.replace(".", "_") in key]
        assert len(match) == 1, (key, list(named))
        torch.testing.assert_close(parameter.grad, match[0].grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["conv_transpose17", "pad_reflect17", "hand_reduce18", "dynamo_cnn", "dynamo_block"])
def test_saved_nnef_runs_in_the_khronos_executor(name, tmp_path):
    pytest.importorskip("nnef")
    assert_saved_nnef_runs(FIXTURES / f"{name}.onnx", tmp_path / "out")
