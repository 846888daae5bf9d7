"""Scene -> a terminal tree, one node per line, in the style of an AST dump:

    graph tiny_cnn( image ) -> ( probabilities )
    ├── inputs
    │   └── image: scalar[1,1,16,16]  [linear_quantize(min = 0.0, max = 1.0, bits = 8)]
    ├── variables
    │   └── conv1_filter: scalar[8,1,3,3]  'conv1/filter'
    ├── operations
    │   ├── conv1 = conv(image, conv1_filter, conv1_bias; padding = [(1, 1), (1, 1)]) -> scalar[1,8,16,16]
    │   └── block#1 (block: y)
    │       └── y = relu(conv1) -> scalar[1,8,16,16]
    └── outputs
        └── y: scalar[1,8,16,16]

Operations keep the scene's (topological) order; those expanded from a fragment invocation sit under a line for
that invocation, nested invocations deeper. Arguments are the tensors the edges bring, in argument order, then the
attributes that differ from the op's defaults. Empty sections are left out.
"""
from __future__ import annotations

from nnef_torch.viz.labels import shown_attributes, value_text
from nnef_torch.viz.scene import CONSTANT, FRAGMENT, INPUT, OPERATION, OUTPUT, VARIABLE, Edge, Node, Scene

# an entry of the tree: its text and the entries under it
Entry = tuple[str, list["Entry"]]

_CONTROL = {code: f"\\x{code:02x}" for code in (*range(32), 127)}  # so that a name cannot break a line


def _clean(text: str) -> str:
    return text.translate(_CONTROL)


def tree_text(scene: Scene) -> str:
    """The tree of `scene`: a header line, then the sections inputs, variables, operations and outputs."""
    arguments: dict[int, list[Edge]] = {}
    for edge in scene.edges:
        arguments.setdefault(edge.target, []).append(edge)
    sections: dict[str, list[Entry]] = {"inputs": [], "variables": [], "operations": [], "outputs": []}
    nested = _Nesting(sections["operations"], scene.scopes)
    for node in scene.nodes.values():
        if node.kind == INPUT:
            sections["inputs"].append((_declaration(node), []))
        elif node.kind == VARIABLE:
            sections["variables"].append((_declaration(node), []))
        elif node.kind == OUTPUT:
            sections["outputs"].append((_declaration(node), []))
        else:
            nested.under(node.scope).append((_operation(node, arguments.get(node.id, []), scene), []))
    inputs = ", ".join(node.name for node in scene.nodes.values() if node.kind == INPUT)
    outputs = ", ".join(node.name for node in scene.nodes.values() if node.kind == OUTPUT)
    lines = [_clean(f"graph {scene.name}( {inputs} ) -> ( {outputs} )")]
    _render([(name, entries) for name, entries in sections.items() if entries], lines)
    return "\n".join(lines) + "\n"


class _Nesting:
    """Where the next operation goes: under the lines of its fragment invocations, opened as they are met."""

    def __init__(self, root: list[Entry], captions: dict[str, str]):
        self.captions = captions
        self.path: tuple[str, ...] = ()
        self.lists = [root]  # the entry list at each depth of `path`

    def under(self, scope: tuple[str, ...]) -> list[Entry]:
        common = 0
        while common < min(len(scope), len(self.path)) and scope[common] == self.path[common]:
            common += 1
        del self.lists[common + 1:]
        for invocation in scope[common:]:
            children: list[Entry] = []
            self.lists[-1].append((_clean(f"{invocation} ({self.captions.get(invocation, invocation)})"), children))
            self.lists.append(children)
        self.path = scope
        return self.lists[-1]


def _render(entries: list[Entry], lines: list[str]) -> None:
    """Append the lines of `entries` with box-drawing prefixes (iteratively: nesting can be deep)."""
    stack: list[tuple[list[Entry], int, str]] = [(entries, 0, "")]
    while stack:
        items, index, prefix = stack.pop()
        if index >= len(items):
            continue
        text, children = items[index]
        last = index == len(items) - 1
        lines.append(prefix + ("└── " if last else "├── ") + text)
        stack.append((items, index + 1, prefix))
        if children:
            stack.append((children, 0, prefix + ("    " if last else "│   ")))


def _types(node: Node) -> str:
    types = [tensor.describe() for tensor in node.outputs]
    return types[0] if len(types) == 1 else f"({', '.join(types)})"


def _quant(node: Node) -> str:
    quantized = [tensor for tensor in node.outputs if tensor.quant]
    if not quantized:
        return ""
    if len(node.outputs) == 1:
        return f"  [{quantized[0].quant}]"
    return "  [" + "; ".join(f"{tensor.name}: {tensor.quant}" for tensor in quantized) + "]"


def _declaration(node: Node) -> str:
    """An input, variable or output: `name: type`, a variable's label, and any quantization."""
    text = f"{node.name}: {_types(node)}" if node.outputs else node.name
    if node.kind == VARIABLE and node.label and node.label != node.name:
        text += f"  '{node.label}'"
    return _clean(text + _quant(node))


def _operation(node: Node, edges: list[Edge], scene: Scene) -> str:
    """`outputs = op(arguments; attributes) -> types`; RelayViz nodes name each argument by its field."""
    names = ", ".join(tensor.name for tensor in node.outputs) or node.name
    if node.kind == CONSTANT:
        inner = "" if node.value is None else f"value = {value_text(node.value)}"
    else:
        positional = node.kind in (OPERATION, FRAGMENT)
        args = ", ".join(_argument(edge, scene, positional) for edge in edges)
        attrs = ", ".join(f"{key} = {value_text(value)}" for key, value in shown_attributes(node.op, node.attrs))
        inner = f"{args}; {attrs}" if args and attrs else args or attrs
    text = f"{names} = {node.op or node.kind}({inner})"
    if node.outputs:
        text += f" -> {_types(node)}"
    return _clean(text + _quant(node))


def _argument(edge: Edge, scene: Scene, positional: bool) -> str:
    source = edge.tensor or scene.nodes[edge.source].name
    return source if positional or not edge.label else f"{edge.label}: {source}"
