"""The tract_core op table is chosen by the document's extension line: a graph read from a tract_core document
records it, and a standard document that invokes a `tract_core_*` op (undeclared, or declared as a fragment
of its own) is refused as an unknown operation, at the invocation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFSemanticError, NNEFUnsupportedError
from nnef_torch.reader import read_graph

FRAGMENTS = "extension KHR_enable_fragment_definitions;\n"
ERF = "fragment tract_core_erf( x: tensor<scalar> ) -> ( y: tensor<scalar> );\n"
GATHER = ("fragment tract_core_gather<?>( input: tensor<?>, indices: tensor<integer>, axis: integer ) "
          "-> ( output: tensor<?> );\n")


def _doc(head: str, statement: str) -> str:
    return ("version 1.0;\n" + head + "graph G( x ) -> ( y )\n{\n"
            "    x = external<scalar>(shape = [2, 3]);\n"
            "    i = constant<integer>(shape = [2], value = [0, 2]);\n"
            f"    y = {statement};\n}}\n")


def _load(tmp_path, text: str):
    (tmp_path / "graph.nnef").write_text(text)
    return nnef_torch.load(tmp_path)


def test_a_standard_document_does_not_see_an_undeclared_dialect_op():
    with pytest.raises(NNEFSemanticError, match="undefined operation 'tract_core_erf'") as caught:
        read_graph(_doc("", "tract_core_erf(x)"))
    assert (caught.value.location.line, caught.value.location.column) == (6, 9)


@pytest.mark.parametrize("declaration,statement", [
    (ERF, "tract_core_erf(x)"),
    (GATHER, "tract_core_gather<scalar>(x, i, axis = 1)"),  # was written as `gather` by the dialect's rule
], ids=["kept_whole", "lowering_rule"])
def test_a_standard_document_declaring_a_dialect_op_gets_none_of_its_rules(declaration, statement, tmp_path):
    text = _doc(FRAGMENTS + declaration, statement)
    graph = read_graph(text)
    assert graph.dialect is None
    op = graph.operations[-1]
    assert op.name == statement.split("(")[0].split("<")[0]  # kept as the document's own custom operation
    assert graph.tensors[op.outputs[next(iter(op.outputs))].name].shape is None  # no dialect shape rule
    with pytest.raises(NNEFUnsupportedError, match=f"no body and no implementation \\({op.name}\\)") as caught:
        _load(tmp_path, text)
    assert (caught.value.location.line, caught.value.location.column) == (8, 9)


def test_a_tract_core_document_reads_with_its_table(tmp_path):
    text = _doc("extension tract_registry tract_core;\n", "tract_core_erf(x)")
    assert read_graph(text).dialect == "tract_core"
    module = _load(tmp_path, text)
    assert module.nnef.graph.dialect == "tract_core"
    x = torch.from_numpy(np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3))
    torch.testing.assert_close(module(x), torch.erf(x))
