"""A shortcut for the statement shape that makes up most graphs: `a = op(x, y, key = literal, ...);` on one line.

`statement` reads such a statement straight from the text with a few regular expressions and builds the syntax
tree the parser's general rules would build, with the same locations. The shapes it takes: a left-hand side of
identifiers (`a`, `a, b`, `[a, b]`); one invocation, optionally generic (`variable<scalar>`); arguments that are
identifiers, plain literals (numbers without a sign, `true`, `false`, strings without escapes), arrays of numbers
of one kind (each may have a minus sign directly before it) and arrays of tuples of such literals. Spaces and tabs
only, no comments, at most MAX_LENGTH characters. Anything else, including every text with an error, returns None
and goes the general way, which then reports it.
"""
from __future__ import annotations

import math
import re

from nnef_torch.errors import Location
from nnef_torch.format import ast
from nnef_torch.format.lexer import KEYWORDS, TYPE_NAMES, Token, parse_integer

_S = r"[ \t]*"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?"
_HEAD = re.compile(rf"""(?P<lhs>{_NAME}(?:{_S},{_S}{_NAME})*|\[{_S}{_NAME}(?:{_S},{_S}{_NAME})*{_S}\])
    {_S}={_S}(?P<op>{_NAME}){_S}(?:<{_S}(?P<generic>{_NAME}|\?){_S}>{_S})?\({_S}""", re.VERBOSE)
_LHS_NAME = re.compile(_NAME)
_KEY = re.compile(rf"(?P<key>{_NAME}){_S}={_S}")
# a value other than an array, and the ',' or ')' after it (so a name is not called or indexed, and a number is
# not followed by a letter, which the lexer refuses)
_VALUE = re.compile(rf"""(?:(?P<name>{_NAME})|(?P<number>{_NUMBER})|(?P<string>'[^'\\\n\f]*'|"[^"\\\n\f]*"))
    {_S}(?P<sep>[,)]){_S}""", re.VERBOSE)
_ITEM = re.compile(rf"(?P<minus>-)?(?P<number>{_NUMBER}){_S}(?P<sep>[,\]]){_S}")
_TUPLE_ITEM = re.compile(rf"(?P<number>{_NUMBER}){_S}(?P<sep>[,)]){_S}")
_SPACES = re.compile(_S)
_ARRAY_SEP = re.compile(rf"{_S}(?P<sep>[,\]]){_S}")
_ARG_SEP = re.compile(rf"{_S}(?P<sep>[,)]){_S}")
_END = re.compile(rf"{_S};")
_NOT_NAMES = KEYWORDS | {"true", "false"}
# Statements whose ';' is further from their start are left to the general rules: a long statement that is not of
# this shape is then read once more at most this far.
MAX_LENGTH = 4096


class LineStarts:
    """The offsets where lines of `text` start, each found from the last line asked for: statements come in
    order, so the text is scanned once (lines end only at '\\n' for the lexer)."""

    def __init__(self, text: str):
        self.text, self.line, self.start = text, 1, 0

    def find(self, line: int) -> int:
        if line < self.line:
            self.line, self.start = 1, 0
        while self.line < line:
            self.start = self.text.index("\n", self.start) + 1
            self.line += 1
        return self.start


class _Miss(Exception):
    """The statement is not of the shape taken here."""


def statement(text: str, pos: int, line: int, line_start: int,
              file: str | None) -> tuple[ast.Assignment, int, Token] | None:
    """The assignment starting at `pos` (on line `line`, which starts at offset `line_start`), the offset just
    after its ';' and the ';' token; None where the statement is not of the shape taken here."""
    stop = min(len(text), pos + MAX_LENGTH)
    head = _HEAD.match(text, pos, stop) if text.find(";", pos, stop) >= 0 else None
    if head is None:
        return None
    try:
        return _Reader(text, stop, line, line_start, file).statement(head)
    except _Miss:
        return None


class _Reader:
    def __init__(self, text: str, stop: int, line: int, line_start: int, file: str | None):
        self.text, self.stop, self.line, self.line_start, self.file = text, stop, line, line_start, file

    def loc(self, pos: int) -> Location:
        return Location(self.file, self.line, pos - self.line_start + 1)

    def statement(self, head: re.Match) -> tuple[ast.Assignment, int, Token]:
        op_name, generic = head.group("op", "generic")
        if op_name in _NOT_NAMES or generic is not None and generic != "?" and generic not in TYPE_NAMES:
            raise _Miss
        lhs = self.lhs(head)
        args, pos = self.arguments(head.end())
        end = _END.match(self.text, pos, self.stop)
        if end is None:
            raise _Miss
        column = end.end() - self.line_start
        semicolon = Token("punct", ";", ";", self.line, column, column + 1)
        rhs = ast.Invocation(op_name, ast.PrimitiveType(generic) if generic is not None else None, args,
                             self.loc(head.start("op")))
        return ast.Assignment(lhs, rhs, self.loc(head.start())), end.end(), semicolon

    def lhs(self, head: re.Match) -> ast.Expr:
        start = head.start("lhs")
        names = []
        for match in _LHS_NAME.finditer(self.text, start, head.end("lhs")):
            if match.group() in _NOT_NAMES:
                raise _Miss
            names.append(ast.Identifier(match.group(), self.loc(match.start())))
        if self.text[start] == "[":
            return ast.ArrayExpr(tuple(names), self.loc(start))
        return names[0] if len(names) == 1 else ast.TupleExpr(tuple(names), self.loc(start))

    def arguments(self, pos: int) -> tuple[tuple[ast.Argument, ...], int]:
        """The arguments from `pos` (just inside the '('), and the offset after the ')' and the spaces after it."""
        text = self.text
        if text.startswith(")", pos, self.stop):
            return (), _SPACES.match(text, pos + 1, self.stop).end()
        args: list[ast.Argument] = []
        named = False
        while True:
            start = pos
            key_match = _KEY.match(text, pos, self.stop)
            key = None
            if key_match is not None:
                key = key_match.group("key")
                if key in _NOT_NAMES:
                    raise _Miss
                named, pos = True, key_match.end()
            elif named:
                raise _Miss  # a positional argument after named ones: an error, reported the general way
            if text.startswith("[", pos, self.stop):
                value, pos, sep = self.array(pos)
            else:
                match = _VALUE.match(text, pos, self.stop)
                if match is None:
                    raise _Miss
                value, pos, sep = self.value(match), match.end(), match.group("sep")
            args.append(ast.Argument(key, value, self.loc(start)))
            if sep == ")":
                return tuple(args), pos

    def value(self, match: re.Match) -> ast.Expr:
        at = self.loc(match.start())
        name, number, string = match.group("name", "number", "string")
        if name is not None:
            if name in ("true", "false"):
                return ast.Literal(name == "true", "logical", at)
            if name in KEYWORDS:
                raise _Miss
            return ast.Identifier(name, at)
        if number is not None:
            kind, value = _number(number)
            return ast.Literal(value, kind, at)
        string = string[1:-1]
        if not (string.isascii() and string.isprintable()):
            raise _Miss
        return ast.Literal(string, "string", at)

    def array(self, pos: int) -> tuple[ast.ArrayExpr, int, str]:
        """The array at `pos` ('['): empty, of numbers of one kind, or of tuples of unsigned numbers; with the
        offset after the ',' or ')' that follows it (and spaces), and that separator."""
        text, loc = self.text, self.loc(pos)
        at = _SPACES.match(text, pos + 1, self.stop).end()
        if text.startswith("]", at, self.stop):
            return self.after_array(ast.ArrayExpr((), loc), at + 1)
        if text.startswith("(", at, self.stop):
            return self.tuples(at, loc)
        numbers: ast.NumberItems | None = None
        while True:
            match = _ITEM.match(text, at, self.stop)
            if match is None:
                raise _Miss
            kind, value = _number(match.group("number"))
            if numbers is None:
                numbers = ast.NumberItems(kind, self.file)
            elif kind != numbers.kind:
                raise _Miss  # numbers of two kinds make a general array
            numbers.append(value, match.group("minus") is not None, self.line, match.start() - self.line_start + 1)
            at = match.end()
            if match.group("sep") == "]":
                return self.after_array(ast.ArrayExpr(numbers, loc), match.end("sep"))

    def tuples(self, at: int, loc: Location) -> tuple[ast.ArrayExpr, int, str]:
        text = self.text
        items = []
        while True:
            if not text.startswith("(", at, self.stop):
                raise _Miss
            tuple_loc = self.loc(at)
            at = _SPACES.match(text, at + 1, self.stop).end()
            literals = []
            while True:
                match = _TUPLE_ITEM.match(text, at, self.stop)
                if match is None:
                    raise _Miss
                kind, value = _number(match.group("number"))
                literals.append(ast.Literal(value, kind, self.loc(match.start())))
                at = match.end()
                if match.group("sep") == ")":
                    break
            if len(literals) < 2:
                raise _Miss  # `(1)` is the number itself
            items.append(ast.TupleExpr(tuple(literals), tuple_loc))
            match = _ARRAY_SEP.match(text, at, self.stop)
            if match is None:
                raise _Miss
            at = match.end()
            if match.group("sep") == "]":
                return self.after_array(ast.ArrayExpr(tuple(items), loc), match.end("sep"))

    def after_array(self, array: ast.ArrayExpr, pos: int) -> tuple[ast.ArrayExpr, int, str]:
        match = _ARG_SEP.match(self.text, pos, self.stop)
        if match is None:
            raise _Miss
        return array, match.end(), match.group("sep")


def _number(text: str) -> tuple[str, int | float]:
    """A number's kind and value, as the lexer reads them; out of range: not taken (the lexer reports it)."""
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        if not math.isfinite(value):
            raise _Miss
        return "scalar", value
    integer = parse_integer(text)
    if integer is None:
        raise _Miss
    return "integer", integer
