"""If and Loop decided while converting, read from fixtures/ops (make_op_fixtures.py): torch.jit.script's loop over
an input extent and if on another (legacy exporter, symbolic extents bound by input_shapes), and hand-written ones
(If on a constant and on a condition folded from the static shape, Loop with a trip count and scan outputs, Loop
whose body computes a constant condition, Loop whose body holds an If on the iteration number with a branch
initializer). Outputs against onnxruntime on the same file, gradients against the
scripted source module; an If on the input computes both branches and selects; a loop decided by the input, branches of different shapes and over-long loops refused with messages that name the node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
FIXTURES = Path(__file__).parent / "fixtures" / "ops"
SHAPE = [3, 4]  # the input of every fixture here (the scripted ones declare it symbolic)


def run_both(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    path = FIXTURES / f"{name}.onnx"
    x = np.random.RandomState(0).randn(*SHAPE).astype(np.float32)
    expected = ort.InferenceSession(str(path)).run(None, {"x": x})
    got = nnef_torch.load(path, input_shapes={"x": SHAPE})(torch.from_numpy(x))
    got = got if isinstance(got, (tuple, list)) else (got,)
    return [g.detach().numpy() for g in got], expected


@pytest.mark.parametrize("name", ["hand_if_const", "hand_if_shape", "hand_if_data", "hand_loop_scan", "hand_loop_cond",
                                  "hand_loop_nested_if", "scripted_loop13", "scripted_loop17"])
def test_outputs_match_onnxruntime(name):
    got, expected = run_both(name)
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)


def test_if_on_shape_takes_the_branch_the_shape_chooses():
    from nnef_torch.formats.onnx import read
    ops = {op.name for op in read(FIXTURES / "hand_if_shape.onnx").graph.operations}
    assert "add" in ops and "mul" not in ops  # width 4 > 3: then_branch (Add), not else_branch (Mul)


def test_if_on_the_input_selects_the_branch_taken_and_its_gradient():
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(1))
    module = nnef_torch.load(FIXTURES / "hand_if_data.onnx")
    for sign, slope in ((1.0, 1.0), (-1.0, 3.0)):  # then_branch x + 1 where the sum is positive, else x * 3
        given = (x.abs() * sign).requires_grad_()
        y = module(given)
        torch.testing.assert_close(y, given + 1.0 if sign > 0 else given * 3.0)
        y.sum().backward()
        torch.testing.assert_close(given.grad, torch.full_like(given, slope))


def test_scripted_loop_gradients_match_source_module():
    import make_op_fixtures  # tests/formats/onnx, on the path of the tests of this folder
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(0))
    theirs, mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = make_op_fixtures.ScriptedLoop()(theirs)
    got = nnef_torch.load(FIXTURES / "scripted_loop17.onnx", input_shapes={"x": SHAPE})(mine)
    sum(((e * (i + 1)).sum() for i, e in enumerate(expected)), torch.zeros(())).backward()
    sum(((g * (i + 1)).sum() for i, g in enumerate(got)), torch.zeros(())).backward()
    torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["hand_loop_scan", "scripted_loop13"])
def test_saved_nnef_parses(name, tmp_path):
    nnef = pytest.importorskip("nnef")
    module = nnef_torch.load(FIXTURES / f"{name}.onnx", input_shapes={"x": SHAPE})
    nnef_torch.save(module, tmp_path / "out", torch.randn(*SHAPE))
    nnef.load_graph(str(tmp_path / "out"))


@pytest.mark.parametrize("name, message", [
    ("refused_if_shapes", r"\(If\): output 0 has shape \[3, 4\] in then_branch and \[\] in else_branch.*tract's scan"),
    ("refused_loop_data", r"\(Loop\): the trip count M \(input 0\) is computed from the graph's inputs.*tract"),
    ("refused_loop_body_cond", r"\(Loop\): the body computes its condition from the graph's inputs"),
    ("refused_loop_long", r"\(Loop\): the trip count M is 100000: nnef_torch unrolls at most 4096")])
def test_undecided_or_long_control_flow_is_refused(name, message):
    with pytest.raises(ForeignFormatError, match=message):
        nnef_torch.load(FIXTURES / f"{name}.onnx")
