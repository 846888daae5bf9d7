"""Compile-time values (spec 3.3.3): operators, subscripts and builtins over int, float, bool, str, list, tuple.

The checker has already typed every expression, so these functions only compute; what can still go wrong (an index
out of range, division by zero, an unparsable string) raises `NNEFSemanticError` at the expression.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import Location, NNEFSemanticError
from nnef_torch.format.lexer import MAX_INTEGER, parse_integer
from nnef_torch.format.printer import print_literal
from nnef_torch.ir.limits import MAX_COMPUTED_ITEMS

MAX_ARRAY_LENGTH = MAX_COMPUTED_ITEMS  # items of one computed array, or characters of one computed string
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_SCALAR_TEXT = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?")


class Budget:
    """The work and memory that evaluating one document's compile-time expressions may take, generous for real
    models: evaluation steps (an expression evaluated, a comprehension iteration) and items of the arrays and
    strings it computes. `steps` and `items` count down; past zero, `exhausted` makes the located error."""

    BASE_STEPS = 4_000_000  # a few seconds of work
    STEPS_PER_STATEMENT = 1000  # each graph statement may expand fragments: about 50 invocations more
    INVOCATION_STEPS = 20  # an invocation (binding, types, shapes, an operation) costs 20 expressions' work
    BASE_ITEMS = 1 << 22  # plus one per character of the source, which bounds the arrays written in it

    __slots__ = ("steps", "items", "total_steps", "total_items")

    def __init__(self, statements: int, source_length: int):
        self.steps = self.total_steps = self.BASE_STEPS + self.STEPS_PER_STATEMENT * statements
        self.items = self.total_items = self.BASE_ITEMS + source_length

    def charge(self, value: Any, loc: Location | None) -> Any:
        """Count the items of a computed array or string; return it."""
        if isinstance(value, (list, str)):
            self.items -= len(value)
            if self.items < 0:
                raise self.exhausted(loc)
        return value

    def exhausted(self, loc: Location | None) -> NNEFSemanticError:
        if self.steps < 0:
            return _fail(f"compile-time evaluation takes more than {self.total_steps:,} steps (comprehensions or "
                         "fragment expansion run too long)", loc)
        return _fail(f"compile-time evaluation computes more than {self.total_items:,} array items", loc)


def _shorten(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(message: str, loc: Location | None) -> NNEFSemanticError:
    return NNEFSemanticError(message, loc)


def _check_int(value: int, loc: Location | None) -> int:
    if abs(value) > MAX_INTEGER:
        raise _fail("integer overflow in a constant expression", loc)
    return value


def _check_length(length: int, loc: Location | None) -> None:
    if length > MAX_ARRAY_LENGTH:
        raise _fail(f"constant array of {length} items is too long (limit {MAX_ARRAY_LENGTH})", loc)


def unary(op: str, value: Any, loc: Location | None) -> Any:
    if op == "!":
        return not value
    return -value if op == "-" else value


def binary(op: str, left: Any, right: Any, loc: Location | None) -> Any:
    """Apply a binary operator to two compile-time values of the types the checker allowed."""
    if op == "in":
        return left in right
    if op in ("&&", "||"):
        return (left and right) if op == "&&" else (left or right)
    if op in ("==", "!="):
        return (left == right) == (op == "==")
    if op in ("<", "<=", ">", ">="):
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    if isinstance(left, (list, str)):
        if op == "+":
            _check_length(len(left) + len(right), loc)
            return left + right
        if right < 0:
            raise _fail(f"cannot repeat {'an array' if isinstance(left, list) else 'a string'} {right} times", loc)
        _check_length(len(left) * right, loc)
        return left * right
    if isinstance(left, int) and isinstance(right, int):
        return _integer_arithmetic(op, left, right, loc)
    return _scalar_arithmetic(op, float(left), float(right), loc)


def _integer_arithmetic(op: str, a: int, b: int, loc: Location | None) -> int:
    if op == "+":
        return _check_int(a + b, loc)
    if op == "-":
        return _check_int(a - b, loc)
    if op == "*":
        return _check_int(a * b, loc)
    if op == "/":
        if b == 0:
            raise _fail("integer division by zero", loc)
        quotient = abs(a) // abs(b)  # truncates toward zero, as integer division does in C
        return quotient if (a >= 0) == (b >= 0) else -quotient
    if b < 0:
        raise _fail(f"integer power with negative exponent {b}", loc)
    if abs(a) > 1 and b > 64:
        raise _fail("integer overflow in a constant expression", loc)
    return _check_int(a ** b, loc)


def _scalar_arithmetic(op: str, a: float, b: float, loc: Location | None) -> float:
    try:
        if op == "+":
            result = a + b
        elif op == "-":
            result = a - b
        elif op == "*":
            result = a * b
        elif op == "/":
            result = a / b
        else:
            result = math.pow(a, b)
    except ZeroDivisionError:
        raise _fail("division by zero in a constant expression", loc) from None
    except (ValueError, OverflowError):
        raise _fail(f"{a} ^ {b} has no real value", loc) from None
    if not math.isfinite(result):
        raise _fail("a constant expression overflowed", loc)
    return result


def index(value: Sequence[Any], position: int, loc: Location | None) -> Any:
    if not 0 <= position < len(value):
        raise _fail(f"index {position} is out of range for length {len(value)}", loc)
    return value[position]


def slice_range(value: Sequence[Any], start: int | None, end: int | None, loc: Location | None) -> Any:
    start = 0 if start is None else start
    end = len(value) if end is None else end
    if start < 0 or end < 0:
        raise _fail(f"range bounds must not be negative, found [{start}:{end}]", loc)
    return value[start:end]


def builtin(name: str, value: Any, loc: Location | None) -> Any:
    """length_of, range_of and the conversions integer, scalar, logical, string (shape_of needs the graph)."""
    if name == "length_of":
        return len(value)
    if name == "range_of":
        _check_length(len(value), loc)
        return list(range(len(value)))
    if name == "integer":
        if isinstance(value, str):
            if not _INTEGER_TEXT.fullmatch(value):
                raise _fail(f"'{_shorten(value)}' is not an integer literal", loc)
            magnitude = parse_integer(value.lstrip("-"))
            if magnitude is None:
                raise _fail("integer overflow in a constant expression", loc)
            return -magnitude if value.startswith("-") else magnitude
        return _check_int(int(math.floor(value)), loc) if isinstance(value, float) else int(value)
    if name == "scalar":
        if isinstance(value, str):
            if not _SCALAR_TEXT.fullmatch(value) or not math.isfinite(float(value)):
                raise _fail(f"'{_shorten(value)}' is not a scalar literal", loc)
            return float(value)
        return float(value)
    if name == "logical":
        return bool(value)
    if name == "string":
        return value if isinstance(value, str) else print_literal(value)
    raise AssertionError(name)
