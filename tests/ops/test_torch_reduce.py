"""Torch implementations of the reductions, moments, softmax and the l1 / l2 / batch normalizations against the
Khronos executor (`nnef.Session`) where it runs the op (one axis for the arg reductions and softmax), else against
numpy references written from the stdlib definitions.

Each row of CASES is checked eagerly and traced; the rows of GRAD_CASES (differentiable ops, no ties in the max /
min reductions) also go through `torch.autograd.gradcheck` in float64.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from ops.torch_harness import OpCase, case_ids, check_case, gradcheck_case

import nnef_torch.ops.torch_reduce  # noqa: F401  (registers the ops)

rng = np.random.default_rng(0)

CASES: list[OpCase] = []
GRAD_CASES: list[OpCase] = []


def row(op: str, inputs: dict[str, Any], attribs: dict[str, Any] | None = None, *, grad: bool = False,
        **options: Any) -> None:
    # Contiguous copies: the executor's binding reads a sliced (strided) array as if it were contiguous.
    inputs = {name: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v for name, v in inputs.items()}
    case = OpCase(op, inputs, attribs or {}, **options)
    CASES.append(case)
    if grad:
        GRAD_CASES.append(case)


def normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def axes_id(axes: Sequence[int]) -> str:
    return "axes" + ("".join(str(axis) for axis in axes) or "_none")


X = normal(2, 3, 3, 4)
TIES = rng.integers(0, 3, (2, 3, 3, 4)).astype(np.float32)  # many equal maxima: the first one wins
LOGICAL = normal(2, 3, 3, 4) > 0.8
AXES = [[1], [3], [0, 2], [1, 2], [1, 2, 3], [0, 1, 2, 3]]

# Reductions the executor runs for any axes (empty axes: the input unchanged).
for axes in AXES + [[]]:
    for op, attribs in [("sum_reduce", {}), ("sum_reduce", {"normalize": True}), ("mean_reduce", {}),
                        ("max_reduce", {}), ("min_reduce", {})]:
        name = f"{op}{'_normalize' if attribs else ''}_{axes_id(axes)}"
        row(op, {"input": X}, dict(attribs, axes=axes), id=name, grad=True)
    for op in ("any_reduce", "all_reduce"):
        row(op, {"input": LOGICAL}, {"axes": axes}, id=f"{op}_{axes_id(axes)}")
row("max_reduce", {"input": TIES}, {"axes": [1, 3]}, id="max_reduce_ties")
row("sum_reduce", {"input": normal(6)}, {"axes": [0]}, id="sum_reduce_rank1", grad=True)


# Arg reductions: one axis in the executor; several axes index the reduced sub-tensor flattened row-major
# (in increasing axis order), first extremum on ties.

def np_arg_reduce(pick: Any) -> Any:
    def reference(input: np.ndarray, axes: Sequence[int]) -> np.ndarray:
        dims = sorted(axes)
        kept = [i for i in range(input.ndim) if i not in dims]
        moved = np.transpose(input, kept + dims).reshape([input.shape[i] for i in kept] + [-1])
        shape = [1 if i in dims else n for i, n in enumerate(input.shape)]
        return pick(moved, axis=-1).reshape(shape)
    return reference


for op, pick in [("argmax_reduce", np.argmax), ("argmin_reduce", np.argmin)]:
    for axes in ([0], [1], [3]):
        row(op, {"input": X}, {"axes": axes}, id=f"{op}_{axes_id(axes)}")
        row(op, {"input": TIES}, {"axes": axes}, id=f"{op}_ties_{axes_id(axes)}")
    for axes in ([1, 2], [2, 3], [0, 2], [1, 3], [0, 1, 3], [0, 1, 2, 3]):
        row(op, {"input": X}, {"axes": axes}, id=f"{op}_{axes_id(axes)}", ref=np_arg_reduce(pick))
        row(op, {"input": TIES}, {"axes": axes}, id=f"{op}_ties_{axes_id(axes)}", ref=np_arg_reduce(pick))
    row(op, {"input": X}, {"axes": []}, id=f"{op}_axes_none",
        ref=lambda input, axes: np.zeros(input.shape, np.int64))


# moments = (mean, mean of squared deviations): numpy (the executor does not run the compound).

def np_moments(input: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    axes = tuple(axes)
    mean = np.mean(input, axis=axes, keepdims=True)
    return mean, np.mean(np.square(input - mean), axis=axes, keepdims=True)


for axes in AXES + [[]]:
    row("moments", {"input": X}, {"axes": axes}, id=f"moments_{axes_id(axes)}", ref=np_moments, results=2,
        grad=True)


# softmax: one axis in the executor; several axes (consecutive or not) and none by the definition.

def np_softmax(x: np.ndarray, axes: Sequence[int] = (1,)) -> np.ndarray:
    axes = tuple(axes)
    e = np.exp(x - np.max(x, axis=axes, keepdims=True)) if axes else np.exp(x - x)
    return e / (np.sum(e, axis=axes, keepdims=True) if axes else e)


row("softmax", {"x": X}, id="softmax_default", grad=True)
for axes in ([0], [1], [3]):
    row("softmax", {"x": X}, {"axes": axes}, id=f"softmax_{axes_id(axes)}", grad=True)
for axes in ([1, 2], [2, 3], [1, 2, 3], [0, 2], [1, 3], []):
    row("softmax", {"x": X}, {"axes": axes}, id=f"softmax_{axes_id(axes)}", ref=np_softmax, grad=True)
row("softmax", {"x": normal(3, 5)}, id="softmax_rank2", grad=True)


# l1 / l2 normalization: input / max(norm + bias, epsilon).

def np_normalization(p: int) -> Any:
    def reference(input: np.ndarray, axes: Sequence[int], bias: float = 0.0, epsilon: float = 0.0) -> np.ndarray:
        axes = tuple(axes)
        if p == 1:
            sigma = np.sum(np.abs(input), axis=axes, keepdims=True) if axes else np.abs(input)
        else:
            sigma = np.sqrt(np.sum(np.square(input), axis=axes, keepdims=True) if axes else np.square(input))
        return input / np.maximum(sigma + np.float32(bias), np.float32(epsilon))
    return reference


for op, p in [("l1_normalization", 1), ("l2_normalization", 2)]:
    for axes, attribs in [([1], {}), ([1], {"epsilon": 1e-3}), ([1, 2, 3], {}), ([0, 2], {"bias": 0.5}),
                          ([3], {"bias": 1.0, "epsilon": 0.1}), ([], {"bias": 0.25})]:
        suffix = "".join(f"_{key}" for key in attribs)
        row(op, {"input": X}, dict(attribs, axes=axes), id=f"{op}_{axes_id(axes)}{suffix}",
            ref=np_normalization(p), grad=True)
    # epsilon wins where the norm is small: a zero slice gives 0 / epsilon = 0
    small = X.copy()
    small[0, 1] = 0.0
    small[1, 2] *= 1e-4
    row(op, {"input": small}, {"axes": [2, 3], "epsilon": 0.01}, id=f"{op}_epsilon_floor", ref=np_normalization(p))


# batch_normalization: offset + scale * (input - mean) / sqrt(variance + epsilon), per-channel [1, C] parameters.

def np_batch_normalization(input: np.ndarray, mean: Any, variance: Any, offset: Any, scale: Any,
                           epsilon: float) -> np.ndarray:
    def aligned(v: Any) -> Any:
        return v.reshape(v.shape + (1,) * (input.ndim - v.ndim)) if isinstance(v, np.ndarray) else np.float32(v)
    mean, variance, offset, scale = (aligned(v) for v in (mean, variance, offset, scale))
    return (offset + scale * (input - mean) / np.sqrt(variance + np.float32(epsilon))).astype(np.float32)


def channel(low: float = -1.0, high: float = 1.0, channels: int = 3) -> np.ndarray:
    return rng.uniform(low, high, (1, channels)).astype(np.float32)


BN = {"mean": channel(), "variance": channel(0.5, 2.0), "offset": channel(), "scale": channel(0.5, 1.5)}
row("batch_normalization", dict(input=X, **BN), {"epsilon": 1e-3}, ref=np_batch_normalization, grad=True)
row("batch_normalization", dict(input=normal(4, 3), **BN), {"epsilon": 1e-5}, id="batch_normalization_rank2",
    ref=np_batch_normalization, grad=True)
row("batch_normalization", dict(input=X, mean=BN["mean"], variance=BN["variance"], offset=0.0, scale=1.0),
    {"epsilon": 1e-3}, id="batch_normalization_literal_affine", ref=np_batch_normalization, grad=True)
row("batch_normalization", dict(input=X, mean=0.5, variance=2.0, offset=BN["offset"], scale=BN["scale"]),
    {"epsilon": 0.0}, id="batch_normalization_literal_statistics", ref=np_batch_normalization, grad=True)
row("batch_normalization", dict(input=X, mean=0.5, variance=2.0, offset=0.25, scale=1.5),
    {"epsilon": 0.0}, id="batch_normalization_literals", ref=np_batch_normalization, grad=True)
row("batch_normalization", dict(input=X, mean=normal(1, 3, 3), variance=channel(0.5, 2.0), offset=channel(),
                                scale=np.array([[0.5]], np.float32)),
    {"epsilon": 1e-3}, id="batch_normalization_mixed_shapes", ref=np_batch_normalization, grad=True)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_reduce(case: OpCase) -> None:
    check_case(case)


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_reduce_gradient(case: OpCase) -> None:
    gradcheck_case(case)
