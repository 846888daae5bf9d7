"""Reductions, softmax and the normalizations (batch, layer, group, instance)."""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.exporter.rules.common import Emitter, Unmappable, axes, axis, is_ref, leading
from nnef_torch.exporter.rules.elementwise import as_scalar, like_out
from nnef_torch.ops.registry import export_rule


def _finish(e: Emitter, y: Any, chosen: list[int], keepdim: bool) -> Any:
    """NNEF reductions keep the reduced axes (as 1); torch drops them unless keepdim."""
    return y if keepdim or not chosen else e.op("squeeze", y, axes=chosen)


def _reduce(name: str):
    def rule(e: Emitter, x: Any, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        if isinstance(dims, bool):  # aten.any.default / all.default have no dims
            dims, keepdim = None, False
        chosen = axes(dims, e.rank(x))
        if name in ("any_reduce", "all_reduce"):  # on numbers: whether they are non-zero
            x = x if e.dtype(x) == "logical" else e.op("ne", as_scalar(e, x), 0.0)
        else:  # NNEF reduces scalars: integers and logicals are cast, and the result to torch's type
            x = as_scalar(e, x)
        return _finish(e, like_out(e, e.op(name, x, axes=chosen)), chosen, keepdim)
    rule.__name__ = name
    return rule


export_rule("sum_reduce", "aten.sum.dim_IntList", "aten.sum.default")(_reduce("sum_reduce"))
export_rule("mean_reduce", "aten.mean.dim", "aten.mean.default")(_reduce("mean_reduce"))
export_rule("max_reduce", "aten.amax.default", "aten.max.default")(_reduce("max_reduce"))
export_rule("min_reduce", "aten.amin.default", "aten.min.default")(_reduce("min_reduce"))
export_rule("any_reduce", "aten.any.dim", "aten.any.dims", "aten.any.default")(_reduce("any_reduce"))
export_rule("all_reduce", "aten.all.dim", "aten.all.dims", "aten.all.default")(_reduce("all_reduce"))


@export_rule("argmax_reduce", "aten.argmax.default")
def argmax(e: Emitter, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _arg(e, "argmax_reduce", x, dim, keepdim)


@export_rule("argmin_reduce", "aten.argmin.default")
def argmin(e: Emitter, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    return _arg(e, "argmin_reduce", x, dim, keepdim)


def _arg(e: Emitter, name: str, x: Any, dim: Any, keepdim: bool) -> Any:
    x = as_scalar(e, x)
    if dim is None:
        x = e.op("reshape", x, shape=[-1])
        return e.op("squeeze", e.op(name, x, axes=[0]), axes=[0])
    chosen = [axis(dim, e.rank(x))]
    return _finish(e, e.op(name, x, axes=chosen), chosen, keepdim)


@export_rule("max_reduce", "aten.max.dim")
def max_dim(e: Emitter, x: Any, dim: int, keepdim: bool = False) -> Any:
    return _value_index(e, "max_reduce", "argmax_reduce", x, dim, keepdim)


@export_rule("min_reduce", "aten.min.dim")
def min_dim(e: Emitter, x: Any, dim: int, keepdim: bool = False) -> Any:
    return _value_index(e, "min_reduce", "argmin_reduce", x, dim, keepdim)


def _value_index(e: Emitter, value_op: str, index_op: str, x: Any, dim: int, keepdim: bool) -> Any:
    chosen = [axis(dim, e.rank(x))]
    kind = e.dtype(x)
    x = as_scalar(e, x)
    values = e.op(value_op, x, axes=chosen)
    values = values if kind == "scalar" else e.op("cast", values, generic=kind)
    indices = e.op(index_op, x, axes=chosen)
    return _finish(e, values, chosen, keepdim), _finish(e, indices, chosen, keepdim)


def _moments(e: Emitter, x: Any, dims: Any, args: tuple[Any, ...], correction: Any, keepdim: bool
             ) -> tuple[Any, Any, list[int], bool]:
    """(mean, variance with torch's correction, reduced axes, keepdim) for var, std and var_mean."""
    if args and isinstance(args[0], bool):  # the .dim overloads: (x, dims, unbiased, keepdim)
        correction = 1 if args[0] else 0
        keepdim = args[1] if len(args) > 1 else keepdim
    elif args:
        keepdim = args[0]
    correction = 1 if correction is None else correction
    chosen = axes(dims, e.rank(x))
    count = 1
    for a in chosen:
        count *= e.shape(x)[a]
    mean, variance = e.op("moments", x, axes=chosen)
    if correction:
        variance = e.op("mul", variance, count / max(count - correction, 1))
    return mean, variance, chosen, keepdim


@export_rule("moments", "aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def var(e: Emitter, x: Any, dims: Any = None, *args: Any, correction: Any = None, keepdim: bool = False) -> Any:
    _, variance, chosen, keepdim = _moments(e, x, dims, args, correction, keepdim)
    if e.node.target.__name__.startswith("std"):
        variance = e.op("sqrt", variance)
    return _finish(e, variance, chosen, keepdim)


@export_rule("moments", "aten.var_mean.correction", "aten.var_mean.dim")
def var_mean(e: Emitter, x: Any, dims: Any = None, *args: Any, correction: Any = None, keepdim: bool = False) -> Any:
    mean, variance, chosen, keepdim = _moments(e, x, dims, args, correction, keepdim)
    return _finish(e, variance, chosen, keepdim), _finish(e, mean, chosen, keepdim)


@export_rule("softmax", "aten.softmax.int", "aten._softmax.default")
def softmax(e: Emitter, x: Any, dim: int, *rest: Any) -> Any:
    return e.op("softmax", x, axes=[axis(dim, e.rank(x))])


@export_rule("log_softmax", "aten.log_softmax.int", "aten._log_softmax.default")
def log_softmax(e: Emitter, x: Any, dim: int, *rest: Any) -> Any:
    return e.op("log_softmax", x, axes=[axis(dim, e.rank(x))])


@export_rule("sum_reduce", "aten.logsumexp.default")
def logsumexp(e: Emitter, x: Any, dims: Any, keepdim: bool = False) -> Any:
    chosen = axes(dims, e.rank(x))
    top = e.op("max_reduce", x, axes=chosen)
    total = e.op("sum_reduce", e.op("exp", e.op("sub", x, top)), axes=chosen)
    return _finish(e, e.op("add", e.op("log", total), top), chosen, keepdim)


@export_rule("matmul", "aten.cumsum.default")
def cumsum(e: Emitter, x: Any, dim: int, *, dtype: Any = None) -> Any:
    """A cumulative sum along an axis of static length n is a product with an n x n triangular matrix of ones; the
    axis is moved last and the others flattened, so the product is an ordinary 2-D matmul."""
    rank = e.rank(x)
    a = axis(dim, rank)
    n = e.shape(x)[a]
    symbolic = e.symbolic_shape(0)
    x = as_scalar(e, x)  # integer counts stay exact below 2^24
    if symbolic is not None and not isinstance(symbolic[a], int):
        if e.target != "tract":
            raise Unmappable(f"a cumulative sum along the axis of symbolic extent {e.symbols.show(symbolic[a])} "
                             "needs a triangle of that size, which standard NNEF cannot build: export with "
                             "target='tract'")
        n = e.extent(symbolic[a])  # the triangle made from tract's ranges: i <= j
        r = e.op("tract_core_range", 0, n, 1, out_shape=(n.value,))
        rows, columns = e.op("unsqueeze", r, axes=[1]), e.op("unsqueeze", r, axes=[0])
        triangle = e.op("cast", e.op("le", rows, columns), generic="scalar")
    else:
        triangle = e.constant(torch.triu(torch.ones(n, n)), f"constants/{e.node.name}_triangle")
    swap = list(range(rank))
    swap[a], swap[-1] = swap[-1], swap[a]
    moved = e.op("transpose", x, axes=swap) if a != rank - 1 else x
    flat = e.op("reshape", moved, shape=[-1, n]) if rank != 2 else moved
    summed = e.op("matmul", flat, triangle)
    moved_shape = [e.extent(d) for d in symbolic] if symbolic is not None else list(e.shape(moved))
    if symbolic is not None:
        moved_shape[a], moved_shape[-1] = moved_shape[-1], moved_shape[a]
    summed = e.op("reshape", summed, shape=moved_shape) if rank != 2 else summed
    return like_out(e, e.op("transpose", summed, axes=swap) if a != rank - 1 else summed)


@export_rule("sqrt", "aten.linalg_vector_norm.default")
def vector_norm(e: Emitter, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Any:
    """The p-norm over `dim`: sqrt of the sum of squares for p = 2, the sum or the extreme of |x| for p = 1, +-inf,
    and (sum |x|^p)^(1/p) otherwise."""
    chosen = axes(dim, e.rank(x))
    ord = float(ord)
    if ord == 0:
        raise Unmappable("the 0-'norm' (count of non-zeros) has no export rule")
    if ord == 2:
        y = e.op("sqrt", e.op("sum_reduce", e.op("sqr", x), axes=chosen))
    elif ord == 1:
        y = e.op("sum_reduce", e.op("abs", x), axes=chosen)
    elif ord == float("inf"):
        y = e.op("max_reduce", e.op("abs", x), axes=chosen)
    elif ord == float("-inf"):
        y = e.op("min_reduce", e.op("abs", x), axes=chosen)
    else:
        y = e.op("pow", e.op("sum_reduce", e.op("pow", e.op("abs", x), ord), axes=chosen), 1.0 / ord)
    return _finish(e, y, chosen, keepdim)


def _row(e: Emitter, v: Any, rank: int = 2) -> Any:
    """A per-channel vector [C] as [1, C], the shape NNEF's left-aligned broadcasting needs on axis 1."""
    if v is None or not is_ref(v):
        return 1.0 if v is None else v
    return e.op("unsqueeze", v, axes=[0])


@export_rule("batch_normalization", "aten._native_batch_norm_legit_no_training.default")
def batch_norm_eval(e: Emitter, x: Any, weight: Any, bias: Any, mean: Any, var: Any, momentum: float,
                    eps: float) -> Any:
    y = e.op("batch_normalization", x, _row(e, mean), _row(e, var), _row(e, bias) if bias is not None else 0.0,
             _row(e, weight) if weight is not None else 1.0, epsilon=float(eps))
    return y, None, None


@export_rule("batch_normalization", "aten._native_batch_norm_legit_functional.default",
             "aten._native_batch_norm_legit.no_stats")
def batch_norm_train(e: Emitter, x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any = None,
                     training: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Training mode: normalize by the batch statistics and return the updated running statistics (the exporter
    writes them back with `update`)."""
    if isinstance(running_mean, bool):  # no_stats overload: (x, w, b, training, momentum, eps)
        training, momentum, eps, running_mean, running_var = running_mean, running_var, training, None, None
    rank = e.rank(x)
    reduced = [0] + list(range(2, rank))
    mean, variance = e.op("moments", x, axes=reduced)
    y = e.op("batch_normalization", x, mean, variance, _row(e, bias) if bias is not None else 0.0,
             _row(e, weight) if weight is not None else 1.0, epsilon=float(eps))
    if running_mean is None:
        return y, None, None
    count = 1
    for a in reduced:
        count *= e.shape(x)[a]
    flat_mean = e.op("squeeze", mean, axes=reduced)
    flat_var = e.op("squeeze", variance, axes=reduced)
    new_mean = e.op("add", e.op("mul", running_mean, 1.0 - momentum), e.op("mul", flat_mean, float(momentum)))
    unbiased = e.op("mul", flat_var, float(momentum) * count / max(count - 1, 1))
    new_var = e.op("add", e.op("mul", running_var, 1.0 - momentum), unbiased)
    return y, None, None, new_mean, new_var


@export_rule("layer_norm", "aten.layer_norm.default")
def layer_norm(e: Emitter, x: Any, shape: list[int], weight: Any = None, bias: Any = None, eps: float = 1e-5,
               *rest: Any) -> Any:
    rank = e.rank(x)
    chosen = list(range(rank - len(shape), rank))
    return e.op("layer_norm", x, leading(e, weight, rank) if weight is not None else 1.0,
                leading(e, bias, rank) if bias is not None else 0.0, axes=chosen, epsilon=float(eps))


@export_rule("group_norm", "aten.group_norm.default")
def group_norm(e: Emitter, x: Any, groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5,
               *rest: Any) -> Any:
    return e.op("group_norm", x, _row(e, weight) if weight is not None else 1.0,
                _row(e, bias) if bias is not None else 0.0, groups=int(groups), shape=list(e.shape(x)),
                epsilon=float(eps), out_shape=e.shape(x))


@export_rule("instance_norm", "aten.instance_norm.default")
def instance_norm(e: Emitter, x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,
                  use_input_stats: bool, momentum: float, eps: float, *rest: Any) -> Any:
    if not use_input_stats:
        return e.op("batch_normalization", x, _row(e, running_mean), _row(e, running_var),
                    _row(e, bias) if bias is not None else 0.0, _row(e, weight) if weight is not None else 1.0,
                    epsilon=float(eps))
    return e.op("instance_norm", x, _row(e, weight) if weight is not None else 1.0,
                _row(e, bias) if bias is not None else 0.0, axes=list(range(2, e.rank(x))), epsilon=float(eps),
                out_shape=e.shape(x))


@export_rule("batch_normalization", "aten.batch_norm.default")
def batch_norm(e: Emitter, x: Any, weight: Any, bias: Any, mean: Any, var: Any, training: bool, momentum: float,
               eps: float, *rest: Any) -> Any:
    """The undecomposed form, exported directly in eval mode (training mode is decomposed first)."""
    if training or mean is None:
        raise Unmappable("batch norm with batch statistics is exported from its decomposition")
    return batch_norm_eval(e, x, weight, bias, mean, var, momentum, eps)[0]
