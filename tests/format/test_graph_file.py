"""`GraphFile`: a graph.nnef held as text or as a document, each form made once from the other when asked for."""
from __future__ import annotations

import pytest

from nnef_torch.errors import NNEFSyntaxError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.format.parser import parse_document
from nnef_torch.format.printer import print_document

TEXT = "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external(shape = [1]);\n    y = relu(x);\n}\n"


def test_text_is_parsed_once_when_the_document_is_asked_for() -> None:
    held = GraphFile(TEXT, file="m/graph.nnef")
    assert not held.parsed and held.size == len(TEXT)
    document = held.document
    assert held.parsed and held.document is document
    assert document == parse_document(TEXT) and document.graph.loc.file == "m/graph.nnef"


def test_a_document_is_printed_once_when_its_text_is_asked_for() -> None:
    printed: list[str] = []

    def printer() -> str:
        printed.append("once")
        return print_document(parse_document(TEXT))

    held = GraphFile(document=parse_document(TEXT), printer=printer, size=10)
    assert held.held_text is None and held.size == 10 and printed == []
    assert held.text == held.text == print_document(parse_document(TEXT)) and printed == ["once"]


def test_text_that_does_not_parse_is_a_located_syntax_error() -> None:
    with pytest.raises(NNEFSyntaxError, match="m/graph.nnef:3"):
        _ = GraphFile("version 1.0;\n\ngraph G( x ) -> ( y ) {", file="m/graph.nnef").document


def test_it_needs_text_or_a_document_with_its_printer() -> None:
    with pytest.raises(ValueError, match="needs its text"):
        GraphFile(document=parse_document(TEXT))
