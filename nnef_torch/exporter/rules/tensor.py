"""Shape and data-movement ATen operations: views, permutations, joins and splits, slices, padding, gathers,
constants and casts."""
from __future__ import annotations

from typing import Any

import sympy
import torch

from nnef_torch.exporter.emitter import literal, nnef_type
from nnef_torch.exporter.rules.common import Emitter, Unmappable, axes, axis, is_ref
from nnef_torch.exporter.symbolic import SymValue, refusal, reshape_steps
from nnef_torch.ir.values import Extent
from nnef_torch.ops.registry import export_rule


def _out_shape(e: Emitter) -> list[int]:
    return [int(d) for d in e.out.shape]


@export_rule("reshape", "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
             "aten.flatten.using_ints", "aten.unflatten.int")
def view(e: Emitter, x: Any, *args: Any) -> Any:
    source, target = e.symbolic_shape(0), e.symbolic_out()
    if source is not None or target is not None:  # written relative to the input: axis ranges, -1
        symbols = e.symbols
        try:
            steps = reshape_steps(source or list(e.shape(x)), target or _out_shape(e), symbols.examples, symbols.show)
        except Unmappable:
            if e.target != "tract" or target is None:
                raise
            return e.op("reshape", x, shape=[e.extent(d) for d in target])  # the symbols written out
        for start, count, shape in steps:
            x = e.op("reshape", x, shape=shape, axis_start=start, axis_count=count)
        return x if steps else e.op("copy", x)
    shape = _out_shape(e)
    if list(e.shape(x)) == shape:
        return x
    return e.op("reshape", x, shape=shape)


@export_rule("transpose", "aten.permute.default")
def permute(e: Emitter, x: Any, dims: list[int]) -> Any:
    order = [axis(d, e.rank(x)) for d in dims]
    return e.op("transpose", x, axes=order)


@export_rule("transpose", "aten.transpose.int")
def transpose(e: Emitter, x: Any, dim0: int, dim1: int) -> Any:
    rank = e.rank(x)
    order = list(range(rank))
    a, b = axis(dim0, rank), axis(dim1, rank)
    order[a], order[b] = order[b], order[a]
    return e.op("transpose", x, axes=order)


@export_rule("transpose", "aten.t.default", "aten.numpy_T.default")
def t(e: Emitter, x: Any) -> Any:
    rank = e.rank(x)
    return e.op("transpose", x, axes=list(reversed(range(rank)))) if rank > 1 else e.op("copy", x)


@export_rule("unsqueeze", "aten.unsqueeze.default")
def unsqueeze(e: Emitter, x: Any, dim: int) -> Any:
    return e.op("unsqueeze", x, axes=[axis(dim, e.rank(x) + 1)])


@export_rule("squeeze", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def squeeze(e: Emitter, x: Any, dims: Any = None) -> Any:
    shape = e.shape(x)
    chosen = [a for a in axes(dims, len(shape)) if shape[a] == 1]
    return e.op("squeeze", x, axes=chosen) if chosen else e.op("copy", x)


class _Empty:
    """An empty slice (Phi-3's rotary embedding over the whole head leaves no part to pass), only concatenated."""


EMPTY = _Empty()


@export_rule("concat", "aten.cat.default")
def cat(e: Emitter, tensors: list[Any], dim: int = 0) -> Any:
    tensors = [t for t in tensors if t is not EMPTY and 0 not in e.shape(t)]
    rank = e.rank(tensors[0])
    if len(tensors) == 1:
        return e.op("copy", tensors[0])
    return e.op("concat", list(tensors), axis=axis(dim, rank))


@export_rule("stack", "aten.stack.default")
def stack(e: Emitter, tensors: list[Any], dim: int = 0) -> Any:
    return e.op("stack", list(tensors), axis=axis(dim, e.rank(tensors[0]) + 1))


@export_rule("slice", "aten.split_with_sizes.default", "aten.split.Tensor")
def split(e: Emitter, x: Any, sizes: Any, dim: int = 0) -> Any:
    a = axis(dim, e.rank(x))
    extent = e.shape(x)[a]
    if isinstance(sizes, int):
        sizes = [min(sizes, extent - start) for start in range(0, extent, sizes)]
    if len(sizes) == 1:
        return [e.op("copy", x)]
    # one `slice` per piece rather than `split`: tract's standard NNEF has no `split`, and slices read the same
    pieces, start = [], 0
    for size in sizes:
        pieces.append(e.op("slice", x, axes=[a], begin=[start], end=[start + int(size)]))
        start += int(size)
    return pieces


@export_rule("slice", "aten.chunk.default")
def chunk(e: Emitter, x: Any, chunks: int, dim: int = 0) -> Any:
    """torch.chunk: pieces of ceil(extent / chunks) items, the last one shorter (and maybe fewer than `chunks`)."""
    return split(e, x, -(-e.shape(x)[axis(dim, e.rank(x))] // chunks), dim)


@export_rule("unstack", "aten.unbind.int")
def unbind(e: Emitter, x: Any, dim: int = 0) -> Any:
    return e.op("unstack", x, axis=axis(dim, e.rank(x)))


@export_rule("slice", "aten.slice.Tensor")
def slice_(e: Emitter, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    a = axis(dim, e.rank(x))
    symbolic = e.symbolic_shape(0)
    if symbolic is not None and not isinstance(symbolic[a], int):
        return _symbolic_slice(e, x, a, symbolic[a], start, end, step)
    if isinstance(start, SymValue) or isinstance(end, SymValue):
        raise Unmappable(refusal(e.symbols, start if isinstance(start, SymValue) else end, "the slice"))
    extent = e.shape(x)[a]
    begin, stop, _ = slice(start, end, step).indices(extent)
    if begin == 0 and stop >= extent and step == 1:
        return e.op("copy", x)
    if stop <= begin:
        if all(user.target == torch.ops.aten.cat.default for user in e.node.users):  # a part concatenation drops
            return EMPTY
        raise Unmappable(f"the slice {start}:{end} of an axis of length {extent} is empty, and NNEF tensors are not")
    return e.op("slice", x, axes=[a], begin=[begin], end=[stop], stride=[step] if step != 1 else [])


def _symbolic_slice(e: Emitter, x: Any, a: int, extent: Any, start: Any, end: Any, step: int) -> Any:
    """A slice of an axis of symbolic extent n: its bounds as offsets from the start (0 <= k) or from the end
    (n - k, written -k; the end n written 0, which NNEF reads as the axis' end)."""
    def bound(value: Any, default: int, what: str) -> int:
        if value is None or (isinstance(value, int) and value >= 2 ** 62):
            return default
        if isinstance(value, int):
            return value
        offset = sympy.expand(value.expr - extent)
        if offset.is_Integer and int(offset) <= 0:
            return int(offset)
        if value.expr.is_Integer:
            return int(value.expr)
        if e.target == "tract" and sympy.expand(value.expr).free_symbols:
            return e.extent(value)  # the bound written as its expression
        raise Unmappable(f"the slice's {what} {e.symbols.show(value)} is neither a fixed offset from the start "
                         f"nor from the end of the axis of extent {e.symbols.show(extent)}")
    if step != 1:
        raise Unmappable(f"a strided slice of the axis of symbolic extent {e.symbols.show(extent)} has no standard "
                         "NNEF form whose length follows the extent")
    begin, stop = bound(start, 0, "start"), bound(end, 0, "end")
    if isinstance(begin, Extent) or isinstance(stop, Extent):
        return e.op("slice", x, axes=[a], begin=[begin], end=[stop])
    if begin == 0 and stop == 0:
        return e.op("copy", x)
    if begin < 0 < stop or (begin >= 0) == (stop > 0) and stop != 0 and stop <= begin:
        raise Unmappable(f"the slice {begin}:{stop} of the axis of extent {e.symbols.show(extent)} is empty or "
                         "changes direction with the extent")
    return e.op("slice", x, axes=[a], begin=[begin], end=[stop])


@export_rule("slice", "aten.narrow.default")
def narrow(e: Emitter, x: Any, dim: int, start: int, length: int) -> Any:
    a = axis(dim, e.rank(x))
    start = axis(start, e.shape(x)[a])
    return e.op("slice", x, axes=[a], begin=[start], end=[start + length])


@export_rule("slice", "aten.select.int")
def select(e: Emitter, x: Any, dim: int, index: int) -> Any:
    a = axis(dim, e.rank(x))
    index = axis(index, e.shape(x)[a])
    part = e.op("slice", x, axes=[a], begin=[index], end=[index + 1])
    return e.op("squeeze", part, axes=[a])


@export_rule("slice", "aten.diagonal.default")
def diagonal(e: Emitter, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The two axes are moved last and flattened; the diagonal is then a slice with stride m + 1 (m the length of
    the second axis), and ends up last as in torch. For tract, a gather of those items: tract's optimizer fails on
    a strided slice of a reshaped axis (declutter, pulling Downsample over Reshape: "Invalid axis")."""
    rank = e.rank(x)
    a, b = axis(dim1, rank), axis(dim2, rank)
    n, m = e.shape(x)[a], e.shape(x)[b]
    length = min(n, m - offset) if offset >= 0 else min(n + offset, m)
    if length <= 0:
        raise Unmappable("an empty diagonal has no NNEF form")
    order = [d for d in range(rank) if d not in (a, b)] + [a, b]
    if order != list(range(rank)):
        x = e.op("transpose", x, axes=order)
    flat = e.op("reshape", x, shape=[e.shape(x)[d] for d in range(rank - 2)] + [n * m])
    begin = offset if offset >= 0 else -offset * m
    if e.target == "tract":
        indices = e.constant(torch.arange(begin, begin + length * (m + 1), m + 1), f"constants/{e.node.name}")
        return e.op("gather", flat, indices, axis=rank - 2)
    return e.op("slice", flat, axes=[rank - 2], begin=[begin], end=[begin + (length - 1) * (m + 1) + 1],
                stride=[m + 1])


@export_rule("slice", "aten.flip.default")
def flip(e: Emitter, x: Any, dims: list[int]) -> Any:
    """A reversed axis is a gather of the indices n-1 .. 0 (negative slice strides are not read by every
    consumer)."""
    for a in axes(dims, e.rank(x)):
        n = e.shape(x)[a]
        if n > 1:
            indices = e.constant(torch.arange(n - 1, -1, -1), f"constants/{e.node.name}_{a}")
            x = e.op("gather", x, indices, axis=a)
    return x


@export_rule("concat", "aten.roll.default")
def roll(e: Emitter, x: Any, shifts: list[int], dims: list[int] = ()) -> Any:
    """A roll by s along an axis of length n joins the last s items and the first n - s; without dims, the
    flattened tensor is rolled."""
    shape = list(e.shape(x))
    if not dims:
        flat = e.op("reshape", x, shape=[-1])
        return e.op("reshape", _roll(e, flat, int(shifts[0]), 0), shape=shape)
    for shift, dim in zip(shifts, dims):
        x = _roll(e, x, int(shift), axis(dim, len(shape)))
    return x


def _roll(e: Emitter, x: Any, shift: int, a: int) -> Any:
    n = e.shape(x)[a]
    shift %= max(n, 1)
    if shift == 0:
        return x
    tail = e.op("slice", x, axes=[a], begin=[n - shift], end=[n])
    head = e.op("slice", x, axes=[a], begin=[0], end=[n - shift])
    return e.op("concat", [tail, head], axis=a)


@export_rule("tile", "aten.expand.default", "aten.expand_copy.default")
def expand(e: Emitter, x: Any, size: list[int], *, implicit: bool = False) -> Any:
    target = _out_shape(e)
    symbolic_out = e.symbolic_out()
    if symbolic_out is not None:
        source = e.symbolic_shape(0) or list(e.shape(x))
        source = [1] * (len(symbolic_out) - len(source)) + list(source)
        if e.target == "tract":  # each broadcast axis tiled by its extent, written as an expression
            x = _lead(e, x, len(symbolic_out))
            repeats = [1 if sympy.expand(sympy.sympify(s) - t) == 0 else e.extent(sympy.sympify(t) / s)
                       for s, t in zip(source, symbolic_out)]
            return e.op("tile", x, repeats=repeats) if any(r != 1 for r in repeats) else e.op("copy", x)
        for s, t in zip(source, symbolic_out):
            if not isinstance(t, int) and sympy.expand(sympy.sympify(s) - t) != 0:
                raise Unmappable(f"broadcasting an axis of extent {e.symbols.show(s)} to the symbolic extent "
                                 f"{e.symbols.show(t)} needs that extent as a number, which standard NNEF cannot "
                                 "read: let an elementwise operation broadcast instead, or export with "
                                 "target='tract'")
    x = _lead(e, x, len(target))
    repeats = [t // s if s != t else 1 for s, t in zip(e.shape(x), target)]
    return e.op("tile", x, repeats=repeats) if any(r != 1 for r in repeats) else e.op("copy", x)


def _lead(e: Emitter, x: Any, rank: int) -> Any:
    if e.rank(x) < rank:
        return e.op("unsqueeze", x, axes=list(range(rank - e.rank(x))))
    return x


@export_rule("tile", "aten.repeat.default")
def repeat(e: Emitter, x: Any, repeats: list[int]) -> Any:
    x = _lead(e, x, len(repeats))
    return e.op("tile", x, repeats=[int(r) for r in repeats])


@export_rule("gather", "aten.index_select.default")
def index_select(e: Emitter, x: Any, dim: int, index: Any) -> Any:
    return e.op("gather", x, index, axis=axis(dim, e.rank(x)))


@export_rule("gather", "aten.index.Tensor")
def index(e: Emitter, x: Any, indices: list[Any]) -> Any:
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    if e.target == "tract" and len(used) > 1 and all(is_ref(i) and e.dtype(i) == "integer" for _, i in used) \
            and [d for d, _ in used] == list(range(used[0][0], used[0][0] + len(used))):
        return _gather_several(e, x, used)
    if len(used) != 1 or not is_ref(used[0][1]) or e.dtype(used[0][1]) != "integer":
        raise Unmappable("only indexing with one integer index tensor has an NNEF form (gather); boolean masks "
                         "and several index tensors do not")
    d, i = used[0]
    return e.op("gather", x, i, axis=d)


def _gather_several(e: Emitter, x: Any, used: list[tuple[int, Any]]) -> Any:
    """`x[i, j]` with index tensors on consecutive axes (the tract target, whose arithmetic is on integers too):
    those axes merged into one, read at the linear index `i * n_j + j` (the extents written as expressions)."""
    first, count = used[0][0], len(used)
    extents = e.symbolic_shape(0) or list(e.shape(x))
    rank = max(e.rank(i) for _, i in used)
    linear = None
    for k, (_, i) in enumerate(used):
        i = _lead(e, i, rank)
        stride = sympy.Mul(*[sympy.sympify(n) for n in extents[first + k + 1:first + count]])
        term = i if stride == 1 else e.op("mul", i, e.extent(stride))
        linear = term if linear is None else e.op("add", linear, term)
    merged = e.op("reshape", x, shape=[-1], axis_start=first, axis_count=count)
    return e.op("gather", merged, linear, axis=first)


@export_rule("gather", "aten.embedding.default")
def embedding(e: Emitter, weight: Any, indices: Any, padding_idx: int = -1, *flags: Any) -> Any:
    return e.op("gather", weight, indices, axis=0)


_BORDERS = {"constant": "constant", "reflect": "reflect", "replicate": "replicate", "circular": None}


@export_rule("pad", "aten.constant_pad_nd.default", "aten.pad.default", "aten.reflection_pad1d.default",
             "aten.reflection_pad2d.default", "aten.reflection_pad3d.default", "aten.replication_pad1d.default",
             "aten.replication_pad2d.default", "aten.replication_pad3d.default")
def pad(e: Emitter, x: Any, pads: list[int], mode: Any = "constant", value: Any = None) -> Any:
    name = e.node.target.__name__
    if name.startswith("constant_pad_nd"):
        mode, value = "constant", mode
    elif name.startswith("reflection"):
        mode = "reflect"
    elif name.startswith("replication"):
        mode = "replicate"
    border = _BORDERS.get(mode)
    if border is None:
        raise Unmappable(f"padding mode {mode!r} has no NNEF border (constant, reflect and replicate do)")
    if any(p < 0 for p in pads):
        raise Unmappable("negative padding (cropping) is not an NNEF pad; use slicing")
    rank = e.rank(x)
    padding = [(0, 0)] * rank
    for i in range(len(pads) // 2):  # torch lists (before, after) pairs from the last axis backwards
        padding[rank - 1 - i] = (int(pads[2 * i]), int(pads[2 * i + 1]))
    value = 0.0 if value is None else float(value)
    if e.dtype(x) != "scalar":
        raise Unmappable("NNEF pads scalar tensors only")
    return e.op("pad", x, padding=padding, border=border, value=value)


@export_rule("constant", "aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.scalar_tensor.default",
             "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default", "aten.new_zeros.default",
             "aten.new_ones.default", "aten.new_full.default")
def full(e: Emitter, *args: Any, **kwargs: Any) -> Any:
    out = e.out
    name = e.node.target.__name__.split(".")[0]
    if "zeros" in name:
        value = 0
    elif "ones" in name:
        value = 1
    elif name == "scalar_tensor":
        value = args[0]
    elif name in ("full_like", "new_full"):
        value = args[1] if name == "full_like" else args[2]
    else:
        value = args[1]
    kind = nnef_type(out.dtype)
    if e.target == "tract":  # tract has no `constant`: one value as a variable, tiled to the (symbolic) shape
        return _tiled_value(e, value, out)
    return e.op("constant", shape=[int(d) for d in out.shape] or [1], value=[literal(value, kind)], generic=kind,
                out_shape=tuple(int(d) for d in out.shape) or (1,)) if out.dim() > 0 else \
        _scalar_constant(e, literal(value, kind), kind)


def _tiled_value(e: Emitter, value: Any, out: Any) -> Any:
    shape = e.symbols.shape(e.node) if e.symbols else None
    shape = shape if shape is not None else [int(d) for d in out.shape]
    one = e.variable(f"constants/{e.node.name}", torch.full([1] * max(len(shape), 1), value, dtype=out.dtype))
    if not shape:
        return e.op("squeeze", one, axes=[0])
    repeats = [e.extent(d) for d in shape]
    return e.op("tile", one, repeats=repeats) if any(r != 1 for r in repeats) else one


def _scalar_constant(e: Emitter, value: Any, kind: str) -> Any:
    one = e.op("constant", shape=[1], value=[value], generic=kind, out_shape=(1,))
    return e.op("squeeze", one, axes=[0])


@export_rule("constant", "aten.arange.start_step", "aten.arange.default", "aten.arange.start")
def arange(e: Emitter, *args: Any, **kwargs: Any) -> Any:
    if any(isinstance(a, SymValue) for a in args):  # the tract target (a standard one refused it): tract's range
        return _range(e, *[a for a in args if isinstance(a, (int, float, SymValue))])
    start, end, step = 0, None, 1
    numbers = [a for a in args if isinstance(a, (int, float))]
    if len(numbers) == 1:
        end = numbers[0]
    elif len(numbers) >= 2:
        start, end = numbers[0], numbers[1]
        step = numbers[2] if len(numbers) > 2 else 1
    values = torch.arange(start, end, step, dtype=e.out.dtype)
    return e.constant(values, f"constants/{e.node.name}")


def _range(e: Emitter, *numbers: Any) -> Any:
    start, end, step = (0, numbers[0], 1) if len(numbers) == 1 else (*numbers[:2], numbers[2] if len(numbers) > 2
                                                                       else 1)
    if any(isinstance(n, float) for n in (start, end, step)):
        raise Unmappable("tract's range counts in integers; an arange over floats with a symbolic end has no form")
    length = e.symbols.shape(e.node)
    out_shape = (e.symbols.value(length[0], e.symbols.examples),) if length else tuple(int(d) for d in e.out.shape)
    r = e.op("tract_core_range", e.extent(start), e.extent(end), e.extent(step), out_shape=out_shape)
    if e.out.dtype.is_floating_point:
        return e.op("tract_core_cast", r, to="f32", generic="scalar", out_shape=out_shape)
    return r


@export_rule("cast", "aten._to_copy.default", "aten.to.dtype", "aten.type_as.default")
def to_copy(e: Emitter, x: Any, *args: Any, **kwargs: Any) -> Any:
    target = nnef_type(e.out.dtype)
    if target == e.dtype(x):
        return x
    return e.op("cast", x, generic=target)


@export_rule("copy", "aten.lift_fresh_copy.default", "aten.detach.default", "aten.contiguous.default",
             "aten.dropout.default", "aten.alias_copy.default", "aten.clone.default", "aten.alias.default")
def identity(e: Emitter, x: Any, *args: Any, **kwargs: Any) -> Any:
    """Operations that only copy or re-stride: the NNEF tensor is passed on unchanged."""
    name = e.node.target.__name__
    if name.startswith("dropout") and len(args) >= 2 and args[1] and args[0] > 0:
        raise Unmappable("dropout in training mode is random and has no NNEF form; export the module in eval() "
                         "mode, or with p=0")
    return x
