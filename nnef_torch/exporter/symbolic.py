"""Symbolic dimensions: the extents torch.export keeps symbolic (`dynamic_shapes=`), carried through the export.

torch.export traces the module once with a symbol for every dynamic extent, and records on each node the shape of
its result as expressions over those symbols (`[B, 4*S, 64]`), with the symbols' ranges and their values at the
example inputs. `Symbols` captures all of it before the conversion starts: the IR is built at the example extents,
and the export rules that must write an attribute relative to the input (`reshape`, `slice`, `tile`) ask for the
expressions. An integer the program computes from extents (`x.shape[1]`, `b * 4`) is a `SymValue`.

Afterwards `verify` reads the written graph at other values of the symbols (all changed at once, so the cost does
not grow with their number) and compares every tensor with the shape torch's expressions give there: an attribute
that still holds an example extent is found there, named with the operation and the user's source line.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sympy
import torch

from nnef_torch.errors import ExportError, NNEFError
from nnef_torch.exporter.emitter import Unmappable
from nnef_torch.exporter.problems import Problem, node_problem
from nnef_torch.format.parser import parse_document
from nnef_torch.formats.dialects import apply_dialects
from nnef_torch.ir.document import graph_file
from nnef_torch.ir.graph import Graph, Operation
from nnef_torch.ir.lower import lower

# the export rules that take extents computed from symbols (`SymValue`s) and write them relative to the inputs;
# any other rule given one refuses it, naming the extent
SYMBOLIC_RULES = frozenset({"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
                            "aten.flatten.using_ints", "aten.unflatten.int", "aten.slice.Tensor", "aten.expand.default",
                            "aten.expand_copy.default"})
# the rules that, for the tract target, write an extent read as a number as an expression of the symbols
TRACT_RULES = frozenset({"aten.arange.default", "aten.arange.start", "aten.arange.start_step", "aten.full.default",
                         "aten.zeros.default", "aten.ones.default", "aten.new_zeros.default", "aten.new_ones.default",
                         "aten.new_full.default"})
# the elementwise rules that, for the tract target, read an extent as a number from a tensor made of it
TRACT_OPERANDS = frozenset(f"aten.{name}.{form}" for name in ("add", "sub", "rsub", "mul", "lt", "le", "gt", "ge",
                                                              "eq", "ne", "remainder", "floor_divide")
                           for form in ("Tensor", "Scalar"))
TRIES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # offsets from the example for the other values


@dataclasses.dataclass(frozen=True)
class SymValue:
    """An integer the traced program computes from input extents: its expression over the symbols and its value
    at the example inputs. It is no Python int, so that a rule cannot write it as a number by mistake."""

    expr: sympy.Expr
    example: int


class Symbols:
    """The symbols of one trace (by sympy symbol: the user's name, range and example value) and the symbolic shape
    of every node's result, captured before any rule runs (a rule reading `int(extent)` makes torch specialize)."""

    def __init__(self, program: torch.export.ExportedProgram, names: Mapping[str, str] | None = None):
        self.ranges: dict[sympy.Symbol, tuple[int, int | None]] = {}
        for symbol, bounds in program.range_constraints.items():
            if isinstance(symbol, sympy.Symbol):
                upper = int(bounds.upper) if bounds.upper.is_Integer else None  # int_oo: unbounded
                self.ranges[symbol] = (max(int(bounds.lower), 0), upper)
        self.examples: dict[sympy.Symbol, int] = {}
        self.names: dict[sympy.Symbol, str] = {}
        self.shapes: dict[str, Any] = {}  # node name -> shape (a list of extents) or several, or a SymValue
        self.origins: dict[str, str] = {}  # tensor name -> node name, where a tensor is named after its module
        self._env: Any = None
        for node in program.graph.nodes:
            self.shapes[node.name] = self._capture(node.meta.get("val"))
        equal = self._equalities()
        if equal:
            self.shapes = {name: _substituted(captured, equal) for name, captured in self.shapes.items()}
        used: set[sympy.Symbol] = set()  # torch keeps a symbol per input axis, replaced by one where they are equal
        for captured in self.shapes.values():
            used |= _symbols_in(captured)
        self.ranges = {symbol: bounds for symbol, bounds in self.ranges.items() if symbol in used}
        given = dict(names or {})
        taken: set[str] = set()
        for symbol in sorted(self.ranges, key=str):
            name = given.get(str(symbol), str(symbol).upper())
            while name in taken:
                name += "_"
            taken.add(name)
            self.names[symbol] = name

    def _capture(self, value: Any) -> Any:
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self._value(value) if value.node.hint is not None else None  # no hint: data-dependent
        if isinstance(value, torch.Tensor):
            if any(isinstance(d, torch.SymInt) and d.node.hint is None for d in value.shape):
                return None  # a data-dependent extent: refused as without symbols
            return [self._extent(d) for d in value.shape]
        if isinstance(value, (tuple, list)):
            return [self._capture(item) for item in value]
        return None

    def _equalities(self) -> dict[sympy.Symbol, sympy.Symbol]:
        """Symbols torch proved equal without replacing one by the other (a guard `Eq(P' + S, S + P)` where one
        Dim is on two inputs): each mapped to the first of its class."""
        if self._env is None:
            return {}
        found: dict[sympy.Symbol, sympy.Symbol] = {}
        for guard in getattr(self._env, "guards", ()):
            expr = getattr(guard, "expr", None)
            if not isinstance(expr, sympy.Eq):
                continue
            difference = sympy.expand(expr.lhs - expr.rhs)
            symbols = sorted(difference.free_symbols, key=str)
            if len(symbols) == 2 and all(abs(difference.coeff(s)) == 1 for s in symbols) and \
                    sympy.expand(difference - sum(difference.coeff(s) * s for s in symbols)) == 0 and \
                    difference.coeff(symbols[0]) == -difference.coeff(symbols[1]):
                keep, drop = (found.get(symbols[0], symbols[0]), symbols[1])
                found[drop] = keep
        return found

    def _extent(self, d: Any) -> Any:
        if not isinstance(d, torch.SymInt):
            return int(d)
        value = self._value(d)
        return value.example if value.expr.is_number else value.expr

    def _value(self, d: torch.SymInt | torch.SymFloat | torch.SymBool) -> SymValue:
        expr = sympy.sympify(d.node.expr)
        env = d.node.shape_env
        self._env = self._env or env
        if env is not None and hasattr(env, "replace"):  # symbols torch found equal (one Dim on several axes)
            expr = sympy.sympify(env.replace(expr))
        kind = int if isinstance(d, torch.SymInt) else float if isinstance(d, torch.SymFloat) else bool
        example = kind(d.node.hint)
        for symbol in expr.free_symbols:
            if symbol not in self.examples and d.node.shape_env is not None:
                env = d.node.shape_env
                hint = getattr(env, "backed_var_to_val", None) or env.var_to_val
                hint = hint.get(symbol)
                if hint is not None:
                    self.examples[symbol] = int(hint)
        return SymValue(expr, example)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    # -- expressions --
    def shape(self, node: torch.fx.Node | None) -> list[Any] | None:
        """The symbolic shape of a tensor node's result (extents are ints or sympy expressions)."""
        if not isinstance(node, torch.fx.Node):
            return None
        found = self.shapes.get(node.name)
        return found if isinstance(found, list) and all(not isinstance(d, list) for d in found) else None

    def known(self, extents: Iterable[Any]) -> bool:
        """Whether every symbol in `extents` is an input's symbol (not one for a data-dependent size)."""
        return all(symbol in self.ranges for d in extents if isinstance(d, sympy.Expr) for symbol in d.free_symbols)

    def show(self, expr: Any) -> str:
        """An extent as the user names it: `4*S`, `B`."""
        if isinstance(expr, SymValue):
            expr = expr.expr
        if not isinstance(expr, sympy.Expr):
            return str(expr)
        return str(expr.xreplace({symbol: sympy.Symbol(self.names.get(symbol, str(symbol)))
                                  for symbol in expr.free_symbols}))

    def value(self, expr: Any, values: Mapping[sympy.Symbol, int]) -> int:
        if isinstance(expr, SymValue):
            expr = expr.expr
        if isinstance(expr, sympy.Expr):
            return int(expr.xreplace(dict(values)))
        return int(expr)

    def alternatives(self, count: int = 2) -> list[dict[sympy.Symbol, int]]:
        """`count` other assignments of every symbol, each within its range and different from its example value
        and from the other symbols' values where the ranges allow."""
        chosen: list[dict[sympy.Symbol, int]] = []
        for round_ in range(count):
            values: dict[sympy.Symbol, int] = {}
            taken = set(self.examples.values())
            for symbol in sorted(self.ranges, key=str):
                low, high = self.ranges[symbol]
                example = self.examples.get(symbol, low)
                candidates = [example + offset for offset in TRIES[round_:]] + \
                             [example - offset for offset in TRIES[round_:] if example - offset >= low]
                fits = [v for v in candidates if v >= low and (high is None or v <= high) and v != example]
                fresh = [v for v in fits if v not in taken and v not in values.values()]
                values[symbol] = (fresh or fits or [example])[0]
                taken.add(values[symbol])
            chosen.append(values)
        return chosen


def _substituted(captured: Any, equal: Mapping[sympy.Symbol, sympy.Symbol]) -> Any:
    if isinstance(captured, SymValue):
        return SymValue(captured.expr.xreplace(dict(equal)), captured.example)
    if isinstance(captured, sympy.Expr):
        return captured.xreplace(dict(equal))
    if isinstance(captured, list):
        return [_substituted(item, equal) for item in captured]
    return captured


def _symbols_in(captured: Any) -> set[sympy.Symbol]:
    if isinstance(captured, SymValue):
        return set(captured.expr.free_symbols)
    if isinstance(captured, sympy.Expr):
        return set(captured.free_symbols)
    if isinstance(captured, list):
        return set().union(*(_symbols_in(item) for item in captured)) if captured else set()
    return set()


def names_from_spec(program: torch.export.ExportedProgram, dynamic_shapes: Any,
                    example_inputs: Sequence[Any]) -> dict[str, str]:
    """The user's name of each symbol (sympy name -> `Dim` name), read off the spec given to torch.export."""
    specs = _per_input(dynamic_shapes, len(example_inputs))
    placeholders = [node for node in program.graph.nodes if node.op == "placeholder"
                    and node.name in {spec.arg.name for spec in program.graph_signature.input_specs
                                      if spec.kind.name == "USER_INPUT"}]
    names: dict[str, str] = {}
    for node, spec in zip(placeholders, specs):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or spec is None:
            continue
        items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
        for axis, dim in items:
            if dim is None or not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                continue
            extent = value.shape[axis]
            if not isinstance(extent, torch.SymInt):
                continue
            root = getattr(dim, "root", dim)
            name = getattr(root, "__name__", None)
            for symbol in sympy.sympify(extent.node.expr).free_symbols:
                if name and name.isidentifier() and str(symbol) not in names:
                    names[str(symbol)] = name
    return names


def _per_input(dynamic_shapes: Any, count: int) -> list[Any]:
    """One spec per flat input: a `*args` parameter's specs come as one tuple, which is spread."""
    if dynamic_shapes is None:
        return [None] * count
    specs = list(dynamic_shapes.values()) if isinstance(dynamic_shapes, Mapping) else list(dynamic_shapes)
    flat: list[Any] = []
    for spec in specs:
        spread = isinstance(spec, (tuple, list)) and any(isinstance(s, Mapping) or s is None for s in spec)
        flat.extend(spec if spread else [spec])
    return flat[:count] + [None] * max(0, count - len(flat))


def verify(graph: Graph, fragments: Sequence[str], symbols: Symbols, program: torch.export.ExportedProgram,
           name: str) -> None:
    """Read `graph` (standard NNEF) at other values of the symbols and check every traced tensor's shape against
    torch's expressions there; raises ExportError naming the first operation that holds an example extent."""
    document = graph_file(graph, fragments, file=f"{name} (symbolic)")
    body = document.document.graph.body
    first_line = body[0].loc.line if body else 0

    def read(inputs: Mapping[str, tuple[int, ...]]) -> Graph:
        return lower(document.document, input_shapes=inputs, lenient=True, source_length=document.size)
    _check(graph, symbols, program, name, read, first_line)


def verify_text(text: str, graph: Graph, symbols: Symbols, program: torch.export.ExportedProgram, name: str) -> None:
    """`verify` for the tract target's text, read as nnef_torch reads tract's dialect (its symbols bound by the
    inputs' shapes): what is written for tract reads back."""
    file = f"{name} (tract)"
    doc = parse_document(text, file)
    body = doc.graph.body if doc.graph is not None else ()
    first_line = body[0].loc.line if body else 0

    def read(inputs: Mapping[str, tuple[int, ...]]) -> Graph:
        bound, declared, relaxed = apply_dialects(doc, inputs)
        return lower(bound, input_shapes=inputs, text=text, dialect=(declared, relaxed))
    _check(graph, symbols, program, name, read, first_line)


def _check(graph: Graph, symbols: Symbols, program: torch.export.ExportedProgram, name: str,
           read: Callable[[Mapping[str, tuple[int, ...]]], Graph], first_line: int) -> None:
    nodes = {node.name: node for node in program.graph.nodes}
    nodes.update({tensor: nodes[node] for tensor, node in symbols.origins.items() if node in nodes})
    for values in symbols.alternatives():
        inputs = {}
        for external in graph.signature.externals:
            shape = symbols.shape(nodes.get(external.name))
            if shape is not None:
                inputs[external.name] = tuple(symbols.value(d, values) for d in shape)
        shown = ", ".join(f"{symbols.names[s]}={v}" for s, v in values.items())
        try:
            read_back = read(inputs)
        except NNEFError as error:
            line = error.location.line if error.location is not None else None
            index = line - first_line if line is not None else -1
            op = graph.operations[index] if 0 <= index < len(graph.operations) else None
            raise ExportError(f"{name} cannot be exported with symbolic dimensions: the graph does not read at "
                              f"{shown}:", [_problem(op, nodes, error.message)]) from None
        for op in graph.operations:
            if op.name in ("external", "variable"):
                continue
            for ref in op.output_refs():
                expected = symbols.shape(nodes.get(ref.name))
                found = read_back.tensors.get(ref.name)
                if expected is None or found is None or found.shape is None or not symbols.known(expected):
                    continue
                want = tuple(symbols.value(d, values) for d in expected)
                if tuple(found.shape) != want:
                    symbolic = ", ".join(symbols.show(d) for d in expected)
                    raise ExportError(f"{name} cannot be exported with symbolic dimensions:", [_problem(
                        op, nodes, f"'{ref.name}' has shape {list(found.shape)} at {shown} where torch computes "
                        f"{list(want)} ([{symbolic}]): an attribute holds an extent of the example inputs")])


def _problem(op: Operation | None, nodes: Mapping[str, torch.fx.Node], reason: str) -> Problem:
    node = None
    if op is not None:
        outputs = [ref.name for ref in op.output_refs()]
        candidates = [n for n in nodes.values() if any(out == n.name or out.startswith(n.name + "_")
                                                      for out in outputs)]
        node = max(candidates, key=lambda n: len(n.name)) if candidates else None
    if node is None:
        where = f" (writing '{next(op.output_refs()).name}')" if op is not None else ""
        return Problem(reason + where)
    return node_problem(node, reason)


def reshape_steps(source: Sequence[Any], target: Sequence[Any], examples: Mapping[sympy.Symbol, int],
                  show: Any = str) -> list[tuple[int, int, list[int]]]:
    """The reshapes (axis_start, axis_count, shape), applied in turn, that turn a tensor of extents `source` into
    `target` at every value of the symbols: the axes are matched in groups of equal products; a group that changes
    is reshaped on its own, its one symbolic extent (if any) written -1. Raises Unmappable where a group would
    need two symbolic extents (`[B*S] -> [B, S]`)."""
    def example(d: Any) -> int:
        return int(d.xreplace(dict(examples))) if isinstance(d, sympy.Expr) else int(d)

    def same(a: Any, b: Any) -> bool:
        return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0

    groups: list[list[int]] = []  # [source start, source end, target start, target end]
    i = j = 0
    while i < len(source) or j < len(target):
        i0, j0 = i, j
        product_s, product_t, example_s, example_t = sympy.Integer(1), sympy.Integer(1), 1, 1
        if i < len(source):
            product_s, example_s, i = product_s * source[i], example_s * example(source[i]), i + 1
        if j < len(target):
            product_t, example_t, j = product_t * target[j], example_t * example(target[j]), j + 1
        while not (example_s == example_t and same(product_s, product_t)):
            if (example_s <= example_t or j == len(target)) and i < len(source):
                product_s, example_s, i = product_s * source[i], example_s * example(source[i]), i + 1
            elif j < len(target):
                product_t, example_t, j = product_t * target[j], example_t * example(target[j]), j + 1
            else:
                raise Unmappable(f"the extents [{', '.join(map(show, source))}] and "
                                 f"[{', '.join(map(show, target))}] hold different numbers of items")
        if groups and (i0 == i or j0 == j):  # only axes of extent 1 on one side: part of the group before
            groups[-1][1], groups[-1][3] = i, j
        else:
            groups.append([i0, i, j0, j])
    steps = []
    for i0, i1, j0, j1 in reversed(groups):  # the last group first: earlier axes keep their positions
        part_s, part_t = list(source[i0:i1]), list(target[j0:j1])
        if len(part_s) == len(part_t) and all(same(a, b) for a, b in zip(part_s, part_t)):
            continue
        symbolic = [k for k, d in enumerate(part_t) if isinstance(d, sympy.Expr) and d.free_symbols]
        if len(symbolic) > 1:
            raise Unmappable(f"reshaping [{', '.join(map(show, part_s))}] into [{', '.join(map(show, part_t))}] "
                             "needs the input's symbolic extents, which standard NNEF cannot read (a reshape "
                             "infers one extent only): export with target='tract', or keep one of them static")
        shape = [-1 if k in symbolic else example(d) for k, d in enumerate(part_t)]
        steps.append((i0, i1 - i0, shape))
    return steps


def refusal(symbols: Symbols, value: SymValue, what: str, target: str = "standard") -> str:
    """Why an operation that reads an extent as a number has no form in the target."""
    if target == "tract":
        return (f"{what} reads the extent {symbols.show(value)} as a number, which nnef_torch's tract target does "
                "not write for this operation yet (it does for arange, full/zeros/ones, reshape, slice, expand): "
                "keep this extent static, or compute it from a tensor")
    return (f"{what} reads the extent {symbols.show(value)} as a number; standard NNEF has no operation that "
            "reads an extent (its shapes are fixed where the graph is read): export with target='tract', which "
            "can write it, or keep this extent static")


__all__ = ["SYMBOLIC_RULES", "TRACT_OPERANDS", "TRACT_RULES", "SymValue", "Symbols", "names_from_spec", "refusal",
           "verify", "verify_text"]
