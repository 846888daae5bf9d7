"""Which operation writes a tensor, looked up in constant time while the lowerer appends operations.

Readers that look back at what a tensor is (a constant tensor passed for an attribute, a lenient reading; the
values a dialect folds at load time) ask this index instead of scanning the operations written so far, so that
n such questions cost O(n), not O(n^2). The index follows the lowerer's list as it grows: it only ever appends.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnef_torch.ir.graph import Operation, Ref


class Producers:
    """The producer of each tensor of `operations`, a list that is only appended to. `memo` keeps what readers
    compute from a tensor's producers (by tensor name), once per tensor."""

    __slots__ = ("operations", "indexed", "by_name", "origins", "memo")

    def __init__(self, operations: Sequence[Operation]):
        self.operations = operations
        self.indexed = 0
        self.by_name: dict[str, Operation] = {}
        self.origins: dict[str, str] = {}  # a copy's name -> the tensor it copies from (copies followed)
        self.memo: dict[str, Any] = {}

    def of(self, name: str) -> Operation | None:
        """The operation that writes tensor `name` (the last one written, if several), or None."""
        operations = self.operations
        while self.indexed < len(operations):
            op = operations[self.indexed]
            self.indexed += 1
            for output in op.outputs.values():
                for ref in output if isinstance(output, list) else (output,):
                    if isinstance(ref, Ref):
                        self.by_name[ref.name] = op
        return self.by_name.get(name)

    def origin(self, name: str) -> Operation | None:
        """The producer of `name` with chains of `copy` followed back: that of the tensor first copied."""
        path: dict[str, None] = {}
        op = self.of(name)
        while op is not None and op.name == "copy" and isinstance(op.inputs.get("x"), Ref) and name not in path:
            known = self.origins.get(name)
            if known is not None:
                name = known
                op = self.of(name)
                break
            path[name] = None
            name = op.inputs["x"].name
            op = self.of(name)
        for step in path:  # each copy is walked once, whatever the number of questions
            self.origins[step] = name
        return op


__all__ = ["Producers"]
