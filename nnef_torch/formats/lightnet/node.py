"""A LightNet op as its import rule sees it: its input tensors as IR values with their shapes and TensorLight
dtypes, its params by type (checked against the optype table already), the outputs' dtypes it sets, and errors that
name it at its place in the file."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, NNEFUnsupportedError
from nnef_torch.formats.lightnet.ir_json import IR, LnOp
from nnef_torch.formats.lightnet.weights import Weights
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.limits import check_computed, check_count, check_shape

FLOATS = ("TL_FLOAT", "TL_DOUBLE")
# Items of the constants a model's rules write into its NNEF document (ranges, sort positions, resize indexes), for
# the whole model: each is a literal of the document, read back at some 250 bytes and 15 microseconds an item.
MAX_LITERAL_ITEMS = 1 << 17


@dataclass
class Context:
    """What a conversion knows beyond one op: the tensors converted so far (LightNet name -> IR value and
    TensorLight dtype), the tensors the caller fills (`inputs=`, already declared as externals), the weights, and
    the problems collected (missing weights) to be reported together."""

    builder: Builder
    ir: IR
    weights: Weights
    externals: dict[str, Ref] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # tensor name -> variable label
    taken_labels: set[str] = field(default_factory=set)  # the labels given, in lower case (labels name files)
    label_numbers: dict[str, int] = field(default_factory=dict)  # label base -> the next number to try after it
    problems: list[str] = field(default_factory=list)
    computed: int = 0  # items of the arrays the rules computed so far (zeros, random numbers, ranges, indexes)
    literals: int = 0  # items of the constants the rules wrote so far


class LnNode:
    def __init__(self, op: LnOp, context: Context):
        self.op = op
        self.name, self.optype, self.where = op.name, op.optype, op.where
        self.context = context
        self.builder = context.builder
        self.out_dtypes: dict[str, str] = {}  # outputs whose dtype is not the first input's

    def fail(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", self.op.location)

    def unsupported(self, message: str) -> NNEFUnsupportedError:
        return NNEFUnsupportedError(f"{self.where}: {message}", self.op.location)

    # -- tensors --
    def input(self, arg: str) -> Any:
        return self.context.values[self.op.tensors_in[arg]]

    def tensor(self, arg: str) -> str:
        """The name of the tensor given for `arg` (an input's or an output's)."""
        return self.op.tensors_in.get(arg) or self.op.tensors_out[arg]

    def shape(self, arg: str) -> tuple[int, ...]:
        return self.builder.shape(self.input(arg))

    def dtype(self, arg: str) -> str:
        return self.context.dtypes[self.op.tensors_in[arg]]

    def floating(self, *args: str) -> None:
        """The inputs `args` must hold floating-point numbers: NNEF computes arithmetic on scalars only."""
        for arg in args:
            if self.dtype(arg) not in FLOATS:
                raise self.unsupported(f"input '{arg}' ('{self.tensor(arg)}') is {self.dtype(arg)}; nnef_torch "
                                       f"converts {self.optype} on floating tensors (TL_FLOAT, TL_DOUBLE) only, as "
                                       "NNEF's arithmetic takes scalar tensors")

    def same_type(self, first: str, second: str) -> None:
        if self.dtype(first) != self.dtype(second):
            raise self.fail(f"'{second}' ('{self.tensor(second)}') is {self.dtype(second)}, but '{first}' "
                            f"('{self.tensor(first)}') is {self.dtype(first)}: they must have the same dtype")

    def same_shape(self, first: str, second: str) -> None:
        if self.shape(first) != self.shape(second):
            raise self.fail(f"'{second}' ('{self.tensor(second)}') has shape {list(self.shape(second))}, but "
                            f"'{first}' ('{self.tensor(first)}') has shape {list(self.shape(first))}: they must "
                            "have the same shape")

    def rank(self, arg: str, *ranks: int) -> tuple[int, ...]:
        shape = self.shape(arg)
        if len(shape) not in ranks:
            expected = " or ".join(str(rank) for rank in ranks)
            raise self.fail(f"input '{arg}' ('{self.tensor(arg)}') should have {expected} dimensions, found shape "
                            f"{list(shape)}")
        return shape

    def axis(self, name: str, rank: int) -> int:
        value = self.int(name)
        if not 0 <= value < rank:
            raise self.fail(f"param '{name}' is {value}, out of range for a tensor of {rank} dimensions "
                            f"(0 to {rank - 1})")
        return value

    # -- limits: what a rule computes from params is checked before it is allocated --
    def dims(self, name: str) -> list[int]:
        """An int[] param that is a shape (dims), once its volume fits NNEF's integers."""
        return list(check_shape(f"{self.where}: param '{name}'", self.ints(name), self.op.location,
                                error=ForeignFormatError))

    def computed(self, what: str, count: int) -> int:
        """`count`, the items of an array this op's rule is about to compute, once it and all the model's computed
        items together are within MAX_COMPUTED_ITEMS (a model's data comes from its files)."""
        check_computed(f"{self.where}: {what}", count, self.op.location, error=ForeignFormatError)
        total = check_computed(f"{self.where}: {what} (with the arrays computed for the ops before it)",
                               self.context.computed + count, self.op.location, error=ForeignFormatError)
        self.context.computed = total
        return count

    def literals(self, what: str, count: int) -> int:
        """`count`, the items of a constant this op's rule is about to write into the document (after computing
        them: `computed` too), once the model's constants hold at most MAX_LITERAL_ITEMS."""
        self.computed(what, count)
        total = check_count(f"{self.where}: {what} (with the constants written for the ops before it)",
                            self.context.literals + count, MAX_LITERAL_ITEMS, self.op.location,
                            error=ForeignFormatError)
        self.context.literals = total
        return count

    # -- params (their JSON types were checked against the optype table) --
    def param(self, name: str) -> Any:
        return self.op.params[name]

    def int(self, name: str) -> int:
        return int(self.op.params[name])

    def ints(self, name: str) -> list[int]:
        return [int(value) for value in self.op.params[name]]

    def float(self, name: str) -> float:
        """A param LightNet reads as a C float (realtype float), rounded to float32 as it is."""
        return float(np.float32(self.op.params[name]))

    def double(self, name: str) -> float:
        return float(self.op.params[name])

    def doubles(self, name: str) -> list[float]:
        return [float(value) for value in self.op.params[name]]

    def str(self, name: str) -> str:
        return str(self.op.params[name])

    def bool(self, name: str) -> bool:
        return bool(self.op.params[name])
