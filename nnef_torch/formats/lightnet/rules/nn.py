"""Import rules of LightNet's network ops: conv2d, deconv2d, maxpool2d, avgpool2d, batchnorm, relu, lrelu, sigmoid
and softmax. Tensors are NCHW; weights keep LightNet's shapes (a bias is (C,), laid out as NNEF's (1, C) in the
graph)."""
from __future__ import annotations

from typing import Any

from nnef_torch.formats.lightnet.node import LnNode
from nnef_torch.formats.lightnet.rules.common import (
    LIGHTNET,
    autopadding,
    c_div,
    crop_negative,
    row,
    window_extents,
)
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule


def _filtered(node: LnNode) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of 'src' and 'weight' of conv2d and deconv2d, checked with 'bias' and 'size'."""
    shape, weight = node.rank("src", 4), node.rank("weight", 4)
    node.rank("bias", 1)
    node.floating("src", "weight", "bias")
    node.same_type("src", "weight")
    node.same_type("src", "bias")
    size = node.ints("size")
    if list(weight[2:]) != size:
        raise node.fail(f"'size' {size} should be equal to the last two dimensions of 'weight' {list(weight)}")
    return shape, weight


@import_rule("conv", LIGHTNET, "conv2d")
def conv2d(b: Builder, node: LnNode) -> Any:
    """Convolution of src [N, C, H, W] with weight [O, C / group, kh, kw] plus bias [O]."""
    shape, weight = _filtered(node)
    group = node.int("group")
    if node.shape("bias")[0] != weight[0]:
        raise node.fail(f"'bias' {list(node.shape('bias'))} should have the size of dims[0] of 'weight' "
                        f"{list(weight)}")
    if weight[1] * group != shape[1]:
        raise node.fail(f"dims[1] of 'weight' {list(weight)} times 'group' ({group}) should be the channels of "
                        f"'src' {list(shape)}")
    if weight[0] % group:
        raise node.fail(f"'group' ({group}) should divide the output channels (dims[0] of 'weight' {list(weight)})")
    size, stride, dilation = node.ints("size"), node.ints("stride"), node.ints("dilation")
    padding = autopadding(node, shape[2:], size, stride, dilation, node.ints("padding"))
    window_extents(node, shape[2:], size, stride, dilation, padding)
    x, pairs = crop_negative(b, node.input("src"), padding)
    return b.op("conv", x, node.input("weight"), row(b, node.input("bias")), padding=pairs, stride=stride,
                dilation=dilation, groups=group)


@import_rule("deconv", LIGHTNET, "deconv2d")
def deconv2d(b: Builder, node: LnNode) -> Any:
    """Transposed convolution of src [N, C, H, W] with weight [C, O / group, kh, kw] plus bias [O]: each output
    extent is stride * (input - 1) + output_padding + dilated size - padding, the output padding added after the
    last item; `output_dims`, where all of them are positive, must agree (and set the padding of the SAME
    modes)."""
    shape, weight = _filtered(node)
    group = node.int("group")
    channels = weight[1] * group
    if node.shape("bias")[0] != channels:
        raise node.fail(f"dims[1] of 'weight' {list(weight)} times 'group' ({group}) should be the size of 'bias' "
                        f"{list(node.shape('bias'))}")
    if weight[0] != shape[1] or shape[1] % group:
        raise node.fail(f"dims[0] of 'weight' {list(weight)} should be the channels of 'src' {list(shape)}, a "
                        f"multiple of 'group' ({group})")
    size, stride, dilation = node.ints("size"), node.ints("stride"), node.ints("dilation")
    output_padding, output_dims = node.ints("output_padding"), node.ints("output_dims")
    padding = node.ints("padding")
    known = all(extent > 0 for extent in output_dims)
    dilated = [(k - 1) * d + 1 for k, d in zip(size, dilation)]
    mode = node.str("autopad")
    if mode == "VALID":
        padding = [0, 0, 0, 0]
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        if not known:
            raise node.fail(f"'autopad' cannot be {mode} when 'output_dims' {output_dims} are not all positive")
        total = [s * (x - 1) + p + k - o for s, x, p, k, o in zip(stride, shape[2:], output_padding, dilated,
                                                                   output_dims[2:])]
        half = [c_div(t, 2) for t in total]
        rest = [t - h for t, h in zip(total, half)]
        padding = half + rest if mode == "SAME_UPPER" else rest + half
    if any(p < 0 for p in padding):
        raise node.unsupported(f"the padding {padding} is negative: the output would reach beyond the transposed "
                               "convolution, which NNEF's deconv cannot express")
    extents = [s * (x - 1) + p + k - (padding[axis] + padding[axis + 2])
               for axis, (s, x, p, k) in enumerate(zip(stride, shape[2:], output_padding, dilated))]
    result = [shape[0], channels] + extents
    if any(extent <= 0 for extent in extents):
        raise node.fail(f"the output extents would be {extents}")
    if known and output_dims != result:
        raise node.fail(f"'output_dims' {output_dims} do not match the output's dimensions {result}")
    return b.op("deconv", node.input("src"), node.input("weight"), row(b, node.input("bias")),
                padding=[(padding[0], padding[2]), (padding[1], padding[3])], stride=stride, dilation=dilation,
                output_shape=result, groups=group)


def _pool(b: Builder, node: LnNode, name: str) -> Any:
    """max_pool and avg_pool over the spatial dimensions: padded items are never a maximum and never averaged
    (border 'ignore'); output extents rounded down. `autopad` is computed over the spatial dimensions (LightNet's
    pools pass the batch and channel extents to it, a slip its convolutions do not make)."""
    shape = node.rank("src", 4)
    node.floating("src")
    size, stride = node.ints("size"), node.ints("stride")
    padding = autopadding(node, shape[2:], size, stride, [1, 1], node.ints("padding"))
    window_extents(node, shape[2:], size, stride, [1, 1], padding)
    x, pairs = crop_negative(b, node.input("src"), padding)
    return b.op(name, x, size=[1, 1] + size, border="ignore", padding=[(0, 0), (0, 0)] + pairs,
                stride=[1, 1] + stride)


@import_rule("max_pool", LIGHTNET, "maxpool2d")
def maxpool2d(b: Builder, node: LnNode) -> Any:
    return _pool(b, node, "max_pool")


@import_rule("avg_pool", LIGHTNET, "avgpool2d")
def avgpool2d(b: Builder, node: LnNode) -> Any:
    return _pool(b, node, "avg_pool")


@import_rule("batch_normalization", LIGHTNET, "batchnorm")
def batchnorm(b: Builder, node: LnNode) -> Any:
    """(src - mean) / sqrt(var + epsilon) * scale + offset over the channels of an NCHW tensor. The statistics
    are constants like the rest, so they are Parameters too; the module normalizes with them in training as well."""
    shape = node.rank("src", 4)
    node.floating("src")
    stats = [node.input(arg) for arg in ("mean", "var", "offset", "scale")]
    for arg in ("scale", "offset", "mean", "var"):
        node.same_type("src", arg)
        if node.shape(arg) != (shape[1],):
            raise node.fail(f"'{arg}' ('{node.tensor(arg)}') should have shape [{shape[1]}] (the channels of "
                            f"'src' {list(shape)}), found {list(node.shape(arg))}")
    mean, variance, offset, scale = (row(b, value) for value in stats)
    return b.op("batch_normalization", node.input("src"), mean, variance, offset, scale,
                epsilon=node.float("epsilon"))


@import_rule("relu", LIGHTNET, "relu")
def relu(b: Builder, node: LnNode) -> Any:
    node.floating("src")
    return b.op("relu", node.input("src"))


@import_rule("leaky_relu", LIGHTNET, "lrelu")
def lrelu(b: Builder, node: LnNode) -> Any:
    node.floating("src")
    return b.op("leaky_relu", node.input("src"), alpha=node.float("negslope"))


@import_rule("sigmoid", LIGHTNET, "sigmoid")
def sigmoid(b: Builder, node: LnNode) -> Any:
    node.floating("src")
    return b.op("sigmoid", node.input("src"))


@import_rule("softmax", LIGHTNET, "softmax")
def softmax(b: Builder, node: LnNode) -> Any:
    node.floating("src")
    return b.op("softmax", node.input("src"), axes=[node.axis("axis", len(node.shape("src")))])
