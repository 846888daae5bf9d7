"""MXNet operators computing statistics over axes, and the normalizations built on them: norm (ord 1 and 2),
moments, argmax_channel, GroupNorm (MXNet 1.x: gamma and beta per group) and softmin."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import Hidden, OpNode
from nnef_torch.formats.nnvm.rules.common import DTYPES, axes, axis, dtype_of
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"


def _reduced_axes(node: OpNode, rank: int, key: str) -> list[int]:
    """The axes of `key` (all of them when unset or empty), sorted."""
    given = node.attrs.ints(key, ())
    return sorted(axes(node, given, rank, key)) if given else list(range(rank))


def _squeezed(b: Builder, node: OpNode, reduced: Any, chosen: list[int], rank: int) -> Any:
    """A reduction's result as MXNet shapes it: kept axes with keepdims, else removed ([1] when none is left)."""
    if node.attrs.bool("keepdims", False):
        return reduced
    if len(chosen) == rank:
        return b.op("reshape", reduced, shape=[1]) if rank != 1 else reduced
    return b.op("squeeze", reduced, axes=chosen)


@import_rule("sum_reduce", NNVM, "norm")
def norm(b: Builder, node: OpNode) -> Any:
    """The L1 (sum of magnitudes) or L2 (root of the sum of squares) norm of the items over `axis` (all axes when
    unset); two axes are not a matrix norm here either: MXNet reduces the items the same way."""
    node.arity(1)
    x = node.input(0)
    order = node.attrs.int("ord", 2)
    if order not in (1, 2):
        raise node.fail(f"ord is {order}; MXNet's norm supports 1 and 2")
    rank = b.rank(x)
    chosen = _reduced_axes(node, rank, "axis")
    target = node.attrs.choice("out_dtype", ("float16", "float32", "float64", "int64", "int32", "int8"), None)
    if b.dtype(x) != "scalar":
        raise node.fail(f"norm of {b.dtype(x)} data: only scalar data is supported")
    if target is not None and dtype_of(np.dtype(DTYPES[target])) != "scalar":
        raise node.fail(f"out_dtype {target}: MXNet 1.9's kernels fail on an integer result type")
    if order == 1:
        out = b.op("sum_reduce", b.op("abs", x), axes=chosen)
    else:
        out = b.op("sqrt", b.op("sum_reduce", b.op("sqr", x), axes=chosen))
    return _squeezed(b, node, out, chosen, rank)


@import_rule("moments", NNVM, "moments")
def moments(b: Builder, node: OpNode) -> Any:
    """Mean and (biased) variance over `axes`, which MXNet requires."""
    node.arity(1)
    x = node.input(0)
    rank = b.rank(x)
    if not node.attrs.ints("axes", ()):
        raise node.fail("moments needs 'axes' (MXNet refuses a global moments without them)")
    chosen = _reduced_axes(node, rank, "axes")
    mean, variance = b.op("moments", x, axes=chosen)
    return _squeezed(b, node, mean, chosen, rank), _squeezed(b, node, variance, chosen, rank)


@import_rule("argmax_reduce", NNVM, "argmax_channel")
def argmax_channel(b: Builder, node: OpNode) -> Any:
    """The index of the first largest item along axis 1, as a float (MXNet's legacy operator)."""
    node.arity(1)
    x = node.input(0)
    rank = b.rank(x)
    if rank < 2 or b.dtype(x) != "scalar":
        raise node.fail(f"argmax_channel needs scalar data of rank 2 or more, found shape {list(b.shape(x))}")
    found = b.op("squeeze", b.op("argmax_reduce", x, axes=[1]), axes=[1])
    return b.op("cast", found, generic="scalar")


@import_rule("group_norm", NNVM, "GroupNorm", params=(1, 2))
def group_norm(b: Builder, node: OpNode) -> Any:
    """Normalization of each sample's channel groups ([N, C, ...] read as [N, G, C / G * ...]) by their mean
    and biased variance; MXNet 1.x scales and shifts each group (gamma and beta of shape [G]), here written as
    the per-channel scale and offset of the group_norm fragment. With output_mean_var, also the mean and the
    standard deviation sqrt(variance + eps), [N, G] each."""
    node.arity(3)
    groups = node.attrs.int("num_groups", 1)
    eps = float(node.attrs.float("eps", 1e-5))
    with_statistics = node.attrs.bool("output_mean_var", False)
    x = node.input(0)
    shape = list(b.shape(x))
    if len(shape) < 3 or groups <= 0 or shape[1] % groups:
        raise node.fail(f"GroupNorm needs an input of rank 3 or more whose {shape[1:2]} channels num_groups "
                        f"{groups} divides, found shape {shape}")
    gamma, beta = node.param(1, [groups], "gamma"), node.param(2, [groups], "beta")
    per_group = shape[1] // groups

    def channels(v: Any) -> Any:  # [G] -> [1, C]: each group's value for each of its channels
        if per_group == 1:
            return b.op("reshape", v, shape=[1, groups])
        return b.op("reshape", b.op("tile", b.op("reshape", v, shape=[groups, 1]), repeats=[1, per_group]),
                    shape=[1, shape[1]])

    out = b.op("group_norm", x, channels(gamma), channels(beta), groups=groups, shape=shape, epsilon=eps,
               out_shape=tuple(shape))
    if not with_statistics:
        return out, Hidden("mean"), Hidden("standard deviation")
    grouped = b.op("reshape", x, shape=[shape[0], groups, math.prod(shape[1:]) // groups])
    mean, variance = b.op("moments", grouped, axes=[2])
    deviation = b.op("sqrt", b.op("add", variance, eps))
    return out, b.op("squeeze", mean, axes=[2]), b.op("squeeze", deviation, axes=[2])


@import_rule("softmax", NNVM, "softmin")
def softmin(b: Builder, node: OpNode) -> Any:
    """softmax(-x / temperature) over `axis`."""
    node.arity(1, 2)
    x = node.input(0)
    dim = axis(node, node.attrs.int("axis", -1), b.rank(x))
    temperature = node.attrs.float("temperature", None)
    node.attrs.str("dtype", None)
    if node.attrs.bool("use_length", False):
        raise node.fail("use_length (a length input masking the softmin) is not supported")
    node.arity(1)
    scaled = b.op("neg", x) if temperature in (None, 1.0) else b.op("div", x, -float(temperature))
    return b.op("softmax", scaled, axes=[dim])
