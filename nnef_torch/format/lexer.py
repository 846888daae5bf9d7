"""Tokens of NNEF text (spec 3.1), each with its line and column."""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import NamedTuple

from nnef_torch.errors import Location, NNEFSyntaxError

KEYWORDS = frozenset(
    "version extension graph fragment tensor integer scalar logical string "
    "shape_of length_of range_of for in yield if else".split()
)
TYPE_NAMES = ("integer", "scalar", "logical", "string")
# Longest first, so that '<=' wins over '<' and '->' over '-'.
PUNCTUATION = ("->", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "^", "<", ">", "!",
               "(", ")", "[", "]", "{", "}", ":", "=", ",", ";", "?")

# One pass over the text: each match is the spaces before a token, then one alternative per token kind; `other`
# catches anything unexpected, `end` the spaces that end the text. No alternative starts with a space, so every
# match succeeds with all the spaces taken at once (none is scanned twice). Strings are written as runs of plain
# characters between escapes: a repeated alternation would keep matching state per character (300 bytes each,
# 4.7 GB for a 16 MB string).
_TOKEN = re.compile(r"""
    [ \t\v\f\r]*
  (?:
    (?P<newline>\n)
  | (?P<comment>\#[^\n\f]*)
  | (?P<number>[0-9]+(?P<fraction>\.[0-9]*)?(?P<exponent>[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>'[^'\\\n\f]*(?:\\[^\n\f][^'\\\n\f]*)*'|"[^"\\\n\f]*(?:\\[^\n\f][^"\\\n\f]*)*")
  | (?P<punct>{punct})
  | (?P<other>[^ \t\v\f\r])
  | (?P<end>\Z)
  )
""".format(punct="|".join(re.escape(p) for p in PUNCTUATION)), re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_WORD = re.compile(r"\w*")
MAX_INTEGER = 2 ** 63 - 1  # integer literals must fit a signed 64-bit integer


class Token(NamedTuple):
    kind: str  # 'identifier', 'keyword', 'integer', 'scalar', 'string', 'logical', 'punct', 'eof'
    text: str  # the source text; for strings and keywords/punctuation the meaning itself
    value: object
    line: int
    column: int
    end: int = 0  # the column just past the token (tokens never span lines)

    def is_(self, kind: str, text: str | None = None) -> bool:
        return self.kind == kind and (text is None or self.text == text)


def tokenize(text: str, file: str | None = None) -> list[Token]:
    """Split `text` into tokens; the list always ends with an 'eof' token."""
    return list(iter_tokens(text, file))


def iter_tokens(text: str, file: str | None = None, pos: int = 0, line: int = 1,
                line_start: int = 0) -> Iterator[Token]:
    """The tokens of `text` one at a time, ending with an 'eof' token; a lexical error is raised when the bad
    token is reached, so a parser holds only the few tokens it looks at, whatever the length of the text.
    pos: where to start (on line `line`, which starts at offset `line_start`)."""

    def error(message: str, at: int) -> NNEFSyntaxError:
        return NNEFSyntaxError(message, Location(file, line, at - line_start + 1)).with_source(text, file)

    new = tuple.__new__  # Token(...) without the generated __new__: the tokens of a large graph add up
    for match in _TOKEN.finditer(text, pos):
        kind = match.lastgroup
        if kind == "newline":
            line, line_start = line + 1, match.end()
            continue
        if kind == "comment" or kind == "end":
            continue
        pos = match.start(kind)
        literal = match.group(kind)
        column = pos - line_start + 1
        end = column + len(literal)
        if kind == "word":
            if literal in ("true", "false"):
                yield new(Token, ("logical", literal, literal == "true", line, column, end))
            else:
                yield new(Token, ("keyword" if literal in KEYWORDS else "identifier", literal, literal, line, column,
                                  end))
        elif kind == "punct":
            yield new(Token, ("punct", literal, literal, line, column, end))
        elif kind == "number":
            suffix = _WORD.match(text, match.end()).group()
            if suffix:  # `1.5e`, `2x`: a letter or digit of another script may not follow a number
                raise error(f"malformed numeric literal '{_shorten(literal + suffix)}'", pos)
            if match.group("fraction") is None and match.group("exponent") is None:
                value = parse_integer(literal)
                if value is None:
                    raise error(f"numeric literal '{_shorten(literal)}' is out of range (integers are at most "
                                f"{MAX_INTEGER})", pos)
                yield Token("integer", literal, value, line, column, end)
            else:
                value = float(literal)
                if not math.isfinite(value):
                    raise error(f"numeric literal '{_shorten(literal)}' is out of range", pos)
                yield Token("scalar", literal, value, line, column, end)
        elif kind == "string":
            value = _ESCAPE.sub(r"\1", literal[1:-1]) if "\\" in literal else literal[1:-1]
            bad = None if value.isascii() and value.isprintable() else next(
                (ch for ch in value if not (ch.isascii() and ch.isprintable()) and ch != "\t"), None)
            if bad is not None:
                raise error(f"string literals hold printable ASCII only, found '\\x{ord(bad):02x}'",
                            pos + literal.index(bad))
            yield Token("string", value, value, line, column, end)
        elif literal in "'\"":
            raise error("unterminated string literal", pos)
        else:
            shown = literal if literal.isprintable() else f"\\x{ord(literal):02x}"
            raise error(f"unexpected character '{shown}'", pos)
    column = len(text) - line_start + 1
    yield Token("eof", "", None, line, column, column)


_MAX_DIGITS = len(str(MAX_INTEGER))


def parse_integer(digits: str) -> int | None:
    """The value of a string of decimal digits, or None past MAX_INTEGER. Leading zeros are dropped before
    converting, since `int()` refuses more than 4300 digits however many of them are zeros."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _MAX_DIGITS:
        return None
    value = int(significant)
    return value if value <= MAX_INTEGER else None


def _shorten(literal: str) -> str:
    return literal if len(literal) <= 40 else literal[:37] + "..."
