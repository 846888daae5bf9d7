"""An NNVM or MXNet node as its import rule sees it: its inputs as IR values, its attributes by type, and errors
that name it."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.frontends.nnvm.attrs import Attributes
from nnef_torch.frontends.nnvm.graph_json import Node
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref


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
                 params: frozenset[int], param_names: Sequence[str | None], mxnet_version: int | None = None):
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

    def fail(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", Location(file=self.file))

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

    def param(self, position: int, shape: Sequence[int] | None = None, what: str = "weight") -> Ref:
        """The parameter at input `position`, whose shape must be `shape` (where given)."""
        missing = self.inputs[position] if position < len(self.inputs) else None
        if isinstance(missing, Missing) and shape is not None:  # a stand-in: the error lists it already
            return self.builder.variable(missing.name, "scalar", shape, None)
        value = self.input(position)
        if shape is not None and tuple(self.builder.shape(value)) != tuple(int(extent) for extent in shape):
            name = self._param_names[position] or f"input {position}"
            self.problems.append(f"'{name}' ({what} of {self.where}) has shape {list(self.builder.shape(value))}, "
                                 f"expected {[int(extent) for extent in shape]}")
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
