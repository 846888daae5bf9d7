"""IR graph -> RelayViz JSON (the RelayViz proposal for TVM Relay, version 1.0): the graph as one Function node.

The Function is the last node. Its `params` are Var nodes of the graph inputs (in order) and its `body` is the
output's node, or a Tuple of the outputs. Each operation is a Call whose `op` is an Op node written just before
it (`name` the NNEF operation, `attrs` its attributes); its `args` are its tensor inputs in parameter order: a
literal given for a tensor is a Const node, a tensor array (concat's `values`) a Tuple node. Variables are Var
nodes, or Const nodes holding their values when those are given; `constant` operations are Const nodes. Results of
operations with several outputs are read through TupleGetItem nodes (the index counts the outputs flattened). A
constant's single value is repeated to its shape, except where the shape holds one item or more than MAX_EXPANDED:
then the Const holds the value as a scalar.

One extension of the seed: the Function of a graph with several outputs has as `ret_type` a list of
{"dtype", "shape"} objects, one per output. Unknown shapes are written as [] and unknown types as "unknown".
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnef_torch.errors import NNEFOptionError, NNEFUnsupportedError
from nnef_torch.format.container import write_file
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.format.tensor_file import TensorData
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.viz.relayviz_read import check_relayviz

DTYPES = {"scalar": "float32", "integer": "int64", "logical": "bool"}  # NNEF type -> RelayViz dtype
UNKNOWN_DTYPE = "unknown"
MAX_EXPANDED = 10 ** 6  # a constant's single value is repeated to its shape up to this volume
VERSION = [1, 0]


def relayviz_document(graph: Graph, tensors: Mapping[str, Any] | None = None) -> dict:
    """The RelayViz document of `graph`. With `tensors` (values by variable label: numpy arrays, torch tensors or
    decoded tensor files; a lower-case label will do), variables are Const nodes holding their values."""
    return _Writer(graph, tensors).document()


def format_relayviz(document: Mapping[str, Any]) -> str:
    """The JSON text of a document: the root's fields and then one node per line. The document is checked first
    (`check_relayviz`: ForeignFormatError naming the JSON path of what is wrong), so that what is written is
    RelayViz that read_relayviz reads back: finite numbers, integers within 64 bits, no value of another type."""
    check_relayviz(document)

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    nodes = ",\n".join(f"  {dump(node)}" for node in document["nodes"])
    head = ", ".join(f"{dump(key)}: {dump(value)}" for key, value in document.items() if key != "nodes")
    return f'{{{head}, "nodes": [\n{nodes}\n]}}\n' if nodes else f'{{{head}, "nodes": []}}\n'


def write_relayviz(graph: Graph, path: str | os.PathLike, tensors: Mapping[str, Any] | None = None) -> None:
    """Write the RelayViz document of `graph` to `path` (UTF-8), atomically."""
    write_file(path, format_relayviz(relayviz_document(graph, tensors)).encode("utf-8"))


class _Writer:
    def __init__(self, graph: Graph, tensors: Mapping[str, Any] | None):
        self.graph = graph
        self.nodes: list[dict[str, Any]] = []
        self.node_of: dict[str, int] = {}  # tensor name -> the node that is its value
        self.item_of: dict[str, tuple[int, int]] = {}  # tensor name -> (Call of several outputs, index)
        self.params: list[int] = []
        self.arrays = self._arrays(tensors)  # variable label -> values, when given

    def document(self) -> dict:
        for op in self.graph.operations:
            _BUILDERS.get(op.name, _Writer._call)(self, op)
        outputs = [self._use(name) for name in self.graph.outputs]
        body = outputs[0] if len(outputs) == 1 else self._add({"node_kind": "Tuple", "fields": outputs})
        types = [self._type(name) for name in self.graph.outputs]
        self._add({"node_kind": "Function", "body": body, "params": self.params,
                   "ret_type": types[0] if len(types) == 1 else types})
        return {"format": "relayviz", "version": list(VERSION), "nodes": self.nodes}

    def _add(self, node: dict[str, Any]) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def _external(self, op: Operation) -> None:
        self.params.append(self._var(op))

    def _variable(self, op: Operation) -> None:
        if self.arrays is None:
            self._var(op)
            return
        name = _single_output(op)
        array = self.arrays[op.attribs["label"]]
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise NNEFUnsupportedError(f"variable '{name}' holds infinities or NaN, which have no JSON form, so "
                                       "RelayViz cannot hold its values")
        if array.dtype.kind in "iu" and array.size and max(abs(int(array.min())), abs(int(array.max()))) > MAX_INTEGER:
            raise NNEFUnsupportedError(f"variable '{name}' holds integers beyond 2^63 - 1, which RelayViz readers "
                                       "refuse")
        value = {"array_value": array.ravel().tolist(), "array_shape": list(array.shape)}
        self.node_of[name] = self._add({"node_kind": "Const", "value": value, "dtype": str(array.dtype)})

    def _constant(self, op: Operation) -> None:
        name = _single_output(op)
        shape = [int(dim) for dim in op.attribs["shape"]]
        values = [_json(value, name) for value in op.attribs["value"]]
        volume = math.prod(shape)
        if len(values) == 1 and (volume == 1 or volume > MAX_EXPANDED):
            value: Any = values[0]  # a single value fills the shape
        else:
            value = {"array_value": values * volume if len(values) == 1 else values, "array_shape": shape}
        self.node_of[name] = self._add({"node_kind": "Const", "value": value, "dtype": self._dtype(name)})

    def _call(self, op: Operation) -> None:
        args = [self._argument(value, f"{op.name} {param}") for param, value in op.inputs.items()]
        head = self._add({"node_kind": "Op", "name": op.name, "attrs": _json(op.attribs, op.name)})
        call = self._add({"node_kind": "Call", "op": head, "args": args})
        outputs = list(op.output_refs())
        if len(outputs) == 1:
            self.node_of[outputs[0].name] = call
        else:
            for index, ref in enumerate(outputs):
                self.item_of[ref.name] = (call, index)

    def _var(self, op: Operation) -> int:
        name = _single_output(op)
        shape = self.graph.tensors[name].shape
        node = self._add({"node_kind": "Var", "name": name, "dtype": self._dtype(name),
                          "shape": list(shape if shape is not None else op.attribs.get("shape", []))})
        self.node_of[name] = node
        return node

    def _argument(self, value: Any, where: str) -> int:
        if isinstance(value, Ref):
            return self._use(value.name)
        if isinstance(value, (list, tuple)):
            return self._add({"node_kind": "Tuple", "fields": [self._argument(item, where) for item in value]})
        return self._add({"node_kind": "Const", "value": _json(value, where), "dtype": _literal_dtype(value)})

    def _use(self, name: str) -> int:
        """The node of tensor `name`: its producer, or a TupleGetItem of it made on first use."""
        if name not in self.node_of:
            call, index = self.item_of[name]
            self.node_of[name] = self._add({"node_kind": "TupleGetItem", "tuple_value": call, "index": index})
        return self.node_of[name]

    def _dtype(self, name: str) -> str:
        tensor = self.graph.tensors.get(name)
        return DTYPES.get(tensor.dtype, UNKNOWN_DTYPE) if tensor is not None and tensor.dtype else UNKNOWN_DTYPE

    def _type(self, name: str) -> dict[str, Any]:
        tensor = self.graph.tensors.get(name)
        shape = tensor.shape if tensor is not None and tensor.shape is not None else ()
        return {"dtype": self._dtype(name), "shape": list(shape)}

    def _arrays(self, tensors: Mapping[str, Any] | None) -> dict[str, np.ndarray] | None:
        """The values of each variable label, checked against the variables' shapes: one error lists every
        variable that has none or whose shape differs."""
        if tensors is None:
            return None
        if not isinstance(tensors, Mapping):
            raise NNEFOptionError(f"tensors= takes a mapping of variable label -> values, not a "
                                  f"{type(tensors).__name__}")
        arrays, problems = {}, []
        for variable in self.graph.signature.variables:
            try:
                array = _array(_weights(tensors, variable.label))
            except KeyError:
                problems.append(f"no values for variable '{variable.name}' (label '{variable.label}')")
                continue
            except (TypeError, ValueError, RuntimeError):  # ragged lists, objects numpy cannot hold
                problems.append(f"values of '{variable.label}' are not an array of numbers")
                continue
            if array.dtype.kind not in "biuf":
                problems.append(f"values of '{variable.label}' have dtype {array.dtype}, not numbers or booleans")
                continue
            if tuple(array.shape) != tuple(variable.shape):
                problems.append(f"values of '{variable.label}' have shape {list(array.shape)}, variable "
                                f"'{variable.name}' is declared {list(variable.shape)}")
            arrays[variable.label] = array
        if problems:
            raise NNEFOptionError("tensors= does not fit the graph: " + "; ".join(problems))
        return arrays


_BUILDERS = {"external": _Writer._external, "variable": _Writer._variable, "constant": _Writer._constant}


def _single_output(op: Operation) -> str:
    (ref,) = op.output_refs()
    return ref.name


def _weights(tensors: Mapping[str, Any], label: str) -> Any:
    if label in tensors:
        return tensors[label]
    return tensors[label.lower()]  # read_model keys its tensors by lower-case label


def _array(value: Any) -> np.ndarray:
    if isinstance(value, TensorData):
        value = value.array
    if hasattr(value, "detach"):  # a torch tensor; numpy has no bfloat16
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    return np.asarray(value)


def _literal_dtype(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "int64" if isinstance(value, int) else "float32"


def _json(value: Any, where: str) -> Any:
    """`value` as JSON data: tuples become lists; infinities and NaN have no JSON form."""
    if isinstance(value, Mapping):
        return {str(key): _json(item, where) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(item, where) for item in value]
    if isinstance(value, np.generic):  # a numpy scalar: its Python value
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise NNEFUnsupportedError(f"{where}: the value {value} has no JSON form, so RelayViz cannot hold it")
    return value
