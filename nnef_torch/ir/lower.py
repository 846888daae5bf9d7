"""Syntax tree -> flat IR graph: evaluate compile-time expressions, expand fragments, infer shapes (spec 2.4.1, 6).

Operations the caller keeps atomic (by default every standard operation) become IR operations; every other
fragment with a body is expanded into the operations of its body. Each emitted operation gets its shapes at once
from the op table's shape rule, so an argument error points at the invocation that caused it.
"""
from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Callable, Collection, Mapping
from typing import Any

from nnef_torch.errors import Location, NNEFError, NNEFOptionError, NNEFSemanticError, NNEFShapeError
from nnef_torch.format import ast
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.gc_pause import gc_paused
from nnef_torch.ir import evaluate
from nnef_torch.ir import types as T
from nnef_torch.ir.checker import BINARY_FRAGMENTS, UNARY_FRAGMENTS, bind_arguments, check_document, resolve_generic
from nnef_torch.ir.deviations import ERF, STRICT, Deviations, constant_value, lenient_shape, op_deviation
from nnef_torch.ir.graph import External, Graph, Operation, Ref, Signature, Tensor, Update, Variable
from nnef_torch.ir.limits import MAX_RESULTS
from nnef_torch.ir.producers import Producers
from nnef_torch.ir.values import as_tensor, is_tensor_value, literal_dtype, plain, type_of
from nnef_torch.ops import registry
from nnef_torch.stdlib import standard_fragments

Atomic = Collection[str] | Callable[[str], bool] | None
Dialect = tuple[Mapping[str, ast.Fragment], Mapping[str, Callable[..., Any]]]  # declarations, relaxed std ops
# The data of a variable (for a constant tensor passed as an attribute), or None where the files are not at hand.
Constants = Callable[[Variable], Any] | None
MAX_EXPANSION_DEPTH = 100  # fragments expanded inside one another
# Nested evaluation (each level takes at most three Python frames, so Python's stack limit is never reached first).
MAX_EVALUATION_DEPTH = 200


class Lowerer:
    def __init__(self, fragments: Mapping[str, ast.Fragment], standard: Collection[str], atomic: Atomic,
                 custom_shapes: Mapping[str, Callable[..., Any]] | None, input_shapes: Mapping[str, Any] | None,
                 batch_size: int | None = None, batch_axes: Mapping[str, int | None] | None = None,
                 deviations: Deviations = STRICT, constants: Constants = None):
        self.fragments = fragments
        self.relaxed: Mapping[str, Callable[..., Any]] = {}  # a dialect's rules for standard ops (dialects)
        self.dialect: str | None = None  # the op table looked up: a dialect's (`registry.dialect_of`), or standard
        self.typing: T.Typing | None = None  # the dialect's reading of types and attributes (`registry.typing_of`)
        self.deviations, self.constants = deviations, constants
        if atomic is None:
            self.is_atomic = lambda name: name in standard
        elif callable(atomic):
            self.is_atomic = atomic
        else:
            names = frozenset(atomic)
            self.is_atomic = lambda name: name in names
        self.custom_shapes = dict(custom_shapes or {})
        self.input_shapes = {name: tuple(shape) for name, shape in (input_shapes or {}).items()}
        self.batch_size = batch_size
        self.batch_axes = dict(batch_axes or {})
        self.tensors: dict[str, Tensor] = {}
        self.operations: list[Operation] = []
        self.producers = Producers(self.operations)  # who writes each tensor, for looking back
        self.fresh: set[str] = set()  # generated names not yet given a graph identifier
        self.renames: dict[str, str] = {}
        self.reserved: set[str] = set()
        self.counter = 0
        self.expanding: list[str] = []  # the fragments being expanded, outermost first
        self.scope: tuple[str, ...] = ()  # their invocations, 'fragment#k' (the operations' `scope`)
        self.expansions = 0
        self.nesting = 0  # levels of `evaluate` under way
        self.budget = evaluate.Budget(0, 0)
        self.site: Location | None = None  # the graph statement being lowered, for errors inside library code
        self.param_kinds: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # see _param_kinds

    # -- graph --
    def lower_graph(self, doc: ast.Document, source_length: int = 0) -> Graph:
        graph = doc.graph
        self.budget = evaluate.Budget(len(graph.body), source_length)
        self.reserved = {name for assignment in graph.body for name in _lhs_names(assignment.lhs)}
        unknown = set(self.input_shapes) - set(graph.params)
        if unknown:
            raise NNEFSemanticError(f"input_shapes names {sorted(unknown)}, which are not graph inputs "
                                    f"{list(graph.params)}", graph.loc)
        unknown = set(self.batch_axes) - set(graph.params)
        if unknown:
            raise NNEFOptionError(f"batch_axes names {sorted(unknown)}, which are not graph inputs "
                                  f"{list(graph.params)}", graph.loc)
        env: dict[str, Any] = {}
        for assignment in graph.body:
            if assignment.loc in self.deviations.duplicates:
                continue  # repeats an earlier statement (a lenient reading)
            self.site = assignment.loc
            try:
                value = self.evaluate(assignment.rhs, env, None, hint=assignment.lhs)
            except RecursionError:  # a backstop for callers deep in their own stack: the limits above come first
                raise self._stack_exhausted(assignment) from None
            self.bind_graph(assignment.lhs, value, env, assignment.loc)
        return self.finish(doc, env)

    def bind_graph(self, lhs: ast.Expr, value: Any, env: dict[str, Any], loc: Location) -> None:
        if isinstance(lhs, ast.Identifier):
            env[lhs.name] = self.name_tensor(value, lhs.name, loc)
            return
        if not isinstance(value, (list, tuple)) or len(value) != len(lhs.items):
            count = len(value) if isinstance(value, (list, tuple)) else 1
            raise NNEFSemanticError(f"the right-hand side gives {count} values for {len(lhs.items)} names", lhs.loc)
        for item, item_value in zip(lhs.items, value):
            self.bind_graph(item, item_value, env, loc)

    def name_tensor(self, value: Any, name: str, loc: Location) -> Ref:
        """Give the graph identifier `name` to `value`: rename a fresh tensor, else copy into a new one."""
        if isinstance(value, Ref) and value.name in self.fresh:
            self.fresh.discard(value.name)
            self.renames[value.name] = name
            return value
        if isinstance(value, Ref):
            dtype = self.tensors[value.name].dtype
            source = self.tensors[value.name]
            self.operations.append(Operation("copy", {"x": value}, {}, {"y": Ref(name)}, dtype, loc))
            self.tensors[name] = Tensor(name, dtype, source.shape)
            return Ref(name)
        value = plain(value)
        dtype = literal_dtype(value)
        self.operations.append(Operation("constant", {}, {"shape": [], "value": [value]}, {"output": Ref(name)},
                                         dtype, loc))
        self.tensors[name] = Tensor(name, dtype, ())
        return Ref(name)

    def finish(self, doc: ast.Document, env: dict[str, Any]) -> Graph:
        refs: dict[str, Ref] = {}  # one final Ref per tensor, however often it is read

        def final(value: Any) -> Any:
            if isinstance(value, Ref):
                name = self.renames.get(value.name, value.name)
                return refs.get(name) or refs.setdefault(name, Ref(name))
            if isinstance(value, list):
                return [final(item) for item in value]
            if isinstance(value, tuple):
                return tuple(final(item) for item in value)
            return value

        operations = tuple(Operation(op.name, {k: final(v) for k, v in op.inputs.items()}, op.attribs,
                                     {k: final(v) for k, v in op.outputs.items()}, op.dtype, op.location, op.scope)
                           for op in self.operations)
        tensors = {}
        for name, tensor in self.tensors.items():
            new = self.renames.get(name, name)
            tensors[new] = Tensor(new, tensor.dtype, tensor.shape)
        externals, variables, updates = [], [], []
        labels: dict[str, Variable] = {}
        variable_names: set[str] = set()
        updated: set[str] = set()
        for op in operations:
            if op.name == "external":
                out = op.outputs["output"].name
                externals.append(External(out, op.dtype, tuple(op.attribs["shape"])))
            elif op.name == "variable":
                variable = Variable(op.outputs["output"].name, op.attribs["label"], op.dtype,
                                    tuple(op.attribs["shape"]))
                _check_label(variable, labels, op.location)
                variables.append(variable)
                variable_names.add(variable.name)
            elif op.name == "update":
                updates.append(self._update(op, variable_names, updated))
        order = {name: i for i, name in enumerate(doc.graph.params)}
        externals.sort(key=lambda external: order[external.name])
        outputs = tuple(final(env[name]).name for name in doc.graph.results)
        signature = Signature(tuple(externals), tuple(variables), tuple(updates), outputs)
        custom = tuple(fragment for fragment in doc.fragments if fragment.body is None or self.is_atomic(fragment.name))
        return Graph(doc.graph.name, doc.version, doc.extensions, tensors, operations, signature, custom,
                     dialect=self.dialect)

    @staticmethod
    def _update(op: Operation, variables: set[str], updated: set[str]) -> Update:
        """The `update` op checked: its target is a variable declared before it, updated once."""
        target = op.inputs["variable"]
        if not isinstance(target, Ref) or target.name not in variables:
            shown = target.name if isinstance(target, Ref) else target
            raise NNEFSemanticError(f"update: '{shown}' is not a variable", op.location)
        if target.name in updated:
            raise NNEFSemanticError(f"variable '{target.name}' is updated more than once", op.location)
        updated.add(target.name)
        value = op.inputs["value"]
        return Update(target.name, value.name if isinstance(value, Ref) else value, op.outputs["result"].name)

    # -- expressions --
    def evaluate(self, expr: ast.Expr, env: dict[str, Any], generic: ast.PrimitiveType | None,
                 hint: ast.Expr | None = None) -> Any:
        budget = self.budget
        budget.steps -= 1  # checked where work can repeat: each comprehension item, each fragment expansion
        self.nesting += 1
        try:
            if self.nesting > MAX_EVALUATION_DEPTH:
                raise self._too_deep(expr.loc)
            kind = type(expr)
            if kind is ast.Literal:
                return expr.value
            if kind is ast.Identifier:
                return env[expr.name]
            if kind is ast.Invocation:
                args = [(arg.name, self.evaluate(arg.value, env, generic), arg.loc) for arg in expr.args]
                explicit = generic if expr.generic is not None and expr.generic.name == "?" else expr.generic
                return self.invoke(expr.name, args, explicit, expr.loc, generic, hint)
            if kind is ast.ArrayExpr:
                if type(expr.items) is ast.NumberItems:
                    return budget.charge(expr.items.values(), expr.loc)
                if type(expr.items) is ast.NameItems:  # identifiers: the checker found each one assigned
                    budget.steps -= len(expr.items)
                    return budget.charge([env[name] for name in expr.items.names()], expr.loc)
                return budget.charge([self.evaluate(item, env, generic) for item in expr.items], expr.loc)
            if kind is ast.BinaryExpr or kind is ast.IndexExpr or kind is ast.RangeExpr:
                return self._chain(expr, env, generic)
            if kind is ast.TupleExpr:
                hints = hint.items if isinstance(hint, ast.TupleExpr) else [None] * len(expr.items)
                return tuple(self.evaluate(item, env, generic, h) for item, h in zip(expr.items, hints))
            if kind is ast.UnaryExpr:
                operand = self.evaluate(expr.operand, env, generic)
                if is_tensor_value(operand):
                    return self.invoke(UNARY_FRAGMENTS[expr.op], [(None, operand, expr.loc)], None, expr.loc,
                                       generic)
                return evaluate.unary(expr.op, operand, expr.loc)
            if kind is ast.IfElseExpr:
                chosen = expr.then if self.evaluate(expr.condition, env, generic) else expr.otherwise
                return self.evaluate(chosen, env, generic, hint)
            if kind is ast.Comprehension:
                return self._comprehension(expr, env, generic)
            value = self.evaluate(expr.arg, env, generic)  # a builtin
            if expr.name == "shape_of":
                return self._shape_of(value, expr.loc)
            return budget.charge(evaluate.builtin(expr.name, value, expr.loc), expr.loc)
        finally:
            self.nesting -= 1

    def _chain(self, expr: ast.BinaryExpr | ast.IndexExpr | ast.RangeExpr, env: dict[str, Any],
               generic: ast.PrimitiveType | None) -> Any:
        """Binary operators and subscripts, a left-deep chain of them folded in a loop (see `ast.unwind`)."""
        inner, links = ast.unwind(expr)
        value = self.evaluate(inner, env, generic)
        for link in links:
            self.budget.steps -= 1
            if type(link) is ast.IndexExpr:
                value = evaluate.index(value, self.evaluate(link.index, env, generic), link.index.loc)
            elif type(link) is ast.RangeExpr:
                start = self.evaluate(link.start, env, generic) if link.start is not None else None
                end = self.evaluate(link.end, env, generic) if link.end is not None else None
                value = self.budget.charge(evaluate.slice_range(value, start, end, link.loc), link.loc)
            elif link.op in ("&&", "||") and not is_tensor_value(value) and (value if link.op == "||" else not value):
                continue  # lazy on compile-time values: the left operand decides
            else:
                right = self.evaluate(link.right, env, generic)
                if link.op != "in" and (is_tensor_value(value) or is_tensor_value(right)):
                    args = [(None, value, link.left.loc), (None, right, link.right.loc)]
                    value = self.invoke(BINARY_FRAGMENTS[link.op], args, None, link.loc, generic)
                else:
                    value = self.budget.charge(evaluate.binary(link.op, value, right, link.loc), link.loc)
        return value

    def _comprehension(self, expr: ast.Comprehension, env: dict[str, Any], generic: ast.PrimitiveType | None) -> list:
        arrays = [(name, self.evaluate(array, env, generic), array.loc) for name, array in expr.iterators]
        length = len(arrays[0][1])
        for name, array, loc in arrays[1:]:
            if len(array) != length:
                raise NNEFSemanticError(f"comprehension iterates arrays of different lengths: '{arrays[0][0]}' has "
                                        f"{length} items, '{name}' has {len(array)}", loc)
        # the iterators are bound in `env` itself and the names they hide restored after: copying the scope for
        # each item would cost the size of the whole graph per item
        hidden = {name: env[name] for name, _, _ in arrays if name in env}
        budget = self.budget
        result: list[Any] = []
        try:
            for i in range(length):
                budget.steps -= 1
                budget.items -= 1
                if budget.steps < 0 or budget.items < 0:
                    raise budget.exhausted(self._where(expr.loc))
                for name, array, _ in arrays:
                    env[name] = array[i]
                if expr.condition is None or self.evaluate(expr.condition, env, generic):
                    result.append(self.evaluate(expr.body, env, generic))
        finally:
            for name, _, _ in arrays:
                env.pop(name, None)
            env.update(hidden)
        return result

    def _too_deep(self, loc: Location) -> NNEFSemanticError:
        if self.expanding:
            return NNEFSemanticError(f"expanding '{self.expanding[-1]}' nests too deeply: {len(self.expanding)} "
                                     f"fragment expansions and more than {MAX_EVALUATION_DEPTH} levels of "
                                     "expressions (unbounded recursion?)", self._where(loc))
        return NNEFSemanticError(f"expressions nest more than {MAX_EVALUATION_DEPTH} levels deep", self._where(loc))

    def _stack_exhausted(self, assignment: ast.Assignment) -> NNEFSemanticError:
        return NNEFSemanticError("this statement nests too deeply for the Python stack (call from a shallower stack "
                                 "or simplify the expression)", self._where(assignment.loc))

    def _where(self, loc: Location) -> Location | None:
        """`loc`, or the graph statement being lowered when `loc` is in library code (the standard fragments)."""
        return loc if loc.file == self._site_file() else self.site

    def _shape_of(self, value: Any, loc: Location) -> list[int]:
        if not isinstance(value, Ref):
            return []  # deprecated: a primitive has the singleton shape of rank 0
        shape = self.tensors[value.name].shape
        if shape is None:
            raise NNEFShapeError(f"shape_of('{value.name}') needs a known shape, but it follows a custom operation",
                                 loc)
        return list(shape)

    # -- invocations --
    def invoke(self, name: str, args: list[tuple[str | None, Any, Location]], explicit: ast.PrimitiveType | None,
               loc: Location, generic: ast.PrimitiveType | None, hint: ast.Expr | None = None) -> Any:
        self.budget.steps -= self.budget.INVOCATION_STEPS
        fragment = self.fragments[name]
        bound = bind_arguments(fragment, args, loc, self.deviations, lambda arg: not is_tensor_value(arg))
        # the argument types matter only for deducing a generic type
        typed = {key: (type_of(value, self.tensors), arg_loc) for key, (value, arg_loc) in bound.items()} \
            if fragment.generic and explicit is None else {}
        value_type = resolve_generic(fragment, typed, explicit, loc, inside_generic=True)
        values = {}
        for param in fragment.params:
            if param.name in bound:
                value, arg_loc = bound[param.name]
                if self.typing is not None and not T.contains_tensor(param.type):  # an attribute, as it reads it
                    value = self.typing.attribute(self, value, param, name, arg_loc)
                if isinstance(value, Ref) and not T.contains_tensor(param.type):
                    value = constant_value(self.producers, self.constants, value, param, name, arg_loc)
                elif isinstance(param.type, ast.ArrayType) and isinstance(value, (bool, int, float, str)):
                    value = [value]  # an item for an array attribute (a deviation the checker let through)
                values[param.name] = value
            else:
                values[param.name] = self.evaluate(param.default, {}, None)
        # a dialect op written as other ops, or a standard op as a dialect reads it (nnef_torch.formats.dialects)
        rule = self.relaxed.get(name) or registry.lowering_rule_of(name, self.dialect)
        if rule is not None:
            return rule(self, {key: plain(value) for key, value in values.items()}, value_type, loc, hint)
        if fragment.body is None or self.is_atomic(name):
            return self.emit(fragment, {key: plain(value) for key, value in values.items()}, value_type, loc, hint)
        for param in fragment.params:
            if T.contains_tensor(param.type):
                values[param.name] = as_tensor(values[param.name])
        return self.expand(fragment, values, value_type, loc, hint)

    def expand(self, fragment: ast.Fragment, values: dict[str, Any], value_type: ast.PrimitiveType | None,
               loc: Location, hint: ast.Expr | None) -> Any:
        if len(self.expanding) >= MAX_EXPANSION_DEPTH:
            raise NNEFSemanticError(f"expanding '{fragment.name}' nests more than {MAX_EXPANSION_DEPTH} levels "
                                    "deep (unbounded recursion?)", self._where(loc))
        if self.budget.steps < 0:
            raise self.budget.exhausted(self._where(loc))
        self.expanding.append(fragment.name)
        outer = self.scope
        self.expansions += 1
        self.scope = (*outer, f"{fragment.name}#{self.expansions}")
        try:
            env = dict(values)
            for assignment in fragment.body:
                try:
                    value = self.evaluate(assignment.rhs, env, value_type, hint=assignment.lhs)
                except RecursionError:
                    raise self._stack_exhausted(assignment) from None
                _bind_local(assignment.lhs, value, env)
        finally:
            self.expanding.pop()
            self.scope = outer
        results = [env[result.name] for result in fragment.results]
        return results[0] if len(results) == 1 else tuple(results)

    def emit(self, fragment: ast.Fragment, values: dict[str, Any], value_type: ast.PrimitiveType | None, loc: Location,
             hint: ast.Expr | None) -> Any:
        tensor_params, attribute_params = self._param_kinds(fragment)
        inputs = {name: values[name] for name in tensor_params}
        attribs = {name: values[name] for name in attribute_params}
        location = loc if loc.file == self._site_file() else self.site
        for name, value in inputs.items():  # as many as it may return: `[x, x, ...]` costs more than its text
            if isinstance(value, list) and len(value) > MAX_RESULTS:
                raise NNEFShapeError(f"{fragment.name}: '{name}' holds {len(value):,} tensors, more than the limit of "
                                     f"{MAX_RESULTS:,} tensors an operation takes as an array", location)
        if fragment.name == "external" and isinstance(hint, ast.Identifier):
            attribs["shape"] = self._declared_shape(hint.name, attribs["shape"], loc)
        lenient_rule = None
        if fragment.name in ("split", "matmul"):
            found = op_deviation(fragment.name, [self._input_shape(value) for value in inputs.values()], attribs)
            if found is not None:
                self.deviations.bend(*found, location, NNEFShapeError)
                lenient_rule = found[0]
        shapes = self._infer(fragment, inputs, attribs, location, lenient_rule)
        result_hints = [hint] if len(fragment.results) == 1 else (
            list(hint.items) if isinstance(hint, ast.TupleExpr) else [None] * len(fragment.results))
        outputs = {}
        for i, result in enumerate(fragment.results):
            result_type = T.substitute(result.type, value_type)
            shape = shapes[i] if shapes is not None else None
            outputs[result.name] = self._new_outputs(fragment.name, result_type, shape, result_hints[i], location)
        dtype = value_type.name if value_type is not None else None
        self.operations.append(Operation(fragment.name, inputs, attribs, outputs, dtype, location, self.scope))
        results = list(outputs.values())
        return results[0] if len(results) == 1 else tuple(results)

    def _param_kinds(self, fragment: ast.Fragment) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The names of `fragment`'s tensor parameters (inputs) and of the others (attributes)."""
        kinds = self.param_kinds.get(fragment.name)
        if kinds is None:
            kinds = self.param_kinds[fragment.name] = (
                tuple(p.name for p in fragment.params if T.contains_tensor(p.type)),
                tuple(p.name for p in fragment.params if not T.contains_tensor(p.type)))
        return kinds

    def _declared_shape(self, name: str, shape: Any, loc: Location) -> Any:
        """The shape of the external `name`: as `input_shapes` gives it, or with `batch_size` along its batch
        axis, or as declared."""
        if name in self.input_shapes:
            return list(self.input_shapes[name])
        if self.batch_size is None or not isinstance(shape, list):
            return shape
        axis = self.batch_axes.get(name, 0)
        if axis is None:  # an input without a batch axis
            return shape
        if not -len(shape) <= axis < len(shape):
            raise NNEFOptionError(f"input '{name}' has shape {shape}, which has no batch axis {axis}"
                                  + ("" if name in self.batch_axes else " (batch_axes= names another axis)"), loc)
        resized = list(shape)
        resized[axis] = self.batch_size
        return resized

    def _site_file(self) -> str | None:
        return self.site.file if self.site is not None else None

    def _new_outputs(self, op: str, result_type: T.AnyType, shape: Any, hint: ast.Expr | None, loc: Location) -> Any:
        if isinstance(result_type, ast.ArrayType):
            count = len(shape) if isinstance(shape, list) else None
            if isinstance(hint, ast.ArrayExpr):
                if count is not None and count != len(hint.items):
                    raise NNEFShapeError(f"'{op}' gives {count} results but {len(hint.items)} names receive them",
                                         hint.loc)
                count = len(hint.items)
            if count is None:
                raise NNEFSemanticError(f"cannot tell how many tensors '{op}' returns; assign its result to an "
                                        "array of names", loc)
            item_shapes = shape if isinstance(shape, list) else [None] * count
            return [self._new_tensor(op, result_type.item, item_shape) for item_shape in item_shapes]
        return self._new_tensor(op, result_type, shape)

    def _new_tensor(self, op: str, result_type: T.AnyType, shape: Any) -> Ref:
        self.counter += 1
        name = f"{op}_{self.counter}"
        while name in self.reserved or name in self.tensors:
            self.counter += 1
            name = f"{op}_{self.counter}"
        self.tensors[name] = Tensor(name, T.tensor_dtype(result_type), tuple(shape) if shape is not None else None)
        self.fresh.add(name)
        return Ref(name)

    def _infer(self, fragment: ast.Fragment, inputs: dict, attribs: dict, loc: Location | None,
               lenient_rule: str | None = None):
        """Result shapes (one entry per result) from the shape rule (the lenient one of a deviation read), or
        None when they cannot be known."""
        rule = self.custom_shapes.get(fragment.name) or (lenient_shape(lenient_rule) if lenient_rule else None)
        if rule is None:
            entry = registry.entry(fragment.name, dialect=self.dialect)
            rule = entry.shape if entry is not None else None
        if rule is None:
            return None
        shapes = [self._input_shape(value) for value in inputs.values()]
        if any(_has_unknown(shape) for shape in shapes):
            return None
        try:
            result = rule(*shapes, **{python_name(key): value for key, value in attribs.items()})
        except NNEFError as error:
            if error.location is None:
                error.location = loc
            raise
        except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError) as error:
            raise NNEFShapeError(f"{fragment.name}: invalid arguments ({error})", loc) from error
        results = [result] if len(fragment.results) == 1 else list(result)
        _check_extents(fragment.name, results, loc)
        return results

    def _input_shape(self, value: Any):
        if isinstance(value, Ref):
            return self.tensors[value.name].shape
        if isinstance(value, list):
            return [self._input_shape(item) for item in value]
        return ()


def python_name(name: str) -> str:
    """Attribute names that are Python keywords (selu's `lambda`) reach Python functions with a trailing `_`."""
    return name + "_" if keyword.iskeyword(name) else name


def _check_extents(op: str, shapes: list[Any], loc: Location | None) -> None:
    """Every extent, and the volume, of a result fits a signed 64-bit integer (as the literals that made it)."""
    for shape in shapes:
        if isinstance(shape, list):
            _check_extents(op, shape[:1] if len(set(map(id, shape))) == 1 else shape, loc)
            continue
        if shape is None:
            continue
        volume = 1
        for extent in shape:
            volume *= extent
        if volume > MAX_INTEGER or any(extent > MAX_INTEGER for extent in shape):
            shown = "[" + ",".join(str(e) if e <= MAX_INTEGER else f"~2^{e.bit_length() - 1}" for e in shape) + "]"
            what = "an extent" if any(extent > MAX_INTEGER for extent in shape) else "a volume"
            raise NNEFShapeError(f"{op}: result shape {shown} has {what} beyond 2^63 - 1", loc)


def _has_unknown(shape: Any) -> bool:
    return shape is None or isinstance(shape, list) and any(_has_unknown(item) for item in shape)


def _bind_local(lhs: ast.Expr, value: Any, env: dict[str, Any]) -> None:
    if isinstance(lhs, ast.Identifier):
        env[lhs.name] = value
        return
    if not isinstance(value, (list, tuple)) or len(value) != len(lhs.items):
        count = len(value) if isinstance(value, (list, tuple)) else 1
        raise NNEFSemanticError(f"the right-hand side gives {count} values for {len(lhs.items)} names", lhs.loc)
    for item, item_value in zip(lhs.items, value):
        _bind_local(item, item_value, env)


def _lhs_names(lhs: ast.Expr) -> list[str]:
    if isinstance(lhs, ast.Identifier):
        return [lhs.name]
    return [name for item in lhs.items for name in _lhs_names(item)]


def _check_label(variable: Variable, labels: dict[str, Variable], loc: Location | None) -> None:
    """Variables with one label (ignoring case) share their data: shapes and types must agree. (The label itself
    is argument validity of `variable`, checked by its shape rule.)"""
    first = labels.setdefault(variable.key, variable)
    if first is not variable and (first.shape != variable.shape or first.dtype != variable.dtype):
        raise NNEFShapeError(f"variables '{first.name}' and '{variable.name}' share label '{variable.label}' but "
                             f"have shapes {list(first.shape)} and {list(variable.shape)}"
                             + ("" if first.dtype == variable.dtype else f" and types {first.dtype}, {variable.dtype}"),
                             loc)


@gc_paused
def lower(doc: ast.Document, *, atomic: Atomic = None, custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
          input_shapes: Mapping[str, Any] | None = None, text: str | None = None, batch_size: int | None = None,
          batch_axes: Mapping[str, int | None] | None = None, lenient: bool = False,
          constants: Constants = None, dialect: Dialect | None = None, source_length: int = 0) -> Graph:
    """Check `doc` and flatten it into an IR graph.

    atomic: which operations stay whole (names, or a predicate); by default the standard operations. Fragments
    without a body always stay whole. custom_shapes: shape rules for custom operations (NNEF signature, as in
    `nnef_torch.ops.registry.shape_rule`). input_shapes: replaces the shapes of `external`s by graph input name.
    batch_size: the extent of the batch axis of every `external` that `input_shapes` does not name; that axis is
    0, or the one `batch_axes` gives by input name (None: the input has no batch axis).
    text: the source, for error messages with the offending line (source_length: its length, for a document
    held without its text, which bounds the arrays the document may compute). lenient: read what real producers write
    against the spec (`nnef_torch.ir.deviations`), with an `NNEFDeviationWarning` each; else each is an error.
    constants: the data of a variable, for a constant tensor passed as an attribute (a lenient reading).
    dialect: the fragment declarations a dialect adds and its lowering rules of standard ops (`reader.read_graph`
    gets them from `nnef_torch.formats.dialects.apply_dialects`); None for standard NNEF. The op table the
    operations are looked up in is chosen by the document's extension lines (`registry.dialect_of`), and the
    graph records it (`Graph.dialect`): a standard document never sees a dialect's ops; so is the dialect's reading
    of types and attributes, if it has one (`registry.typing_of`, used by the checker and the lowerer).
    """
    standard = standard_fragments()
    deviations = Deviations(lenient)
    try:
        if doc.graph is None:
            raise NNEFSemanticError("the document has no graph", doc.loc)
        declared, relaxed = dialect or ({}, {})
        fragments = {**standard, **declared}
        redefined = set()
        for fragment in doc.fragments:
            if fragment.name in standard and fragment.name not in redefined:
                deviations.bend("redefined-standard-op", f"fragment '{fragment.name}' redefines a standard "
                                "operation", fragment.loc)
                redefined.add(fragment.name)
            elif fragment.name in fragments:
                raise NNEFSemanticError(f"fragment '{fragment.name}' is defined twice", fragment.loc)
            fragments[fragment.name] = fragment
        if lenient and "erf" not in fragments:
            fragments["erf"] = ERF
        dialect_name = registry.dialect_of(doc.extensions)
        typing = registry.typing_of(dialect_name)
        check_document(doc, fragments, deviations, typing)
        check_batch(batch_size, batch_axes)
        redefined = {name for name in redefined if fragments[name].body is not None}
        lowerer = Lowerer(fragments, frozenset(standard) - redefined, atomic, custom_shapes, input_shapes,
                          batch_size, batch_axes, deviations, constants)
        lowerer.relaxed, lowerer.dialect, lowerer.typing = relaxed, dialect_name, typing
        if redefined:  # the document's definition is expanded, whatever the caller keeps whole
            keep = lowerer.is_atomic
            lowerer.is_atomic = lambda name: name not in redefined and keep(name)
        graph = lowerer.lower_graph(doc, len(text) if text is not None else source_length)
        return dataclasses.replace(graph, deviations=deviations.rules()) if deviations.found else graph
    except NNEFError as error:
        raise error.with_source(text, doc.loc.file) from None


def check_batch(batch_size: Any, batch_axes: Mapping[str, Any] | None) -> None:
    """`batch_size` is a positive integer or None; `batch_axes` maps input names to integer axes (None: the input
    has none), and needs a batch size."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise NNEFOptionError(f"batch_size must be a positive integer, not {batch_size!r}")
    if batch_axes:
        if batch_size is None:
            raise NNEFOptionError("batch_axes= says where the batch axis of each input is: it needs batch_size=")
        bad = {name: axis for name, axis in batch_axes.items()
               if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int))}
        if bad:
            raise NNEFOptionError(f"batch_axes maps input names to integer axes (or None: no batch axis), found {bad}")
