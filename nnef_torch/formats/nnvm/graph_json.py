"""NNVM graph JSON (what `nnvm::pass::SaveJSON` writes; MXNet's `-symbol.json` is the same container): the checked
nodes, argument nodes, heads and typed graph attributes.

A node is `{"op", "name", "inputs", "attrs"}` (older writers: `"attr"` or `"param"`), with optional
`"control_deps"`; an input or head is an entry `[node, output]` or `[node, output, version]`. Nodes come in
topological order, so an entry names an earlier node. `node_row_ptr`, where present, is the running sum of the
nodes' output counts (checked once the counts are known, by `check_row_pointers`). Graph attributes are typed pairs:
`["int", 10901]`, `["list_int", [...]]`, `["list_shape", [[...], ...]]`, `["list_str", [...]]`, `["str", "..."]`.
Every field's JSON type is checked, with a message that names the node (index and name) and quotes only the start
of what it found; a graph has at most MAX_HEADS heads.
"""
from __future__ import annotations

import reprlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.ir.limits import check_count

MAX_HEADS = 1 << 12  # outputs of a graph (real ones have a few; each becomes an output of the NNEF graph)
_ATTR_KEYS = ("param", "attr", "attrs")  # oldest first: a later key's value wins
# MXNet before 0.9 also wrote `backward_source_id` (-1 for every node of a symbol); it carries no meaning here
_NODE_KEYS = frozenset({"op", "name", "inputs", "control_deps", "subgraphs", "backward_source_id", *_ATTR_KEYS})
_TYPED = {"int", "size_t", "list_int", "list_shape", "list_str", "str"}
# graph attributes this reader uses, with the one type each may have
_KNOWN = {"shape": "list_shape", "dtype": "list_int", "mxnet_version": "int"}
_REPR = reprlib.Repr()
_REPR.maxlist = _REPR.maxdict = 6
_REPR.maxstring = _REPR.maxother = 40
_REPR.maxlevel = 3


@dataclass(frozen=True, slots=True)
class Entry:
    node: int
    index: int


@dataclass(frozen=True, slots=True)
class Node:
    index: int
    op: str  # 'null' for an argument (input or parameter)
    name: str
    inputs: tuple[Entry, ...]
    attrs: dict[str, str]
    control_deps: tuple[int, ...]

    @property
    def where(self) -> str:
        return named(self.index, self.name) + (f" ({self.op[:80]})" if self.op != "null" else "")


@dataclass(frozen=True)
class GraphJSON:
    file: str | None
    nodes: tuple[Node, ...]
    arg_nodes: tuple[int, ...]
    heads: tuple[Entry, ...]
    row_ptr: tuple[int, ...] | None
    attrs: dict[str, Any]  # typed graph attributes by name, as Python values

    @property
    def mxnet_version(self) -> int | None:
        version = self.attrs.get("mxnet_version")
        return version if isinstance(version, int) else None


def parse_graph(document: Any, file: str | None) -> GraphJSON:
    def fail(message: str) -> ForeignFormatError:
        return ForeignFormatError(message, Location(file=file))

    if not isinstance(document, dict):
        raise fail(f"expected a JSON object with nodes, arg_nodes and heads, found {type(document).__name__}")
    missing = [key for key in ("nodes", "arg_nodes", "heads") if key not in document]
    if missing:
        raise fail(f"the graph has no {', '.join(missing)} (an NNVM graph has nodes, arg_nodes and heads)")
    raw_nodes = document["nodes"]
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise fail("'nodes' must be a non-empty list")
    nodes = tuple(_node(raw, index, fail) for index, raw in enumerate(raw_nodes))
    arg_nodes = _indices(document["arg_nodes"], len(nodes), "arg_nodes", fail)
    for index in arg_nodes:
        if nodes[index].op != "null":
            raise fail(f"arg_nodes names {nodes[index].where}, which is an operator, not an argument")
    listed = set(arg_nodes)
    for node in nodes:
        if node.op == "null" and node.index not in listed:
            raise fail(f"{node.where} is an argument (op 'null') but arg_nodes does not list it")
    heads = document["heads"]
    if not isinstance(heads, list) or not heads:
        raise fail("'heads' must be a non-empty list of entries [node, output, version]")
    check_count("'heads' (the graph's outputs)", len(heads), MAX_HEADS, Location(file=file), error=ForeignFormatError)
    head_entries = tuple(_entry(head, len(nodes), f"head {i}", fail, ordered=False) for i, head in enumerate(heads))
    row_ptr = None
    if document.get("node_row_ptr") is not None:
        row_ptr = _indices(document["node_row_ptr"], None, "node_row_ptr", fail)
        if len(row_ptr) != len(nodes) + 1:
            raise fail(f"node_row_ptr has {len(row_ptr)} items; a graph of {len(nodes)} nodes needs {len(nodes) + 1}")
    return GraphJSON(file, nodes, arg_nodes, head_entries, row_ptr, _graph_attrs(document.get("attrs"), fail))


def check_row_pointers(graph: GraphJSON, output_counts: Sequence[tuple[int, int]]) -> None:
    """`node_row_ptr` must start at 0 and grow by each node's output count: `output_counts[i]` is the range
    (fewest, most) node i may have, as builds of a producer differ (MKLDNN max pooling adds a workspace)."""
    if graph.row_ptr is None:
        return
    if graph.row_ptr[0] != 0:
        raise ForeignFormatError(f"node_row_ptr[0] is {graph.row_ptr[0]}, expected 0 (it is the running sum of the "
                                 "nodes' output counts)", Location(file=graph.file))
    for index, (fewest, most) in enumerate(output_counts):
        step = graph.row_ptr[index + 1] - graph.row_ptr[index]
        if not fewest <= step <= most:
            expected = str(fewest) if fewest == most else f"{fewest} to {most}"
            raise ForeignFormatError(f"node_row_ptr[{index + 1}] - node_row_ptr[{index}] is {step}, but "
                                     f"{graph.nodes[index].where} has {expected} output(s) (node_row_ptr is the "
                                     "running sum of the nodes' output counts)", Location(file=graph.file))


def _node(raw: Any, index: int, fail: Any) -> Node:
    if not isinstance(raw, dict):
        raise fail(f"node {index} must be a JSON object, found {type(raw).__name__}")
    where = f"node {index}"
    for key in ("op", "name"):
        if not isinstance(raw.get(key), str):
            raise fail(f"{where} has no '{key}' string")
    op, name = raw["op"], raw["name"]
    where = named(index, name)
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        raise fail(f"{where} has unknown keys {_shown(unknown)}")
    if raw.get("subgraphs"):
        raise fail(f"{where} ({op}) has subgraphs (control flow), which are not supported")
    inputs = raw.get("inputs", [])
    if not isinstance(inputs, list):
        raise fail(f"{where}: 'inputs' must be a list of entries")
    entries = tuple(_entry(entry, index, f"{where}: input {i}", fail) for i, entry in enumerate(inputs))
    attrs: dict[str, str] = {}
    for key in _ATTR_KEYS:
        values = raw.get(key)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise fail(f"{where}: '{key}' must map attribute names to strings")
        attrs = values if not attrs else {**attrs, **values}  # the document's own dict where there is one
    deps = _indices(raw.get("control_deps", []), index, f"{where}: control_deps", fail)
    if op == "null" and entries:
        raise fail(f"{where} is an argument (op 'null') but has inputs")
    return Node(index, op, name, entries, attrs, deps)


def _entry(raw: Any, limit: int, what: str, fail: Any, ordered: bool = True) -> Entry:
    """[node, output] or [node, output, version]; `node` must be below `limit`: an earlier node when `ordered`."""
    if not (isinstance(raw, list) and len(raw) in (2, 3) and all(type(v) is int for v in raw)):
        raise fail(f"{what} must be an entry [node, output] or [node, output, version], found {_shown(raw)}")
    node, output = raw[0], raw[1]
    if not 0 <= node < limit:
        problem = "comes later: the nodes are not in topological order, or they form a cycle" \
            if ordered and node >= limit else "is out of range"
        raise fail(f"{what} reads node {node}, which {problem}")
    if output < 0:
        raise fail(f"{what} reads output {output} of node {node}")
    return Entry(node, output)


def _indices(raw: Any, limit: int | None, what: str, fail: Any) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(type(v) is int for v in raw):
        raise fail(f"{what} must be a list of integers")
    for value in raw:
        if value < 0 or (limit is not None and value >= limit):
            raise fail(f"{what} holds {value}, out of range" + (f" (0 to {limit - 1})" if limit else ""))
    return tuple(raw)


def _graph_attrs(raw: Any, fail: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise fail("the graph's 'attrs' must be an object of typed values [type, value]")
    attrs: dict[str, Any] = {}
    for name, typed in raw.items():
        if not (isinstance(typed, list) and len(typed) == 2 and isinstance(typed[0], str) and typed[0] in _TYPED):
            raise fail(f"graph attribute {_shown(name)} must be [type, value] with type one of {sorted(_TYPED)}, "
                       f"found {_shown(typed)}")
        kind, value = typed
        if name in _KNOWN and kind != _KNOWN[name]:
            raise fail(f"graph attribute '{name}' must be a {_KNOWN[name]}, found a {kind}")
        ok = (type(value) is int if kind in ("int", "size_t") else isinstance(value, str) if kind == "str"
              else isinstance(value, list) and all(_typed_item(kind, item) for item in value))
        if not ok:
            raise fail(f"graph attribute {_shown(name)} is not a valid {kind}: {_shown(value)}")
        attrs[name] = value
    return attrs


def _typed_item(kind: str, item: Any) -> bool:
    if kind == "list_int":
        return type(item) is int
    if kind == "list_str":
        return isinstance(item, str)
    return isinstance(item, list) and all(type(extent) is int for extent in item)  # list_shape


def _shown(value: Any) -> str:
    """A JSON value as a message quotes it: its first items and characters (nothing large is built)."""
    return _REPR.repr(value)


def named(index: int, name: str) -> str:
    """How messages name a node: its index and (the start of) its name."""
    return f"node {index} '{name if len(name) <= 80 else name[:80] + '...'}'"
