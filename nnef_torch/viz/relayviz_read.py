"""RelayViz JSON (the RelayViz proposal for TVM Relay, version 1.0) -> a checked document -> a scene for drawing.

A document is read as untrusted input: every node must have exactly the fields of its kind, each of the right JSON
type; references must be node ids in range (Call.op an Op node, Function params and Let variables Var nodes); and
references must not form a cycle, except one that passes through a Function's body (recursion). Function
`ret_type` and Op `attrs` may be left out, and `ret_type` may be a list (one per output, as `relayviz_write`
writes). A problem raises ForeignFormatError naming the JSON path (`nodes[3].args[1]`), the value found and what
was expected (both shortened), at the line and column of that value.

Every step takes time linear in the document (the JSON reader's scan, the checks, the cycle check, the scene's
outermost Functions, the location of an error), so none needs a work budget; the JSON reader bounds the size and
memory. A document given in memory is held to what JSON text holds: finite numbers, integers within 64 bits,
strings of Unicode text, values nested at most 64 deep.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.formats.json_file import MAX_NESTING, locate, parse_json, read_bytes
from nnef_torch.gc_pause import paused
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
    _Checker(document, lambda: data, file).check()
    return document


def read_relayviz(path: str | os.PathLike) -> dict:
    """The checked RelayViz document in the file at `path`."""
    where = os.fspath(path)
    data = read_bytes(where)
    document = parse_json(data, where)
    _Checker(document, lambda: data, where).check()
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
    """`nodes[3].args[1]`; the document itself is 'the document'. Keys are shortened to SHOWN_CHARS."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif _IDENTIFIER.match(step) and len(step) <= SHOWN_CHARS:
            text += f".{step}" if text else step
        else:
            text += f"[{_shown(step)}]"
    return text or "the document"


# per node_kind: the fields that must be there, all its fields, (field, what) to check, and the references that
# the cycle check follows (all but a Function's body), in the order of FIELDS
_REQUIRED = {kind: frozenset(field for field, (_, required) in spec.items() if required)
             for kind, spec in FIELDS.items()}
_KNOWN = {kind: frozenset(["node_kind", *spec]) for kind, spec in FIELDS.items()}
_SPECS = {kind: tuple((field, what) for field, (what, _) in spec.items()) for kind, spec in FIELDS.items()}
_FOLLOWED = {kind: tuple((field, what) for field, (what, _) in spec.items() if what in ("id", "ids", "binds")
                         and (kind, field) != ("Function", "body")) for kind, spec in FIELDS.items()}
_TARGETED = {kind: tuple((str(field), wanted) for (owner, field), wanted in TARGETS.items() if owner == kind)
             for kind in FIELDS}
_MISSING = object()


class _Checker:
    """Checks a document in time linear in its size; paths for messages are built only for the error."""

    def __init__(self, document: Any, text: Callable[[], str | bytes | None], file: str | None):
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
        with paused():
            self._check()

    def _check(self) -> None:
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
        node = self.node
        for index, item in enumerate(nodes):
            node(item, index)
        for index, item in enumerate(nodes):
            targeted = _TARGETED[item["node_kind"]]
            if targeted:
                self.targets(item, index, targeted)
        self.acyclic(nodes)

    def fields(self, value: dict, path: Path, required: Sequence[str], known: Sequence[str], what: str) -> None:
        for field in required:
            if field not in value:
                raise self.fail(path, f"{what} lacks the field '{field}'")
        for field, item in value.items():
            if field not in known:
                raise self.fail(path + (field,), f"{what} has no field '{_shortened(field)}' (its fields are "
                                f"{', '.join(known)}), found {_shown(item)}")

    def node(self, node: Any, index: int) -> None:
        if type(node) is not dict:
            raise self.expected(("nodes", index), node, "a node (an object with a node_kind)")
        kind = node.get("node_kind", _MISSING)
        if kind is _MISSING:
            raise self.fail(("nodes", index), "node lacks the field 'node_kind'")
        if type(kind) is not str or kind not in FIELDS:
            raise self.expected(("nodes", index, "node_kind"), kind, f"a node_kind among {', '.join(FIELDS)}")
        keys = node.keys()
        if not (_REQUIRED[kind] <= keys and keys <= _KNOWN[kind]):
            spec = FIELDS[kind]
            self.fields(node, ("nodes", index), [field for field, (_, required) in spec.items() if required],
                        ["node_kind", *spec], f"{kind} node")
        for field, what in _SPECS[kind]:
            value = node.get(field, _MISSING)
            if value is not _MISSING:
                _CHECKS[what](self, value, ("nodes", index, field))

    def targets(self, node: dict, index: int, targeted: tuple[tuple[str, str], ...]) -> None:
        """References that must point at a node of one kind do."""
        nodes = self.document["nodes"]
        for field, wanted in targeted:
            value = node[field]
            for position, target in enumerate(value if type(value) is list else [value]):
                found = nodes[target]["node_kind"]
                if found != wanted:
                    inner = (field, position) if type(value) is list else (field,)
                    raise self.expected(("nodes", index) + inner, target, f"the id of {_article(wanted)} {wanted} "
                                        f"node (node {target} is {_article(found)} {found})")

    def acyclic(self, nodes: list[dict]) -> None:
        """No node reaches itself through references, except through a Function's body (an iterative depth-first
        search: each node and each reference is visited once)."""
        state = bytearray(len(nodes))  # 0 unseen, 1 on the current path, 2 done
        for start in range(len(nodes)):
            if state[start]:
                continue
            state[start] = 1
            path, pending, positions = [start], [_followed(nodes[start])], [0]
            while path:
                targets, position = pending[-1], positions[-1]
                if position == len(targets):
                    state[path.pop()] = 2
                    pending.pop()
                    positions.pop()
                    continue
                positions[-1] = position + 1
                target = targets[position]
                if state[target] == 1:
                    current = path[-1]
                    cycle = path[path.index(target):] + [target]
                    inner = [inner for inner, _ in references(nodes[current])
                             if not (nodes[current]["node_kind"] == "Function" and inner == ("body",))][position]
                    raise self.fail(("nodes", current) + inner, f"reference {target} closes a cycle of references "
                                    f"({_cycle(cycle)}); only a Function's body may lead back")
                if state[target] == 0:
                    state[target] = 1
                    path.append(target)
                    pending.append(_followed(nodes[target]))
                    positions.append(0)

    def id(self, value: Any, path: Path) -> None:
        if type(value) is not int or not 0 <= value < self.count:
            span = f"from 0 to {self.count - 1}" if self.count else "(the document has no nodes)"
            raise self.expected(path, value, f"a node id (an integer {span})")

    def ids(self, value: Any, path: Path) -> None:
        if type(value) is not list:
            raise self.expected(path, value, "a list of node ids")
        count = self.count
        for index, item in enumerate(value):
            if type(item) is not int or not 0 <= item < count:
                self.id(item, path + (index,))

    def string(self, value: Any, path: Path) -> None:
        if type(value) is not str or not _unicode(value):
            raise self.expected(path, value, "a string" if type(value) is not str else "Unicode text (this string "
                                "holds an unpaired surrogate)")

    def object(self, value: Any, path: Path) -> None:
        if type(value) is not dict:
            raise self.expected(path, value, "an object")
        _check_json(value, path, self)

    def shape(self, value: Any, path: Path) -> None:
        if type(value) is not list:
            raise self.expected(path, value, "a shape (a list of non-negative integers)")
        for index, item in enumerate(value):
            if type(item) is not int or not 0 <= item <= MAX_INTEGER:
                raise self.expected(path + (index,), item, "a dimension (a non-negative integer" +
                                    (f" of at most {MAX_INTEGER})" if type(item) is int and item > 0 else ")"))

    def index(self, value: Any, path: Path) -> None:
        if type(value) is not int or not 0 <= value <= MAX_INTEGER:
            raise self.expected(path, value, "a tuple index (a non-negative integer" +
                                (f" of at most {MAX_INTEGER})" if type(value) is int and value > 0 else ")"))

    def binds(self, value: Any, path: Path) -> None:
        if type(value) is not dict:
            raise self.expected(path, value, "an object of variable name -> node id")
        for name, item in value.items():
            self.id(item, path + (name,))
            if not _unicode(name):
                raise self.expected(path, name, "variable names of Unicode text (this one holds an unpaired "
                                    "surrogate)")

    def ret_type(self, value: Any, path: Path) -> None:
        if type(value) is list:  # one per output: our extension of the seed
            for index, item in enumerate(value):
                self.tensor_type(item, path + (index,))
        else:
            self.tensor_type(value, path)

    def tensor_type(self, value: Any, path: Path) -> None:
        if type(value) is not dict:
            raise self.expected(path, value, 'a type {"dtype": ..., "shape": [...]} (or a list of them)')
        self.fields(value, path, ("dtype", "shape"), ("dtype", "shape"), "a type")
        self.string(value["dtype"], path + ("dtype",))
        self.shape(value["shape"], path + ("shape",))

    def constant(self, value: Any, path: Path) -> None:
        if type(value) in (int, float, bool):
            self.number(value, path)
            return
        if type(value) is not dict:
            raise self.expected(path, value, 'a number, a boolean or {"array_value": [...], "array_shape": [...]}')
        fields = ("array_value", "array_shape")
        self.fields(value, path, fields, fields, "an array value")
        items, shape = value["array_value"], value["array_shape"]
        if type(items) is not list:
            raise self.expected(path + ("array_value",), items, "a list of numbers")
        for index, item in enumerate(items):  # a check per item, without a call: arrays may be long
            kind = type(item)
            if kind is float and item - item != 0.0 or kind is int and not -MAX_INTEGER <= item <= MAX_INTEGER \
                    or kind not in (float, int, bool):
                self.number(item, path + ("array_value", index))
        self.shape(shape, path + ("array_shape",))
        volume = _volume(shape)
        if volume != len(items):
            wanted = f"{volume}" if volume is not None else f"more than {MAX_INTEGER}"
            raise self.fail(path + ("array_value",), f"expected {wanted} values (the product of array_shape "
                            f"{_shown(shape)}), found {len(items)} values: {_shown(items)}")

    def number(self, value: Any, path: Path) -> None:
        if type(value) not in (int, float, bool):
            raise self.expected(path, value, "a number (or a boolean)")
        if not _finite(value):
            raise self.expected(path, value, "a finite number (JSON has no infinities or NaN)")


_CHECKS: dict[str, Callable[[_Checker, Any, Path], None]] = {
    "id": _Checker.id, "ids": _Checker.ids, "string": _Checker.string, "object": _Checker.object,
    "shape": _Checker.shape, "index": _Checker.index, "binds": _Checker.binds, "ret_type": _Checker.ret_type,
    "constant": _Checker.constant,
}


def _check_json(value: dict, path: Path, checker: _Checker) -> None:
    """A value in memory is JSON data that can be written again: objects with string keys, lists, strings, finite
    numbers, booleans and null, nested at most MAX_NESTING deep. An iterative walk that builds no path but the one
    it reports."""
    stack: list[tuple[Path, Iterator[tuple[Any, Any]], bool]] = [(path, iter(value.items()), True)]
    while stack:
        where, items, keyed = stack[-1]
        step_item = next(items, None)
        if step_item is None:
            stack.pop()
            continue
        step, item = step_item
        if keyed and (type(step) is not str or not _unicode(step)):
            raise checker.expected(where, step, "an object whose keys are strings of Unicode text")
        kind = type(item)
        if kind is dict or kind is list:
            if len(stack) >= MAX_NESTING:
                raise checker.fail(where + (step,), f"value nests more than {MAX_NESTING} levels deep")
            stack.append((where + (step,), iter(item.items()) if kind is dict else enumerate(item), kind is dict))
        elif kind is float and not math.isfinite(item):
            raise checker.expected(where + (step,), item, "a finite number (JSON has no infinities or NaN)")
        elif kind is str and not _unicode(item):
            raise checker.expected(where + (step,), item, "Unicode text (this string holds an unpaired surrogate)")
        elif kind is int and not -MAX_INTEGER <= item <= MAX_INTEGER:
            raise checker.expected(where + (step,), item, f"an integer of at most {MAX_INTEGER} in magnitude")
        elif kind not in (str, int, float, bool, type(None)):
            raise checker.expected(where + (step,), item, "a JSON value")


def _followed(node: dict) -> list[int]:
    """The references the cycle check follows out of a checked node (all but a Function's body), in order."""
    found: list[int] = []
    for field, what in _FOLLOWED[node["node_kind"]]:
        value = node[field]
        if what == "id":
            found.append(value)
        elif what == "ids":
            found.extend(value)
        else:
            found.extend(value.values())
    return found


def _cycle(cycle: list[int]) -> str:
    shown = [str(index) for index in cycle]
    return " -> ".join(shown if len(shown) <= 12 else shown[:6] + ["..."] + shown[-6:])


def _unicode(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (it holds no unpaired surrogate, as JSON read here never does)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _integer(value: Any) -> bool:
    return type(value) is int


def _finite(value: Any) -> bool:
    return math.isfinite(value) if type(value) is float else type(value) is bool or abs(value) <= MAX_INTEGER


def _volume(shape: list[int]) -> int | None:
    """The product of `shape`, or None past MAX_INTEGER (so a long shape of large extents costs little)."""
    if 0 in shape:
        return 0
    volume = 1
    for dim in shape:
        volume *= dim
        if volume > MAX_INTEGER:
            return None
    return volume


_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False)


def _shown(value: Any) -> str:
    """`value` as JSON, up to SHOWN_CHARS characters; encoded lazily, so a large value costs little."""
    text = ""
    try:
        for chunk in _ENCODER.iterencode(value):
            text += chunk[:SHOWN_CHARS + 1]
            if len(text) > SHOWN_CHARS:
                break
    except (TypeError, ValueError, RecursionError):
        return f"a {type(value).__name__}"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _shortened(name: str) -> str:
    return name if len(name) <= SHOWN_CHARS else name[:SHOWN_CHARS - 3] + "..."


def _article(word: str) -> str:
    return "an" if word[0] in "AEIOU" else "a"


def scene_from_relayviz(document: Mapping[str, Any], name: str = "relayviz") -> Scene:
    """The drawing of a RelayViz document (checked again here). Node ids are the document's; Op nodes are drawn
    inside the Calls that name them, and each outermost Function (one no node refers to) feeds an OUTPUT node."""
    check_relayviz(document)
    nodes = document["nodes"]
    params = {param for node in nodes if node["node_kind"] == "Function" for param in node["params"]}
    functions = {index for index, node in enumerate(nodes) if node["node_kind"] == "Function"}
    referrers: dict[int, list[int]] = {}  # of each Function that some node refers to
    referenced = set()  # nodes given as values (Op nodes named by Calls are not)
    links: list[tuple[int, int, str]] = []  # (source, target, label) of each edge, in order
    labels: dict[Path, str] = {}
    for index, node in enumerate(nodes):
        call = node["node_kind"] == "Call"
        for inner, target in references(node):
            if target in functions:
                referrers.setdefault(target, []).append(index)
            if call and inner == ("op",):
                continue
            referenced.add(target)
            label = labels.get(inner)
            if label is None:
                label = labels[inner] = str(inner[1]) if inner[0] == "binds" else json_path(inner)
            links.append((target, index, label))
    # a Function is outermost when every node that refers to it lies inside it (a recursive call): each referrer
    # is reached from the Function, and so lies in its strongly connected component
    component = _components(nodes) if referrers else []
    outermost = [index for index in sorted(functions)
                 if all(component[referrer] == component[index] for referrer in referrers.get(index, ()))]
    drawn: dict[int, Node] = {}
    for index, node in enumerate(nodes):
        if node["node_kind"] != "Op" or index in referenced:  # an Op node passed as a value is drawn too
            drawn[index] = _DRAWN[node["node_kind"]](index, node, nodes, params)
    for index in outermost:
        drawn[index].outputs = _returned(nodes[index], drawn[index].name)
    edges = []
    for source, target, label in links:
        outputs = drawn[source].outputs
        edges.append(Edge(source, target, label, outputs[0].name if len(outputs) == 1 else None))
    for count, index in enumerate(outermost):
        output, function = len(nodes) + count, drawn[index]
        drawn[output] = Node(output, OUTPUT, "output" if len(outermost) == 1 else f"output#{index}",
                             outputs=list(function.outputs))
        edges.append(Edge(index, output, "", function.outputs[0].name if len(function.outputs) == 1 else None))
    return Scene(name, drawn, edges)


def _components(nodes: Sequence[Any]) -> list[int]:
    """The strongly connected component of each node of the reference graph (Tarjan's algorithm, iterative)."""
    count = len(nodes)
    order, low, component = [-1] * count, [0] * count, [-1] * count
    stack: list[int] = []
    on_stack = bytearray(count)
    visited = components = 0
    for root in range(count):
        if order[root] != -1:
            continue
        order[root] = low[root] = visited
        visited += 1
        stack.append(root)
        on_stack[root] = 1
        work = [(root, [target for _, target in references(nodes[root])], 0)]
        while work:
            current, targets, position = work[-1]
            if position < len(targets):
                work[-1] = (current, targets, position + 1)
                target = targets[position]
                if order[target] == -1:
                    order[target] = low[target] = visited
                    visited += 1
                    stack.append(target)
                    on_stack[target] = 1
                    work.append((target, [inner for _, inner in references(nodes[target])], 0))
                elif on_stack[target]:
                    low[current] = min(low[current], order[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[current])
            if low[current] == order[current]:
                while True:
                    member = stack.pop()
                    on_stack[member] = 0
                    component[member] = components
                    if member == current:
                        break
                components += 1
    return component


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
