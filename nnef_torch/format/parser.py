"""NNEF text -> syntax tree (spec chapter 3.2 and appendix A), by recursive descent.

Operator precedence, lowest first: `x if c else y` (right to left), `in`, `&&` `||`, comparisons, `+` `-`,
`*` `/`, unary `+` `-` `!`, `^`, subscripts. Binary operators group left to right (also `^`, as the Khronos
parser does). Unary operators follow ordinary mathematics: `-a + b` is `(-a) + b` (the Khronos parser reads it as
`-(a + b)`), `-a ^ 2` is `-(a ^ 2)`, and `a ^ -2` is allowed. The printer parenthesizes every such case so that
both readings agree on printed text.

A body statement of the common flat shape (`a = op(x, key = [1, 2]);`) is read by `shortcut.statement` straight
from the text into the same tree; the lexer then resumes after it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from nnef_torch.errors import Location, NNEFSyntaxError
from nnef_torch.format import ast, shortcut
from nnef_torch.format.lexer import TYPE_NAMES, Token, iter_tokens
from nnef_torch.gc_pause import gc_paused

BUILTINS = ("shape_of", "length_of", "range_of") + TYPE_NAMES
_BINARY_LEVELS = (("in",), ("&&", "||"), ("<", "<=", ">", ">=", "==", "!="), ("+", "-"), ("*", "/"))
_BINARY_PRECEDENCE = {op: level for level, ops in enumerate(_BINARY_LEVELS) for op in ops}
# Brackets, unary operators and nested types deeper than this are refused with a syntax error: the descent
# recurses about a dozen Python frames per level, and Python's stack is the limit otherwise.
MAX_NESTING = 50
# A missing one of these is reported just after the token it should follow, when the next token is on a later line.
_TERMINATORS = (";", ")", "]", "}")
_UNARY = ("-", "+", "!")
_ENDS = frozenset((",", ")", ";", "]"))  # punctuation that no operator of an expression follows
_R = TypeVar("_R")


# What a file must begin with to be read as NNEF. Until it has, an error quotes nothing of the file (no token, no
# source line): a file that is not NNEF at all (a stray or planted file) is never echoed into a message.
_DOCUMENT_START = "'version' at the start of an NNEF document (after any comments)"
_QUANT_START = "a quoted tensor name at the start of a quantization file (its first entry)"


# the extension whose argument is a condition on symbols (tract's `extension tract_assert S >= 1;`)
CONDITION_EXTENSION = "tract_assert"


@gc_paused
def parse_document(text: str, file: str | None = None) -> ast.Document:
    """Parse a whole document: version, extensions, fragment definitions and the graph."""
    return _parse(text, file, lambda parser: parser.document(require_graph=True), _DOCUMENT_START)


@gc_paused
def parse_fragments(text: str, file: str | None = None) -> tuple[ast.Fragment, ...]:
    """Parse a fragment library (such as the standard library): fragment definitions only."""
    return _parse(text, file, lambda parser: parser.document(require_graph=False)).fragments


@gc_paused
def parse_expression(text: str, file: str | None = None) -> ast.Expr:
    """Parse one expression (used by graph.quant and tests)."""
    def whole(parser: _Parser) -> ast.Expr:
        expr = parser.expression()
        parser.expect("eof")
        return expr
    return _parse(text, file, whole)


@gc_paused
def parse_quantization(text: str, file: str | None = None) -> tuple[ast.QuantEntry, ...]:
    """Parse graph.quant (spec 5.3): lines of `"tensor": op(name = value, ...);`."""
    def entries(parser: _Parser) -> tuple[ast.QuantEntry, ...]:
        found = []
        while parser.tok.kind != "eof":
            key = parser.expect("string")
            parser.recognized = True
            parser.expect(":")
            if parser.tok.kind != "identifier":
                raise parser.error(f"expected a quantization operation, found {_describe(parser.tok)}")
            invocation = parser.invocation()
            parser.expect(";")
            found.append(ast.QuantEntry(key.value, invocation, parser.loc(key)))
        return tuple(found)
    return _parse(text, file, entries, _QUANT_START)


def _parse(text: str, file: str | None, rule: Callable[[_Parser], _R], start: str | None = None) -> _R:
    """Run `rule` on a parser of `text`; an error before it has begun as `start` says (see _DOCUMENT_START) quotes
    nothing of it."""
    parser = None
    try:
        parser = _Parser(text, file)
        parser.recognized = start is None
        return parser.run(lambda: rule(parser))
    except NNEFSyntaxError as error:
        if start is None or parser is not None and parser.recognized:
            raise
        # source_line "": no line of the file is shown, even where a caller attaches the source later
        raise NNEFSyntaxError(f"expected {start}; this file does not begin so, and none of it is shown",
                              error.location, source_line="") from None


class _Parser:
    """Recursive descent over a stream of tokens: it holds the current token, at most four more ahead and the one
    before, so memory does not grow with the length of a line or of the text."""

    def __init__(self, text: str, file: str | None):
        self.text, self.file = text, file
        self._stream = iter_tokens(text, file)
        self.tok: Token = next(self._stream)  # the current token
        self._ahead: list[Token] = []  # tokens already read after the current one
        self.previous: Token | None = None  # the token before the current one
        self.depth = 0  # nesting of recursive rules, see MAX_NESTING
        self.recognized = True  # whether the text has begun as NNEF does (see _parse)
        self._line_starts = shortcut.LineStarts(text)

    def run(self, rule: Callable[[], _R]) -> _R:
        try:
            return rule()
        except RecursionError:  # a backstop: MAX_NESTING should stop deep input first
            raise self.error("the text nests too deeply to be parsed") from None

    def enter(self) -> None:
        """Enter one level of a recursive rule (brackets, unary operators, nested types); `self.depth -= 1` leaves
        it. (A syntax error ends the whole parse, so nothing needs to leave on the way out of one.)"""
        if self.depth >= MAX_NESTING:
            raise self.error(f"expressions and types may nest at most {MAX_NESTING} levels deep")
        self.depth += 1

    def nested(self, rule: Callable[..., _R], *args: Any) -> _R:
        """Run `rule` one nesting level deeper."""
        self.enter()
        result = rule(*args)
        self.depth -= 1
        return result

    # -- token helpers --
    def peek(self, ahead: int = 1) -> Token:
        """The token `ahead` places after the current one (the 'eof' token past the end)."""
        tokens = self._ahead
        while len(tokens) < ahead and (tokens[-1] if tokens else self.tok).kind != "eof":
            tokens.append(next(self._stream))
        return tokens[min(ahead, len(tokens)) - 1] if tokens and ahead > 0 else self.tok

    def advance(self) -> None:
        """Move to the next token (staying on 'eof' at the end)."""
        if self._ahead:
            self.previous, self.tok = self.tok, self._ahead.pop(0)
        elif self.tok.kind != "eof":
            self.previous, self.tok = self.tok, next(self._stream)

    def loc(self, token: Token | None = None) -> Location:
        token = token or self.tok
        return Location(self.file, token.line, token.column)

    def error(self, message: str, token: Token | None = None) -> NNEFSyntaxError:
        """A syntax error at `token` (the current one by default); at the end of input, just after the last token."""
        token = token or self.tok
        at_end = token.kind == "eof" and self.previous is not None  # the parser only meets 'eof' at the end
        loc = self.after(self.previous) if at_end else self.loc(token)
        return NNEFSyntaxError(message, loc).with_source(self.text, self.file)

    def after(self, token: Token) -> Location:
        """The position just past `token`: where something that should follow it is missing."""
        return Location(self.file, token.line, token.end)

    def at(self, text: str) -> bool:
        token = self.tok
        return token.text == text and token.kind in ("punct", "keyword")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.advance()
            return True
        return False

    def expect(self, what: str) -> Token:
        """Consume a token: punctuation/keyword text, or the kinds 'identifier', 'string', 'eof'."""
        token = self.tok
        if what in ("identifier", "string", "eof", "integer", "scalar"):
            ok = token.kind == what
        else:
            ok = token.kind in ("punct", "keyword") and token.text == what
        if not ok:
            message = f"expected {_describe_expected(what)}, found {_describe(token)}"
            previous = self.previous
            if what in _TERMINATORS and previous is not None and token.line > previous.line:
                # `a = f(x)` then a new line: the ';' is missing at the end of the line, not before the next one
                raise NNEFSyntaxError(message, self.after(previous)).with_source(self.text, self.file)
            raise self.error(message)
        self.advance()
        return token

    # -- document --
    def document(self, require_graph: bool) -> ast.Document:
        start = self.tok
        version, version_loc = "", None
        if require_graph or self.at("version"):
            self.expect("version")
            self.recognized = True
            number = self.tok
            if number.kind != "scalar" or "e" in number.text.lower() or number.text.endswith("."):
                raise self.error(f"expected a version number such as 1.0, found {_describe(number)}")
            self.advance()
            version, version_loc = number.text, self.loc(number)
            self.expect(";")
        extensions: list[str] = []
        while self.accept("extension"):
            extensions.append(self.expect("identifier").text)
            while not self.at(";"):
                self.accept(",")
                if extensions[-1] == CONDITION_EXTENSION:  # its condition is one item: `S >= 1`
                    extensions.append(self.condition())
                else:
                    extensions.append(self.expect("identifier").text)
            self.expect(";")
        fragments = []
        while self.at("fragment"):
            fragments.append(self.fragment())
        graph = None
        if require_graph or self.at("graph"):
            if not self.at("graph"):
                raise self.error(f"expected 'fragment' or 'graph', found {_describe(self.tok)}")
            graph = self.graph()
        self.expect("eof")
        return ast.Document(version, tuple(extensions), tuple(fragments), graph, self.loc(start),
                            version_loc or self.loc(start))

    def condition(self) -> str:
        """The condition of an `extension tract_assert` line, as its tokens' text (`S >= 1`): an identifier, a
        comparison and an integer, each side possibly a product or sum of those."""
        parts = []
        while not self.at(";") and not self.at(","):
            if self.tok.kind == "eof":
                raise self.error("expected ';' after the condition of the extension")
            parts.append(self.tok.text)
            self.advance()
        if not parts:
            raise self.error(f"expected a condition such as 'S >= 1', found {_describe(self.tok)}")
        return " ".join(parts)

    def graph(self) -> ast.GraphDef:
        start = self.expect("graph")
        name = self.expect("identifier").text
        params = self.identifier_list()
        self.expect("->")
        results = self.identifier_list()
        return ast.GraphDef(name, tuple(token.text for token in params), tuple(token.text for token in results),
                            self.body(), self.loc(start), tuple(self.loc(token) for token in params),
                            tuple(self.loc(token) for token in results))

    def identifier_list(self) -> list[Token]:
        self.expect("(")
        tokens = [self.expect("identifier")]
        while self.accept(","):
            tokens.append(self.expect("identifier"))
        self.expect(")")
        return tokens

    def body(self) -> tuple[ast.Assignment, ...]:
        self.expect("{")
        assignments = []
        while not self.at("}"):
            start = self.tok
            if start.kind == "identifier" or start.kind == "punct" and start.text == "[":
                found = self._shortcut(start)
                if found is not None:
                    assignments.append(found)
                    continue
            lhs = self.lvalue(top=True)
            self.expect("=")
            rhs = self.expression(allow_tuple=True)
            self.expect(";")
            assignments.append(ast.Assignment(lhs, rhs, self.loc(start)))
        if not assignments:
            raise self.error("a body must hold at least one assignment")
        self.expect("}")
        return tuple(assignments)

    def _shortcut(self, start: Token) -> ast.Assignment | None:
        """The statement at `start` read by `shortcut.statement`, the lexer then resumed after its ';'; None
        where it is not of the shape taken there (or tokens after `start` were already read)."""
        if self._ahead:
            return None
        line_start = self._line_starts.find(start.line)
        found = shortcut.statement(self.text, line_start + start.column - 1, start.line, line_start, self.file)
        if found is None:
            return None
        assignment, end, semicolon = found
        self._stream = iter_tokens(self.text, self.file, end, start.line, line_start)
        self.previous, self.tok = semicolon, next(self._stream)
        return assignment

    def lvalue(self, top: bool = False) -> ast.Expr:
        return self.nested(self._lvalue, top)

    def _lvalue(self, top: bool) -> ast.Expr:
        start = self.tok
        if self.accept("["):
            items = []
            if not self.at("]"):
                items.append(self.lvalue())
                while self.accept(","):
                    items.append(self.lvalue())
            self.expect("]")
            expr = ast.ArrayExpr(tuple(items), self.loc(start))
        elif self.accept("("):
            items = [self.lvalue()]
            while self.accept(","):
                items.append(self.lvalue())
            self.expect(")")
            expr = items[0] if len(items) == 1 else ast.TupleExpr(tuple(items), self.loc(start))
        else:
            token = self.tok
            if token.kind != "identifier":
                raise self.error(f"expected an identifier, array or tuple on the left-hand side, found "
                                 f"{_describe(token)}")
            self.advance()
            expr = ast.Identifier(token.text, self.loc(token))
        if top and self.at(","):
            items = [expr]
            while self.accept(","):
                items.append(self.lvalue())
            expr = ast.TupleExpr(tuple(items), self.loc(start))
        return expr

    # -- fragments --
    def fragment(self) -> ast.Fragment:
        start = self.expect("fragment")
        name = self.expect("identifier").text
        generic, generic_default = False, None
        if self.accept("<"):
            self.expect("?")
            generic = True
            if self.accept("="):
                generic_default = self.type_name(allow_generic=False)
            self.expect(">")
        self.expect("(")
        params = [] if self.at(")") else [self.param()]  # tract's `tract_core_properties()` has no parameter
        while self.accept(","):
            params.append(self.param())
        self.expect(")")
        self.expect("->")
        self.expect("(")
        results = [self.result()]
        while self.accept(","):
            results.append(self.result())
        self.expect(")")
        body = None if self.accept(";") else self.body()
        return ast.Fragment(name, generic, generic_default, tuple(params), tuple(results), body, self.loc(start))

    def param(self) -> ast.Param:
        token = self.expect("identifier")
        self.expect(":")
        type_ = self.type_spec()
        default = self.literal_expr() if self.accept("=") else None
        return ast.Param(token.text, type_, default, self.loc(token))

    def result(self) -> ast.Result:
        token = self.expect("identifier")
        self.expect(":")
        return ast.Result(token.text, self.type_spec(), self.loc(token))

    def type_name(self, allow_generic: bool = True) -> ast.PrimitiveType:
        token = self.tok
        if token.kind == "keyword" and token.text in TYPE_NAMES or allow_generic and token.is_("punct", "?"):
            self.advance()
            return ast.PrimitiveType(token.text)
        raise self.error(f"expected a type name (integer, scalar, logical, string{', ?' if allow_generic else ''}), "
                         f"found {_describe(token)}")

    def type_spec(self) -> ast.Type:
        return self.nested(self._type_spec)

    def _type_spec(self) -> ast.Type:
        start = self.tok
        if self.accept("tensor"):
            self.expect("<")
            item = None if self.at(">") else self.type_name()
            self.expect(">")
            type_: ast.Type = ast.TensorType(item)
        elif self.accept("("):
            items = [self.type_spec()]
            while self.accept(","):
                items.append(self.type_spec())
            self.expect(")")
            if len(items) < 2:
                raise self.error("a tuple type needs at least two item types", start)
            type_ = ast.TupleType(tuple(items))
        else:
            type_ = self.type_name()
        while self.at("[") and self.peek().is_("punct", "]"):
            self.advance()
            self.advance()
            type_ = ast.ArrayType(type_)
        return type_

    def literal_expr(self) -> ast.Expr:
        """A default value: literals, arrays and tuples of them (a leading minus is part of a number)."""
        return self.nested(self._literal_expr)

    def _literal_expr(self) -> ast.Expr:
        start = self.tok
        if self.accept("["):
            items = []
            if not self.at("]"):
                items.append(self.literal_expr())
                while self.accept(","):
                    items.append(self.literal_expr())
            self.expect("]")
            return ast.ArrayExpr(tuple(items), self.loc(start))
        if self.accept("("):
            items = [self.literal_expr()]
            while self.accept(","):
                items.append(self.literal_expr())
            self.expect(")")
            return items[0] if len(items) == 1 else ast.TupleExpr(tuple(items), self.loc(start))
        negative = self.accept("-")
        token = self.tok
        if token.kind in ("integer", "scalar") or not negative and token.kind in ("string", "logical"):
            self.advance()
            value = -token.value if negative else token.value
            return ast.Literal(value, token.kind, self.loc(start))
        raise self.error(f"expected a literal default value, found {_describe(token)}")

    # -- expressions --
    def expression(self, allow_tuple: bool = False) -> ast.Expr:
        self.enter()
        start = self.tok
        if start.kind == "punct" and start.text in _UNARY:
            expr = self.if_else()
        else:
            # the leftmost primary first: most expressions are nothing more (`x`, `1.0`, `[1, 1]`, `f(x)`), and
            # then the precedence levels have nothing to look at
            expr = self.primary()
            after = self.tok
            if not (after.kind == "punct" and after.text in _ENDS):
                expr = self.if_else(expr)
        if allow_tuple and self.at(","):
            items = [expr]
            while self.accept(","):
                items.append(self.if_else())
            expr = ast.TupleExpr(tuple(items), self.loc(start))
        self.depth -= 1
        return expr

    def if_else(self, first: ast.Expr | None = None) -> ast.Expr:
        """`first`, where given, is the leftmost primary, already parsed (as in the rules below)."""
        expr = self.binary(0, first)
        if self.at("if"):
            token = self.expect("if")
            condition = self.binary(0)
            self.expect("else")
            otherwise = self.nested(self.if_else)
            return ast.IfElseExpr(condition, expr, otherwise, self.loc(token))
        return expr

    def binary(self, min_level: int, first: ast.Expr | None = None) -> ast.Expr:
        """Binary operators of precedence `min_level` and above, grouping left to right (precedence climbing)."""
        left = self.unary() if first is None else self.power(first)
        while True:
            token = self.tok
            level = _BINARY_PRECEDENCE.get(token.text) if token.kind in ("punct", "keyword") else None
            if level is None or level < min_level:
                return left
            self.advance()
            right = self.binary(level + 1)
            left = ast.BinaryExpr(token.text, left, right, self.loc(token))

    def unary(self) -> ast.Expr:
        token = self.tok
        if token.kind == "punct" and token.text in _UNARY:
            self.advance()
            operand = self.nested(self.unary)
            return ast.UnaryExpr(token.text, operand, self.loc(token))
        return self.power()

    def power(self, first: ast.Expr | None = None) -> ast.Expr:
        left = self.postfix(first)
        while self.at("^"):
            token = self.expect("^")
            right = self.power_operand()
            left = ast.BinaryExpr("^", left, right, self.loc(token))
        return left

    def power_operand(self) -> ast.Expr:
        token = self.tok
        if token.kind == "punct" and token.text in ("-", "+", "!"):
            self.advance()
            operand = self.nested(self.power_operand)
            return ast.UnaryExpr(token.text, operand, self.loc(token))
        return self.postfix()

    def postfix(self, first: ast.Expr | None = None) -> ast.Expr:
        expr = self.primary() if first is None else first
        while self.at("["):
            token = self.expect("[")
            start = None if self.at(":") else self.expression()
            if self.accept(":"):
                end = None if self.at("]") else self.expression()
                expr = ast.RangeExpr(expr, start, end, self.loc(token))
            else:
                expr = ast.IndexExpr(expr, start, self.loc(token))
            self.expect("]")
        return expr

    def primary(self) -> ast.Expr:
        token = self.tok
        loc = self.loc(token)
        if token.kind in ("integer", "scalar", "string", "logical"):
            self.advance()
            return ast.Literal(token.value, token.kind, loc)
        if token.kind == "identifier":
            if self.peek().is_("punct", "(") or self._generic_call_ahead():
                return self.invocation()
            self.advance()
            return ast.Identifier(token.text, loc)
        if token.kind == "keyword" and token.text in BUILTINS:
            self.advance()
            self.expect("(")
            arg = self.expression()
            self.expect(")")
            return ast.BuiltinExpr(token.text, arg, loc)
        if self.accept("("):
            items = [self.expression()]
            while self.accept(","):
                items.append(self.expression())
            self.expect(")")
            return items[0] if len(items) == 1 else ast.TupleExpr(tuple(items), loc)
        if self.accept("["):
            if self.at("for"):
                return self.comprehension(loc)
            atoms = self.atom_items()
            if atoms is not None and self.accept("]"):
                return ast.ArrayExpr(atoms, loc)
            items = list(atoms or ())
            if not items and not self.at("]"):
                items.append(self.expression())
            while self.accept(","):
                items.append(self.expression())
            self.expect("]")
            return ast.ArrayExpr(tuple(items), loc)
        raise self.error(f"expected an expression, found {_describe(token)}")

    def atom_items(self) -> ast.NumberItems | ast.NameItems | None:
        """The leading items of an array that are atoms of one kind, kept compact: plain numbers of one kind (`1`, or
        `-1` with the minus right before the number), logicals or identifiers, each followed by ']' or by ',' and
        another such item; None if the first is not one. Stops before the ',' or ']' that ends them."""
        if self.depth >= MAX_NESTING:  # items nest one level deeper: let the general rule refuse them
            return None
        found = self._atom_ahead(0)
        if found is None:
            return None
        kind = found[0].kind
        items = ast.NameItems(self.file) if kind == "identifier" else ast.NumberItems(kind, self.file)
        while True:
            atom, minus = found
            if isinstance(items, ast.NameItems):
                items.append(atom.text, atom.line, atom.column)
            else:
                items.append(atom.value, minus is not None, atom.line, (minus or atom).column)
            if minus is not None:
                self.advance()
            self.advance()
            if not self.at(",") or (found := self._atom_ahead(1)) is None or found[0].kind != kind:
                return items
            self.advance()

    def _atom_ahead(self, at: int) -> tuple[Token, Token | None] | None:
        """(atom, minus or None) when the tokens from `at` places ahead are one atom item (see `atom_items`)."""
        token = self.peek(at)
        minus = None
        if token.kind == "punct" and token.text == "-":
            minus, token = token, self.peek(at + 1)
            if token.line != minus.line or token.column != minus.end or token.kind not in ("integer", "scalar"):
                return None
        if token.kind not in ("integer", "scalar", "logical", "identifier"):
            return None
        after = self.peek(at + (2 if minus is not None else 1))
        return (token, minus) if after.kind == "punct" and after.text in (",", "]") else None

    def _generic_call_ahead(self) -> bool:
        type_token = self.peek(2)
        return (self.peek().is_("punct", "<") and self.peek(3).is_("punct", ">")
                and self.peek(4).is_("punct", "(")
                and (type_token.is_("punct", "?") or type_token.kind == "keyword" and type_token.text in TYPE_NAMES))

    def invocation(self) -> ast.Invocation:
        token = self.expect("identifier")
        generic = None
        if self.accept("<"):
            generic = self.type_name()
            self.expect(">")
        self.expect("(")
        args: list[ast.Argument] = []
        named = False
        if not self.at(")"):
            while True:
                arg_token = self.tok
                if arg_token.kind == "identifier" and self.peek().is_("punct", "="):
                    self.advance()
                    self.advance()
                    args.append(ast.Argument(arg_token.text, self.expression(), self.loc(arg_token)))
                    named = True
                else:
                    value = self.expression()
                    if named:
                        raise self.error("positional arguments must precede named arguments", arg_token)
                    args.append(ast.Argument(None, value, self.loc(arg_token)))
                if not self.accept(","):
                    break
        self.expect(")")
        return ast.Invocation(token.text, generic, tuple(args), self.loc(token))

    def comprehension(self, loc: Location) -> ast.Comprehension:
        self.expect("for")
        iterators = []
        while True:
            name = self.expect("identifier").text
            self.expect("in")
            iterators.append((name, self.binary(1)))  # above 'in', which here separates name and array
            if not self.accept(","):
                break
        condition = None
        if self.accept("if"):
            condition = self.expression()
        self.expect("yield")
        body = self.expression()
        self.expect("]")
        return ast.Comprehension(tuple(iterators), condition, body, loc)


def _describe(token: Token) -> str:
    if token.kind == "eof":
        return "end of input"
    text = token.text if len(token.text) <= 40 else token.text[:37] + "..."
    if token.kind == "string":
        return f"string '{text}'"
    return f"'{text}'"


def _describe_expected(what: str) -> str:
    return {"identifier": "an identifier", "string": "a string", "eof": "end of input",
            "integer": "an integer", "scalar": "a number"}.get(what, f"'{what}'")
