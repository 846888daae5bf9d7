"""What the LightNet import rules share: the fragment library, TensorLight dtypes as NNEF types and numpy arrays
(converted as `tl_convert` converts: truncating toward zero and saturating), constants, and sliding windows with
LightNet's padding ([top, left, bottom, right], `autopad` computed as `ln_autopadding_conv` does)."""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from nnef_torch.formats.lightnet.node import LnNode
from nnef_torch.formats.lightnet.optypes import DTYPES
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Ref

LIGHTNET = "lightnet"
# The fragments these rules may write: this front end's own, on top of the exporter's.
LIBRARY = ("nnef_torch.formats.lightnet", "fragments.nnef", ("nnef_torch.stdlib", "extensions.nnef"))


def nnef_type(dtype: str) -> str:
    """The NNEF type of a TensorLight dtype: floating types are scalar, booleans logical, the rest integer."""
    kind = np.dtype(DTYPES[dtype]).kind
    return "scalar" if kind == "f" else "logical" if kind == "b" else "integer"


def storage(dtype: str) -> np.dtype:
    """The numpy dtype a variable of this TensorLight dtype holds: float32 for floating types (the module computes
    in float32; TL_DOUBLE data is rounded), int64 for integers (NNEF integers are torch.int64), bool."""
    kind = nnef_type(dtype)
    return np.dtype("float32" if kind == "scalar" else "int64" if kind == "integer" else "bool")


def tl_convert(values: Sequence[float] | np.ndarray, dtype: str) -> np.ndarray:
    """Numbers (doubles, as LightNet reads JSON numbers) stored as TensorLight stores them in `dtype`: floats
    saturate at the type's finite range (and float32's, in which TL_DOUBLE is stored), integers truncate toward
    zero and saturate, booleans are 'not zero'.
    Returned in `storage(dtype)`."""
    array = np.asarray(values, dtype=np.float64)
    target = np.dtype(DTYPES[dtype])
    if target.kind == "b":
        return (array > 0) | (array < 0)
    if target.kind == "f":  # saturated at the stored type's range too (TL_DOUBLE is stored as float32)
        limit = float(min(np.finfo(target).max, np.finfo(storage(dtype)).max))
        return np.where(np.isnan(array), array, np.clip(array, -limit, limit)).astype(target).astype(storage(dtype))
    info = np.iinfo(target)
    truncated = np.trunc(np.where(np.isnan(array), 0.0, array))
    # int64 and uint64 stop short of 2**63, the first double int64 cannot hold (NNEF integers are int64)
    high = min(float(info.max), 9.223372036854775e18)
    return np.clip(truncated, max(float(info.min), -9.223372036854775e18), high).astype(np.int64)


def constant(b: Builder, values: np.ndarray, dtype: str, shape: Sequence[int] | None = None) -> Ref:
    """A `constant` holding `values` (all of them, or one repeated over `shape`)."""
    kind = nnef_type(dtype)
    array = np.asarray(values)
    shape = list(array.shape) if shape is None else [int(extent) for extent in shape]
    if kind != "scalar" and array.size == 1:  # all the items (the Khronos executor aborts on one repeated integer)
        array = np.broadcast_to(array.reshape(-1), (math.prod(shape),))
    items = array.reshape(-1).tolist()
    if kind == "scalar":
        items = [float(item) for item in items]
    return b.op("constant", shape=shape, value=items, generic=kind, out_shape=tuple(shape))


def row(b: Builder, x: Ref) -> Ref:
    """A vector (C,) as the (1, C) row NNEF takes for per-channel operands (bias, batch-norm statistics)."""
    return b.op("unsqueeze", x, axes=[0])


def c_div(a: int, b: int) -> int:
    """C's integer division: the quotient truncated toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def autopadding(node: LnNode, extents: Sequence[int], size: Sequence[int], stride: Sequence[int],
                dilation: Sequence[int], padding: Sequence[int]) -> list[int]:
    """The padding [top, left, bottom, right] a window op uses: its `autopad` mode's (VALID: none; SAME_UPPER /
    SAME_LOWER: the output is ceil(input / stride), the total padding split with the extra item after / before, in C
    integer arithmetic, so it may be negative), or the `padding` param (NOTSET; any other string, which LightNet
    warns about and ignores)."""
    mode = node.str("autopad")
    if mode == "VALID":
        return [0, 0, 0, 0]
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        if mode != "NOTSET":
            warnings.warn(f"{node.where}: unsupported 'autopad' {mode!r}; using 'padding' (as LightNet does)",
                          stacklevel=2)
        return list(padding)
    total = [(math.ceil(x / s) - 1) * s + (k - 1) * d + 1 - x for x, k, s, d in zip(extents, size, stride, dilation)]
    half = [c_div(t, 2) for t in total]
    if mode == "SAME_UPPER":
        return [half[0], half[1], total[0] - half[0], total[1] - half[1]]
    return [total[0] - half[0], total[1] - half[1], half[0], half[1]]


def crop_negative(b: Builder, x: Ref, padding: Sequence[int]) -> tuple[Ref, list[tuple[int, int]]]:
    """NNEF padding as (before, after) pairs of the two spatial axes of `x` (NCHW); a negative padding (which
    LightNet's SAME modes can compute) drops items, so the input is sliced instead."""
    shape = b.shape(x)
    pairs = [(padding[0], padding[2]), (padding[1], padding[3])]
    if all(p >= 0 and q >= 0 for p, q in pairs):
        return x, pairs
    begin = [max(0, -p) for p, _ in pairs]
    end = [extent - max(0, -q) for extent, (_, q) in zip(shape[2:], pairs)]
    cropped = b.op("slice", x, axes=[2, 3], begin=begin, end=end)
    return cropped, [(max(0, p), max(0, q)) for p, q in pairs]


def window_extents(node: LnNode, extents: Sequence[int], size: Sequence[int], stride: Sequence[int],
                   dilation: Sequence[int], padding: Sequence[int]) -> list[int]:
    """The output extents of a sliding window (`ln_output_dim_conv`), which must be positive."""
    outputs = []
    for axis, (x, k, s, d) in enumerate(zip(extents, size, stride, dilation)):
        span = x + padding[axis] + padding[axis + 2] - ((k - 1) * d + 1)
        outputs.append(c_div(span, s) + 1 if span >= 0 else 0)
    if any(extent <= 0 for extent in outputs):
        raise node.fail(f"the window (size {list(size)}, stride {list(stride)}, dilation {list(dilation)}, padding "
                        f"{list(padding)}) does not fit the input's spatial extents {list(extents)}")
    return outputs
