"""Import rules of LightNet's tensor ops: create, zeros, arange, rearange, forward, concat, reshape, transpose, slice,
resize, upsample, elew, maxreduce, maxreduce_arg and dot_product."""
from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError
from nnef_torch.formats.lightnet.node import Context, LnNode
from nnef_torch.formats.lightnet.optypes import DTYPES
from nnef_torch.formats.lightnet.rules.common import LIGHTNET, constant, nnef_type, storage, tl_convert
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.limits import check_shape
from nnef_torch.ops.registry import import_rule

_ELEW = {"TL_MUL": "mul", "TL_DIV": "div", "TL_SUM": "add", "TL_SUB": "sub", "TL_MAX": "max", "TL_MIN": "min",
         "TL_POW": "pow"}


# -- tensors made by ops with no inputs --
@import_rule("variable", LIGHTNET, "create")
def create(b: Builder, node: LnNode) -> Any:
    """A tensor the caller fills (`inputs=`: a graph input), or a constant (a variable: a Parameter of the module
    for floating types) holding the weights (`from_file`), random numbers uniform in `ran` (when `ran` is not
    [0, 0]; drawn from a generator seeded by the tensor's name, so a model loads the same every time), zeros
    (`data: [0]`) or `data`, converted to `dtype`."""
    dtype, dims = node.str("dtype"), node.dims("dims")
    name = node.tensor("dst")
    node.out_dtypes["dst"] = dtype
    ran = node.doubles("ran")
    if ran[0] > ran[1]:
        raise node.fail(f"param 'ran' {ran} should not decrease (ran[0] <= ran[1])")
    context = node.context
    if name in context.externals:
        return context.externals[name]
    count = math.prod(dims)
    if node.bool("from_file"):
        values = _from_file(node, name, dtype, dims)
    elif ran != [0.0, 0.0]:
        generator = np.random.default_rng(zlib.crc32(name.encode("utf-8", "surrogatepass")))
        values = tl_convert(generator.uniform(ran[0], ran[1], node.computed("the random numbers of 'ran'", count)),
                            dtype).reshape(dims)
    else:
        data = node.doubles("data")
        if data == [0.0]:
            values = np.zeros(node.computed("the zeros of 'data': [0]", count), storage(dtype)).reshape(dims)
        elif len(data) != count:
            raise node.fail(f"'data' holds {len(data)} numbers, but 'dims' {dims} make {count} (data: [0] means "
                            "zeros)")
        else:
            values = tl_convert(data, dtype).reshape(dims)
    label = _label(name, context)
    return b.variable(label, nnef_type(dtype), dims, values, name=label)


def _from_file(node: LnNode, name: str, dtype: str, dims: list[int]) -> np.ndarray | None:
    """The weights of tensor `name`, checked as LightNet checks them; None (with the problem recorded) where they
    are missing or do not fit."""
    weights = node.context.weights
    count = math.prod(dims)
    source = weights.file or "the params mapping"
    if name not in weights:
        if weights.file is None and not weights.arrays and weights.origin is None:
            why = "no weights were given (params=)"
        else:
            why = f"it is not in {source}"
        node.context.problems.append(f"'{name}' ({node.where}, from_file: true): {why}; give its data, or name it "
                                     "in inputs=[...] if the caller fills it")
        return None
    weights.used.add(name)
    array = weights.arrays[name]
    if array.size != count:
        node.context.problems.append(f"'{name}' in {source} holds {array.size} numbers, but 'dims' {dims} of "
                                     f"{node.where} make {count}")
        return None
    if weights.wts and array.dtype != np.dtype(DTYPES[dtype]):
        code = 0 if array.dtype.kind == "f" else 2
        node.context.problems.append(f"'{name}' in {source} is {array.dtype} (type {code}), but {node.where} "
                                     f"creates {dtype}: the types must match")
        return None
    kind = nnef_type(dtype)
    if kind != "scalar" and array.dtype.kind == "f":
        node.context.problems.append(f"'{name}' in {source} holds floating numbers, but {node.where} creates {dtype}")
        return None
    return array.reshape(dims).astype(storage(dtype))


def _label(name: str, context: Context) -> str:
    """The variable label of a tensor: its name with characters labels cannot hold replaced, unique ignoring
    case (labels name files). The number tried last after each base is kept, so that many names of one base
    take linear time."""
    label = "".join(c if c.isascii() and c.isalnum() or c in "_-." else "_" for c in name).strip(".") or "t"
    base, taken = label, context.taken_labels
    n = context.label_numbers.get(base.lower(), 1)
    while label.lower() in taken:
        label, n = f"{base}_{n}", n + 1
    if label != base:
        context.label_numbers[base.lower()] = n
    taken.add(label.lower())
    context.labels[name] = label
    return label


@import_rule("constant", LIGHTNET, "zeros")
def zeros(b: Builder, node: LnNode) -> Any:
    """A constant of zeros (made when the module is, so counted as computed items)."""
    dtype, dims = node.str("dtype"), node.dims("dims")
    node.out_dtypes["dst"] = dtype
    if nnef_type(dtype) == "scalar":  # one literal, the tensor made when the module is
        node.computed("the zeros of 'dims'", math.prod(dims))
    else:  # every item a literal (the Khronos executor aborts on one repeated integer)
        node.literals("the zeros of 'dims'", math.prod(dims))
    return constant(b, np.zeros(1, storage(dtype)), dtype, dims)


def _range_length(node: LnNode, dtype: str) -> int:
    """The items of a range: ceil((stop - start) / step), once positive and within the computed items."""
    start, stop, step = node.double("start"), node.double("stop"), node.double("step")
    if step == 0:
        raise node.fail("param 'step' should not be 0")
    if not stop > start:
        raise node.fail(f"param 'stop' ({stop}) should be greater than 'start' ({start})")
    info = np.finfo(DTYPES[dtype]) if np.dtype(DTYPES[dtype]).kind == "f" else \
        np.iinfo(DTYPES[dtype]) if np.dtype(DTYPES[dtype]).kind in "iu" else None
    if info is not None:
        for key, value in (("start", start), ("stop", stop), ("step", step)):
            if not float(info.min) <= value <= float(info.max):
                raise node.fail(f"param '{key}' ({value}) is out of the range of {dtype}")
    span = (stop - start) / step
    if not span > 0:
        raise node.fail(f"start {start}, stop {stop} and step {step} give no items")
    if not math.isfinite(span):
        raise node.fail(f"start {start}, stop {stop} and step {step} give more items than a double counts")
    return math.ceil(span)


def _range(node: LnNode, dtype: str, length: int) -> np.ndarray:
    """The `length` items start, start + step, ... in `dtype`."""
    start, step = node.double("start"), node.double("step")
    node.literals("the items of start, stop and step", length)
    return tl_convert(start + step * np.arange(length, dtype=np.float64), dtype)


@import_rule("constant", LIGHTNET, "arange")
def arange(b: Builder, node: LnNode) -> Any:
    """start, start + step, ... below stop: ceil((stop - start) / step) items of `dtype`."""
    dtype = node.str("dtype")
    node.out_dtypes["dst"] = dtype
    return constant(b, _range(node, dtype, _range_length(node, dtype)), dtype)


@import_rule("constant", LIGHTNET, "rearange")
def rearange(b: Builder, node: LnNode) -> Any:
    """LightNet's in-place arange: the vector `src` (of ceil((stop - start) / step) items) rewritten with start,
    start + step, ... in its own dtype; its former values are not read."""
    node.rank("src", 1)
    dtype = node.dtype("src")
    length = _range_length(node, dtype)
    if length != node.shape("src")[0]:
        raise node.fail(f"'src' has {node.shape('src')[0]} items, but start, stop and step make {length}")
    return constant(b, _range(node, dtype, length), dtype)


# -- reshaping --
@import_rule("copy", LIGHTNET, "forward")
def forward(b: Builder, node: LnNode) -> Any:
    return b.op("copy", node.input("src"))


@import_rule("concat", LIGHTNET, "concat")
def concat(b: Builder, node: LnNode) -> Any:
    node.same_type("src1", "src2")
    first, second = node.shape("src1"), node.shape("src2")
    axis = node.axis("axis", len(first))
    if len(second) != len(first) or any(a != c for i, (a, c) in enumerate(zip(first, second)) if i != axis):
        raise node.fail(f"'src1' {list(first)} and 'src2' {list(second)} should have the same shape, except in "
                        f"dimension {axis} ('axis')")
    return b.op("concat", [node.input("src1"), node.input("src2")], axis=axis)


@import_rule("reshape", LIGHTNET, "reshape")
def reshape(b: Builder, node: LnNode) -> Any:
    dims, shape = node.dims("dims"), node.shape("src")
    if math.prod(dims) != math.prod(shape):
        raise node.fail(f"'src' {list(shape)} has {math.prod(shape)} items, the reshaped {dims} "
                        f"{math.prod(dims)}")
    return b.op("reshape", node.input("src"), shape=dims)


@import_rule("transpose", LIGHTNET, "transpose")
def transpose(b: Builder, node: LnNode) -> Any:
    axes, rank = node.ints("axes"), len(node.shape("src"))
    if sorted(axes) != list(range(rank)):
        raise node.fail(f"param 'axes' {axes} should be a permutation of the {rank} axes of 'src'")
    return b.op("transpose", node.input("src"), axes=axes)


@import_rule("slice", LIGHTNET, "slice")
def slice_(b: Builder, node: LnNode) -> Any:
    shape = node.shape("src")
    axis = node.axis("axis", len(shape))
    start, length = node.int("start"), node.int("len")
    if start >= shape[axis] or start + length > shape[axis]:
        raise node.fail(f"'start' {start} and 'len' {length} exceed dimension {axis} of 'src' ({shape[axis]})")
    return b.op("slice", node.input("src"), axes=[axis], begin=[start], end=[start + length])


# -- resizing --
def nearest_indices(old: int, new: int) -> np.ndarray:
    """The source index of each of `new` items (TensorLight's nearest resize: the centre of each target item mapped
    into the source, in float arithmetic, rounded half away from zero)."""
    scale = np.float64(np.float32(old) / np.float32(new))
    mapped = ((np.arange(new, dtype=np.float64) + 0.5) * scale - 0.5).astype(np.float32).astype(np.float64)
    rounded = np.sign(mapped) * np.floor(np.abs(mapped) + 0.5)
    return np.clip(rounded, 0, old - 1).astype(np.int64)


def linear_weights(old: int, new: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first index, second index, weight of the second) of each of `new` items, interpolating linearly between
    the items around the centre of each target item mapped into the source (half-pixel centres), clamped at the
    ends: TensorLight declares TL_LINEAR without defining it; this is ONNX Resize's default."""
    mapped = np.clip((np.arange(new, dtype=np.float64) + 0.5) * old / new - 0.5, 0, old - 1)
    first = np.floor(mapped).astype(np.int64)
    second = np.minimum(first + 1, old - 1)
    return first, second, (mapped - first).astype(np.float32)


def resize_to(b: Builder, node: LnNode, x: Any, dims: list[int], mode: str) -> Any:
    """`x` resized to `dims`, one changed dimension at a time (gathering the source items); a nearest resize by
    whole factors of the spatial dimensions of an N, C, ... tensor is NNEF's nearest_upsample."""
    shape = b.shape(x)
    changed = [axis for axis, (old, new) in enumerate(zip(shape, dims)) if old != new]
    if not changed:
        return b.op("copy", x)
    node.computed("the source indexes of the resized dimensions", sum(dims[axis] for axis in changed))
    upsampling = mode != "TL_LINEAR" and _upsampling(shape, dims, changed) and nnef_type(node.dtype("src")) == "scalar"
    if not upsampling:  # gathered: the indexes (and the weights of a linear resize) are constants
        node.literals("the source indexes of the resized dimensions",
                      (1 if mode == "TL_NEAREST" else 4) * sum(dims[axis] for axis in changed))
    if mode == "TL_LINEAR":
        node.floating("src")
    elif upsampling:
        return b.op("nearest_upsample", x, factor=[new // old for old, new in zip(shape[2:], dims[2:])])
    rank = len(shape)
    for axis in changed:
        old, new = shape[axis], dims[axis]
        if mode == "TL_NEAREST":
            x = b.op("gather", x, constant(b, nearest_indices(old, new), "TL_INT64"), axis=axis)
            continue
        first, second, weight = linear_weights(old, new)
        layout = [1] * axis + [new] + [1] * (rank - axis - 1)
        low = b.op("gather", x, constant(b, first, "TL_INT64"), axis=axis)
        high = b.op("gather", x, constant(b, second, "TL_INT64"), axis=axis)
        x = b.op("add", b.op("mul", low, constant(b, (1.0 - weight).reshape(layout), "TL_FLOAT")),
                 b.op("mul", high, constant(b, weight.reshape(layout), "TL_FLOAT")))
    return x


def _upsampling(shape: tuple[int, ...], dims: list[int], changed: list[int]) -> bool:
    """Whether a nearest resize is an upsampling by whole factors of the dimensions after the first two."""
    if len(shape) < 3 or min(changed) < 2 or any(dims[axis] % shape[axis] for axis in changed):
        return False
    return all(np.array_equal(nearest_indices(shape[axis], dims[axis]),
                              np.arange(dims[axis]) // (dims[axis] // shape[axis])) for axis in changed)


@import_rule("gather", LIGHTNET, "resize")
def resize(b: Builder, node: LnNode) -> Any:
    """Every dimension resized to `dims` (nearest: TensorLight's rounding; linear: half-pixel interpolation)."""
    dims, shape = node.dims("dims"), node.shape("src")
    if len(dims) != len(shape):
        raise node.fail(f"param 'dims' {dims} should have one extent per dimension of 'src' {list(shape)}")
    return resize_to(b, node, node.input("src"), dims, node.str("mode"))


@import_rule("nearest_upsample", LIGHTNET, "upsample")
def upsample(b: Builder, node: LnNode) -> Any:
    """resize to floor(scales[i] * extent[i]), computed in float as LightNet does."""
    scales, shape = [np.float32(scale) for scale in node.param("scales")], node.shape("src")
    if len(scales) != len(shape):
        raise node.fail(f"the length of 'scales' ({len(scales)}) should be the rank of 'src' {list(shape)}")
    with np.errstate(over="ignore"):
        extents = [np.floor(np.float32(scale * np.float32(extent))) for scale, extent in zip(scales, shape)]
    if not all(np.isfinite(extent) for extent in extents):
        raise node.fail(f"'scales' {node.param('scales')} make extents beyond a float of {list(shape)}")
    dims = [int(extent) for extent in extents]
    if any(extent <= 0 for extent in dims):
        raise node.fail(f"'scales' {node.param('scales')} make the empty shape {dims} of {list(shape)}")
    dims = list(check_shape(f"{node.where}: the shape 'scales' make", dims, node.op.location,
                            error=ForeignFormatError))
    return resize_to(b, node, node.input("src"), dims, node.str("mode"))


# -- arithmetic --
@import_rule("add", LIGHTNET, "elew")
def elew(b: Builder, node: LnNode) -> Any:
    """Element-wise TL_SUM, TL_SUB, TL_MUL, TL_DIV, TL_MAX, TL_MIN, TL_POW of two tensors of one shape and dtype
    (TensorLight does not broadcast)."""
    node.same_type("src1", "src2")
    node.same_shape("src1", "src2")
    node.floating("src1", "src2")
    return b.op(_ELEW[node.str("elew_op")], node.input("src1"), node.input("src2"))


@import_rule("max_reduce", LIGHTNET, "maxreduce")
def maxreduce(b: Builder, node: LnNode) -> Any:
    node.floating("src")
    return b.op("max_reduce", node.input("src"), axes=[node.axis("axis", len(node.shape("src")))])


@import_rule("argmax_reduce", LIGHTNET, "maxreduce_arg")
def maxreduce_arg(b: Builder, node: LnNode) -> Any:
    """The maxima along `axis` and their positions (the first of equal maxima), an integer tensor (TL_INT32)."""
    node.floating("src")
    axes = [node.axis("axis", len(node.shape("src")))]
    node.out_dtypes["arg"] = "TL_INT32"
    return b.op("max_reduce", node.input("src"), axes=axes), b.op("argmax_reduce", node.input("src"), axes=axes)


@import_rule("sum_reduce", LIGHTNET, "dot_product")
def dot_product(b: Builder, node: LnNode) -> Any:
    """The sum of the products of two tensors of one shape, as a vector of one item."""
    node.same_type("src1", "src2")
    node.same_shape("src1", "src2")
    node.floating("src1", "src2")
    product = b.op("mul", node.input("src1"), node.input("src2"))
    total = b.op("sum_reduce", product, axes=list(range(len(node.shape("src1")))))
    return b.op("reshape", total, shape=[1])
