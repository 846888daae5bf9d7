"""The rows of the single-op export test: one torch operation (or small module) each, with its example inputs and
the consumers that cannot run it, with the reason.

`skip` maps a consumer ("khronos", "tract", "nnef_torch") to why it legitimately fails on that row; the test
asserts the failure is real, so a skip that is no longer needed is noticed. `crashes` names consumers that are not
run at all, because they kill the process. Rows marked `extra` exercise rules the other rows already reach and run
only when NNEF_TORCH_ALL_OPS=1 (each export costs about half a second of torch.export).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

_GEN = torch.Generator().manual_seed(1234)

NO_CAST = "tract's standard NNEF has no `cast`"
NO_CONSTANT = "tract's standard NNEF has no `constant`"
NO_GATHER = "tract's standard NNEF has no `gather`"
NO_REPLICATE = "tract's `pad` has no `replicate` border"
STRIDED_SLICE = "tract's optimizer rejects a strided slice of a reshaped tensor (declutter: Invalid axis)"
SELECT_CRASH = ("the Khronos executor segfaults on `select` with a literal operand when the condition is broadcast "
                "(it reads the shape of the rank-0 literal)")


class Fn(nn.Module):
    """A module that applies one function to its inputs."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(*inputs)


@dataclass(frozen=True)
class Row:
    name: str
    module: nn.Module
    inputs: tuple[Any, ...]
    skip: dict[str, str] = field(default_factory=dict)
    rtol: float = 1e-5
    crashes: dict[str, str] = field(default_factory=dict)  # consumers not run at all: they kill the process
    extra: bool = False  # run only with NNEF_TORCH_ALL_OPS=1: more of the same rules, kept out of the quick suite


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def positive(*shape: int, low: float = 0.5, high: float = 3.0) -> torch.Tensor:
    return low + (high - low) * torch.rand(*shape, generator=_GEN)


def uniform(*shape: int, low: float, high: float) -> torch.Tensor:
    return low + (high - low) * torch.rand(*shape, generator=_GEN)


def ints(*shape: int, low: int = -5, high: int = 6) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=_GEN)


def bools(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=_GEN) > 0.5


def halves(*shape: int) -> torch.Tensor:
    """Values k + 0.5 (both parities, both signs) mixed with other values, to test rounding of halves."""
    values = torch.arange(-4.5, 4.6, 1.0)
    picked = values[torch.randint(0, len(values), shape, generator=_GEN)]
    return torch.where(torch.rand(*shape, generator=_GEN) > 0.3, picked, randn(*shape) * 3)


def row(name: str, fn: Callable[..., Any] | nn.Module, *inputs: Any, skip: dict[str, str] | None = None,
        rtol: float = 1e-5, crashes: dict[str, str] | None = None, extra: bool = False, train: bool = False) -> Row:
    """A row; the module is put in eval mode unless `train`."""
    module = fn if isinstance(fn, nn.Module) else Fn(fn)
    return Row(name, module.train(train), inputs, dict(skip or {}), rtol, dict(crashes or {}), extra)


def with_weight(module: nn.Module, **values: torch.Tensor) -> nn.Module:
    with torch.no_grad():
        for key, value in values.items():
            getattr(module, key).copy_(value)
    return module


def arithmetic() -> list[Row]:
    return [
        row("add", torch.add, randn(2, 3), randn(2, 3)),
        row("add_broadcast_rank3_rank1", torch.add, randn(2, 3, 4), randn(4), extra=True),
        row("add_broadcast_rank3_rank2", torch.add, randn(2, 3, 4), randn(3, 1)),
        row("add_broadcast_rank1_rank3", torch.add, randn(4), randn(2, 3, 4)),
        row("add_alpha", lambda x, y: torch.add(x, y, alpha=2.5), randn(2, 3), randn(3)),
        row("add_scalar", lambda x: x + 1.5, randn(2, 3), extra=True),
        row("sub", torch.sub, randn(3, 1), randn(1, 4)),
        row("sub_alpha", lambda x, y: torch.sub(x, y, alpha=0.5), randn(2, 3), randn(2, 3), extra=True),
        row("rsub_scalar", lambda x: 1.0 - x, randn(2, 3)),
        row("mul_broadcast", torch.mul, randn(2, 1, 4), randn(3, 1)),
        row("mul_scalar", lambda x: x * 3.0, randn(2, 3), extra=True),
        row("div", torch.div, randn(2, 3), positive(2, 3), extra=True),
        row("div_broadcast", torch.div, randn(2, 3, 4), positive(4)),
        row("div_scalar", lambda x: x / 4.0, randn(2, 3), extra=True),
        row("rdiv_scalar", lambda x: 2.0 / x, positive(2, 3)),
        row("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), randn(3, 4) * 4, positive(3, 4)),
        row("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), randn(3, 4) * 4, positive(3, 4),
            extra=True),
        row("floor_divide", torch.floor_divide, randn(3, 4) * 4, positive(3, 4), extra=True),
        row("remainder_scalar", lambda x: torch.remainder(x, 1.5), randn(3, 4) * 4, extra=True),
        row("fmod_scalar", lambda x: torch.fmod(x, 1.5), randn(3, 4) * 4, extra=True),
        row("remainder_tensor", torch.remainder, randn(3, 4) * 4, torch.tensor([1.5, -1.25, 2.0, -0.75]),
            extra=True),
        row("fmod_tensor", torch.fmod, randn(3, 4) * 4, torch.tensor([1.5, -1.25, 2.0, -0.75])),
        row("remainder_int", lambda x: x % 3, ints(3, 4, low=-9, high=10), skip={"tract": NO_CAST}),
        row("neg", torch.neg, randn(2, 3), extra=True),
        row("square", torch.square, randn(2, 3), extra=True),
        row("pow_2", lambda x: x ** 2, randn(2, 3)),
        row("pow_3", lambda x: x ** 3, randn(2, 3), extra=True),
        row("pow_half", lambda x: x ** 0.5, positive(2, 3)),
        row("pow_minus_one", lambda x: x ** -1, positive(2, 3)),
        row("pow_minus_two", lambda x: x ** -2, positive(2, 3)),
        row("pow_int", lambda x: x ** 2, ints(2, 3), skip={"tract": NO_CAST}),
        row("pow_minus_half", lambda x: x ** -0.5, positive(2, 3), extra=True),
        row("pow_one", lambda x: x ** 1, randn(2, 3), extra=True),
        row("pow_tensor_tensor", torch.pow, positive(2, 3), randn(2, 3), extra=True),
        row("pow_tensor_broadcast", torch.pow, positive(2, 3, 4), randn(4)),
        row("pow_scalar_base", lambda x: 2.0 ** x, randn(2, 3)),
        row("maximum", torch.maximum, randn(2, 3), randn(3)),
        row("minimum", torch.minimum, randn(2, 1), randn(2, 3), extra=True),
        row("add_int", torch.add, ints(2, 3), ints(2, 3), skip={"tract": NO_CAST}),
        row("mul_int_scalar", lambda x: x * 3, ints(2, 3), skip={"tract": NO_CAST}, extra=True),
        row("div_int", torch.div, ints(2, 3), ints(2, 3, low=1, high=5), skip={"tract": NO_CAST}),
        row("add_int_float", torch.add, ints(2, 3), randn(2, 3), skip={"tract": NO_CAST}),
        row("bool_times_float", torch.mul, bools(2, 3), randn(2, 3), skip={"tract": NO_CAST}),
        row("bool_plus_bool", torch.add, bools(2, 3), bools(2, 3), extra=True),
        row("abs_int", torch.abs, ints(2, 3), skip={"tract": NO_CAST}),
        row("neg_int", torch.neg, ints(2, 3), skip={"tract": NO_CAST}, extra=True),
        row("atan2", torch.atan2, randn(3, 4), randn(4)),
        row("hypot", torch.hypot, randn(3, 4), randn(3, 4), extra=True),
        row("lerp", lambda a, b: torch.lerp(a, b, 0.3), randn(3, 4), randn(3, 4), skip={"tract": NO_CONSTANT},
            extra=True),
        row("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), randn(3, 4), randn(3, 4), randn(4),
            extra=True),
        row("logaddexp", torch.logaddexp, randn(3, 4), randn(3, 4), extra=True),
    ]


def comparisons() -> list[Row]:
    return [
        row("lt", torch.lt, randn(2, 3), randn(2, 3), extra=True),
        row("gt_broadcast", torch.gt, randn(2, 3, 4), randn(4)),
        row("le_scalar", lambda x: x <= 0.25, randn(3, 4), extra=True),
        row("ge_scalar", lambda x: x >= -0.25, randn(3, 4), extra=True),
        row("eq", torch.eq, ints(3, 4, low=0, high=3).float(), ints(3, 4, low=0, high=3).float(), extra=True),
        row("ne_scalar", lambda x: x != 1.0, ints(3, 4, low=0, high=3).float()),
        row("lt_int", torch.lt, ints(3, 4), ints(3, 4), skip={"tract": NO_CAST}),
        row("eq_bool", torch.eq, bools(3, 4), bools(3, 4)),
        row("ne_bool", torch.ne, bools(3, 4), bools(3, 4), extra=True),
        row("logical_and", torch.logical_and, bools(3, 4), bools(3, 4)),
        row("logical_or", torch.logical_or, bools(3, 4), bools(4)),
        row("logical_not", torch.logical_not, bools(3, 4)),
        row("logical_xor", torch.logical_xor, bools(3, 4), bools(3, 4)),
        row("logical_not_int", torch.logical_not, ints(3, 4, low=-1, high=2), skip={"tract": NO_CAST}, extra=True),
        row("isnan", torch.isnan, torch.tensor([[0.0, float("nan"), -1.0], [float("nan"), 2.0, 3.0]])),
        row("bitwise_and_bool", lambda x, y: x & y, bools(3, 4), bools(3, 4), extra=True),
        row("bitwise_or_bool", lambda x, y: x | y, bools(3, 4), bools(3, 4), extra=True),
        row("bitwise_not_bool", lambda x: ~x, bools(3, 4), extra=True),
        row("where", lambda c, x, y: torch.where(c, x, y), bools(2, 3), randn(2, 3), randn(2, 3), extra=True),
        row("where_broadcast_ranks", lambda c, x, y: torch.where(c, x, y), bools(3, 4), randn(2, 3, 4), randn(4)),
        row("where_scalars", lambda x: torch.where(x > 0, x, 0.5), randn(2, 3)),
        row("where_scalar_self", lambda x: torch.where(x > 0, -1.0, x), randn(2, 3), extra=True),
        row("masked_fill", lambda x, m: x.masked_fill(m, -2.0), randn(2, 3, 4), bools(2, 3, 4)),
        row("masked_fill_broadcast_mask", lambda x, m: x.masked_fill(m, -2.0), randn(2, 3, 4), bools(3, 4),
            crashes={"khronos": SELECT_CRASH}),
        row("clamp", lambda x: torch.clamp(x, -0.5, 0.75), randn(3, 4)),
        row("clamp_min", lambda x: torch.clamp(x, min=-0.5), randn(3, 4)),
        row("clamp_max", lambda x: torch.clamp(x, max=0.5), randn(3, 4), extra=True),
        row("clamp_tensor", lambda x, lo, hi: torch.clamp(x, lo, hi), randn(2, 3, 4), -positive(4), positive(3, 1)),
        row("clamp_int", lambda x: x.clamp(-2, 3), ints(3, 4), skip={"tract": NO_CAST}, extra=True),
        row("hardtanh", F.hardtanh, randn(3, 4) * 2, extra=True),
        row("hardtanh_range", nn.Hardtanh(-0.5, 2.0), randn(3, 4) * 2),
        row("relu6", F.relu6, randn(3, 4) * 5),
    ]


def activations() -> list[Row]:
    x = randn(2, 3, 4) * 3
    return [
        row("relu", torch.relu, x),
        row("sigmoid", torch.sigmoid, x),
        row("tanh", torch.tanh, x),
        row("gelu", nn.GELU(), x),
        row("gelu_tanh", nn.GELU(approximate="tanh"), x),
        row("silu", F.silu, x, skip={"tract": "tract has no standard `silu`"}),
        row("elu", nn.ELU(), x),
        row("elu_alpha", nn.ELU(alpha=0.7), x, skip={"tract": "tract's `elu` ignores `alpha` (computes alpha = 1)"}),
        row("selu", nn.SELU(), x, skip={"tract": "tract has no standard `selu`"}),
        row("celu", nn.CELU(alpha=1.5), x),
        row("leaky_relu", nn.LeakyReLU(0.2), x),
        row("prelu_shared", with_weight(nn.PReLU(), weight=torch.tensor([0.3])), randn(2, 3, 4, 4), extra=True),
        row("prelu_per_channel", with_weight(nn.PReLU(3), weight=torch.tensor([0.1, -0.2, 0.5])),
            randn(2, 3, 4, 4)),
        row("softplus", nn.Softplus(), x, extra=True),
        row("softplus_beta", nn.Softplus(beta=2.0), x),
        row("hardswish", nn.Hardswish(), x),
        row("hardsigmoid", nn.Hardsigmoid(), x),
        row("mish", nn.Mish(), x),
        row("softsign", nn.Softsign(), x),
        row("logsigmoid", nn.LogSigmoid(), x),
        row("tanhshrink", nn.Tanhshrink(), x, extra=True),
        row("hardshrink", nn.Hardshrink(0.5), x, extra=True),
        row("softshrink", nn.Softshrink(0.5), x),
        row("threshold", nn.Threshold(0.1, -1.0), x, extra=True),
        row("glu", nn.GLU(dim=-1), x),
        row("softmax_last", nn.Softmax(dim=-1), x),
        row("softmax_first", nn.Softmax(dim=0), x, extra=True),
        row("softmax_middle", nn.Softmax(dim=1), x),
        row("log_softmax_last", nn.LogSoftmax(dim=-1), x, extra=True),
        row("log_softmax_middle", nn.LogSoftmax(dim=1), x),
    ]


def unary() -> list[Row]:
    x = randn(3, 4)
    p = positive(3, 4)
    unit = uniform(3, 4, low=-0.9, high=0.9)
    return [
        row("exp", torch.exp, x),
        row("exp2", torch.exp2, x),
        row("expm1", torch.expm1, x, extra=True),
        row("log", torch.log, p),
        row("log1p", torch.log1p, p),
        row("log2", torch.log2, p),
        row("log10", torch.log10, p, extra=True),
        row("sqrt", torch.sqrt, p),
        row("rsqrt", torch.rsqrt, p, extra=True),
        row("reciprocal", torch.reciprocal, p),
        row("abs", torch.abs, x),
        row("sign", torch.sign, torch.cat([x, torch.zeros(1, 4)])),
        row("floor", torch.floor, x * 3),
        row("ceil", torch.ceil, x * 3),
        row("round_halves", torch.round, halves(4, 5)),
        row("round_decimals", lambda v: torch.round(v, decimals=2), randn(3, 4)),
        row("trunc", torch.trunc, x * 3),
        row("frac", torch.frac, x * 3, extra=True),
        row("erf", torch.erf, x * 2),
        row("sin", torch.sin, x, extra=True),
        row("cos", torch.cos, x),
        row("tan", torch.tan, unit),
        row("asin", torch.asin, unit, extra=True),
        row("acos", torch.acos, unit),
        row("atan", torch.atan, x, extra=True),
        row("sinh", torch.sinh, x, extra=True),
        row("cosh", torch.cosh, x, extra=True),
        row("asinh", torch.asinh, x, extra=True),
        row("acosh", torch.acosh, p + 1.0, extra=True),
        row("atanh", torch.atanh, unit),
    ]


def reductions() -> list[Row]:
    x = randn(2, 3, 4)
    return [
        row("sum_all", torch.sum, x, extra=True),
        row("sum_dim", lambda v: v.sum(1), x, extra=True),
        row("sum_dims_keepdim", lambda v: v.sum((0, 2), keepdim=True), x),
        row("sum_int", lambda v: v.sum(-1), ints(3, 4), skip={"tract": NO_CAST}),
        row("sum_bool", lambda b: b.sum(-1), bools(3, 4), skip={"tract": NO_CAST}),
        row("amax_int", lambda v: v.amax(-1), ints(3, 4), skip={"tract": NO_CAST}, extra=True),
        row("max_dim_int", lambda v: v.max(0), ints(3, 4), skip={"tract": NO_CAST}),
        row("mean_all", torch.mean, x, extra=True),
        row("mean_dims", lambda v: v.mean((-1, -2)), x),
        row("mean_keepdim", lambda v: v.mean(1, keepdim=True), x, extra=True),
        row("amax", lambda v: v.amax(-1), x, extra=True),
        row("amax_keepdim", lambda v: v.amax((0, 1), keepdim=True), x),
        row("amin", lambda v: v.amin(0), x, extra=True),
        row("max_all", torch.max, x),
        row("min_all", torch.min, x, extra=True),
        row("max_dim_indices", lambda v: torch.max(v, 1), x),
        row("min_dim_keepdim_indices", lambda v: torch.min(v, -1, keepdim=True), x),
        row("argmax_dim", lambda v: v.argmax(2), x),
        row("argmax_all", torch.argmax, x),
        row("argmin_keepdim", lambda v: v.argmin(1, keepdim=True), x),
        row("var", lambda v: v.var(-1), x),
        row("var_keepdim_unbiased_false", lambda v: v.var((0, 2), unbiased=False, keepdim=True), x),
        row("var_all", torch.var, x, extra=True),
        row("std", lambda v: v.std(1), x, extra=True),
        row("std_correction0_keepdim", lambda v: torch.std(v, -1, correction=0, keepdim=True), x),
        row("var_mean", lambda v: torch.var_mean(v, 1), x),
        row("std_mean_keepdim", lambda v: torch.std_mean(v, (0, 2), correction=0, keepdim=True), x, extra=True),
        row("any_dim", lambda b: b.any(1), bools(3, 4)),
        row("any_all", torch.any, bools(3, 4), extra=True),
        row("all_dim_keepdim", lambda b: b.all(0, keepdim=True), bools(3, 4), extra=True),
        row("all_all", torch.all, bools(3, 4)),
        row("logsumexp", lambda v: torch.logsumexp(v, -1), x, extra=True),
        row("logsumexp_keepdim", lambda v: torch.logsumexp(v, (0, 1), keepdim=True), x),
        row("cumsum_last", lambda v: torch.cumsum(v, -1), x, skip={"tract": NO_CONSTANT}, extra=True),
        row("cumsum_first", lambda v: torch.cumsum(v, 0), x, skip={"tract": NO_CONSTANT}),
        row("cumsum_int", lambda v: torch.cumsum(v, 1), ints(2, 3), skip={"tract": NO_CAST}),
        row("norm_p2", lambda v: torch.linalg.vector_norm(v, dim=-1), x, extra=True),
        row("norm_p1_keepdim", lambda v: torch.linalg.vector_norm(v, 1, dim=(0, 2), keepdim=True), x, extra=True),
        row("norm_inf_all", lambda v: torch.linalg.vector_norm(v, float("inf")), x, extra=True),
        row("norm_p3", lambda v: torch.linalg.vector_norm(v, 3, dim=1), x),
        row("normalize", lambda v: F.normalize(v, dim=1), x),
    ]


def shapes() -> list[Row]:
    x = randn(2, 3, 4)
    return [
        row("view", lambda v: v.view(6, 4), x, extra=True),
        row("reshape_minus_one", lambda v: v.reshape(4, -1), x, extra=True),
        row("flatten", torch.flatten, x, extra=True),
        row("flatten_from_1", lambda v: v.flatten(1), x, extra=True),
        row("unflatten", lambda v: v.unflatten(2, (2, 2)), x),
        row("permute", lambda v: v.permute(2, 0, 1), x),
        row("transpose", lambda v: v.transpose(-1, 0), x, extra=True),
        row("t", torch.t, randn(3, 4)),
        row("mT", lambda v: v.mT, x, extra=True),
        row("squeeze_all", torch.squeeze, randn(1, 3, 1, 4)),
        row("squeeze_dim", lambda v: v.squeeze(-2), randn(1, 3, 1, 4), extra=True),
        row("unsqueeze", lambda v: v.unsqueeze(1), x, extra=True),
        row("unsqueeze_negative", lambda v: v.unsqueeze(-1), x, extra=True),
        row("cat", lambda a, b: torch.cat([a, b], 1), x, randn(2, 5, 4), extra=True),
        row("cat_negative_dim", lambda a, b, c: torch.cat([a, b, c], -1), x, randn(2, 3, 1), randn(2, 3, 2)),
        row("stack", lambda a, b: torch.stack([a, b], 1), x, randn(2, 3, 4)),
        row("stack_last", lambda a, b: torch.stack([a, b], -1), x, randn(2, 3, 4), extra=True),
        row("split_sizes", lambda v: torch.split(v, [1, 3], dim=2), x),
        row("split_uneven", lambda v: torch.split(v, 2, dim=1), x, extra=True),
        row("chunk", lambda v: torch.chunk(v, 2, dim=-1), x),
        row("chunk_uneven", lambda v: torch.chunk(v, 3, dim=1), randn(2, 7)),
        row("chunk_fewer_pieces", lambda v: torch.chunk(v, 3, dim=-1), x, extra=True),
        row("unbind", lambda v: torch.unbind(v, 1), x),
        row("slice_step", lambda v: v[:, 1::2], randn(2, 5, 4)),
        row("slice_negative", lambda v: v[..., -3:-1], x, extra=True),
        row("slice_step_negative_start", lambda v: v[:, :, -4::3], randn(2, 3, 7)),
        row("select", lambda v: v[:, 2], x, extra=True),
        row("select_negative", lambda v: v[-1], x),
        row("narrow", lambda v: v.narrow(2, 1, 2), x),
        row("diagonal", torch.diagonal, randn(3, 4), skip={"tract": STRIDED_SLICE}, extra=True),
        row("diagonal_offset_dims", lambda v: torch.diagonal(v, -1, 2, 0), randn(4, 2, 3),
            skip={"tract": STRIDED_SLICE}),
        row("flip", lambda v: v.flip(0, 2), x, skip={"tract": NO_GATHER}),
        row("expand", lambda v: v.expand(2, 3, 4), randn(3, 1), extra=True),
        row("expand_same_rank", lambda v: v.expand(-1, 5, -1), randn(2, 1, 4)),
        row("repeat", lambda v: v.repeat(2, 1, 3), x, extra=True),
        row("repeat_more_dims", lambda v: v.repeat(2, 2, 1), randn(3, 4)),
        row("index_select", lambda v, i: v.index_select(1, i), x, torch.tensor([2, 0, 2]),
            skip={"tract": NO_GATHER}),
        row("index_tensor_first", lambda v, i: v[i], x, torch.tensor([1, 0, 1, 1]), skip={"tract": NO_GATHER},
            extra=True),
        row("index_tensor_middle", lambda v, i: v[:, i], x, torch.tensor([[2, 0], [1, 1]]),
            skip={"tract": NO_GATHER}),
        row("embedding", nn.Embedding(10, 4), torch.tensor([[1, 3, 9], [0, 3, 2]]), skip={"tract": NO_GATHER}),
        row("pad_constant", lambda v: F.pad(v, (1, 2, 0, 1), value=0.5), x),
        row("pad_reflect", lambda v: F.pad(v, (2, 1), mode="reflect"), x, extra=True),
        row("pad_reflect_2d", lambda v: F.pad(v, (1, 1, 2, 0), mode="reflect"), randn(1, 2, 3, 4)),
        row("pad_replicate", lambda v: F.pad(v, (1, 2), mode="replicate"), x, skip={"tract": NO_REPLICATE}),
        row("pad_replicate_2d", lambda v: F.pad(v, (0, 2, 1, 1), mode="replicate"), randn(1, 2, 3, 4),
            skip={"tract": NO_REPLICATE}, extra=True),
        row("tril", torch.tril, randn(4, 4), skip={"tract": NO_CONSTANT}),
        row("roll", lambda v: torch.roll(v, 1, -1), x, extra=True),
        row("roll_two_dims", lambda v: torch.roll(v, (-1, 5), (0, 1)), x),
        row("roll_flat", lambda v: torch.roll(v, 7), x, extra=True),
    ]


def constants_and_casts() -> list[Row]:
    x = randn(2, 3)
    return [
        row("full_add", lambda v: v + torch.full((2, 3), 1.5), x, skip={"tract": NO_CONSTANT}),
        row("zeros_like", lambda v: v * 2 + torch.zeros_like(v), x, skip={"tract": NO_CONSTANT}, extra=True),
        row("ones_like", lambda v: torch.ones_like(v) - v, x, skip={"tract": NO_CONSTANT}, extra=True),
        row("full_like", lambda v: torch.full_like(v, -2.0) * v, x, skip={"tract": NO_CONSTANT}, extra=True),
        row("new_zeros", lambda v: v + v.new_zeros(3), x, skip={"tract": NO_CONSTANT}, extra=True),
        row("arange_add", lambda v: v + torch.arange(3), x, skip={"tract": NO_CONSTANT}),
        row("arange_float_step", lambda v: v * torch.arange(0.0, 1.5, 0.5), x, skip={"tract": NO_CONSTANT}, extra=True),
        row("to_int", lambda v: v.to(torch.int64), x * 4, skip={"tract": NO_CAST}),
        row("int_to_float", lambda v: v.float() * 0.5, ints(2, 3), skip={"tract": NO_CAST}),
        row("bool_to_float", lambda v: v.float(), bools(2, 3), skip={"tract": NO_CAST}, extra=True),
        row("float_to_bool", lambda v: v.bool(), ints(2, 3, low=-1, high=2).float(), skip={"tract": NO_CAST}),
        row("to_same_dtype", lambda v: v.to(torch.float32) + 1, x, extra=True),
        row("type_as", lambda v, w: v.type_as(w), ints(2, 3), x, skip={"tract": NO_CAST}),
    ]


def normalization() -> list[Row]:
    x = randn(2, 3, 4, 4)
    batch = with_weight(nn.BatchNorm2d(3), weight=positive(3), bias=randn(3), running_mean=randn(3),
                        running_var=positive(3))
    return [
        row("batch_norm_eval", batch, x),
        row("batch_norm_train", nn.BatchNorm2d(3), x, train=True, skip={"tract": NO_CAST}),
        row("layer_norm", with_weight(nn.LayerNorm(4), weight=positive(4), bias=randn(4)), randn(2, 3, 4)),
        row("layer_norm_2d_no_affine", nn.LayerNorm((3, 4), elementwise_affine=False), randn(2, 3, 4)),
        row("group_norm", with_weight(nn.GroupNorm(3, 6), weight=positive(6), bias=randn(6)), randn(2, 6, 4)),
        row("instance_norm", nn.InstanceNorm2d(3, affine=True), x),
    ]


def matrix() -> list[Row]:
    linear = nn.Linear(4, 5)
    return [
        row("mm", torch.mm, randn(3, 4), randn(4, 5), extra=True),
        row("bmm", torch.bmm, randn(2, 3, 4), randn(2, 4, 5)),
        row("matmul_3d_2d", torch.matmul, randn(2, 3, 4), randn(4, 5)),
        row("matmul_2d_3d", torch.matmul, randn(3, 4), randn(2, 4, 5)),
        row("matmul_4d", torch.matmul, randn(2, 2, 3, 4), randn(2, 2, 4, 5), extra=True),
        row("matmul_vector_matrix", torch.matmul, randn(4), randn(4, 5)),
        row("matmul_matrix_vector", torch.matmul, randn(3, 4), randn(4), extra=True),
        row("matmul_dot", torch.matmul, randn(4), randn(4), extra=True),
        row("addmm", torch.addmm, randn(5), randn(3, 4), randn(4, 5), extra=True),
        row("addmm_alpha_beta", lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0), randn(3, 5),
            randn(3, 4), randn(4, 5)),
        row("baddbmm", torch.baddbmm, randn(2, 3, 5), randn(2, 3, 4), randn(2, 4, 5)),
        row("linear_module", linear, randn(3, 4), extra=True),
        row("linear_3d", F.linear, randn(2, 3, 4), randn(5, 4), randn(5)),
        row("linear_no_bias", F.linear, randn(3, 4), randn(5, 4), extra=True),
        row("linear_1d", F.linear, randn(4), randn(5, 4), randn(5)),
        row("einsum_bij_jk", lambda a, b: torch.einsum("bij,jk->bik", a, b), randn(2, 3, 4), randn(4, 5)),
        row("outer", torch.outer, randn(3), randn(4), extra=True),
    ]


ROWS: list[Row] = arithmetic() + comparisons() + activations() + unary() + reductions() + shapes() + \
    constants_and_casts() + normalization() + matrix()

# Operations with no exact NNEF form: exporting them must raise a clean ExportError naming the reason.
UNMAPPABLE: list[tuple[str, nn.Module, tuple[Any, ...], str]] = [
    ("pad_circular", Fn(lambda v: F.pad(v, (1, 1), mode="circular")), (randn(2, 3, 4),), "circular"),
    ("bitwise_and_int", Fn(lambda x, y: x & y), (ints(2, 3), ints(2, 3)), "bitwise"),
    ("prod", Fn(lambda v: v.prod(1)), (randn(2, 3, 4),), "no export rule"),
    ("empty_slice", Fn(lambda v: v[:, 4:].sum(1) + v[:, 0]), (randn(3, 4),), "empty"),
    ("boolean_mask", Fn(lambda x: x[x > 0]), (randn(2, 3),), "value"),
]
