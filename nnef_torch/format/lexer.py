"""Tokens of NNEF text (spec 3.1), each with its line and column."""
from __future__ import annotations

import math
import re
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

# One pass over the text: each alternative is a token kind; the last one catches anything unexpected.
_TOKEN = re.compile(r"""
    (?P<space>[ \t\v\f\r]+|\n|\#[^\n\f]*)
  | (?P<number>[0-9]+(?P<fraction>\.[0-9]*)?(?P<exponent>[eE][+-]?[0-9]+)?)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>'(?:[^'\\\n\f]|\\[^\n\f])*'|"(?:[^"\\\n\f]|\\[^\n\f])*")
  | (?P<punct>{punct})
  | (?P<other>.)
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
    tokens: list[Token] = []
    append = tokens.append
    line, line_start = 1, 0

    def error(message: str, at: int) -> NNEFSyntaxError:
        return NNEFSyntaxError(message, Location(file, line, at - line_start + 1)).with_source(text, file)

    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        pos = match.start()
        if kind == "space":
            if text[pos] == "\n":
                line, line_start = line + 1, pos + 1
            continue
        literal = match.group()
        column = pos - line_start + 1
        end = column + len(literal)
        if kind == "word":
            if literal in ("true", "false"):
                append(Token("logical", literal, literal == "true", line, column, end))
            else:
                append(Token("keyword" if literal in KEYWORDS else "identifier", literal, literal, line, column, end))
        elif kind == "punct":
            append(Token("punct", literal, literal, line, column, end))
        elif kind == "number":
            suffix = _WORD.match(text, match.end()).group()
            if suffix:  # `1.5e`, `2x`: a letter or digit of another script may not follow a number
                raise error(f"malformed numeric literal '{_shorten(literal + suffix)}'", pos)
            if match.group("fraction") is None and match.group("exponent") is None:
                # compare lengths first: int() refuses strings of more than 4300 digits
                too_long = len(literal.lstrip("0")) > len(str(MAX_INTEGER))
                if too_long or int(literal) > MAX_INTEGER:
                    raise error(f"numeric literal '{_shorten(literal)}' is out of range (integers are at most "
                                f"{MAX_INTEGER})", pos)
                append(Token("integer", literal, int(literal), line, column, end))
            else:
                value = float(literal)
                if not math.isfinite(value):
                    raise error(f"numeric literal '{_shorten(literal)}' is out of range", pos)
                append(Token("scalar", literal, value, line, column, end))
        elif kind == "string":
            value = _ESCAPE.sub(r"\1", literal[1:-1])
            bad = next((ch for ch in value if not (ch.isascii() and ch.isprintable()) and ch != "\t"), None)
            if bad is not None:
                raise error(f"string literals hold printable ASCII only, found '\\x{ord(bad):02x}'",
                            pos + literal.index(bad))
            append(Token("string", value, value, line, column, end))
        elif literal in "'\"":
            raise error("unterminated string literal", pos)
        else:
            shown = literal if literal.isprintable() else f"\\x{ord(literal):02x}"
            raise error(f"unexpected character '{shown}'", pos)
    column = len(text) - line_start + 1
    append(Token("eof", "", None, line, column, column))
    return tokens


def _shorten(literal: str) -> str:
    return literal if len(literal) <= 40 else literal[:37] + "..."
