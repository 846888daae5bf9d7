"""`Builder`: a variable renamed after the node it stands for stays a variable of the graph, with its data."""
from __future__ import annotations

import numpy as np

from nnef_torch.ir.builder import Builder


def test_a_renamed_variable_keeps_its_place_in_the_signature_and_its_data() -> None:
    b = Builder()
    x = b.external("x", "scalar", [2, 3])
    b.begin("arange")
    w = b.variable("constants/arange", "scalar", [3], np.arange(3, dtype=np.float32))
    w = b.rename(w, "arange")
    b.begin(None)
    y = b.op("add", x, b.op("unsqueeze", w, axes=[0]))
    graph = b.graph("G", [y])
    assert [(v.name, v.label) for v in graph.signature.variables] == [("arange", "constants/arange")]
    np.testing.assert_array_equal(b.data["constants/arange"], [0, 1, 2])
    assert [op.outputs["output"].name for op in graph.operations if op.name == "variable"] == ["arange"]
