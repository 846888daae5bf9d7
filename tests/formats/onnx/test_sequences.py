"""ONNX sequence operators resolved while converting, read from fixtures/sequences (make_sequence_fixtures.py):
torch.jit.script modules that append to a Python list in a loop (legacy exporter, opset 17: SequenceEmpty or
SequenceConstruct, a Loop carrying the list with SequenceInsert and SequenceAt, ConcatFromSequence, SequenceLength)
and hand-written graphs (SplitToSequence in its three forms, SequenceAt, SequenceErase, SequenceLength,
SequenceInsert at a negative position). Outputs against onnxruntime on the same file and against the scripted source
module, gradients against the source module; a sequence reaching a graph output, or a tensor operator, refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
FIXTURES = Path(__file__).parent / "fixtures" / "sequences"
SHAPE = [3, 4]  # the input of every fixture here (the scripted ones declare its first extent symbolic)
SCRIPTED = ["scripted_stack", "scripted_cat", "scripted_chain"]


def _load(name: str) -> torch.nn.Module:
    return nnef_torch.load(FIXTURES / f"{name}.onnx", input_shapes={"x": SHAPE})


@pytest.mark.parametrize("name", [f"{name}17" for name in SCRIPTED] +
                         ["hand_split_at_length", "hand_split_sizes", "hand_split_chunk", "hand_construct_insert"])
def test_outputs_match_onnxruntime(name):
    x = np.random.RandomState(0).randn(*SHAPE).astype(np.float32)
    expected = ort.InferenceSession(str(FIXTURES / f"{name}.onnx")).run(None, {"x": x})[0]
    got = _load(name)(torch.from_numpy(x)).detach().numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", SCRIPTED)
def test_scripted_outputs_and_gradients_match_source_module(name):
    import make_sequence_fixtures  # tests/formats/onnx, on the path of the tests of this folder
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(1))
    theirs, mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = make_sequence_fixtures.SCRIPTED[name]()(theirs)
    got = _load(f"{name}17")(mine)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(2))
    (expected * weights).sum().backward()
    (got * weights).sum().backward()
    torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)


def test_unrolled_sequence_leaves_only_tensor_operations():
    from nnef_torch.formats.onnx import read
    ops = [op.name for op in read(FIXTURES / "scripted_stack17.onnx", input_shapes={"x": SHAPE}).graph.operations]
    assert ops.count("mul") == 3 and ops.count("unsqueeze") == 3 and ops.count("concat") == 1


def test_saved_nnef_parses(tmp_path):
    nnef = pytest.importorskip("nnef")
    nnef_torch.save(_load("scripted_chain17"), tmp_path / "out", torch.randn(*SHAPE))
    nnef.load_graph(str(tmp_path / "out"))


def test_sequence_graph_output_is_refused():
    with pytest.raises(ForeignFormatError, match=r"graph output 'rows' is a sequence \(3 item\(s\)\)"):
        nnef_torch.load(FIXTURES / "refused_sequence_output.onnx")


def _written(tmp_path: Path, nodes: list, inits: tuple = ()) -> Path:
    """A graph of `nodes` from input x (SHAPE) to float output y (declared 0-d:
    these graphs are refused before it is reached)."""
    helper = onnx.helper
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])],
                              initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("nodes, message", [
    ([("SplitToSequence", ["x"], ["s"], {"axis": 0}), ("Relu", ["s"], ["y"], {})],
     r"node 1 .*\(Relu\).* reads a sequence"),
    ([("SplitToSequence", ["x"], ["s"], {"axis": 0}), ("SequenceAt", ["s", "five"], ["y"], {})],
     r"\(SequenceAt\): position 5 is out of range for a sequence of 3 item"),
    ([("SplitToSequence", ["x", "bad"], ["s"], {"axis": 1}), ("SequenceAt", ["s", "five"], ["y"], {})],
     r"\(SplitToSequence\): split sizes \[3, 3\] do not divide extent 4"),
    ([("Cast", ["x"], ["m"], {"to": onnx.TensorProto.INT64}), ("SplitToSequence", ["x"], ["s"], {"axis": 0}),
      ("SequenceAt", ["s", "m"], ["y"], {})], r"\(SequenceAt\): the position \(input 1\) must be known while"),
    ([("SequenceEmpty", [], ["s"], {"dtype": 1}), ("ConcatFromSequence", ["s"], ["y"], {"axis": 0})],
     r"\(ConcatFromSequence\): the sequence is empty"),
    ([("ConcatFromSequence", ["x"], ["y"], {"axis": 0})], r"\(ConcatFromSequence\): input 0 is a tensor"),
])
def test_bad_sequences_are_refused_naming_the_node(tmp_path, nodes, message):
    inits = [onnx.numpy_helper.from_array(np.array(5, np.int64), "five"),
             onnx.numpy_helper.from_array(np.array([3, 3], np.int64), "bad")]
    path = _written(tmp_path, [onnx.helper.make_node(op, i, o, **a) for op, i, o, a in nodes], tuple(inits))
    with pytest.raises(ForeignFormatError, match=message):
        nnef_torch.load(path)
