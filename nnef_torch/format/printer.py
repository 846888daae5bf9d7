"""Syntax tree -> canonical NNEF text, as pure functions; `parse(print(doc)) == doc` for every document.

Parentheses are added wherever precedence needs them, and also around a unary expression that is the left operand
of a binary operator (`(-a) + b`), because parsers disagree on how tightly unary minus binds.

A value NNEF has no literal for (an infinite or NaN scalar) is an `ExportError`: the text cannot be written. Printing
an invocation names the argument and the operation, and the operation's source position where it has one.
"""
from __future__ import annotations

import math

from nnef_torch.errors import ExportError
from nnef_torch.format import ast

_INDENT = "    "
_PRECEDENCE = {"in": 1, "&&": 2, "||": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
               "+": 4, "-": 4, "*": 5, "/": 5}
_IF_ELSE, _UNARY, _POWER, _POSTFIX = 0, 6, 7, 8


def print_document(doc: ast.Document) -> str:
    parts = []
    if doc.version:
        parts.append(f"version {doc.version};\n")
    if doc.extensions:
        parts.append("".join(f"extension {name};\n" for name in doc.extensions))
    parts.extend(print_fragment(fragment) for fragment in doc.fragments)
    if doc.graph is not None:
        parts.append(print_graph(doc.graph))
    return "\n".join(parts)


def print_fragment(fragment: ast.Fragment) -> str:
    generic = ""
    if fragment.generic:
        generic = f"<? = {fragment.generic_default}>" if fragment.generic_default else "<?>"
    params = ", ".join(print_param(param) for param in fragment.params)
    results = ", ".join(f"{result.name}: {result.type}" for result in fragment.results)
    head = f"fragment {fragment.name}{generic}( {params} ) -> ( {results} )"
    if fragment.body is None:
        return head + ";\n"
    return head + "\n" + print_body(fragment.body)


def print_param(param: ast.Param) -> str:
    text = f"{param.name}: {param.type}"
    return text + f" = {print_expr(param.default)}" if param.default is not None else text


def print_graph(graph: ast.GraphDef) -> str:
    return (f"graph {graph.name}( {', '.join(graph.params)} ) -> ( {', '.join(graph.results)} )\n"
            + print_body(graph.body))


def print_body(body: tuple[ast.Assignment, ...]) -> str:
    lines = "".join(f"{_INDENT}{print_assignment(assignment)}\n" for assignment in body)
    return "{\n" + lines + "}\n"


def print_assignment(assignment: ast.Assignment) -> str:
    lhs, rhs = assignment.lhs, assignment.rhs
    left = ", ".join(print_expr(item) for item in lhs.items) if isinstance(lhs, ast.TupleExpr) else print_expr(lhs)
    right = ", ".join(print_expr(item) for item in rhs.items) if isinstance(rhs, ast.TupleExpr) else print_expr(rhs)
    return f"{left} = {right};"


def print_literal(value: object) -> str:
    """A Python value as an NNEF literal (bool, int, float, str, and lists/tuples of those)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _print_scalar(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(print_literal(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(print_literal(item) for item in value) + ")"
    raise TypeError(f"cannot print {type(value).__name__} as an NNEF literal")


def _print_scalar(value: float) -> str:
    if not math.isfinite(value):
        raise ExportError(f"NNEF has no literal for the scalar {value} (only finite numbers can be written)")
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa


def print_expr(expr: ast.Expr, context: int = 0) -> str:
    """Print `expr`; `context` is the precedence its position requires (parentheses added below it)."""
    if isinstance(expr, ast.Literal):
        text = print_literal(expr.value)
        return f"({text})" if text.startswith("-") and context > 0 else text
    if isinstance(expr, ast.Identifier):
        return expr.name
    if isinstance(expr, ast.ArrayExpr):
        return "[" + ", ".join(print_expr(item) for item in expr.items) + "]"
    if isinstance(expr, ast.TupleExpr):
        return "(" + ", ".join(print_expr(item) for item in expr.items) + ")"
    if isinstance(expr, ast.UnaryExpr):
        return _wrap(expr.op + print_expr(expr.operand, _UNARY), _UNARY, context)
    if isinstance(expr, (ast.BinaryExpr, ast.IndexExpr, ast.RangeExpr)):
        return _print_chain(expr, context)
    if isinstance(expr, ast.IfElseExpr):
        text = f"{print_expr(expr.then, 1)} if {print_expr(expr.condition, 1)} else {print_expr(expr.otherwise)}"
        return _wrap(text, _IF_ELSE, context)
    if isinstance(expr, ast.Comprehension):
        iterators = ", ".join(f"{name} in {print_expr(array, 2)}" for name, array in expr.iterators)
        condition = f" if {print_expr(expr.condition, 1)}" if expr.condition is not None else ""
        return f"[for {iterators}{condition} yield {print_expr(expr.body)}]"
    if isinstance(expr, ast.BuiltinExpr):
        return f"{expr.name}({print_expr(expr.arg)})"
    if isinstance(expr, ast.Invocation):
        generic = f"<{expr.generic}>" if expr.generic is not None else ""
        args = ", ".join(_print_argument(expr, arg) for arg in expr.args)
        return f"{expr.name}{generic}({args})"
    raise TypeError(f"not an NNEF expression: {expr!r}")


class _NamedError(ExportError):
    """An unprintable value already named by the invocation whose argument it is."""


def _print_argument(invocation: ast.Invocation, arg: ast.Argument) -> str:
    try:
        text = print_expr(arg.value)
    except _NamedError:  # named by an invocation nested in this one
        raise
    except ExportError as error:
        what = f"attribute '{arg.name}'" if arg.name is not None else "a positional argument"
        named = _NamedError(f"{what} of '{invocation.name}': {error.message}")
        named.location = next((loc for loc in (arg.loc, invocation.loc) if loc.line is not None), None)
        raise named from None
    return text if arg.name is None else f"{arg.name} = {text}"


def _print_chain(expr: ast.BinaryExpr | ast.IndexExpr | ast.RangeExpr, context: int) -> str:
    """A left-deep chain of binary operators and subscripts (see `ast.unwind`), in a loop. A link that needs
    parentheses encloses everything inside it, so all opening parentheses go first."""
    inner, links = ast.unwind(expr)
    contexts = [0] * len(links)  # what each link's position requires, from the outermost in
    for i in range(len(links) - 1, -1, -1):
        contexts[i] = context
        context = _inner_context(links[i])
    suffixes, opened = [], 0
    for link, required in zip(links, contexts):
        if type(link) is ast.IndexExpr:
            suffixes.append(f"[{print_expr(link.index)}]")
            continue
        if type(link) is ast.RangeExpr:
            start = print_expr(link.start) if link.start is not None else ""
            end = print_expr(link.end) if link.end is not None else ""
            suffixes.append(f"[{start}:{end}]")
            continue
        if link.op == "^":
            # left-grouping: the right operand may be a unary expression but never another '^', not even under
            # that unary operator (`a ^ -(b ^ c)`: without the parentheses it reads `(a ^ -b) ^ c`)
            right = link.right
            right_text = (right.op + print_expr(right.operand, _POSTFIX) if isinstance(right, ast.UnaryExpr)
                          else print_expr(right, _POSTFIX))
            text, precedence = f" ^ {right_text}", _POWER
        else:
            precedence = _PRECEDENCE[link.op]
            text = f" {link.op} {print_expr(link.right, precedence + 1)}"
        if precedence < required:
            opened += 1
            text += ")"
        suffixes.append(text)
    return "(" * opened + print_expr(inner, context) + "".join(suffixes)


def _inner_context(link: ast.BinaryExpr | ast.IndexExpr | ast.RangeExpr) -> int:
    """The precedence that the left operand (or subscripted value) of `link` must have."""
    if type(link) is not ast.BinaryExpr or link.op == "^" or isinstance(link.left, ast.UnaryExpr):
        return _POSTFIX
    return _PRECEDENCE[link.op]


def _wrap(text: str, precedence: int, context: int) -> str:
    return f"({text})" if precedence < context else text
