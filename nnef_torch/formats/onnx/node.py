"""An ONNX node as its import rule sees it: its inputs (IR tensors, or arrays known while converting), its
attributes by type with the ones read recorded, and errors that name it."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.ir import limits
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref

MAX_CONSTANT_ITEMS = 1 << 16  # items of an array written into the graph as an NNEF constant


def dtype_of(dtype: np.dtype) -> str:
    return "logical" if dtype.kind == "b" else "scalar" if dtype.kind == "f" else "integer"


class OnnxNode:
    def __init__(self, proto: Any, where: str, inputs: list[Any], builder: Builder, file: str, opset: int,
                 attribute_value: Any):
        self.op, self.where, self.file, self.opset = proto.op_type, where, file, opset
        self.inputs = inputs  # per ONNX input: a Ref, an np.ndarray (known now) or None (an omitted optional one)
        self.input_names = list(proto.input)  # the file's names of the inputs
        self.outputs = len(proto.output)
        self.builder = builder
        self._attrs = {attribute.name: attribute for attribute in proto.attribute}
        self._value = attribute_value
        self._read: set[str] = set()
        self.scope: dict[str, Any] = {}  # the value table the node is converted in (If and Loop bodies read it)

    def fail(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", Location(file=self.file))

    # ------------------------------------------------------------------------------------------- attributes
    def attr(self, key: str, default: Any = None) -> Any:
        self._read.add(key)
        if key not in self._attrs:
            return default
        value = self._value(self._attrs[key])
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return list(value) if isinstance(value, (list, tuple)) or type(value).__name__.startswith("Repeated") \
            else value

    def only(self, key: str, allowed: tuple[Any, ...], default: Any) -> Any:
        """Attribute `key`, refused unless one of `allowed`."""
        value = self.attr(key, default)
        if value not in allowed:
            raise self.fail(f"attribute '{key}' = {value!r} is not supported (supported: {list(allowed)})")
        return value

    def unread(self) -> list[str]:
        return sorted(set(self._attrs) - self._read)

    # ------------------------------------------------------------------------------------------- inputs
    def has(self, position: int) -> bool:
        return position < len(self.inputs) and self.inputs[position] is not None

    def raw(self, position: int) -> Any:
        if not self.has(position):
            raise self.fail(f"input {position} is missing")
        return self.inputs[position]

    def known(self, position: int) -> bool:
        return self.has(position) and isinstance(self.inputs[position], np.ndarray)

    def const(self, position: int, what: str = "input") -> np.ndarray:
        """Input `position` as an array known while converting (a shape, axes, indices)."""
        value = self.raw(position)
        if isinstance(value, Ref):  # a float initializer (a variable) read as data: dynamo writes scalars so
            value = next((np.asarray(self.builder.data[v.label]) for v in self.builder.variables
                          if v.name == value.name), value)
        if not isinstance(value, np.ndarray):
            raise self.fail(f"{what} (input {position}) must be known while converting (a constant, an initializer "
                            "or a shape of static extents); it is computed from the graph's inputs")
        return value

    def ints(self, position: int, what: str = "input") -> list[int]:
        return [int(v) for v in self.const(position, what).reshape(-1)]

    def tensor(self, position: int) -> Any:
        """Input `position` as an IR tensor, or a literal for a single-item array."""
        return self.as_tensor(self.raw(position))

    def as_tensor(self, value: Any) -> Any:
        if not isinstance(value, np.ndarray):
            return value
        if value.size == 1 and value.ndim <= 1:
            item = value.reshape(-1)[0].item()
            return bool(item) if value.dtype.kind == "b" else item
        limits.check_count(f"{self.where}: constant items", value.size, MAX_CONSTANT_ITEMS, Location(file=self.file),
                           error=ForeignFormatError)
        items = [v.item() for v in value.reshape(-1)]
        if value.dtype.kind == "f":
            items = [float(v) for v in items]
        return self.builder.op("constant", shape=list(value.shape), value=items, generic=dtype_of(value.dtype),
                               out_shape=tuple(value.shape))

    def shape(self, position: int) -> tuple[int, ...]:
        value = self.raw(position)
        return tuple(value.shape) if isinstance(value, np.ndarray) else self.builder.shape(value)

    def rank(self, position: int) -> int:
        return len(self.shape(position))

    def axis(self, value: int, rank: int, key: str = "axis") -> int:
        if not -rank <= value < rank:
            raise self.fail(f"{key} {value} is out of range for rank {rank}")
        return value % rank

    def is_ref(self, position: int) -> bool:
        return self.has(position) and isinstance(self.inputs[position], Ref)
