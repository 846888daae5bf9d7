"""NNVM's neural-network operators (dmlc/nnvm `src/top/nn`, `src/top/image` and their TVM successors) that MXNet
does not share: dense, conv2d, _contrib_conv2d_NCHWc, conv2d_transpose, batch_norm, leaky_relu, prelu, upsampling,
resize, lrn, l2_normalize and __layout_transform__; the compiler-internal operators (Winograd, gradients) are
refused with the reason.

Layouts are NNVM's layout strings: an upper-case letter is an axis, a number and a lower-case letter a block of the
axis of that letter (`NCHW16c`: C split into C/16 and an innermost 16). Any layout with the axes the operator needs
is converted to NCHW / OIHW by reshapes and transposes, and the result back to the layout asked for.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.formats.nnvm.rules.common import axes, axis, batch_norm_arguments, channel_vector
from nnef_torch.ir.builder import Builder, Unmappable
from nnef_torch.ir.limits import check_computed
from nnef_torch.ops.registry import import_rule, refuse_import

NNVM = "nnvm"
_LAYOUT_ITEM = re.compile(r"([A-Z])|([1-9][0-9]*)([a-z])")
_FLOAT_TYPES = ("-1", "same", "float32", "float64", "float16")


# ------------------------------------------------------------------------------------------------------- layouts
def parse_layout(node: OpNode, text: str) -> list[tuple[str, int]]:
    """[(letter, block)]: ('C', 0) for an axis (or the outer part of a blocked one), ('c', 16) for a block."""
    items, position = [], 0
    while position < len(text):
        match = _LAYOUT_ITEM.match(text, position)
        if match is None:
            raise node.fail(f"layout {text!r} is not a layout string such as NCHW or NCHW16c")
        items.append((match.group(1), 0) if match.group(1) else (match.group(3), int(match.group(2))))
        position = match.end()
    letters = [letter for letter, _ in items]
    if len(set(letters)) != len(letters) or any(
            letter.islower() and letter.upper() not in letters for letter in letters):
        raise node.fail(f"layout {text!r} repeats an axis or blocks an axis it does not have")
    return items


def _layout_plan(node: OpNode, shape: Sequence[int], src: str, dst: str
                 ) -> tuple[list[int], list[int], list[int]]:
    """How a tensor of `shape` in layout `src` becomes layout `dst`: (shape split into atoms, the permutation of
    the atoms, the result shape). An atom is an axis, or the outer part or the block of a blocked axis."""
    source, target = parse_layout(node, src), parse_layout(node, dst)
    if sorted(l for l, _ in source if l.isupper()) != sorted(l for l, _ in target if l.isupper()):
        raise Unmappable(f"layout {src} cannot be converted to {dst}: they have different axes")
    if len(shape) != len(source):
        raise node.fail(f"layout {src} has {len(source)} axes but the tensor has shape {list(shape)}")
    blocks: dict[str, int] = {}
    for letter, size in source + target:
        if letter.islower():
            if blocks.setdefault(letter.upper(), size) != size:
                raise Unmappable(f"converting layout {src} to {dst} changes the block of axis {letter.upper()}")
    extent = dict(zip((l for l, _ in source), shape))
    full = {l: extent[l] * (extent.get(l.lower(), 1)) for l, _ in source if l.isupper()}

    def atoms(layout: list[tuple[str, int]]) -> list[tuple[str, int]]:
        found = []
        own = {l for l, _ in layout}
        for letter, size in layout:
            block = blocks.get(letter, 0)
            if letter.islower():
                found.append((letter, size))
            elif block:
                if full[letter] % block:
                    raise node.fail(f"axis {letter} of extent {full[letter]} cannot be blocked by {block}")
                found.append((letter, full[letter] // block))
                if letter.lower() not in own:
                    found.append((letter.lower(), block))
            else:
                found.append((letter, full[letter]))
        return found

    first, last = atoms(source), atoms(target)
    names = [name for name, _ in first]
    blocked = {l for l, _ in target if l.islower()}
    result = [size if l.islower() else full[l] // blocks[l] if l.lower() in blocked else full[l] for l, size in target]
    order = [names.index(name) for name, _ in last]
    # atoms that stay neighbours in the same order move together: one axis each, for the lowest rank
    runs: list[list[int]] = []
    for index in order:
        if runs and runs[-1][-1] + 1 == index:
            runs[-1].append(index)
        else:
            runs.append([index])
    starts = sorted(run[0] for run in runs)
    merged = [math.prod(e for _, e in first[start:start + len(next(r for r in runs if r[0] == start))])
              for start in starts]
    return merged, [starts.index(run[0]) for run in runs], result


def layout_shape(node: OpNode, shape: Sequence[int], src: str, dst: str) -> list[int]:
    return _layout_plan(node, shape, src, dst)[2]


def relayout(b: Builder, node: OpNode, x: Any, src: str, dst: str) -> Any:
    """`x`, laid out in `src` (which must have an axis per axis of `x`), as a tensor laid out in `dst`."""
    if src == dst:
        axes_ = len(parse_layout(node, src))
        if axes_ != b.rank(x):
            raise node.fail(f"layout {src} has {axes_} axes but the tensor has shape {list(b.shape(x))}")
        return x
    split, order, result = _layout_plan(node, b.shape(x), src, dst)
    if list(b.shape(x)) != split:
        x = b.op("reshape", x, shape=split)
    if order != list(range(len(order))):
        x = b.op("transpose", x, axes=order)
    if list(b.shape(x)) != result:
        x = b.op("reshape", x, shape=result)
    return x


def _pair(node: OpNode, key: str, default: int) -> list[int]:
    values = list(node.attrs.ints(key, (default, default)))
    if len(values) == 1:
        values *= 2
    if len(values) != 2:
        raise node.fail(f"attribute '{key}' must have 1 or 2 items, found {values}")
    return values


def _out_dtype(node: OpNode) -> None:
    value = node.attrs.str("out_dtype", "-1")
    if value not in _FLOAT_TYPES:
        raise Unmappable(f"out_dtype {value} (a mixed-precision integer convolution) has no NNEF form")


def _bias(b: Builder, node: OpNode, channels: int) -> Any:
    """The bias, (channels,) or blocked like a blocked output layout, as [1, channels]."""
    bias = node.input(2)
    shape = b.shape(bias)
    if shape != (channels,):
        if len(shape) == 2 and math.prod(shape) == channels:
            bias = b.op("reshape", bias, shape=[channels])
        else:
            bias = node.param(2, [channels], "bias")
    return channel_vector(b, bias, 2)


# ------------------------------------------------------------------------------------------------------- dense
@import_rule("linear", NNVM, "dense", params=(1, 2))
def dense(b: Builder, node: OpNode) -> Any:
    units = node.attrs.int("units")
    use_bias = node.attrs.bool("use_bias", True)
    node.arity(3 if use_bias else 2)
    x = node.input(0)
    shape = list(b.shape(x))
    weight = node.param(1, [units, shape[-1]])
    bias = channel_vector(b, node.param(2, [units], "bias"), 2) if use_bias else 0.0
    rows = math.prod(shape[:-1])
    flat = x if len(shape) == 2 else b.op("reshape", x, shape=[rows, shape[-1]])
    out = b.op("linear", flat, weight, bias)
    return out if len(shape) == 2 else b.op("reshape", out, shape=shape[:-1] + [units])


# ------------------------------------------------------------------------------------------------------- conv2d
def _convolution(b: Builder, node: OpNode, transposed: bool) -> Any:
    channels = node.attrs.int("channels")
    kernel = list(node.attrs.ints("kernel_size", length=2))
    strides, padding, dilation = _pair(node, "strides", 1), _pair(node, "padding", 0), _pair(node, "dilation", 1)
    output_padding = _pair(node, "output_padding", 0) if transposed else [0, 0]
    groups = node.attrs.int("groups", 1)
    layout = node.attrs.str("layout", "NCHW")
    kernel_layout = node.attrs.str("kernel_layout", "OIHW")
    out_layout = layout if transposed else node.attrs.str("out_layout", "__undef__")
    out_layout = layout if out_layout in ("__undef__", "") else out_layout
    _out_dtype(node)
    use_bias = node.attrs.bool("use_bias", True)
    node.arity(3 if use_bias else 2)
    x = relayout(b, node, node.input(0), layout, "NCHW")
    batch, count, height, width = b.shape(x)
    if groups <= 0 or count % groups or channels % groups:
        raise node.fail(f"groups {groups} must divide the input channels ({count}) and channels ({channels})")
    oihw = ([count, channels // groups] if transposed else [channels, count // groups]) + kernel
    weight = node.param(1, layout_shape(node, oihw, "OIHW", kernel_layout))
    weight = relayout(b, node, weight, kernel_layout, "OIHW")
    bias = _bias(b, node, channels) if use_bias else 0.0
    window = {"padding": [(p, p) for p in padding], "stride": strides, "dilation": dilation, "groups": groups}
    if transposed:
        extents = [s * (i - 1) + (k - 1) * d + 1 - 2 * p + o for s, i, k, d, p, o in
                   zip(strides, (height, width), kernel, dilation, padding, output_padding)]
        if any(extent <= 0 for extent in extents):
            raise node.fail(f"the output extents would be {extents}")
        out = b.op("deconv", x, weight, bias, output_shape=[batch, channels] + extents, **window)
    else:
        spans = [i + 2 * p - (k - 1) * d - 1 for i, p, k, d in zip((height, width), padding, kernel, dilation)]
        if any(span < 0 for span in spans):
            raise node.fail(f"kernel {kernel} (dilation {dilation}) is larger than the padded input")
        out = b.op("conv", x, weight, bias, **window)
    return relayout(b, node, out, "NCHW", out_layout)


@import_rule("conv", NNVM, "conv2d", "_contrib_conv2d_NCHWc", params=(1, 2))
def conv2d(b: Builder, node: OpNode) -> Any:
    return _convolution(b, node, transposed=False)


@import_rule("deconv", NNVM, "conv2d_transpose", params=(1, 2))
def conv2d_transpose(b: Builder, node: OpNode) -> Any:
    return _convolution(b, node, transposed=True)


_WINOGRAD = ("it works on Winograd-domain weights, a form NNVM's compiler makes from an ordinary conv2d for one "
             "backend; save the graph before compilation, where the conv2d is still there")
refuse_import(NNVM, _WINOGRAD, "_contrib_conv2d_winograd_weight_transform",
              "_contrib_conv2d_winograd_without_weight_transform", "_contrib_conv2d_winograd_nnpack_weight_transform",
              "_contrib_conv2d_winograd_nnpack_without_weight_transform")
refuse_import(NNVM, "it is a gradient (backward-pass) operator, which only training graphs hold", "_conv2d_grad",
              "_max_pool2d_grad")


# ------------------------------------------------------------------------------------------------------- normalization
@import_rule("batch_normalization", NNVM, "batch_norm", params=(1, 2, 3, 4), state=(3, 4))
def batch_norm(b: Builder, node: OpNode) -> Any:
    node.arity(5)
    epsilon = node.attrs.float("epsilon", 1e-5)
    node.attrs.float("momentum", 0.9)  # moving statistics only change in training
    center, scale = node.attrs.bool("center", True), node.attrs.bool("scale", True)
    x, rank, channel, (gamma, beta, mean, var) = batch_norm_arguments(b, node)
    out = b.op("batch_normalization", x, channel_vector(b, mean, rank, channel),
               channel_vector(b, var, rank, channel), channel_vector(b, beta, rank, channel) if center else 0.0,
               channel_vector(b, gamma, rank, channel) if scale else 1.0, epsilon=float(epsilon))
    return out, mean, var


@import_rule("local_response_normalization", NNVM, "lrn")
def lrn(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    rank = b.rank(x)
    size = node.attrs.int("size")
    where = axis(node, node.attrs.int("axis", 1), rank)
    alpha, beta, bias = (node.attrs.float(key, default) for key, default in
                         (("alpha", 1e-4), ("beta", 0.75), ("bias", 2.0)))
    if size <= 0 or size % 2 == 0:
        raise node.fail(f"size {size} must be a positive odd number (the window is centred)")
    window = [1] * rank
    window[where] = size
    return b.op("local_response_normalization", x, size=window, alpha=float(alpha), beta=float(beta),
                bias=float(bias))


@import_rule("div", NNVM, "l2_normalize")
def l2_normalize(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    eps = node.attrs.float("eps")
    reduced = sorted(axes(node, node.attrs.ints("axis"), b.rank(x)))
    squares = b.op("sum_reduce", b.op("sqr", x), axes=reduced)
    return b.op("div", x, b.op("sqrt", b.op("max", squares, float(eps))))


# ------------------------------------------------------------------------------------------------------- activations
@import_rule("leaky_relu", NNVM, "leaky_relu")
def leaky_relu(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    return b.op("leaky_relu", node.input(0), alpha=float(node.attrs.float("alpha", 0.25)))


@import_rule("prelu", NNVM, "prelu", params=(1,))
def prelu(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    x = node.input(0)
    rank = b.rank(x)
    channel = axis(node, node.attrs.int("axis", 1), rank)
    alpha = node.param(1, [b.shape(x)[channel]], "alpha")
    return b.op("prelu", x, channel_vector(b, alpha, rank, channel))


# ------------------------------------------------------------------------------------------------------- resampling
def _method(node: OpNode, default: str) -> str:
    method = node.attrs.str("method", default).upper()
    if method not in ("NEAREST_NEIGHBOR", "BILINEAR"):
        raise node.fail(f"method {method!r} must be NEAREST_NEIGHBOR or BILINEAR")
    return method


def _constant(b: Builder, values: np.ndarray, kind: str = "scalar") -> Any:
    shape = list(values.shape)
    flat = values.reshape(-1)
    items = [int(v) for v in flat] if kind == "integer" else [float(v) for v in flat]
    if len(set(items)) == 1:
        items = items[:1]
    return b.op("constant", shape=shape, value=items, generic=kind)


def _resize_axis(b: Builder, x: Any, dim: int, size: int, bilinear: bool, align_corners: bool) -> Any:
    """Axis `dim` of `x` resized to `size` by gathering, as TVM's resize samples it: nearest takes index
    floor(i * in / out); bilinear reads the coordinate i * ratio (ratio in / out, or (in - 1) / (out - 1) with
    aligned corners, in float32) and interpolates between its floor and its ceiling clamped to the last index."""
    extent = b.shape(x)[dim]
    if extent == size:
        return x
    out = np.arange(check_computed(f"resizing axis {dim} to {size:,} items", size))
    if not bilinear:
        return b.op("gather", x, _constant(b, out * extent // size, "integer"), axis=dim)
    if align_corners:
        ratio = np.float32((extent - 1) / (size - 1)) if size > 1 else np.float32(0.0)
    else:
        ratio = np.float32(extent / size)
    where = out.astype(np.float32) * ratio
    low = np.floor(where)
    high = np.minimum(np.ceil(where), extent - 1)
    weight = (where - low).astype(np.float32)
    lerp_shape = [1] * b.rank(x)
    lerp_shape[dim] = size
    first = b.op("gather", x, _constant(b, low.astype(np.int64), "integer"), axis=dim)
    second = b.op("gather", x, _constant(b, high.astype(np.int64), "integer"), axis=dim)
    lerp = _constant(b, weight.reshape(lerp_shape))
    return b.op("add", first, b.op("mul", b.op("sub", second, first), lerp))


def resize_nchw(b: Builder, x: Any, size: Sequence[int], bilinear: bool, align_corners: bool) -> Any:
    """An NCHW tensor resized to `size` (height, width): whole upscaling factors as the standard upsampling
    operations, anything else by gathering rows and columns."""
    extents = b.shape(x)[2:]
    factors = [s // e if s % e == 0 else 0 for s, e in zip(size, extents)]
    if all(factors) and any(f > 1 for f in factors):
        if not bilinear:
            return b.op("nearest_upsample", x, factor=factors)
        return b.op("multilinear_upsample", x, factor=factors, method="aligned" if align_corners else "asymmetric",
                    border="replicate")
    for dim, extent in ((2, size[0]), (3, size[1])):
        x = _resize_axis(b, x, dim, extent, bilinear, align_corners)
    return x


@import_rule("nearest_upsample", NNVM, "upsampling")
def upsampling(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    scale = node.attrs.int("scale")
    if scale <= 0:
        raise node.fail(f"scale {scale} must be positive")
    layout = node.attrs.str("layout", "NCHW")
    method = _method(node, "NEAREST_NEIGHBOR")
    x = relayout(b, node, node.input(0), layout, "NCHW")
    if scale == 1:
        out = b.op("copy", x)
    elif method == "NEAREST_NEIGHBOR":
        out = b.op("nearest_upsample", x, factor=[scale, scale])
    else:
        out = b.op("multilinear_upsample", x, factor=[scale, scale], method="asymmetric", border="replicate")
    return relayout(b, node, out, "NCHW", layout)


@import_rule("multilinear_upsample", NNVM, "resize")
def resize(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    size = list(node.attrs.ints("size", length=2))
    if any(extent <= 0 for extent in size):
        raise node.fail(f"size {size} must be positive")
    layout = node.attrs.str("layout", "NCHW")
    bilinear = _method(node, "BILINEAR") == "BILINEAR"
    align_corners = node.attrs.bool("align_corners", False)
    x = relayout(b, node, node.input(0), layout, "NCHW")
    out = resize_nchw(b, x, size, bilinear, align_corners)
    if out is x:
        out = b.op("copy", x)
    return relayout(b, node, out, "NCHW", layout)


@import_rule("transpose", NNVM, "__layout_transform__")
def layout_transform(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    src, dst = node.attrs.str("src_layout", "__undef__"), node.attrs.str("dst_layout", "__undef__")
    x = node.input(0)
    if src == dst or "__undef__" in (src, dst):
        return b.op("copy", x)
    out = relayout(b, node, x, src, dst)
    return b.op("copy", out) if out is x else out
