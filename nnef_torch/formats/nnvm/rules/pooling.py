"""MXNet's Pooling and NNVM's pool2d operators.

Output extents by `pooling_convention`: valid floor((x + 2p - k) / s) + 1, full ceil(...) + 1, same ceil(x / s).
`full` and `same` need windows past the symmetric padding: they are written as extra padding at the end (`same`
has no padding of its own: MXNet requires `pad` to be zeros, and reads three pad items whatever the kernel's rank,
so files hold `pad=(0, 0, 0)`). Max pooling never selects padding (border 'ignore'); sum pooling adds zeros.
Average pooling divides by the window clipped to the padded input when `count_include_pad` (so the extra end
padding of `full` and `same` is not counted, as in MXNet's kernel), and by the valid items otherwise (border
'ignore'). Lp pooling is MXNet's, for p = 1, 2, 3 only: the p-th root of the sum of x^p, with neither taken in
absolute value (p = 1 is a plain sum, p = 3 keeps the sign).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnef_torch.formats.nnvm.node import OpNode
from nnef_torch.formats.nnvm.rules.nnvm_top import relayout
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"


def _extents(node: OpNode, convention: str, size: int, kernel: int, stride: int, pad: int) -> tuple[int, int, int]:
    """(output extent, padding before, padding after) of one spatial axis."""
    if convention == "same":  # windows start at the input's first item; the last ones are clipped at its end
        out = -(-size // stride)
        return out, 0, max((out - 1) * stride + kernel - size, 0)
    span = size + 2 * pad - kernel
    if span < 0:
        raise node.fail(f"kernel {kernel} is larger than the padded input extent {size + 2 * pad}")
    out = (span // stride if convention == "valid" else -(-span // stride)) + 1
    return out, pad, (out - 1) * stride + kernel - size - pad


@import_rule("max_pool", NNVM, "Pooling", "Pooling_v1")
def pooling(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    shape = b.shape(x)
    kind = node.attrs.choice("pool_type", ("max", "avg", "sum", "lp"), "max")
    node.attrs.bool("cudnn_off", False)
    layout = node.attrs.str("layout", None)
    if layout is not None and layout not in ("NCW", "NCHW", "NCDHW"):
        raise node.fail(f"layout {layout} is not supported: only channels-first layouts (NCW, NCHW, NCDHW)")
    power = node.attrs.int("p_value", 2) if kind == "lp" else node.attrs.int("p_value", None)
    if kind == "lp" and power not in (1, 2, 3):
        raise node.fail(f"p_value {power}: MXNet's Lp pooling has p = 1, 2 or 3")
    include_pad = node.attrs.bool("count_include_pad", True)
    convention = node.attrs.choice("pooling_convention", ("valid", "full", "same"), "valid")
    spatial_axes = list(range(2, len(shape)))
    if kind == "max":
        node.allow_extra_outputs(1)  # MXNet builds with MKLDNN add a workspace output
    if node.attrs.bool("global_pool", False):
        node.attrs.ints("kernel", ())
        node.attrs.ints("stride", ())
        node.attrs.ints("pad", ())
        return _global(b, kind, x, spatial_axes, power)
    kernel = list(node.attrs.ints("kernel"))
    if len(kernel) != len(spatial_axes):
        raise node.fail(f"a {len(kernel)}-D kernel needs a rank-{len(kernel) + 2} input, found shape {list(shape)}")
    stride = list(node.attrs.ints("stride", ())) or [1] * len(kernel)
    pad = list(node.attrs.ints("pad", ())) or [0] * len(kernel)
    if convention == "same":
        if any(pad):
            raise node.fail(f"pad {pad}: the 'same' pooling convention takes no padding")
        pad = [0] * len(kernel)
    if len(stride) != len(kernel) or len(pad) != len(kernel):
        raise node.fail(f"kernel {kernel}, stride {stride} and pad {pad} must have equal lengths")
    axes = [_extents(node, convention, size, k, s, p) for size, k, s, p in zip(shape[2:], kernel, stride, pad)]
    padding = [(0, 0), (0, 0)] + [(before, after) for _, before, after in axes]
    size, strides = [1, 1] + kernel, [1, 1] + stride
    window = {"size": size, "padding": padding, "stride": strides}
    if kind == "max":
        return b.op("max_pool", x, border="ignore", **window)
    if kind == "sum":
        return b.op("box", x, border="constant", **window)
    if kind == "lp":
        return _lp(b, x, power, lambda y: b.op("box", y, border="constant", **window))
    if not include_pad or convention == "same":  # `same`: the windows are clipped to the unpadded input
        return b.op("avg_pool", x, border="ignore", **window)
    extra = [after - before for _, before, after in axes]
    if not any(extra):
        return b.op("avg_pool", x, border="constant", **window)
    # the divisor: windows clipped at the padded input's end, as MXNet counts them
    padded = [shape[0], 1] + [extent + 2 * p for extent, p in zip(shape[2:], pad)]
    ones = b.op("constant", shape=[1, 1] + padded[2:], value=[1.0])
    counts = b.op("box", ones, size=size, stride=strides, border="constant",
                  padding=[(0, 0), (0, 0)] + [(0, e) for e in extra])
    return b.op("div", b.op("box", x, border="constant", **window), counts)


def _global(b: Builder, kind: str, x: Any, axes: list[int], power: int | None) -> Any:
    if kind == "max":
        return b.op("max_reduce", x, axes=axes)
    if kind == "avg":
        return b.op("mean_reduce", x, axes=axes)
    if kind == "sum":
        return b.op("sum_reduce", x, axes=axes)
    return _lp(b, x, power, lambda y: b.op("sum_reduce", y, axes=axes))


def _lp(b: Builder, x: Any, power: int | None, total: Callable[[Any], Any]) -> Any:
    """MXNet's `a_pow_p` and `a_root_p` (pool_utils.h): x, x*x, x*x*x, then the identity, sqrt or cbrt."""
    if power == 1:
        return total(x)
    if power == 2:
        return b.op("sqrt", total(b.op("sqr", x)))
    cubes = total(b.op("mul", b.op("sqr", x), x))
    return b.op("mul", b.op("sign", cubes), b.op("pow", b.op("abs", cubes), 1.0 / 3.0))


def _nnvm_pool(kind: str, global_: bool) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        layout = node.attrs.str("layout", "NCHW")  # any layout of N, C, H and W (NHWC, NCHW16c): pooled as NCHW
        x = relayout(b, node, node.input(0), layout, "NCHW")
        return relayout(b, node, _nnvm_window(b, node, kind, global_, x), "NCHW", layout)
    rule.__name__ = f"nnvm_{'global_' if global_ else ''}{kind}_pool"
    return rule


def _nnvm_window(b: Builder, node: OpNode, kind: str, global_: bool, x: Any) -> Any:
    if global_:
        return _global(b, kind, x, [2, 3], None)
    kernel = list(node.attrs.ints("pool_size", length=2))
    stride = list(node.attrs.ints("strides", (1, 1), length=2))
    pads = list(node.attrs.ints("padding", (0, 0)))
    if len(pads) == 1:
        pads = pads * 4
    if len(pads) == 2:  # (top, left), or (top, left, bottom, right)
        pads = [pads[0], pads[1], pads[0], pads[1]]
    if len(pads) != 4:
        raise node.fail(f"padding {pads} must have 1, 2 or 4 items")
    ceil = node.attrs.bool("ceil_mode", False)
    include_pad = node.attrs.bool("count_include_pad", False) if kind == "avg" else True
    shape = b.shape(x)
    padding = [(0, 0), (0, 0)]
    for i, size in enumerate(shape[2:]):
        before, after = pads[i], pads[i + 2]
        span = size + before + after - kernel[i]
        if span < 0:
            raise node.fail(f"pool_size {kernel} is larger than the padded input {list(shape)}")
        out = (-(-span // stride[i]) if ceil else span // stride[i]) + 1
        padding.append((before, (out - 1) * stride[i] + kernel[i] - size - before))
    window = {"size": [1, 1] + kernel, "padding": padding, "stride": [1, 1] + stride}
    if kind == "max":
        return b.op("max_pool", x, border="ignore", **window)
    return b.op("avg_pool", x, border="constant" if include_pad else "ignore", **window)


import_rule("max_pool", NNVM, "max_pool2d")(_nnvm_pool("max", False))
import_rule("avg_pool", NNVM, "avg_pool2d")(_nnvm_pool("avg", False))
import_rule("max_reduce", NNVM, "global_max_pool2d")(_nnvm_pool("max", True))
import_rule("mean_reduce", NNVM, "global_avg_pool2d")(_nnvm_pool("avg", True))
