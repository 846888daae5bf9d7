"""The graph of a tract_core document rewritten for saving.

`to_standard`: standard NNEF for every op the dialect keeps (einsum.py for `tract_core_einsum`;
`tract_core_gather_elements` as `gather` of the flattened input at linear indices; `tract_core_erf` as the
exporter's `erf_rational` fragment, float32-accurate) and for tract's integer arithmetic and comparisons
(relaxed.py), computed on float32 casts: exact while every integer involved is below 2^24 in magnitude (the
linear indices of gather_elements included; a larger input is refused).

`to_dialect`: the form tract reads with its tract_core registry: `cast` and `gather` as `tract_core_cast` and
`tract_core_gather` (tract has no standard ones), pad's `replicate` border as tract's `replicated`, constant
tensors as variables (tract has no `constant`), `deconv` with tract's filter layout, and the integer operations
without a generic type.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.formats.tract_core.einsum import einsum
from nnef_torch.formats.tract_core.relaxed import RULES
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Graph, Operation, Ref, Tensor, Variable
from nnef_torch.ir.limits import check_computed
from nnef_torch.stdlib import extension_fragments

EXACT = 1 << 24  # float32 holds every integer below this exactly
COMPARISONS = ("lt", "gt", "le", "ge", "eq", "ne")
INTEGER_OPS = tuple(name for name in RULES if name not in ("conv", "deconv", "linear", "pad"))
DATUM_TYPES = {"scalar": "f32", "integer": "i64", "logical": "bool"}
NUMPY_TYPES = {"scalar": np.float32, "integer": np.int64, "logical": np.bool_}


def _library() -> dict[str, Any]:
    return {"erf_rational": extension_fragments()["erf_rational"]}


def _name(b: Builder, result: Any, name: str) -> None:
    """Give `result` (a tensor the rewrite wrote last, or a literal) the original result name."""
    if isinstance(result, Ref) and result.name == name:
        return
    b.operations.append(Operation("copy", {"x": result}, {}, {"y": Ref(name)}))


def _float(b: Builder, x: Any) -> Any:
    return float(x) if not isinstance(x, Ref) else b.op("cast", x, generic="scalar")


def _integer_op(b: Builder, op: Operation) -> None:
    x, y = (_float(b, op.inputs[key]) for key in ("x", "y"))
    out = op.outputs["z"].name
    if op.name in COMPARISONS:
        _name(b, b.op(op.name, x, y, out_name=out), out)
        return
    _name(b, b.op("cast", b.op(op.name, x, y), generic="integer", out_name=out), out)


def _gather_elements(b: Builder, op: Operation) -> None:
    x, indices = op.inputs["input"], op.inputs["indices"]
    shape, index_shape = list(b.shape(x)), list(b.shape(indices))
    axis = op.attribs["axis"] % len(shape)
    volume = int(np.prod(shape))
    if volume >= EXACT:
        raise NNEFUnsupportedError(f"tract_core_gather_elements of an input of {volume} items has no exact standard "
                                   "form here (linear indices are computed in float32, exact below 2^24); save "
                                   "with dialect='tract_core'", op.location)
    check_computed("tract_core_gather_elements: the linear indices of its standard form", math.prod(index_shape),
                   op.location, error=NNEFUnsupportedError)
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
    grid = np.indices(index_shape)
    offset = sum(grid[d] * strides[d] for d in range(len(shape)) if d != axis)
    offset = np.broadcast_to(np.asarray(offset, dtype=np.float64), index_shape)
    at = b.op("cast", indices, generic="scalar")
    at = b.op("select", b.op("lt", at, 0.0), b.op("add", at, float(shape[axis])), at)  # negative: from the end
    base = b.op("constant", shape=index_shape, value=[float(v) for v in offset.reshape(-1)], generic="scalar")
    scaled = b.op("mul", at, float(strides[axis])) if strides[axis] != 1 else at
    linear = b.op("cast", b.op("add", scaled, base), generic="integer")
    flat = b.op("reshape", x, shape=[-1])
    out = op.outputs["output"].name
    _name(b, b.op("gather", flat, linear, axis=0, out_name=out), out)


def _builder(graph: Graph, library: dict[str, Any]) -> Builder:
    b = Builder(library, reserved=list(graph.tensors))
    b.tensors.update(graph.tensors)
    return b


def to_standard(graph: Graph) -> tuple[Graph, list[str], dict[str, Any]]:
    """`graph` with standard operations only; returns it, the library fragments its document must define, and
    the library."""
    library = _library()
    graph = _renamed(graph)
    b = _builder(graph, library)
    for op in graph.operations:
        if op.name == "tract_core_einsum":
            out = op.outputs["result"].name
            result = einsum(b, op)
            if isinstance(result, Ref) and result.name not in graph.tensors and b.operations \
                    and result in b.operations[-1].outputs.values():
                _rename_last(b, result, out)
            else:
                _name(b, result, out)
        elif op.name == "tract_core_gather_elements":
            _gather_elements(b, op)
        elif op.name == "tract_core_erf":
            out = op.outputs["y"].name
            _name(b, b.op("erf_rational", op.inputs["x"], out_name=out), out)
        elif op.name in INTEGER_OPS and op.dtype == "integer":
            _integer_op(b, op)
        else:
            b.operations.append(op)
    # standard operations only: the graph is looked up in the standard op table
    standard = dataclasses.replace(graph, tensors=dict(b.tensors), operations=tuple(b.operations), dialect=None)
    return standard, b.fragments, library


def _renamed(graph: Graph) -> Graph:
    """`graph` with the tensors the lowerer named after a dialect op (`tract_core_einsum_30`) renamed
    (`einsum_30`), so the standard document names no tract op; graph inputs and outputs keep their names."""
    keep = set(graph.inputs) | set(graph.outputs) | {variable.name for variable in graph.signature.variables}
    taken = set(graph.tensors)
    swap: dict[str, str] = {}
    for name in graph.tensors:
        if name.startswith("tract_") and name not in keep:
            new = base = name.removeprefix("tract_core_").removeprefix("tract_") or "t"
            counter = 0
            while new in taken:
                counter += 1
                new = f"{base}_{counter}"
            taken.add(new)
            swap[name] = new
    if not swap:
        return graph

    def sub(value: Any) -> Any:
        if isinstance(value, Ref):
            return Ref(swap.get(value.name, value.name))
        if isinstance(value, (list, tuple)):
            return type(value)(sub(item) for item in value)
        return value
    operations = tuple(dataclasses.replace(op, inputs={k: sub(v) for k, v in op.inputs.items()},
                                           outputs={k: sub(v) for k, v in op.outputs.items()})
                       for op in graph.operations)
    tensors = {swap.get(name, name): Tensor(swap.get(name, name), tensor.dtype, tensor.shape)
               for name, tensor in graph.tensors.items()}
    return dataclasses.replace(graph, operations=operations, tensors=tensors)


def _rename_last(b: Builder, result: Ref, name: str) -> None:
    """Name the result of the last operation written `name` (a reserved original name)."""
    last = b.operations[-1]
    outputs = {key: Ref(name) if value == result else value for key, value in last.outputs.items()}
    b.operations[-1] = dataclasses.replace(last, outputs=outputs)
    old = b.tensors.pop(result.name)
    b.tensors[name] = Tensor(name, old.dtype, old.shape)


def to_dialect(graph: Graph) -> tuple[Graph, dict[str, np.ndarray]]:
    """`graph` as tract reads it with tract_core (its ops in the tract_core op table); returns it and the data of
    the variables that stand for its constant tensors, by label."""
    operations, data = [], {}
    labels = {variable.key for variable in graph.signature.variables}
    variables = list(graph.signature.variables)
    b = _builder(graph, {})
    b.operations = operations  # the filter operations of a deconv are written among them
    for op in graph.operations:
        if op.name == "deconv":
            op = _tract_deconv(b, op)
        elif op.name == "cast":
            op = Operation("tract_core_cast", op.inputs, {"to": DATUM_TYPES[op.dtype]}, op.outputs, None,
                           op.location, op.scope)
        elif op.name == "gather":
            op = dataclasses.replace(op, name="tract_core_gather", dtype=None)
        elif op.name == "pad" and op.attribs.get("border") == "replicate":  # tract's name of it (relaxed.py)
            op = dataclasses.replace(op, attribs={**op.attribs, "border": "replicated"})
        elif op.name in INTEGER_OPS and op.dtype is not None:
            op = dataclasses.replace(op, dtype=None)
        elif op.name == "constant":
            out = op.outputs["output"].name
            label = _label(f"constant_{out}", labels)
            shape = [int(extent) for extent in op.attribs["shape"]]
            values = np.asarray(op.attribs["value"], dtype=NUMPY_TYPES[op.dtype])
            data[label] = np.broadcast_to(values, shape).copy() if values.size == 1 else values.reshape(shape)
            if op.dtype == "integer":  # tract reads integer literals as TDim: the constant is read as one too
                stored = _label(f"{out}_i64", set(b.tensors))
                b.tensors[stored] = Tensor(stored, "integer", tuple(shape))
                variables.append(Variable(stored, label, op.dtype, tuple(shape)))
                operations.append(Operation("variable", {}, {"shape": shape, "label": label},
                                            {"output": Ref(stored)}, op.dtype, op.location, op.scope))
                op = Operation("tract_core_cast", {"input": Ref(stored)}, {"to": "tdim"}, op.outputs, None,
                               op.location, op.scope)
            else:
                variables.append(Variable(out, label, op.dtype, tuple(shape)))
                op = Operation("variable", {}, {"shape": shape, "label": label}, op.outputs, op.dtype,
                               op.location, op.scope)
        operations.append(op)
    signature = dataclasses.replace(graph.signature, variables=tuple(variables))
    return dataclasses.replace(graph, operations=tuple(operations), tensors=dict(b.tensors), signature=signature,
                               dialect=graph.dialect or "tract_core"), data  # or one layered on tract_core


def _tract_deconv(b: Builder, op: Operation) -> Operation:
    """`deconv` as tract reads it (relaxed.py reads it back): the filter in tract's layout, `output_shape` as the
    spatial extents."""
    groups = op.attribs.get("groups", 1) or b.shape(op.inputs["filter"])[0]  # NNEF's 0: one group per input channel
    w = tract_deconv_filter(b, op.inputs["filter"], groups)
    extents = list(op.attribs.get("output_shape") or [])[2:]
    return dataclasses.replace(op, inputs={**op.inputs, "filter": w},
                               attribs={**op.attribs, "output_shape": extents, "groups": groups})


def tract_deconv_filter(b: Builder, filter: Any, groups: int) -> Any:
    """A `deconv` filter [in, out/groups, ...] (NNEF's, torch's) written in the layout tract reads,
    [out, in/groups, ...] (sonos/tract, nnef/src/ops/nnef/deser.rs `conv_like`: the filter of a conv), by
    operations on it that tract folds when it loads."""
    shape = list(b.shape(filter))
    spatial = list(range(2, len(shape)))
    if groups == 1:
        return b.op("transpose", filter, axes=[1, 0, *spatial])
    split = b.op("reshape", filter, shape=[groups, shape[0] // groups, *shape[1:]])
    split = b.op("transpose", split, axes=[0, 2, 1, *(a + 1 for a in spatial)])
    return b.op("reshape", split, shape=[groups * shape[1], shape[0] // groups, *shape[2:]])


def _label(base: str, taken: set[str]) -> str:
    label, counter = base, 0
    while label.lower() in taken:
        counter += 1
        label = f"{base}_{counter}"
    taken.add(label.lower())
    return label


__all__ = ["to_dialect", "to_standard", "tract_deconv_filter"]
