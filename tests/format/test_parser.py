"""Parser and printer: precedence as documented, exact round trips, agreement with the Khronos parser."""
from __future__ import annotations

import math

import pytest
from khronos import CONFORMANCE, conformance_cases, khronos

from nnef_torch.errors import ExportError, Location, NNEFError
from nnef_torch.format import ast
from nnef_torch.format.lexer import tokenize
from nnef_torch.format.parser import parse_document, parse_expression, parse_fragments
from nnef_torch.format.printer import print_assignment, print_document, print_expr, print_fragment, print_literal
from nnef_torch.stdlib import stdlib_text

I = ast.Identifier


def L(value):
    kind = {bool: "logical", int: "integer", float: "scalar", str: "string"}[type(value)]
    return ast.Literal(value, kind)


def B(op, left, right):
    return ast.BinaryExpr(op, left, right)


def U(op, operand):
    return ast.UnaryExpr(op, operand)


PRECEDENCE = [
    ("a + b * c", B("+", I("a"), B("*", I("b"), I("c")))),
    ("a * b + c", B("+", B("*", I("a"), I("b")), I("c"))),
    ("a - b - c", B("-", B("-", I("a"), I("b")), I("c"))),
    ("a / b * c", B("*", B("/", I("a"), I("b")), I("c"))),
    ("a ^ b ^ c", B("^", B("^", I("a"), I("b")), I("c"))),
    ("a * b ^ c", B("*", I("a"), B("^", I("b"), I("c")))),
    ("-a + b", B("+", U("-", I("a")), I("b"))),
    ("-a ^ 2", U("-", B("^", I("a"), L(2)))),
    ("a ^ -2.0", B("^", I("a"), U("-", L(2.0)))),
    ("!a && b", B("&&", U("!", I("a")), I("b"))),
    ("a < b && c", B("&&", B("<", I("a"), I("b")), I("c"))),
    ("a && b || c", B("||", B("&&", I("a"), I("b")), I("c"))),
    ("a in b && c", B("in", I("a"), B("&&", I("b"), I("c")))),
    ("a + b < c * d", B("<", B("+", I("a"), I("b")), B("*", I("c"), I("d")))),
    ("a if c else b + 1", ast.IfElseExpr(I("c"), I("a"), B("+", I("b"), L(1)))),
    ("a if c else b if d else e", ast.IfElseExpr(I("c"), I("a"), ast.IfElseExpr(I("d"), I("b"), I("e")))),
    ("x[1:][0]", ast.IndexExpr(ast.RangeExpr(I("x"), L(1), None), L(0))),
    ("-x[0]", U("-", ast.IndexExpr(I("x"), L(0)))),
    ("[for i in r, j in s if i < j yield i * j]",
     ast.Comprehension((("i", I("r")), ("j", I("s"))), B("<", I("i"), I("j")), B("*", I("i"), I("j")))),
    ("f<integer>(x, k = 2)", ast.Invocation("f", ast.PrimitiveType("integer"),
                                            (ast.Argument(None, I("x")), ast.Argument("k", L(2))))),
    ("a < b", B("<", I("a"), I("b"))),
    ("shape_of(x)[0]", ast.IndexExpr(ast.BuiltinExpr("shape_of", I("x")), L(0))),
    ("'it\\'s' + \"a\\\\b\"", B("+", L("it's"), L("a\\b"))),
    ("(a, [1, 2.5e-3], true)", ast.TupleExpr((I("a"), ast.ArrayExpr((L(1), L(0.0025))), L(True)))),
]


@pytest.mark.parametrize("text,expected", PRECEDENCE, ids=[text for text, _ in PRECEDENCE])
def test_precedence(text, expected):
    assert parse_expression(text) == expected
    assert parse_expression(print_expr(expected)) == expected


def test_unary_minus_left_operand_is_parenthesized_for_other_parsers():
    assert print_expr(parse_expression("-a + b")) == "(-a) + b"
    assert print_expr(parse_expression("-(a + b)")) == "-(a + b)"


def test_tokens_carry_positions_and_comments_are_skipped():
    tokens = tokenize("a = 1.5e3; # comment\n  'x\\'y' -> <=")
    assert [(t.kind, t.value, t.line, t.column) for t in tokens] == [
        ("identifier", "a", 1, 1), ("punct", "=", 1, 3), ("scalar", 1500.0, 1, 5), ("punct", ";", 1, 10),
        ("string", "x'y", 2, 3), ("punct", "->", 2, 10), ("punct", "<=", 2, 13), ("eof", None, 2, 15)]


def test_integer_and_scalar_literals_are_told_apart():
    assert [t.kind for t in tokenize("1 1.0 1e5 1.")[:-1]] == ["integer", "scalar", "scalar", "scalar"]


def test_extensions_separated_by_spaces_or_commas():
    text = "version 1.0; extension A B, C; extension D;\ngraph G( x ) -> ( x ) { x = external(shape = [1]); }"
    assert parse_document(text).extensions == ("A", "B", "C", "D")


def _documents():
    docs = {case.name: (case / "graph.nnef").read_text() for case in conformance_cases()}
    from ir.test_lower import COMPOSITIONAL, COMPOUND_CALLS, _document
    docs["compositional"] = COMPOSITIONAL
    docs.update({f"call_{op}": _document(body) for op, body in COMPOUND_CALLS})
    return docs


DOCUMENTS = _documents()


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_parse_print_round_trip(name):
    doc = parse_document(DOCUMENTS[name])
    text = print_document(doc)
    assert parse_document(text) == doc
    assert print_document(parse_document(text)) == text  # canonical: printing is a fixed point


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_printed_text_is_accepted_by_khronos_with_the_same_graph(name):
    nnef = khronos()
    text = print_document(parse_document(DOCUMENTS[name]))
    lowered = ["block", "pick"]
    original, printed = (nnef.parse_string(t, lowered=lowered) for t in (DOCUMENTS[name], text))
    assert [(op.name, dict(op.attribs)) for op in printed.operations] == \
           [(op.name, dict(op.attribs)) for op in original.operations]


def test_stdlib_round_trips():
    fragments = parse_fragments(stdlib_text())
    assert len(fragments) == 119
    printed = "\n".join(print_fragment(fragment) for fragment in fragments)
    assert parse_fragments(printed) == fragments


def test_round_trip_count_is_reported(capsys):
    with capsys.disabled():
        print(f"\n[parse/print] {len(DOCUMENTS)} documents + the stdlib round-tripped "
              f"(conformance suite {'present' if CONFORMANCE.is_dir() else 'absent'})")


def test_arrays_of_numbers_are_compact_and_read_as_the_nodes_they_stand_for():
    expr = parse_expression("[1, -2, 30]")
    assert isinstance(expr.items, ast.NumberItems) and expr.items.values() == [1, -2, 30]
    minus = expr.items[1]
    assert minus == ast.UnaryExpr("-", ast.Literal(2, "integer"))
    assert (minus.loc.column, minus.operand.loc.column, expr.items[2].loc.column) == (5, 6, 9)
    assert expr == ast.ArrayExpr((ast.Literal(1, "integer"), minus, ast.Literal(30, "integer")))
    assert parse_expression("[-0.5, 1e3]").items.values() == [-0.5, 1000.0]


def test_arrays_of_names_and_logicals_are_compact_and_read_as_the_nodes_they_stand_for():
    expr = parse_expression("[x, yy, x]")
    assert isinstance(expr.items, ast.NameItems) and expr.items.names() == ["x", "yy", "x"]
    assert expr.items.first_places() == {"x": 0, "yy": 1}
    assert [item.loc.column for item in expr.items] == [2, 5, 9]
    assert expr == ast.ArrayExpr((ast.Identifier("x"), ast.Identifier("yy"), ast.Identifier("x")))
    logicals = parse_expression("[true, false]")
    assert isinstance(logicals.items, ast.NumberItems) and logicals.items.values() == [True, False]
    assert logicals == ast.ArrayExpr((ast.Literal(True, "logical"), ast.Literal(False, "logical")))
    assert [print_expr(e) for e in (expr, logicals)] == ["[x, yy, x]", "[true, false]"]


@pytest.mark.parametrize("text", ["[1, 2.5]", "[1, x]", "[1, - 2]", "[1 + 2, 3]", "[2, 3 ^ 2]", "[1, [2]]"])
def test_arrays_with_other_items_are_read_item_by_item(text):
    expr = parse_expression(text)
    assert not isinstance(expr.items, ast.NumberItems)
    assert print_expr(expr) == text.replace("- 2", "-2")


@pytest.mark.parametrize("text", ["[x, 1]", "[true, x]", "[x, f(x)]", "[x, x[0]]", "[x, -y]", "[x, y + z]", "[true, 1]"])
def test_arrays_of_names_with_other_items_are_read_item_by_item(text):
    expr = parse_expression(text)
    assert type(expr.items) is tuple and print_expr(expr) == text


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_printing_a_value_without_literal_names_its_attribute(value):
    call = ast.Invocation("leaky_relu", None, (ast.Argument(None, ast.Identifier("x")),
                                               ast.Argument("alpha", ast.Literal(value, "scalar"))),
                          Location("graph.nnef", 7, 14))
    with pytest.raises(ExportError, match=f"attribute 'alpha' of 'leaky_relu': NNEF has no literal for the scalar "
                                          f"{value}") as info:
        print_assignment(ast.Assignment(ast.Identifier("y"), call))
    assert isinstance(info.value, NNEFError) and str(info.value.location) == "graph.nnef:7:14"
    nested = ast.Invocation("f", None, (ast.Argument("a", ast.ArrayExpr((ast.Literal(1.0, "scalar"), call))),))
    with pytest.raises(ExportError, match="attribute 'alpha' of 'leaky_relu'"):  # the innermost invocation names it
        print_expr(nested)
    with pytest.raises(ExportError, match="no literal for the scalar"):
        print_literal([1.0, value])
