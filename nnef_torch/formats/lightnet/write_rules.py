"""LightNet write rules of the layers: convolution and deconvolution, linear and matmul as 1x1 convolutions, batch
normalization, pooling and the spatial reductions, upsampling, softmax and the activations.

LightNet's layers are 2-D (NCHW), with [top, left, bottom, right] padding written out (`autopad: "NOTSET"`);
their pools slide over the two spatial dimensions only, without dilation. Where an NNEF operation asks for more
(another rank, padding by another border, a window over the batch or channels), the rule refuses it with the
reason.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.lightnet.write import FORMAT, Const, Unmappable, Writer
from nnef_torch.formats.lightnet.write_rules_tensor import expand
from nnef_torch.ir.graph import Operation
from nnef_torch.ops.registry import write_rule

Shape = tuple[int, ...]
Pads = list[tuple[int, int]]


def _four_d(w: Writer, x: Any, what: str) -> Shape:
    shape = w.shape(x)
    if len(shape) != 4:
        raise Unmappable(f"LightNet's {what} takes 4-D (NCHW) tensors; the input has shape {list(shape)}")
    return shape


def _pads(padding: Sequence[Any], extents: Sequence[int], window: Sequence[int], stride: Sequence[int]) -> Pads:
    """Explicit (before, after) padding per dimension; NNEF's automatic padding (empty) made explicit."""
    if padding:
        return [(int(p), int(q)) for p, q in padding]
    pads = []
    for extent, size, step in zip(extents, window, stride):
        total = max(0, (-(-extent // step) - 1) * step + size - extent)
        pads.append((total // 2, total - total // 2))
    return pads


def _lightnet_padding(pads: Pads) -> list[int]:
    """[(top, bottom), (left, right)] -> LightNet's [top, left, bottom, right]."""
    if any(p < 0 or q < 0 for p, q in pads):
        raise Unmappable(f"LightNet pads by non-negative amounts; padding {pads}")
    (top, bottom), (left, right) = pads
    return [top, left, bottom, right]


def _vector(w: Writer, x: Any, channels: int, what: str) -> str:
    """A per-channel input (a number, [C], [1, C] or [1, C, 1, 1]) as a [C] tensor."""
    shape = w.shape(x)
    found = w.value(x)
    if isinstance(found, Const):
        if found.array().size not in (1, channels):
            raise Unmappable(f"{what} of shape {list(shape)} is not one value per channel ({channels})")
        assert w.op is not None
        return w.create(found, (channels,), f"{w.base(w.op)}_{what}")
    if math.prod(shape) == channels:
        return w.tensor(x, (channels,))
    if math.prod(shape) == 1:
        return expand(w, w.tensor(x, (1,)), (channels,))
    raise Unmappable(f"{what} of shape {list(shape)} is not one value per channel ({channels})")


def _zero_border(op: Operation, pads: Pads, borders: Sequence[str] = ("constant", "ignore")) -> None:
    border = op.attribs.get("border", "constant")
    if border not in borders and any(p or q for p, q in pads):
        raise Unmappable(f"border '{border}' pads differently from LightNet's zeros; padding {pads}")


# ---------------------------------------------------------------------------------------------- convolution
@write_rule("conv", FORMAT)
def conv(w: Writer, op: Operation) -> None:
    x, f = op.inputs["input"], op.inputs["filter"]
    shape = _four_d(w, x, "conv2d")
    fshape = w.shape(f)
    a = op.attribs
    stride = list(a["stride"] or [1, 1])
    dilation = list(a["dilation"] or [1, 1])
    window = [(k - 1) * d + 1 for k, d in zip(fshape[2:], dilation)]
    pads = _pads(a["padding"], shape[2:], window, stride)
    _zero_border(op, pads)
    groups = a["groups"] or shape[1]
    src, weight = w.tensor(x), w.tensor(f)
    bias = _vector(w, op.inputs["bias"], fshape[0], "bias")
    w.emit("conv2d", {"src": src, "weight": weight, "bias": bias},
           {"group": groups, "size": list(fshape[2:]), "stride": stride, "dilation": dilation,
            "padding": _lightnet_padding(pads), "autopad": "NOTSET"}, {"dst": w.result(op)})


@write_rule("deconv", FORMAT)
def deconv(w: Writer, op: Operation) -> None:
    """The transposed convolution, cropped by the leading padding to the result's extent (the rest of the result
    is LightNet's `output_padding`)."""
    x, f = op.inputs["input"], op.inputs["filter"]
    shape = _four_d(w, x, "deconv2d")
    fshape = w.shape(f)
    out = w.result_shape(op)
    a = op.attribs
    if a["border"] not in ("constant", "ignore"):
        raise Unmappable(f"border '{a['border']}' extends the input differently from LightNet's zeros")
    stride = list(a["stride"] or [1, 1])
    dilation = list(a["dilation"] or [1, 1])
    window = [(k - 1) * d + 1 for k, d in zip(fshape[2:], dilation)]
    pads = _pads(a["padding"], out[2:], window, stride)
    before, after, extra = [], [], []
    for n, big, size, step, (p, _) in zip(shape[2:], out[2:], window, stride, pads):
        full = (n - 1) * step + size
        if p < 0:
            raise Unmappable(f"LightNet pads by non-negative amounts; padding {pads}")
        q = max(0, full - p - big)
        before.append(p)
        after.append(q)
        extra.append(big - (full - p - q))
    groups = a["groups"] or (a["output_shape"][1] if a["output_shape"] else shape[1])  # 0: depthwise
    src, weight = w.tensor(x), w.tensor(f)
    bias = _vector(w, op.inputs["bias"], fshape[1] * groups, "bias")
    w.emit("deconv2d", {"src": src, "weight": weight, "bias": bias},
           {"group": groups, "size": list(fshape[2:]), "stride": stride, "output_dims": list(out),
            "padding": [before[0], before[1], after[0], after[1]], "output_padding": extra, "dilation": dilation,
            "autopad": "NOTSET"}, {"dst": w.result(op)})


def _dense(w: Writer, op: Operation, key: str, x: Any, weight: str, outputs: int, bias: Any) -> None:
    """x [..., K] times weight [M, K, 1, 1] (transposed) as a 1x1 conv2d on x reshaped to [N, K, 1, 1]."""
    shape = w.shape(x)
    rows = math.prod(shape[:-1])
    src = w.tensor(x, (rows, shape[-1], 1, 1))
    [y] = w.emit("conv2d", {"src": src, "weight": weight, "bias": _vector(w, bias, outputs, "bias")},
                 {"group": 1, "size": [1, 1], "stride": [1, 1], "dilation": [1, 1], "padding": [0, 0, 0, 0],
                  "autopad": "NOTSET"}, {"dst": w.temp(f"{w.base(op, key)}_conv", (rows, outputs, 1, 1))})
    w.alias(op, y, key)


@write_rule("linear", FORMAT)
def linear(w: Writer, op: Operation) -> None:
    """LightNet has no dense layer: a 1x1 conv2d on the input reshaped to [N, K, 1, 1]."""
    x, f = op.inputs["input"], op.inputs["filter"]
    outputs, depth = w.shape(f)
    _dense(w, op, "output", x, w.tensor(f, (outputs, depth, 1, 1)), outputs, op.inputs["bias"])


@write_rule("matmul", FORMAT)
def matmul(w: Writer, op: Operation) -> None:
    """A @ B with B a value (weights): a 1x1 conv2d, as `linear`."""
    a, b = op.inputs["A"], op.inputs["B"]
    matrix = w.array(b)
    if matrix is None or matrix.ndim != 2:
        raise Unmappable("LightNet multiplies by a matrix only as a 1x1 convolution: B must be a 2-D value "
                         "(weights), not a tensor the graph computes")
    if op.attribs["transposeA"] or w.rank(a) < 2:
        raise Unmappable("LightNet multiplies by a matrix only as a 1x1 convolution: A must have rows (rank 2 "
                         "or more, not transposed)")
    filter_ = matrix if op.attribs["transposeB"] else matrix.T
    const = w.value(b)
    assert isinstance(const, Const)
    transposed = Const(filter_.shape, const.dtype, lambda: filter_, stored=const.stored)
    outputs, depth = filter_.shape
    weight = w.create(transposed, (outputs, depth, 1, 1), f"{w.base(op, 'C')}_weight")
    _dense(w, op, "C", a, weight, outputs, 0.0)


@write_rule("batch_normalization", FORMAT)
def batch_normalization(w: Writer, op: Operation) -> None:
    """batchnorm on NCHW; inputs of rank 2 or 3 ([N, C], [N, C, L]) as [N, C, L, 1]."""
    x = op.inputs["input"]
    shape = w.shape(x)
    if not 2 <= len(shape) <= 4:
        raise Unmappable(f"LightNet's batchnorm takes NCHW tensors; the input has shape {list(shape)}")
    channels = shape[1]
    src = w.tensor(x, tuple(shape) + (1,) * (4 - len(shape)))
    ins = {"src": src}
    for arg, key in (("scale", "scale"), ("offset", "offset"), ("mean", "mean"), ("var", "variance")):
        ins[arg] = _vector(w, op.inputs[key], channels, key)
    if len(shape) == 4:
        w.emit("batchnorm", ins, {"epsilon": op.attribs["epsilon"]}, {"dst": w.result(op)})
        return
    [y] = w.emit("batchnorm", ins, {"epsilon": op.attribs["epsilon"]},
                 {"dst": w.temp(f"{w.base(op)}_bn", w.tensor_shape(src))})
    w.alias(op, y)


# ---------------------------------------------------------------------------------------------- pooling
def _pool(w: Writer, op: Operation, optype: str, borders: Sequence[str], out: str | None = None) -> str:
    x = op.inputs["input"]
    shape = _four_d(w, x, optype)
    a = op.attribs
    size = list(a["size"])
    stride = list(a["stride"] or [1] * 4)
    pads = _pads(a["padding"], shape, size, stride)
    if size[:2] != [1, 1] or stride[:2] != [1, 1] or pads[:2] != [(0, 0), (0, 0)]:
        raise Unmappable(f"LightNet's {optype} slides over the two spatial dimensions only; size {size}, stride "
                         f"{stride}, padding {pads}")
    if any(d != 1 for d in a["dilation"] or []):
        raise Unmappable(f"LightNet's {optype} has no dilation; dilation {list(a['dilation'])}")
    border = a["border"]
    if border not in borders and any(p or q for p, q in pads):
        raise Unmappable(f"LightNet's {optype} leaves padded items out of the window (border 'ignore'); border "
                         f"'{border}', padding {pads[2:]}")
    [y] = w.emit(optype, {"src": w.tensor(x)}, {"size": size[2:], "stride": stride[2:],
                                                "padding": _lightnet_padding(pads[2:]), "autopad": "NOTSET"},
                 {"dst": out or w.result(op)})
    return y


@write_rule("max_pool", FORMAT)
def max_pool(w: Writer, op: Operation) -> None:
    """maxpool2d takes the maximum of the window items inside the input (border 'ignore')."""
    _pool(w, op, "maxpool2d", ("ignore",))


@write_rule("avg_pool", FORMAT)
def avg_pool(w: Writer, op: Operation) -> None:
    """avgpool2d averages the window items inside the input (border 'ignore', as ONNX's default, which LightNet's
    onnx2ln maps to it); without padding every border means the same. With border 'constant' (padded zeros
    counted, torch's count_include_pad) the average is scaled by the share of each window inside the input."""
    a = op.attribs
    extents = w.shape(op.inputs["input"])
    size, stride = list(a["size"]), list(a["stride"] or [1] * len(extents))
    pads = _pads(a["padding"], extents, size, stride) if len(extents) == len(size) else []
    if a["border"] != "constant" or not any(p or q for p, q in pads) or len(extents) != 4:
        _pool(w, op, "avgpool2d", ("ignore",))
        return
    shape = w.result_shape(op)
    pooled = _pool(w, op, "avgpool2d", ("constant",), w.temp(f"{w.base(op)}_avg", shape))
    counts = [np.array([min(o * s - p + k, n) - max(o * s - p, 0) for o in range(m)], np.float32)
              for n, m, k, s, (p, _) in zip(extents[2:], shape[2:], size[2:], stride[2:], pads[2:])]
    share = (np.outer(counts[0], counts[1]) / float(size[2] * size[3])).astype(np.float32)
    factor = Const((1, 1) + share.shape, "scalar", lambda: share.reshape((1, 1) + share.shape))
    scale = w.create(factor, (1, 1) + share.shape, f"{w.base(op)}_share")
    w.emit("elew", {"src1": pooled, "src2": expand(w, scale, shape)}, {"elew_op": "TL_MUL"}, {"dst": w.result(op)})


def _reduce(w: Writer, op: Operation, optype: str, out: str | None = None) -> str:
    """A reduction over contiguous axes as a pool over them: the input seen as [A, 1, R, B] for A items before
    the axes, R reduced and B after. The result is bound to the op, or named `out`."""
    x = op.inputs["input"]
    shape = w.shape(x)
    axes = sorted(set(op.attribs["axes"]))
    if not axes:
        if out is not None:
            return w.tensor(x)
        w.alias(op, w.tensor(x))
        return w.tensor(x)
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise Unmappable(f"LightNet reduces contiguous axes only (as a pool); axes {axes}")
    before, reduced, after = shape[:axes[0]], shape[axes[0]:axes[-1] + 1], shape[axes[-1] + 1:]
    if len(shape) == 4 and axes == [2, 3]:
        view, size = shape, list(reduced)
    else:
        view, size = (math.prod(before), 1, math.prod(reduced), math.prod(after)), [math.prod(reduced), 1]
    src = w.tensor(x, view)
    pooled = (view[0], view[1], view[2] - size[0] + 1, view[3] - size[1] + 1)
    [y] = w.emit(optype, {"src": src}, {"size": size, "stride": [1, 1], "padding": [0, 0, 0, 0],
                                        "autopad": "NOTSET"}, {"dst": w.temp(f"{w.base(op)}_pool", pooled)})
    if out is not None:
        return w.reshape(y, w.result_shape(op), out)
    w.alias(op, y)
    return y


@write_rule("mean_reduce", FORMAT)
def mean_reduce(w: Writer, op: Operation) -> None:
    _reduce(w, op, "avgpool2d")


@write_rule("max_reduce", FORMAT)
def max_reduce(w: Writer, op: Operation) -> None:
    axes = sorted(set(op.attribs["axes"]))
    if len(axes) == 1:
        x = op.inputs["input"]
        w.emit("maxreduce", {"src": w.tensor(x)}, {"axis": axes[0]}, {"dst": w.result(op)})
        return
    _reduce(w, op, "maxpool2d")


@write_rule("sum_reduce", FORMAT)
def sum_reduce(w: Writer, op: Operation) -> None:
    """The mean (a pool), times the count of items reduced unless `normalize`."""
    if op.attribs["normalize"]:
        _reduce(w, op, "avgpool2d")
        return
    x = op.inputs["input"]
    count = math.prod(w.shape(x)[axis] for axis in set(op.attribs["axes"]))
    shape = w.result_shape(op)
    mean = _reduce(w, op, "avgpool2d", w.temp(f"{w.base(op)}_mean", shape))
    factor = Const((), "scalar", lambda: np.float32(count))
    scale = expand(w, w.create(factor, (1,) * len(shape), f"{w.base(op)}_count"), shape)
    w.emit("elew", {"src1": mean, "src2": scale}, {"elew_op": "TL_MUL"}, {"dst": w.result(op)})


@write_rule("argmax_reduce", FORMAT)
def argmax_reduce(w: Writer, op: Operation) -> None:
    raise Unmappable("LightNet's maxreduce_arg also gives the maxima, a tensor no op would read, which reads back "
                     "as one more output")


@write_rule("nearest_upsample", FORMAT)
def nearest_upsample(w: Writer, op: Operation) -> None:
    x = op.inputs["input"]
    _four_d(w, x, "upsample of nearest_upsample")
    factor = [int(f) for f in op.attribs["factor"]]
    w.emit("upsample", {"src": w.tensor(x)}, {"mode": "TL_NEAREST", "scales": [1, 1] + factor},
           {"dst": w.result(op)})


@write_rule("softmax", FORMAT)
def softmax(w: Writer, op: Operation) -> None:
    """softmax over one axis; over contiguous axes on the input with those axes merged into one."""
    x = op.inputs["x"]
    shape = w.shape(x)
    axes = sorted(set(op.attribs["axes"]))
    if not axes:
        raise Unmappable("softmax over no axes")
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise Unmappable(f"LightNet's softmax takes one axis; axes {axes} are not contiguous")
    if len(axes) == 1:
        w.emit("softmax", {"src": w.tensor(x)}, {"axis": axes[0]}, {"dst": w.result(op)})
        return
    view = shape[:axes[0]] + (math.prod(shape[axes[0]:axes[-1] + 1]),) + shape[axes[-1] + 1:]
    [y] = w.emit("softmax", {"src": w.tensor(x, view)}, {"axis": axes[0]},
                 {"dst": w.temp(f"{w.base(op, 'y')}_softmax", view)})
    w.alias(op, y)


# ---------------------------------------------------------------------------------------------- activations
@write_rule("relu", FORMAT)
def relu(w: Writer, op: Operation) -> None:
    w.emit("relu", {"src": w.tensor(op.inputs["x"])}, {}, {"dst": w.result(op)})


@write_rule("sigmoid", FORMAT)
def sigmoid(w: Writer, op: Operation) -> None:
    w.emit("sigmoid", {"src": w.tensor(op.inputs["x"])}, {}, {"dst": w.result(op)})


@write_rule("leaky_relu", FORMAT)
def leaky_relu(w: Writer, op: Operation) -> None:
    w.emit("lrelu", {"src": w.tensor(op.inputs["x"])}, {"negslope": op.attribs["alpha"]}, {"dst": w.result(op)})


@write_rule("prelu", FORMAT)
def prelu(w: Writer, op: Operation) -> None:
    """lrelu where every slope is the same value."""
    alpha = w.array(op.inputs["alpha"])
    if alpha is None or alpha.size == 0 or not np.all(alpha == alpha.flat[0]):
        raise Unmappable("LightNet's lrelu takes one slope; alpha is not one value")
    w.emit("lrelu", {"src": w.tensor(op.inputs["x"])}, {"negslope": float(alpha.flat[0])},
           {"dst": w.result(op)})
