"""Shape and indexing operators of MXNet and NNVM: Reshape (codes 0, -1, -2, -3, -4, reverse), Flatten, Concat,
transpose, expand_dims, squeeze, SliceChannel / split, slice, slice_axis, Cast, where, take, one_hot, arange,
zeros_like / ones_like, _zeros / _ones / _full, BlockGrad, copies, clip, reductions, dot, batch_dot and the
linalg gemm products."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nnef_torch.formats.nnvm.attrs import MAX_RANK
from nnef_torch.formats.nnvm.node import MAX_NODE_RESULTS, OpNode
from nnef_torch.formats.nnvm.rules.common import DTYPES, align, axes, axis, dtype_of
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

NNVM = "nnvm"


def reshape_target(node: OpNode, shape: Sequence[int], source: Sequence[int], reverse: bool) -> list[int]:
    """MXNet's Reshape: positive extents, 0 copies an input extent, -1 infers one, -2 copies the rest, -3 merges
    two input extents, -4 splits one into the next two values (one may be -1). `reverse` reverses the codes and the
    input shape, reads them so, and reverses the result (as `InferReshapeShape` does): a -4 then splits into the
    two values written before it, last one first."""
    if reverse:
        return reshape_target(node, list(shape)[::-1], list(source)[::-1], False)[::-1]
    dst: list[int] = []
    inferred, src, i = -1, 0, 0

    def take(count: int = 1) -> list[int]:
        nonlocal src
        if src + count > len(source):
            raise node.fail(f"shape {list(shape)} reads more dimensions than input shape {list(source)} has")
        values = list(source[src:src + count])
        src += count
        return values

    while i < len(shape):
        code = shape[i]
        if code > 0:
            dst.append(code)
            src += 1
        elif code == 0:
            dst += take()
        elif code == -1:
            if inferred >= 0:
                raise node.fail(f"shape {list(shape)} has more than one -1")
            inferred = len(dst)
            dst.append(1)
            src += 1
        elif code == -2:
            dst += list(source[src:])
            src = len(source)
        elif code == -3:
            first, second = take(2)
            dst.append(first * second)
        elif code == -4:
            if i + 2 >= len(shape):
                raise node.fail(f"shape {list(shape)}: -4 must be followed by two values")
            (extent,) = take()
            d1, d2 = shape[i + 1], shape[i + 2]
            if d1 == -1 and d2 > 0 and extent % d2 == 0:
                d1 = extent // d2
            elif d2 == -1 and d1 > 0 and extent % d1 == 0:
                d2 = extent // d1
            if d1 <= 0 or d2 <= 0 or d1 * d2 != extent:
                raise node.fail(f"shape {list(shape)}: -4 cannot split extent {extent} into "
                                f"({shape[i + 1]}, {shape[i + 2]})")
            dst += [d1, d2]
            i += 2
        else:
            raise node.fail(f"shape {list(shape)} holds {code}; codes are positive, 0, -1, -2, -3 or -4")
        i += 1
    volume = math.prod(source)
    if inferred >= 0:
        known = math.prod(dst)
        if known == 0 or volume % known:
            raise node.fail(f"shape {list(shape)} cannot hold the {volume} items of input shape {list(source)}")
        dst[inferred] = volume // known
    if math.prod(dst) != volume:
        raise node.fail(f"shape {list(shape)} gives {dst}, whose volume differs from input shape {list(source)}")
    return dst


@import_rule("reshape", NNVM, "Reshape", "reshape")
def reshape(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    if node.attrs.has("target_shape") and not node.attrs.has("shape"):  # the legacy form
        target = list(node.attrs.shape("target_shape", codes=True))
        if node.attrs.bool("keep_highest", False):
            target = [b.shape(x)[0]] + target
        shape = reshape_target(node, [0 if t == 0 else t for t in target], b.shape(x), False)
    else:
        node.attrs.shape("target_shape", (), codes=True)
        node.attrs.bool("keep_highest", False)
        codes = node.attrs.shape("shape", codes=True)
        shape = reshape_target(node, codes, b.shape(x), node.attrs.bool("reverse", False))
    return b.op("reshape", x, shape=shape)


@import_rule("reshape", NNVM, "Flatten", "flatten")
def flatten(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    shape = b.shape(node.input(0))
    return b.op("reshape", node.input(0), shape=[shape[0], math.prod(shape[1:])]) if len(shape) != 2 \
        else b.op("copy", node.input(0))


@import_rule("concat", NNVM, "Concat", "concat", "concatenate", "_rnn_param_concat")
def concat(b: Builder, node: OpNode) -> Any:
    if not node.inputs:
        raise node.fail("has no inputs")
    count = node.attrs.int("num_args", len(node.inputs))
    if count != len(node.inputs):
        raise node.fail(f"num_args is {count} but the node has {len(node.inputs)} inputs")
    rank = b.rank(node.input(0))
    key = "axis" if node.attrs.has("axis") else "dim"
    dim = axis(node, node.attrs.int(key, 1), rank, key)
    node.attrs.int("dim" if key == "axis" else "axis", 1)
    return b.op("concat", list(node.inputs), axis=dim)


@import_rule("transpose", NNVM, "transpose")
def transpose(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    rank = b.rank(node.input(0))
    order = node.attrs.ints("axes", ())
    order = list(range(rank))[::-1] if not order else [axis(node, a, rank, "axes") for a in order]
    if sorted(order) != list(range(rank)):
        raise node.fail(f"axes {list(order)} are not a permutation of the {rank} input axes")
    return b.op("transpose", node.input(0), axes=order)


@import_rule("transpose", NNVM, "SwapAxis", "swapaxes")
def swap_axes(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    rank = b.rank(node.input(0))
    first, second = (axis(node, node.attrs.int(key, 0), rank, key) for key in ("dim1", "dim2"))
    order = list(range(rank))
    order[first], order[second] = second, first
    return b.op("transpose", node.input(0), axes=order) if first != second else b.op("copy", node.input(0))


@import_rule("unsqueeze", NNVM, "expand_dims")
def expand_dims(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    rank = b.rank(node.input(0))
    count = node.attrs.int("num_newaxis", 1)  # NNVM
    if not 0 <= count <= MAX_RANK - rank:
        raise node.fail(f"num_newaxis {count} must be from 0 to {MAX_RANK - rank} (the rank is at most {MAX_RANK})")
    where = axis(node, node.attrs.int("axis"), rank + 1)
    return b.op("unsqueeze", node.input(0), axes=list(range(where, where + count)))


@import_rule("squeeze", NNVM, "squeeze")
def squeeze(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    shape = b.shape(node.input(0))
    given = node.attrs.ints("axis", ())
    chosen = axes(node, given, len(shape)) if given else [i for i, extent in enumerate(shape) if extent == 1]
    bad = [a for a in chosen if shape[a] != 1]
    if bad:
        raise node.fail(f"cannot squeeze axes {bad} of shape {list(shape)}: their extents are not 1")
    if not chosen:
        return b.op("copy", node.input(0))
    if len(chosen) == len(shape):  # NNEF tensors keep one dimension
        chosen = chosen[1:]
    return b.op("squeeze", node.input(0), axes=sorted(chosen))


@import_rule("split", NNVM, "SliceChannel", "split")
def split(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    shape = b.shape(x)
    dim = axis(node, node.attrs.int("axis", 1), len(shape))
    if node.attrs.has("indices_or_sections"):  # NNVM: a section count, or the indices to split at
        sections = node.attrs.ints("indices_or_sections", max_items=MAX_NODE_RESULTS)
        cuts = list(sections) if len(sections) > 1 or node.attrs.raw("indices_or_sections").strip()[0] in "([" \
            else None
        if cuts is None:
            count = sections[0]
            if count <= 0 or shape[dim] % count:
                raise node.fail(f"cannot split extent {shape[dim]} into {count} equal parts")
            ratios = [1] * node.results("indices_or_sections", count)
        else:
            bounds = [0] + cuts + [shape[dim]]
            ratios = [high - low for low, high in zip(bounds, bounds[1:])]
            if any(r <= 0 for r in ratios):
                raise node.fail(f"split indices {cuts} must increase within extent {shape[dim]}")
            return tuple(b.op("slice", x, axes=[dim], begin=[low], end=[high])
                         for low, high in zip(bounds, bounds[1:]))
        squeeze_axis = False
    else:
        count = node.attrs.int("num_outputs")
        squeeze_axis = node.attrs.bool("squeeze_axis", False)
        if count <= 0 or shape[dim] % count:
            raise node.fail(f"cannot split extent {shape[dim]} of axis {dim} into {count} equal parts")
        ratios = [1] * node.results("num_outputs", count)
    parts = b.op("split", x, axis=dim, ratios=ratios) if len(ratios) > 1 else [b.op("copy", x)]
    if squeeze_axis:
        if shape[dim] != count:
            raise node.fail(f"squeeze_axis needs parts of extent 1; extent {shape[dim]} splits into {count}")
        parts = [b.op("squeeze", part, axes=[dim]) if len(shape) > 1 else part for part in parts]
    return tuple(parts)


def _slice(b: Builder, node: OpNode, x: Any, begins: Sequence[Any], ends: Sequence[Any], steps: Sequence[Any]) -> Any:
    shape = b.shape(x)
    axes_, begin, end, stride = [], [], [], []
    for i, (low, high) in enumerate(zip(begins, ends)):
        step = steps[i] if i < len(steps) and steps[i] is not None else 1
        if step == 0:
            raise node.fail("slice steps cannot be 0")
        extent = shape[i]
        if step > 0:
            low = 0 if low is None else low
            high = extent if high is None else high
        else:
            low = extent - 1 if low is None else low
            high = -extent - 1 if high is None else high  # before the first item, counting from the end
        axes_.append(i)
        begin.append(low)
        end.append(high)
        stride.append(step)
    if not axes_:
        return b.op("copy", x)
    return b.op("slice", x, axes=axes_, begin=begin, end=end, stride=stride)


@import_rule("slice", NNVM, "slice", "crop", "strided_slice")
def slice_(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    begins = node.attrs.optional_ints("begin")
    ends = node.attrs.optional_ints("end")
    steps = node.attrs.optional_ints("step", ()) if node.attrs.has("step") else node.attrs.optional_ints("stride", ())
    if node.op == "strided_slice":  # NNVM: begin, end and stride each padded to the rank with their defaults
        count = max(len(begins), len(ends), len(steps))
        begins, ends = (tuple(v) + (None,) * (count - len(v)) for v in (begins, ends))
    if len(begins) != len(ends) or len(begins) > b.rank(x) or len(steps) > len(begins):
        raise node.fail(f"begin {begins}, end {ends} and step {steps} must have equal lengths, at most the rank")
    return _slice(b, node, x, begins, ends, steps)


@import_rule("slice", NNVM, "slice_axis")
def slice_axis(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    x = node.input(0)
    rank = b.rank(x)
    dim = axis(node, node.attrs.int("axis"), rank)
    begins, ends = [None] * rank, [None] * rank
    begins[dim], ends[dim] = node.attrs.int("begin"), node.attrs.int("end", None)
    return _slice(b, node, x, begins[:dim + 1], ends[:dim + 1], [])


@import_rule("cast", NNVM, "Cast", "cast")
def cast(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    name = node.attrs.choice("dtype", sorted(DTYPES))
    target = dtype_of(np.dtype(DTYPES[name]))
    x = node.input(0)
    if target == b.dtype(x):
        return b.op("copy", x)  # float widths are one NNEF type: the values keep their precision
    return b.op("cast", x, generic=target)


@import_rule("select", NNVM, "where")
def where(b: Builder, node: OpNode) -> Any:
    node.arity(3)
    condition, x, y = node.inputs
    if b.rank(condition) == 1 and b.rank(x) > 1:  # MXNet: a vector condition picks whole rows
        condition = b.op("reshape", condition, shape=[b.shape(condition)[0]] + [1] * (b.rank(x) - 1))
    if b.dtype(condition) == "integer":  # NNEF compares scalars only: the integers as scalars, zero staying zero
        condition = b.op("cast", condition, generic="scalar")
    if b.dtype(condition) != "logical":
        condition = b.op("ne", condition, 0.0)
    return b.op("select", condition, x, y)


def indices(b: Builder, node: OpNode, raw: Any, count: int, mode: str) -> Any:
    """Float indices (as MXNet passes them) made integer: clipped to [0, count) or wrapped around it."""
    if b.dtype(raw) == "integer":
        raw = b.op("cast", raw, generic="scalar")
    if mode == "wrap":
        wrapped = b.op("sub", raw, b.op("mul", b.op("floor", b.op("div", raw, float(count))), float(count)))
        raw = wrapped
    else:
        raw = b.op("clamp", raw, 0.0, float(count - 1))
    return b.op("cast", b.op("floor", raw) if mode == "wrap" else raw, generic="integer")


@import_rule("gather", NNVM, "take")
def take(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    data, index = node.inputs
    # MXNet's axis defaults to 0; NNVM's to none, which takes from the flattened data
    given = node.attrs.int("axis", 0 if node.mxnet_version is not None else None)
    if given is None:
        data = b.op("reshape", data, shape=[math.prod(b.shape(data))]) if b.rank(data) != 1 else data
        given = 0
    rank = b.rank(data)
    dim = axis(node, given, rank)
    mode = node.attrs.choice("mode", ("clip", "wrap", "raise"), "clip")
    return b.op("gather", data, indices(b, node, index, b.shape(data)[dim], "wrap" if mode == "wrap" else "clip"),
                axis=dim)


@import_rule("gather", NNVM, "Embedding", params=(1,))
def embedding(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    count, width = node.attrs.int("input_dim"), node.attrs.int("output_dim")
    node.attrs.str("dtype", "float32")
    node.attrs.bool("sparse_grad", False)
    weight = node.param(1, (count, width), "weight", real=False)
    return b.op("gather", weight, indices(b, node, node.input(0), count, "clip"), axis=0)


@import_rule("select", NNVM, "one_hot")
def one_hot(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    depth = node.computed("one_hot positions (depth)", node.attrs.int("depth"))
    if depth == 0:
        raise node.fail("depth must be positive")
    on, off = node.attrs.float("on_value", 1.0), node.attrs.float("off_value", 0.0)
    node.attrs.str("dtype", "float32")
    x = node.input(0)
    rank = b.rank(x)
    positions = b.op("constant", shape=[1] * rank + [depth], value=[float(i) for i in range(depth)])
    hit = b.op("eq", b.op("unsqueeze", x, axes=[rank]), positions)
    return b.op("select", hit, float(on), float(off))


@import_rule("constant", NNVM, "_arange", "arange")
def arange(b: Builder, node: OpNode) -> Any:
    node.arity(0)
    start = node.attrs.float("start", 0.0)
    stop = node.attrs.float("stop", None)
    step = node.attrs.float("step", 1.0)
    repeat = node.attrs.int("repeat", 1)
    node.attrs.bool("infer_range", False)
    name = node.attrs.str("dtype", "float32")
    node.attrs.str("ctx", "")
    if stop is None:
        start, stop = 0.0, start
    if step == 0 or repeat <= 0:
        raise node.fail("arange needs step != 0 and repeat > 0")
    span = (stop - start) / step
    if not math.isfinite(span):
        raise node.fail(f"arange from {start} to {stop} by {step} has no finite length")
    count = max(0, math.ceil(span))
    node.computed("arange", count * repeat)
    with np.errstate(all="ignore"):
        values = np.repeat(np.arange(count, dtype=np.float64) * step + start, repeat)
        values = values.astype(DTYPES.get(name, "float32"))
    if values.size == 0:
        raise node.fail("arange gives no items")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise node.fail(f"arange from {start} to {stop} by {step} gives values beyond the range of {values.dtype}")
    kind = dtype_of(values.dtype)
    return b.op("constant", shape=[values.size], value=values.tolist(), generic=kind)


def _filled(value: float) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        x = node.input(0)
        return b.op("constant", shape=list(b.shape(x)), value=[value], generic=b.dtype(x))
    rule.__name__ = f"filled_{int(value)}"
    return rule


import_rule("constant", NNVM, "zeros_like")(_filled(0.0))
import_rule("constant", NNVM, "ones_like")(_filled(1.0))


def _initializer(value: float | None) -> Callable[[Builder, OpNode], Any]:
    """MXNet's _zeros, _ones and _full (`value`): a constant of `shape` and `dtype` (_zeros_without_dtype: float32
    unless given). An extent of 0 is one MXNet infers from the consumers, which this front end does not do."""
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(0)
        shape = list(node.attrs.shape("shape", ()))
        node.attrs.str("ctx", "")
        name = node.attrs.str("dtype", "float32")
        name = "float32" if name == "-1" and node.op == "_zeros_without_dtype" else name
        if name not in DTYPES:
            raise node.fail(f"attribute 'dtype' must be one of {', '.join(sorted(DTYPES))}, found {name!r}")
        kind = dtype_of(np.dtype(DTYPES[name]))
        fill = node.attrs.float("value") if value is None else value
        if not shape or any(extent <= 0 for extent in shape):
            raise node.fail(f"shape {shape} must be given, with positive extents (MXNet infers 0 extents from the "
                            "consumers of the array, which nnef_torch does not)")
        typed = bool(fill) if kind == "logical" else int(fill) if kind == "integer" else float(fill)
        return b.op("constant", shape=shape, value=[typed], generic=kind)
    rule.__name__ = "filled" if value is None else f"filled_{int(value)}"
    return rule


import_rule("constant", NNVM, "_zeros", "_zeros_without_dtype")(_initializer(0.0))
import_rule("constant", NNVM, "_ones")(_initializer(1.0))
import_rule("constant", NNVM, "_full")(_initializer(None))


@import_rule("copy", NNVM, "BlockGrad", "stop_gradient", "_copy", "identity", "copy", "_CrossDeviceCopy")
def identity(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    return b.op("copy", node.input(0))


@import_rule("clamp", NNVM, "clip")
def clip(b: Builder, node: OpNode) -> Any:
    node.arity(1)
    return b.op("clamp", node.input(0), float(node.attrs.float("a_min")), float(node.attrs.float("a_max")))


def _reduce(op: str) -> Callable[[Builder, OpNode], Any]:
    def rule(b: Builder, node: OpNode) -> Any:
        node.arity(1)
        x = node.input(0)
        rank = b.rank(x)
        given = node.attrs.tuple("axis", ())
        if not all(isinstance(a, int) for a in given):
            raise node.fail(f"attribute 'axis' must hold integers, found {given}")
        chosen = axes(node, given, rank) if given else list(range(rank))
        if node.attrs.bool("exclude", False) and given:  # no axes: all of them, excluded or not
            chosen = [a for a in range(rank) if a not in chosen]
        keepdims = node.attrs.bool("keepdims", False)
        if not chosen:
            return b.op("copy", x)
        if op == "sum_normalized":
            reduced = b.op("mean_reduce", x, axes=chosen)
        elif op == "prod_reduce":  # a fragment: its shape is given
            kept = tuple(1 if i in chosen else extent for i, extent in enumerate(b.shape(x)))
            reduced = b.op(op, x, axes=chosen, out_shape=kept)
        else:
            reduced = b.op(op, x, axes=chosen)
        if keepdims:
            return reduced
        if len(chosen) == rank:  # NNEF tensors keep one dimension: a full reduction gives shape [1]
            return b.op("reshape", reduced, shape=[1])
        return b.op("squeeze", reduced, axes=chosen)
    rule.__name__ = f"reduce_{op}"
    return rule


for _op, _names in {"sum_reduce": ("sum", "sum_axis"), "sum_normalized": ("mean",), "max_reduce": ("max", "max_axis"),
                    "min_reduce": ("min", "min_axis"), "prod_reduce": ("prod",)}.items():
    import_rule("mean_reduce" if _op == "sum_normalized" else _op, NNVM, *_names)(_reduce(_op))


@import_rule("matmul", NNVM, "dot")
def dot(b: Builder, node: OpNode) -> Any:
    """MXNet's dot (`DotShape`) sees each operand as a matrix: lhs as (leading axes, last axis), or with transpose_a
    as (first axis, trailing axes), contracting the last or the first axis; rhs as (first axis, trailing axes), or
    with transpose_b as (leading axes, last axis). The kept axes keep their order; two vectors give shape [1]."""
    node.arity(2)
    lhs, rhs = node.inputs
    transpose_a, transpose_b = node.attrs.bool("transpose_a", False), node.attrs.bool("transpose_b", False)
    node.attrs.str("forward_stype", "None")
    if b.rank(lhs) == 2 and b.rank(rhs) == 2:
        return b.op("matmul", lhs, rhs, transposeA=transpose_a, transposeB=transpose_b)
    left, right = list(b.shape(lhs)), list(b.shape(rhs))
    if len(left) == 1 and len(right) == 1 and (transpose_a or transpose_b):
        raise node.fail("dot cannot transpose vectors")
    contracted_left, kept_left = (left[0], left[1:]) if transpose_a else (left[-1], left[:-1])
    contracted_right, kept_right = (right[-1], right[:-1]) if transpose_b else (right[0], right[1:])
    if contracted_left != contracted_right:
        raise node.fail(f"dot contracts extent {contracted_left} of {left} with extent {contracted_right} of {right}")
    matrix_left = [contracted_left, math.prod(kept_left)] if transpose_a else [math.prod(kept_left), contracted_left]
    matrix_right = [math.prod(kept_right), contracted_right] if transpose_b else \
        [contracted_right, math.prod(kept_right)]
    product = b.op("matmul", b.op("reshape", lhs, shape=matrix_left), b.op("reshape", rhs, shape=matrix_right),
                   transposeA=transpose_a, transposeB=transpose_b)
    return b.op("reshape", product, shape=kept_left + kept_right or [1])


@import_rule("matmul", NNVM, "batch_dot")
def batch_dot(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    lhs, rhs = node.inputs
    transpose_a, transpose_b = node.attrs.bool("transpose_a", False), node.attrs.bool("transpose_b", False)
    node.attrs.str("forward_stype", "None")
    rank = max(b.rank(lhs), b.rank(rhs))
    return b.op("matmul", align(b, lhs, rank), align(b, rhs, rank), transposeA=transpose_a, transposeB=transpose_b)


def _gemm_operand(b: Builder, x: Any, rows: int) -> Any:
    """An operand of _linalg_gemm / gemm2 with its row axis `rows` swapped to the second last place."""
    rank = b.rank(x)
    if rows == rank - 2:
        return x
    order = list(range(rank))
    order[rows], order[rank - 2] = rank - 2, rows
    return b.op("transpose", x, axes=order)


def _gemm(b: Builder, node: OpNode, lhs: Any, rhs: Any) -> tuple[Any, int]:
    """alpha * op(A) * op(B) on the matrices whose rows are axis `axis` and columns the last axis (the other axes
    equal); returns the product with its rows still on the second last axis, and the row axis."""
    transpose_a, transpose_b = node.attrs.bool("transpose_a", False), node.attrs.bool("transpose_b", False)
    alpha = float(node.attrs.float("alpha", 1.0))
    rank = b.rank(lhs)
    if rank < 2 or b.rank(rhs) != rank:
        raise node.fail(f"operands must have equal ranks of 2 or more, found shapes {list(b.shape(lhs))} and "
                        f"{list(b.shape(rhs))}")
    rows = axis(node, node.attrs.int("axis", -2), rank)
    if rows == rank - 1:
        raise node.fail(f"axis {rows} is the column axis; the row axis must come before it")
    lhs, rhs = _gemm_operand(b, lhs, rows), _gemm_operand(b, rhs, rows)
    left, right = b.shape(lhs), b.shape(rhs)
    inner = (left[-2] if transpose_a else left[-1], right[-1] if transpose_b else right[-2])
    if left[:-2] != right[:-2] or inner[0] != inner[1]:
        raise node.fail(f"shapes {list(left)} and {list(right)} (rows on the second last axis) do not multiply")
    product = b.op("matmul", lhs, rhs, transposeA=transpose_a, transposeB=transpose_b)
    return (product if alpha == 1.0 else b.op("mul", product, alpha)), rows


@import_rule("matmul", NNVM, "_linalg_gemm2", "linalg_gemm2")
def gemm2(b: Builder, node: OpNode) -> Any:
    node.arity(2)
    product, rows = _gemm(b, node, node.input(0), node.input(1))
    return _gemm_operand(b, product, rows)


@import_rule("matmul", NNVM, "_linalg_gemm", "linalg_gemm")
def gemm(b: Builder, node: OpNode) -> Any:
    """alpha * op(A) * op(B) + beta * C."""
    node.arity(3)
    beta = float(node.attrs.float("beta", 1.0))
    product, rows = _gemm(b, node, node.input(0), node.input(1))
    out = _gemm_operand(b, product, rows)
    addend = node.input(2)
    if b.shape(addend) != b.shape(out):
        raise node.fail(f"C has shape {list(b.shape(addend))}, the product {list(b.shape(out))}")
    return b.op("add", out, addend if beta == 1.0 else b.op("mul", addend, beta))
