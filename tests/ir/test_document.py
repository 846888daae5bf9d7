"""A front end's graph handed over in memory (`graph_document`, `graph_file`) reads as the text it prints would:
the same IR at every expansion level, each statement located at its line of that text, and no text printed or
parsed on the way from the foreign file to the module."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from formats.nnvm.zoo_params import zoo_params

import nnef_torch
from nnef_torch import formats
from nnef_torch.format import graph_file
from nnef_torch.format.printer import print_assignment
from nnef_torch.reader import read_document, read_graph

ZOO_DIR = Path(__file__).parents[1] / "formats" / "nnvm" / "fixtures" / "zoo"
LIGHTNET = Path(__file__).parents[1] / "formats" / "lightnet" / "fixtures" / "seed_example.json"
NETS = ("resnet18_v1", "mobilenetv2_0.25", "squeezenet1.1")


def _zoo(name: str) -> formats.Converted:
    shapes = json.loads((ZOO_DIR / f"{name}.params-shapes.json").read_text())
    params = zoo_params({**shapes["arg"], **shapes["aux"]}, 0)
    params = {f"{'aux' if key in shapes['aux'] else 'arg'}:{key}": value for key, value in params.items()}
    return formats.convert(ZOO_DIR / f"{name}-symbol.json", params=params, input_shapes={"data": [1, 3, 224, 224]})


@pytest.mark.parametrize("name", NETS)
@pytest.mark.parametrize("keep", ["standard", "nothing"])
def test_a_front_end_document_reads_as_its_printed_text(name: str, keep: str) -> None:
    converted = _zoo(name)
    atomic = None if keep == "standard" else (lambda op: False)
    in_memory = read_document(converted.document, atomic=atomic)
    assert converted.document.held_text is None  # read without printing
    from_text = read_graph(converted.text, file=converted.document.file, atomic=atomic)
    assert in_memory.operations == from_text.operations
    assert in_memory.signature == from_text.signature and in_memory.name == from_text.name
    assert len(in_memory.operations) > 50


def test_statements_are_located_at_their_lines_of_the_printed_text() -> None:
    converted = _zoo("resnet18_v1")
    body = converted.document.document.graph.body
    lines = converted.text.split("\n")
    for statement in body:
        assert statement.loc.file == converted.document.file
        assert lines[statement.loc.line - 1] == "    " + print_assignment(statement)


def test_loading_a_foreign_model_neither_prints_nor_parses_nnef_text(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("graph text was parsed")

    monkeypatch.setattr(graph_file, "parse_document", refuse)
    module = nnef_torch.load(LIGHTNET)
    np.testing.assert_array_equal(module().detach().numpy(), [[2, 3, 4], [6, 7, 8]])
    assert module.nnef.document.held_text is None  # printed only when something asks for it
    module.save(tmp_path / "nnef")
    assert (tmp_path / "nnef" / "graph.nnef").read_text() == module.nnef.graph_text


def test_an_error_in_a_document_held_without_text_shows_its_printed_line() -> None:
    converted = _zoo("squeezenet1.1")
    with pytest.raises(nnef_torch.NNEFError) as info:
        read_document(converted.document, input_shapes={"data": [1, 5, 224, 224]})  # 5 channels: conv refuses
    error = info.value
    assert error.location.file == converted.document.file and error.source_line
    line = converted.text.split("\n")[error.location.line - 1]
    assert line.startswith("    squeezenet0_conv0_fwd = conv(") and error.source_line.startswith(line[:100])
