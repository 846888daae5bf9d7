"""Deviations from the spec that real producers write, and what a lenient reading makes of them.

Each rule is a way of bending the spec with one written meaning (docs/tract_core.md, "Deviations read"). A `Deviations`
object decides at each place one is met: strict, it raises the `NNEFError` the spec asks for; lenient, it warns
once per place with an `NNEFDeviationWarning` naming the file, line, column and rule.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

from nnef_torch.errors import Location, NNEFDeviationWarning, NNEFError, NNEFSemanticError
from nnef_torch.format import ast
from nnef_torch.ir.graph import Ref, Variable
from nnef_torch.ir.producers import Producers

RULES = {
    "split-zero-ratio": "a zero ratio of 'split' is an empty chunk",
    "matmul-1d": "a 1-D operand of 'matmul' follows numpy's matmul",
    "operator-expressions": "nested expressions without 'extension KHR_enable_operator_expressions'",
    "positional-attribute": "an attribute passed by position is taken in declaration order",
    "item-for-array": "a single item passed for an array attribute is a one-item array",
    "surplus-argument": "a literal passed by position beyond the declared parameters is ignored",
    "duplicate-assignment": "an identifier assigned again with an identical right-hand side is the same tensor",
    "tensor-attribute": "a constant tensor passed for a scalar attribute (such as epsilon) is its value",
    "redefined-standard-op": "a document's fragment redefining a standard operation replaces it",
    "erf": "'erf' is an operation (the error function)",
}

LENIENT_OPS = frozenset({"erf"})  # operations beyond the standard ones that a lenient reading accepts

# The declaration of `erf` a lenient reading adds when a document invokes it without defining it.
ERF = ast.Fragment("erf", False, None, (ast.Param("x", ast.TensorType(ast.PrimitiveType("scalar")), None,
                                                  Location("<lenient>")),),
                   (ast.Result("y", ast.TensorType(ast.PrimitiveType("scalar")), Location("<lenient>")),), None,
                   Location("<lenient>"))


class Deviations:
    """Where the deviations of one reading go: raised (strict) or warned about once per place (lenient)."""

    def __init__(self, lenient: bool = False):
        self.lenient = lenient
        self.seen: set[tuple[str, Location | None]] = set()
        self.found: list[tuple[str, str, Location | None]] = []
        self.duplicates: set[Location] = set()  # the statements repeating an earlier one, skipped

    def rules(self) -> tuple[str, ...]:
        """The rules met (lenient), each once, in the order first met."""
        return tuple(dict.fromkeys(rule for rule, _, _ in self.found))

    def bend(self, rule: str, message: str, loc: Location | None,
             error: type[NNEFError] = NNEFSemanticError) -> None:
        """Meet a deviation of `rule` at `loc`: raise `error(message)` unless reading leniently."""
        if not self.lenient:
            refused = error(message, loc)
            refused.rule = rule  # type: ignore[attr-defined]  # what a lenient reading would do (the CLI's note)
            raise refused
        key = (rule, loc)
        if key in self.seen:
            return
        self.seen.add(key)
        self.found.append((rule, message, loc))
        warning = NNEFDeviationWarning(f"{message} (read leniently: {RULES[rule]})", loc, rule)
        if loc is not None and loc.file is not None and loc.line is not None:  # shown at the place in the file
            warnings.warn_explicit(warning, NNEFDeviationWarning, loc.file, loc.line, "nnef_torch.lenient")
        else:
            warnings.warn(warning, stacklevel=3)


STRICT = Deviations(False)


def op_deviation(name: str, shapes: list[Any], attribs: dict[str, Any]) -> tuple[str, str] | None:
    """The deviation an emitted operation's arguments make (rule, message), if any."""
    if name == "split":
        ratios = attribs.get("ratios")
        if isinstance(ratios, list) and 0 in ratios and all(isinstance(r, int) and r >= 0 for r in ratios) \
                and sum(ratios) > 0:
            return "split-zero-ratio", f"split: 'ratios' {ratios} has a zero item (the spec asks for positive ones)"
    elif name == "matmul" and len(shapes) == 2 and all(isinstance(s, tuple) for s in shapes):
        a, b = shapes
        if (len(a) == 1 or len(b) == 1) and max(len(a), len(b)) <= 2:
            return "matmul-1d", f"matmul: operands of shapes {list(a)} and {list(b)} (the spec asks for rank 2 " \
                                "or more)"
    return None


def lenient_shape(rule: str) -> Any:
    """The shape rule of an operation read with the deviation `rule` (split-zero-ratio, matmul-1d)."""
    # lazy: a shape facet loads with the op table, on first lookup (ops.registry.FACETS), not with ir/
    from nnef_torch.ops.shapes_tensor import matmul_numpy, split_with_empty
    return {"split-zero-ratio": split_with_empty, "matmul-1d": matmul_numpy}[rule]


def same_statement(a: Any, b: Any) -> bool:
    """Whether two right-hand sides are the same (syntax trees compare without their locations). Walked with a
    stack, not recursively: a statement may be a chain of any length (`x + 1.0 + 1.0 + ...`)."""
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if a is b:
            continue
        if type(a) is not type(b):
            if isinstance(a, ast.NumberItems) or isinstance(b, ast.NumberItems):
                if a != b:  # number items against a tuple of the nodes they read as
                    return False
                continue
            return False
        if isinstance(a, tuple):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif dataclasses.is_dataclass(a) and not isinstance(a, Location):
            for field in _compared_fields(type(a)):
                pending.append((getattr(a, field), getattr(b, field)))
        elif a != b:  # numbers, strings, None, NumberItems (flat)
            return False
    return True


@functools.cache
def _compared_fields(kind: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(kind) if field.compare)


def constant_value(producers: Producers, constants: Callable[[Variable], Any] | None, value: Ref,
                   param: ast.Param, op: str, loc: Location) -> Any:
    """The value of the tensor `value` passed for the attribute `param` of `op` (a `tensor-attribute` deviation):
    a `constant` of one item, or a `variable` of one item whose data `constants` gives; else an error. The
    producer is looked up in the lowerer's index (`producers`), copies followed: constant time per use."""
    producer = producers.origin(value.name)
    item = None
    if producer is not None and producer.name == "constant" and len(producer.attribs["value"]) == 1:
        item = producer.attribs["value"][0]
    elif producer is not None and producer.name == "variable" and constants is not None \
            and math.prod(producer.attribs["shape"]) == 1:  # read only a one-item variable's data
        name = producer.outputs["output"].name
        items = producers.memo.setdefault(__name__, {})  # each variable's data is read once, however often used
        if name not in items:
            data = constants(Variable(name, producer.attribs["label"], producer.dtype,
                                      tuple(producer.attribs["shape"])))
            items[name] = data.reshape(()).item() if data is not None and getattr(data, "size", 0) == 1 else None
        item = items[name]
    if item is None:
        why = f"made by '{producer.name}'" if producer is not None else "not known here"
        if producer is not None and producer.name == "variable":
            why = "a variable whose data is not at hand" if constants is None else "a variable of several items"
        raise NNEFSemanticError(f"argument '{param.name}' of '{op}' must be a compile-time constant, but tensor "
                                f"'{value.name}' is {why}", loc)
    kind = param.type.name if isinstance(param.type, ast.PrimitiveType) else "scalar"
    try:
        return bool(item) if kind == "logical" else int(item) if kind == "integer" else float(item)
    except (OverflowError, ValueError):  # an infinite or NaN item for an integer
        raise NNEFSemanticError(f"argument '{param.name}' of '{op}' must be {kind}, but tensor '{value.name}' holds "
                                f"{item!r}", loc) from None
