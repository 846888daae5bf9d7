"""The flat IR where import and export meet: tensors, operations with evaluated attributes, and a typed signature.

Plain data only. An operation's tensor inputs are `Ref`s to tensors, Python literals (a number substituted for a
tensor), or lists of those (tensor arrays); its attributes are Python values (int, float, bool, str, lists and
tuples); its outputs are `Ref`s or lists of `Ref`s.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nnef_torch.errors import Location


@dataclass(frozen=True)
class Ref:
    """A reference to a tensor of the graph, by name."""

    name: str

    def __repr__(self) -> str:
        return f"Ref({self.name!r})"


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str | None  # 'scalar', 'integer', 'logical'; None for outputs of ops whose type is unbound
    shape: tuple[int, ...] | None  # None where shapes cannot be propagated (custom ops)


@dataclass(frozen=True)
class Operation:
    name: str
    inputs: dict[str, Any]
    attribs: dict[str, Any]
    outputs: dict[str, Any]
    dtype: str | None = None  # the generic type of a generic operation
    location: Location | None = field(default=None, compare=False)
    # The fragment invocations it was expanded from, outermost first, each 'fragment#k' (k counts expansions).
    scope: tuple[str, ...] = field(default=(), compare=False)

    def input_refs(self) -> Iterator[Ref]:
        yield from _refs(self.inputs.values())

    def output_refs(self) -> Iterator[Ref]:
        yield from _refs(self.outputs.values())


def _refs(values: Iterable[Any]) -> Iterator[Ref]:
    for value in values:
        if isinstance(value, Ref):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _refs(value)


@dataclass(frozen=True)
class External:
    """A graph input (`external`): a positional argument of the graph, in declaration order."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Variable:
    """A `variable`; variables whose labels are equal ignoring case are one tensor (`key` is the shared key)."""

    name: str
    label: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def key(self) -> str:
        return self.label.lower()


@dataclass(frozen=True)
class Update:
    """`result = update(variable, value)`: after a run, `variable` holds `value`."""

    variable: str
    value: Any  # a tensor name, or a literal
    result: str


@dataclass(frozen=True)
class Signature:
    externals: tuple[External, ...]
    variables: tuple[Variable, ...]
    updates: tuple[Update, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Graph:
    name: str
    version: str
    extensions: tuple[str, ...]
    tensors: dict[str, Tensor]
    operations: tuple[Operation, ...]
    signature: Signature
    custom_fragments: tuple[Any, ...] = ()  # ast.Fragment declarations of document ops kept atomic
    quantization: dict[str, Any] = field(default_factory=dict)  # tensor name -> QuantSpec (from graph.quant)
    deviations: tuple[str, ...] = ()  # rules of nnef_torch.ir.deviations a lenient reading met, in order met
    # the dialect whose op table its operations are looked up in (`registry.entry(name, dialect=...)`), chosen by
    # the document's extension lines (`extension tract_registry tract_core;`); None: the standard table
    dialect: str | None = None

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(external.name for external in self.signature.externals)

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.signature.outputs

    def shared_variables(self) -> dict[str, list[Variable]]:
        """Variables grouped by their case-insensitive label: each group is one tensor of data."""
        groups: dict[str, list[Variable]] = {}
        for variable in self.signature.variables:
            groups.setdefault(variable.key, []).append(variable)
        return groups
