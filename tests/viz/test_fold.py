"""Folding variables and constants into the nodes that read them (the HTML viewer's drawing): what is folded, what
stays a node, single-use shape ops on weights, and the statistics computed from the values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nnef_torch.reader import read_graph
from nnef_torch.viz import fold
from nnef_torch.viz.fold import fold_variables, statistics
from nnef_torch.viz.from_ir import scene_of
from nnef_torch.viz.scene import CONSTANT, VARIABLE

TEXT = """version 1.0;
graph G( x ) -> ( y, w2 )
{
    x = external(shape = [1, 3, 8, 8]);
    w = variable(shape = [4, 3, 3, 3], label = 'conv/w');
    b = variable(shape = [4], label = 'conv/b');
    b2 = reshape(b, shape = [1, 4]);
    c = conv(x, w, b2);
    s = constant(shape = [1, 4, 1, 1], value = [0.5, 1.0, 1.5, 2.0]);
    m = mul(c, s);
    w2 = variable(shape = [2], label = 'out');
    t = variable(shape = [1, 4, 1, 1], label = 'shared');
    t2 = reshape(t, shape = [1, 4, 1, 1]);
    p = add(m, t2);
    q = sub(p, t2);
    y = relu(q);
}
"""


@pytest.fixture(scope="module")
def scene():
    return scene_of(read_graph(TEXT))


def by_op(drawn, op):
    (node,) = [node for node in drawn.nodes.values() if node.op == op]
    return node


def test_variables_and_constants_fold_into_their_readers(scene):
    values = {"conv/w": np.arange(108, dtype=np.float32).reshape(4, 3, 3, 3), "conv/b": np.zeros(4, np.float32)}
    folded = fold_variables(scene, values)
    kinds = {node.kind for node in folded.nodes.values()}
    assert CONSTANT not in kinds
    conv = by_op(folded, "conv")
    assert [(item.param, item.name, item.via) for item in conv.folded] == [("filter", "w", ()),
                                                                           ("bias", "b", ("reshape",))]
    assert conv.folded[1].type.shape == (1, 4)  # what conv reads: the reshape's output
    assert dict(conv.folded[0].stats) == {"min": 0.0, "max": 107.0, "mean": 53.5,
                                          "std": pytest.approx(float(np.arange(108).std()))}
    assert conv.folded[0].data_dtype == "float32"
    mul = by_op(folded, "mul")
    assert [item.kind for item in mul.folded] == [CONSTANT] and dict(mul.folded[0].stats)["max"] == 2.0
    assert all(edge.source in folded.nodes and edge.target in folded.nodes for edge in folded.edges)


def test_what_cannot_be_held_stays_a_node(scene):
    folded = fold_variables(scene)
    kept = {node.name for node in folded.nodes.values() if node.kind == VARIABLE}
    assert kept == {"w2"}  # a graph output
    # t's reshape is read twice: it stays a node, t folded into it, and add and sub read it as an edge
    (reshape,) = [node for node in folded.nodes.values() if node.name == "t2"]
    assert [item.name for item in reshape.folded] == ["t"]
    assert not by_op(folded, "add").folded and not by_op(folded, "sub").folded


def test_statistics_are_read_in_chunks(monkeypatch):
    monkeypatch.setattr(fold, "CHUNK", 7)
    values = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    expected = [values.min(), values.max(), values.mean(dtype=np.float64), values.std(dtype=np.float64)]
    for data in (values, torch.from_numpy(values)):
        dtype, stats = statistics(data)
        assert dtype == "float32" and [value for _, value in stats] == pytest.approx(expected, rel=1e-9)


def test_statistics_of_tensors_arrays_and_lists():
    dtype, stats = statistics(torch.tensor([1.0, 3.0], dtype=torch.bfloat16))
    assert dtype == "bfloat16" and dict(stats) == {"min": 1.0, "max": 3.0, "mean": 2.0, "std": 1.0}
    assert statistics(np.array([True, False]))[0] == "bool"
    assert statistics([2, 2])[1][-1] == ("std", 0.0)
    assert statistics(np.array([], np.float32)) == (None, ())
    assert statistics(np.array(["a"])) == ("<U1", ())
