"""The exporter's writer of IR: export rules call `Emitter.op` to append NNEF operations to the graph being built.

An operation is checked against its declaration (the standard library or the exporter's own fragments): tensor
inputs are bound in order, attributes get their declared defaults, and the result shapes come from the op table's
shape rules, so a rule that writes an invalid operation fails here, at export time, with the op in question.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import torch

from nnef_torch.format import ast
from nnef_torch.format.parser import parse_fragments
from nnef_torch.ir.checker import check_library
from nnef_torch.ir.graph import External, Graph, Operation, Ref, Signature, Tensor, Update, Variable
from nnef_torch.ops import shapes  # noqa: F401  (registers the shape rules)
from nnef_torch.ops.registry import entry
from nnef_torch.stdlib import standard_fragments

FRAGMENTS_FILE = "fragments.nnef"
KEYWORDS = {"version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical", "string", "true",
            "false", "for", "in", "if", "else", "yield", "length_of", "shape_of", "range_of"}
SMALL_CONSTANT = 16  # constants with at most this many items are written inline; larger ones become variables
FLOAT_MAX = 3.4028234663852886e38  # NNEF has no literal for infinity; float32's largest value stands in for it

_NNEF_TYPE = {torch.bool: "logical"}


class Unmappable(Exception):
    """An export rule cannot write these arguments exactly in NNEF; the message says why."""


def nnef_type(dtype: torch.dtype) -> str:
    if dtype in _NNEF_TYPE:
        return _NNEF_TYPE[dtype]
    return "scalar" if dtype.is_floating_point else "integer"


@lru_cache(maxsize=1)
def exporter_fragments() -> dict[str, ast.Fragment]:
    """The fragments the exporter defines for torch operations without a standard NNEF op (fragments.nnef)."""
    text = resources.files(__package__).joinpath(FRAGMENTS_FILE).read_text(encoding="utf-8")
    fragments = parse_fragments(text, FRAGMENTS_FILE)
    standard = standard_fragments()
    clash = [fragment.name for fragment in fragments if fragment.name in standard]
    assert not clash, f"{FRAGMENTS_FILE} redefines standard ops {clash}"
    table = {**standard, **{fragment.name: fragment for fragment in fragments}}
    check_library(fragments, table)
    return {fragment.name: fragment for fragment in fragments}


def declaration(name: str) -> ast.Fragment:
    found = standard_fragments().get(name) or exporter_fragments().get(name)
    assert found is not None, f"no declaration for NNEF op {name!r}"
    return found


def _default(expr: ast.Expr) -> Any:
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.UnaryExpr) and expr.op == "-":
        return -_default(expr.operand)
    if isinstance(expr, ast.ArrayExpr):
        return [_default(item) for item in expr.items]
    if isinstance(expr, ast.TupleExpr):
        return tuple(_default(item) for item in expr.items)
    raise AssertionError(f"unexpected default {expr!r}")


def _is_tensor_param(type_: ast.Type) -> bool:
    return isinstance(type_, ast.TensorType) or (isinstance(type_, ast.ArrayType) and _is_tensor_param(type_.item))


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


class Emitter:
    """Builds one IR graph: tensors with shapes and types, operations, and the externals / variables / updates."""

    def __init__(self, reserved: Sequence[str] = ()):
        self.tensors: dict[str, Tensor] = {}
        self.operations: list[Operation] = []
        self.externals: list[External] = []
        self.variables: list[Variable] = []
        self.updates: list[Update] = []
        self.data: dict[str, torch.Tensor] = {}  # variable label -> its values
        self.fragments: list[str] = []  # exporter fragments used, in first-use order
        self.node: torch.fx.Node | None = None  # the ATen node being exported
        self.created: set[str] = set()  # tensors written for the current node
        self._renamed: dict[str, Ref] = {}  # applied to the operations once, when the graph is finished
        self._used = set(KEYWORDS) | set(standard_fragments()) | set(exporter_fragments())
        self._reserved = set(reserved)  # the traced graph's node names: each is kept for its own node
        # graph.quant entries by tensor name (QuantSpec); they follow renames and dead-code elimination
        self.quantization: dict[str, Any] = {}
        self.quant_options: Any = None  # how fake quantization is written (exporter.quantization.QuantExport)
        self.shared: set[str] = set()  # tensors that are the value of more than one traced node (aliases)
        # evaluates a node of the traced graph on the program's parameters, buffers and constants (constant
        # folding); raises Unmappable when the node depends on a graph input
        self.fold: Callable[[torch.fx.Node], torch.Tensor] | None = None

    # ----------------------------------------------------------------------------------------- names and types
    def fresh(self, base: str, own: bool = False) -> str:
        """An unused identifier made from `base`; `own`: `base` is the name of the node being written."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "t"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "t_" + base
        name, counter = base, 0
        while name in self._used or (name in self._reserved and not (own and name == base)):
            counter += 1
            name = f"{base}_{counter}"
        self._used.add(name)
        return name

    def rename(self, ref: Ref, name: str) -> Ref:
        """Give the tensor `ref` (written by the current rule) the name `name`, if still free."""
        if name in self._used:  # an op name or keyword (`relu`, `add`): add an underscore
            name += "_"
            if name in self._used or name in self._reserved:
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

    @property
    def out(self) -> Any:
        """The traced value (a fake tensor, or a tuple of them) of the node being exported."""
        return self.node.meta.get("val")

    # ----------------------------------------------------------------------------------------- operations
    def op(self, name: str, *inputs: Any, out_shape: Any = None, generic: str | None = None,
           out_name: str | None = None, **attribs: Any) -> Any:
        """Append `name(*inputs, **attribs)`; returns the result's `Ref` (a tuple for several results, a list for an
        array result). `out_shape` gives the result shape(s) for ops without a shape rule; `generic` the generic
        type where it cannot be deduced from the inputs."""
        decl = declaration(name)
        if name in exporter_fragments() and name not in self.fragments:
            self._use_fragment(decl)
        tensor_params = [p for p in decl.params if _is_tensor_param(p.type)]
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
                value = _default(param.default)
            else:
                raise AssertionError(f"{name} needs argument {param.name!r}")
            (bound if _is_tensor_param(param.type) else attrs)[param.name] = value
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
        shape = self._infer(name, decl, tensor_params, bound, attrs, out_shape)
        outputs: dict[str, Any] = {}
        results = []
        shapes_ = shape if len(decl.results) > 1 else (shape,)
        base = out_name or (f"{self.node.name}_{name}" if self.node is not None else name)
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

    def begin(self, node: torch.fx.Node | None) -> None:
        """Start writing the operations of `node`."""
        self.node = node
        self.created: set[str] = set()

    def _new(self, base: str, dtype: str | None, shape: Any, own: bool = False) -> Ref:
        ref = Ref(self.fresh(base, own))
        self.created.add(ref.name)
        self.tensors[ref.name] = Tensor(ref.name, dtype, None if shape is None else tuple(int(s) for s in shape))
        return ref

    def _infer(self, name: str, decl: ast.Fragment, tensor_params: list[ast.Param], bound: dict[str, Any],
               attrs: dict[str, Any], out_shape: Any) -> Any:
        op = entry(name)
        if out_shape is None and name in exporter_fragments():
            out_shape = self.shape(bound[tensor_params[0].name])  # exporter fragments keep their input's shape
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
        """Record an exporter fragment and, first, the exporter fragments its body invokes."""
        for assignment in decl.body or ():
            for invoked in _invocations(assignment.rhs):
                if invoked in exporter_fragments() and invoked not in self.fragments and invoked != decl.name:
                    self._use_fragment(exporter_fragments()[invoked])
        if decl.name not in self.fragments:
            self.fragments.append(decl.name)

    # ----------------------------------------------------------------------------------------- declarations
    def external(self, name: str, value: torch.Tensor) -> Ref:
        kind, shape = nnef_type(value.dtype), list(value.shape)
        ref = self.op("external", shape=shape, generic=kind, out_shape=tuple(shape), out_name=name)
        self.externals.append(External(ref.name, kind, tuple(shape)))
        return ref

    def variable(self, label: str, value: torch.Tensor, name: str | None = None) -> Ref:
        if value.dim() == 0:  # NNEF variables have at least one dimension
            value = value.reshape(1)
        kind, shape = nnef_type(value.dtype), list(value.shape)
        ref = self.op("variable", shape=shape, label=label, generic=kind, out_shape=tuple(shape),
                      out_name=name or label.replace("/", "_"))
        self.variables.append(Variable(ref.name, label, kind, tuple(value.shape)))
        self.data[label] = value
        return ref

    def constant(self, value: torch.Tensor, label: str) -> Any:
        """A constant tensor: a literal when it is one number, `constant` when small, a variable otherwise."""
        value = value.detach()
        kind = nnef_type(value.dtype)
        if value.numel() == 1 and value.dim() == 0:
            return literal(value.item(), kind)
        if value.numel() <= SMALL_CONSTANT and value.numel() > 0:
            items = [literal(v, kind) for v in value.reshape(-1).tolist()]
            shape = list(value.shape) or [1]
            return self.op("constant", shape=shape, value=items if len(set(items)) > 1 else items[:1],
                           generic=kind)
        return self.variable(label, value)

    def update(self, variable: Ref, value: Any) -> None:
        result = self.op("update", variable, value)
        self.updates.append(Update(variable.name, value.name if isinstance(value, Ref) else value, result.name))

    def graph(self, name: str, outputs: Sequence[Ref]) -> Graph:
        """The finished graph; operations (and variables) nothing depends on are left out."""
        if self._renamed:
            self.operations[:] = [_replace_refs(op, self._renamed) for op in self.operations]
            for old in self._renamed:
                del self.tensors[old]
            self._renamed = {}
        live = {ref.name for ref in outputs}
        kept = []
        for op in reversed(self.operations):
            if op.name in ("update", "external") or any(ref.name in live for ref in op.output_refs()):
                kept.append(op)
                live.update(ref.name for ref in op.input_refs())
        self.operations[:] = reversed(kept)
        variables = tuple(v for v in self.variables if v.name in live)
        self.data = {v.label: self.data[v.label] for v in variables}
        self.tensors = {k: t for k, t in self.tensors.items() if k in live or k in {r.name for r in outputs}}
        self.quantization = {k: spec for k, spec in self.quantization.items() if k in self.tensors}
        signature = Signature(tuple(self.externals), variables, tuple(self.updates),
                              tuple(ref.name for ref in outputs))
        return Graph(name, "1.0", (), dict(self.tensors), tuple(self.operations), signature,
                     quantization=dict(self.quantization))


def _coerce(value: Any, kind: str | None) -> Any:
    if isinstance(value, list):
        return [_coerce(item, kind) for item in value]
    if isinstance(value, Ref) or value is None:
        return value
    return literal(value, kind)


def _invocations(expr: Any):
    if isinstance(expr, ast.Invocation):
        yield expr.name
    if hasattr(expr, "__dataclass_fields__"):
        for field_name in expr.__dataclass_fields__:
            child = getattr(expr, field_name)
            for item in child if isinstance(child, tuple) else (child,):
                if hasattr(item, "__dataclass_fields__") or isinstance(item, tuple):
                    yield from _invocations(item)


def _replace_refs(op: Operation, swap: dict[str, Ref]) -> Operation:
    def sub(value: Any) -> Any:
        if isinstance(value, Ref):
            return swap.get(value.name, value)
        if isinstance(value, list):
            return [sub(item) for item in value]
        return value
    return Operation(op.name, {k: sub(v) for k, v in op.inputs.items()}, op.attribs,
                     {k: sub(v) for k, v in op.outputs.items()}, op.dtype, op.location)
