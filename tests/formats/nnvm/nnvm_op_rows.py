"""The rows of `test_nnvm_ops.py`: each NNVM operator with attributes as NNVM writes them, its inputs and parameters,
and a twin written by hand from NNVM's documented meaning (torch.nn.functional or numpy). `session` records why the
Khronos executor cannot run a row; `REFUSED` lists the operators nnef_torch refuses, with the message it must give.

The operators are those registered in `src/top` of dmlc/nnvm and of TVM's `nnvm/` (which grew from it until NNVM's
removal), aliases included: `NNVM_OPERATORS`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from formats.nnvm.nnvm_twins import (
    argreduce,
    blocked,
    nchwc_conv_twin,
    pool_twin,
    prior_twin,
    region_twin,
    reorg_twin,
    resize_twin,
    t,
    yolo_twin,
)
from nnef_torch.errors import ForeignFormatError, NNEFUnsupportedError

RNG = np.random.default_rng(20240611)


def rand(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


def ints(*shape: int, high: int) -> np.ndarray:
    return RNG.integers(0, high, shape).astype(np.int32)


@dataclass(frozen=True)
class Row:
    name: str
    op: str
    attrs: dict[str, str]
    inputs: list[tuple[str, np.ndarray]]  # graph inputs, in order
    twin: Callable[..., Any]  # called with the operator's arguments (`args`), positionally
    params: dict[str, np.ndarray] = field(default_factory=dict)
    args: tuple[str, ...] | None = None  # the operator's inputs by name (default: the inputs, then the parameters)
    outputs: int = 1  # the operator's output count (node_row_ptr)
    heads: tuple[int, ...] = (0,)
    keep: bool = False  # the graph also gives its first input (read by nothing else), so that it stays an input
    rtol: float = 1e-5
    session: str = ""  # why nnef.Session cannot run the NNEF ('' where it must)
    crashes: str = ""  # why nnef.Session kills the process on this NNEF (then it runs in a child process)
    bug: str = ""  # why nnef_torch reads this row wrongly (a strict xfail: a fix shows up)

    @property
    def arguments(self) -> list[str]:
        return list(self.args) if self.args is not None else [n for n, _ in self.inputs] + list(self.params)


@dataclass(frozen=True)
class Refused:
    name: str
    row: Row
    error: type[Exception]
    message: str


def unary(name: str, op: str, twin: Callable[..., Any], x: np.ndarray | None = None, attrs: dict[str, str] | None = None,
          **options: Any) -> Row:
    return Row(name, op, attrs or {}, [("x", rand(2, 3, 4) if x is None else x)], twin, **options)


def binary(name: str, op: str, twin: Callable[..., Any], a: np.ndarray, b: np.ndarray,
           attrs: dict[str, str] | None = None, **options: Any) -> Row:
    return Row(name, op, attrs or {}, [("a", a), ("b", b)], twin, **options)


def truth(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float32)


# Why the Khronos executor cannot run some rows.
FACTOR_2 = "nnef.Session implements multilinear_upsample for factor 2 only ('not implemented: ... factor != 2')"
ALIGNED = "nnef.Session does not implement multilinear_upsample with method 'aligned'"
INTEGER_CONSTANT = ("nnef.Session aborts the process on a constant<integer> ('std::invalid_argument: Value: kind "
                    "mismatch')")
X4 = rand(2, 3, 5, 5)
NHWC = rand(1, 6, 6, 3)
POSITIVE = rand(2, 3, 4, low=0.5, high=2.0)
SIGNED_DIVISOR = (rand(2, 3, 4, low=0.5, high=1.5) * np.where(RNG.random((2, 3, 4)) < 0.5, -1, 1)).astype(np.float32)
MASK = (RNG.random((2, 3, 4)) < 0.5)
MASK2 = (RNG.random((2, 3, 4)) < 0.5)
TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.5, 2.0]], np.float32)

# ------------------------------------------------------------------------------------------------------- nn rows
NN_ROWS = [
    Row("dense", "dense", {"units": "3"}, [("x", rand(2, 5))],
        lambda x, w, b: F.linear(t(x), t(w), t(b)), params={"w": rand(3, 5), "b": rand(3)}),
    Row("dense_no_bias_3d", "dense", {"units": "4", "use_bias": "False"}, [("x", rand(2, 3, 5))],
        lambda x, w: F.linear(t(x), t(w)), params={"w": rand(4, 5)}),
    Row("conv2d", "conv2d", {"channels": "4", "kernel_size": "(3, 3)", "padding": "(1, 1)", "strides": "(1, 1)",
                             "dilation": "(1, 1)", "groups": "1", "layout": "NCHW", "use_bias": "True"},
        [("x", rand(1, 3, 7, 7))], lambda x, w, b: F.conv2d(t(x), t(w), t(b), padding=1),
        params={"w": rand(4, 3, 3, 3), "b": rand(4)}),
    Row("conv2d_strided_dilated_no_bias", "conv2d",
        {"channels": "5", "kernel_size": "[3, 2]", "padding": "(2, 1)", "strides": "(2, 3)", "dilation": "(2, 1)",
         "use_bias": "0"},
        [("x", rand(2, 3, 9, 8))], lambda x, w: F.conv2d(t(x), t(w), stride=(2, 3), padding=(2, 1), dilation=(2, 1)),
        params={"w": rand(5, 3, 3, 2)}),
    Row("conv2d_groups", "conv2d", {"channels": "6", "kernel_size": "(3, 3)", "groups": "2", "use_bias": "False"},
        [("x", rand(1, 4, 6, 6))], lambda x, w: F.conv2d(t(x), t(w), groups=2), params={"w": rand(6, 2, 3, 3)}),
    Row("conv2d_depthwise", "conv2d", {"channels": "4", "kernel_size": "(3, 3)", "groups": "4", "padding": "(1, 1)"},
        [("x", rand(1, 4, 5, 5))], lambda x, w, b: F.conv2d(t(x), t(w), t(b), padding=1, groups=4),
        params={"w": rand(4, 1, 3, 3), "b": rand(4)}),
    Row("conv2d_nhwc_hwio", "conv2d", {"channels": "4", "kernel_size": "(3, 3)", "padding": "(1, 1)",
                                       "layout": "NHWC", "kernel_layout": "HWIO", "use_bias": "False"},
        [("x", NHWC)], lambda x, w: F.conv2d(t(x).permute(0, 3, 1, 2), t(w).permute(3, 2, 0, 1),
                                             padding=1).permute(0, 2, 3, 1), params={"w": rand(3, 3, 3, 4)}),
    Row("conv2d_nhwc_depthwise_hwoi", "conv2d", {"channels": "3", "kernel_size": "(3, 3)", "groups": "3",
                                                 "layout": "NHWC", "kernel_layout": "HWOI", "use_bias": "False"},
        [("x", NHWC)], lambda x, w: F.conv2d(t(x).permute(0, 3, 1, 2), t(w).permute(2, 3, 0, 1),
                                             groups=3).permute(0, 2, 3, 1), params={"w": rand(3, 3, 3, 1)}),
    Row("conv2d_out_layout_nhwc", "conv2d", {"channels": "2", "kernel_size": "(1, 1)", "out_layout": "NHWC",
                                             "use_bias": "False"},
        [("x", X4)], lambda x, w: F.conv2d(t(x), t(w)).permute(0, 2, 3, 1), params={"w": rand(2, 3, 1, 1)}),
    Row("conv2d_nchw4c", "_contrib_conv2d_NCHWc",
        {"channels": "8", "kernel_size": "(3, 3)", "padding": "(1, 1)", "layout": "NCHW4c",
         "kernel_layout": "OIHW4i4o", "out_layout": "NCHW4c", "out_dtype": "float32"},
        [("x", rand(1, 2, 5, 5, 4))], nchwc_conv_twin, params={"w": rand(2, 2, 3, 3, 4, 4), "b": rand(2, 4)}),
    Row("conv2d_transpose", "conv2d_transpose",
        {"channels": "3", "kernel_size": "(3, 3)", "strides": "(2, 2)", "padding": "(1, 1)",
         "output_padding": "(1, 1)"},
        [("x", rand(1, 4, 4, 5))], lambda x, w, b: F.conv_transpose2d(t(x), t(w), t(b), stride=2, padding=1,
                                                                      output_padding=1),
        params={"w": rand(4, 3, 3, 3), "b": rand(3)}),
    Row("conv2d_transpose_groups_dilated", "conv2d_transpose",
        {"channels": "4", "kernel_size": "(3, 2)", "groups": "2", "dilation": "(2, 1)", "use_bias": "False"},
        [("x", rand(1, 4, 4, 4))], lambda x, w: F.conv_transpose2d(t(x), t(w), groups=2, dilation=(2, 1)),
        params={"w": rand(4, 2, 3, 2)}),
    Row("conv2d_transpose_nhwc_hwoi", "conv2d_transpose",
        {"channels": "2", "kernel_size": "(2, 2)", "strides": "(2, 2)", "layout": "NHWC", "kernel_layout": "HWOI",
         "use_bias": "False"},
        [("x", NHWC)], lambda x, w: F.conv_transpose2d(t(x).permute(0, 3, 1, 2), t(w).permute(2, 3, 0, 1),
                                                       stride=2).permute(0, 2, 3, 1), params={"w": rand(2, 2, 3, 2)}),
    Row("batch_norm", "batch_norm", {"epsilon": "1e-05"}, [("x", X4)],
        lambda x, g, b, m, v: (F.batch_norm(t(x), t(m), t(v), t(g), t(b), False, 0.0, 1e-5), m, v),
        params={"gamma": rand(3), "beta": rand(3), "mean": rand(3), "var": rand(3, low=0.5, high=2)},
        outputs=3, heads=(0, 1, 2)),
    Row("batch_norm_last_axis_no_center_no_scale", "batch_norm",
        {"axis": "-1", "epsilon": "0.001", "center": "False", "scale": "False", "momentum": "0.9"}, [("x", NHWC)],
        lambda x, g, b, m, v: (x - m) / np.sqrt(v + 1e-3),
        params={"gamma": rand(3), "beta": rand(3), "mean": rand(3), "var": rand(3, low=0.5, high=2)}, outputs=3),
    unary("softmax_axis1", "softmax", lambda x: torch.softmax(t(x), 1), attrs={"axis": "1"}),
    unary("log_softmax", "log_softmax", lambda x: torch.log_softmax(t(x), -1)),
    unary("dropout", "dropout", lambda x: x, attrs={"rate": "0.3"}, outputs=2),
    unary("relu", "relu", lambda x: np.maximum(x, 0)),
    unary("leaky_relu", "leaky_relu", lambda x: F.leaky_relu(t(x), 0.1), attrs={"alpha": "0.1"}),
    Row("prelu", "prelu", {}, [("x", X4)], lambda x, a: F.prelu(t(x), t(a)), params={"alpha": rand(3)}),
    Row("prelu_last_axis", "prelu", {"axis": "3"}, [("x", NHWC)], lambda x, a: np.where(x > 0, x, a * x),
        params={"alpha": rand(3)}),
    unary("pad", "pad", lambda x: np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), constant_values=1.5), x=X4,
          attrs={"pad_width": "((0, 0), (0, 0), (1, 2), (2, 1))", "pad_value": "1.5"}),
    unary("lrn", "lrn", lambda x: F.local_response_norm(t(x), 3, alpha=0.5, beta=0.75, k=2.0), x=X4,
          attrs={"size": "3", "axis": "1", "alpha": "0.5", "beta": "0.75", "bias": "2"}),
    unary("lrn_last_axis", "lrn",
          lambda x: F.local_response_norm(t(x).permute(0, 3, 1, 2), 5, alpha=1.0, beta=0.5, k=1.0).permute(0, 2, 3, 1),
          x=rand(1, 3, 3, 6), attrs={"size": "5", "axis": "3", "alpha": "1.0", "beta": "0.5", "bias": "1"}),
    unary("l2_normalize", "l2_normalize",
          lambda x: x / np.sqrt(np.maximum((x * x).sum(axis=1, keepdims=True), 1e-10)), x=X4,
          attrs={"eps": "1e-10", "axis": "(1,)"}),
    unary("l2_normalize_eps_wins", "l2_normalize",
          lambda x: x / np.sqrt(np.maximum((x * x).sum(axis=(1, 2), keepdims=True), 30.0)),
          attrs={"eps": "30", "axis": "(1, -1)"}),
    unary("max_pool2d", "max_pool2d", lambda x: F.max_pool2d(t(x), 3, 2, padding=1), x=X4,
          attrs={"pool_size": "(3, 3)", "strides": "(2, 2)", "padding": "(1,)"}),
    unary("max_pool2d_asymmetric_padding_ceil", "max_pool2d",
          lambda x: pool_twin(x, 2, 2, (0, 1, 1, 0), True, "max"), x=rand(1, 2, 5, 5),
          attrs={"pool_size": "(2, 2)", "strides": "(2, 2)", "padding": "(0, 1, 1, 0)", "ceil_mode": "True"}),
    unary("max_pool2d_nhwc", "max_pool2d",
          lambda x: F.max_pool2d(t(x).permute(0, 3, 1, 2), 2, 2).permute(0, 2, 3, 1), x=NHWC,
          attrs={"pool_size": "(2, 2)", "strides": "(2, 2)", "layout": "NHWC"}),
    unary("avg_pool2d", "avg_pool2d", lambda x: pool_twin(x, 3, 2, (1, 1, 1, 1), False, "avg"), x=X4,
          attrs={"pool_size": "(3, 3)", "strides": "(2, 2)", "padding": "(1, 1)"}),
    unary("avg_pool2d_ceil_count_include_pad", "avg_pool2d",
          lambda x: pool_twin(x, 3, 2, (1, 1, 1, 1), True, "avg", include_pad=True), x=rand(1, 2, 6, 6),
          attrs={"pool_size": "(3, 3)", "strides": "(2, 2)", "padding": "(1, 1)", "ceil_mode": "True",
                 "count_include_pad": "True"}),
    unary("avg_pool2d_nchw4c", "avg_pool2d",
          lambda x: blocked(pool_twin(x.transpose(0, 1, 4, 2, 3).reshape(1, 8, 4, 4), 2, 2, (0, 0, 0, 0), False,
                                      "avg"), 4),
          x=rand(1, 2, 4, 4, 4), attrs={"pool_size": "(2, 2)", "strides": "(2, 2)", "layout": "NCHW4c"}),
    unary("global_max_pool2d", "global_max_pool2d", lambda x: x.max(axis=(2, 3), keepdims=True), x=X4),
    unary("global_avg_pool2d_nhwc", "global_avg_pool2d", lambda x: x.mean(axis=(1, 2), keepdims=True), x=NHWC,
          attrs={"layout": "NHWC"}),
    unary("upsampling", "upsampling", lambda x: x.repeat(2, axis=2).repeat(2, axis=3), x=X4, attrs={"scale": "2"}),
    unary("upsampling_nhwc", "upsampling", lambda x: x.repeat(3, axis=1).repeat(3, axis=2), x=NHWC,
          attrs={"scale": "3", "layout": "NHWC"}),
    unary("upsampling_bilinear", "upsampling", lambda x: resize_twin(x, (10, 10), True), x=X4,
          attrs={"scale": "2", "method": "BILINEAR"}),
    unary("resize_nearest_up", "resize", lambda x: resize_twin(x, (10, 15), False), x=X4,
          attrs={"size": "(10, 15)", "method": "NEAREST_NEIGHBOR"}),
    unary("resize_nearest_down", "resize", lambda x: resize_twin(x, (3, 2), False), x=X4,
          attrs={"size": "(3, 2)", "method": "NEAREST_NEIGHBOR"}),
    unary("resize_bilinear_whole_factor", "resize", lambda x: resize_twin(x, (10, 15), True), x=X4,
          attrs={"size": "(10, 15)"}, session=FACTOR_2),
    unary("resize_bilinear_aligned_whole_factor", "resize", lambda x: resize_twin(x, (10, 10), True, True), x=X4,
          attrs={"size": "(10, 10)", "method": "BILINEAR", "align_corners": "True"}, session=ALIGNED),
    unary("resize_bilinear_any_size", "resize", lambda x: resize_twin(x, (7, 3), True), x=X4,
          attrs={"size": "(7, 3)", "method": "BILINEAR"}),
    unary("resize_bilinear_aligned_any_size", "resize", lambda x: resize_twin(x, (3, 8), True, True), x=X4,
          attrs={"size": "(3, 8)", "method": "BILINEAR", "align_corners": "1"}),
    unary("resize_nhwc", "resize",
          lambda x: resize_twin(x.transpose(0, 3, 1, 2), (4, 9), True).transpose(0, 2, 3, 1), x=NHWC,
          attrs={"size": "(4, 9)", "layout": "NHWC"}),
    unary("layout_transform_nhwc", "__layout_transform__", lambda x: x.transpose(0, 2, 3, 1), x=X4,
          attrs={"src_layout": "NCHW", "dst_layout": "NHWC"}),
    unary("layout_transform_blocked", "__layout_transform__", lambda x: blocked(x, 4), x=rand(1, 8, 3, 2),
          attrs={"src_layout": "NCHW", "dst_layout": "NCHW4c"}),
    unary("layout_transform_unblocked_nhwc", "__layout_transform__",
          lambda x: x.transpose(0, 2, 3, 1, 4).reshape(1, 3, 2, 8), x=rand(1, 2, 3, 2, 4),
          attrs={"src_layout": "NCHW4c", "dst_layout": "NHWC"}),
    unary("layout_transform_same", "__layout_transform__", lambda x: x, x=X4,
          attrs={"src_layout": "NCHW", "dst_layout": "NCHW"}),
]

# ------------------------------------------------------------------------------------------------------- element-wise
A, B = rand(2, 3, 4), rand(2, 3, 4)
ROW_B = rand(3, 1)
ELEMWISE_ROWS = [
    binary("elemwise_add", "elemwise_add", np.add, A, B),
    binary("elemwise_sub", "elemwise_sub", np.subtract, A, B),
    binary("elemwise_mul", "elemwise_mul", np.multiply, A, B),
    binary("elemwise_div", "elemwise_div", np.divide, A, SIGNED_DIVISOR),
    binary("elemwise_mod", "elemwise_mod", np.fmod, A * 3, SIGNED_DIVISOR),
    binary("elemwise_pow", "elemwise_pow", np.power, POSITIVE, B),
    binary("broadcast_add", "broadcast_add", np.add, A, rand(4)),
    binary("broadcast_sub", "broadcast_sub", np.subtract, A, ROW_B),
    binary("broadcast_mul", "broadcast_mul", np.multiply, rand(3, 1), A),
    binary("broadcast_div", "broadcast_div", np.divide, A, rand(1, 4, low=0.5, high=2)),
    binary("broadcast_mod", "broadcast_mod", np.fmod, A * 3, rand(3, 1, low=0.5, high=1.5)),
    binary("broadcast_max", "broadcast_max", np.maximum, A, ROW_B),
    binary("broadcast_min", "broadcast_min", np.minimum, A, ROW_B),
    binary("broadcast_pow", "broadcast_pow", np.power, POSITIVE, rand(4)),
    binary("broadcast_greater", "broadcast_greater", lambda a, b: truth(a > b), A, ROW_B),
    binary("broadcast_less", "broadcast_less", lambda a, b: truth(a < b), A, ROW_B),
    binary("broadcast_equal", "broadcast_equal", lambda a, b: truth(a == b), TIES, np.float32([[3.0], [2.0]])),
    binary("broadcast_not_equal", "broadcast_not_equal", lambda a, b: truth(a != b), TIES, np.float32([[3.0], [2.0]])),
    binary("broadcast_greater_equal", "broadcast_greater_equal", lambda a, b: truth(a >= b), TIES,
           np.float32([[3.0], [2.0]])),
    binary("broadcast_less_equal", "broadcast_less_equal", lambda a, b: truth(a <= b), TIES,
           np.float32([[3.0], [2.0]])),
    binary("add_symbol", "__add_symbol__", np.add, A, ROW_B),
    binary("sub_symbol", "__sub_symbol__", np.subtract, A, ROW_B),
    binary("mul_symbol", "__mul_symbol__", np.multiply, A, ROW_B),
    binary("div_symbol", "__div_symbol__", np.divide, A, rand(4, low=0.5, high=2)),
    binary("mod_symbol", "__mod_symbol__", np.fmod, A, rand(4, low=0.5, high=2)),
    binary("max_symbol", "__max_symbol__", np.maximum, A, ROW_B),
    binary("min_symbol", "__min_symbol__", np.minimum, A, ROW_B),
    binary("pow_symbol", "__pow_symbol__", np.power, POSITIVE, ROW_B),
    binary("greater_symbol", "__greater_symbol__", lambda a, b: truth(a > b), A, ROW_B),
    binary("less_symbol", "__less_symbol__", lambda a, b: truth(a < b), A, ROW_B),
    binary("equal_symbol", "__equal_symbol__", lambda a, b: truth(a == b), TIES, np.float32([2.0, 3.0, 3.0, 2.0])),
    binary("not_equal_symbol", "__not_equal_symbol__", lambda a, b: truth(a != b), TIES, np.float32([2.0])),
    binary("greater_equal_symbol", "__greater_equal_symbol__", lambda a, b: truth(a >= b), TIES, np.float32([2.0])),
    binary("less_equal_symbol", "__less_equal_symbol__", lambda a, b: truth(a <= b), TIES, np.float32([2.0])),
    binary("greater", "greater", lambda a, b: truth(a > b), A, B),
    binary("less", "less", lambda a, b: truth(a < b), A, B),
    binary("logical_and", "logical_and", np.logical_and, MASK, MASK2),
    binary("logical_or", "logical_or", np.logical_or, MASK, MASK2),
    binary("logical_and_numbers", "logical_and", lambda a, b: truth(np.logical_and(a, b)),
           np.float32([[0, 1, 2], [0, 0, -1]]), np.float32([[1, 0, 3], [0, 2, 2]])),
    unary("logical_not", "logical_not", np.logical_not, x=MASK),
    Row("elemwise_sum", "elemwise_sum", {"num_args": "3"}, [("a", A), ("b", B), ("c", rand(2, 3, 4))],
        lambda a, b, c: a + b + c),
    unary("add_scalar", "__add_scalar__", lambda x: x + 2.5, attrs={"scalar": "2.5"}),
    unary("sub_scalar", "__sub_scalar__", lambda x: x - 2.5, attrs={"scalar": "2.5"}),
    unary("rsub_scalar", "__rsub_scalar__", lambda x: 2.5 - x, attrs={"scalar": "2.5"}),
    unary("mul_scalar", "__mul_scalar__", lambda x: x * -3.0, attrs={"scalar": "-3"}),
    unary("div_scalar", "__div_scalar__", lambda x: x / 4.0, attrs={"scalar": "4.0"}),
    unary("rdiv_scalar", "__rdiv_scalar__", lambda x: 3.0 / x, x=SIGNED_DIVISOR, attrs={"scalar": "3"}),
    unary("pow_scalar", "__pow_scalar__", lambda x: x ** 1.5, x=POSITIVE, attrs={"scalar": "1.5"}),
    unary("rpow_scalar", "__rpow_scalar__", lambda x: 2.0 ** x, attrs={"scalar": "2"}),
    unary("block_grad", "block_grad", lambda x: x),
    unary("copy", "copy", lambda x: x),
    unary("negative", "negative", np.negative),
    unary("sigmoid", "sigmoid", lambda x: torch.sigmoid(t(x))),
    unary("tanh", "tanh", np.tanh),
    unary("exp", "exp", np.exp),
    unary("log", "log", np.log, x=POSITIVE),
    unary("sqrt", "sqrt", np.sqrt, x=POSITIVE),
    unary("floor", "floor", np.floor),
    unary("ceil", "ceil", np.ceil),
    unary("trunc", "trunc", np.trunc),
    unary("round", "round", np.round),
    unary("abs", "abs", np.abs),
    unary("clip", "clip", lambda x: np.clip(x, -1.0, 0.5), attrs={"a_min": "-1", "a_max": "0.5"}),
]

# ------------------------------------------------------------------------------------------------------- initializers
X = rand(2, 3)
INIT_ROWS = [
    Row("full", "full", {"shape": "(2, 3)", "fill_value": "2.5"}, [("x", X)], lambda: np.full((2, 3), 2.5, np.float32),
        args=(), keep=True),
    Row("full_int32", "full", {"shape": "(4,)", "dtype": "int32", "fill_value": "7"}, [("x", X)],
        lambda: np.full(4, 7, np.int32), args=(), keep=True, crashes=INTEGER_CONSTANT),
    Row("zeros", "zeros", {"shape": "(3, 1, 2)"}, [("x", X)], lambda: np.zeros((3, 1, 2), np.float32), args=(),
        keep=True),
    Row("ones", "ones", {"shape": "(2, 2)", "dtype": "float32"}, [("x", X)], lambda: np.ones((2, 2), np.float32),
        args=(), keep=True),
    Row("fill", "fill", {"shape": "(2,)", "value": "-1.5"}, [("x", X)], lambda: np.full(2, -1.5, np.float32),
        args=(), keep=True),
    unary("full_like", "full_like", lambda x: np.full_like(x, 0.25), attrs={"fill_value": "0.25"}, keep=True),
    unary("fill_like", "fill_like", lambda x: np.full_like(x, 3.0), attrs={"value": "3"}, keep=True),
    unary("zeros_like", "zeros_like", np.zeros_like, keep=True),
    unary("ones_like", "ones_like", np.ones_like, keep=True),
]

# ------------------------------------------------------------------------------------------------------- reductions
R = rand(2, 3, 4)
REDUCE_ROWS = [
    unary("sum", "sum", lambda x: x.sum(axis=1), x=R, attrs={"axis": "(1,)"}),
    unary("sum_keepdims", "sum", lambda x: x.sum(axis=(0, 2), keepdims=True), x=R,
          attrs={"axis": "(0, 2)", "keepdims": "True"}),
    unary("sum_exclude", "sum", lambda x: x.sum(axis=(0, 2)), x=R, attrs={"axis": "(1,)", "exclude": "True"}),
    unary("sum_exclude_no_axis", "sum", lambda x: x.sum().reshape(1), x=R, attrs={"exclude": "True"}),
    unary("max", "max", lambda x: x.max(axis=-1), x=R, attrs={"axis": "-1"}),
    unary("min", "min", lambda x: x.min().reshape(1), x=R),
    unary("mean", "mean", lambda x: x.mean(axis=(1, 2), keepdims=True), x=R,
          attrs={"axis": "(1, 2)", "keepdims": "1"}),
    unary("prod", "prod", lambda x: x.prod(axis=1), x=R, attrs={"axis": "(1,)"}),
    binary("collapse_sum", "collapse_sum", lambda a, b: a.sum(axis=0).sum(axis=1, keepdims=True), R, rand(3, 1)),
    unary("argmax", "argmax", lambda x: argreduce(x, (1,), False, True), x=R, attrs={"axis": "(1,)"}),
    unary("argmax_keepdims_float", "argmax",
          lambda x: argreduce(x, (2,), True, True).astype(np.float32), x=R,
          attrs={"axis": "(2,)", "keepdims": "True", "dtype": "float32"}),
    unary("argmax_all", "argmax", lambda x: argreduce(x, (0, 1, 2), False, True), x=R),
    unary("argmin_exclude", "argmin", lambda x: argreduce(x, (0, 2), False, False), x=R,
          attrs={"axis": "(1,)", "exclude": "True"}),
    unary("max_mask", "_max_mask", lambda x: truth(x == x.max(axis=1, keepdims=True)), x=TIES,
          attrs={"axis": "(1,)"}),
    unary("min_mask", "_min_mask", lambda x: truth(x == x.min()), x=TIES),
]

# ------------------------------------------------------------------------------------------------------- shapes
D = rand(3, 4, 5)
SHAPE_ROWS = [
    unary("flatten", "flatten", lambda x: x.reshape(2, 12)),
    Row("concatenate", "concatenate", {"axis": "1"}, [("a", A), ("b", rand(2, 1, 4)), ("c", rand(2, 2, 4))],
        lambda a, b, c: np.concatenate([a, b, c], 1)),
    Row("concat", "concat", {"axis": "-1"}, [("a", A), ("b", rand(2, 3, 2))], lambda a, b: np.concatenate([a, b], -1)),
    unary("expand_dims", "expand_dims", lambda x: x[:, None, None], attrs={"axis": "1", "num_newaxis": "2"}),
    unary("squeeze", "squeeze", lambda x: x.squeeze(1), x=rand(2, 1, 3, 1), attrs={"axis": "(1,)"}),
    unary("squeeze_all", "squeeze", lambda x: x.squeeze(), x=rand(2, 1, 3, 1)),
    unary("transpose", "transpose", lambda x: x.transpose(0, 2, 1), attrs={"axes": "(0, 2, 1)"}),
    unary("transpose_reversed", "transpose", lambda x: x.transpose()),
    unary("reshape", "reshape", lambda x: x.reshape(2, 12), attrs={"shape": "(0, -1)"}),
    unary("reshape_codes", "reshape", lambda x: x.reshape(1, 2, 3, 4), attrs={"shape": "(-4, 1, 2, -2)"}),
    unary("reshape_like_target", "reshape", lambda x: x.reshape(6, 4), attrs={"shape": "(-3, 4)"}),
    unary("split_sections", "split", lambda x: np.split(x, 3, axis=1), attrs={"indices_or_sections": "3"},
          outputs=3, heads=(0, 1, 2)),
    unary("split_indices", "split", lambda x: np.split(x, [1, 3], axis=2),
          attrs={"indices_or_sections": "(1, 3)", "axis": "2"}, outputs=3, heads=(0, 1, 2)),
    unary("cast_int32", "cast", lambda x: x.astype(np.int32), x=rand(2, 3, low=0.0, high=9.0),
          attrs={"dtype": "int32"}),
    unary("cast_float32", "cast", lambda x: x.astype(np.float32), x=ints(2, 3, high=9), attrs={"dtype": "float32"}),
    unary("strided_slice", "strided_slice", lambda x: x[0:2, 1:4:2], x=rand(2, 5, 6),
          attrs={"begin": "(0, 1)", "end": "(2, 4)", "stride": "(1, 2)"}),
    unary("strided_slice_reversed", "strided_slice", lambda x: x[3::-1], x=rand(4, 3),
          attrs={"begin": "(-1,)", "end": "(-5,)", "stride": "(-1,)"}),
    unary("strided_slice_short_begin", "strided_slice", lambda x: x[1:3, 0:4], x=rand(4, 6),
          attrs={"begin": "(1,)", "end": "(3, 4)"}),
    Row("take_flat", "take", {}, [("a", rand(3, 4)), ("i", np.array([[0, 11], [5, 7]], np.int32))],
        lambda a, i: a.reshape(-1)[i]),
    Row("take_axis_clipped", "take", {"axis": "1"}, [("a", rand(3, 4)), ("i", np.array([0, 5, -1, 2], np.int32))],
        lambda a, i: a[:, np.clip(i, 0, 3)]),
    Row("where", "where", {}, [("c", truth(MASK)), ("a", A), ("b", B)], lambda c, a, b: np.where(c != 0, a, b)),
    Row("where_rows", "where", {}, [("c", np.float32([1, 0])), ("a", A), ("b", B)],
        lambda c, a, b: np.where(c[:, None, None] != 0, a, b)),
    binary("matmul", "matmul", np.matmul, rand(3, 4), rand(4, 5)),
    binary("matmul_transposed", "matmul", lambda a, b: a.T @ b.T, rand(4, 3), rand(5, 4),
           attrs={"transpose_a": "True", "transpose_b": "True"}),
    binary("matmul_nd", "matmul", lambda a, b: np.tensordot(a, b, 1), rand(2, 3, 4), rand(4, 5, 2)),
    binary("matmul_nd_transposed", "matmul", lambda a, b: np.tensordot(a.transpose(), b, 1), rand(4, 3, 2),
           rand(4, 5), attrs={"transpose_a": "1"}),
    binary("matmul_vector", "matmul", lambda a, b: (a @ b)[None], rand(4), rand(4, 5)),
    unary("broadcast_to", "broadcast_to", lambda x: np.broadcast_to(x, (2, 3, 4)), x=rand(1, 3, 1),
          attrs={"shape": "(2, 0, 4)"}),
    binary("expand_like", "expand_like", lambda a, b: np.broadcast_to(a[:, None, None], (3, 4, 2)), rand(3),
           rand(3, 4, 2), attrs={"axis": "(1, 2)"}),
    binary("expand_like_exclude", "expand_like", lambda a, b: np.broadcast_to(a[None, :, None], (3, 4, 2)), rand(4),
           rand(3, 4, 2), attrs={"axis": "(1,)", "exclude": "True"}),
    binary("expand_like_same_rank", "expand_like", lambda a, b: np.broadcast_to(a, (3, 4, 2)), rand(1, 4, 1),
           rand(3, 4, 2)),
    binary("reshape_like", "reshape_like", lambda a, b: a.reshape(3, 4), rand(2, 6), rand(3, 4)),
    unary("flip", "flip", lambda x: x[::-1]),
    unary("flip_axis", "flip", lambda x: x[:, :, ::-1], attrs={"axis": "-1"}),
    binary("slice_like", "slice_like", lambda a, b: a[:2, :3], D, rand(2, 3)),
    binary("slice_like_axis", "slice_like", lambda a, b: a[:, :, :2], D, rand(1, 1, 2), attrs={"axis": "(-1,)"}),
    binary("slice_like_axes", "slice_like", lambda a, b: a[:, :3], D, rand(1, 3), attrs={"axes": "(1,)"}),
    Row("gather_nd", "gather_nd", {}, [("d", D), ("i", np.stack([ints(6, high=3), ints(6, high=4)]))],
        lambda d, i: d[i[0], i[1]]),
    Row("gather_nd_one_axis", "gather_nd", {}, [("d", D), ("i", ints(1, 2, 2, high=3))], lambda d, i: d[i[0]]),
    Row("gather_nd_all_axes", "gather_nd", {}, [("d", D), ("i", np.stack([ints(4, high=3), ints(4, high=4),
                                                                           ints(4, high=5)]))],
        lambda d, i: d[i[0], i[1], i[2]]),
    Row("assign", "_assign", {}, [("x", X)], lambda v, x: x, params={"v": rand(2, 3)}, args=("v", "x"),
        session=""),
]

# ------------------------------------------------------------------------------------------------------- vision
FEATURES = rand(1, 3, 3, 4)
VISION_ROWS = [
    unary("multibox_prior", "multibox_prior", lambda x: prior_twin(x, [1.0], [1.0]), x=FEATURES, keep=True),
    unary("multibox_prior_sizes_ratios_clip", "multibox_prior",
          lambda x: prior_twin(x, [0.5, 0.25], [1.0, 2.0, 0.5], (0.2, 0.3), (0.4, 0.6), True), x=FEATURES,
          attrs={"sizes": "(0.5, 0.25)", "ratios": "(1, 2, 0.5)", "steps": "(0.2, 0.3)", "offsets": "(0.4, 0.6)",
                 "clip": "True"}, keep=True),
    unary("yolo_reorg", "yolo_reorg", lambda x: reorg_twin(x, 2), x=rand(2, 8, 4, 6), attrs={"stride": "2"}),
    unary("yolo2_reorg", "yolo2_reorg", lambda x: reorg_twin(x, 3), x=rand(1, 9, 3, 6), attrs={"stride": "3"}),
    unary("yolo_region", "yolo_region", lambda x: region_twin(x, 2, 3, 4, 0, 1), x=rand(1, 16, 3, 2),
          attrs={"n": "2", "classes": "3", "coords": "4", "background": "0", "softmax": "1"}),
    unary("yolo2_region_background", "yolo2_region", lambda x: region_twin(x, 2, 3, 4, 1, 1), x=rand(1, 16, 2, 2),
          attrs={"n": "2", "classes": "3", "coords": "4", "background": "1", "softmax": "1"}),
    unary("yolo_region_no_softmax", "yolo_region", lambda x: region_twin(x, 1, 2, 4, 0, 0), x=rand(1, 7, 2, 3),
          attrs={"n": "1", "classes": "2", "coords": "4", "background": "0", "softmax": "0"}),
    unary("yolov3_yolo", "yolov3_yolo", lambda x: yolo_twin(x, 2, 2), x=rand(1, 14, 3, 3),
          attrs={"n": "2", "classes": "2"}),
]

ROWS = NN_ROWS + ELEMWISE_ROWS + INIT_ROWS + REDUCE_ROWS + SHAPE_ROWS + VISION_ROWS


# ------------------------------------------------------------------------------------------------------- refused
def refused(name: str, op: str, inputs: list[tuple[str, np.ndarray]], message: str, attrs: dict[str, str] | None = None,
            error: type[Exception] = NNEFUnsupportedError, **options: Any) -> Refused:
    return Refused(name, Row(name, op, attrs or {}, inputs, lambda *args: None, **options), error, message)


WINOGRAD = "Winograd-domain weights"
REFUSED = [
    refused("winograd_weight_transform", "_contrib_conv2d_winograd_weight_transform", [("w", rand(4, 3, 3, 3))],
            WINOGRAD, {"tile_size": "2"}),
    refused("winograd_conv", "_contrib_conv2d_winograd_without_weight_transform",
            [("x", X4), ("w", rand(4, 4, 4, 3))], WINOGRAD,
            {"channels": "4", "kernel_size": "(3, 3)", "tile_size": "2", "use_bias": "False"}),
    refused("winograd_nnpack_weight_transform", "_contrib_conv2d_winograd_nnpack_weight_transform",
            [("w", rand(4, 3, 3, 3))], WINOGRAD, {"convolution_algorithm": "1"}),
    refused("winograd_nnpack_conv", "_contrib_conv2d_winograd_nnpack_without_weight_transform",
            [("x", X4), ("w", rand(4, 3, 8, 8))], WINOGRAD,
            {"channels": "4", "kernel_size": "(3, 3)", "use_bias": "False"}),
    refused("conv2d_grad", "_conv2d_grad", [("g", rand(1, 4, 5, 5)), ("x", X4), ("w", rand(4, 3, 1, 1))],
            "gradient", {"channels": "4", "kernel_size": "(1, 1)"}),
    refused("max_pool2d_grad", "_max_pool2d_grad", [("g", rand(2, 3, 2, 2)), ("x", X4), ("y", rand(2, 3, 2, 2))],
            "gradient", {"pool_size": "(2, 2)", "strides": "(2, 2)"}),
    refused("lshift_scalar", "__lshift_scalar__", [("x", ints(2, 3, high=9))], "bit shifts", {"scalar": "2"}),
    refused("rshift_scalar", "__rshift_scalar__", [("x", ints(2, 3, high=9))], "bit shifts", {"scalar": "1"}),
    refused("broadcast_left_shift", "broadcast_left_shift", [("a", ints(2, 3, high=9)), ("b", ints(3, high=3))],
            "bit shifts"),
    refused("broadcast_right_shift", "broadcast_right_shift", [("a", ints(2, 3, high=9)), ("b", ints(3, high=3))],
            "bit shifts"),
    refused("left_shift_symbol", "__left_shift_symbol__", [("a", ints(3, high=9)), ("b", ints(3, high=3))],
            "bit shifts"),
    refused("right_shift_symbol", "__right_shift_symbol__", [("a", ints(3, high=9)), ("b", ints(3, high=3))],
            "bit shifts"),
    refused("undef", "__undef__", [("x", X)], "gradient that does not exist"),
    refused("multibox_transform_loc", "multibox_transform_loc",
            [("cls", rand(1, 3, 4)), ("loc", rand(1, 16)), ("anchor", rand(1, 4, 4))], "data-dependent",
            outputs=2),
    refused("non_max_suppression", "non_max_suppression", [("data", rand(1, 4, 6)), ("count", ints(1, high=4))],
            "data-dependent", {"iou_threshold": "0.5"}),
    refused("nms", "nms", [("data", rand(1, 4, 6)), ("count", ints(1, high=4))], "data-dependent",
            {"nms_threshold": "0.5"}),
    refused("conv2d_integer_out_dtype", "conv2d", [("x", X4)], "out_dtype int32",
            {"channels": "2", "kernel_size": "(1, 1)", "out_dtype": "int32", "use_bias": "False"},
            params={"w": rand(2, 3, 1, 1)}),
    refused("layout_transform_reblocking", "__layout_transform__", [("x", rand(1, 2, 3, 3, 4))],
            "changes the block of axis C", {"src_layout": "NCHW4c", "dst_layout": "NCHW8c"}),
    refused("elemwise_mod_integers", "elemwise_mod", [("a", ints(2, 3, high=9)), ("b", ints(2, 3, high=9) + 1)],
            "scalar tensors only"),
    refused("lrn_even_size", "lrn", [("x", X4)], "positive odd number", {"size": "4", "axis": "1"},
            error=ForeignFormatError),
]

# Every operator registered in src/top: dmlc/nnvm (its last commit) and TVM's nnvm/ (until its removal), aliases
# included; `fill`, `fill_like` (later full, full_like), `concat` (later concatenate), `nms` (later
# non_max_suppression), `yolo2_*` (later yolo_*), `yolo_region` and `yolov3_yolo` (later moved to TVM's darknet
# front end) were renamed or removed on the way.
NNVM_OPERATORS = (
    # nn/convolution.cc, nn/nn.cc, nn/pooling.cc, nn/upsampling.cc, image/resize.cc
    "conv2d", "_contrib_conv2d_NCHWc", "_contrib_conv2d_winograd_weight_transform",
    "_contrib_conv2d_winograd_without_weight_transform", "_contrib_conv2d_winograd_nnpack_weight_transform",
    "_contrib_conv2d_winograd_nnpack_without_weight_transform", "_conv2d_grad", "conv2d_transpose", "dense", "relu",
    "dropout", "batch_norm", "softmax", "log_softmax", "leaky_relu", "prelu", "pad", "__layout_transform__", "lrn",
    "l2_normalize", "max_pool2d", "_max_pool2d_grad", "avg_pool2d", "global_max_pool2d", "global_avg_pool2d",
    "upsampling", "resize",
    # tensor/broadcast.cc
    "broadcast_to", "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_mod",
    "broadcast_max", "broadcast_min", "broadcast_pow", "broadcast_left_shift", "broadcast_right_shift",
    "broadcast_greater", "broadcast_less", "broadcast_equal", "broadcast_not_equal", "broadcast_greater_equal",
    "broadcast_less_equal", "__add_symbol__", "__sub_symbol__", "__mul_symbol__", "__div_symbol__", "__mod_symbol__",
    "__max_symbol__", "__min_symbol__", "__pow_symbol__", "__left_shift_symbol__", "__right_shift_symbol__",
    "__greater_symbol__", "__less_symbol__", "__equal_symbol__", "__not_equal_symbol__", "__greater_equal_symbol__",
    "__less_equal_symbol__",
    # tensor/elemwise.cc
    "__undef__", "floor", "ceil", "trunc", "round", "abs", "sigmoid", "tanh", "exp", "log", "sqrt", "elemwise_add",
    "elemwise_sub", "elemwise_mul", "elemwise_div", "elemwise_mod", "elemwise_pow", "logical_and", "logical_or",
    "negative", "logical_not", "copy", "full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "fill",
    "fill_like", "__add_scalar__", "__sub_scalar__", "__rsub_scalar__", "__lshift_scalar__", "__rshift_scalar__",
    "__mul_scalar__", "__div_scalar__", "__rdiv_scalar__", "__pow_scalar__", "__rpow_scalar__", "elemwise_sum",
    "block_grad", "greater", "less", "_max_mask", "_min_mask", "clip",
    # tensor/matrix_op.cc, tensor/reduce.cc, tensor/state_op.cc
    "matmul", "sum", "max", "min", "collapse_sum", "argmax", "argmin", "mean", "prod", "_assign",
    # tensor/transform.cc
    "flatten", "concatenate", "concat", "expand_dims", "expand_like", "split", "cast", "reshape", "reshape_like",
    "squeeze", "transpose", "strided_slice", "flip", "take", "slice_like", "where", "gather_nd",
    # vision/
    "multibox_prior", "multibox_transform_loc", "non_max_suppression", "nms", "yolo_reorg", "yolo2_reorg",
    "yolo_region", "yolo2_region", "yolov3_yolo",
)
