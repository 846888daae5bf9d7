"""Static semantic checks of spec 3.3: declarations, invocations, identifier usage and expression types.

Runs over the syntax tree before anything is evaluated, so that a fragment with an error is rejected even if the
graph never invokes it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nnef_torch.errors import Location, NNEFSemanticError, NNEFTypeError
from nnef_torch.format import ast
from nnef_torch.ir import types as T
from nnef_torch.ir.deviations import ERF, STRICT, Deviations, same_statement

FRAGMENT_EXTENSION = "KHR_enable_fragment_definitions"
OPERATOR_EXTENSION = "KHR_enable_operator_expressions"
GRAPH_ONLY_OPS = ("external", "variable", "update")
UNARY_FRAGMENTS = {"-": "neg", "+": "copy", "!": "not"}
BINARY_FRAGMENTS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "<": "lt", "<=": "le", ">": "gt",
                    ">=": "ge", "==": "eq", "!=": "ne", "&&": "and", "||": "or"}
_ARITHMETIC, _ORDERING = ("+", "-", "*", "/", "^"), ("<", "<=", ">", ">=")
_EQUALITY, _LOGIC = ("==", "!="), ("&&", "||")


def semantic_error(message: str, loc: Location | None) -> NNEFSemanticError:
    return NNEFSemanticError(message, loc)


def type_error(message: str, loc: Location | None) -> NNEFTypeError:
    return NNEFTypeError(message, loc)


def check_document(doc: ast.Document, fragments: Mapping[str, ast.Fragment],
                   deviations: Deviations = STRICT, typing: T.Typing | None = None) -> None:
    """Check `doc` against the declarations in `fragments` (standard library and the document's own); what real
    producers write against the spec goes to `deviations` (see `nnef_torch.ir.deviations`). `typing`: the reading
    of types of the document's dialect (`registry.typing_of`), None for the spec's."""
    if doc.version.split(".")[0] != "1":
        raise semantic_error(f"unsupported NNEF version {doc.version}; this reader supports 1.x", doc.version_loc)
    if doc.fragments and FRAGMENT_EXTENSION not in doc.extensions:
        raise semantic_error(f"fragment definitions need 'extension {FRAGMENT_EXTENSION};'", doc.fragments[0].loc)
    for fragment in doc.fragments:
        check_declaration(fragment)
    for fragment in doc.fragments:
        if fragment.body is not None:
            _BodyChecker(fragments, fragment, deviations=deviations, typing=typing).check_fragment()
    if doc.graph is not None:
        _BodyChecker(fragments, None, OPERATOR_EXTENSION in doc.extensions, deviations, typing).check_graph(doc.graph)


def check_library(fragments: Iterable[ast.Fragment], table: Mapping[str, ast.Fragment]) -> None:
    for fragment in fragments:
        check_declaration(fragment)
        if fragment.body is not None:
            _BodyChecker(table, fragment).check_fragment()


def check_declaration(fragment: ast.Fragment) -> None:
    seen: set[str] = set()
    attributes_started = False
    generic_used: Location | None = None  # where '?' is first used
    for param in fragment.params:
        if param.name in seen:
            raise semantic_error(f"fragment '{fragment.name}' declares '{param.name}' twice", param.loc)
        seen.add(param.name)
        _check_tuple_types(param.type, param.loc)
        if generic_used is None and T.is_generic(param.type):
            generic_used = param.loc
        if T.is_attribute(param.type):
            attributes_started = True
        elif attributes_started:
            raise semantic_error(f"tensor parameter '{param.name}' of '{fragment.name}' must precede attributes",
                                 param.loc)
        if param.default is not None:
            default_type = literal_type(param.default)
            if not T.can_cast(default_type, param.type):
                raise type_error(f"default value of '{param.name}' has type {default_type}, expected {param.type}",
                                 param.default.loc)
    for result in fragment.results:
        if result.name in seen:
            raise semantic_error(f"fragment '{fragment.name}' declares '{result.name}' twice", result.loc)
        seen.add(result.name)
        _check_tuple_types(result.type, result.loc)
        if generic_used is None and T.is_generic(result.type):
            generic_used = result.loc
        if not _all_tensor(result.type):
            raise type_error(f"result '{result.name}' of '{fragment.name}' must be a tensor type, not {result.type}",
                             result.loc)
        if _has_unbound(result.type):
            raise type_error(f"result '{result.name}' of '{fragment.name}' cannot be the unbound tensor<>",
                             result.loc)
    if generic_used is not None and not fragment.generic:
        raise semantic_error(f"fragment '{fragment.name}' uses '?' and must be declared generic with <?>",
                             generic_used)
    if fragment.generic and generic_used is None:
        raise semantic_error(f"fragment '{fragment.name}' is declared generic but no parameter or result uses '?'",
                             fragment.loc)


def _all_tensor(type_: ast.Type) -> bool:
    if isinstance(type_, ast.ArrayType):
        return _all_tensor(type_.item)
    if isinstance(type_, ast.TupleType):
        return all(_all_tensor(item) for item in type_.items)
    return isinstance(type_, ast.TensorType)


def _has_unbound(type_: ast.Type) -> bool:
    if isinstance(type_, ast.TensorType):
        return type_.item is None
    if isinstance(type_, ast.ArrayType):
        return _has_unbound(type_.item)
    if isinstance(type_, ast.TupleType):
        return any(_has_unbound(item) for item in type_.items)
    return False


def _check_tuple_types(type_: ast.Type, loc: Location) -> None:
    if isinstance(type_, ast.ArrayType):
        _check_tuple_types(type_.item, loc)
    elif isinstance(type_, ast.TupleType):
        kinds = {T.contains_tensor(item) for item in type_.items}
        if len(kinds) > 1:
            raise type_error(f"tuple type {type_} mixes tensor and non-tensor items", loc)
        for item in type_.items:
            _check_tuple_types(item, loc)


def literal_type(expr: ast.Expr) -> T.AnyType:
    """Type of a default-value literal expression."""
    if isinstance(expr, ast.Literal):
        return ast.PrimitiveType(expr.kind)
    if isinstance(expr, ast.ArrayExpr):
        return _array_type([literal_type(item) for item in expr.items], expr.loc)
    if isinstance(expr, ast.TupleExpr):
        return ast.TupleType(tuple(literal_type(item) for item in expr.items))
    raise semantic_error("default values must be literals", expr.loc)


def _array_type(items: list[T.AnyType], loc: Location,
                common_type: Callable[[T.AnyType, T.AnyType], T.AnyType | None] = T.common_type) -> T.AnyType:
    if not items:
        return T.EMPTY_ARRAY
    common = items[0]
    for item in items[1:]:
        joined = common_type(common, item)
        if joined is None:
            raise type_error(f"array items have no common type: {common} and {item}", loc)
        common = joined
    return ast.ArrayType(common)


class _BodyChecker:
    """Types the assignments of one fragment body or of the graph body."""

    def __init__(self, fragments: Mapping[str, ast.Fragment], fragment: ast.Fragment | None,
                 operators: bool = True, deviations: Deviations = STRICT, typing: T.Typing | None = None):
        self.fragments, self.fragment, self.operators = fragments, fragment, operators
        self.deviations, self.typing = deviations, typing
        self.scope: dict[str, T.AnyType] = {}
        self.generic = fragment.generic if fragment is not None else False

    # -- bodies --
    def check_fragment(self) -> None:
        fragment = self.fragment
        params = {param.name for param in fragment.params}
        results = {result.name: result for result in fragment.results}
        self.scope.update({param.name: param.type for param in fragment.params})
        assigned: set[str] = set()
        for assignment in fragment.body:
            value_type = self.statement_type(assignment)
            for name, loc, bound in self._bind(assignment.lhs, value_type, assignment.rhs):
                if name in params:
                    raise semantic_error(f"parameter '{name}' of '{fragment.name}' cannot be assigned", loc)
                if name in assigned:
                    raise semantic_error(f"'{name}' is assigned more than once", loc)
                if name in results:
                    declared = results[name].type
                    if not self.can_cast(bound, declared):
                        raise type_error(f"result '{name}' is declared {declared} but assigned {bound}", loc)
                    bound = declared
                assigned.add(name)
                self.scope[name] = bound
        for name, result in results.items():
            if name not in assigned:
                raise semantic_error(f"result '{name}' of fragment '{fragment.name}' is never assigned", result.loc)

    def check_graph(self, graph: ast.GraphDef) -> None:
        externals: set[str] = set()
        params: set[str] = set()
        for i, name in enumerate(graph.params):
            if name in params:
                raise semantic_error(f"graph parameter '{name}' is declared twice",
                                     _declared(graph.param_locs, i, graph))
            params.add(name)
        first: dict[str, ast.Assignment] = {}  # the statement that assigns each identifier
        for assignment in graph.body:
            if self._repeated(assignment, first):
                continue
            if not self.operators:
                self._check_flat(assignment)
            value_type = self.statement_type(assignment)
            rhs = assignment.rhs
            is_external = isinstance(rhs, ast.Invocation) and rhs.name == "external"
            for name, loc, bound in self._bind(assignment.lhs, value_type, rhs):
                if name in self.scope:
                    raise semantic_error(f"'{name}' is assigned more than once", loc)
                if not isinstance(bound, ast.TensorType):
                    raise type_error(f"identifiers in the graph body must be tensors; '{name}' has type {bound}", loc)
                if is_external:
                    if name not in params:
                        raise semantic_error(f"'{name}' is defined by external but is not a graph parameter", loc)
                    externals.add(name)
                elif name in params:
                    raise semantic_error(f"graph parameter '{name}' must be defined by external", loc)
                self.scope[name] = bound
                first[name] = assignment
        for i, name in enumerate(graph.params):
            if name not in externals:
                raise semantic_error(f"graph parameter '{name}' is never defined by external",
                                     _declared(graph.param_locs, i, graph))
        for i, name in enumerate(graph.results):
            if name not in self.scope:
                raise semantic_error(f"graph result '{name}' is never assigned", _declared(graph.result_locs, i, graph))

    def _repeated(self, assignment: ast.Assignment, first: Mapping[str, ast.Assignment]) -> bool:
        """Whether `assignment` repeats, with an identical right-hand side, an earlier statement assigning the same
        identifiers (a deviation: it is then skipped, here and when lowering)."""
        names = _identifiers(assignment.lhs)
        earlier = first.get(names[0].name) if names else None
        if earlier is None or not same_statement(earlier.lhs, assignment.lhs) \
                or not same_statement(earlier.rhs, assignment.rhs):
            return False  # a different right-hand side stays the error reported below
        if isinstance(assignment.rhs, ast.Invocation) and assignment.rhs.name == "external":
            raise semantic_error(f"graph input '{names[0].name}' is declared by external more than once (as at "
                                 f"line {earlier.loc.line}); an input is declared once, even in a lenient reading",
                                 names[0].loc)
        self.deviations.bend("duplicate-assignment", f"'{names[0].name}' is assigned more than once "
                             f"(identically, as at line {earlier.loc.line})", names[0].loc)
        self.deviations.duplicates.add(assignment.loc)
        return True

    def statement_type(self, assignment: ast.Assignment) -> T.AnyType:
        try:
            return self.type_of(assignment.rhs, top=True)
        except RecursionError:  # values nested by many assignments (`b = [a]; c = [b]; ...`) or a deep caller
            raise semantic_error("this statement nests too deeply for the Python stack", assignment.loc) from None

    def _check_flat(self, assignment: ast.Assignment) -> None:
        rhs = assignment.rhs
        offending = [arg.value for arg in rhs.args if not _is_flat(arg.value)] if isinstance(rhs, ast.Invocation) \
            else [rhs]
        if offending:
            self.deviations.bend("operator-expressions", f"operator expressions need 'extension "
                                 f"{OPERATOR_EXTENSION};' (the flat syntax allows one invocation of literals and "
                                 "identifiers)", _first_non_flat(offending[0]).loc)

    def _bind(self, lhs: ast.Expr, value_type: T.AnyType, rhs: ast.Expr):
        """Yield (name, location, type) for each identifier of the left-hand side."""
        if isinstance(lhs, ast.Identifier):
            if isinstance(value_type, ast.TupleType) and isinstance(rhs, ast.Invocation):
                raise semantic_error(f"'{rhs.name}' has {len(value_type.items)} results; unpack them into a tuple",
                                     lhs.loc)
            yield lhs.name, lhs.loc, value_type
        elif isinstance(lhs, ast.TupleExpr):
            if not isinstance(value_type, ast.TupleType) or len(value_type.items) != len(lhs.items):
                raise type_error(f"cannot unpack {value_type} into a tuple of {len(lhs.items)}", lhs.loc)
            for item, item_type in zip(lhs.items, value_type.items):
                yield from self._bind(item, item_type, rhs)
        elif isinstance(lhs, ast.ArrayExpr):
            if isinstance(value_type, T.EmptyArrayType) and not lhs.items:
                return
            if not isinstance(value_type, ast.ArrayType):
                raise type_error(f"cannot unpack {value_type} into an array", lhs.loc)
            for item in lhs.items:
                yield from self._bind(item, value_type.item, rhs)
        else:
            raise semantic_error("the left-hand side must be identifiers, arrays or tuples of them", lhs.loc)

    def can_cast(self, source: T.AnyType, target: T.AnyType) -> bool:
        return T.can_cast(source, target) or (self.typing is not None and self.typing.can_cast(source, target))

    def common_type(self, a: T.AnyType, b: T.AnyType) -> T.AnyType | None:
        common = T.common_type(a, b)
        if common is not None or self.typing is None:
            return common
        return b if self.typing.can_cast(a, b) else a if self.typing.can_cast(b, a) else None

    # -- expressions --
    def type_of(self, expr: ast.Expr, top: bool = False) -> T.AnyType:
        method = getattr(self, "_" + type(expr).__name__)
        return method(expr, top) if isinstance(expr, ast.Invocation) else method(expr)

    def _Literal(self, expr: ast.Literal) -> T.AnyType:
        return ast.PrimitiveType(expr.kind)

    def _Identifier(self, expr: ast.Identifier) -> T.AnyType:
        if expr.name not in self.scope:
            raise semantic_error(f"'{expr.name}' is used before it is assigned", expr.loc)
        return self.scope[expr.name]

    def _ArrayExpr(self, expr: ast.ArrayExpr) -> T.AnyType:
        if type(expr.items) is ast.NumberItems:  # numbers of one kind, never empty
            return ast.ArrayType(ast.PrimitiveType(expr.items.kind))
        if type(expr.items) is ast.NameItems:  # each distinct name typed once, at its first item
            return _array_type([self.type_of(expr.items[index]) for index in expr.items.first_places().values()],
                               expr.loc, self.common_type)
        return _array_type([self.type_of(item) for item in expr.items], expr.loc, self.common_type)

    def _TupleExpr(self, expr: ast.TupleExpr) -> T.AnyType:
        return ast.TupleType(tuple(self.type_of(item) for item in expr.items))

    def _UnaryExpr(self, expr: ast.UnaryExpr) -> T.AnyType:
        operand = self.type_of(expr.operand)
        if isinstance(operand, ast.TensorType):
            return self.check_call(UNARY_FRAGMENTS[expr.op], [(None, operand, expr.operand.loc)], None, expr.loc)
        allowed = ("logical",) if expr.op == "!" else ("integer", "scalar")
        if isinstance(operand, ast.PrimitiveType) and operand.name in allowed:
            return operand
        raise type_error(f"unary '{expr.op}' cannot be applied to {operand}", expr.loc)

    def _BinaryExpr(self, expr: ast.BinaryExpr | ast.IndexExpr | ast.RangeExpr) -> T.AnyType:
        """Binary operators and subscripts, a left-deep chain of them folded in a loop (see `ast.unwind`)."""
        inner, links = ast.unwind(expr)
        value = self.type_of(inner)
        for link in links:
            if type(link) is ast.BinaryExpr:
                value = self._binary(link, value)
            elif type(link) is ast.IndexExpr:
                value = self._index(link, value)
            else:
                value = self._range(link, value)
        return value

    _IndexExpr = _RangeExpr = _BinaryExpr

    def _binary(self, expr: ast.BinaryExpr, left: T.AnyType) -> T.AnyType:
        right = self.type_of(expr.right)
        op = expr.op
        if op != "in" and (isinstance(left, ast.TensorType) or isinstance(right, ast.TensorType)):
            args = [(None, left, expr.left.loc), (None, right, expr.right.loc)]
            return self.check_call(BINARY_FRAGMENTS[op], args, None, expr.loc)
        result = _binary_result(op, left, right)
        if result is None:
            raise type_error(f"operator '{op}' cannot be applied to {left} and {right}", expr.loc)
        return result

    def _IfElseExpr(self, expr: ast.IfElseExpr) -> T.AnyType:
        condition = self.type_of(expr.condition)
        if condition != T.LOGICAL:
            raise type_error(f"the condition of 'if' must be logical, not {condition}", expr.condition.loc)
        then, otherwise = self.type_of(expr.then), self.type_of(expr.otherwise)
        common = self.common_type(then, otherwise)
        if common is None:
            raise type_error(f"the branches of 'if' have no common type: {then} and {otherwise}", expr.loc)
        return common

    def _Comprehension(self, expr: ast.Comprehension) -> T.AnyType:
        names = [name for name, _ in expr.iterators]
        hidden = {name: self.scope[name] for name in names if name in self.scope}  # restored after, not copied
        try:
            for name, array in expr.iterators:
                array_type = self.type_of(array)
                if isinstance(array_type, T.EmptyArrayType):
                    item_type: T.AnyType = T.EMPTY_ARRAY
                elif isinstance(array_type, ast.ArrayType):
                    item_type = array_type.item
                else:
                    raise type_error(f"a comprehension iterates arrays, not {array_type}", array.loc)
                self.scope[name] = item_type
            if expr.condition is not None and self.type_of(expr.condition) != T.LOGICAL:
                raise type_error("the condition of a comprehension must be logical", expr.condition.loc)
            return ast.ArrayType(self.type_of(expr.body))
        finally:
            for name in names:
                self.scope.pop(name, None)
            self.scope.update(hidden)

    def _index(self, expr: ast.IndexExpr, value: T.AnyType) -> T.AnyType:
        if isinstance(value, ast.TupleType):
            index = expr.index
            if not (isinstance(index, ast.Literal) and index.kind == "integer"):
                raise type_error("tuples can only be indexed by integer literals", index.loc)
            if not 0 <= index.value < len(value.items):
                raise semantic_error(f"tuple index {index.value} is out of range for {value}", index.loc)
            return value.items[index.value]
        if self.type_of(expr.index) != T.INTEGER:
            raise type_error("an array index must be an integer", expr.index.loc)
        if isinstance(value, ast.ArrayType):
            return value.item
        if value == T.STRING:
            return T.STRING
        raise type_error(f"cannot index a value of type {value}", expr.loc)

    def _range(self, expr: ast.RangeExpr, value: T.AnyType) -> T.AnyType:
        for bound in (expr.start, expr.end):
            if bound is not None and self.type_of(bound) != T.INTEGER:
                raise type_error("range bounds must be integers", bound.loc)
        if isinstance(value, (ast.ArrayType, T.EmptyArrayType)) or value == T.STRING:
            return value
        raise type_error(f"cannot take a range of a value of type {value}", expr.loc)

    def _BuiltinExpr(self, expr: ast.BuiltinExpr) -> T.AnyType:
        arg = self.type_of(expr.arg)
        name = expr.name
        if name == "shape_of":
            if isinstance(arg, ast.TensorType) or isinstance(arg, ast.PrimitiveType):
                return ast.ArrayType(T.INTEGER)
        elif name in ("length_of", "range_of"):
            if isinstance(arg, (ast.ArrayType, T.EmptyArrayType)) or arg == T.STRING:
                return T.INTEGER if name == "length_of" else ast.ArrayType(T.INTEGER)
        elif isinstance(arg, ast.PrimitiveType):
            return ast.PrimitiveType(name)
        raise type_error(f"'{name}' cannot be applied to {arg}", expr.loc)

    def _Invocation(self, expr: ast.Invocation, top: bool = False) -> T.AnyType:
        if self.fragment is not None and expr.name in GRAPH_ONLY_OPS:
            raise semantic_error(f"'{expr.name}' may only be used in the graph body, not in a fragment", expr.loc)
        args = [(arg.name, self.type_of(arg.value), arg.loc) for arg in expr.args]
        result = self.check_call(expr.name, args, expr.generic, expr.loc)
        if not top and isinstance(result, ast.TupleType):
            raise semantic_error(f"'{expr.name}' has several results and cannot be used inside an expression",
                                 expr.loc)
        return result

    def check_call(self, name: str, args: Sequence[tuple[str | None, T.AnyType, Location]],
                   generic: ast.PrimitiveType | None, loc: Location) -> T.AnyType:
        fragment = self.fragments.get(name)
        if fragment is None:
            raise semantic_error(f"undefined operation '{name}'", loc)
        if fragment is ERF:
            self.deviations.bend("erf", "undefined operation 'erf'", loc)
        bound = bind_arguments(fragment, args, loc, self.deviations,
                               lambda arg: isinstance(arg, ast.PrimitiveType) and arg.name != "string")
        value = resolve_generic(fragment, bound, generic, loc, self.generic, self.typing)
        for param in fragment.params:
            if param.name in bound:
                arg_type, arg_loc = bound[param.name]
                expected = T.substitute(param.type, value)
                if not self.can_cast(arg_type, expected):
                    message = f"argument '{param.name}' of '{name}' must be {expected}, found {arg_type}"
                    if _tensor_for_attribute(arg_type, expected):
                        self.deviations.bend("tensor-attribute", message, arg_loc, NNEFTypeError)
                    elif item_for_array(arg_type, expected):
                        self.deviations.bend("item-for-array", message, arg_loc, NNEFTypeError)
                    else:
                        raise type_error(message, arg_loc)
        results = [T.substitute(result.type, value) for result in fragment.results]
        return results[0] if len(results) == 1 else ast.TupleType(tuple(results))


def bind_arguments(fragment: ast.Fragment, args: Sequence[tuple[str | None, Any, Location]],
                   loc: Location, deviations: Deviations = STRICT,
                   is_literal: Callable[[Any], bool] = lambda arg: False) -> dict:
    """Map parameter names to (type-or-value, location) for each given argument; check the invocation rules.
    `is_literal` tells the arguments that a lenient reading may drop when passed beyond the parameters."""
    bound: dict = {}
    params = {param.name: param for param in fragment.params}
    positional = [arg for arg in args if arg[0] is None]
    named_from = len(positional)
    if len(positional) > len(fragment.params):
        message = (f"'{fragment.name}' takes at most {len(fragment.params)} arguments, {len(positional)} given")
        surplus = positional[len(fragment.params):]
        if not all(is_literal(value) for _, value, _ in surplus):
            raise semantic_error(message, surplus[0][2])
        deviations.bend("surplus-argument", message, surplus[0][2])
        positional = positional[:len(fragment.params)]
    for param, (_, value, arg_loc) in zip(fragment.params, positional):
        if T.is_attribute(param.type):
            deviations.bend("positional-attribute", f"attribute '{param.name}' of '{fragment.name}' must be passed "
                            f"by name ('{param.name} = ...')", arg_loc)
        bound[param.name] = (value, arg_loc)
    for name, value, arg_loc in args[named_from:]:
        if name is None:
            raise semantic_error("positional arguments must precede named arguments", arg_loc)
        if name not in params:
            raise semantic_error(f"'{fragment.name}' has no parameter named '{name}'", arg_loc)
        if name in bound:
            raise semantic_error(f"parameter '{name}' of '{fragment.name}' is given more than once", arg_loc)
        bound[name] = (value, arg_loc)
    for param in fragment.params:
        if param.name not in bound and param.default is None:
            raise semantic_error(f"missing argument '{param.name}' of '{fragment.name}'", loc)
    return bound


def _tensor_for_attribute(given: T.AnyType, expected: T.AnyType) -> bool:
    """A tensor given for a primitive attribute (`epsilon = eps` with `eps` a tensor): a deviation whose value is
    taken when lowering, if the tensor is a constant."""
    return (isinstance(given, ast.TensorType) and isinstance(expected, ast.PrimitiveType)
            and expected.name in ("scalar", "integer", "logical")
            and (given.item is None or given.item.name in ("?", expected.name)))


def item_for_array(given: Any, expected: T.AnyType) -> bool:
    """A single primitive given for an array of primitives (`softmax(x, 1)`): a deviation, a one-item array."""
    return (isinstance(expected, ast.ArrayType) and isinstance(expected.item, ast.PrimitiveType)
            and isinstance(given, ast.PrimitiveType) and T.can_cast(given, expected.item))


def _identifiers(lhs: ast.Expr) -> list[ast.Identifier]:
    if isinstance(lhs, ast.Identifier):
        return [lhs]
    return [name for item in getattr(lhs, "items", ()) for name in _identifiers(item)]


def resolve_generic(fragment: ast.Fragment, bound: dict, explicit: ast.PrimitiveType | None, loc: Location,
                    inside_generic: bool, typing: T.Typing | None = None) -> ast.PrimitiveType | None:
    """The type that replaces '?' in a generic fragment: explicit, deduced from the arguments, or the default
    (where the arguments deduce several, the one a dialect's `typing` chooses, if any)."""
    if not fragment.generic:
        if explicit is not None:
            raise semantic_error(f"'{fragment.name}' is not generic and takes no <{explicit}>", loc)
        return None
    if explicit is not None:
        if explicit.name == "?" and not inside_generic:
            raise semantic_error("'<?>' may only be used inside a generic fragment", loc)
        return explicit
    found: set[str] = set()
    for param in fragment.params:
        if param.name in bound and isinstance(bound[param.name][0], (ast.PrimitiveType, ast.TensorType,
                                                                     ast.ArrayType, ast.TupleType)):
            T.deduce(param.type, bound[param.name][0], found)
    if len(found) == 1:
        return ast.PrimitiveType(found.pop())
    if len(found) > 1:
        chosen = typing.generic(found) if typing is not None else None
        if chosen is not None:
            return ast.PrimitiveType(chosen)
        raise type_error(f"the generic type of '{fragment.name}' is ambiguous: {' or '.join(sorted(found))}", loc)
    if fragment.generic_default is not None:
        return fragment.generic_default
    raise type_error(f"the generic type of '{fragment.name}' cannot be deduced; write {fragment.name}<type>(...)", loc)


def _binary_result(op: str, left: T.AnyType, right: T.AnyType) -> T.AnyType | None:
    numeric = ("integer", "scalar")
    same_primitive = isinstance(left, ast.PrimitiveType) and left == right
    if op in _ARITHMETIC:
        if same_primitive and left.name in numeric:
            return left
        if op == "+":
            if same_primitive and left.name == "string":
                return left
            arrays = (ast.ArrayType, T.EmptyArrayType)
            if isinstance(left, arrays) and isinstance(right, arrays):
                return T.common_type(left, right)
        if op == "*" and right == T.INTEGER and (isinstance(left, (ast.ArrayType, T.EmptyArrayType))
                                                 or left == T.STRING):
            return left
        return None
    if op in _ORDERING:
        return T.LOGICAL if same_primitive and left.name in numeric else None
    if op in _EQUALITY:
        return T.LOGICAL if T.common_type(left, right) is not None else None
    if op in _LOGIC:
        return T.LOGICAL if same_primitive and left.name == "logical" else None
    if op == "in":
        if isinstance(right, T.EmptyArrayType):
            return T.LOGICAL
        if isinstance(right, ast.ArrayType) and T.common_type(left, right.item) is not None:
            return T.LOGICAL
    return None


def _declared(locs: tuple[Location, ...], index: int, graph: ast.GraphDef) -> Location:
    """Where the graph declaration names its `index`-th parameter or result (the graph itself if unknown)."""
    return locs[index] if index < len(locs) else graph.loc


def _first_non_flat(expr: ast.Expr) -> ast.Expr:
    """The outermost part of `expr` that the flat syntax does not allow (`expr` itself unless it is an array
    or tuple, whose items are then searched)."""
    if isinstance(expr, (ast.ArrayExpr, ast.TupleExpr)):
        for item in expr.items:
            if not _is_flat(item):
                return _first_non_flat(item)
    return expr


def _is_flat(expr: ast.Expr) -> bool:
    if isinstance(expr, (ast.Literal, ast.Identifier)):
        return True
    if isinstance(expr, ast.UnaryExpr):  # a negative number is a literal in the flat syntax
        return expr.op == "-" and isinstance(expr.operand, ast.Literal) and expr.operand.kind in ("integer", "scalar")
    if isinstance(expr, (ast.ArrayExpr, ast.TupleExpr)):
        return type(expr.items) in (ast.NumberItems, ast.NameItems) or all(_is_flat(item) for item in expr.items)
    return False
