"""RelayViz JSON (the RelayViz proposal for TVM Relay, version 1.0) -> a checked document -> a scene for drawing.

A document is read as untrusted input: every node must have exactly the fields of its kind, each of the right JSON
type; references must be node ids in range (Call.op an Op node, Function params and Let variables Var nodes); and
references must not form a cycle, except one that passes through a Function's body (recursion). Function
`ret_type` and Op `attrs` may be left out, and `ret_type` may be a list (one per output, as `relayviz_write`
writes). A problem raises ForeignFormatError naming the JSON path (`nodes[3].args[1]`), the value found and what
was expected, at the line and column of that value.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.frontends.json_file import locate, parse_json, read_json
from nnef_torch.viz.from_ir import SHOWN_VALUES
from nnef_torch.viz.scene import (
    BIND,
    CONSTANT,
    FUNCTION,
    GET_ITEM,
    IF,
    INPUT,
    LET,
    OPERATION,
    OUTPUT,
    TUPLE,
    VARIABLE,
    Edge,
    Node,
    Scene,
    TensorType,
)

Path = tuple[str | int, ...]
ROOT_FIELDS = ("format", "version", "nodes")
# node_kind -> its fields in the seed's order: field -> (what its value is, whether it must be there)
FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "Function": {"body": ("id", True), "params": ("ids", True), "ret_type": ("ret_type", False)},
    "Var": {"name": ("string", True), "dtype": ("string", True), "shape": ("shape", True)},
    "Call": {"op": ("id", True), "args": ("ids", True)},
    "Op": {"name": ("string", True), "attrs": ("object", False)},
    "Const": {"value": ("constant", True), "dtype": ("string", True)},
    "Bind": {"expr": ("id", True), "binds": ("binds", True)},
    "Tuple": {"fields": ("ids", True)},
    "Let": {"variable": ("id", True), "value": ("id", True), "body": ("id", True)},
    "If": {"cond": ("id", True), "true_branch": ("id", True), "false_branch": ("id", True)},
    "TupleGetItem": {"tuple_value": ("id", True), "index": ("index", True)},
}
# references that must point at one kind of node: (node_kind, field) -> the kind
TARGETS: dict[tuple[str, str | int], str] = {("Call", "op"): "Op", ("Function", "params"): "Var",
                                             ("Let", "variable"): "Var"}
SHOWN_CHARS = 60  # an offending value is quoted up to this many characters
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_relayviz(data: bytes | str, file: str | None = None) -> dict:
    """The checked RelayViz document in `data` (JSON text, or its UTF-8 bytes)."""
    document = parse_json(data, file)
    text = data.decode("utf-8-sig") if isinstance(data, bytes) else data  # parse_json has decoded it once already
    _Checker(document, lambda: text, file).check()
    return document


def read_relayviz(path: str | os.PathLike) -> dict:
    """The checked RelayViz document in the file at `path`."""
    where = os.fspath(path)
    document = read_json(where)

    def text() -> str | None:  # read again only to place an error
        try:
            with open(where, "rb") as handle:
                return handle.read().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError):
            return None

    _Checker(document, text, where).check()
    return document


def check_relayviz(document: Any) -> None:
    """Check a document already in memory (errors name JSON paths, without lines and columns)."""
    _Checker(document, lambda: None, None).check()


def references(node: Mapping[str, Any]) -> Iterator[tuple[Path, int]]:
    """The node references of a checked node, each with its path inside the node: ('args', 1), ('body',)."""
    for field, (what, _) in FIELDS[node["node_kind"]].items():
        if what == "id":
            yield (field,), node[field]
        elif what == "ids":
            for index, item in enumerate(node[field]):
                yield (field, index), item
        elif what == "binds":
            for name, item in node[field].items():
                yield (field, name), item


def json_path(path: Path) -> str:
    """`nodes[3].args[1]`; the document itself is 'the document'."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif _IDENTIFIER.match(step):
            text += f".{step}" if text else step
        else:
            text += f"[{json.dumps(step, ensure_ascii=False)}]"
    return text or "the document"


class _Checker:
    def __init__(self, document: Any, text: Callable[[], str | None], file: str | None):
        self.document = document
        self.text = text
        self.file = file
        self.count = 0  # nodes in the document

    def fail(self, path: Path, message: str) -> ForeignFormatError:
        where = Location(self.file)
        text = self.text()
        if text is not None:
            try:
                line, column = locate(text, path)
                where = Location(self.file, line, column)
            except (KeyError, IndexError, ValueError):
                pass
        return ForeignFormatError(f"{json_path(path)}: {message}", where)

    def expected(self, path: Path, value: Any, what: str) -> ForeignFormatError:
        return self.fail(path, f"expected {what}, found {_shown(value)}")

    def check(self) -> None:
        document = self.document
        if not isinstance(document, dict):
            raise self.expected((), document, "a RelayViz object with the fields " + ", ".join(ROOT_FIELDS))
        self.fields(document, (), ROOT_FIELDS, ROOT_FIELDS, "the root object")
        if document["format"] != "relayviz":
            raise self.expected(("format",), document["format"], 'the format "relayviz"')
        version = document["version"]
        if not (isinstance(version, list) and len(version) == 2 and all(_integer(part) for part in version)):
            raise self.expected(("version",), version, "a version [major, minor] of two integers")
        if version[0] != 1 or version[1] < 0:
            raise self.expected(("version",), version, "version [1, minor] (this reader knows RelayViz 1.x)")
        nodes = document["nodes"]
        if not isinstance(nodes, list):
            raise self.expected(("nodes",), nodes, "a list of nodes")
        self.count = len(nodes)
        for index, node in enumerate(nodes):
            self.node(node, ("nodes", index))
        for index, node in enumerate(nodes):
            self.targets(node, ("nodes", index))
        self.acyclic(nodes)

    def fields(self, value: dict, path: Path, required: Sequence[str], known: Sequence[str], what: str) -> None:
        for field in required:
            if field not in value:
                raise self.fail(path, f"{what} lacks the field '{field}'")
        for field, item in value.items():
            if field not in known:
                raise self.fail(path + (field,), f"{what} has no field '{field}' (its fields are "
                                f"{', '.join(known)}), found {_shown(item)}")

    def node(self, node: Any, path: Path) -> None:
        if not isinstance(node, dict):
            raise self.expected(path, node, "a node (an object with a node_kind)")
        if "node_kind" not in node:
            raise self.fail(path, "node lacks the field 'node_kind'")
        kind = node["node_kind"]
        if kind not in FIELDS:
            raise self.expected(path + ("node_kind",), kind, f"a node_kind among {', '.join(FIELDS)}")
        spec = FIELDS[kind]
        self.fields(node, path, [field for field, (_, required) in spec.items() if required],
                    ["node_kind", *spec], f"{kind} node")
        for field, (what, _) in spec.items():
            if field in node:
                _CHECKS[what](self, node[field], path + (field,))

    def targets(self, node: dict, path: Path) -> None:
        """References that must point at a node of one kind do."""
        nodes = self.document["nodes"]
        for inner, target in references(node):
            wanted = TARGETS.get((node["node_kind"], inner[0]))
            if wanted is not None and nodes[target]["node_kind"] != wanted:
                raise self.expected(path + inner, target, f"the id of {_article(wanted)} {wanted} node (node "
                                    f"{target} is {_article(nodes[target]['node_kind'])} "
                                    f"{nodes[target]['node_kind']})")

    def acyclic(self, nodes: list[dict]) -> None:
        """No node reaches itself through references, except through a Function's body."""
        state = [0] * len(nodes)  # 0 unseen, 1 on the current path, 2 done
        for start in range(len(nodes)):
            if state[start]:
                continue
            stack: list[tuple[int, Iterator[tuple[Path, int]]]] = [(start, self.followed(nodes[start]))]
            state[start] = 1
            while stack:
                current, pending = stack[-1]
                step = next(pending, None)
                if step is None:
                    state[current] = 2
                    stack.pop()
                    continue
                inner, target = step
                if state[target] == 1:
                    cycle = [index for index, _ in stack]
                    cycle = cycle[cycle.index(target):] + [target]
                    raise self.fail(("nodes", current) + inner, f"reference {target} closes a cycle of references "
                                    f"({' -> '.join(map(str, cycle))}); only a Function's body may lead back")
                if state[target] == 0:
                    state[target] = 1
                    stack.append((target, self.followed(nodes[target])))

    @staticmethod
    def followed(node: dict) -> Iterator[tuple[Path, int]]:
        return ((inner, target) for inner, target in references(node)
                if not (node["node_kind"] == "Function" and inner == ("body",)))

    def id(self, value: Any, path: Path) -> None:
        if not _integer(value) or not 0 <= value < self.count:
            span = f"from 0 to {self.count - 1}" if self.count else "(the document has no nodes)"
            raise self.expected(path, value, f"a node id (an integer {span})")

    def ids(self, value: Any, path: Path) -> None:
        if not isinstance(value, list):
            raise self.expected(path, value, "a list of node ids")
        for index, item in enumerate(value):
            self.id(item, path + (index,))

    def string(self, value: Any, path: Path) -> None:
        if not isinstance(value, str):
            raise self.expected(path, value, "a string")

    def object(self, value: Any, path: Path) -> None:
        if not isinstance(value, dict):
            raise self.expected(path, value, "an object")

    def shape(self, value: Any, path: Path) -> None:
        if not isinstance(value, list):
            raise self.expected(path, value, "a shape (a list of non-negative integers)")
        for index, item in enumerate(value):
            if not _integer(item) or item < 0:
                raise self.expected(path + (index,), item, "a dimension (a non-negative integer)")

    def index(self, value: Any, path: Path) -> None:
        if not _integer(value) or value < 0:
            raise self.expected(path, value, "a tuple index (a non-negative integer)")

    def binds(self, value: Any, path: Path) -> None:
        if not isinstance(value, dict):
            raise self.expected(path, value, "an object of variable name -> node id")
        for name, item in value.items():
            self.id(item, path + (name,))

    def ret_type(self, value: Any, path: Path) -> None:
        if isinstance(value, list):  # one per output: our extension of the seed
            for index, item in enumerate(value):
                self.tensor_type(item, path + (index,))
        else:
            self.tensor_type(value, path)

    def tensor_type(self, value: Any, path: Path) -> None:
        if not isinstance(value, dict):
            raise self.expected(path, value, 'a type {"dtype": ..., "shape": [...]} (or a list of them)')
        self.fields(value, path, ("dtype", "shape"), ("dtype", "shape"), "a type")
        self.string(value["dtype"], path + ("dtype",))
        self.shape(value["shape"], path + ("shape",))

    def constant(self, value: Any, path: Path) -> None:
        if isinstance(value, (int, float)):  # bool included
            return
        if not isinstance(value, dict):
            raise self.expected(path, value, 'a number, a boolean or {"array_value": [...], "array_shape": [...]}')
        fields = ("array_value", "array_shape")
        self.fields(value, path, fields, fields, "an array value")
        items, shape = value["array_value"], value["array_shape"]
        if not isinstance(items, list):
            raise self.expected(path + ("array_value",), items, "a list of numbers")
        for index, item in enumerate(items):
            if not isinstance(item, (int, float)):
                raise self.expected(path + ("array_value", index), item, "a number (or a boolean)")
        self.shape(shape, path + ("array_shape",))
        if _volume(shape, len(items)) != len(items):
            raise self.fail(path + ("array_value",), f"expected {_volume(shape, None)} values (the product of "
                            f"array_shape {shape}), found {len(items)} values: {_shown(items)}")


_CHECKS: dict[str, Callable[[_Checker, Any, Path], None]] = {
    "id": _Checker.id, "ids": _Checker.ids, "string": _Checker.string, "object": _Checker.object,
    "shape": _Checker.shape, "index": _Checker.index, "binds": _Checker.binds, "ret_type": _Checker.ret_type,
    "constant": _Checker.constant,
}


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _volume(shape: list[int], bound: int | None) -> int:
    """The product of `shape`; past `bound` the exact product does not matter, so it stops there."""
    if 0 in shape:
        return 0
    volume = 1
    for dim in shape:
        volume *= dim
        if bound is not None and volume > bound:
            return volume
    return volume


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _article(word: str) -> str:
    return "an" if word[0] in "AEIOU" else "a"


def scene_from_relayviz(document: Mapping[str, Any], name: str = "relayviz") -> Scene:
    """The drawing of a RelayViz document (checked again here). Node ids are the document's; Op nodes are drawn
    inside the Calls that name them, and each outermost Function (one no node refers to) feeds an OUTPUT node."""
    check_relayviz(document)
    nodes = document["nodes"]
    params = {param for node in nodes if node["node_kind"] == "Function" for param in node["params"]}
    referrers: dict[int, list[int]] = {}
    referenced = set()  # nodes given as values (Op nodes named by Calls are not)
    for index, node in enumerate(nodes):
        for inner, target in references(node):
            referrers.setdefault(target, []).append(index)
            if not (node["node_kind"] == "Call" and inner == ("op",)):
                referenced.add(target)
    outermost = [index for index, node in enumerate(nodes) if node["node_kind"] == "Function"
                 and _outermost(index, referrers.get(index, []), nodes)]
    drawn: dict[int, Node] = {}
    for index, node in enumerate(nodes):
        if node["node_kind"] != "Op" or index in referenced:  # an Op node passed as a value is drawn too
            drawn[index] = _DRAWN[node["node_kind"]](index, node, nodes, params)
    for index in outermost:
        drawn[index].outputs = _returned(nodes[index], drawn[index].name)
    edges = []
    for index, node in enumerate(nodes):
        for inner, target in references(node):
            if node["node_kind"] == "Call" and inner == ("op",):
                continue
            label = str(inner[1]) if inner[0] == "binds" else json_path(inner)
            source = drawn[target]
            edges.append(Edge(target, index, label, source.outputs[0].name if len(source.outputs) == 1 else None))
    for count, index in enumerate(outermost):
        output, function = len(nodes) + count, drawn[index]
        drawn[output] = Node(output, OUTPUT, "output" if len(outermost) == 1 else f"output#{index}",
                             outputs=list(function.outputs))
        edges.append(Edge(index, output, "", function.outputs[0].name if len(function.outputs) == 1 else None))
    return Scene(name, drawn, edges)


def _outermost(function: int, referrers: list[int], nodes: Sequence[Any]) -> bool:
    """Whether every node that refers to `function` lies inside it (a recursive call), so nothing uses it."""
    if not referrers:
        return True
    inside, pending = {function}, [function]
    while pending:
        for _, target in references(nodes[pending.pop()]):
            if target not in inside:
                inside.add(target)
                pending.append(target)
    return all(referrer in inside for referrer in referrers)


def _returned(function: Mapping[str, Any], name: str) -> list[TensorType]:
    kind = function.get("ret_type")
    if kind is None:
        return []
    if isinstance(kind, dict):
        return [TensorType(name, kind["dtype"], tuple(kind["shape"]))]
    return [TensorType(f"{name}.{index}", item["dtype"], tuple(item["shape"])) for index, item in enumerate(kind)]


def _var(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
    shape = tuple(node["shape"])
    return Node(index, INPUT if index in params else VARIABLE, node["name"], attrs={"shape": list(shape)},
                outputs=[TensorType(node["name"], node["dtype"], shape)])


def _const(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
    value = node["value"]
    name = f"const#{index}"
    if isinstance(value, dict):
        shape = tuple(value["array_shape"])
        items = value["array_value"]
        shown = items if len(items) <= SHOWN_VALUES else None
    else:
        shape, shown = (), value
    return Node(index, CONSTANT, name, attrs={"shape": list(shape)}, outputs=[TensorType(name, node["dtype"], shape)],
                value=shown)


def _call(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
    op = nodes[node["op"]]
    return Node(index, OPERATION, f"{op['name']}#{index}", op["name"], dict(op.get("attrs", {})))


def _op(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
    return Node(index, OPERATION, node["name"], node["name"], dict(node.get("attrs", {})))


def _get_item(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
    return Node(index, GET_ITEM, f".{node['index']}", attrs={"index": node["index"]})


def _structure(kind: str, word: str) -> Callable[[int, Mapping[str, Any], Sequence[Any], set[int]], Node]:
    def drawn(index: int, node: Mapping[str, Any], nodes: Sequence[Any], params: set[int]) -> Node:
        return Node(index, kind, f"{word}#{index}")
    return drawn


_DRAWN = {"Var": _var, "Const": _const, "Call": _call, "Op": _op, "TupleGetItem": _get_item,
          "Function": _structure(FUNCTION, "function"), "Tuple": _structure(TUPLE, "tuple"),
          "Let": _structure(LET, "let"), "If": _structure(IF, "if"), "Bind": _structure(BIND, "bind")}
