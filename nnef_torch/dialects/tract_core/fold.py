"""The value of a tensor the lowerer has already written, when it is computed from constants alone (shape
arithmetic such as `squeeze(slice(tract_core_shape_of(x)))`, once the shapes are static): a small evaluator of
the operations torch_to_nnef writes around `tract_core_shape_of`, for arguments tract reads as tensors but this
reader needs at load time (`tract_core_range`'s bounds)."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.ir.graph import Ref

MAX_ITEMS = 1 << 16  # folded values are shapes and bounds: small

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
_KINDS = {"integer": np.int64, "scalar": np.float32, "logical": np.bool_}


def fold(lowerer: Any, value: Any) -> np.ndarray | None:
    """`value` (a literal or a tensor of the lowerer) as an array, or None when it depends on a graph input or on
    an operation this evaluator does not read."""
    if not isinstance(value, Ref):
        return np.asarray(value) if isinstance(value, (bool, int, float)) else None
    op = _producer(lowerer, value.name)
    if op is None:
        return None
    attribs = op.attribs
    if op.name == "constant":
        shape = [int(extent) for extent in attribs["shape"]]
        if int(np.prod(shape)) > MAX_ITEMS:
            return None
        items = np.asarray(attribs["value"])
        return np.broadcast_to(items, shape).copy() if items.size == 1 else items.reshape(shape)
    inputs = {key: fold(lowerer, item) for key, item in op.inputs.items() if not isinstance(item, list)}
    if any(item is None for item in inputs.values()):
        return None
    if op.name == "copy":
        return inputs["x"]
    if op.name in _BINARY:
        return _BINARY[op.name](inputs["x"], inputs["y"])
    if op.name == "cast":
        return inputs["input"].astype(_KINDS.get(op.dtype, np.float32))
    if op.name == "squeeze":
        return np.squeeze(inputs["input"], axis=tuple(attribs["axes"])) if attribs["axes"] else inputs["input"]
    if op.name == "unsqueeze":
        return np.expand_dims(inputs["input"], tuple(attribs["axes"]))
    if op.name == "reshape":
        return inputs["input"].reshape(lowerer.tensors[op.outputs["output"].name].shape)
    if op.name == "slice":
        array = inputs["input"]
        index = [slice(None)] * array.ndim
        strides = attribs.get("stride") or [1] * len(attribs["axes"])
        for axis, begin, end, stride in zip(attribs["axes"], attribs["begin"], attribs["end"], strides):
            extent = array.shape[axis]
            end = extent if end == 0 and stride == 1 else end  # end 0 reads to the end (as the shape rule)
            index[axis] = slice(begin, end, stride)
        return array[tuple(index)]
    return None


def _producer(lowerer: Any, name: str) -> Any:
    wanted = Ref(name)
    for op in reversed(lowerer.operations):
        if any(output == wanted for output in op.outputs.values()):
            return op
    return None


def fold_integer(lowerer: Any, value: Any) -> int | None:
    """`value` as one integer, or None."""
    array = fold(lowerer, value)
    if array is None or array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(()))


__all__ = ["fold", "fold_integer"]
