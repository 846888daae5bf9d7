"""The single-operator fixtures: one small MXNet symbol per case, built with MXNet's symbol API, with its inputs.

This module imports MXNet: only the fixture generator (`make_fixtures.py`, run in MXNet's scratch venv) imports it,
never a test. Each case is registered with its operator family and a builder that takes the case's own
`RandomState` and returns the symbol, its inputs by name, and any parameter values the case fixes (the generator
draws the others at random). A few cases run with MKLDNN off (`MXNET_MKLDNN_ENABLED=0`): MXNet's MKLDNN kernels
refuse them, its reference kernels compute them (Deconvolution with `target_shape` needing padding, max and
average Pooling with the `same` convention).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mxnet as mx
import numpy as np


@dataclass
class Built:
    symbol: Any
    inputs: dict[str, np.ndarray]
    params: dict[str, np.ndarray] = field(default_factory=dict)  # fixed values; the rest are random
    unused: tuple[str, ...] = ()  # inputs MXNet binds but inference never reads (loss labels)


Builder = Callable[[np.random.RandomState], Built]
CASES: dict[str, tuple[str, Builder, bool]] = {}  # name -> (family, builder, whether MKLDNN may run it)


def case(name: str, family: str, build: Builder, mkldnn: bool = True) -> None:
    assert name not in CASES, name
    CASES[name] = (family, build, mkldnn)


def normal(rs: np.random.RandomState, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rs.standard_normal(shape) * scale).astype(np.float32)


def uniform(rs: np.random.RandomState, *shape: int, low: float, high: float) -> np.ndarray:
    return rs.uniform(low, high, shape).astype(np.float32)


def integers(rs: np.random.RandomState, *shape: int, low: int, high: int) -> np.ndarray:
    """Integer values in float32, as MXNet passes indices and as comparisons need to hit equality."""
    return rs.randint(low, high, shape).astype(np.float32)


def data(name: str = "data") -> Any:
    return mx.sym.var(name)


def one(family: str, name: str, shape: tuple[int, ...], make: Callable[[Any], Any], *, low: float | None = None,
        high: float | None = None, params: Callable[[np.random.RandomState], dict] | None = None,
        mkldnn: bool = True) -> None:
    """A case of one input `data` of `shape`: standard normals, or uniform in [low, high)."""
    def build(rs: np.random.RandomState) -> Built:
        x = normal(rs, *shape) if low is None else uniform(rs, *shape, low=low, high=high)
        return Built(make(data()), {"data": x}, params(rs) if params else {})
    case(name, family, build, mkldnn)


# Convolution and Deconvolution ------------------------------------------------------------------------------------

S = mx.sym
one("Convolution", "conv1d_stride_pad_dilate", (2, 3, 11),
    lambda x: S.Convolution(x, kernel=(3,), stride=(2,), pad=(1,), dilate=(2,), num_filter=4, name="conv"))
one("Convolution", "conv2d", (1, 3, 9, 8),
    lambda x: S.Convolution(x, kernel=(3, 2), stride=(2, 1), pad=(1, 0), dilate=(1, 2), num_filter=5, name="conv"))
one("Convolution", "conv2d_groups_no_bias", (1, 4, 7, 7),
    lambda x: S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_group=2, num_filter=6, no_bias=True, name="conv"))
one("Convolution", "conv2d_depthwise", (1, 4, 6, 6),
    lambda x: S.Convolution(x, kernel=(3, 3), stride=(2, 2), num_group=4, num_filter=8, name="conv"))
one("Convolution", "conv3d", (1, 2, 5, 6, 5),
    lambda x: S.Convolution(x, kernel=(2, 3, 3), stride=(1, 2, 1), pad=(1, 1, 0), dilate=(2, 1, 1), num_filter=3,
                            name="conv"))
one("Deconvolution", "deconv1d_adj", (1, 3, 5),
    lambda x: S.Deconvolution(x, kernel=(3,), stride=(2,), pad=(1,), adj=(1,), num_filter=2, no_bias=False,
                              name="deconv"))
one("Deconvolution", "deconv2d_dilate_bias", (1, 3, 4, 5),
    lambda x: S.Deconvolution(x, kernel=(3, 3), stride=(2, 2), pad=(1, 0), adj=(1, 0), dilate=(1, 2), num_filter=4,
                              no_bias=False, name="deconv"))
one("Deconvolution", "deconv2d_groups", (1, 4, 3, 4),
    lambda x: S.Deconvolution(x, kernel=(2, 2), stride=(2, 2), num_group=2, num_filter=6, name="deconv"))
one("Deconvolution", "deconv2d_target_shape", (1, 2, 4, 4),
    lambda x: S.Deconvolution(x, kernel=(3, 3), stride=(2, 2), target_shape=(8, 9), num_filter=3, name="deconv"),
    mkldnn=False)
one("Deconvolution", "deconv1d_target_shape_exact", (1, 2, 4),
    lambda x: S.Deconvolution(x, kernel=(3,), stride=(2,), target_shape=(9,), num_filter=3, name="deconv"))
one("Deconvolution", "deconv3d", (1, 2, 3, 3, 3),
    lambda x: S.Deconvolution(x, kernel=(2, 2, 2), stride=(2, 1, 2), pad=(0, 1, 0), num_filter=2, no_bias=False,
                              name="deconv"))

# FullyConnected ----------------------------------------------------------------------------------------------------

one("FullyConnected", "fc_flatten", (2, 3, 2, 2), lambda x: S.FullyConnected(x, num_hidden=5, name="fc"))
one("FullyConnected", "fc_no_flatten", (2, 3, 4), lambda x: S.FullyConnected(x, num_hidden=5, flatten=False,
                                                                             name="fc"))
one("FullyConnected", "fc_no_bias", (3, 6), lambda x: S.FullyConnected(x, num_hidden=4, no_bias=True, name="fc"))

# BatchNorm: gamma is 3, so that a reader that honours a fixed gamma wrongly is off by a factor of 3 ----------------


def _bn_params(count: int) -> Callable[[np.random.RandomState], dict]:
    def params(rs: np.random.RandomState) -> dict:
        return {"bn_gamma": np.full((count,), 3.0, np.float32), "bn_beta": normal(rs, count),
                "bn_moving_mean": normal(rs, count), "bn_moving_var": uniform(rs, count, low=0.5, high=2.0)}
    return params


one("BatchNorm", "bn_fix_gamma", (2, 3, 4, 4), lambda x: S.BatchNorm(x, name="bn"), params=_bn_params(3))
one("BatchNorm", "bn_no_fix_gamma", (2, 3, 4, 4), lambda x: S.BatchNorm(x, fix_gamma=False, name="bn"),
    params=_bn_params(3))
one("BatchNorm", "bn_use_global_stats", (2, 3, 4, 4),
    lambda x: S.BatchNorm(x, fix_gamma=False, use_global_stats=True, name="bn"), params=_bn_params(3))
one("BatchNorm", "bn_fix_gamma_global_stats", (2, 3, 4), lambda x: S.BatchNorm(x, use_global_stats=True, name="bn"),
    params=_bn_params(3))
one("BatchNorm", "bn_axis_last_eps", (2, 3, 4),
    lambda x: S.BatchNorm(x, axis=-1, eps=0.3, fix_gamma=False, name="bn"), params=_bn_params(4))
one("BatchNorm", "bn_output_mean_var", (2, 3, 4),
    lambda x: S.BatchNorm(x, fix_gamma=False, output_mean_var=True, name="bn"), params=_bn_params(3))
one("BatchNorm", "bn_2d_input", (5, 3), lambda x: S.BatchNorm(x, fix_gamma=False, eps=1e-5, name="bn"),
    params=_bn_params(3))

# Activation and LeakyReLU ------------------------------------------------------------------------------------------

for _kind in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
    one("Activation", f"act_{_kind}", (2, 3, 4), lambda x, k=_kind: S.Activation(x, act_type=k, name="act"),
        low=-4.0, high=4.0)
one("LeakyReLU", "leaky", (2, 3, 4), lambda x: S.LeakyReLU(x, act_type="leaky", slope=0.3, name="act"))
one("LeakyReLU", "prelu_channels", (2, 3, 4, 2), lambda x: S.LeakyReLU(x, act_type="prelu", name="act"),
    params=lambda rs: {"act_gamma": uniform(rs, 3, low=0.1, high=0.5)})
one("LeakyReLU", "prelu_shared", (2, 3, 4), lambda x: S.LeakyReLU(x, gamma=S.var("act_gamma", shape=(1,)),
                                                                  act_type="prelu", name="act"),
    params=lambda rs: {"act_gamma": np.array([0.2], np.float32)})
one("LeakyReLU", "elu", (2, 3, 4), lambda x: S.LeakyReLU(x, act_type="elu", slope=0.7, name="act"))
one("LeakyReLU", "selu", (2, 3, 4), lambda x: S.LeakyReLU(x, act_type="selu", name="act"))
one("LeakyReLU", "gelu", (2, 3, 4), lambda x: S.LeakyReLU(x, act_type="gelu", name="act"), low=-4.0, high=4.0)
one("LeakyReLU", "rrelu_inference", (2, 3, 4),
    lambda x: S.LeakyReLU(x, act_type="rrelu", lower_bound=0.2, upper_bound=0.4, name="act")[0])  # [1]: the mask,
# uninitialized memory at inference

# Pooling -----------------------------------------------------------------------------------------------------------

for _type in ("max", "avg", "sum", "lp"):
    for _convention in ("valid", "full"):
        for _include in ((True, False) if _type == "avg" else (None,)):
            _name = f"pool2d_{_type}_{_convention}" + ("" if _include is None else
                                                       "_include_pad" if _include else "_exclude_pad")
            _extra = {"p_value": 2} if _type == "lp" else {}
            if _include is not None:
                _extra["count_include_pad"] = _include
            one("Pooling", _name, (1, 2, 8, 7),
                lambda x, t=_type, c=_convention, e=_extra: S.Pooling(
                    x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type=t, pooling_convention=c, name="pool", **e))
    one("Pooling", f"pool2d_{_type}_global", (1, 3, 5, 4),
        lambda x, t=_type: S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type=t, name="pool",
                                     **({"p_value": 2} if t == "lp" else {})))
# `same` is 1-D only, and MXNet 1.9 reads three pad items whatever the kernel's rank: pad must be (0, 0, 0)
for _type in ("max", "avg", "sum", "lp"):
    one("Pooling", f"pool1d_{_type}_same", (1, 2, 9),
        lambda x, t=_type: S.Pooling(x, kernel=(3,), stride=(2,), pad=(0, 0, 0), pool_type=t, name="pool",
                                     pooling_convention="same", **({"p_value": 2} if t == "lp" else {})),
        mkldnn=_type not in ("max", "avg"))
one("Pooling", "pool1d_avg_same_exclude_pad", (1, 2, 10),
    lambda x: S.Pooling(x, kernel=(4,), stride=(3,), pad=(0, 0, 0), pool_type="avg", pooling_convention="same",
                        count_include_pad=False, name="pool"), mkldnn=False)
one("Pooling", "pool1d_lp1_full", (1, 2, 10), lambda x: S.Pooling(x, kernel=(3,), stride=(2,), pad=(1,),
                                                                  pool_type="lp", p_value=1,
                                                                  pooling_convention="full", name="pool"))
one("Pooling", "pool2d_lp3_full", (1, 2, 6, 7),
    lambda x: S.Pooling(x, kernel=(2, 3), stride=(2, 2), pad=(0, 1), pool_type="lp", p_value=3,
                        pooling_convention="full", name="pool"))
one("Pooling", "pool2d_lp1_global", (1, 3, 3, 4),
    lambda x: S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="lp", p_value=1, name="pool"))
one("Pooling", "pool3d_avg_full_exclude_pad", (1, 2, 4, 5, 4),
    lambda x: S.Pooling(x, kernel=(2, 3, 2), stride=(2, 2, 2), pad=(1, 1, 0), pool_type="avg",
                        pooling_convention="full", count_include_pad=False, name="pool"))
one("Pooling", "pool3d_max_valid", (1, 2, 4, 5, 4),
    lambda x: S.Pooling(x, kernel=(2, 2, 2), stride=(1, 2, 2), pool_type="max", name="pool"))
one("Pooling", "pool2d_avg_full_include_pad_overhang", (1, 1, 7, 7),
    lambda x: S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg", pooling_convention="full", name="pool"))

# Flatten and Concat -------------------------------------------------------------------------------------------------

one("Flatten", "flatten", (2, 3, 4, 2), lambda x: S.Flatten(x, name="flatten"))


def _concat(rs: np.random.RandomState) -> Built:
    shapes = {"a": (2, 1, 3), "b": (2, 2, 3), "c": (2, 4, 3)}
    return Built(S.Concat(*[data(n) for n in shapes], dim=1, name="concat"),
                 {n: normal(rs, *s) for n, s in shapes.items()})


def _concat_last(rs: np.random.RandomState) -> Built:
    return Built(S.concat(data("a"), data("b"), dim=-1, name="concat"), {"a": normal(rs, 2, 3), "b": normal(rs, 2, 2)})


case("concat_dim1", "Concat", _concat)
case("concat_last_axis", "Concat", _concat_last)

# elemwise_*, broadcast_* and _*_scalar -----------------------------------------------------------------------------


def binary(family: str, name: str, make: Callable[[Any, Any], Any], lhs: tuple[int, ...], rhs: tuple[int, ...],
           kind: str = "normal") -> None:
    def build(rs: np.random.RandomState) -> Built:
        if kind == "integers":  # equal items happen
            a, b = integers(rs, *lhs, low=-2, high=3), integers(rs, *rhs, low=-2, high=3)
        elif kind == "positive":
            a, b = uniform(rs, *lhs, low=0.5, high=2.0), normal(rs, *rhs)
        else:
            a, b = normal(rs, *lhs), normal(rs, *rhs)
            if kind == "divisor":
                b = np.where(np.abs(b) < 0.3, 0.3, b).astype(np.float32)
        return Built(make(data("lhs"), data("rhs")), {"lhs": a, "rhs": b})
    case(name, family, build)


for _op, _kind in (("add", "normal"), ("sub", "normal"), ("mul", "normal"), ("div", "divisor")):
    binary("elemwise", f"elemwise_{_op}", lambda a, b, o=_op: getattr(S, f"elemwise_{o}")(a, b, name="op"),
           (2, 3, 4), (2, 3, 4), _kind)
for _op, _kind in (("add", "normal"), ("sub", "normal"), ("mul", "normal"), ("div", "divisor"),
                   ("power", "positive"), ("maximum", "normal"), ("minimum", "normal"), ("equal", "integers"),
                   ("not_equal", "integers"), ("greater", "integers"), ("greater_equal", "integers"),
                   ("lesser", "integers"), ("lesser_equal", "integers")):
    binary("broadcast", f"broadcast_{_op}", lambda a, b, o=_op: getattr(S, f"broadcast_{o}")(a, b, name="op"),
           (2, 3, 4), (3, 1), _kind)
binary("broadcast", "broadcast_add_leading", lambda a, b: S.broadcast_add(a, b, name="op"), (1, 4), (3, 1, 1))

for _name, _make, _positive in (
        ("plus_scalar", lambda x: x + 1.5, False), ("minus_scalar", lambda x: x - 1.5, False),
        ("rminus_scalar", lambda x: 1.5 - x, False), ("mul_scalar", lambda x: x * 2.5, False),
        ("div_scalar", lambda x: x / 2.5, False), ("rdiv_scalar", lambda x: 2.5 / x, True),
        ("power_scalar", lambda x: x ** 1.5, True), ("rpower_scalar", lambda x: 2.0 ** x, False),
        ("maximum_scalar", lambda x: S.maximum(x, 0.3), False), ("minimum_scalar", lambda x: S.minimum(x, 0.3), False),
        ("equal_scalar", lambda x: x == 1, False), ("not_equal_scalar", lambda x: x != 1, False),
        ("greater_scalar", lambda x: x > 0, False), ("greater_equal_scalar", lambda x: x >= 1, False),
        ("lesser_scalar", lambda x: x < 0, False), ("lesser_equal_scalar", lambda x: x <= 1, False)):
    if "equal" in _name or "greater" in _name or "lesser" in _name:
        def _build(rs: np.random.RandomState, m: Callable = _make) -> Built:
            return Built(m(data()), {"data": integers(rs, 3, 4, low=-2, high=3)})
        case(_name, "scalar", _build)
    else:
        one("scalar", _name, (3, 4), _make, **({"low": 0.5, "high": 2.0} if _positive else {}))

one("elemwise unary", "unary_math", (3, 4), lambda x: S.Group([
    S.exp(x), S.sqrt(S.abs(x)), S.square(x), S.negative(x), S.sign(x), S.floor(x), S.ceil(x), S.round(x),
    S.sin(x), S.cos(x), S.tanh(x), S.sigmoid(x), S.relu(x), S.erf(x), S.fix(x), S.log(S.abs(x) + 0.5)]),
    low=-2.0, high=2.0)

# Reshape -----------------------------------------------------------------------------------------------------------

for _name, _shape, _target, _reverse in (
        ("reshape_copy_infer", (2, 3, 4), (0, -1), False),          # 0, -1
        ("reshape_merge_rest", (2, 3, 4, 5), (-3, -2), False),      # -3, -2
        ("reshape_keep_merge", (2, 3, 4, 5), (0, -3, 0), False),    # 0, -3
        ("reshape_split", (2, 6, 5), (0, -4, 2, -1, 0), False),     # -4 with -1 second
        ("reshape_split_infer_first", (2, 6, 5), (0, -4, -1, 3, -2), False),
        ("reshape_rest_first", (2, 3, 4), (-2,), False),
        ("reshape_positive", (2, 3, 4), (4, 6), False),
        ("reshape_reverse", (10, 5, 4), (-1, 0), True),
        ("reshape_reverse_infer", (2, 3, 4, 5), (0, -1, 0), True),
        ("reshape_reverse_split", (2, 12), (0, -1, 3, -4), True),  # reversed: -4 reads the two values before it
        ("reshape_reverse_split_inside", (6, 3, 2), (3, 2, -4, 0, 0), True)):
    one("Reshape", _name, _shape, lambda x, t=_target, r=_reverse: S.Reshape(x, shape=t, reverse=r, name="reshape"))

# transpose, expand_dims, squeeze, SliceChannel, slice, slice_axis ---------------------------------------------------

one("transpose", "transpose_axes", (2, 3, 4, 5), lambda x: S.transpose(x, axes=(0, 2, 3, 1), name="t"))
one("transpose", "transpose_default", (2, 3, 4), lambda x: S.transpose(x, name="t"))
one("expand_dims", "expand_dims_1", (2, 3), lambda x: S.expand_dims(x, axis=1, name="e"))
one("expand_dims", "expand_dims_last", (2, 3), lambda x: S.expand_dims(x, axis=-1, name="e"))
one("squeeze", "squeeze_axes", (2, 1, 3, 1), lambda x: S.squeeze(x, axis=(1, 3), name="s"))
one("squeeze", "squeeze_all_ones", (1, 3, 1), lambda x: S.squeeze(x, name="s"))
one("squeeze", "squeeze_negative_axis", (2, 3, 1), lambda x: S.squeeze(x, axis=-1, name="s"))
one("SliceChannel", "slice_channel", (2, 6, 3), lambda x: S.SliceChannel(x, num_outputs=3, name="split"))
one("SliceChannel", "slice_channel_squeeze_axis", (2, 3, 4),
    lambda x: S.SliceChannel(x, num_outputs=3, axis=1, squeeze_axis=True, name="split"))
one("SliceChannel", "slice_channel_last_axis", (2, 3, 4), lambda x: S.split(x, num_outputs=2, axis=-1, name="split"))
one("slice", "slice_begin_end", (4, 5, 6), lambda x: S.slice(x, begin=(1, 0, 2), end=(3, 5, 6), name="s"))
one("slice", "slice_none_negative", (4, 5, 6), lambda x: S.slice(x, begin=(None, -3), end=(None, -1), name="s"))
one("slice", "slice_steps", (5, 6, 3),
    lambda x: S.slice(x, begin=(None, 4), end=(None, None), step=(2, -2), name="s"))
one("slice", "slice_negative_step_to_start", (6, 4),
    lambda x: S.slice(x, begin=(4,), end=(None,), step=(-1,), name="s"))
one("slice_axis", "slice_axis_1", (3, 5, 2), lambda x: S.slice_axis(x, axis=1, begin=1, end=3, name="s"))
one("slice_axis", "slice_axis_negative_open_end", (3, 5, 4),
    lambda x: S.slice_axis(x, axis=-1, begin=-3, end=None, name="s"))

# softmax and friends -----------------------------------------------------------------------------------------------

one("softmax", "softmax_last", (2, 3, 4), lambda x: S.softmax(x, name="sm"), low=-3.0, high=3.0)
one("softmax", "softmax_axis1_temperature", (2, 3, 4), lambda x: S.softmax(x, axis=1, temperature=2.5, name="sm"))
one("log_softmax", "log_softmax_axis1", (2, 3, 4), lambda x: S.log_softmax(x, axis=1, name="sm"))
one("log_softmax", "log_softmax_last", (3, 5), lambda x: S.log_softmax(x, name="sm"))


def softmax_output(name: str, shape: tuple[int, ...], label: tuple[int, ...], mkldnn: bool = True,
                   **attrs: Any) -> None:
    def build(rs: np.random.RandomState) -> Built:
        symbol = S.SoftmaxOutput(data(), data("label"), name="softmax", **attrs)
        return Built(symbol, {"data": normal(rs, *shape), "label": integers(rs, *label, low=0, high=shape[1])},
                     unused=("label",))
    case(name, "SoftmaxOutput", build, mkldnn)


softmax_output("softmax_output", (3, 5), (3,))
softmax_output("softmax_output_4d", (2, 3, 2, 2), (2, 3, 2))  # MKLDNN: softmax over the last axis
softmax_output("softmax_output_4d_no_mkldnn", (2, 3, 2, 2), (2, 3, 2), mkldnn=False)  # over all but the first
softmax_output("softmax_output_multi_output", (2, 4, 3), (2, 3), multi_output=True)
softmax_output("softmax_output_preserve_shape", (2, 3, 4), (2, 3), preserve_shape=True)
one("SoftmaxActivation", "softmax_activation_instance", (2, 3, 2, 2), lambda x: S.SoftmaxActivation(x, name="sm"))
one("SoftmaxActivation", "softmax_activation_channel", (2, 3, 2, 2),
    lambda x: S.SoftmaxActivation(x, mode="channel", name="sm"))

# Dropout, LRN, Embedding, normalizations, clip ----------------------------------------------------------------------

one("Dropout", "dropout", (3, 4), lambda x: S.Dropout(x, p=0.5, name="drop"))
one("Dropout", "dropout_axes", (2, 3, 4), lambda x: S.Dropout(x, p=0.3, axes=(1,), name="drop"))
one("LRN", "lrn", (1, 5, 3, 3), lambda x: S.LRN(x, nsize=3, alpha=0.01, beta=0.75, knorm=2.0, name="lrn"))
one("LRN", "lrn_nsize5", (2, 7, 2, 2), lambda x: S.LRN(x, nsize=5, alpha=0.3, beta=0.5, knorm=1.0, name="lrn"),
    low=-3.0, high=3.0)


def _embedding(rs: np.random.RandomState) -> Built:
    indices = np.array([[0, 4, 2], [7, -1, 1.6]], np.float32)  # out of range and fractional ones too
    return Built(S.Embedding(data(), input_dim=5, output_dim=4, name="embed"), {"data": indices})


case("embedding", "Embedding", _embedding)
one("LayerNorm", "layer_norm_last", (2, 3, 4), lambda x: S.LayerNorm(x, name="ln"),
    params=lambda rs: {"ln_gamma": uniform(rs, 4, low=0.5, high=2.0), "ln_beta": normal(rs, 4)})
one("LayerNorm", "layer_norm_axis1_eps", (2, 3, 4), lambda x: S.LayerNorm(x, axis=1, eps=0.1, name="ln"),
    params=lambda rs: {"ln_gamma": uniform(rs, 3, low=0.5, high=2.0), "ln_beta": normal(rs, 3)})
one("LayerNorm", "layer_norm_output_mean_var", (2, 3, 4), lambda x: S.LayerNorm(x, output_mean_var=True, name="ln"))
one("InstanceNorm", "instance_norm", (2, 3, 4, 4), lambda x: S.InstanceNorm(x, name="in"),
    params=lambda rs: {"in_gamma": uniform(rs, 3, low=0.5, high=2.0), "in_beta": normal(rs, 3)})
one("InstanceNorm", "instance_norm_1d_eps", (2, 3, 5), lambda x: S.InstanceNorm(x, eps=0.5, name="in"))
for _mode in ("instance", "channel", "spatial"):
    one("L2Normalization", f"l2_normalization_{_mode}", (2, 3, 2, 2),
        lambda x, m=_mode: S.L2Normalization(x, mode=m, eps=1e-3, name="l2"))
one("clip", "clip", (3, 4), lambda x: S.clip(x, a_min=-0.5, a_max=0.7, name="clip"))

# reductions --------------------------------------------------------------------------------------------------------

for _name, _op, _attrs in (
        ("sum_axis1", "sum", {"axis": 1}), ("sum_axes_keepdims", "sum", {"axis": (0, 2), "keepdims": True}),
        ("sum_all", "sum", {}), ("mean_exclude", "mean", {"axis": 1, "exclude": True}),
        ("mean_keepdims", "mean", {"axis": -1, "keepdims": True}), ("max_axis_last", "max", {"axis": -1}),
        ("max_exclude_keepdims", "max", {"axis": (0,), "exclude": True, "keepdims": True}),
        ("min_all_keepdims", "min", {"keepdims": True}), ("min_axis0", "min", {"axis": 0}),
        ("prod_axis1", "prod", {"axis": 1}), ("prod_exclude", "prod", {"axis": 1, "exclude": True}),
        ("prod_keepdims", "prod", {"axis": (0, 2), "keepdims": True}),
        ("sum_exclude_keepdims", "sum", {"axis": -1, "exclude": True, "keepdims": True})):
    one("reduce", _name, (2, 3, 4), lambda x, o=_op, a=_attrs: getattr(S, o)(x, name="r", **a),
        low=-1.5 if _op == "prod" else None, high=1.5 if _op == "prod" else None)

# dot and batch_dot -------------------------------------------------------------------------------------------------

for _name, _op, _lhs, _rhs, _flags in (
        ("dot_2d", "dot", (3, 4), (4, 5), {}), ("dot_transpose_a", "dot", (4, 3), (4, 5), {"transpose_a": True}),
        ("dot_transpose_b", "dot", (3, 4), (5, 4), {"transpose_b": True}),
        ("dot_transpose_both", "dot", (4, 3), (5, 4), {"transpose_a": True, "transpose_b": True}),
        ("dot_nd", "dot", (2, 3, 4), (4, 5), {}), ("dot_nd_transpose_b", "dot", (2, 3, 4), (5, 4), {"transpose_b": True}),
        ("dot_nd_transpose_a", "dot", (4, 3, 2), (4, 5), {"transpose_a": True}),
        ("dot_nd_both_transposed", "dot", (4, 3, 2), (5, 6, 4), {"transpose_a": True, "transpose_b": True}),
        ("dot_nd_nd", "dot", (2, 3, 4), (4, 2, 3), {}),
        ("dot_vector_matrix", "dot", (4,), (4, 3), {}), ("dot_vectors", "dot", (4,), (4,), {}),
        ("batch_dot", "batch_dot", (2, 3, 4), (2, 4, 5), {}),
        ("batch_dot_transpose_a", "batch_dot", (2, 4, 3), (2, 4, 5), {"transpose_a": True}),
        ("batch_dot_transpose_b", "batch_dot", (2, 3, 4), (2, 5, 4), {"transpose_b": True}),
        ("batch_dot_transpose_both", "batch_dot", (2, 4, 3), (2, 5, 4), {"transpose_a": True, "transpose_b": True})):
    binary("dot", _name, lambda a, b, o=_op, f=_flags: getattr(S, o)(a, b, name="dot", **f), _lhs, _rhs)

# UpSampling, Pad, Cast, where, take, one_hot, arange, zeros_like, ones_like, BlockGrad, _copy ----------------------

one("UpSampling", "upsampling_nearest", (1, 2, 3, 3), lambda x: S.UpSampling(x, scale=2, sample_type="nearest",
                                                                              name="up"))


def upsampling_multi(mode: str, second: tuple[int, ...]) -> Builder:
    def build(rs: np.random.RandomState) -> Built:
        symbol = S.UpSampling(data("a"), data("b"), scale=2, sample_type="nearest", num_args=2,
                              multi_input_mode=mode, name="up")
        return Built(symbol, {"a": normal(rs, 1, 2, 4, 4), "b": normal(rs, *second)})
    return build


case("upsampling_concat", "UpSampling", upsampling_multi("concat", (1, 3, 2, 2)))
case("upsampling_sum", "UpSampling", upsampling_multi("sum", (1, 2, 2, 2)))
for _mode in ("constant", "edge", "reflect"):
    one("Pad", f"pad_{_mode}", (1, 2, 3, 4),
        lambda x, m=_mode: S.Pad(x, mode=m, pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=1.5, name="pad"))
one("Pad", "pad_5d", (1, 1, 2, 3, 2), lambda x: S.Pad(x, mode="edge", pad_width=(0, 0, 0, 0, 1, 0, 0, 1, 2, 1),
                                                      name="pad"))
one("Cast", "cast_int32", (3, 4), lambda x: S.Cast(x * 3, dtype="int32", name="cast"))
one("Cast", "cast_int32_float32", (3, 4), lambda x: S.Cast(S.Cast(x * 3, dtype="int32"), dtype="float32",
                                                           name="cast"))
one("Cast", "cast_float64", (3, 4), lambda x: S.Cast(x, dtype="float64", name="cast"))


def _where(rs: np.random.RandomState) -> Built:
    condition = np.array([[0, 1, 2], [-1, 0, 0.5]], np.float32)
    return Built(S.where(data("condition"), data("x"), data("y"), name="where"),
                 {"condition": condition, "x": normal(rs, 2, 3), "y": normal(rs, 2, 3)})


def _where_rows(rs: np.random.RandomState) -> Built:
    return Built(S.where(data("condition"), data("x"), data("y"), name="where"),
                 {"condition": np.array([1, 0, 3], np.float32), "x": normal(rs, 3, 2), "y": normal(rs, 3, 2)})


case("where", "where", _where)
case("where_vector_condition", "where", _where_rows)


def take(name: str, indices: list, **attrs: Any) -> None:
    def build(rs: np.random.RandomState) -> Built:
        return Built(S.take(data(), data("indices"), name="take", **attrs),
                     {"data": normal(rs, 4, 3), "indices": np.array(indices, np.float32)})
    case(name, "take", build)


take("take_clip", [[0, 3, 5], [-1, 1.7, 2]])
take("take_wrap_axis1", [4, -1, 2, -5], axis=1, mode="wrap")


def one_hot(name: str, indices: np.ndarray, **attrs: Any) -> None:
    def build(rs: np.random.RandomState) -> Built:
        return Built(S.one_hot(data("indices"), depth=4, name="oh", **attrs), {"indices": indices})
    case(name, "one_hot", build)


one_hot("one_hot_on_off", np.array([[0, 1, 3], [2, 2, 0]], np.float32), on_value=2.0, off_value=-1.0)
one_hot("one_hot_out_of_range", np.array([0, 3, 5, -1, 2], np.float32))
one("arange", "arange_repeat", (8,), lambda x: x + S.arange(start=1, stop=7, step=1.5, repeat=2, name="range"))
one("arange", "arange_stop_only", (2, 5), lambda x: S.broadcast_mul(x, S.arange(5, name="range")))
one("zeros_like", "zeros_like", (2, 3), lambda x: S.zeros_like(x, name="z") + x)
one("ones_like", "ones_like", (2, 3), lambda x: S.ones_like(x, name="o"))
one("BlockGrad", "block_grad", (2, 3), lambda x: S.BlockGrad(x * 2, name="bg"))
one("_copy", "copy", (2, 3), lambda x: S.identity(x + 1, name="copy"))
