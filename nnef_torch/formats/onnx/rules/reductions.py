"""ONNX reductions (axes as an attribute, or as an input from opset 18): ReduceMean/Sum/Max/Min, ArgMax and ArgMin,
and the norms and log-sum-exp written with NNEF reductions. A known input is reduced while converting."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.formats.onnx.rules.tensor import _axes
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"


def _arg(op: str) -> Any:
    def rule(b: Builder, node: OnnxNode) -> Any:
        rank = node.rank(0)
        axis = node.axis(int(node.attr("axis", 0)), rank)
        node.only("select_last_index", (0,), 0)
        result = b.op(op, node.tensor(0), axes=[axis])
        return result if node.attr("keepdims", 1) else b.op("squeeze", result, axes=[axis])
    rule.__name__ = op
    return rule


_FOLD = {"mean_reduce": np.mean, "sum_reduce": np.sum, "max_reduce": np.max, "min_reduce": np.min}


def _reduce(op: str) -> Any:
    def rule(b: Builder, node: OnnxNode) -> Any:
        rank = node.rank(0)
        axes = _axes(node, rank)
        noop = node.attr("noop_with_empty_axes", 0)
        if axes is None or not axes:
            if noop:
                return b.op("copy", node.tensor(0))
            axes = list(range(rank))
        if node.known(0):  # a known array (a shape's items, say) stays known
            return _FOLD[op](node.const(0), axis=tuple(axes), keepdims=bool(node.attr("keepdims", 1)))
        result = b.op(op, node.tensor(0), axes=axes)
        return result if node.attr("keepdims", 1) else b.op("squeeze", result, axes=axes)
    rule.__name__ = op
    return rule


for _op, _name in (("mean_reduce", "ReduceMean"), ("sum_reduce", "ReduceSum"), ("max_reduce", "ReduceMax"),
                   ("min_reduce", "ReduceMin")):
    import_rule(_op, ONNX, _name)(_reduce(_op))


import_rule("argmax_reduce", ONNX, "ArgMax")(_arg("argmax_reduce"))
import_rule("argmin_reduce", ONNX, "ArgMin")(_arg("argmin_reduce"))


def _reduce_with(op: str) -> Any:
    def rule(b: Builder, node: OnnxNode) -> Any:
        rank = node.rank(0)
        axes = _axes(node, rank)
        x = node.tensor(0)
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return b.op("copy", x)
            axes = list(range(rank))
        if op == "l1":
            result = b.op("sum_reduce", b.op("abs", x), axes=axes)
        elif op in ("l2", "sum_square"):
            result = b.op("sum_reduce", b.op("sqr", x), axes=axes)
            result = b.op("sqrt", result) if op == "l2" else result
        elif op == "log_sum":
            result = b.op("log", b.op("sum_reduce", x, axes=axes))
        else:  # log_sum_exp, shifted by the maximum for stability
            top = b.op("max_reduce", x, axes=axes)
            result = b.op("add", b.op("log", b.op("sum_reduce", b.op("exp", b.op("sub", x, top)), axes=axes)), top)
        return result if node.attr("keepdims", 1) else b.op("squeeze", result, axes=axes)
    rule.__name__ = op
    return rule


import_rule("sum_reduce", ONNX, "ReduceL1")(_reduce_with("l1"))
import_rule("sum_reduce", ONNX, "ReduceL2")(_reduce_with("l2"))
import_rule("sum_reduce", ONNX, "ReduceSumSquare")(_reduce_with("sum_square"))
import_rule("sum_reduce", ONNX, "ReduceLogSumExp")(_reduce_with("log_sum_exp"))
import_rule("sum_reduce", ONNX, "ReduceLogSum")(_reduce_with("log_sum"))


@import_rule("argmax_reduce", ONNX, "Hardmax")
def hardmax(b: Builder, node: OnnxNode) -> Any:
    """1.0 at the first maximum along `axis`, 0.0 elsewhere: argmax compared with the positions along the axis."""
    shape = node.shape(0)
    axis = node.axis(int(node.attr("axis", -1)), len(shape))
    view = [1] * len(shape)
    view[axis] = shape[axis]
    positions = node.as_tensor(np.arange(shape[axis], dtype=np.float32).reshape(view))
    first = b.op("cast", b.op("argmax_reduce", node.tensor(0), axes=[axis]), generic="scalar")  # NNEF compares scalars
    return b.op("select", b.op("eq", first, positions), 1.0, 0.0)
