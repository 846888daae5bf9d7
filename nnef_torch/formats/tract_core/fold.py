"""The value of a tensor the lowerer has already written, when it is computed from constants alone (shape
arithmetic such as `squeeze(slice(tract_core_shape_of(x)))`, once the shapes are static): a small evaluator of
the operations torch_to_nnef writes around `tract_core_shape_of`, for arguments tract reads as tensors but this
reader needs at load time (`tract_core_range`'s bounds, the constant indices of a gather, and every attribute
given as a tensor: `by_value.py`). Besides copies, casts and reshapes it evaluates integer arithmetic (`add sub
mul min max`, and `div` truncated, as torch_to_nnef divides extents for `expand`), comparisons (`lt gt le ge eq
ne`) and `select`, as torch_to_nnef's `dyn_slice` bounds an index.

Each tensor is folded once per reading (its value is kept in the lowerer's producer index) by a walk with its own
stack, so a chain of any length costs linear work and no Python recursion; each operation folded is charged to
the lowerer's compile-time budget (`nnef_torch.ir.evaluate.Budget`), and no value beyond MAX_ITEMS items is built.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.errors import Location
from nnef_torch.ir.graph import Operation, Ref

MAX_ITEMS = 1 << 16  # folded values are shapes, bounds and indices: small

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
_COMPARISONS = {"lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal, "eq": np.equal,
                "ne": np.not_equal}
_KINDS = {"integer": np.int64, "scalar": np.float32, "logical": np.bool_}
_FOLDED = frozenset({"constant", "copy", "cast", "squeeze", "unsqueeze", "reshape", "slice", "select", "div",
                     *_BINARY, *_COMPARISONS})
_CACHE = __name__  # the key of this evaluator's values in the producer index's memo


def fold(lowerer: Any, value: Any, loc: Location | None = None) -> np.ndarray | None:
    """`value` (a literal or a tensor of the lowerer) as an array, or None when it depends on a graph input, on an
    operation this evaluator does not read, or would hold more than MAX_ITEMS items. `loc`: the statement that
    asks, where the budget's error is raised."""
    if not isinstance(value, Ref):
        return np.asarray(value) if isinstance(value, (bool, int, float)) else None
    producers = lowerer.producers
    folded: dict[str, np.ndarray | None] = producers.memo.setdefault(_CACHE, {})
    stack, visiting = [value.name], set()
    while stack:
        name = stack[-1]
        if name in folded:
            stack.pop()
            continue
        op = producers.of(name)
        if op is None or op.name not in _FOLDED or any(isinstance(item, list) for item in op.inputs.values()):
            folded[name] = None
            stack.pop()
            continue
        pending = [item.name for item in op.inputs.values() if isinstance(item, Ref) and item.name not in folded]
        if pending and name not in visiting:
            visiting.add(name)
            stack.extend(pending)
            continue
        stack.pop()
        inputs = {key: folded.get(item.name) if isinstance(item, Ref) else _literal(item)
                  for key, item in op.inputs.items()}
        known = all(item is not None for item in inputs.values())
        folded[name] = _charged(lowerer, op, name, inputs, loc) if known else None
    return folded[value.name]


def _literal(value: Any) -> np.ndarray | None:
    return np.asarray(value) if isinstance(value, (bool, int, float)) else None


def _charged(lowerer: Any, op: Operation, name: str, inputs: dict[str, Any],
             loc: Location | None) -> np.ndarray | None:
    """The value of `op`'s output `name`, once its items are known to be few; its work charged to the budget."""
    shape = lowerer.tensors[name].shape if name in lowerer.tensors else None
    if shape is None or math.prod(shape) > MAX_ITEMS:
        return None
    budget = lowerer.budget
    budget.steps -= budget.INVOCATION_STEPS
    budget.items -= math.prod(shape)
    if budget.steps < 0 or budget.items < 0:
        raise budget.exhausted(loc or op.location)
    try:
        with np.errstate(all="ignore"):
            result = _compute(op, inputs, shape)
    except (ValueError, IndexError, TypeError):  # arguments numpy reads otherwise than the shape rule: not folded
        return None
    return result if result is not None and result.shape == tuple(shape) else None


def _compute(op: Operation, inputs: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray | None:
    attribs = op.attribs
    if op.name == "constant":
        items = np.asarray(attribs["value"], dtype=_KINDS.get(op.dtype or ""))
        return np.broadcast_to(items, shape).copy() if items.size == 1 else items.reshape(shape)
    if op.name == "copy":
        return inputs["x"]
    if op.name in _BINARY:
        x, y = inputs["x"], inputs["y"]
        result = _BINARY[op.name](x, y)
        if result.dtype.kind in "iu" and not _exact(op.name, x, y, result):
            return None  # past 64 bits: tract would not compute it either
        return result
    if op.name == "div":
        return _divide(inputs["x"], inputs["y"])
    if op.name in _COMPARISONS:
        return _COMPARISONS[op.name](inputs["x"], inputs["y"])
    if op.name == "select":
        return np.where(inputs["condition"], inputs["true_value"], inputs["false_value"])
    if op.name == "cast":
        return inputs["input"].astype(_KINDS.get(op.dtype or "", np.float32))
    if op.name == "squeeze":
        return np.squeeze(inputs["input"], axis=tuple(attribs["axes"])) if attribs["axes"] else inputs["input"]
    if op.name == "unsqueeze":
        return np.expand_dims(inputs["input"], tuple(attribs["axes"]))
    if op.name == "reshape":
        return inputs["input"].reshape(shape)
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


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """`div` as tract computes it: integers divided with the quotient truncated toward zero (torch_to_nnef divides
    extents, `expand`'s repeats), numbers otherwise; None for an integer division by zero."""
    if not (x.dtype.kind in "iu" and y.dtype.kind in "iu"):
        return np.divide(x, y)
    if np.any(y == 0):
        return None
    quotient = np.abs(x) // np.abs(y)
    return np.where((x < 0) != (y < 0), -quotient, quotient).astype(np.result_type(x, y))


def _exact(name: str, x: np.ndarray, y: np.ndarray, result: np.ndarray) -> bool:
    """Whether an integer `add`, `sub` or `mul` did not wrap around (checked in floating point, which is exact
    enough to tell: a wrapped result is off by about 2^64)."""
    if name not in ("add", "sub", "mul"):
        return True
    wide = _BINARY[name](x.astype(np.float64), y.astype(np.float64))
    return bool(np.all(np.abs(wide - result.astype(np.float64)) <= np.abs(wide) * 1e-9 + 1.0))


def fold_integer(lowerer: Any, value: Any, loc: Location | None = None) -> int | None:
    """`value` as one integer, or None."""
    array = fold(lowerer, value, loc)
    if array is None or array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(()))


__all__ = ["MAX_ITEMS", "fold", "fold_integer"]
