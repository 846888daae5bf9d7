"""Neural-network ONNX operators: Conv, ConvTranspose, Gemm, MatMul, Softmax, LogSoftmax, pooling (LpPool as a sum
pool of |x|^p), BatchNormalization (inference; its running statistics are module state), LayerNormalization, Dropout."""
from __future__ import annotations

from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.rules.common import align
from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"


def STATE_INPUTS(graph: Any) -> set[str]:  # noqa: N802  (a table of what is state, read by convert)
    """The initializers that are module state: BatchNormalization's running mean and variance."""
    return {name for node in graph.node if node.op_type == "BatchNormalization" for name in node.input[3:5]}


def _window(node: OnnxNode, spatial: int, kernel_key: str | None = "kernel_shape",
            kernel: list[int] | None = None) -> dict[str, list[Any]]:
    """Padding, stride, dilation (and kernel) of a windowed node; `auto_pad` SAME_UPPER / SAME_LOWER pads are
    computed from the static input extents and the kernel (the extra item of an odd total at the end or the start)."""
    auto_pad = node.only("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    pads = list(node.attr("pads", [0] * 2 * spatial))
    strides = list(node.attr("strides", [1] * spatial))
    dilations = list(node.attr("dilations", [1] * spatial))
    if len(pads) != 2 * spatial or len(strides) != spatial or len(dilations) != spatial:
        raise node.fail(f"pads/strides/dilations do not match {spatial} spatial axes")
    window: dict[str, list[Any]] = {"stride": strides, "dilation": dilations}
    if kernel_key is not None:
        window["kernel"] = list(node.attr(kernel_key, []))
    if auto_pad == "VALID":
        pads = [0] * 2 * spatial
    elif auto_pad.startswith("SAME"):
        extents = node.shape(0)[2:]
        size = kernel or window.get("kernel") or []
        if len(size) != spatial:
            raise node.fail(f"auto_pad {auto_pad} needs the kernel's {spatial} extents")
        totals = [max((-(-i // s) - 1) * s + (k - 1) * d + 1 - i, 0)
                  for i, s, k, d in zip(extents, strides, size, dilations)]
        fronts = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
        pads = fronts + [t - f for t, f in zip(totals, fronts)]
    window["padding"] = list(zip(pads[:spatial], pads[spatial:]))
    return window


@import_rule("conv", ONNX, "Conv")
def conv(b: Builder, node: OnnxNode) -> Any:
    spatial = node.rank(0) - 2
    w = _window(node, spatial, kernel=list(node.shape(1)[2:]))
    if w["kernel"] and w["kernel"] != list(node.shape(1)[2:]):
        raise node.fail(f"kernel_shape {w['kernel']} differs from the weight's {list(node.shape(1)[2:])}")
    bias = b.op("unsqueeze", node.tensor(2), axes=[0]) if node.has(2) else 0.0
    return b.op("conv", node.tensor(0), node.tensor(1), bias, padding=w["padding"], stride=w["stride"],
                dilation=w["dilation"], groups=int(node.attr("group", 1)))


@import_rule("deconv", ONNX, "ConvTranspose")
def conv_transpose(b: Builder, node: OnnxNode) -> Any:
    shape, weight = node.shape(0), node.shape(1)
    spatial, groups = len(shape) - 2, int(node.attr("group", 1))
    w = _window(node, spatial)
    extra = list(node.attr("output_padding", [0] * spatial))
    if node.attr("output_shape") is not None:
        raise node.fail("attribute 'output_shape' is not supported (give pads and output_padding)")
    kernel = list(weight[2:])
    extents = [(i - 1) * s + (k - 1) * d + 1 - p0 - p1 + a for i, s, k, d, (p0, p1), a in
               zip(shape[2:], w["stride"], kernel, w["dilation"], w["padding"], extra)]
    padding = [(p0, p1 - a) for (p0, p1), a in zip(w["padding"], extra)]
    bias = b.op("unsqueeze", node.tensor(2), axes=[0]) if node.has(2) else 0.0
    return b.op("deconv", node.tensor(0), node.tensor(1), bias, padding=padding, stride=w["stride"],
                dilation=w["dilation"], output_shape=[shape[0], weight[1] * groups] + extents, groups=groups)


@import_rule("linear", ONNX, "Gemm")
def gemm(b: Builder, node: OnnxNode) -> Any:
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    product = b.op("matmul", node.tensor(0), node.tensor(1), transposeA=trans_a, transposeB=trans_b)
    if alpha != 1.0:
        product = b.op("mul", product, alpha)
    if not node.has(2):
        return product
    c = node.tensor(2)
    c = align(b, c, 2) if beta == 1.0 else align(b, b.op("mul", c, beta), 2)
    return b.op("add", product, c)


@import_rule("matmul", ONNX, "MatMul")
def matmul(b: Builder, node: OnnxNode) -> Any:
    a, c = node.tensor(0), node.tensor(1)
    vector_a, vector_c = node.rank(0) == 1, node.rank(1) == 1  # numpy's rule: a row and a column, dropped after
    a = b.op("unsqueeze", a, axes=[0]) if vector_a else a
    c = b.op("unsqueeze", c, axes=[1]) if vector_c else c
    product = _batched_matmul(b, a, c)
    rank = b.rank(product)
    dropped = ([rank - 2] if vector_a else []) + ([rank - 1] if vector_c else [])
    return b.op("squeeze", product, axes=dropped) if dropped else product


def _batched_matmul(b: Builder, a: Any, c: Any) -> Any:
    """A product whose operands' batch axes are equal, as every consumer runs it: [..., k] @ [k, n] through a 2-D
    product; otherwise each operand tiled to the broadcast batch extents (the Khronos executor does not broadcast
    them)."""
    ra, rc = b.rank(a), b.rank(c)
    if ra > 2 and rc == 2:
        flat = b.op("matmul", b.op("reshape", a, shape=[-1, b.shape(a)[-1]]), c)
        # -1 for the leading extent: the batch stays free when the module is traced with symbolic shapes
        return b.op("reshape", flat, shape=[-1] + list(b.shape(a)[1:-1]) + [b.shape(c)[-1]])
    rank = max(ra, rc)
    a, c = align(b, a, rank), align(b, c, rank)
    batch = [max(x, y) for x, y in zip(b.shape(a)[:-2], b.shape(c)[:-2])]
    a, c = (x if list(b.shape(x)[:-2]) == batch else
            b.op("tile", x, repeats=[n // e for n, e in zip(batch, b.shape(x)[:-2])] + [1, 1]) for x in (a, c))
    return b.op("matmul", a, c)


def _softmax(op: str) -> Any:
    def rule(b: Builder, node: OnnxNode) -> Any:
        rank = node.rank(0)
        return b.op(op, node.tensor(0), axes=[node.axis(int(node.attr("axis", -1)), rank)])
    rule.__name__ = op
    return rule


import_rule("softmax", ONNX, "Softmax")(_softmax("softmax"))
import_rule("log_softmax", ONNX, "LogSoftmax")(_softmax("log_softmax"))


def _ceil_padding(node: OnnxNode, w: dict[str, list[Any]], border: str) -> list[tuple[int, int]]:
    """The padding that makes the floor rule give ceil_mode's extents: extra items at the end of each axis, where a
    last window starts inside the input or its front padding (torch's and onnxruntime's rule)."""
    padding = []
    for i, k, s, d, (p0, p1) in zip(node.shape(0)[2:], w["kernel"], w["stride"], w["dilation"], w["padding"]):
        span = (k - 1) * d + 1
        count = -(-(i + p0 + p1 - span) // s) + 1
        if (count - 1) * s >= i + p0:
            count -= 1
        extra = max((count - 1) * s + span - (i + p0 + p1), 0)
        if extra and border == "constant":
            raise node.fail("ceil_mode 1 with count_include_pad 1 is not supported (the divisor of a last, "
                            "partial window leaves out the padding that ceil_mode adds)")
        padding.append((p0, p1 + extra))
    return padding


def _pool(op: str) -> Any:
    def rule(b: Builder, node: OnnxNode) -> Any:
        spatial = node.rank(0) - 2
        w = _window(node, spatial)
        border = "ignore"
        if op == "max_pool":
            node.only("storage_order", (0,), 0)
        else:
            border = "constant" if node.only("count_include_pad", (0, 1), 0) else "ignore"
        if node.only("ceil_mode", (0, 1), 0):
            w["padding"] = _ceil_padding(node, w, border)
        if node.outputs > 1:
            raise node.fail("the Indices output of MaxPool is not supported")
        return b.op(op, node.tensor(0), size=[1, 1] + w["kernel"], border=border,
                    padding=[(0, 0), (0, 0)] + w["padding"], stride=[1, 1] + w["stride"],
                    dilation=[1, 1] + w["dilation"])
    rule.__name__ = op
    return rule


import_rule("max_pool", ONNX, "MaxPool")(_pool("max_pool"))
import_rule("avg_pool", ONNX, "AveragePool")(_pool("avg_pool"))


@import_rule("mean_reduce", ONNX, "GlobalAveragePool")
def global_average_pool(b: Builder, node: OnnxNode) -> Any:
    return b.op("mean_reduce", node.tensor(0), axes=list(range(2, node.rank(0))))


@import_rule("max_reduce", ONNX, "GlobalMaxPool")
def global_max_pool(b: Builder, node: OnnxNode) -> Any:
    return b.op("max_reduce", node.tensor(0), axes=list(range(2, node.rank(0))))


def _powered(b: Builder, node: OnnxNode, p: int) -> Any:
    """|x|^p of the input, the summand of an Lp pool."""
    if p < 1:
        raise node.fail(f"p {p} is not supported (p >= 1)")
    x = node.tensor(0)
    return b.op("abs", x) if p == 1 else b.op("sqr", x) if p == 2 else b.op("pow", b.op("abs", x), float(p))


def _root(b: Builder, total: Any, p: int) -> Any:
    """total^(1/p), the Lp norm from the sum of |x|^p."""
    return total if p == 1 else b.op("sqrt", total) if p == 2 else b.op("pow", total, 1.0 / p)


@import_rule("box", ONNX, "LpPool")
def lp_pool(b: Builder, node: OnnxNode) -> Any:
    """(sum over the window of |x|^p)^(1/p): `box` (a sum pool; padding adds zeros) of |x|^p."""
    spatial = node.rank(0) - 2
    w = _window(node, spatial)
    p = int(node.attr("p", 2))
    if node.only("ceil_mode", (0, 1), 0):
        w["padding"] = _ceil_padding(node, w, "ignore")  # the extra items are zeros, which add nothing to the sum
    total = b.op("box", _powered(b, node, p), size=[1, 1] + w["kernel"], border="constant",
                 padding=[(0, 0), (0, 0)] + w["padding"], stride=[1, 1] + w["stride"],
                 dilation=[1, 1] + w["dilation"])
    return _root(b, total, p)


@import_rule("sum_reduce", ONNX, "GlobalLpPool")
def global_lp_pool(b: Builder, node: OnnxNode) -> Any:
    p = int(node.attr("p", 2))
    return _root(b, b.op("sum_reduce", _powered(b, node, p), axes=list(range(2, node.rank(0)))), p)


@import_rule("avg_roi_align", ONNX, "RoiAlign")
def roi_align(b: Builder, node: OnnxNode) -> Any:
    """NNEF's avg_roi_align with the 'symmetric' resampling: sample (i + 0.5) * extent / count - 0.5 past the
    region's start is ONNX's half_pixel sample, and the mean of sampling_ratio² bilinear samples per cell is the
    average pool of the resampled region. Regions are (x1, y1, x2, y2) in ONNX and (y1, x1, y2, x2) in NNEF.
    Samples more than one item outside the input read zeros in ONNX and the nearest edge here."""
    node.only("mode", ("avg",), "avg")  # onnxruntime's 'max' takes the largest weighted corner, not a sample
    node.only("coordinate_transformation_mode", ("half_pixel",),
              "half_pixel" if node.opset >= 16 else "output_half_pixel")
    size = [int(node.attr("output_height", 1)), int(node.attr("output_width", 1))]
    ratio = int(node.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise node.fail("sampling_ratio 0 (adaptive: computed from each region's extent) is not supported")
    scale = float(node.attr("spatial_scale", 1.0))
    if node.rank(0) != 4 or node.shape(1)[1:] != (4,):
        raise node.fail("needs a rank-4 input and regions of shape [R, 4]")
    if node.known(1):
        rois: Any = node.as_tensor((node.const(1)[:, [1, 0, 3, 2]] * scale).astype(np.float32))
    else:
        order = b.op("constant", shape=[4], value=[1, 0, 3, 2], generic="integer", out_shape=(4,))
        rois = b.op("gather", node.tensor(1), order, axis=1)
        rois = b.op("mul", rois, scale) if scale != 1.0 else rois
    index = node.const(2).astype(np.int64) if node.known(2) else None
    batch = node.as_tensor(index) if index is not None and index.size > 1 else (
        b.op("constant", shape=[1], value=[int(index[0])], generic="integer", out_shape=(1,)) if index is not None
        else node.tensor(2))
    return b.op("avg_roi_align", node.tensor(0), rois, batch, output_size=size, sampling_rate=[ratio, ratio],
                resize_method="symmetric")


@import_rule("batch_normalization", ONNX, "BatchNormalization")
def batch_normalization(b: Builder, node: OnnxNode) -> Any:
    node.only("training_mode", (0,), 0)
    node.attr("momentum")  # training only
    if node.outputs > 1:
        raise node.fail("the running statistics outputs (training mode) are not supported")
    scale, offset, mean, variance = (b.op("unsqueeze", node.tensor(i), axes=[0]) for i in (1, 2, 3, 4))
    return b.op("batch_normalization", node.tensor(0), mean, variance, offset, scale,
                epsilon=float(node.attr("epsilon", 1e-5)))


@import_rule("layer_norm", ONNX, "LayerNormalization")
def layer_normalization(b: Builder, node: OnnxNode) -> Any:
    rank = node.rank(0)
    first = node.axis(int(node.attr("axis", -1)), rank)
    node.only("stash_type", (1,), 1)
    if node.outputs > 1:
        raise node.fail("the Mean and InvStdDev outputs are not supported")
    scale = align(b, node.tensor(1), rank)
    offset = align(b, node.tensor(2), rank) if node.has(2) else 0.0
    return b.op("layer_norm", node.tensor(0), scale, offset, axes=list(range(first, rank)),
                epsilon=float(node.attr("epsilon", 1e-5)))


@import_rule("copy", ONNX, "Dropout", "Identity")
def identity(b: Builder, node: OnnxNode) -> Any:
    node.attr("seed")
    if node.op == "Dropout" and node.has(2) and bool(node.const(2, "training_mode").reshape(-1)[0]):
        raise node.fail("training_mode true is not supported (inference only)")
    if node.outputs > 1:
        raise node.fail("the mask output of Dropout is not supported")
    return node.raw(0)
