"""Layers: matrix products, linear, convolutions, pooling, up-sampling and attention, as the high-level NNEF ops
accelerators pattern-match."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import sympy

from nnef_torch.exporter.emitter import FLOAT_MAX
from nnef_torch.exporter.rules.common import Emitter, Unmappable, align, axis, is_ref, pairs
from nnef_torch.exporter.rules.reduce import _row
from nnef_torch.exporter.rules.sampling import antialias_matrix, linear_matrix, resample, scale_factors, tent
from nnef_torch.exporter.symbolic import reshape_steps
from nnef_torch.ops.registry import export_rule


@export_rule("matmul", "aten.mm.default", "aten.bmm.default")
def mm(e: Emitter, a: Any, b: Any) -> Any:
    return e.op("matmul", a, b)


@export_rule("matmul", "aten.addmm.default")
def addmm(e: Emitter, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    product = e.op("matmul", a, b)
    if alpha != 1:
        product = e.op("mul", product, float(alpha))
    if beta != 1:
        bias = e.op("mul", bias, float(beta)) if is_ref(bias) else bias * beta
    product, bias = align(e, product, bias)
    return e.op("add", product, bias)


@export_rule("linear", "aten.linear.default")
def linear(e: Emitter, x: Any, weight: Any, bias: Any = None) -> Any:
    """`linear` takes [batch, in]; other ranks are flattened to two axes and back."""
    shape = e.shape(x)
    symbolic = e.symbolic_shape(0)
    if len(shape) > 2 and symbolic is not None and (bias is None or e.rank(bias) == 1):
        return _symbolic_linear(e, x, weight, bias, symbolic)
    if len(shape) == 1:
        flat = e.op("unsqueeze", x, axes=[0])
    elif len(shape) > 2:
        flat = e.op("reshape", x, shape=[-1, shape[-1]])
    else:
        flat = x
    if bias is not None and e.rank(bias) > 2:
        raise Unmappable(f"a bias of shape {list(e.shape(bias))}; linear's bias is [C], [1, C] or [batch, C]")
    y = e.op("linear", flat, weight, _row(e, bias) if e.rank(bias) == 1 else 0.0 if bias is None else bias)
    if len(shape) == 1:
        return e.op("squeeze", y, axes=[0])
    if len(shape) > 2:
        return e.op("reshape", y, shape=list(shape[:-1]) + [e.shape(weight)[0]])
    return y


def _symbolic_linear(e: Emitter, x: Any, weight: Any, bias: Any, shape: list[Any]) -> Any:
    """`linear` of an input with symbolic leading extents. Flattened to [-1, in] and back when the leading axes
    hold one symbolic extent (the reshape back infers it); with more, a 1x1 convolution over the features moved
    to the channel axis, which keeps every leading extent as it is."""
    leading = shape[:-1]
    try:
        steps = reshape_steps([sympy.Mul(*leading)], leading, e.symbols.examples, e.symbols.show)
    except Unmappable:
        return _pointwise_conv(e, x, weight, bias)
    flat = e.op("reshape", x, shape=[-1, e.shape(x)[-1]])
    y = e.op("linear", flat, weight, _row(e, bias) if bias is not None else 0.0)
    for start, count, target in steps:
        y = e.op("reshape", y, shape=target, axis_start=start, axis_count=count)
    return y


def _pointwise_conv(e: Emitter, x: Any, weight: Any, bias: Any) -> Any:
    rank = e.rank(x)
    order = [0, rank - 1] + list(range(1, rank - 1))
    moved = e.op("transpose", x, axes=order)
    filter_ = e.op("unsqueeze", weight, axes=list(range(2, rank)))
    y = e.op("conv", moved, filter_, _row(e, bias) if bias is not None else 0.0)
    return e.op("transpose", y, axes=[0] + list(range(2, rank)) + [1])


def _spatial(values: Any, k: int) -> list[int]:
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    return values * k if len(values) == 1 else values


@export_rule("conv", "aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default")
def conv(e: Emitter, x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
         groups: int = 1) -> Any:
    return _convolution(e, x, weight, bias, stride, padding, dilation, False, 0, groups)


@export_rule("conv", "aten.conv1d.padding", "aten.conv2d.padding", "aten.conv3d.padding")
def conv_same(e: Emitter, x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: str = "valid",
              dilation: Any = 1, groups: int = 1) -> Any:
    k = e.rank(x) - 2
    if padding == "valid":
        pads: Any = [0] * k
    else:  # 'same' (stride 1): torch puts the odd extra cell at the end, as NNEF's automatic padding does
        dilation_ = _spatial(dilation, k)
        total = [(f - 1) * d for f, d in zip(e.shape(weight)[2:], dilation_)]
        pads = [(t // 2, t - t // 2) for t in total]
    return _convolution(e, x, weight, bias, stride, pads, dilation, False, 0, groups)


@export_rule("deconv", "aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input")
def conv_transpose(e: Emitter, x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                   output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    return _convolution(e, x, weight, bias, stride, padding, dilation, True, output_padding, groups)


@export_rule("conv", "aten.convolution.default")
def convolution(e: Emitter, x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                transposed: bool, output_padding: Any, groups: int) -> Any:
    return _convolution(e, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _convolution(e: Emitter, x: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                 transposed: bool, output_padding: Any, groups: int) -> Any:
    k = e.rank(x) - 2
    if k < 1:
        raise Unmappable("convolution of an input without batch and channel axes (unbatched) has no NNEF form")
    stride, dilation = _spatial(stride, k), _spatial(dilation, k)
    if padding and isinstance(padding[0] if isinstance(padding, (list, tuple)) else None, tuple):
        pads = list(padding)
    else:
        pads = pairs(_spatial(padding, k))
    b = _row(e, bias) if bias is not None else 0.0
    if not transposed:
        return e.op("conv", x, weight, b, padding=pads, stride=stride, dilation=dilation, groups=int(groups))
    out = [int(d) for d in e.out.shape]
    return e.op("deconv", x, weight, b, padding=pads, stride=stride, dilation=dilation, output_shape=out,
                groups=int(groups))


def _window(e: Emitter, x: Any, kernel: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
            ) -> tuple[list[int], list[int], list[tuple[int, int]], list[int], int]:
    """NNEF window attributes over all axes (batch and channel get size 1) and how many cells of extra padding
    ceil_mode adds at the end of the spatial axes."""
    k = len(_spatial(kernel, 1)) if isinstance(kernel, (list, tuple)) and len(kernel) > 1 else e.rank(x) - 2
    kernel = _spatial(kernel, k)
    stride = _spatial(stride, k) if stride not in (None, []) else list(kernel)
    padding, dilation = _spatial(padding, k), _spatial(dilation, k)
    lead = e.rank(x) - k
    pads, extra = [], 0
    for n, f, s, p, d in zip(e.shape(x)[lead:], kernel, stride, padding, dilation):
        fd = (f - 1) * d + 1
        out = (n + 2 * p - fd) // s + 1
        if ceil_mode:
            out = -(-(n + 2 * p - fd) // s) + 1
            if (out - 1) * s >= n + p:  # torch drops a last window that starts in the padding
                out -= 1
        q = (out - 1) * s + fd - n - p
        extra = max(extra, q - p)
        pads.append((p, q))
    return ([1] * lead + kernel, [1] * lead + stride, [(0, 0)] * lead + pads, [1] * lead + dilation, extra)


@export_rule("max_pool", "aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default",
             "aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default")
def max_pool(e: Emitter, x: Any, kernel: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
             ceil_mode: bool = False) -> Any:
    size, stride_, pads, dilation_, _ = _window(e, x, kernel, stride, padding, dilation, ceil_mode)
    y = e.op("max_pool", x, size=size, border="ignore", padding=pads, stride=stride_, dilation=dilation_)
    if e.node.target.__name__.startswith(("max_pool2d_with", "max_pool3d_with")):
        if len(e.node.users) and any(u.args[1] == 1 for u in e.node.users if u.target.__name__ == "getitem"):
            raise Unmappable("max pooling indices have no exact NNEF form here (argmax_pool indexes differently)")
        return y, None
    return y


@export_rule("avg_pool", "aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default")
def avg_pool(e: Emitter, x: Any, kernel: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
             count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    if divisor_override is not None:
        raise Unmappable("avg_pool with divisor_override has no NNEF form")
    size, stride_, pads, dilation, extra = _window(e, x, kernel, stride, padding, 1, ceil_mode)
    if count_include_pad and extra > 0:
        raise Unmappable("avg_pool with ceil_mode and count_include_pad divides edge windows by a count NNEF "
                         "cannot express; use count_include_pad=False or ceil_mode=False")
    border = "constant" if count_include_pad and any(p != (0, 0) for p in pads) else "ignore"
    return e.op("avg_pool", x, size=size, border=border, padding=pads, stride=stride_, dilation=dilation)


def _adaptive(e: Emitter, x: Any, output_size: Sequence[Any], reduce: str, pool: str) -> Any:
    shape = e.shape(x)
    k = len(output_size)
    lead = len(shape) - k
    outs = [shape[lead + i] if o is None else int(o) for i, o in enumerate(output_size)]
    if all(o == 1 for o in outs):
        return e.op(reduce, x, axes=list(range(lead, len(shape))))
    if all(n % o == 0 for n, o in zip(shape[lead:], outs)):
        size = [1] * lead + [n // o for n, o in zip(shape[lead:], outs)]
        return e.op(pool, x, size=size, stride=size, border="ignore" if pool == "max_pool" else "constant")
    for i, o in enumerate(outs):  # uneven windows: one reduction per output cell along each axis, concatenated
        a, n = lead + i, e.shape(x)[lead + i]
        if n == o:
            continue
        cells = []
        for j in range(o):
            begin, end = (j * n) // o, -(-((j + 1) * n) // o)
            part = e.op("slice", x, axes=[a], begin=[begin], end=[end])
            cells.append(e.op(reduce, part, axes=[a]))
        x = e.op("concat", cells, axis=a)
    return x


@export_rule("avg_pool", "aten.adaptive_avg_pool1d.default", "aten.adaptive_avg_pool2d.default",
             "aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool2d.default")
def adaptive_avg_pool(e: Emitter, x: Any, output_size: Any) -> Any:
    return _adaptive(e, x, output_size, "mean_reduce", "avg_pool")


@export_rule("max_pool", "aten.adaptive_max_pool1d.default", "aten.adaptive_max_pool2d.default",
             "aten.adaptive_max_pool3d.default")
def adaptive_max_pool(e: Emitter, x: Any, output_size: Any) -> Any:
    y = _adaptive(e, x, output_size, "max_reduce", "max_pool")
    if any(u.args[1] == 1 for u in e.node.users if getattr(u.target, "__name__", "") == "getitem"):
        raise Unmappable("adaptive max pooling indices have no NNEF form")
    return y, None


def _factors(e: Emitter, x: Any) -> list[int]:
    lead = 2
    out = [int(d) for d in e.out.shape]
    factors = []
    for n, m in zip(e.shape(x)[lead:], out[lead:]):
        if m % n:
            raise Unmappable(f"up-sampling from {n} to {m} is not by an integer factor, which NNEF needs")
        factors.append(m // n)
    return factors


@export_rule("nearest_upsample", "aten.upsample_nearest1d.vec", "aten.upsample_nearest2d.vec",
             "aten.upsample_nearest3d.vec", "aten.upsample_nearest1d.default", "aten.upsample_nearest2d.default",
             "aten.upsample_nearest3d.default")
def upsample_nearest(e: Emitter, x: Any, *args: Any, **kwargs: Any) -> Any:
    source, target = e.symbolic_shape(0), e.symbolic_out()
    if source is not None or target is not None:
        return _repeat_each(e, x, _symbolic_factors(e, source or list(e.shape(x)), target or _out_shape(e)))
    out = [int(d) for d in e.out.shape][2:]
    if all(m < n and n % m == 0 for n, m in zip(e.shape(x)[2:], out)):
        return e.op("nearest_downsample", x, factor=[n // m for n, m in zip(e.shape(x)[2:], out)])
    return e.op("nearest_upsample", x, factor=_factors(e, x))


def _out_shape(e: Emitter) -> list[int]:
    return [int(d) for d in e.out.shape]


def _symbolic_factors(e: Emitter, source: list[Any], target: list[Any]) -> list[int]:
    factors = []
    for n, m in zip(source[2:], target[2:]):
        ratio = sympy.simplify(sympy.sympify(m) / sympy.sympify(n))
        if not ratio.is_Integer or ratio < 1:
            raise Unmappable(f"up-sampling the extent {e.symbols.show(n)} to {e.symbols.show(m)} is not by an "
                             "integer factor at every size, which NNEF needs")
        factors.append(int(ratio))
    return factors


def _repeat_each(e: Emitter, x: Any, factors: list[int]) -> Any:
    """Nearest up-sampling by integer factors as each item repeated, one spatial axis at a time: a unit axis after
    it, tiled by its factor, then merged into it. Written relative to the input (it reads at any extent), in
    operations every consumer implements (`nearest_upsample`'s definition reads extents with `length_of`), with
    at most one axis more than the input (the Khronos executor tiles up to rank 5)."""
    spatial = [2 + k for k in range(len(factors)) if factors[k] != 1]
    if not spatial:
        return e.op("copy", x)
    for a in spatial:
        x = e.op("unsqueeze", x, axes=[a + 1])
        repeats = [1] * e.rank(x)
        repeats[a + 1] = factors[a - 2]
        x = e.op("reshape", e.op("tile", x, repeats=repeats), shape=[-1], axis_start=a, axis_count=2)
    return x


def _integer_factors(sizes: list[tuple[int, int, float | None]], align_corners: bool) -> list[int] | None:
    """The factor of each axis where linear up-sampling is `multilinear_upsample`'s: an integer factor that torch
    also samples with (the output size over the input size unless an explicit scale factor differs; aligned
    corners ignore it, and an axis of unchanged size is copied whatever the scale), else None."""
    factors = []
    for n_in, n_out, scale in sizes:
        if n_out % n_in:
            return None
        factor = n_out // n_in
        if not (align_corners or factor == 1 or scale is None or scale <= 0 or float(scale) == factor):
            return None
        factors.append(factor)
    return factors


def _linear(e: Emitter, x: Any, align_corners: bool, scales: tuple[Any, ...], antialias: bool) -> Any:
    sizes = list(zip(e.shape(x)[2:], (int(d) for d in e.out.shape[2:]), scale_factors(scales, e.rank(x) - 2)))
    factors = None if antialias else _integer_factors(sizes, bool(align_corners))
    if factors is not None and all(f == 1 for f in factors):
        return e.op("copy", x)
    if factors is not None:
        method = "aligned" if align_corners else "symmetric"
        return e.op("multilinear_upsample", x, factor=factors, method=method, border="replicate")
    if antialias:
        matrices = [antialias_matrix(n_in, n_out, bool(align_corners), s, tent, 2) for n_in, n_out, s in sizes]
    else:
        matrices = [linear_matrix(n_in, n_out, bool(align_corners), s) for n_in, n_out, s in sizes]
    return resample(e, x, matrices)


@export_rule("multilinear_upsample", "aten.upsample_linear1d.vec", "aten.upsample_bilinear2d.vec",
             "aten.upsample_trilinear3d.vec", "aten.upsample_linear1d.default", "aten.upsample_bilinear2d.default",
             "aten.upsample_trilinear3d.default")
def upsample_linear(e: Emitter, x: Any, output_size: Any, align_corners: bool, *scales: Any) -> Any:
    """Linear, bilinear and trilinear resampling: `multilinear_upsample` by integer factors, any other size
    (fractional factors, down-sampling, explicit sizes) with one constant interpolation matrix per spatial axis
    applied by `matmul` (sampling.py's `resample`), its weights those of torch's CPU kernel."""
    return _linear(e, x, align_corners, scales, antialias=False)


@export_rule("matmul", "aten._upsample_bilinear2d_aa.vec", "aten._upsample_bilinear2d_aa.default")
def upsample_bilinear_aa(e: Emitter, x: Any, output_size: Any, align_corners: bool, *scales: Any) -> Any:
    """Antialiased bilinear resampling at any size: per-axis matrices of torch's triangle filter widened by the
    down-sampling step. The re-imported gradient is the adjoint of this forward; torch's own backward differs
    where an axis keeps its size under an explicit scale factor other than 1 (its forward copies that axis, its
    backward interpolates it)."""
    return _linear(e, x, align_corners, scales, antialias=True)


@export_rule("scaled_dot_product_attention", "aten.scaled_dot_product_attention.default")
def attention(e: Emitter, q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
              is_causal: bool = False, *, scale: Any = None, enable_gqa: bool = False) -> Any:
    if dropout_p:
        raise Unmappable("attention dropout is random and has no NNEF form; export in eval() mode")
    grouped = enable_gqa and e.shape(q)[-3] != e.shape(k)[-3]
    if grouped and (e.rank(q) != 4 or e.shape(q)[-3] % e.shape(k)[-3]):
        raise Unmappable("grouped-query attention is exported for [batch, heads, length, size] inputs whose query "
                         "heads are a multiple of the key heads")
    rank = e.rank(q)
    length, source = e.shape(q)[-2], e.shape(k)[-2]
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(e.shape(q)[-1])
    mask: Any = 0.0
    if is_causal:
        import torch
        causal = torch.ones(length, source, dtype=torch.bool).tril()
        values = torch.zeros(length, source).masked_fill(~causal, -FLOAT_MAX)
        mask = e.constant(values, f"constants/{e.node.name}_causal_mask")
    elif attn_mask is not None:
        mask = attn_mask
        if e.dtype(mask) == "logical":
            mask = e.op("select", mask, 0.0, -FLOAT_MAX)
    if is_ref(mask) and e.rank(mask) < rank:
        mask = e.op("unsqueeze", mask, axes=list(range(rank - e.rank(mask))))
    out_shape = tuple(e.shape(q)[:-1]) + (e.shape(v)[-1],)
    if grouped:
        return _grouped_attention(e, q, k, v, mask, scale, out_shape)
    return e.op("scaled_dot_product_attention", q, k, v, mask, scale=scale, axis=rank - 1, out_shape=out_shape)


def _grouped_attention(e: Emitter, q: Any, k: Any, v: Any, mask: Any, scale: float, out_shape: tuple) -> Any:
    """Grouped-query attention without copies of the key-value heads: the query heads [B, H, S, D] as groups
    [B, KV, H/KV, S, D] against keys and values [B, KV, 1, T, D] (matmul broadcasts the group axis); measured 2x
    faster per decoded token in tract than repeating the cache (bench/bench_tract_transformer_ops.py)."""
    heads, kv_heads = e.shape(q)[1], e.shape(k)[1]
    groups = heads // kv_heads
    q5 = e.op("reshape", q, shape=[kv_heads, groups], axis_start=1, axis_count=1)
    k5, v5 = e.op("unsqueeze", k, axes=[2]), e.op("unsqueeze", v, axes=[2])
    if is_ref(mask):
        mask = e.op("reshape", mask, shape=[kv_heads, groups], axis_start=1, axis_count=1) \
            if e.shape(mask)[1] == heads else e.op("unsqueeze", mask, axes=[2])
    grouped_shape = (out_shape[0], kv_heads, groups, *out_shape[2:])
    out = e.op("scaled_dot_product_attention", q5, k5, v5, mask, scale=scale, axis=4, out_shape=grouped_shape)
    return e.op("reshape", out, shape=[heads], axis_start=1, axis_count=2)


__all__ = ["axis"]


@export_rule("matmul", "aten.matmul.default")
def matmul(e: Emitter, a: Any, b: Any) -> Any:
    """torch.matmul without its decomposition: equal ranks, or [..., k] @ [k, n] through a 2-D product."""
    ra, rb = e.rank(a), e.rank(b)
    if ra == rb >= 2 and e.shape(a)[:-2] == e.shape(b)[:-2]:
        return e.op("matmul", a, b)
    if ra > 2 and rb == 2:
        flat = e.op("reshape", a, shape=[-1, e.shape(a)[-1]])
        product = e.op("matmul", flat, b)
        return e.op("reshape", product, shape=list(e.shape(a)[:-1]) + [e.shape(b)[-1]])
    raise Unmappable("this matmul broadcasting is exported from its decomposition")


@export_rule("matmul", "aten.bilinear.default")
def bilinear(e: Emitter, x1: Any, x2: Any, weight: Any, bias: Any = None) -> Any:
    """nn.Bilinear, y[o] = x1 . W[o] . x2 + b[o], as two matrix products: x1 times W (in1 x out*in2), then each
    row's out x in2 block times x2."""
    lead = list(e.shape(x1)[:-1])
    out, in1, in2 = e.shape(weight)
    if e.rank(x1) != 2:
        x1 = e.op("reshape", x1, shape=[-1, in1])
    if e.rank(x2) != 2:
        x2 = e.op("reshape", x2, shape=[-1, in2])
    y = _bilinear(e, x1, weight, x2)
    if bias is not None:
        y = e.op("add", y, _row(e, bias))
    return y if len(lead) == 1 else e.op("reshape", y, shape=lead + [out])


def _bilinear(e: Emitter, x1: Any, weight: Any, x2: Any) -> Any:
    """x1 [B, in1], weight [out, in1, in2], x2 [B, in2] -> [B, out]."""
    out, in1, in2 = e.shape(weight)
    batch = e.shape(x1)[0]
    w = e.op("reshape", e.op("transpose", weight, axes=[1, 0, 2]), shape=[in1, out * in2])
    t = e.op("reshape", e.op("matmul", x1, w), shape=[batch, out, in2])
    y = e.op("matmul", t, e.op("unsqueeze", x2, axes=[2]))
    return e.op("squeeze", y, axes=[2])


@export_rule("matmul", "aten._trilinear.default")
def trilinear(e: Emitter, i1: Any, i2: Any, i3: Any, expand1: Sequence[int], expand2: Sequence[int],
              expand3: Sequence[int], sumdim: Sequence[int], unroll_dim: int = 1) -> Any:
    """torch's _trilinear (the decomposition of bilinear): the three inputs with singleton axes inserted at
    `expand*`, multiplied, summed over `sumdim`. bilinear's own pattern is written as two matrix products."""
    if ([list(expand1), list(expand2), list(expand3), list(sumdim)] == [[1, 3], [0], [1, 2], [2, 3]]
            and (e.rank(i1), e.rank(i2), e.rank(i3)) == (2, 3, 2)):
        return _bilinear(e, i1, i2, i3)
    terms = [e.op("unsqueeze", t, axes=sorted(int(d) for d in x)) if len(x) else t
             for t, x in ((i1, expand1), (i2, expand2), (i3, expand3))]
    product = e.op("mul", e.op("mul", terms[0], terms[1]), terms[2])
    if not len(sumdim):
        return product
    summed = e.op("sum_reduce", product, axes=sorted(int(d) for d in sumdim))
    return e.op("squeeze", summed, axes=sorted(int(d) for d in sumdim))
