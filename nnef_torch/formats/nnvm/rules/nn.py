"""Neural-network operators of MXNet: Convolution, Deconvolution, FullyConnected, BatchNorm, Activation,
LeakyReLU, Pooling, softmax and its relatives, Dropout, LRN, LayerNorm, InstanceNorm, L2Normalization, UpSampling,
Pad. Parameters keep MXNet's shapes (a bias is (C,)); they are laid out for NNEF's broadcasting in the graph."""
from __future__ import annotations

import math
from typing import Any

from nnef_torch.formats.nnvm.node import Hidden, OpNode
from nnef_torch.formats.nnvm.rules.common import axes, axis, batch_norm_arguments, channel_vector
from nnef_torch.formats.nnvm.rules.elementwise import log_sigmoid, mish
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"
_IGNORED = ("workspace", "cudnn_tune", "cudnn_off")  # performance hints


def _hints(node: OpNode) -> None:
    for key in _IGNORED:
        node.attrs.raw(key, None)
    layout = node.attrs.str("layout", None)
    if layout is not None and layout not in ("NCW", "NCHW", "NCDHW"):
        raise node.fail(f"layout {layout} is not supported: only channels-first layouts (NCW, NCHW, NCDHW)")


def _window(node: OpNode, spatial: int, key: str, default: int) -> list[int]:
    values = node.attrs.ints(key, ())
    if not values:
        return [default] * spatial
    if len(values) != spatial:
        raise node.fail(f"attribute '{key}' has {len(values)} items; the kernel has {spatial}")
    return list(values)


class _Kernel:
    """What Convolution and Deconvolution share: the window attributes, the filter count, groups, the bias choice
    and the input, checked against each other."""

    def __init__(self, b: Builder, node: OpNode, no_bias_default: bool, *extra: str):
        _hints(node)
        self.kernel = list(node.attrs.ints("kernel"))
        spatial = len(self.kernel)
        self.stride, self.dilate, self.pad = (_window(node, spatial, key, default)
                                              for key, default in (("stride", 1), ("dilate", 1), ("pad", 0)))
        self.extra = {key: _window(node, spatial, key, 0) for key in extra}
        self.filters, self.groups = node.attrs.int("num_filter"), node.attrs.int("num_group", 1)
        self.no_bias = node.attrs.bool("no_bias", no_bias_default)
        node.arity(2 if self.no_bias else 3)
        self.x = node.input(0)
        self.shape = shape = b.shape(self.x)
        if len(shape) != spatial + 2:
            raise node.fail(f"a {spatial}-D kernel needs a rank-{spatial + 2} input, found shape {list(shape)}")
        if self.groups <= 0 or self.filters <= 0 or shape[1] % self.groups or self.filters % self.groups:
            raise node.fail(f"num_group {self.groups} must divide the input channels ({shape[1]}) and num_filter "
                            f"({self.filters})")

    def bias(self, b: Builder, node: OpNode) -> Any:
        return 0.0 if self.no_bias else channel_vector(b, node.param(2, [self.filters], "bias"), 2)


@import_rule("conv", NNVM, "Convolution", params=(1, 2))
def convolution(b: Builder, node: OpNode) -> Any:
    k = _Kernel(b, node, False)
    weight = node.param(1, [k.filters, k.shape[1] // k.groups] + k.kernel)
    return b.op("conv", k.x, weight, k.bias(b, node), padding=[(p, p) for p in k.pad], stride=k.stride,
                dilation=k.dilate, groups=k.groups)


@import_rule("deconv", NNVM, "Deconvolution", params=(1, 2))
def deconvolution(b: Builder, node: OpNode) -> Any:
    k = _Kernel(b, node, True, "adj")
    kernel, stride, dilate, pad, adj, shape = k.kernel, k.stride, k.dilate, k.pad, k.extra["adj"], k.shape
    spatial, filters, groups = len(kernel), k.filters, k.groups
    target = list(node.attrs.shape("target_shape", ()))
    dilated = [(k - 1) * d + 1 for k, d in zip(kernel, dilate)]
    if target and any(target):
        if len(target) != spatial:
            raise node.fail(f"target_shape {target} has {len(target)} items; the kernel has {spatial}")
        total = [s * (i - 1) + k - t for s, i, k, t in zip(stride, shape[2:], dilated, target)]
        if any(t < 0 for t in total):
            raise node.fail(f"target_shape {target} is larger than this deconvolution can give")
        adj = [t % 2 for t in total]
        pad = [(t + 1) // 2 for t in total]
    if any(a >= s and a > 0 for a, s in zip(adj, stride)):
        raise node.fail(f"adj {adj} must be smaller than stride {stride}")
    extents = [(i - 1) * s + k - 2 * p + a for i, s, k, p, a in zip(shape[2:], stride, dilated, pad, adj)]
    if any(extent <= 0 for extent in extents):
        raise node.fail(f"the output extents would be {extents}")
    weight = node.param(1, [shape[1], filters // groups] + kernel)
    return b.op("deconv", k.x, weight, k.bias(b, node), padding=[(p, p) for p in pad], stride=stride,
                dilation=dilate, output_shape=[shape[0], filters] + extents, groups=groups)


@import_rule("linear", NNVM, "FullyConnected", params=(1, 2))
def fully_connected(b: Builder, node: OpNode) -> Any:
    units = node.attrs.int("num_hidden")
    no_bias = node.attrs.bool("no_bias", False)
    flatten = node.attrs.bool("flatten", True)
    node.arity(2 if no_bias else 3)
    x = node.input(0)
    shape = b.shape(x)
    leading = [shape[0]] if flatten else list(shape[:-1])
    width = math.prod(shape[1:]) if flatten else shape[-1]
    weight = node.param(1, [units, width])
    bias = 0.0 if no_bias else channel_vector(b, node.param(2, [units], "bias"), 2)
    rows = math.prod(leading)
    flat = x if list(shape) == [rows, width] else b.op("reshape", x, shape=[rows, width])
    out = b.op("linear", flat, weight, bias)
    return out if len(leading) == 1 else b.op("reshape", out, shape=leading + [units])


@import_rule("batch_norm_moving", NNVM, "BatchNorm", "BatchNorm_v1", params=(1, 2, 3, 4), state=(3, 4))
def batch_norm(b: Builder, node: OpNode) -> Any:
    """Inference with the moving statistics; in training mode the imported module normalizes with the batch's
    statistics and moves these toward them, as MXNet does (momentum m is torch's 1 - m), unless
    `use_global_stats`. With `fix_gamma` (the default) gamma is 1 whatever the parameter holds."""
    node.arity(5)
    eps = node.attrs.float("eps", 1e-3)
    momentum = node.attrs.float("momentum", 0.9)
    fix_gamma = node.attrs.bool("fix_gamma", True)
    global_stats = node.attrs.bool("use_global_stats", False)
    if node.attrs.bool("output_mean_var", False):
        raise node.fail("output_mean_var (the batch statistics as outputs) is not supported")
    node.attrs.bool("cudnn_off", False)
    node.attrs.float("min_calib_range", None)
    node.attrs.float("max_calib_range", None)
    if not 0.0 <= momentum <= 1.0:
        raise node.fail(f"momentum must be in [0, 1], found {momentum}")
    x, rank, channel, (gamma, beta, mean, var) = batch_norm_arguments(b, node)
    if rank < 2:
        raise node.fail(f"BatchNorm needs an input of rank 2 or more, found shape {list(b.shape(x))}")
    order = list(range(rank))
    order[1], order[channel] = channel, 1  # the channels on axis 1, where NNEF's layout puts them
    if channel != 1:
        x = b.op("transpose", x, axes=order)
    scale = 1.0 if fix_gamma else gamma
    if global_stats:
        out = b.op("batch_normalization", x, *(channel_vector(b, v, rank) for v in (mean, var, beta)),
                   scale if fix_gamma else channel_vector(b, gamma, rank), epsilon=float(eps))
    else:
        out = b.op("batch_norm_moving", x, mean, var, beta, scale, epsilon=float(eps),
                   momentum=round(1.0 - momentum, 15))  # 1 - 0.8 is 0.2, not 0.19999999999999996
    if channel != 1:
        out = b.op("transpose", out, axes=order)
    return out, Hidden("batch mean"), Hidden("batch variance")


def _activation(b: Builder, kind: str, x: Any) -> Any:
    if kind == "softrelu":
        return b.op("softplus", x)
    if kind in ("log_sigmoid", "mish"):  # MXNet 2
        return (log_sigmoid if kind == "log_sigmoid" else mish)(b, x)
    return b.op(kind, x)


@import_rule("relu", NNVM, "Activation")
def activation(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    kind = node.attrs.choice("act_type", ("relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish"))
    return _activation(b, kind, node.input(0))


@import_rule("leaky_relu", NNVM, "LeakyReLU", params=(1,))
def leaky_relu(b: Builder, node: OpNode) -> Any:
    kind = node.attrs.choice("act_type", ("leaky", "prelu", "elu", "selu", "gelu", "rrelu"), "leaky")
    slope = node.attrs.float("slope", 0.25)
    lower, upper = node.attrs.float("lower_bound", 0.125), node.attrs.float("upper_bound", 0.334)
    node.arity(2 if kind == "prelu" else 1)
    x = node.input(0)
    if kind == "leaky":
        return b.op("leaky_relu", x, alpha=float(slope))
    if kind == "rrelu":  # at inference, the mean of the random slope's range
        return b.op("leaky_relu", x, alpha=float((lower + upper) / 2)), Hidden("random slope mask")
    if kind == "elu":
        return b.op("elu", x, alpha=float(slope))
    if kind == "selu":
        return b.op("selu", x, alpha=1.6732632423543772, lambda_=1.0507009873554805)
    if kind == "gelu":
        return b.op("gelu_erf", x)
    gamma = node.input(1)
    count = b.shape(gamma)[0] if b.rank(gamma) == 1 else 0
    if b.rank(gamma) != 1 or count not in (1, b.shape(x)[1] if b.rank(x) > 1 else 1):
        node.param(1, [b.shape(x)[1] if b.rank(x) > 1 else 1], "gamma")
    return b.op("prelu", x, channel_vector(b, gamma, b.rank(x)) if count > 1 else gamma)


def _softmax_axes(b: Builder, node: OpNode, x: Any, key: str = "axis", default: int = -1) -> list[int]:
    return [axis(node, node.attrs.int(key, default), b.rank(x), key)]


def _temperature(b: Builder, node: OpNode, x: Any) -> Any:
    temperature = node.attrs.float("temperature", None)
    node.attrs.str("dtype", None)
    if node.attrs.bool("use_length", False):
        raise node.fail("use_length (a length input masking the softmax) is not supported")
    return x if temperature in (None, 1.0) else b.op("div", x, float(temperature))


@import_rule("softmax", NNVM, "softmax")
def softmax(b: Builder, node: OpNode) -> Any:
    node.arity(1, 2)
    x = node.input(0)
    return b.op("softmax", _temperature(b, node, x), axes=_softmax_axes(b, node, x))


@import_rule("log_softmax", NNVM, "log_softmax")
def log_softmax(b: Builder, node: OpNode) -> Any:
    node.arity(1, 2)
    x = node.input(0)
    return b.op("log_softmax", _temperature(b, node, x), axes=_softmax_axes(b, node, x))


@import_rule("softmax", NNVM, "SoftmaxOutput", "Softmax", unused=(1,))
def softmax_output(b: Builder, node: OpNode) -> Any:
    node.arity(1, 2)  # the label input only matters to the loss
    for key in ("grad_scale", "ignore_label", "use_ignore", "normalization", "out_grad", "smooth_alpha"):
        node.attrs.raw(key, None)
    x = node.input(0)
    shape = b.shape(x)
    if node.attrs.bool("multi_output", False):
        return b.op("softmax", x, axes=[1])
    if node.attrs.bool("preserve_shape", False):
        return b.op("softmax", x, axes=[len(shape) - 1])
    if len(shape) == 2:
        return b.op("softmax", x, axes=[1])
    flat = b.op("reshape", x, shape=[shape[0], math.prod(shape[1:])])
    return b.op("reshape", b.op("softmax", flat, axes=[1]), shape=list(shape))


@import_rule("softmax", NNVM, "SoftmaxActivation")
def softmax_activation(b: Builder, node: OpNode) -> Any:
    """Mode 'channel': over axis 1; 'instance': over the last axis (MXNet flattens the leading axes together)."""
    node.arity(1)
    x = node.input(0)
    mode = node.attrs.choice("mode", ("instance", "channel"), "instance")
    return b.op("softmax", x, axes=[1 if mode == "channel" else b.rank(x) - 1])


@import_rule("dropout", NNVM, "Dropout", "dropout")
def dropout(b: Builder, node: OpNode) -> Any:
    """A copy at inference; the imported module drops items in training mode, as MXNet does."""
    node.arity(1)
    rate = node.attrs.float("p", node.attrs.float("rate", 0.5))
    mode = node.attrs.choice("mode", ("training", "always"), "training")
    x = node.input(0)
    shared = axes(node, node.attrs.ints("axes", ()), b.rank(x), "axes")
    node.attrs.bool("cudnn_off", False)
    if not 0.0 <= rate < 1.0:
        raise node.fail(f"the dropout rate must be in [0, 1), found {rate}")
    if mode == "always" and rate > 0:
        raise node.fail("Dropout with mode 'always' drops at inference too; NNEF has no random operations")
    out = b.op("dropout", x, rate=float(rate), axes=shared) if rate > 0 else b.op("copy", x)
    return out, Hidden("dropout mask")


@import_rule("local_response_normalization", NNVM, "LRN")
def lrn(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    size = node.attrs.int("nsize") if node.attrs.has("nsize") else node.attrs.int("size")
    alpha, beta = node.attrs.float("alpha", 1e-4), node.attrs.float("beta", 0.75)
    bias = node.attrs.float("knorm", None)
    bias = node.attrs.float("bias", 2.0) if bias is None else bias
    node.attrs.int("axis", 1)
    x = node.input(0)
    out = b.op("local_response_normalization", x, size=[1, size] + [1] * (b.rank(x) - 2), alpha=float(alpha),
               beta=float(beta), bias=float(bias))
    return out, Hidden("normalization denominator")


@import_rule("layer_norm", NNVM, "LayerNorm", params=(1, 2))
def layer_norm(b: Builder, node: OpNode) -> Any:
    node.arity(3)
    eps = node.attrs.float("eps", 1e-5)
    if node.attrs.bool("output_mean_var", False):
        raise node.fail("output_mean_var (the mean and standard deviation as outputs) is not supported")
    x = node.input(0)
    rank = b.rank(x)
    where = axis(node, node.attrs.int("axis", -1), rank)
    count = b.shape(x)[where]
    gamma, beta = node.param(1, [count], "gamma"), node.param(2, [count], "beta")
    scale, offset = (b.op("reshape", v, shape=[1] * where + [count] + [1] * (rank - where - 1)) if rank > 1 else v
                     for v in (gamma, beta))
    return b.op("layer_norm", x, scale, offset, axes=[where], epsilon=float(eps)), Hidden("mean"), \
        Hidden("standard deviation")


@import_rule("instance_norm", NNVM, "InstanceNorm", params=(1, 2))
def instance_norm(b: Builder, node: OpNode) -> Any:
    node.arity(3)
    eps = node.attrs.float("eps", 1e-3)
    x = node.input(0)
    count = b.shape(x)[1]
    gamma, beta = node.param(1, [count], "gamma"), node.param(2, [count], "beta")
    out = b.op("instance_norm", x, channel_vector(b, gamma, 2), channel_vector(b, beta, 2),
               axes=list(range(2, b.rank(x))), epsilon=float(eps))
    return out, Hidden("mean"), Hidden("variance")


@import_rule("l2_normalization", NNVM, "L2Normalization")
def l2_normalization(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    eps = node.attrs.float("eps", 1e-10)
    mode = node.attrs.choice("mode", ("instance", "channel", "spatial"), "instance")
    x = node.input(0)
    rank = b.rank(x)
    reduced = {"instance": list(range(1, rank)), "channel": [1], "spatial": list(range(2, rank))}[mode]
    norm = b.op("sqrt", b.op("add", b.op("sum_reduce", b.op("sqr", x), axes=reduced), float(eps)))
    return b.op("div", x, norm), Hidden("norm")


@import_rule("nearest_upsample", NNVM, "UpSampling")
def upsampling(b: Builder, node: OpNode) -> Any:
    scale = node.attrs.int("scale")
    kind = node.attrs.choice("sample_type", ("nearest", "bilinear"))
    count = node.attrs.int("num_args", 1)
    mode = node.attrs.choice("multi_input_mode", ("concat", "sum"), "concat")
    node.attrs.int("num_filter", 0)
    node.attrs.raw("workspace", None)
    if kind != "nearest":
        raise node.fail("bilinear UpSampling (a learned deconvolution) is not supported; nearest is")
    if count != len(node.inputs):
        raise node.fail(f"num_args is {count} but the node has {len(node.inputs)} inputs")
    first = node.input(0)
    target = [extent * scale for extent in b.shape(first)[2:]]
    outputs = []
    for x in node.inputs:
        extents = b.shape(x)[2:]
        if any(t % e for t, e in zip(target, extents)):
            raise node.fail(f"input of spatial shape {list(extents)} cannot be upsampled to {target}")
        outputs.append(b.op("nearest_upsample", x, factor=[t // e for t, e in zip(target, extents)]))
    if len(outputs) == 1:
        return outputs[0]
    if mode == "sum":
        total = outputs[0]
        for other in outputs[1:]:
            total = b.op("add", total, other)
        return total
    return b.op("concat", outputs, axis=1)


@import_rule("pad", NNVM, "Pad", "pad")
def pad(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    rank = b.rank(x)
    widths = node.attrs.tuple("pad_width")
    if widths and all(isinstance(w, tuple) for w in widths):  # NNVM: ((before, after), ...)
        flat = [value for pair in widths for value in pair]
    else:
        flat = list(widths)
    if len(flat) != 2 * rank or not all(isinstance(v, int) and v >= 0 for v in flat):
        raise node.fail(f"pad_width {widths} must give a non-negative (before, after) pair for each of the {rank} axes")
    mode = node.attrs.choice("mode", ("constant", "edge", "reflect"), "constant")
    value = node.attrs.float("constant_value", 0.0) if node.attrs.has("constant_value") \
        else node.attrs.float("pad_value", 0.0)
    border = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}[mode]
    return b.op("pad", x, padding=[(flat[2 * i], flat[2 * i + 1]) for i in range(rank)], border=border,
                value=float(value))
