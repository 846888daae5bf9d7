"""The inputs of an imported module as its calls are checked against them.

Each graph input (`external`) has a declared shape: integers, and for a dialect with dynamic dimensions
(`extension tract_symbol S;`) the names of its symbols. A standard NNEF input may be given any shape of its rank
(NNEF re-declares a graph's externals, spec 2.2: the graph is derived again for it, `derive.py`); a dialect's
integer extents are fixed, its symbols take any value, one value per symbol in a call. A call's tensors are checked
here before any generated code runs: their number of axes, their dtype against the input's NNEF type, and the fixed
extents. Each error names the input, its declared shape and the axis, located at the input's declaration.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nnef_torch.errors import Location, NNEFShapeError, NNEFTypeError
from nnef_torch.formats.dialects import Extent
from nnef_torch.ir.graph import Graph
from nnef_torch.ir.lower import python_name

# the shapes of a call's inputs, in declaration order (None: an input no operation reads, or not given)
Signature = tuple[tuple[int, ...] | None, ...]

_KINDS = {"scalar": ("a floating-point tensor", lambda dtype: dtype.is_floating_point),
          "integer": ("an integer tensor",
                      lambda dtype: not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)),
          "logical": ("a bool tensor", lambda dtype: dtype == torch.bool)}


@dataclass(frozen=True)
class Declared:
    """One graph input as calls are checked against it."""

    name: str  # its NNEF name
    arg: str  # its name as an argument of `forward`
    dtype: str  # its NNEF type: 'scalar', 'integer' or 'logical'
    shape: tuple[Extent, ...] | None  # its declared extents; None: not known (a symbol read without its shapes)
    fixed: bool  # its integer extents are fixed (a dialect's dynamic shape); False: any extent (NNEF's re-declaration)
    read: bool  # an operation reads it (an input nothing reads may be left out, and has no place in a signature)
    location: Location | None = None

    @property
    def shown(self) -> str:
        if self.shape is None:
            return "(shape not known before the first call)"
        return "[" + ", ".join("?" if extent is None else str(extent) for extent in self.shape) + "]"


def declared_inputs(graph: Graph, dynamic: Mapping[str, tuple[Extent, ...]],
                    bound: bool) -> tuple[tuple[Declared, ...], Signature | None]:
    """The inputs of `graph` (the one a module was generated from) as calls are checked against them, and the
    signature of its own forward (None where not `bound`). `dynamic`: the declared extents of a dialect's inputs
    with dynamic dimensions (`formats.dialects.dynamic_inputs`), whose integers are fixed (at the shapes loaded, where
    `bound`: input_shapes= may change them); not `bound`: a graph made before its input shapes were known, whose
    inputs without `dynamic` extents are of unknown shape."""
    read = {ref.name for op in graph.operations for ref in op.input_refs()} | set(graph.outputs)
    where = {op.outputs["output"].name: op.location for op in graph.operations if op.name == "external"}
    inputs = []
    for external in graph.signature.externals:
        extents: tuple[Extent, ...] | None = dynamic.get(external.name)
        fixed = extents is not None
        if bound and extents is not None and len(extents) == len(external.shape):
            extents = tuple(loaded if isinstance(extent, int) else extent
                            for extent, loaded in zip(extents, external.shape))
        elif bound:
            extents = tuple(external.shape)
        inputs.append(Declared(external.name, python_name(external.name), external.dtype, extents, fixed,
                               external.name in read, where.get(external.name)))
    signature = tuple(tuple(external.shape) if decl.read else None
                      for decl, external in zip(inputs, graph.signature.externals))
    return tuple(inputs), signature if bound else None


def bind(inputs: Sequence[Declared], args: tuple, kwargs: Mapping[str, Any]) -> list[Any] | None:
    """A call's arguments by input, in declaration order (None where not given); None where they do not bind
    (too many, an unknown name, a missing input that is read: the generated `forward` raises Python's own error)."""
    if len(args) > len(inputs):
        return None
    values = list(args) + [None] * (len(inputs) - len(args))
    for key, value in kwargs.items():
        index = next((i for i, decl in enumerate(inputs) if decl.arg == key), None)
        if index is None or index < len(args):
            return None
        values[index] = value
    if any(value is None and decl.read for decl, value in zip(inputs, values)):
        return None
    return values


def signature_of(inputs: Sequence[Declared], values: Sequence[Any]) -> Signature | None:
    """The signature of a call after checking each tensor's number of axes and dtype; None where it has none to
    compare (a value that is not a tensor, such as an fx proxy, or a tensor of symbolic sizes under tracing)."""
    key: list[tuple[int, ...] | None] = []
    for decl, value in zip(inputs, values):
        if value is None:
            key.append(None)
            continue
        if not isinstance(value, torch.Tensor):
            return None
        kind = _KINDS.get(decl.dtype)
        if kind is not None and not kind[1](value.dtype):
            raise NNEFTypeError(f"input '{decl.name}' is declared {decl.dtype} {decl.shown}, which takes {kind[0]}; "
                                f"found {value.dtype}", decl.location)
        shape = tuple(value.shape)
        if decl.shape is not None and len(shape) != len(decl.shape):
            raise NNEFShapeError(f"input '{decl.name}' has shape {list(shape)} ({_axes(len(shape))}); it is declared "
                                 f"{decl.shown} ({_axes(len(decl.shape))}): no axis may be added or removed",
                                 decl.location)
        key.append(shape if decl.read else None)
    for shape in key:
        if shape is not None and not all(type(extent) is int for extent in shape):
            return None  # symbolic sizes (torch.export, torch.compile with dynamic shapes): as generated
    return tuple(key)


def check_extents(inputs: Sequence[Declared], values: Sequence[Any]) -> dict[str, int]:
    """Check a call's extents against the fixed ones of its inputs, and that each dynamic dimension has one value;
    returns the value of each."""
    symbols: dict[str, tuple[int, str, int]] = {}  # symbol -> (value, input, axis) where first met
    for decl, value in zip(inputs, values):
        if decl.shape is None or not isinstance(value, torch.Tensor):
            continue
        shape = list(value.shape)
        for axis, (extent, found) in enumerate(zip(decl.shape, shape)):
            if isinstance(extent, int) and decl.fixed and found != extent:
                raise NNEFShapeError(f"input '{decl.name}' has shape {shape}; it is declared {decl.shown}, whose axis "
                                     f"{axis} is fixed at {extent} (only its dynamic dimensions may change)",
                                     decl.location)
            if isinstance(extent, str):
                seen = symbols.setdefault(extent, (found, decl.name, axis))
                if seen[0] != found:
                    raise NNEFShapeError(f"input '{decl.name}' has shape {shape}; it is declared {decl.shown}, and its "
                                         f"axis {axis} ({extent}) is {found} where axis {seen[2]} of input "
                                         f"'{seen[1]}' makes {extent} {seen[0]}", decl.location)
    return {symbol: value for symbol, (value, _, _) in symbols.items()}


def described(inputs: Sequence[Declared], key: Signature) -> str:
    """The inputs of a call that differ from their declaration: name, shape, declared shape and the axes."""
    parts = []
    for decl, shape in zip(inputs, key):
        if shape is None:
            continue
        if decl.shape is None:
            parts.append(f"input '{decl.name}' of shape {list(shape)}")
            continue
        axes = [axis for axis, (extent, found) in enumerate(zip(decl.shape, shape)) if extent != found]
        if axes:
            which = f"axis {axes[0]}" if len(axes) == 1 else f"axes {', '.join(map(str, axes))}"
            parts.append(f"input '{decl.name}' of shape {list(shape)} (declared {decl.shown}, other at {which})")
    return "; ".join(parts) or "the inputs"


def _axes(count: int) -> str:
    return "1 axis" if count == 1 else f"{count} axes"


__all__ = ["Declared", "Signature", "bind", "check_extents", "declared_inputs", "described", "signature_of"]
