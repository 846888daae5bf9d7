"""ScatterND, ScatterElements and GatherND read from fixtures/scatter (make_scatter_fixtures.py): torch.onnx's forms
at opsets 13 and 17 (slice assignment, index_put with constant indices, with accumulate, scatter / scatter_add,
advanced indexing) and hand-written ones (reductions add, mul, max, min, duplicate indices, batch_dims, indices
computed from the inputs). Outputs against onnxruntime on the same file, gradients w.r.t. data and updates against
the source torch module, saved NNEF run in the Khronos executor; what cannot be converted refused by name."""
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
FIXTURES = Path(__file__).parent / "fixtures" / "scatter"
TORCH_EXPORTED = ("slice_assign", "index_put", "index_put_accumulate", "scatter", "scatter_add", "advanced_index")
HAND = ("hand_scatternd_add", "hand_scatternd_duplicates", "hand_scatternd_items", "hand_scatternd_mul",
        "hand_scatternd_max", "hand_scatter_elements_add", "hand_scatter_elements_min",
        "hand_scatter_elements_computed", "hand_gathernd_batch", "hand_gathernd_slices", "hand_gathernd_computed",
        "hand_gathernd_computed_batch")
CASES = [f"{name}{opset}" for name in TORCH_EXPORTED for opset in (13, 17)] + list(HAND)


def _run(path: Path) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    xs = inputs_of(path)
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {spec.name: x for spec, x in zip(session.get_inputs(), xs)})[0]
    got = nnef_torch.load(path)(*(torch.from_numpy(x) for x in xs))
    return got.detach().numpy(), expected, xs


@pytest.mark.parametrize("name", CASES)
def test_outputs_match_onnxruntime(name):
    got, expected, _ = _run(FIXTURES / f"{name}.onnx")
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_duplicate_indices_without_reduction_take_the_last_update():
    got, _, (data, updates) = _run(FIXTURES / "hand_scatternd_duplicates.onnx")  # rows 1, 3, 1
    want = data.copy()
    want[3], want[1] = updates[1], updates[2]
    np.testing.assert_array_equal(got, want)


# torch.onnx legacy writes index_put(accumulate=True) as ScatterND (no reduction) onto zeros, and scatter_add at
# opset 13 likewise with ScatterElements: duplicates are lost there (onnxruntime agrees with us, not with torch),
# so index_put_accumulate has none and gradients are checked on the opset 17 files (scatter_add: reduction add)
@pytest.mark.parametrize("name", TORCH_EXPORTED)
def test_gradients_wrt_data_and_updates_match_source_module(name):
    import make_scatter_fixtures  # tests/formats/onnx, on the path of the tests of this folder
    source = make_scatter_fixtures.torch_cases()[name][0]
    path = FIXTURES / f"{name}17.onnx"
    assert_same_input_gradients(source, nnef_torch.load(path), [torch.from_numpy(x) for x in inputs_of(path)])


def test_known_indices_need_no_onnx_specific_operations():
    from nnef_torch.formats.onnx import read
    ops = {op.name for op in read(FIXTURES / "slice_assign17.onnx").graph.operations}
    assert {"gather", "select"} <= ops


@pytest.mark.parametrize("name", ["slice_assign17", "hand_scatternd_add", "scatter17", "hand_scatter_elements_computed",
                                  "hand_gathernd_batch", "hand_gathernd_computed_batch"])
def test_saved_nnef_runs_in_the_khronos_executor(name, tmp_path):
    pytest.importorskip("nnef")
    assert_saved_nnef_runs(FIXTURES / f"{name}.onnx", tmp_path / "out")


@pytest.mark.parametrize("name, message", [
    ("refused_scatternd_reduction", "reduction 'sum' is not supported"),
    ("refused_scatternd_computed", "ScatterND indices computed from the graph's inputs are not supported"),
    ("refused_scatter_elements_computed_add", "reduction 'add' and indices computed from the graph's inputs")])
def test_unsupported_forms_are_refused_by_name(name, message):
    with pytest.raises(ForeignFormatError, match="Scatter") as caught:
        nnef_torch.load(FIXTURES / f"{name}.onnx")
    assert message in str(caught.value)
