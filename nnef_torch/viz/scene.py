"""What every drawing is made of: nodes with their outputs' types, and edges labelled by the argument they feed.

A scene is the drawing model shared by the renderers (DOT, the terminal tree, the HTML page). IR graphs become
scenes (`viz.from_ir`), and so do RelayViz documents (`viz.relayviz_read`), so any source renders the same way.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# node kinds: what a node stands for
INPUT, VARIABLE, CONSTANT, OPERATION, FRAGMENT, OUTPUT = "input", "variable", "constant", "operation", "fragment", \
    "output"
ELIDED = "elided"  # stands for the nodes left out of a neighbourhood, on one side of a kept node
# RelayViz's node kinds without an NNEF counterpart (drawn when a RelayViz document is read)
FUNCTION, TUPLE, GET_ITEM, LET, IF, BIND = "function", "tuple", "get_item", "let", "if", "bind"


@dataclass(frozen=True)
class TensorType:
    """One output of a node: its tensor name, element type and shape (None where unknown), and its graph.quant
    entry written out (None without one)."""

    name: str
    dtype: str | None
    shape: tuple[int, ...] | None
    quant: str | None = None

    def describe(self) -> str:
        dims = "?" if self.shape is None else ",".join(str(dim) for dim in self.shape)
        return f"{self.dtype or '?'}[{dims}]"


@dataclass(frozen=True)
class Folded:
    """A variable or constant drawn inside the node that reads it (the HTML viewer folds them), with the shape ops
    that were applied to it on the way (`via`) and its values' statistics where they were read."""

    param: str  # the argument it feeds ('filter', 'bias', 'values[1]')
    name: str
    kind: str  # VARIABLE or CONSTANT
    type: TensorType  # what the consumer reads (after `via`)
    label: str | None = None  # a variable's label
    via: tuple[str, ...] = ()  # shape ops between it and its consumer, in order
    data_dtype: str | None = None  # the stored values' element type ('float32'), where they were read
    stats: tuple[tuple[str, float], ...] = ()  # (min, max, mean, std) where the values were read


@dataclass
class Node:
    id: int  # unique in its scene, in topological order where the source has one
    kind: str
    name: str  # what the node is called: an input's or variable's name, an operation's first output
    op: str | None = None  # the operation (or the fragment of a collapsed invocation)
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: list[TensorType] = field(default_factory=list)
    label: str | None = None  # a variable's label
    scope: tuple[str, ...] = ()  # the fragment invocations it was expanded from, outermost first
    value: Any = None  # a constant's value (small ones), for the label
    folded: tuple[Folded, ...] = ()  # the variables and constants it reads, drawn inside it (`viz.fold`)

    @property
    def key(self) -> str:
        """The node's identifier in DOT, SVG and HTML."""
        return f"n{self.id}"


@dataclass(frozen=True)
class Edge:
    source: int  # node ids
    target: int
    label: str  # the argument it feeds ('input', 'values[1]'), or a RelayViz field ('body', 'cond')
    tensor: str | None = None  # the tensor it carries
    quant: str | None = None  # that tensor's graph.quant entry


@dataclass
class Scene:
    name: str
    nodes: dict[int, Node]
    edges: list[Edge]
    scopes: dict[str, str] = field(default_factory=dict)  # fragment invocation -> its caption

    def operations(self) -> Iterator[Node]:
        return (node for node in self.nodes.values() if node.kind in (OPERATION, FRAGMENT))

    def find(self, name: str) -> list[Node]:
        """The nodes called `name`, or whose outputs include a tensor `name`, or whose key is `name`."""
        return [node for node in self.nodes.values()
                if node.name == name or node.key == name or any(t.name == name for t in node.outputs)]
