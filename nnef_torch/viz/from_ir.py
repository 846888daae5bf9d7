"""IR graph -> scene: one node per input, variable, constant and operation, one per graph output, and an edge per
tensor argument labelled with the parameter it feeds. `collapse=True` draws each outermost fragment invocation as
one node."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnef_torch.format.printer import print_literal
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.viz.scene import CONSTANT, FRAGMENT, INPUT, OPERATION, OUTPUT, VARIABLE, Edge, Node, Scene, TensorType

SHOWN_VALUES = 16  # a constant's values are part of its label up to this many
_KINDS = {"external": INPUT, "variable": VARIABLE, "constant": CONSTANT}


def scene_of(graph: Graph, *, collapse: bool = False) -> Scene:
    nodes: dict[int, Node] = {}
    edges: list[Edge] = []
    producer: dict[str, int] = {}
    quant = {name: quant_text(spec) for name, spec in graph.quantization.items()}
    for index, op in enumerate(graph.operations):
        node = _node(index, op, graph, quant)
        nodes[index] = node
        for tensor in node.outputs:
            producer[tensor.name] = index
        for label, ref in _arguments(op):
            if ref.name in producer:
                edges.append(Edge(producer[ref.name], index, label, ref.name, quant.get(ref.name)))
    for name in graph.outputs:
        index = len(nodes)
        tensor = graph.tensors.get(name)
        nodes[index] = Node(index, OUTPUT, name, outputs=[_type(name, graph, quant)] if tensor else [])
        if name in producer:
            edges.append(Edge(producer[name], index, "", name, quant.get(name)))
    scene = Scene(graph.name, nodes, edges, _captions(nodes, edges))
    return collapse_fragments(scene) if collapse else scene


def quant_text(spec: Any) -> str:
    args = ", ".join(f"{key} = {_short(value)}" for key, value in spec.args.items())
    return f"{spec.op}({args})"


def _short(value: Any) -> str:
    if isinstance(value, list) and len(value) > 4:
        return f"[{len(value)} values]"
    return print_literal(value)


def _node(index: int, op: Operation, graph: Graph, quant: Mapping[str, str]) -> Node:
    outputs = [_type(ref.name, graph, quant) for ref in op.output_refs()]
    name = outputs[0].name if outputs else op.name
    kind = _KINDS.get(op.name, OPERATION)
    if kind == VARIABLE:
        return Node(index, kind, name, op.name, {"shape": op.attribs.get("shape")}, outputs,
                    label=op.attribs.get("label"), scope=op.scope)
    if kind == CONSTANT:
        values = op.attribs.get("value")
        shown = values if isinstance(values, list) and len(values) <= SHOWN_VALUES else None
        return Node(index, kind, name, op.name, {"shape": op.attribs.get("shape")}, outputs, scope=op.scope,
                    value=shown)
    if kind == INPUT:
        return Node(index, kind, name, op.name, {}, outputs, scope=op.scope)
    attrs = dict(op.attribs)
    for param, value in op.inputs.items():  # literals substituted for tensors are shown as attributes
        if not isinstance(value, (Ref, list, tuple)):
            attrs[param] = value
        elif isinstance(value, (list, tuple)) and not any(isinstance(item, Ref) for item in value):
            attrs[param] = value
    return Node(index, kind, name, op.name, attrs, outputs, scope=op.scope)


def _type(name: str, graph: Graph, quant: Mapping[str, str]) -> TensorType:
    tensor = graph.tensors.get(name)
    if tensor is None:
        return TensorType(name, None, None, quant.get(name))
    return TensorType(name, tensor.dtype, tensor.shape, quant.get(name))


def _arguments(op: Operation) -> list[tuple[str, Ref]]:
    found = []
    for param, value in op.inputs.items():
        if isinstance(value, Ref):
            found.append((param, value))
        elif isinstance(value, (list, tuple)):
            found.extend((f"{param}[{i}]", item) for i, item in enumerate(value) if isinstance(item, Ref))
    return found


def _captions(nodes: Mapping[int, Node], edges: list[Edge]) -> dict[str, str]:
    """Each fragment invocation's caption: the fragment and the first tensor it gives to the rest of the graph."""
    inside: dict[int, set[str]] = {}
    for node in nodes.values():
        inside[node.id] = set(node.scope)
    captions: dict[str, str] = {}
    for edge in edges:
        leaving = inside[edge.source] - inside[edge.target]
        for scope in leaving:
            captions.setdefault(scope, f"{scope.partition('#')[0]}: {edge.tensor}")
    for node in nodes.values():
        for scope in node.scope:
            captions.setdefault(scope, scope.partition("#")[0])
    return captions


def collapse_fragments(scene: Scene) -> Scene:
    """The scene with each outermost fragment invocation drawn as one node (kind 'fragment'): edges into it come
    from outside, and its outputs are the tensors it gives to the rest of the graph."""
    groups: dict[str, list[Node]] = {}
    for node in scene.nodes.values():
        if node.scope:
            groups.setdefault(node.scope[0], []).append(node)
    if not groups:
        return scene
    member = {node.id: node.scope[0] for members in groups.values() for node in members}
    given: dict[str, list[TensorType]] = {scope: [] for scope in groups}
    for edge in scene.edges:
        scope = member.get(edge.source)
        if scope is not None and member.get(edge.target) != scope:
            types = {t.name: t for t in scene.nodes[edge.source].outputs}
            if edge.tensor in types and types[edge.tensor] not in given[scope]:
                given[scope].append(types[edge.tensor])
    nodes: dict[int, Node] = {}
    replaced: dict[int, int] = {}
    for node in scene.nodes.values():
        scope = member.get(node.id)
        if scope is None:
            nodes[node.id] = node
            continue
        first = groups[scope][0]
        replaced[node.id] = first.id
        if node is first:
            fragment = scope.partition("#")[0]
            outputs = given[scope]
            nodes[node.id] = Node(node.id, FRAGMENT, outputs[0].name if outputs else fragment, fragment,
                                  {"operations": len(groups[scope])}, outputs)
    edges, seen = [], set()
    for edge in scene.edges:
        source, target = replaced.get(edge.source, edge.source), replaced.get(edge.target, edge.target)
        if source == target:
            continue
        into_group = edge.target in member  # inner parameter names mean nothing outside: name the tensor
        label = (edge.tensor or "") if into_group else edge.label
        key = (source, target, edge.tensor, label)
        if key not in seen:
            seen.add(key)
            edges.append(Edge(source, target, label, edge.tensor, edge.quant))
    return Scene(scene.name, nodes, edges, {})
