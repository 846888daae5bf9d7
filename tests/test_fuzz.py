"""Property-based fuzzing of the text front end (hypothesis).

(a) Any text fed to `parse_document` + `lower` is either accepted or rejected with an `NNEFError` that has a
    location; nothing else escapes (RecursionError, IndexError, KeyError, AttributeError, TypeError, ...). The texts
    are random characters, random token soups, and mutations (characters and tokens inserted, deleted, replaced,
    swapped) of valid documents: the conformance suite and a compositional document with fragments.
(b) The printer round-trips random valid expression trees: `parse_expression(print_expr(e)) == e`.
(c) graph.quant: random and mutated texts give specs or an `NNEFQuantizationError`, and accepted texts print and
    read back to equal specs.

An escape found here is a bug: it is fixed in the code and gets a regression row in tests/test_bad_inputs.py.
Example counts are reported by the last test (run pytest with -s or look for the '[fuzz]' line).
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from fuzzing import SCALE, fuzz
from hypothesis import example, given
from hypothesis import strategies as st

from nnef_torch.errors import NNEFError, NNEFQuantizationError
from nnef_torch.format import ast
from nnef_torch.format.lexer import KEYWORDS, MAX_INTEGER, PUNCTUATION, TYPE_NAMES
from nnef_torch.format.parser import BUILTINS, parse_document, parse_expression
from nnef_torch.format.printer import print_expr
from nnef_torch.format.quant_file import QUANTIZATION_OPS, print_quantization, read_quantization
from nnef_torch.ir.lower import lower
from nnef_torch.stdlib import standard_fragments

pytestmark = pytest.mark.slow

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "openvx_nnef_core"
COUNTS: Counter[str] = Counter()

COMPOSITIONAL = """\
version 1.0;
extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;

fragment scaled( x: tensor<scalar>, factor: scalar = 2.0 ) -> ( y: tensor<scalar> )
{
    y = x * factor;
}

fragment twice<?>( x: tensor<?> ) -> ( y: tensor<?>, z: tensor<?> )
{
    y = copy<?>(x);
    z = copy(x);
}

fragment block( input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> = 0.0,
                strides: integer[] = [], alpha: scalar = 0.1 ) -> ( output: tensor<scalar> )
{
    conv1 = conv(input, filter, bias, stride = strides if length_of(strides) > 0 else [1, 1], padding = []);
    output = leaky_relu(conv1, alpha = alpha);
}

fragment pick( values: tensor<scalar>[], index: integer ) -> ( value: tensor<scalar> )
{
    value = values[index] if index < length_of(values) else values[0];
}

fragment pair( x: tensor<scalar> ) -> ( low: tensor<scalar>, high: tensor<scalar> )
{
    low = min(x, 0.0);
    high = max(x, 0.0);
}

graph G( input ) -> ( output, extra )
{
    input = external(shape = [1, 4, 8, 8]);
    filter = variable(shape = [4, 4, 3, 3], label = 'block/filter');
    bias = variable(shape = [1, 4], label = 'block/bias');
    hidden = block(input, filter, bias, strides = [for i in range_of([1, 1]) yield 1]);
    [a, b] = split(hidden, axis = 1, ratios = [1, 1]);
    low, high = pair(a);
    c = pick([low, high, b], index = integer('1') + 0);
    s0, s1 = twice(c);
    s = scaled(s0 + s1, factor = -0.5 * 2.0 ^ 2.0);
    t = sum_reduce(s, axes = [2, 3], normalize = true) + 1.0;
    output = reshape(t, shape = [1, -1]);
    extra = select(or(hidden > 0.0, hidden < -1.0), hidden, -hidden);
}
"""


def _seed_documents() -> list[str]:
    documents = [COMPOSITIONAL]
    if CONFORMANCE.is_dir():
        documents += [path.read_text() for path in sorted(CONFORMANCE.glob("*/graph.nnef"))]
    return documents


SEEDS = _seed_documents()

# Characters: printable ASCII (NNEF punctuation included), white space, and a few that must be refused cleanly.
ALPHABET = [chr(code) for code in range(0x20, 0x7f)] + ["\n", "\t", "\r", "\f", "\v", "\x00", "\x07", "é", "²",
                                                       "\u2028"]
VOCABULARY = sorted(KEYWORDS) + list(PUNCTUATION) + [
    "true", "false", "0", "1", "-1", "2.5", "1e999", "99999999999999999999", "100000000", "'x'", '"constant"', "''",
    "G", "input", "output", "x", "y", "f", "external", "variable", "update", "conv", "relu", "add", "split",
    "reshape", "shape", "label", "axes", "KHR_enable_fragment_definitions", "KHR_enable_operator_expressions",
    "tensor<scalar>", "<?>", "#", "\n", "$", "'", "[]", "()", "{}",
]
_TOKEN_SPAN = re.compile(r"\w+|'[^'\n]*'|\"[^\"\n]*\"|->|<=|>=|==|!=|&&|\|\||\S")


def _accept_or_refuse(text: str) -> str:
    """Parse and lower `text`; the only failure allowed is an NNEFError with a location that prints."""
    try:
        lower(parse_document(text, "graph.nnef"), text=text)
        return "accepted"
    except NNEFError as error:
        assert error.location is not None, f"{type(error).__name__} without a location: {error.message}"
        str(error)
        return "refused"


@st.composite
def _mutated(draw, documents: list[str]) -> str:
    """A document with 1 to 4 random edits of characters or of whole tokens."""
    text = draw(st.sampled_from(documents))
    for _ in range(draw(st.integers(1, 4))):
        spans = [match.span() for match in _TOKEN_SPAN.finditer(text)]
        kind = draw(st.sampled_from(["insert", "delete", "replace", "token-delete", "token-replace",
                                     "token-duplicate", "token-swap", "token-insert"]))
        if kind.startswith("token") and len(spans) >= 2:
            i, j = sorted(draw(st.lists(st.integers(0, len(spans) - 1), min_size=2, max_size=2)))
            (start, end), (start2, end2) = spans[i], spans[j]
            token = draw(st.sampled_from(VOCABULARY))
            if kind == "token-delete":
                text = text[:start] + text[end:]
            elif kind == "token-replace":
                text = text[:start] + token + text[end:]
            elif kind == "token-duplicate":
                text = text[:end] + " " + text[start:end] + text[end:]
            elif kind == "token-insert":
                text = text[:start] + token + " " + text[start:]
            elif i != j:  # swap two tokens
                text = text[:start] + text[start2:end2] + text[end:start2] + text[start:end] + text[end2:]
        else:
            at = draw(st.integers(0, len(text)))
            char = draw(st.sampled_from(ALPHABET))
            if kind == "delete" and at < len(text):
                text = text[:at] + text[at + 1:]
            elif kind == "replace" and at < len(text):
                text = text[:at] + char + text[at + 1:]
            else:
                text = text[:at] + char + text[at:]
    return text


@fuzz(500)
@given(st.text(alphabet=ALPHABET, max_size=300))
def test_random_text_is_accepted_or_refused_cleanly(text):
    COUNTS["random text"] += 1
    _accept_or_refuse(text)


@fuzz(500)
@given(st.lists(st.sampled_from(VOCABULARY), max_size=80).map(" ".join))
def test_random_token_soup_is_accepted_or_refused_cleanly(text):
    COUNTS["token soup"] += 1
    _accept_or_refuse("version 1.0;\n" + text if text.startswith("graph") else text)


@fuzz(1000)
@given(_mutated(SEEDS))
def test_mutated_documents_are_accepted_or_refused_cleanly(text):
    COUNTS["mutated documents"] += 1
    if len(SEEDS) == 1:
        COUNTS["mutated documents (no conformance suite)"] += 1
    _accept_or_refuse(text)


def test_seed_documents_are_valid():
    """The mutations start from valid documents (else they would test little)."""
    if not CONFORMANCE.is_dir():
        pytest.skip(f"the shared conformance suite is absent ({CONFORMANCE}); only the compositional document is "
                    "mutated")
    for text in SEEDS:
        assert _accept_or_refuse(text) == "accepted", text[:200]


@pytest.mark.parametrize("text", [
    "version 1.0; graph G( x ) -> ( y ) { x = external(shape = [" + "(" * 5000 + "1" + ")" * 5000 + "]); y = x; }",
    "version 1.0; graph G( x ) -> ( y ) { x = external(shape = [" + "-" * 5000 + "1]); y = x; }",
    "version 1.0; graph G( x ) -> ( y ) { x = external(shape = " + "[" * 5000 + "1" + "]" * 5000 + "); y = x; }",
    "version 1.0; extension KHR_enable_fragment_definitions; fragment f( x: " + "(" * 3000 + "integer" + ", integer)"
    * 3000 + " ) -> ( y: tensor<scalar> );\ngraph G( x ) -> ( y ) { x = external(shape = [1]); y = x; }",
    "version 1.0; graph G( x ) -> ( y ) { x = external(shape = [1]); " + "[" * 3000 + "y" + "]" * 3000 + " = x; }",
])
def test_deep_nesting_is_refused_with_a_syntax_error(text):
    """Regression: deep brackets and unary chains ended the recursive descent with RecursionError."""
    assert _accept_or_refuse(text) == "refused"


# ---- (a') documents built as an attacker would, from random parameters (tests/test_hostile_inputs.py has one of
# each, with its cost). Sizes stay small enough for many examples; the limits themselves are tested there.

_HEAD = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def _hostile_graph(*statements: str, definitions: str = "") -> str:
    return (_HEAD + definitions + "graph G( input ) -> ( output )\n{\n    input = external(shape = [1, 4, 8, 8]);\n"
            + "".join(f"    {s}\n" for s in statements) + "}\n")


_DIGITS = st.builds(lambda zeros, digits: "0" * zeros + digits, st.integers(0, 6000),
                    st.from_regex(r"[0-9]{1,25}", fullmatch=True))
_OPERATORS = st.sampled_from(["+", "-", "*", "/"])


@st.composite
def _hostile_documents(draw) -> str:
    family = draw(st.integers(0, 8))
    if family == 0:  # integer literals with many digits or zeros
        return _hostile_graph(f"output = linear_quantize(input, min = 0.0, max = 1.0, bits = {draw(_DIGITS)});")
    if family == 1:  # integer() of long digit strings
        sign = draw(st.sampled_from(["", "-"]))
        return _hostile_graph(f"output = reshape(input, shape = [1, 4, 8, integer('{sign}{draw(_DIGITS)}')]);")
    if family == 2:  # long flat chains of tensors or integers
        n, ops = draw(st.integers(1, 4000)), draw(st.lists(_OPERATORS, min_size=1, max_size=4))
        terms = [draw(st.sampled_from(["input", "2.0", "(input)", "-input", "input[0]"]))] + [
            f" {ops[i % len(ops)]} input" for i in range(n)]
        integers = " ".join(f"{ops[i % len(ops)]} {i % 7 + 1}" for i in range(n))
        return _hostile_graph(draw(st.sampled_from([f"output = {''.join(terms)};",
                                                     f"output = reshape(input, shape = [1, 4, 8, 8 {integers}]);"])))
    if family == 3:  # operations returning many tensors
        op = draw(st.sampled_from(["unstack(big, axis = 0)", "copy_n(big, times = {n})"]))
        extent = draw(st.sampled_from([0, 1, 2, 3, 65536, 65537, 10 ** 9, 2 ** 62, 2 ** 63 - 1]))
        names = draw(st.integers(1, 4))
        lhs = "[" + ", ".join(f"r{i}" for i in range(names)) + "]"
        return _hostile_graph(f"big = variable(shape = [{max(extent, 1)}, 1], label = 'big');",
                              f"{lhs} = {op.format(n=extent)};", "output = relu(input);")
    if family == 4:  # labels
        parts = draw(st.lists(st.sampled_from(["a", "B", ".", "..", "", "x.y", "_-", " ", ":"]), min_size=1,
                              max_size=5))
        label = draw(st.sampled_from(["/", "\\\\"])).join(parts)
        if draw(st.booleans()):
            label = draw(st.sampled_from(["/", "\\\\", "C:"])) + label
        return _hostile_graph(f"w = variable(shape = [1, 4, 8, 8], label = '{label}');", "output = add(input, w);")
    if family == 5:  # huge extents
        extents = draw(st.lists(st.sampled_from([1, 2, 2 ** 31, 2 ** 32 - 1, 2 ** 62, 2 ** 63 - 1]), min_size=1,
                                max_size=4))
        then = draw(st.sampled_from(["reshape(big, shape = [-1])", "tile(big, repeats = [{r}])",
                                     "pad(big, padding = [{p}])"]))
        shown = then.format(r=", ".join("2" for _ in extents), p=", ".join("(0, 2)" for _ in extents))
        return _hostile_graph(f"big = variable(shape = {extents}, label = 'big');", f"other = {shown};",
                              "output = relu(input);")
    if family == 6:  # comprehensions, nested, over arrays and strings
        n, m = draw(st.integers(0, 300)), draw(st.integers(0, 300))
        inner = draw(st.sampled_from([f"range_of([1] * {m})", f"range_of('a' * {m})", f"[for k in [{m}] yield k]"]))
        return _hostile_graph(f"output = reshape(input, shape = [1, 4, 8, 8 + length_of([for i in range_of([0] * {n})"
                              f" yield length_of([for j in {inner} yield i + j])]) - {n}]);")
    if family == 7:  # recursion, direct or mutual, bare or inside expressions
        wrap = draw(st.sampled_from(["{}", "{} + 1.0", "relu({})", "-{}", "2.0 * {} - input"]))
        callee = draw(st.sampled_from(["f", "g"]))
        definitions = (f"fragment g( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{{\n    y = f(x);\n}}\n"
                       f"fragment f( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{{\n"
                       f"    y = {wrap.format(callee + '(x)').replace('input', 'x')};\n}}\n")
        return _hostile_graph("output = f(input);", definitions=definitions)
    depth = draw(st.integers(1, 10))  # fragments calling the next one twice: 2^depth expansions
    definitions = "".join(f"fragment f{i}( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{{\n"
                          + ("    y = x;\n" if i == depth else f"    y = f{i + 1}(x) + f{i + 1}(x);\n") + "}\n"
                          for i in range(depth + 1))
    return _hostile_graph("output = f0(input);", definitions=definitions)


@fuzz(300)
@given(_hostile_documents())
def test_hostile_documents_are_accepted_or_refused_cleanly(text):
    COUNTS["hostile documents"] += 1
    _accept_or_refuse(text)


# ---- (b) printer round trip over random expression trees --------------------------------------------------

_PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7e)  # printable ASCII, with a short repr
_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: name not in KEYWORDS and name not in ("true", "false"))
_SCALARS = st.floats(allow_nan=False, allow_infinity=False, width=64)
_LITERALS = st.one_of(
    st.integers(-MAX_INTEGER, MAX_INTEGER).map(lambda v: ast.Literal(v, "integer")),
    _SCALARS.map(lambda v: ast.Literal(v, "scalar")),
    st.text(alphabet=_PRINTABLE, max_size=8).map(lambda v: ast.Literal(v, "string")),
    st.booleans().map(lambda v: ast.Literal(v, "logical")),
)
_UNARY = ("+", "-", "!")
_BINARY = ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "in")
# One precedence level first, then an operator of it: '^' alone is a level, so it comes up often.
_BY_LEVEL = st.sampled_from([("in",), ("&&", "||"), ("<", "<=", ">", ">=", "==", "!="), ("+", "-"), ("*", "/"),
                             ("^",)]).flatmap(st.sampled_from)
_GENERICS = st.sampled_from(TYPE_NAMES + ("?",)).map(ast.PrimitiveType)


_LEAVES = _LITERALS | _NAMES.map(ast.Identifier)


@st.composite
def _expressions(draw, depth: int = 3):
    """Any expression the parser can produce (and negative literals, which it cannot), up to `depth` levels."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(_LEAVES)
    child = _expressions(depth - 1)
    optional = st.none() | child
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return ast.ArrayExpr(tuple(draw(st.lists(child, max_size=3))))
    if kind == 1:
        return ast.TupleExpr(tuple(draw(st.lists(child, min_size=2, max_size=3))))
    if kind == 2:
        return ast.UnaryExpr(draw(st.sampled_from(_UNARY)), draw(child))
    if kind == 3:
        return ast.BinaryExpr(draw(st.sampled_from(_BINARY)), draw(child), draw(child))
    if kind == 4:
        return ast.IfElseExpr(draw(child), draw(child), draw(child))
    if kind == 5:
        iterators = draw(st.lists(st.tuples(_NAMES, child), min_size=1, max_size=2))
        return ast.Comprehension(tuple(iterators), draw(optional), draw(child))
    if kind == 6:
        return ast.IndexExpr(draw(child), draw(child))
    if kind == 7:
        return ast.RangeExpr(draw(child), draw(optional), draw(optional))
    if kind == 8:
        return ast.BuiltinExpr(draw(st.sampled_from(BUILTINS)), draw(child))
    positional = [ast.Argument(None, value) for value in draw(st.lists(child, max_size=2))]
    named = draw(st.lists(st.tuples(_NAMES, child), max_size=2, unique_by=lambda item: item[0]))
    return ast.Invocation(draw(_NAMES), draw(st.none() | _GENERICS),
                          tuple(positional) + tuple(ast.Argument(name, value) for name, value in named))


EXPRESSIONS = _expressions()


@st.composite
def _operators(draw, depth: int = 4):
    """Unary and binary operators only, where precedence and grouping go wrong. Drawn level by level with fixed
    odds (st.recursive makes deep trees of one shape rare), so that every combination of three comes up."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(_LITERALS | st.sampled_from("abc").map(ast.Identifier))
    if draw(st.integers(0, 2)) == 0:
        return ast.UnaryExpr(draw(st.sampled_from(_UNARY)), draw(_operators(depth - 1)))
    return ast.BinaryExpr(draw(_BY_LEVEL), draw(_operators(depth - 1)), draw(_operators(depth - 1)))


OPERATORS = _operators()


def _fold_negative_literals(expr):
    """`-3` parses as a minus applied to 3, where a tree built in code may hold the literal -3: fold the former
    into the latter (bottom up) so that both compare equal."""
    if isinstance(expr, ast.NumberItems):  # the parser's compact form of an all-number array: its nodes
        expr = tuple(expr)
    if isinstance(expr, tuple):
        return tuple(_fold_negative_literals(item) for item in expr)
    if not hasattr(expr, "__dataclass_fields__") or isinstance(expr, ast.PrimitiveType):
        return expr
    fields = {name: _fold_negative_literals(getattr(expr, name)) for name in expr.__dataclass_fields__
              if name != "loc"}
    folded = type(expr)(**fields)
    if isinstance(folded, ast.UnaryExpr) and folded.op == "-" and isinstance(folded.operand, ast.Literal) \
            and folded.operand.kind in ("integer", "scalar"):
        return ast.Literal(-folded.operand.value, folded.operand.kind)
    return folded


def _has_negative_literal(expr) -> bool:
    if isinstance(expr, (tuple, ast.NumberItems)):
        return any(_has_negative_literal(item) for item in expr)
    if isinstance(expr, ast.Literal):
        return expr.kind in ("integer", "scalar") and (expr.value < 0 or str(expr.value).startswith("-"))
    if not hasattr(expr, "__dataclass_fields__"):
        return False
    return any(_has_negative_literal(getattr(expr, name)) for name in expr.__dataclass_fields__ if name != "loc")


@fuzz(1000)
@given(EXPRESSIONS)
def test_printer_round_trips_random_expressions(expr):
    COUNTS["expressions"] += 1
    _check_round_trip(expr)


@fuzz(1000)
@given(OPERATORS)
@example(ast.BinaryExpr("^", ast.Identifier("a"), ast.UnaryExpr("-", ast.BinaryExpr(  # regression: printed as
    "^", ast.Identifier("b"), ast.Identifier("c")))))  # 'a ^ -b ^ c', which reads (a ^ -b) ^ c
def test_printer_round_trips_operator_expressions(expr):
    COUNTS["operator expressions"] += 1
    _check_round_trip(expr)


def _check_round_trip(expr) -> None:
    text = print_expr(expr)
    parsed = parse_expression(text)
    if _has_negative_literal(expr):  # printed as a unary minus: equal up to that
        assert _fold_negative_literals(parsed) == _fold_negative_literals(expr), text
    else:
        assert parsed == expr, text
    canonical = print_expr(parsed)  # equal to `text` unless a negative literal became a unary minus
    assert canonical == text or _has_negative_literal(expr)
    assert print_expr(parse_expression(canonical)) == canonical  # printing parsed trees is a fixed point


# ---- (c) graph.quant ---------------------------------------------------------------------------------------

_QUANT_VALUES = st.one_of(
    st.integers(-300, 300).map(str), _SCALARS.map(lambda v: repr(v) if "e" not in repr(v) else "1.5e3"),
    st.sampled_from(["true", "false", "'x'", "x", "1 + 2", "[]", "[0.0, 1.0]", "[[1.0]]", "(1, 2)", "-", "inf",
                     "1e999", "99999999999999999999", "scalar(1)", "[1, 'a']"]),
)
_QUANT_ARGS = st.lists(st.tuples(st.sampled_from(["min", "max", "bits", "signed", "symmetric", "zero_point",
                                                  "scale", "x", "foo"]), _QUANT_VALUES), max_size=6)
_QUANT_KEYS = st.text(alphabet=_PRINTABLE, max_size=8)


@st.composite
def _quant_texts(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(_QUANT_KEYS).replace("\\", "\\\\").replace('"', '\\"')
        op = draw(st.sampled_from(QUANTIZATION_OPS + ("relu", "foo", "external")))
        args = ", ".join(f"{name} = {value}" if draw(st.booleans()) or name == "foo" else value
                         for name, value in draw(_QUANT_ARGS))
        line = f'"{key}": {op}({args});'
        if draw(st.integers(0, 9)) == 0:  # now and then a random cut or insertion
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(st.sampled_from(["", ";", ":", "(", ")", "'", '"', "#", "\\", "$"])) + line[at + 1:]
        lines.append(line)
    return "\n".join(lines)


_VALID_QUANT = ('"input": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
                '"output": zero_point_linear_quantize(zero_point = 3, scale = 0.5, bits = 8, signed = true, '
                'symmetric = false);\n'
                '"w": min_max_linear_quantize(min = [-1.0, -2.0], max = [1.0, 2.0], bits = 4, signed = false, '
                'symmetric = true);\n'
                '"l": logarithmic_quantize(max = 4.0, bits = 5);\n')


def _read_quant_or_refuse(text: str) -> str:
    try:
        specs = read_quantization(text, standard_fragments())
    except NNEFQuantizationError as error:
        assert error.location is not None and error.location.file == "graph.quant", str(error)
        str(error)
        return "refused"
    again = read_quantization(print_quantization(specs), standard_fragments())
    assert again == specs
    return "accepted"


@fuzz(700)
@given(_quant_texts())
def test_random_quantization_is_read_or_refused_cleanly(text):
    COUNTS["graph.quant generated"] += 1
    _read_quant_or_refuse(text)


@fuzz(400)
@given(st.one_of(st.text(alphabet=ALPHABET, max_size=120), _mutated([_VALID_QUANT])))
def test_random_and_mutated_quantization_text_is_read_or_refused_cleanly(text):
    COUNTS["graph.quant random and mutated"] += 1
    _read_quant_or_refuse(text)


def test_valid_quantization_seed_is_accepted():
    assert _read_quant_or_refuse(_VALID_QUANT) == "accepted"


def test_zz_report_example_counts(capsys):
    """Runs last in this file: the number of examples each property saw in this session."""
    with capsys.disabled():
        shown = ", ".join(f"{name} {count}" for name, count in COUNTS.items())
        print(f"\n[fuzz] examples (scale {SCALE}): {shown}; total {sum(COUNTS.values())}; "
              f"{len(SEEDS)} seed documents{' (conformance suite absent)' if len(SEEDS) == 1 else ''}")
