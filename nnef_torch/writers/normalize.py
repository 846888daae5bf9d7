"""The standard NNEF document of a module whose document was read with deviations (docs/tract_core.md,
"Deviations read").

Its graph is lowered again with the standard operations kept whole (the document's fragments, a redefined standard op
included, expanded; positional and tensor attributes, duplicates and nested invocations are resolved by reading),
the operations whose results nothing reads are left out (variables stay), and the operations that have no standard form
are rewritten (an IR-to-IR rewrite the NNEF writer applies):

- `erf` as the exporter's `erf_rational` fragment (a rational approximation, float32-accurate);
- a 1-D `matmul` operand as a matrix: `unsqueeze`, `matmul`, then `squeeze` of that axis (numpy's semantics);
- a `split` with a zero ratio without that (empty) chunk, where no operation reads it or only `concat`s do (it is
  dropped from their values); a `split` left with one chunk is a `copy`.

Any other empty tensor has no standard form: an `NNEFUnsupportedError` names the operation and its location.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.stdlib import extension_fragments, standard_fragments


def standard_graph(graph: Graph, document: GraphFile) -> tuple[Graph, list[str], dict[str, Any]]:
    """`graph` (a leniently read document's, lowered with the standard operations kept whole: see
    `writers.source.module_graph`) in standard operations, the fragments its text must define (the document's
    declarations of operations without a body, then the library's, in order), and their definitions. `document`
    is the module's graph.nnef (parsed once, kept by the module)."""
    standard = standard_fragments()
    graph = _without_empty_chunks(_live(graph))
    declared = {op.name for op in graph.operations if op.name not in standard and op.name != "erf"}
    custom = [fragment for fragment in document.document.fragments if fragment.name in declared]
    library = {"erf_rational": extension_fragments()["erf_rational"],
               **{fragment.name: fragment for fragment in custom}}
    b = Builder(library, reserved=list(graph.tensors))
    b.tensors.update(graph.tensors)
    for op in graph.operations:
        if op.name == "erf":
            out = op.outputs["y"].name
            _name(b, b.op("erf_rational", op.inputs["x"], out_name=out), out)
        elif op.name == "matmul" and (_is_vector(graph, op.inputs["A"]) or _is_vector(graph, op.inputs["B"])):
            _matmul(b, op)
        else:
            b.operations.append(op)
    _check_not_empty(graph, b.operations)
    graph = dataclasses.replace(graph, tensors=dict(b.tensors), operations=tuple(b.operations), deviations=())
    return graph, [fragment.name for fragment in custom] + b.fragments, library


def _name(b: Builder, result: Ref, name: str) -> None:
    """Give `result` the original result name `name` (a copy where the builder could not)."""
    if result.name != name:
        b.operations.append(Operation("copy", {"x": result}, {}, {"y": Ref(name)}))


def _is_vector(graph: Graph, value: Any) -> bool:
    shape = graph.tensors[value.name].shape if isinstance(value, Ref) else None
    return shape is not None and len(shape) == 1


def _matmul(b: Builder, op: Operation) -> None:
    """numpy's matmul with a 1-D operand, written with rank-2 operands: a vector A is a row [1, k], a vector B a
    column [k, 1] (their transpose flag left out), and those axes of the product are squeezed."""
    a, c = op.inputs["A"], op.inputs["B"]
    vector_a, vector_b = len(b.shape(a)) == 1, len(b.shape(c)) == 1
    if vector_a:
        a = b.op("unsqueeze", a, axes=[0])
    if vector_b:
        c = b.op("unsqueeze", c, axes=[1])
    product = b.op("matmul", a, c, transposeA=op.attribs["transposeA"] and not vector_a,
                   transposeB=op.attribs["transposeB"] and not vector_b)
    axes = [axis for axis, vector in ((0, vector_a), (1, vector_b)) if vector]
    out = op.outputs["C"].name
    _name(b, b.op("squeeze", product, axes=axes, out_name=out), out)


def _live(graph: Graph) -> Graph:
    """`graph` without the operations whose results nothing reads (a constant passed as an attribute, now its
    value); externals, variables (the module's data) and updates stay."""
    live = set(graph.outputs) | {update.value for update in graph.signature.updates}
    kept = []
    for op in reversed(graph.operations):
        if op.name in ("external", "variable", "update") or any(ref.name in live for ref in op.output_refs()):
            kept.append(op)
            live.update(ref.name for ref in op.input_refs())
    return dataclasses.replace(graph, operations=tuple(reversed(kept)))


def _without_empty_chunks(graph: Graph) -> Graph:
    """`graph` with the empty chunks of `split`s (zero ratios) left out of the splits and the `concat`s reading
    them; an empty chunk that anything else reads stays (and `_check_not_empty` refuses it)."""
    empty = {ref.name for op in graph.operations if op.name == "split"
             for ref, ratio in zip(op.outputs["values"], op.attribs["ratios"]) if ratio == 0}
    if not empty:
        return graph
    readers: dict[str, list[Operation]] = {}
    for op in graph.operations:
        for ref in op.input_refs():
            readers.setdefault(ref.name, []).append(op)
    droppable = {name for name in empty if name not in graph.outputs
                 and all(op.name == "concat" and any(_name_of(value) not in empty for value in op.inputs["values"])
                         for op in readers.get(name, ()))}
    operations = []
    for op in graph.operations:
        if op.name == "concat" and any(_name_of(value) in droppable for value in op.inputs["values"]):
            values = [value for value in op.inputs["values"] if _name_of(value) not in droppable]
            op = dataclasses.replace(op, inputs={**op.inputs, "values": values})
        elif op.name == "split" and any(ref.name in droppable for ref in op.outputs["values"]):
            kept = [(ref, ratio) for ref, ratio in zip(op.outputs["values"], op.attribs["ratios"])
                    if ref.name not in droppable]
            if len(kept) == 1:  # the whole input
                op = Operation("copy", {"x": op.inputs["value"]}, {}, {"y": kept[0][0]}, None, op.location, op.scope)
            else:
                op = dataclasses.replace(op, attribs={**op.attribs, "ratios": [ratio for _, ratio in kept]},
                                         outputs={"values": [ref for ref, _ in kept]})
        operations.append(op)
    tensors = {name: tensor for name, tensor in graph.tensors.items() if name not in droppable}
    return dataclasses.replace(graph, tensors=tensors, operations=tuple(operations))


def _name_of(value: Any) -> str | None:
    return value.name if isinstance(value, Ref) else None


def _check_not_empty(graph: Graph, operations: list[Operation]) -> None:
    """Refuse an empty tensor (an extent of 0) left in `operations`: NNEF has none."""
    for op in operations:
        for ref in op.output_refs():
            tensor = graph.tensors.get(ref.name)
            if tensor is None or tensor.shape is None or 0 not in tensor.shape:
                continue
            readers = [f"'{other.name}' at {other.location}" for other in operations if ref in other.input_refs()]
            read = f", read by {', '.join(readers)}" if readers else ", a graph output"
            raise NNEFUnsupportedError(
                f"'{op.name}' writes the empty tensor '{ref.name}' of shape {list(tensor.shape)}{read}: standard "
                "NNEF has no empty tensor (an empty chunk of 'split' is left out only where nothing but 'concat' "
                "reads it), so this model has no standard NNEF form", op.location)


__all__ = ["standard_graph"]
