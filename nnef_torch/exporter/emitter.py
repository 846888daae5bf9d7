"""The exporter's writer of IR: a `Builder` (see `nnef_torch.ir.builder`) that knows the traced torch node being
exported, folds constants, and takes torch tensors as inputs, variables and constants."""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from nnef_torch.exporter.tract_forms import FORMS as TRACT_FORMS
from nnef_torch.format import ast
from nnef_torch.formats.tract_core import declarations as tract_declarations
from nnef_torch.formats.tract_core import recurrence_fragments
from nnef_torch.ir.builder import FLOAT_MAX, Builder, Unmappable, literal
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.values import Extent
from nnef_torch.stdlib import extension_fragments

SMALL_CONSTANT = 16  # constants with at most this many items are written inline; larger ones become variables

_NNEF_TYPE = {torch.bool: "logical"}
# standard operations tract's registry has under its own name only, with the same signature
TRACT_NAMES = {"gather": "tract_core_gather"}
TRACT_TYPES = {"scalar": "f32", "integer": "i64", "logical": "bool"}  # tract_core_cast's names of NNEF types

__all__ = ["FLOAT_MAX", "Emitter", "Unmappable", "exporter_fragments", "literal", "nnef_type"]


def nnef_type(dtype: torch.dtype) -> str:
    if dtype in _NNEF_TYPE:
        return _NNEF_TYPE[dtype]
    return "scalar" if dtype.is_floating_point else "integer"


def exporter_fragments() -> dict[str, ast.Fragment]:
    """The fragments the exporter writes for torch operations without a standard NNEF op (the extension library,
    `nnef_torch/stdlib/extensions.nnef`)."""
    return extension_fragments()


class Emitter(Builder):
    """Builds the IR graph of one traced program: `begin(node)` before the operations of each ATen node."""

    def __init__(self, reserved: Sequence[str] = (), target: str = "standard"):
        library = exporter_fragments()
        if target == "tract":  # tract's own operations (declared by its registry, not written as fragments), and
            library = {**library, **tract_declarations(), **recurrence_fragments()}  # recurrences over them
        super().__init__(library, reserved)
        self.target = target
        self.node: torch.fx.Node | None = None  # the ATen node being exported
        self.quant_options: Any = None  # how fake quantization is written (exporter.quantization.QuantExport)
        self.shared: set[str] = set()  # tensors that are the value of more than one traced node (aliases)
        # evaluates a node of the traced graph on the program's parameters, buffers and constants (constant
        # folding); raises Unmappable when the node depends on a graph input
        self.fold: Callable[[torch.fx.Node], torch.Tensor] | None = None
        self.symbols: Any = None  # the trace's symbolic extents (exporter.symbolic.Symbols), or None
        # the document tensor a traced node computes, where the traced module holds imported ones (naming.Documents)
        self.document_tensor: Callable[[torch.fx.Node], str | None] | None = None
        self.sources: dict[str, torch.fx.Node] = {}  # tensor name -> the traced node it was written for

    def define(self, name: str) -> None:
        """Have the document define library fragment `name`, which no operation invokes by name (the body of a
        `tract_core_scan`, named by a string)."""
        self._use_fragment(self.library[name])

    def symbolic_shape(self, index: int = 0) -> list[Any] | None:
        """The symbolic shape of the node's `index`-th argument (a tensor node), when the trace has symbols and
        it has a symbolic extent; None otherwise (its IR shape holds every extent)."""
        if not self.symbols or self.node is None or index >= len(self.node.args):
            return None
        shape = self.symbols.shape(self.node.args[index])
        return shape if shape is not None and not all(isinstance(d, int) for d in shape) else None

    def extent(self, value: Any) -> Any:
        """An integer the program computed from extents (a `SymValue`, or a sympy expression) as an IR `Extent`
        written as its expression (the tract target, whose documents declare the symbols), or a plain int."""
        expr = getattr(value, "expr", value)
        if not hasattr(expr, "free_symbols") or not expr.free_symbols:
            return int(getattr(value, "example", value))
        text = self.symbols.show(expr).replace("**", "^")
        return Extent(text, self.symbols.value(expr, self.symbols.examples))

    def extent_tensor(self, value: Any) -> Any:
        """An extent the program reads as a number (`SymValue`) as a rank-0 integer tensor: tract's range over
        [value, value + 1), squeezed."""
        start = self.extent(value)
        if not isinstance(start, Extent):
            return start
        end = Extent(f"{start.expr} + 1", start.value + 1)
        one = super().op("tract_core_range", start, end, 1, out_shape=(1,))
        return super().op("squeeze", one, axes=[0])

    def symbolic_out(self) -> list[Any] | None:
        """The symbolic shape of the node's result, as `symbolic_shape`."""
        if not self.symbols or self.node is None:
            return None
        shape = self.symbols.shape(self.node)
        return shape if shape is not None and not all(isinstance(d, int) for d in shape) else None

    def op(self, name: str, *inputs: Any, **attribs: Any) -> Any:  # type: ignore[override]
        if name == "cast" and self.target == "tract":  # tract reads its own cast, by the type's name
            kind = attribs.pop("generic")
            return super().op("tract_core_cast", *inputs, to=TRACT_TYPES[kind], generic=kind,
                              out_shape=self.shape(inputs[0]), **attribs)
        form = TRACT_FORMS.get(name) if self.target == "tract" else None
        if form is not None:  # a standard op tract lacks or reads otherwise, in a form it reads (tract_forms.py)
            return form(self, functools.partial(super().op, name), *inputs, **attribs)
        result = super().op(name, *inputs, **attribs)
        if name in TRACT_NAMES and self.target == "tract":  # the same operation under tract's name
            self.operations[-1] = dataclasses.replace(self.operations[-1], name=TRACT_NAMES[name])
        return result

    @property
    def out(self) -> Any:
        """The traced value (a fake tensor, or a tuple of them) of the node being exported."""
        return self.node.meta.get("val")

    def begin(self, node: torch.fx.Node | None) -> None:  # type: ignore[override]
        """Start writing the operations of `node`."""
        self.node = node
        super().begin(node.name if node is not None else None)

    def rename(self, ref: Ref, name: str, own: str | None = None) -> Ref:
        renamed = super().rename(ref, name, own)
        if ref.name in self.sources:
            self.sources[renamed.name] = self.sources[ref.name]
        return renamed

    def _new(self, base: str, dtype: str | None, shape: Any, own: bool = False) -> Ref:
        ref = super()._new(base, dtype, shape, own)
        if self.node is not None:
            self.sources[ref.name] = self.node
        return ref

    def external(self, name: str, value: torch.Tensor) -> Ref:  # type: ignore[override]
        return super().external(name, nnef_type(value.dtype), list(value.shape))

    def variable(self, label: str, value: torch.Tensor, name: str | None = None) -> Ref:  # type: ignore[override]
        if value.dim() == 0:  # NNEF variables have at least one dimension
            value = value.reshape(1)
        return super().variable(label, nnef_type(value.dtype), list(value.shape), value, name)

    def constant(self, value: torch.Tensor, label: str) -> Any:
        """A constant tensor: a literal when it is one number, `constant` when small, a variable otherwise."""
        value = value.detach()
        kind = nnef_type(value.dtype)
        if value.numel() == 1 and value.dim() == 0:
            return literal(value.item(), kind)
        if value.numel() <= SMALL_CONSTANT and value.numel() > 0 and self.target != "tract":  # tract: no `constant`
            items = [literal(v, kind) for v in value.reshape(-1).tolist()]
            shape = list(value.shape) or [1]
            return self.op("constant", shape=shape, value=items if len(set(items)) > 1 else items[:1],
                           generic=kind)
        return self.variable(label, value)
