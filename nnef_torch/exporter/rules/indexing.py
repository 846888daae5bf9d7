"""Index-driven ATen operations: `gather` along a dimension, `sort` and `topk` (as fragments written into the
document)."""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.exporter.rules.common import Emitter, Unmappable, axis
from nnef_torch.exporter.rules.elementwise import as_scalar
from nnef_torch.ops.registry import export_rule

EXACT_INDEX = 1 << 24  # linear indices are computed on scalars (float32 in most consumers): exact below this


@export_rule("gather", "aten.gather.default")
def gather(e: Emitter, x: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Any:
    """torch.gather: NNEF's `gather` selects whole slices, so `x` is cut to the index's extents on the other axes,
    flattened, and read at the linear indices `index * stride + offset` (offset: the position of each item on the
    other axes, a constant)."""
    rank = e.rank(x)
    a = axis(dim, rank)
    shape, ishape = list(e.shape(x)), list(e.shape(index))
    if rank == 0:
        return e.op("copy", x)
    if len(ishape) != rank:
        raise Unmappable(f"gather with an index of rank {len(ishape)} on an input of rank {rank}")
    for d in range(rank):  # torch reads only the leading index extents of the other axes
        if d != a and ishape[d] < shape[d]:
            x = e.op("slice", x, axes=[d], begin=[0], end=[ishape[d]])
    kept = [n if d == a else ishape[d] for d, n in enumerate(shape)]
    count = 1
    for n in kept:
        count *= n
    if count > EXACT_INDEX:
        raise Unmappable(f"gather from {count} items: its linear indices are computed on scalars, exact only up to "
                         f"{EXACT_INDEX}")
    strides = [1] * rank
    for d in range(rank - 2, -1, -1):
        strides[d] = strides[d + 1] * kept[d + 1]
    offsets = []  # per other axis: its positions times its stride, along that axis
    for d in range(rank):
        if d != a and ishape[d] > 1:
            view = [1] * rank
            view[d] = ishape[d]
            offsets.append((torch.arange(ishape[d]) * strides[d]).reshape(view))
    flat = e.op("reshape", x, shape=[count]) if rank > 1 else x
    try:  # an index known ahead of time (a buffer, a constant): its linear indices are a constant
        linear = e.fold(e.node.args[2]) * strides[a] + sum(offsets, torch.zeros((), dtype=torch.int64))
        linear = e.constant(linear, f"constants/{e.node.name}_index")
    except Unmappable:
        scaled = as_scalar(e, index)
        if strides[a] != 1:
            scaled = e.op("mul", scaled, float(strides[a]))
        for d, offset in enumerate(offsets):
            scaled = e.op("add", scaled, e.constant(offset.float(), f"constants/{e.node.name}_offset{d}"))
        linear = e.op("cast", scaled, generic="integer")
    return e.op("gather", flat, linear, axis=0)


# --- sort and topk, as the fragments `stable_sort` and `stable_topk` (fragments.nnef): ties in input order


def _positions(e: Emitter, x: Any, a: int) -> Any:
    """0 .. n-1 along axis `a` (singleton axes elsewhere): the fragments break ties and pick ranks with it."""
    view = [1] * e.rank(x)
    view[a] = e.shape(x)[a]
    # a variable even when small: tract has no `constant`, and runs the fragments' bodies otherwise
    return e.variable(f"constants/{e.node.name}_positions", torch.arange(view[a], dtype=torch.float32).reshape(view))


def _sortable(e: Emitter, x: Any, what: str) -> tuple[Any, int]:
    if e.dtype(x) == "logical":
        raise Unmappable(f"{what} of a logical tensor has no export rule (NNEF compares scalars)")
    if e.rank(x) == 0:
        raise Unmappable(f"{what} of a rank-0 tensor has no export rule")
    return as_scalar(e, x), e.rank(x)  # integers are compared as scalars: exact up to 2^24 in magnitude


@export_rule("stable_sort", "aten.sort.default", "aten.sort.stable", "aten.argsort.default", "aten.argsort.stable")
def sort(e: Emitter, x: Any, *args: Any, **kwargs: Any) -> Any:
    """torch.sort / argsort (stable=True order for any `stable`: ties keep their input order, which is one of the
    orders an unstable sort may give)."""
    stable_overload = e.node.target._overloadname == "stable"
    if stable_overload:  # sort.stable(self, *, stable, dim=-1, descending=False)
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:  # sort.default(self, dim=-1, descending=False)
        dim = args[0] if len(args) > 0 else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    scalar, rank = _sortable(e, x, "sort")
    a = axis(dim, rank)
    values, indices = e.op("stable_sort", scalar, _positions(e, x, a), axis=a, descending=bool(descending),
                           out_shape=(e.shape(x), e.shape(x)))
    if e.node.target.__name__.startswith("argsort"):
        return indices
    if e.dtype(x) != "scalar":
        values = e.op("cast", values, generic=e.dtype(x))
    return values, indices


@export_rule("stable_topk", "aten.topk.default")
def topk(e: Emitter, x: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
    """torch.topk: the first k of the stable sort (descending for the largest); the items are always in sorted
    order, which torch allows for sorted=False too."""
    scalar, rank = _sortable(e, x, "topk")
    a = axis(dim, rank)
    if int(k) < 1:
        raise Unmappable("topk with k = 0 makes an empty tensor, and NNEF tensors are not empty")
    shape = list(e.shape(x))
    shape[a] = int(k)
    values, indices = e.op("stable_topk", scalar, _positions(e, x, a), axis=a, k=int(k), largest=bool(largest),
                           out_shape=(tuple(shape), tuple(shape)))
    if e.dtype(x) != "scalar":
        values = e.op("cast", values, generic=e.dtype(x))
    return values, indices

