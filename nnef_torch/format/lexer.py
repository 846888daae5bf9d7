"""Tokens of NNEF text (spec 3.1), each with its line and column."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nnef_torch.errors import Location, NNEFSyntaxError

KEYWORDS = frozenset(
    "version extension graph fragment tensor integer scalar logical string "
    "shape_of length_of range_of for in yield if else".split()
)
TYPE_NAMES = ("integer", "scalar", "logical", "string")
# Longest first, so that '<=' wins over '<' and '->' over '-'.
PUNCTUATION = ("->", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "^", "<", ">", "!",
               "(", ")", "[", "]", "{", "}", ":", "=", ",", ";", "?")

_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = " \t\v\f\r\n"


@dataclass(frozen=True)
class Token:
    kind: str  # 'identifier', 'keyword', 'integer', 'scalar', 'string', 'logical', 'punct', 'eof'
    text: str  # the source text; for strings and keywords/punctuation the meaning itself
    value: object
    line: int
    column: int

    def is_(self, kind: str, text: str | None = None) -> bool:
        return self.kind == kind and (text is None or self.text == text)


def tokenize(text: str, file: str | None = None) -> list[Token]:
    """Split `text` into tokens; the list always ends with an 'eof' token."""
    tokens: list[Token] = []
    pos, line, line_start, n = 0, 1, 0, len(text)

    def error(message: str, at: int) -> NNEFSyntaxError:
        return NNEFSyntaxError(message, Location(file, line, at - line_start + 1)).with_source(text, file)

    while True:
        while pos < n and (text[pos] in _SPACE or text[pos] == "#"):
            if text[pos] == "#":
                while pos < n and text[pos] not in "\n\f":
                    pos += 1
                continue
            if text[pos] == "\n":
                line, line_start = line + 1, pos + 1
            pos += 1
        column = pos - line_start + 1
        if pos >= n:
            tokens.append(Token("eof", "", None, line, column))
            return tokens
        ch = text[pos]
        if ch.isdigit():
            match = _NUMBER.match(text, pos)
            literal = match.group(0)
            if match.group(1) or match.group(2):
                value = float(literal)
                if not math.isfinite(value):
                    raise error(f"numeric literal '{literal}' is out of range", pos)
                tokens.append(Token("scalar", literal, value, line, column))
            else:
                tokens.append(Token("integer", literal, int(literal), line, column))
            pos = match.end()
        elif ch.isascii() and (ch.isalpha() or ch == "_"):
            word = _IDENTIFIER.match(text, pos).group(0)
            if word in ("true", "false"):
                tokens.append(Token("logical", word, word == "true", line, column))
            else:
                tokens.append(Token("keyword" if word in KEYWORDS else "identifier", word, word, line, column))
            pos += len(word)
        elif ch in "'\"":
            value, pos = _read_string(text, pos, error)
            tokens.append(Token("string", value, value, line, column))
        else:
            for punct in PUNCTUATION:
                if text.startswith(punct, pos):
                    tokens.append(Token("punct", punct, punct, line, column))
                    pos += len(punct)
                    break
            else:
                shown = ch if ch.isprintable() else f"\\x{ord(ch):02x}"
                raise error(f"unexpected character '{shown}'", pos)


def _read_string(text: str, start: int, error) -> tuple[str, int]:
    """Read a quoted string at `start`; a backslash escapes the next character (the quote or itself)."""
    quote, pos, chars = text[start], start + 1, []
    while True:
        if pos >= len(text) or text[pos] in "\n\f":
            raise error("unterminated string literal", start)
        ch = text[pos]
        if ch == quote:
            return "".join(chars), pos + 1
        if ch == "\\":
            if pos + 1 >= len(text) or text[pos + 1] in "\n\f":
                raise error("unterminated string literal", start)
            ch = text[pos + 1]
            pos += 1
        elif not (ch.isascii() and ch.isprintable()) and ch != "\t":
            raise error(f"string literals hold printable ASCII only, found '\\x{ord(ch):02x}'", pos)
        chars.append(ch)
        pos += 1
