"""An NNVM or MXNet node as its import rule sees it: its inputs as IR values, its attributes by type, and errors
that name it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.formats.nnvm.attrs import Attributes
from nnef_torch.formats.nnvm.graph_json import Node
from nnef_torch.ir import limits
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref

# What one graph's rules may expand into, beyond the shared limits (`ir.limits`): every item a rule computes becomes
# NNEF literal text, and every tensor it makes one by one an operation, which the NNEF reader reads again.
MAX_COMPUTED_ITEMS = 1 << 18  # items of the arrays all rules of one graph compute (anchors, arange, coordinates)
MAX_NODE_RESULTS = 1 << 12  # tensors one node's rule makes one by one (the outputs of a split)


class Budget:
    """What the rules of one graph have computed so far."""

    def __init__(self) -> None:
        self.items = 0


class Hidden:
    """An output a rule does not compute: a workspace, a dropout mask, saved batch statistics. Reading one is an
    error that names it."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"Hidden({self.what!r})"


class Missing:
    """A parameter the files lack (already reported): a rule that reads it as a weight of known shape gets a
    stand-in, so that the node's other parameters are still checked; any other use skips the node."""

    def __init__(self, name: str):
        self.name = name


class ParameterProblem(Exception):
    """A parameter of this node is missing or has the wrong shape: the converter collects these and reports them
    together, skipping the nodes that depend on this one."""


class OpNode:
    def __init__(self, node: Node, inputs: Sequence[Any], builder: Builder, file: str | None,
                 params: frozenset[int], param_names: Sequence[str | None], mxnet_version: int | None = None,
                 budget: Budget | None = None):
        self.index, self.op, self.name = node.index, node.op, node.name
        self.inputs = list(inputs)
        self.attrs = Attributes(node.attrs, node.where, file)
        self.where = node.where
        self.file = file
        self.builder = builder
        self._params = params  # positions of inputs that are parameters
        self._param_names = list(param_names)  # the argument node name behind each input (None for operators)
        self.problems: list[str] = []
        self.optional_outputs = 0  # outputs some builds of the producer add after the rule's (a workspace)
        # MXNet's version where the graph says it (an MXNet symbol), None for NNVM: operators of both that share a
        # name but not a meaning (take, argmax) read it
        self.mxnet_version = mxnet_version
        self.budget = budget or Budget()

    def fail(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", Location(file=self.file))

    def computed(self, what: str, count: int) -> int:
        """`count`, the items of an array this rule is about to build from attributes or shapes (arange, one-hot
        positions, resampling coordinates), once it and all the graph's rules computed before are within
        MAX_COMPUTED_ITEMS (as NNEF literals, each item costs its text, read again)."""
        where = Location(file=self.file)
        limits.check_computed(f"{self.where}: {what}", count, where, error=ForeignFormatError)
        limits.check_count(f"{self.where}: {what} (with the items computed for the graph before)",
                           self.budget.items + count, MAX_COMPUTED_ITEMS, where, error=ForeignFormatError)
        self.budget.items += count
        return count

    def results(self, what: str, count: int, limit: int = MAX_NODE_RESULTS) -> int:
        """`count`, the tensors or steps this rule is about to make one by one (each at least one operation), once
        it is within `limit` (MAX_NODE_RESULTS by default)."""
        return limits.check_count(f"{self.where}: {what}", count, min(limit, limits.MAX_RESULTS),
                                  Location(file=self.file), error=ForeignFormatError)

    def arity(self, *counts: int) -> None:
        """The node must have one of `counts` inputs."""
        if len(self.inputs) not in counts:
            expected = " or ".join(str(count) for count in counts)
            raise self.fail(f"expected {expected} inputs, found {len(self.inputs)}")

    def allow_extra_outputs(self, count: int) -> None:
        """Some builds of the producer give this node `count` more (hidden) outputs than the rule returns."""
        self.optional_outputs = count

    def input(self, position: int) -> Any:
        if position >= len(self.inputs):
            raise self.fail(f"has {len(self.inputs)} inputs; input {position} is missing")
        if isinstance(self.inputs[position], Missing):
            raise ParameterProblem()
        return self.inputs[position]

    def param(self, position: int, shape: Sequence[int] | None = None, what: str = "weight", *,
              real: bool = True) -> Ref:
        """The parameter at input `position`, whose shape must be `shape` (where given) and whose items must be
        real numbers (floats) unless `real` is False."""
        missing = self.inputs[position] if position < len(self.inputs) else None
        if isinstance(missing, Missing) and shape is not None:  # a stand-in: the error lists it already
            return self.builder.variable(missing.name, "scalar", shape, None)
        value = self.input(position)
        name = self._param_names[position] or f"input {position}"
        if shape is not None and tuple(self.builder.shape(value)) != tuple(int(extent) for extent in shape):
            self.problems.append(f"'{name}' ({what} of {self.where}) has shape {list(self.builder.shape(value))}, "
                                 f"expected {[int(extent) for extent in shape]}")
            raise ParameterProblem()
        if real and self.builder.dtype(value) != "scalar":
            stored = self.param_data(position)
            found = f"dtype {stored[1].dtype}" if stored is not None and hasattr(stored[1], "dtype") \
                else f"NNEF type {self.builder.dtype(value)}"
            self.problems.append(f"'{name}' ({what} of {self.where}) has {found}, expected a floating point type")
            raise ParameterProblem()
        return value

    def param_data(self, position: int) -> tuple[str, Any] | None:
        """(label, values) of the variable read at input `position`, or None when the input is computed."""
        value = self.input(position)
        variable = next((v for v in self.builder.variables if isinstance(value, Ref) and v.name == value.name), None)
        return None if variable is None else (variable.label, self.builder.data[variable.label])

    def shape(self, position: int) -> tuple[int, ...]:
        return self.builder.shape(self.input(position))

    def is_param(self, position: int) -> bool:
        return position in self._params
