"""Parts of large graphs: the neighbourhood of a tensor or operation, within a number of edges."""
from __future__ import annotations

import difflib
from collections import deque

from nnef_torch.errors import NNEFOptionError
from nnef_torch.viz.scene import ELIDED, Edge, Node, Scene


def neighbourhood(scene: Scene, name: str, radius: int) -> Scene:
    """The nodes at most `radius` edges from the node named `name` (a tensor, an operation's output or a node
    key such as n12), in either direction. Each kept node that loses neighbours gets an elided node (one for
    its inputs, one for its consumers) saying how many were left out."""
    if radius < 0:
        raise NNEFOptionError(f"radius must be 0 or more, got {radius}")
    centre = scene.find(name)
    if not centre:
        names = [node.name for node in scene.nodes.values()]
        close = difflib.get_close_matches(name, names, n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise NNEFOptionError(f"no tensor or operation '{name}' in graph '{scene.name}'{hint}")
    neighbours: dict[int, list[int]] = {node_id: [] for node_id in scene.nodes}
    for edge in scene.edges:
        neighbours[edge.source].append(edge.target)
        neighbours[edge.target].append(edge.source)
    distance = {node.id: 0 for node in centre}
    queue = deque(distance)
    while queue:
        node_id = queue.popleft()
        if distance[node_id] == radius:
            continue
        for other in neighbours[node_id]:
            if other not in distance:
                distance[other] = distance[node_id] + 1
                queue.append(other)
    nodes = {node_id: node for node_id, node in scene.nodes.items() if node_id in distance}
    edges = [edge for edge in scene.edges if edge.source in nodes and edge.target in nodes]
    left_out: dict[tuple[int, str], set[int]] = {}
    for edge in scene.edges:
        if edge.target in nodes and edge.source not in nodes:
            left_out.setdefault((edge.target, "inputs"), set()).add(edge.source)
        elif edge.source in nodes and edge.target not in nodes:
            left_out.setdefault((edge.source, "consumers"), set()).add(edge.target)
    next_id = max(scene.nodes, default=-1) + 1
    for (kept, side), others in left_out.items():
        elided = Node(next_id, ELIDED, f"{len(others)} more", attrs={"nodes": len(others)})
        nodes[next_id] = elided
        edges.append(Edge(next_id, kept, "…") if side == "inputs" else Edge(kept, next_id, "…"))
        next_id += 1
    scopes = {scope: caption for scope, caption in scene.scopes.items()
              if any(scope in node.scope for node in nodes.values())}
    return Scene(f"{scene.name} around {name} (radius {radius})", nodes, edges, scopes)
