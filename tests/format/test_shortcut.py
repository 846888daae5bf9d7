"""The statement shortcut (format/shortcut.py) builds the tree the general rules build, locations included, and
leaves every other text, errors included, to them."""
from __future__ import annotations

import dataclasses

import pytest
from khronos import conformance_cases

from nnef_torch.errors import Location, NNEFError
from nnef_torch.format import ast, shortcut
from nnef_torch.format.parser import parse_document
from nnef_torch.format.printer import print_document
from nnef_torch.stdlib import stdlib_text


def _tree(node):
    """A node as nested tuples that include every location (equality of nodes leaves them out)."""
    if isinstance(node, Location):
        return ("at", node.file, node.line, node.column, node.offset)
    if isinstance(node, ast.NumberItems):
        return ("numbers", node.kind, tuple(_tree(item) for item in node))
    if dataclasses.is_dataclass(node):
        return (type(node).__name__,) + tuple(_tree(getattr(node, f.name)) for f in dataclasses.fields(node))
    if isinstance(node, (tuple, list)):
        return tuple(_tree(item) for item in node)
    return (type(node).__name__, repr(node))


def _parse(text, monkeypatch, use_shortcut):
    with monkeypatch.context() as patch:
        if not use_shortcut:
            patch.setattr(shortcut, "statement", lambda *args: None)
        try:
            return _tree(parse_document(text, "g.nnef"))
        except NNEFError as error:
            return ("error", type(error).__name__, str(error))


def _graph(*lines):
    return "version 1.0;\ngraph g( input ) -> ( output )\n{\n" + "".join(f"    {line}\n" for line in lines) + "}\n"


STATEMENTS = [
    "x = conv(input, conv1_filter, padding = [(3, 3), (3, 3)], stride = [2, 2]);",
    "x = variable<scalar>(shape = [64, 3, 7, 7], label = 'conv1/filter');",
    "x = external<scalar>(shape = [1, 3, 224, 224]);",
    "x = batch_normalization(a, b, c, d, e, epsilon = 1e-05);",
    "[a, b, c] = split(x, axis = 1, ratios = [1, 1, 1]);",
    "a, b = moments(x, axes = [1]);",
    "x = reshape(y, shape = [-1, 64, 4, 64]);",
    "x = f(y, a = [-1.5, 2.0, -0.0], b = [1., 2e3], c = [], d = true, e = false, g = \"s\");",
    "x = f();",
    "x = f<?>(y);",
    "x=f(y,k=1);",
    "x  =  f (  y  ,  k  =  [ 1 , 2 ]  )  ;",
    "x = f(y,\tk = 1)\t;  # a comment after the statement",
    "x = f(y, k = [1, 2.0]);",  # numbers of two kinds
    "x = f(y, k = [(1, 2), 3]);",
    "x = f(y, k = [(-1, 2)]);",
    "x = f(y, k = [(1)]);",
    "x = f(y, k = [1, x]);",
    "x = f(y, k = - 1);",
    "x = f(y, k = -1);",
    "x = f(y, k = [- 1]);",
    "x = f(y, k = 'a\\'b');",
    "x = f(y, k = 'caf\u00e9');",
    "x = f(y, k = 2x);",
    "x = f(y, k = 1e999);",
    "x = f(y, k = 99999999999999999999);",
    "x = f(y, k = 1.5e);",
    "x = f(k = 1, y);",
    "x = f(y, k = 1,);",
    "x = f(y, k = 1) + g(y);",
    "x = f(y)[0];",
    "x = f(y # comment\n, k = 1);",
    "x = f(y, scalar = 1);",
    "x = f(true);",
    "x = scalar(1);",
    "true = f(y);",
    "x = f<tensor>(y);",
    "x = f<integer>(y, k = [1, 2, 3]);",
    "x = f(y, k = [1, 2, 3]) ;",
    "x = f(y)",
    "x = f(y, k = [1, 2",
    "x = f(y, == 1);",
    "x = f(y, k == 1);",
    "x = f(y, k = [1, 2]] );",
    "x = f(y, k = (1, 2));",
    "[a] = f(y);",
    "[a, b], c = f(y);",
    "a, [b] = f(y);",
    "x = f(y, k = [1,2],j=[3 ,4]);",
    "x = f(y, k = [" + ", ".join(["7"] * 1350) + "]);",  # about MAX_LENGTH long
    "x = f(y, k = [" + ", ".join(["7"] * 1370) + "]);",  # longer: the general way
    "x = f(k = ';', " + "y, " * 2000 + "z);",
]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_statement_reads_as_the_general_rules_read_it(statement, monkeypatch):
    for text in (_graph(statement), _graph("a = relu(input);", statement, "output = relu(x);"),
                 _graph(statement).replace("\n}\n", "")):
        assert _parse(text, monkeypatch, True) == _parse(text, monkeypatch, False)


def test_common_statements_take_the_shortcut(monkeypatch):
    taken = []
    real = shortcut.statement

    def spy(*args):
        found = real(*args)
        taken.append(found is not None)
        return found
    monkeypatch.setattr(shortcut, "statement", spy)
    parse_document(_graph(*STATEMENTS[:13]))
    assert all(taken) and len(taken) == 13


def _corpus():
    texts = {case.name: (case / "graph.nnef").read_text() for case in conformance_cases()}
    texts["stdlib"] = stdlib_text()
    texts["statements"] = _graph(*STATEMENTS[:13])
    return texts


CORPUS = _corpus()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_reads_the_same_with_and_without_the_shortcut(name, monkeypatch):
    text = CORPUS[name]
    if name == "stdlib":
        text += "\ngraph g( input ) -> ( output ) { output = relu(input); }\n"
    first = _parse(text, monkeypatch, True)
    assert first == _parse(text, monkeypatch, False)
    if first[0] != "error":
        printed = print_document(parse_document(text))
        assert _parse(printed, monkeypatch, True) == _parse(printed, monkeypatch, False)
