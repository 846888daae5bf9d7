"""The rows of `test_lightnet_ops.py`: LightNet ops with params as the op definitions declare them, the tensors the
caller fills, and a twin written by hand (numpy, `lightnet_twins`) from the definitions. `session` records why the
Khronos executor cannot run a row."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from formats.lightnet import lightnet_twins as twins
from formats.lightnet.lightnet_ir import create, op

RNG = np.random.default_rng(20240921)
TL = {np.dtype("float32"): "TL_FLOAT", np.dtype("int32"): "TL_INT32", np.dtype("uint8"): "TL_UINT8"}


def rand(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


@dataclass(frozen=True)
class Row:
    name: str
    ops: list[dict[str, Any]]
    inputs: list[tuple[str, np.ndarray]]
    twin: Callable[..., Any]
    outputs: list[str] | None = None
    rtol: float = 1e-5
    session: str = ""  # why the Khronos executor cannot run it

    def document(self) -> dict[str, Any]:
        made = [create(name, list(value.shape), dtype=TL[value.dtype], from_file=True) for name, value in self.inputs]
        return {"ops": made + self.ops}


X = rand(2, 4, 7, 6)
W = rand(6, 2, 3, 3)
B = rand(6)


def conv_row(name: str, *, autopad: str = "NOTSET", padding: tuple[int, ...] = (0, 0, 0, 0), expected: Any = None,
             stride: tuple[int, int] = (1, 1), dilation: tuple[int, int] = (1, 1), group: int = 2,
             w: np.ndarray = W, x: np.ndarray = X) -> Row:
    """conv2d; `expected` the padding [top, left, bottom, right] that `ln_autopadding_conv` computes (written out
    by hand for each case)."""
    params = dict(group=group, size=list(w.shape[2:]), stride=list(stride), dilation=list(dilation),
                  padding=list(padding), autopad=autopad)
    pads = list(expected if expected is not None else padding)
    bias = B[:w.shape[0]]
    return Row(name, [create("w", list(w.shape), w), create("b", [w.shape[0]], bias),
                      op("conv2d", "conv", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, **params)],
               [("x", x)], lambda x: twins.conv2d(x, w, bias, group=group, stride=list(stride),
                                                  dilation=list(dilation), padding=pads), rtol=1e-4)


DW = rand(4, 3, 3, 3)
DB = rand(6)


def deconv_row(name: str, *, autopad: str = "NOTSET", padding: tuple[int, ...] = (1, 1, 1, 1), expected: Any = None,
               output_dims: tuple[int, ...] = (0, 0, 0, 0), output_padding: tuple[int, int] = (0, 0),
               stride: tuple[int, int] = (2, 2), dilation: tuple[int, int] = (1, 1)) -> Row:
    params = dict(group=2, size=[3, 3], stride=list(stride), output_dims=list(output_dims), padding=list(padding),
                  output_padding=list(output_padding), dilation=list(dilation), autopad=autopad)
    pads = list(expected if expected is not None else padding)
    x = X[:, :, :4, :5]
    return Row(name, [create("w", [4, 3, 3, 3], DW), create("b", [6], DB),
                      op("deconv2d", "deconv", {"src": "x", "weight": "w", "bias": "b"}, {"dst": "y"}, **params)],
               [("x", x)], lambda x: twins.deconv2d(x, DW, DB, group=2, stride=list(stride), dilation=list(dilation),
                                                    padding=pads, output_padding=list(output_padding)), rtol=1e-4)


def pool_row(name: str, optype: str, *, autopad: str = "NOTSET", padding: tuple[int, ...] = (0, 0, 0, 0),
             expected: Any = None, size: tuple[int, int] = (3, 3), stride: tuple[int, int] = (2, 2),
             x: np.ndarray = X) -> Row:
    pads = list(expected if expected is not None else padding)
    kind = "max" if optype == "maxpool2d" else "avg"
    return Row(name, [op(optype, "pool", {"src": "x"}, {"dst": "y"}, size=list(size), stride=list(stride),
                         padding=list(padding), autopad=autopad)],
               [("x", x)], lambda x: twins.pool(x, size=list(size), stride=list(stride), padding=pads, kind=kind))


def unary(name: str, optype: str, twin: Callable[[np.ndarray], np.ndarray], x: np.ndarray = X, rtol: float = 1e-5,
          **params: Any) -> Row:
    return Row(name, [op(optype, optype, {"src": "x"}, {"dst": "y"}, **params)], [("x", x)], twin, rtol=rtol)


def binary(name: str, optype: str, twin: Callable[..., Any], a: np.ndarray, b: np.ndarray, **params: Any) -> Row:
    return Row(name, [op(optype, optype, {"src1": "a", "src2": "b"}, {"dst": "y"}, **params)],
               [("a", a), ("b", b)], twin)


def elew(kind: str, twin: Callable[..., Any], a: np.ndarray | None = None, b: np.ndarray | None = None) -> Row:
    return binary(f"elew_{kind.lower()}", "elew", twin, rand(3, 4) if a is None else a,
                  rand(3, 4) if b is None else b, elew_op=kind)


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


POSITIVE = rand(3, 4, low=0.5, high=2.0)
NEGATIVE = rand(1, 2, 5, 5, low=-3.0, high=-1.0)  # zero padding would be the maximum of every padded window
TIES = np.array([3, 1, 2, 1, 3, 0, 2, 1], dtype=np.float32)
IMAGE = RNG.integers(0, 256, (4, 5, 3)).astype(np.uint8)
DELTA = rand(1, 2, 3, 2, 4, low=-1.5, high=1.5)
ANCHOR = np.concatenate([rand(1, 2, 3, 2, 2, low=0, high=50), rand(1, 2, 3, 2, 2, low=5, high=30)], axis=4)
FEATURE = rand(1, 2 * (5 + 3), 3, 4)
ANCHORS = np.array([[10, 13], [33, 23]], dtype=np.float32)
SORT_VALUES = np.arange(8, dtype=np.int32)


ROWS: list[Row] = [
    # -- conv2d: every param; autopad as ln_autopadding_conv computes it (the expected padding by hand) --
    conv_row("conv2d_plain", group=1, w=rand(6, 4, 3, 3)),
    conv_row("conv2d_groups_stride_dilation", stride=(2, 1), dilation=(2, 1), padding=(1, 0, 2, 1)),
    conv_row("conv2d_valid_ignores_padding", autopad="VALID", padding=(3, 3, 3, 3), expected=(0, 0, 0, 0)),
    # 7 x 6, stride 2: outputs 4 x 3; totals (4-1)*2+3-7 = 2 and (3-1)*2+3-6 = 1: UPPER puts the extra after
    conv_row("conv2d_same_upper", autopad="SAME_UPPER", stride=(2, 2), expected=(1, 0, 1, 1)),
    conv_row("conv2d_same_lower", autopad="SAME_LOWER", stride=(2, 2), expected=(1, 1, 1, 0)),
    # 1x1 kernel, stride 3 over 7 x 6: totals (3-1)*3+1-7 = 0 and (2-1)*3+1-6 = -2; C halves: 0 and -1
    conv_row("conv2d_same_lower_negative_padding", autopad="SAME_LOWER", stride=(3, 3), w=rand(6, 2, 1, 1),
             expected=(0, -1, 0, -1)),
    # stride 4 over 6: total (2-1)*4+1-6 = -1, C half 0: UPPER crops the end, LOWER the start
    conv_row("conv2d_same_upper_negative_padding", autopad="SAME_UPPER", stride=(3, 4), w=rand(6, 2, 1, 1),
             expected=(0, 0, 0, -1)),
    conv_row("conv2d_same_lower_negative_odd", autopad="SAME_LOWER", stride=(3, 4), w=rand(6, 2, 1, 1),
             expected=(0, -1, 0, 0)),
    conv_row("conv2d_asymmetric_padding", padding=(2, 1, 0, 1)),
    # -- deconv2d --
    deconv_row("deconv2d_plain", padding=(0, 0, 0, 0), stride=(1, 1)),
    deconv_row("deconv2d_stride_padding_output_padding", output_padding=(1, 1)),
    deconv_row("deconv2d_asymmetric_dilated", padding=(0, 1, 2, 0), stride=(2, 3), dilation=(2, 1)),
    deconv_row("deconv2d_output_dims", output_dims=(2, 6, 8, 10), output_padding=(1, 1)),
    deconv_row("deconv2d_valid", autopad="VALID", padding=(1, 1, 1, 1), expected=(0, 0, 0, 0)),
    # input 4 x 5, stride 2, size 3: full extents 9 x 11; output_dims 8 x 10 leave totals 1 and 1
    deconv_row("deconv2d_same_upper", autopad="SAME_UPPER", output_dims=(2, 6, 8, 10), expected=(0, 0, 1, 1)),
    deconv_row("deconv2d_same_lower", autopad="SAME_LOWER", output_dims=(2, 6, 8, 10), expected=(1, 1, 0, 0)),
    # -- pools: floor output size; padding never the maximum, never averaged --
    pool_row("maxpool2d", "maxpool2d"),
    pool_row("maxpool2d_padding_never_selected", "maxpool2d", padding=(1, 1, 1, 1), stride=(2, 2), x=NEGATIVE),
    pool_row("maxpool2d_asymmetric", "maxpool2d", padding=(0, 1, 1, 0), size=(2, 3), stride=(1, 2)),
    pool_row("maxpool2d_same_upper", "maxpool2d", autopad="SAME_UPPER", expected=(1, 0, 1, 1)),
    pool_row("avgpool2d", "avgpool2d", size=(2, 2), stride=(2, 2)),
    pool_row("avgpool2d_padding_not_counted", "avgpool2d", padding=(1, 1, 1, 1)),
    pool_row("avgpool2d_same_lower", "avgpool2d", autopad="SAME_LOWER", expected=(1, 1, 1, 0)),
    pool_row("avgpool2d_valid", "avgpool2d", autopad="VALID", padding=(1, 1, 1, 1), expected=(0, 0, 0, 0)),
    # -- batchnorm --
    Row("batchnorm", [create("scale", [4], rand(4)), create("offset", [4], rand(4)), create("mean", [4], rand(4)),
                      create("var", [4], rand(4, low=0.1, high=2.0)),
                      op("batchnorm", "bn", {"src": "x", "scale": "scale", "offset": "offset", "mean": "mean",
                                             "var": "var"}, {"dst": "y"}, epsilon=1e-3)],
        [("x", X)], None),  # the twin is set below, from the constants
    # -- activations --
    unary("relu", "relu", lambda x: np.maximum(x, 0)),
    unary("lrelu", "lrelu", lambda x: np.where(x < 0, np.float32(0.2) * x, x), negslope=0.2),
    unary("sigmoid", "sigmoid", lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    unary("softmax_axis1", "softmax", lambda x: softmax(x, 1), axis=1),
    unary("softmax_axis3", "softmax", lambda x: softmax(x, 3), axis=3),
    # -- elew: one shape, one dtype --
    elew("TL_SUM", np.add), elew("TL_SUB", np.subtract), elew("TL_MUL", np.multiply),
    elew("TL_DIV", np.divide, b=POSITIVE), elew("TL_MAX", np.maximum), elew("TL_MIN", np.minimum),
    elew("TL_POW", np.power, a=POSITIVE),
    # -- tensor ops --
    binary("concat_axis0", "concat", lambda a, b: np.concatenate([a, b], 0), rand(2, 3), rand(4, 3), axis=0),
    binary("concat_axis1", "concat", lambda a, b: np.concatenate([a, b], 1), rand(2, 3), rand(2, 5), axis=1),
    unary("reshape", "reshape", lambda x: x.reshape(8, 3, 14), dims=[8, 3, 14]),
    unary("transpose", "transpose", lambda x: x.transpose(0, 3, 1, 2), axes=[0, 3, 1, 2]),
    unary("slice", "slice", lambda x: x[:, 1:4], axis=1, start=1, len=3),
    unary("slice_last_axis", "slice", lambda x: x[..., 5:], axis=3, start=5, len=1),
    unary("forward", "forward", lambda x: x),
    unary("maxreduce", "maxreduce", lambda x: x.max(axis=2, keepdims=True), axis=2),
    Row("maxreduce_arg_first_of_ties", [op("maxreduce_arg", "m", {"src": "x"}, {"dst": "y", "arg": "i"}, axis=1)],
        [("x", np.array([[1, 3, 3, 0], [2, 2, 1, 2]], dtype=np.float32))],
        lambda x: [x.max(axis=1, keepdims=True), x.argmax(axis=1)[:, None]]),
    binary("dot_product", "dot_product", lambda a, b: np.array([np.sum(a.astype(np.float64) * b)]),
           rand(3, 4), rand(3, 4)),
    # -- resize and upsample --
    unary("resize_nearest_up", "resize", lambda x: twins.nearest(x, [2, 4, 10, 15]), mode="TL_NEAREST",
          dims=[2, 4, 10, 15]),
    unary("resize_nearest_down", "resize", lambda x: twins.nearest(x, [1, 3, 4, 4]), mode="TL_NEAREST",
          dims=[1, 3, 4, 4]),
    unary("resize_linear", "resize", lambda x: twins.linear(x, [2, 4, 10, 4]), mode="TL_LINEAR", dims=[2, 4, 10, 4]),
    unary("upsample_nearest_factors", "upsample", lambda x: twins.nearest(x, [2, 4, 14, 18]), mode="TL_NEAREST",
          scales=[1, 1, 2, 3]),
    unary("upsample_nearest_fraction", "upsample", lambda x: twins.nearest(x, [2, 4, 10, 9]), mode="TL_NEAREST",
          scales=[1, 1, 1.5, 1.5]),
    unary("upsample_linear", "upsample", lambda x: twins.linear(x, [2, 4, 14, 12]), mode="TL_LINEAR",
          scales=[1, 1, 2, 2]),
    # -- constants --
    Row("create_inline_int32_truncates_and_saturates",
        [create("c", [2, 3], [1.7, -1.7, 3e10, -3e10, 0, 5], dtype="TL_INT32")], [],
        lambda: np.array([[1, -1, 2**31 - 1], [-2**31, 0, 5]])),
    Row("create_uint8_and_bool", [create("u", [3], [-4, 300, 7.9], dtype="TL_UINT8"),
                                  create("t", [3], [0.5, 0, -2], dtype="TL_BOOL")], [],
        lambda: [np.array([0, 255, 7]), np.array([True, False, True])]),
    Row("create_zeros_and_double", [create("z", [2, 2], None), create("d", [2], [0.1, -2.5], dtype="TL_DOUBLE")],
        [], lambda: [np.zeros((2, 2), np.float32), np.array([0.1, -2.5], np.float32)]),
    Row("zeros", [op("zeros", "z", {}, {"dst": "y"}, dtype="TL_FLOAT", dims=[2, 3]),
                  op("zeros", "zi", {}, {"dst": "yi"}, dtype="TL_INT8", dims=[4])], [],
        lambda: [np.zeros((2, 3), np.float32), np.zeros(4, np.int64)]),
    Row("arange", [op("arange", "a", {}, {"dst": "y"}, dtype="TL_FLOAT", start=-1, stop=2, step=0.5),
                   op("arange", "ai", {}, {"dst": "yi"}, dtype="TL_INT32", start=0.5, stop=4, step=1.5)], [],
        lambda: [np.array([-1, -0.5, 0, 0.5, 1, 1.5], np.float32), np.array([0, 2, 3])]),
    # -- detection post-processing --
    Row("sort1d_ascending", [op("sort1d", "s", {"src_key": "k"}, {"dst_key": "y"}, dir="TL_SORT_DIR_ASCENDING")],
        [("k", TIES)], lambda k: np.sort(k)),
    Row("sort1d_descending", [op("sort1d", "s", {"src_key": "k"}, {"dst_key": "y"}, dir="TL_SORT_DIR_DESCENDING")],
        [("k", TIES)], lambda k: np.sort(k)[::-1]),
    Row("sort1d_by_key_stable", [op("sort1d_by_key", "s", {"src_key": "k", "src_val": "v"},
                                    {"dst_key": "y", "dst_val": "i"}, dir="TL_SORT_DIR_DESCENDING")],
        [("k", TIES), ("v", SORT_VALUES)],
        lambda k, v: [k[twins.stable_sort(k, True)], v[twins.stable_sort(k, True)]]),
    Row("rearange_then_sort_by_key", [create("index", [8], dtype="TL_INT32", ran=(0, 10)),
                                      op("rearange", "r", {"src": "index"}, {"dst": "order"}, start=0, stop=8, step=1),
                                      op("sort1d_by_key", "s", {"src_key": "k", "src_val": "order"},
                                         {"dst_key": "y", "dst_val": "i"}, dir="TL_SORT_DIR_ASCENDING")],
        [("k", TIES)], lambda k: [k[twins.stable_sort(k, False)], twins.stable_sort(k, False)]),
    Row("pick1d_stride", [op("pick1d", "p", {"src": "x", "src_index": "i"}, {"dst": "y"}, len=2, stride=3)],
        [("x", rand(12)), ("i", np.array([3, 0, 2], dtype=np.int32))],
        lambda x, i: x.reshape(4, 3)[i[:2]].reshape(-1)),
    Row("submean_uint8_image", [op("submean", "m", {"src": "img"}, {"dst": "y"}, mean=[104.5, 117, 123.25],
                                   dtype="TL_FLOAT")],
        [("img", IMAGE)], lambda img: (img - np.array([104.5, 117, 123.25])).transpose(2, 0, 1)),
    Row("submean_float", [op("submean", "m", {"src": "img"}, {"dst": "y"}, mean=[0.5, -1, 2], dtype="TL_FLOAT")],
        [("img", rand(3, 2, 3))], lambda img: (img - np.array([0.5, -1, 2])).transpose(2, 0, 1)),
    Row("transform_bboxSQD", [op("transform_bboxSQD", "t", {"src_delta": "d", "src_anchor": "a"}, {"dst": "y"},
                                 width=40, height=30, img_width=64, img_height=45, x_shift=-3, y_shift=2)],
        [("d", DELTA), ("a", ANCHOR)], lambda d, a: twins.bbox_sqd(d, a, 40, 30, 64, 45, -3, 2), rtol=1e-5),
    Row("detect_yolov3", [create("anchors", [2, 2], ANCHORS),
                          op("detect_yolov3", "yolo", {"feature": "f", "anchors": "anchors"},
                             {"box_centers": "c", "box_sizes": "s", "boxes": "b", "confs": "p", "probs": "q"},
                             img_width=416, img_height=320)],
        [("f", FEATURE)], lambda f: twins.yolov3(f, ANCHORS, 416, 320), rtol=1e-5),
]

_BN = ROWS[[row.name for row in ROWS].index("batchnorm")]
_CONSTANTS = {item["tensors_out"][0]["name"]: np.array(item["params"][2]["value"], np.float32) for item in _BN.ops[:4]}
ROWS[ROWS.index(_BN)] = Row("batchnorm", _BN.ops, _BN.inputs,
                            lambda x: twins.batchnorm(x, *(_CONSTANTS[k] for k in ("scale", "offset", "mean", "var")),
                                                      epsilon=1e-3), rtol=1e-4)

# every generic optype has rows here or in the tests of prints (print, fprint) and constants (create)
COVERED = {item["optype"] for row in ROWS for item in row.ops} | {"print", "fprint", "create"}
