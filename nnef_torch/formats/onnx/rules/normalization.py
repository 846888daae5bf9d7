"""ONNX normalizations beyond BatchNormalization and LayerNormalization: InstanceNormalization, GroupNormalization
(opset 21's per-channel scale; the checker refuses opset 18's per-group one), LpNormalization and LRN."""
from __future__ import annotations

from typing import Any

from nnef_torch.formats.nnvm.rules.common import channel_vector
from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"


@import_rule("instance_norm", ONNX, "InstanceNormalization")
def instance_normalization(b: Builder, node: OnnxNode) -> Any:
    rank = node.rank(0)
    if rank < 3:
        raise node.fail(f"the input must have spatial axes (rank 3 or more), not rank {rank}")
    scale, offset = (channel_vector(b, node.tensor(i), rank) for i in (1, 2))
    return b.op("instance_norm", node.tensor(0), scale, offset, axes=list(range(2, rank)),
                epsilon=float(node.attr("epsilon", 1e-5)))


@import_rule("group_norm", ONNX, "GroupNormalization")
def group_normalization(b: Builder, node: OnnxNode) -> Any:
    shape = node.shape(0)
    groups = int(node.attr("num_groups", 0))
    node.only("stash_type", (1,), 1)
    if len(shape) < 2 or groups <= 0 or shape[1] % groups:
        raise node.fail(f"num_groups {groups} does not divide the {shape[1] if len(shape) > 1 else '?'} channels")
    for position in (1, 2):
        if node.shape(position) != (shape[1],):
            raise node.fail(f"input {position} has shape {list(node.shape(position))}; opset 21 gives one item per "
                            f"channel ([{shape[1]}])")
    scale, offset = (channel_vector(b, node.tensor(i), len(shape)) for i in (1, 2))
    return b.op("group_norm", node.tensor(0), scale, offset, groups=groups, shape=list(shape),
                epsilon=float(node.attr("epsilon", 1e-5)))


@import_rule("l2_normalization", ONNX, "LpNormalization")
def lp_normalization(b: Builder, node: OnnxNode) -> Any:
    p = node.only("p", (1, 2), 2)
    axis = node.axis(int(node.attr("axis", -1)), node.rank(0))
    return b.op("l2_normalization" if p == 2 else "l1_normalization", node.tensor(0), axes=[axis])


@import_rule("local_response_normalization", ONNX, "LRN")
def local_response_normalization(b: Builder, node: OnnxNode) -> Any:
    rank = node.rank(0)
    size = int(node.attr("size", 0))
    if size <= 0:
        raise node.fail(f"size {size} must be positive")
    return b.op("local_response_normalization", node.tensor(0), size=[1, size] + [1] * (rank - 2),
                alpha=float(node.attr("alpha", 1e-4)), beta=float(node.attr("beta", 0.75)),
                bias=float(node.attr("bias", 1.0)))


@import_rule("moments", ONNX, "MeanVarianceNormalization")
def mean_variance_normalization(b: Builder, node: OnnxNode) -> Any:
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes` (default 0, 2, 3), as the operator's function body."""
    rank = node.rank(0)
    axes = sorted(node.axis(int(a), rank, "axes") for a in node.attr("axes", [0, 2, 3]))
    x = node.tensor(0)
    mean, variance = b.op("moments", x, axes=axes)
    return b.op("div", b.op("sub", x, mean), b.op("add", b.op("sqrt", variance), 1e-9))
