"""Scene -> the scene with its variables and constants folded into the nodes that read them, as Netron draws them.

A variable (or constant) whose every reader is an operation is drawn inside each reader (`Node.folded`) instead
of as a node of its own; so is a shape op (reshape, transpose, ...) that reads only such tensors and feeds one
operation: the folded entry names it in `via` and carries its output type. Statistics of the values (min, max,
mean, std) are computed here, in Python, where the values were read (`values`: a variable's label -> its array
or tensor) or where a constant's value is in the scene.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnef_torch.viz.families import family
from nnef_torch.viz.scene import CONSTANT, ELIDED, INPUT, OUTPUT, VARIABLE, Edge, Folded, Node, Scene, TensorType

CHUNK = 1 << 20  # values read at a time for statistics
_NOT_READERS = (INPUT, VARIABLE, CONSTANT, OUTPUT, ELIDED)  # nodes that cannot hold what they read


def fold_variables(scene: Scene, values: Mapping[str, Any] | None = None) -> Scene:
    """`scene` without variable and constant nodes where they can be folded into their readers (see the module
    docstring); nodes and edges otherwise as they were."""
    into: dict[int, list[Edge]] = {}
    out_of: dict[int, list[Edge]] = {}
    for edge in scene.edges:
        into.setdefault(edge.target, []).append(edge)
        out_of.setdefault(edge.source, []).append(edge)
    folded = _foldable(scene, into, out_of)
    if not folded:
        return scene
    entries: dict[int, list[Folded]] = {}  # a folded node -> what a reader of it is given

    def chain(node_id: int) -> list[Folded]:
        if node_id not in entries:
            node = scene.nodes[node_id]
            if node.kind in (VARIABLE, CONSTANT):
                entries[node_id] = [_entry(node, values)]
            else:  # a shape op on folded tensors
                inner = [item for edge in into.get(node_id, []) for item in chain(edge.source)]
                output = node.outputs[0]
                entries[node_id] = [Folded(item.param, item.name, item.kind, output if len(inner) == 1 else item.type,
                                           item.label, item.via + (node.op or "?",), item.data_dtype, item.stats)
                                    for item in inner]
        return entries[node_id]

    nodes: dict[int, Node] = {}
    for node in scene.nodes.values():
        if node.id in folded:
            continue
        reads = [Folded(edge.label, item.name, item.kind, item.type, item.label, item.via, item.data_dtype,
                        item.stats)
                 for edge in into.get(node.id, []) if edge.source in folded for item in chain(edge.source)]
        nodes[node.id] = _with_folded(node, tuple(reads)) if reads else node
    edges = [edge for edge in scene.edges if edge.source not in folded and edge.target not in folded]
    return Scene(scene.name, nodes, edges, scene.scopes)


def _foldable(scene: Scene, into: Mapping[int, list[Edge]], out_of: Mapping[int, list[Edge]]) -> set[int]:
    """The nodes drawn inside their readers: variables and constants, and single-use shape ops on them, whose
    readers are all operations that stay drawn."""
    candidates = set()
    for node in scene.nodes.values():  # in topological order: a shape op's inputs are decided before it
        if node.kind in (VARIABLE, CONSTANT):
            candidates.add(node.id)
        elif (node.kind not in _NOT_READERS and node.op and family(node.op) == "shape" and len(node.outputs) == 1
              and into.get(node.id) and all(edge.source in candidates for edge in into[node.id])
              and len(out_of.get(node.id, [])) == 1):
            candidates.add(node.id)
    changed = True
    while changed:  # drop those read by something that cannot hold them, and shape ops on dropped ones
        changed = False
        for node_id in sorted(candidates):
            readers = [scene.nodes.get(edge.target) for edge in out_of.get(node_id, [])]
            kept_input = any(edge.source not in candidates for edge in into.get(node_id, []))
            if not readers or kept_input or any(reader is None or reader.kind in _NOT_READERS
                                                for reader in readers):
                candidates.discard(node_id)
                changed = True
    return candidates


def _entry(node: Node, values: Mapping[str, Any] | None) -> Folded:
    output = node.outputs[0] if node.outputs else TensorType(node.name, None, None)
    kind = node.kind
    data: Any = None
    if kind == VARIABLE and values is not None:
        data = values.get(node.label or node.name)
    elif kind == CONSTANT and node.value is not None:
        data = node.value
    data_dtype, stats = statistics(data) if data is not None else (None, ())
    return Folded("", node.name, kind, output, node.label, (), data_dtype,
                  stats)


def _with_folded(node: Node, folded: tuple[Folded, ...]) -> Node:
    return Node(node.id, node.kind, node.name, node.op, node.attrs, node.outputs, node.label, node.scope, node.value,
                folded)


def statistics(data: Any) -> tuple[str | None, tuple[tuple[str, float], ...]]:
    """The element type of `data` (a numpy array, a torch tensor or a list of numbers) and its min, max, mean and
    standard deviation; (None, ()) where it holds no numbers. Values are read as float64 in chunks, so the
    statistics of a large weight take little memory beside it."""
    import numpy

    if hasattr(data, "detach"):  # a torch tensor: numpy cannot hold bfloat16, so each chunk is widened first
        dtype = str(data.dtype).removeprefix("torch.")
        flat = data.detach().reshape(-1)
        size = flat.numel()
        if size == 0 or flat.is_complex():
            return (dtype if size else None), ()

        def chunk(start: int) -> Any:
            return flat[start:start + CHUNK].cpu().double().numpy()
    else:
        array = numpy.asarray(data)
        dtype, size = str(array.dtype), array.size
        if size == 0 or array.dtype.kind not in "biuf":
            return (dtype if size else None), ()
        flat = array.reshape(-1)

        def chunk(start: int) -> Any:
            return flat[start:start + CHUNK].astype(numpy.float64)
    total, low, high = 0.0, math.inf, -math.inf
    for start in range(0, size, CHUNK):
        part = chunk(start)
        total, low, high = total + float(part.sum()), min(low, float(part.min())), max(high, float(part.max()))
    mean = total / size
    squares = sum(float(numpy.square(chunk(start) - mean).sum()) for start in range(0, size, CHUNK))
    return dtype, (("min", low), ("max", high), ("mean", mean), ("std", math.sqrt(squares / size)))
