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


class ParameterProblem(Exception):
    """A parameter of this node is missing or has the wrong shape: the converter collects these and reports them
    together, skipping the nodes that depend on this one."""


class OpNode:
    def __init__(self, node: Node, inputs: Sequence[Any], builder: Builder, file: str | None,
                 params: frozenset[int], param_names: Sequence[str | None]):
        self.index, self.op, self.name = node.index, node.op, node.name
        self.inputs = list(inputs)
        self.attrs = Attributes(node.attrs, node.where, file)
        self.where = node.where
        self.file = file
        self.builder = builder
        self._params = params  # positions of inputs that are parameters
        self._param_names = list(param_names)  # the argument node name behind each input (None for operators)
        self.problems: list[str] = []

    def fail(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", Location(file=self.file))

    def arity(self, *counts: int) -> None:
        """The node must have one of `counts` inputs."""
        if len(self.inputs) not in counts:
            expected = " or ".join(str(count) for count in counts)
            raise self.fail(f"expected {expected} inputs, found {len(self.inputs)}")

    def input(self, position: int) -> Any:
        if position >= len(self.inputs):
            raise self.fail(f"has {len(self.inputs)} inputs; input {position} is missing")
        return self.inputs[position]

    def param(self, position: int, shape: Sequence[int] | None = None, what: str = "weight") -> Ref:
        """The parameter at input `position`, whose shape must be `shape` (where given)."""
        value = self.input(position)
        if shape is not None and tuple(self.builder.shape(value)) != tuple(int(extent) for extent in shape):
            name = self._param_names[position] or f"input {position}"
            self.problems.append(f"'{name}' ({what} of {self.where}) has shape {list(self.builder.shape(value))}, "
                                 f"expected {[int(extent) for extent in shape]}")
            raise ParameterProblem()
        return value

    def shape(self, position: int) -> tuple[int, ...]:
        return self.builder.shape(self.input(position))

    def is_param(self, position: int) -> bool:
        return position in self._params
