"""The one way to build IR: `Builder.op` appends an NNEF operation checked against its declaration.

Export rules (torch -> NNEF, through `exporter.emitter.Emitter`, a Builder) and front-end rules (NNVM, MXNet, ... ->
NNEF) write operations the same way. Tensor inputs are bound in order, attributes get their declared defaults, and
result shapes come from the op table's shape rules, so a rule that writes an invalid operation fails at once, with
the op in question. Operations that have no standard NNEF form are fragments of a library (`fragment_library`):
using one records its definition, and the document written from the graph defines it.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from nnef_torch.format import ast
from nnef_torch.format.parser import parse_fragments
from nnef_torch.ir.checker import check_library
from nnef_torch.ir.graph import External, Graph, Operation, Ref, Signature, Tensor, Update, Variable
from nnef_torch.ir.values import Extent, plain
from nnef_torch.ops.registry import entry
from nnef_torch.stdlib import standard_fragments

KEYWORDS = {"version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical", "string", "true",
            "false", "for", "in", "if", "else", "yield", "length_of", "shape_of", "range_of"}
FLOAT_MAX = 3.4028234663852886e38  # NNEF has no literal for infinity; float32's largest value stands in for it

Library = Mapping[str, ast.Fragment]  # fragments a builder may use beyond the standard ones, by name


class Unmappable(Exception):
    """A rule cannot write these arguments exactly in NNEF; the message says why."""


@cache
def fragment_library(package: str, filename: str, *extends: tuple[str, str]) -> dict[str, ast.Fragment]:
    """The fragments defined in the data file `filename` of `package`, checked, by name. Their bodies may use the
    standard operations and the fragments of the libraries `extends` ((package, filename) pairs)."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    fragments = parse_fragments(text, filename)
    standard = standard_fragments()
    base: dict[str, ast.Fragment] = {}
    for other in extends:
        base.update(fragment_library(*other))
    clash = [fragment.name for fragment in fragments if fragment.name in standard or fragment.name in base]
    assert not clash, f"{filename} redefines operations {clash}"
    table = {**standard, **base, **{fragment.name: fragment for fragment in fragments}}
    check_library(fragments, table)
    return {**base, **{fragment.name: fragment for fragment in fragments}}


def identifier(base: str, max_length: int | None = None) -> str:
    """`base` (a name from any source) as an identifier: characters other than ASCII letters, digits and
    underscores become underscores, and a leading digit gets a 't_' prefix."""
    base = "".join(c if c.isascii() and c.isalnum() or c == "_" else "_" for c in base)[:max_length] or "t"
    return base if base[0].isalpha() or base[0] == "_" else "t_" + base


def unique_identifier(base: str, used: set[str], reserved: Collection[str] = (), own: bool = False,
                      max_length: int | None = None, counters: dict[str, int] | None = None) -> str:
    """An identifier made from `base` (ASCII letters, digits and underscores, not starting with a digit) that is
    not in `used`, nor in `reserved` unless `own` (the base is reserved for the caller); it is added to `used`.
    `counters` (kept by the caller across calls) remembers the last suffix taken for each base, so that naming n
    tensors after one base takes linear time, not quadratic."""
    base = identifier(base, max_length)
    name, counter = base, 0
    if name in used or (name in reserved and not own):
        counter = counters.get(base, 0) if counters is not None else 0  # the suffixes up to it are taken
        name = f"{base}_{counter}"
        while name in used or name in reserved or counter == 0:
            counter += 1
            name = f"{base}_{counter}"
        if counters is not None:
            counters[base] = counter
    used.add(name)
    return name


def default_value(expr: ast.Expr) -> Any:
    """The value of a declared default (a literal, or arrays and tuples of them)."""
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.UnaryExpr) and expr.op == "-":
        return -default_value(expr.operand)
    if isinstance(expr, ast.ArrayExpr):
        return [default_value(item) for item in expr.items]
    if isinstance(expr, ast.TupleExpr):
        return tuple(default_value(item) for item in expr.items)
    raise AssertionError(f"unexpected default {expr!r}")


def is_tensor_param(type_: ast.Type) -> bool:
    return isinstance(type_, ast.TensorType) or (isinstance(type_, ast.ArrayType) and is_tensor_param(type_.item))


def _item(type_: ast.Type) -> str | None:
    while isinstance(type_, ast.ArrayType):
        type_ = type_.item
    if isinstance(type_, ast.TensorType) and type_.item is not None:
        return type_.item.name
    return None


def literal(value: Any, nnef_dtype: str | None) -> Any:
    """A Python number as the NNEF literal of a tensor of `nnef_dtype` (integers become scalars where needed)."""
    if isinstance(value, bool) or nnef_dtype == "logical":
        return bool(value)
    if nnef_dtype == "integer":
        return int(value)
    value = float(value)
    if math.isinf(value):
        return math.copysign(FLOAT_MAX, value)
    if math.isnan(value):
        raise Unmappable("NNEF has no literal for NaN")
    return value


class Builder:
    """Builds one IR graph: tensors with shapes and types, operations, and the externals / variables / updates.

    `library`: the fragments this graph may use beyond the standard operations. `reserved`: names kept for their
    own tensors (a result named with `out_name=` one of them gets it). `prefix` is the start of the names of the
    tensors written next (the source node being converted).
    """

    def __init__(self, library: Library | None = None, reserved: Sequence[str] = ()):
        self.library: Library = library or {}
        self.tensors: dict[str, Tensor] = {}
        self.operations: list[Operation] = []
        self.externals: list[External] = []
        self.variables: list[Variable] = []
        self.updates: list[Update] = []
        self.data: dict[str, Any] = {}  # variable label -> its values (an array or a tensor)
        self.fragments: list[str] = []  # library fragments used, in first-use order (each after those it uses)
        self.prefix: str | None = None
        self.created: set[str] = set()  # tensors written since `begin`
        self._renamed: dict[str, Ref] = {}  # applied to the operations once, when the graph is finished
        self._used = set(KEYWORDS) | set(standard_fragments()) | set(self.library)
        self._reserved = set(reserved)
        self._counters: dict[str, int] = {}  # the last suffix `fresh` gave each base
        # graph.quant entries by tensor name (QuantSpec); they follow renames and dead-code elimination
        self.quantization: dict[str, Any] = {}

    # ----------------------------------------------------------------------------------------- names and types
    def begin(self, prefix: str | None) -> None:
        """Start writing the operations of one source node, whose tensors are named after `prefix`."""
        self.prefix = prefix
        self.created = set()

    def fresh(self, base: str, own: bool = False) -> str:
        """An unused identifier made from `base`; `own`: `base` is reserved for the tensor being named."""
        return unique_identifier(base, self._used, self._reserved, own, counters=self._counters)

    def rename(self, ref: Ref, name: str, own: str | None = None) -> Ref:
        """Give the tensor `ref` (written by the current rule) the name `name` (made an identifier), if still free;
        `own`: a reserved name that is the tensor's own (the traced node it was written for)."""
        name = identifier(name)
        if name in self._used:  # an op name or keyword (`relu`, `add`): add an underscore
            name += "_"
            if name in self._used or (name in self._reserved and name != own):
                return ref
        self._used.add(name)
        old = self.tensors[ref.name]
        self.tensors[name] = Tensor(name, old.dtype, old.shape)
        self._renamed[ref.name] = Ref(name)
        if ref.name in self.quantization:
            self.quantization[name] = self.quantization.pop(ref.name)
        return Ref(name)

    def shape(self, x: Any) -> tuple[int, ...]:
        if isinstance(x, Ref):
            return tuple(self.tensors[x.name].shape)
        return ()

    def rank(self, x: Any) -> int:
        return len(self.shape(x))

    def dtype(self, x: Any) -> str:
        if isinstance(x, Ref):
            return self.tensors[x.name].dtype
        return "logical" if isinstance(x, bool) else "integer" if isinstance(x, int) else "scalar"

    def declaration(self, name: str) -> ast.Fragment:
        found = standard_fragments().get(name) or self.library.get(name)
        assert found is not None, f"no declaration for NNEF op {name!r}"
        return found

    def definitions(self) -> list[ast.Fragment]:
        """The library fragments this graph uses, each after those it invokes: what its document must define."""
        return [self.library[name] for name in self.fragments]

    # ----------------------------------------------------------------------------------------- operations
    def op(self, name: str, *inputs: Any, out_shape: Any = None, generic: str | None = None,
           out_name: str | None = None, **attribs: Any) -> Any:
        """Append `name(*inputs, **attribs)`; returns the result's `Ref` (a tuple for several results, a list for an
        array result). `out_shape` gives the result shape(s) for ops without a shape rule; `generic` the generic
        type where it cannot be deduced from the inputs."""
        decl = self.declaration(name)
        if name in self.library and name not in self.fragments:
            self._use_fragment(decl)
        tensor_params = [p for p in decl.params if is_tensor_param(p.type)]
        bound: dict[str, Any] = {}
        if len(inputs) > len(tensor_params):
            raise AssertionError(f"{name} takes {len(tensor_params)} tensor inputs, got {len(inputs)}")
        for param, value in zip(tensor_params, inputs):
            bound[param.name] = value
        attrs: dict[str, Any] = {}
        for param in decl.params:
            key = param.name + "_" if param.name == "lambda" else param.name
            if param.name in bound:
                continue
            if key in attribs:
                value = attribs.pop(key)
            elif param.default is not None:
                value = default_value(param.default)
            else:
                raise AssertionError(f"{name} needs argument {param.name!r}")
            (bound if is_tensor_param(param.type) else attrs)[param.name] = value
        assert not attribs, f"{name} has no parameters {sorted(attribs)}"
        if generic is None and decl.generic:
            generic = next((self.dtype(v) for p in tensor_params if _item(p.type) == "?"
                            for v in (bound[p.name] if isinstance(bound[p.name], list) else [bound[p.name]])
                            if isinstance(v, Ref)), None)  # an array input (concat's values) counts too
            generic = generic or (decl.generic_default.name if decl.generic_default else None)
        for param in tensor_params:
            kind = _item(param.type)
            kind = generic if kind == "?" else kind
            bound[param.name] = _coerce(bound[param.name], kind)
        shape = self._infer(name, tensor_params, {key: plain(value) for key, value in bound.items()},
                            {key: plain(value) for key, value in attrs.items()}, out_shape)
        outputs: dict[str, Any] = {}
        results = []
        shapes_ = shape if len(decl.results) > 1 else (shape,)
        base = out_name or (f"{self.prefix}_{name}" if self.prefix else name)
        for result, result_shape in zip(decl.results, shapes_):
            kind = _item(result.type)
            kind = generic if kind == "?" else kind
            if isinstance(result.type, ast.ArrayType):
                refs = [self._new(base, kind, s) for s in result_shape]
                outputs[result.name] = refs
                results.append(refs)
            else:
                ref = self._new(base, kind, result_shape, own=out_name is not None)
                outputs[result.name] = ref
                results.append(ref)
        self.operations.append(Operation(name, bound, attrs, outputs, dtype=generic if decl.generic else None))
        return results[0] if len(results) == 1 else tuple(results)

    def _new(self, base: str, dtype: str | None, shape: Any, own: bool = False) -> Ref:
        ref = Ref(self.fresh(base, own))
        self.created.add(ref.name)
        self.tensors[ref.name] = Tensor(ref.name, dtype, None if shape is None else tuple(int(s) for s in shape))
        return ref

    def _infer(self, name: str, tensor_params: list[ast.Param], bound: dict[str, Any], attrs: dict[str, Any],
               out_shape: Any) -> Any:
        op = entry(name)
        if out_shape is None and name in self.library:
            out_shape = self.shape(bound[tensor_params[0].name])  # library fragments keep their input's shape
        if out_shape is not None or op is None or op.shape is None:
            assert out_shape is not None, f"{name} has no shape rule; give out_shape"
            return out_shape
        args = []
        for param in tensor_params:
            value = bound[param.name]
            args.append([self.shape(v) for v in value] if isinstance(value, list) else self.shape(value))
        keywords = {(key + "_" if key == "lambda" else key): value for key, value in attrs.items()}
        return op.shape(*args, **keywords)

    def _use_fragment(self, decl: ast.Fragment) -> None:
        """Record a library fragment and, first, the library fragments its body invokes."""
        for assignment in decl.body or ():
            for invoked in _invocations(assignment.rhs):
                if invoked in self.library and invoked not in self.fragments and invoked != decl.name:
                    self._use_fragment(self.library[invoked])
        if decl.name not in self.fragments:
            self.fragments.append(decl.name)

    # ----------------------------------------------------------------------------------------- declarations
    def external(self, name: str, dtype: str, shape: Sequence[int]) -> Ref:
        shape = [int(extent) for extent in shape]
        ref = self.op("external", shape=shape, generic=dtype, out_shape=tuple(shape), out_name=name)
        self.externals.append(External(ref.name, dtype, tuple(shape)))
        return ref

    def variable(self, label: str, dtype: str, shape: Sequence[int], data: Any = None, name: str | None = None) -> Ref:
        """A variable of `shape` (at least one dimension) holding `data` (kept as given: an array or a tensor)."""
        shape = [int(extent) for extent in shape]
        ref = self.op("variable", shape=shape, label=label, generic=dtype, out_shape=tuple(shape),
                      out_name=name or label.replace("/", "_"))
        self.variables.append(Variable(ref.name, label, dtype, tuple(shape)))
        self.data[label] = data
        return ref

    def update(self, variable: Ref, value: Any) -> None:
        result = self.op("update", variable, value)
        self.updates.append(Update(variable.name, value.name if isinstance(value, Ref) else value, result.name))

    def graph(self, name: str, outputs: Sequence[Ref], keep: Collection[str] = ()) -> Graph:
        """The finished graph; operations (and variables) nothing depends on are left out, except those named in
        `keep` (operations with side effects, such as a front end's print)."""
        if self._renamed:
            self.operations[:] = [replace_refs(op, self._renamed) for op in self.operations]
            self.variables[:] = [dataclasses.replace(v, name=self._renamed[v.name].name) if v.name in self._renamed
                                 else v for v in self.variables]  # a variable named after the node it stands for
            for old in self._renamed:
                del self.tensors[old]
            self._renamed = {}
        live = {ref.name for ref in outputs}
        kept = []
        for op in reversed(self.operations):
            if op.name in ("update", "external") or op.name in keep or \
                    any(ref.name in live for ref in op.output_refs()):
                kept.append(op)
                live.update(ref.name for ref in op.input_refs())
        self.operations[:] = reversed(kept)
        variables = tuple(v for v in self.variables if v.name in live)
        self.data = {v.label: self.data[v.label] for v in variables}
        self.tensors = {k: t for k, t in self.tensors.items() if k in live}  # live holds the outputs' names
        self.quantization = {k: spec for k, spec in self.quantization.items() if k in self.tensors}
        signature = Signature(tuple(self.externals), variables, tuple(self.updates),
                              tuple(ref.name for ref in outputs))
        return Graph(name, "1.0", (), dict(self.tensors), tuple(self.operations), signature,
                     quantization=dict(self.quantization))


def _coerce(value: Any, kind: str | None) -> Any:
    if isinstance(value, list):
        return [_coerce(item, kind) for item in value]
    if isinstance(value, (Ref, Extent)) or value is None:
        return value
    return literal(value, kind)


def _invocations(expr: Any) -> Iterator[str]:
    if isinstance(expr, ast.Invocation):
        yield expr.name
    if hasattr(expr, "__dataclass_fields__"):
        for field_name in expr.__dataclass_fields__:
            child = getattr(expr, field_name)
            for item in child if isinstance(child, (tuple, ast.NumberItems)) else (child,):
                if hasattr(item, "__dataclass_fields__") or isinstance(item, tuple):
                    yield from _invocations(item)


def replace_refs(op: Operation, swap: Mapping[str, Ref]) -> Operation:
    """`op` with each tensor named in `swap` (inputs and outputs) replaced by its new `Ref`."""
    def sub(value: Any) -> Any:
        if isinstance(value, Ref):
            return swap.get(value.name, value)
        if isinstance(value, list):
            return [sub(item) for item in value]
        return value
    return dataclasses.replace(op, inputs={k: sub(v) for k, v in op.inputs.items()},
                               outputs={k: sub(v) for k, v in op.outputs.items()})
