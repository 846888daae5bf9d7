"""Shape rules of the tensor introducing ops (spec 4.1), variable updates (4.8), the tensor shape ops (4.5 and the
later Khronos stdlib: tile, pad, gather, cast), matrix multiplication (4.7, `linear`) and `copy_n` / `add_n`.
"""
from __future__ import annotations

from collections.abc import Sequence

from nnef_torch.format.labels import label_problem
from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import (
    FILTER_BORDERS,
    Shape,
    broadcast,
    check_axes,
    check_axis,
    check_broadcastable_to,
    check_choice,
    check_length,
    check_positive,
    check_result_count,
    fail,
    fmt,
    volume,
)

# Tensor introducing operations (spec 4.1) and updates (4.8).

@shape_rule('external')
def external(*, shape: Sequence[int]) -> Shape:
    check_positive('external', 'shape', shape)
    return tuple(shape)


@shape_rule('variable')
def variable(*, shape: Sequence[int], label: str) -> Shape:
    check_positive('variable', 'shape', shape)
    problem = label_problem(label)
    if problem:
        fail('variable', f"'label' {problem}, found {label!r}")
    return tuple(shape)


@shape_rule('constant')
def constant(*, shape: Sequence[int], value: Sequence[object]) -> Shape:
    check_positive('constant', 'shape', shape)
    if len(value) not in (1, volume(shape)):
        fail('constant', f"length of 'value' must be 1 or the volume of 'shape' {fmt(shape)} ({volume(shape)}), "
                         f"found {len(value)}")
    return tuple(shape)


@shape_rule('update')
def update(variable: Shape, value: Shape) -> Shape:
    if tuple(value) != tuple(variable):
        fail('update', f"value shape {fmt(value)} must equal variable shape {fmt(variable)}")
    return tuple(variable)


# Reshaping (spec 4.5.1 with the later axis_start / axis_count), transposing (4.5.2).

@shape_rule('reshape')
def reshape(input: Shape, *, shape: Sequence[int], axis_start: int, axis_count: int) -> Shape:
    op, rank = 'reshape', len(input)
    if not 0 <= axis_start <= rank:
        fail(op, f"'axis_start' must be in range [0,{rank}], found {axis_start}")
    if axis_count < -1:
        fail(op, f"'axis_count' must be non-negative or -1, found {axis_count}")
    count = rank - axis_start if axis_count == -1 else axis_count
    stop = axis_start + count
    if stop > rank:
        fail(op, f"'axis_start' + 'axis_count' ({axis_start} + {count}) must not exceed the input rank ({rank})")
    if any(item < -1 for item in shape):
        fail(op, f"items in 'shape' must be positive, 0 (copy) or -1 (infer), found {fmt(shape)}")
    if list(shape).count(-1) > 1:
        fail(op, f"'shape' may contain at most one -1 item, found {fmt(shape)}")
    new = []
    for i, item in enumerate(shape):
        if item == 0:
            if axis_start + i >= rank:
                fail(op, f"item {i} of 'shape' {fmt(shape)} is 0 (copy the input extent), "
                         f"but input {fmt(input)} has no dimension {axis_start + i}")
            item = input[axis_start + i]
        new.append(item)
    section = input[axis_start:stop]
    known = volume([item for item in new if item != -1])
    if -1 in new:
        if volume(section) % known != 0:
            fail(op, f"the volume of the known items of 'shape' {fmt(new)} ({known}) must divide the volume of "
                     f"input {fmt(input)} in dimensions [{axis_start},{stop}) ({volume(section)})")
        new[new.index(-1)] = volume(section) // known
    elif known != volume(section):
        fail(op, f"the volume of 'shape' {fmt(new)} ({known}) must equal the volume of input {fmt(input)} "
                 f"in dimensions [{axis_start},{stop}) ({volume(section)})")
    return tuple(input[:axis_start]) + tuple(new) + tuple(input[stop:])


@shape_rule('squeeze')
def squeeze(input: Shape, *, axes: Sequence[int]) -> Shape:
    check_axes('squeeze', 'axes', axes, len(input))
    for axis in axes:
        if input[axis] != 1:
            fail('squeeze', f"squeezed dimension {axis} of input {fmt(input)} must be singleton, found {input[axis]}")
    squeezed = set(axes)
    return tuple(item for i, item in enumerate(input) if i not in squeezed)


@shape_rule('unsqueeze')
def unsqueeze(input: Shape, *, axes: Sequence[int]) -> Shape:
    # axes are positions in the output. (The Khronos Python rule inserts in the given order, which is wrong for
    # unsorted axes; its C++ rule and this one place the 1s at exactly the listed output positions.)
    rank = len(input) + len(axes)
    check_axes('unsqueeze', 'axes', axes, rank)
    rest, inserted = iter(input), set(axes)
    return tuple(1 if i in inserted else next(rest) for i in range(rank))


@shape_rule('transpose')
def transpose(input: Shape, *, axes: Sequence[int]) -> Shape:
    n = len(axes)
    if sorted(axes) != list(range(n)):
        fail('transpose', f"'axes' must be a permutation of 0..{n - 1}, found {fmt(axes)}")
    if n > len(input):
        fail('transpose', f"length of 'axes' ({n}) must not exceed the input rank ({len(input)})")
    return tuple(input[axis] for axis in axes) + tuple(input[n:])


# Splitting and concatenation (spec 4.5.3).

@shape_rule('concat')
def concat(values: Sequence[Shape], *, axis: int) -> Shape:
    if not values:
        fail('concat', "'values' must not be empty")
    first = values[0]
    check_axis('concat', 'axis', axis, len(first))
    for value in values[1:]:
        if len(value) != len(first) or any(a != b for i, (a, b) in enumerate(zip(value, first)) if i != axis):
            fail('concat', f"shapes of 'values' must have the same rank and agree in all dimensions but 'axis' "
                           f"({axis}), found {', '.join(fmt(v) for v in values)}")
    result = list(first)
    result[axis] = sum(value[axis] for value in values)
    return tuple(result)


@shape_rule('split')
def split(value: Shape, *, axis: int, ratios: Sequence[int]) -> list[Shape]:
    check_axis('split', 'axis', axis, len(value))
    if not ratios:
        fail('split', "'ratios' must not be empty")
    check_positive('split', 'ratios', ratios)
    return _chunks(value, axis, ratios)


def split_with_empty(value: Shape, *, axis: int, ratios: Sequence[int]) -> list[Shape]:
    """`split` read leniently (`nnef_torch.ir.deviations`): a zero ratio is an empty chunk, of extent 0."""
    check_axis('split', 'axis', axis, len(value))
    if not ratios or any(ratio < 0 for ratio in ratios) or sum(ratios) == 0:
        fail('split', f"items in 'ratios' must be non-negative with a positive sum, found {fmt(ratios)}")
    return _chunks(value, axis, ratios)


def _chunks(value: Shape, axis: int, ratios: Sequence[int]) -> list[Shape]:
    """The shapes of `split`'s results: `value` cut along `axis` in proportion to `ratios`."""
    total = sum(ratios)
    if value[axis] % total != 0:
        fail('split', f"the sum of 'ratios' {fmt(ratios)} ({total}) must divide the extent of value {fmt(value)} "
                      f"along axis {axis} ({value[axis]})")
    unit = value[axis] // total
    return [tuple(unit * ratio if i == axis else item for i, item in enumerate(value)) for ratio in ratios]


@shape_rule('stack')
def stack(values: Sequence[Shape], *, axis: int) -> Shape:
    if not values:
        fail('stack', "'values' must not be empty")
    first = tuple(values[0])
    if any(tuple(value) != first for value in values):
        fail('stack', f"shapes of 'values' must be identical, found {', '.join(fmt(v) for v in values)}")
    check_axis('stack', 'axis', axis, len(first) + 1)
    return first[:axis] + (len(values),) + first[axis:]


@shape_rule('unstack')
def unstack(value: Shape, *, axis: int) -> list[Shape]:
    check_axis('unstack', 'axis', axis, len(value))
    check_result_count('unstack', f"the extent along axis {axis} of value {fmt(value)}", value[axis])
    item = tuple(value[:axis]) + tuple(value[axis + 1:])
    return [item] * value[axis]


# Slicing (spec 4.5.4, in the 1.0.5 form with strides).

@shape_rule('slice')
def slice_(input: Shape, *, axes: Sequence[int], begin: Sequence[int], end: Sequence[int],
           stride: Sequence[int]) -> Shape:
    """Python-like slicing: negative begin/end count from the end, then both are clamped to [-1, extent].

    end == 0 means 'to the end' on an axis whose stride is 1 (the Khronos C++ rule; the Khronos Python rule applies
    it only when every stride is 1). An empty range is an error (the spec: end must be greater than begin, and
    extents are strictly positive), where the Khronos tools return extent 0.
    """
    op = 'slice'
    if len(begin) != len(axes) or len(end) != len(axes):
        fail(op, f"'axes', 'begin' and 'end' must have the same length, "
                 f"found {fmt(axes)}, {fmt(begin)}, {fmt(end)}")
    check_length(op, 'stride', stride, len(axes), what="item of 'axes'", allow_empty=True)
    check_axes(op, 'axes', axes, len(input))
    result = list(input)
    for i, axis in enumerate(axes):
        size = input[axis]
        step = stride[i] if stride else 1
        if step == 0:
            fail(op, f"items in 'stride' must be non-zero, found {fmt(stride)}")
        first, last = begin[i], end[i]
        first = first + size if first < 0 else first
        last = last + size if last < 0 else (size if last == 0 and step == 1 else last)
        first, last = min(max(first, -1), size), min(max(last, -1), size)
        if not (0 <= first < last if step > 0 else last < first < size):
            order = "0 <= begin < end" if step > 0 else f"end < begin < {size}"
            fail(op, f"slice {begin[i]}:{end[i]}:{step} along axis {axis} (extent {size}) is empty or out of range: "
                     f"expected {order} after resolving negative items, found {first}:{last}")
        result[axis] = -((first - last) // step)
    return tuple(result)


# Later stdlib additions: tile, pad, gather, cast.

@shape_rule('tile')
def tile(input: Shape, *, repeats: Sequence[int]) -> Shape:
    check_length('tile', 'repeats', repeats, len(input), what="input dimension")
    check_positive('tile', 'repeats', repeats)
    return tuple(item * count for item, count in zip(input, repeats))


@shape_rule('pad')
def pad(input: Shape, *, padding: Sequence[tuple[int, int]], border: str, value: float) -> Shape:
    check_length('pad', 'padding', padding, len(input), what="input dimension")
    check_choice('pad', 'border', border, FILTER_BORDERS)
    result = tuple(p + item + q for item, (p, q) in zip(input, padding))
    if any(item <= 0 for item in result):
        fail('pad', f"padded extents must be strictly positive, found {fmt(result)} "
                    f"from input {fmt(input)} and padding {fmt(padding)}")
    return result


@shape_rule('gather')
def gather(input: Shape, indices: Shape, *, axis: int) -> Shape:
    check_axis('gather', 'axis', axis, len(input))
    return tuple(input[:axis]) + tuple(indices) + tuple(input[axis + 1:])


@shape_rule('cast')
def cast(input: Shape) -> Shape:
    return tuple(input)


# Matrix multiplication (spec 4.7) and the linear layer (4.9.2).

@shape_rule('matmul')
def matmul(A: Shape, B: Shape, *, transposeA: bool, transposeB: bool) -> Shape:
    op = 'matmul'
    if len(A) != len(B):
        fail(op, f"A and B must have the same rank, found {fmt(A)} and {fmt(B)}")
    if len(A) < 2:
        fail(op, f"A and B must have rank at least 2, found {fmt(A)} and {fmt(B)}")
    batch = broadcast(op, ('A batch', A[:-2]), ('B batch', B[:-2]))
    m, k_a = (A[-1], A[-2]) if transposeA else (A[-2], A[-1])
    k_b, n = (B[-1], B[-2]) if transposeB else (B[-2], B[-1])
    if k_a != k_b:
        fail(op, f"inner dimensions must agree, found {k_a} (A {fmt(A)}, transposeA = {str(transposeA).lower()}) "
                 f"and {k_b} (B {fmt(B)}, transposeB = {str(transposeB).lower()})")
    return batch + (m, n)


def matmul_numpy(A: Shape, B: Shape, *, transposeA: bool, transposeB: bool) -> Shape:
    """`matmul` with a 1-D operand read leniently, as numpy's matmul: a 1-D A is a row [1, k] and a 1-D B a
    column [k, 1] (a transpose flag leaves a vector as it is), and that axis is dropped from the result; 1-D x 1-D
    gives a scalar of shape []."""
    if not (1 in (len(A), len(B)) and max(len(A), len(B)) <= 2):
        return matmul(A, B, transposeA=transposeA, transposeB=transposeB)
    rows = (1, A[0]) if len(A) == 1 else tuple(A)
    cols = (B[0], 1) if len(B) == 1 else tuple(B)
    result = matmul(rows, cols, transposeA=transposeA and len(A) == 2, transposeB=transposeB and len(B) == 2)
    return tuple(result[i] for i in range(2) if not (i == 0 and len(A) == 1 or i == 1 and len(B) == 1))


@shape_rule('linear')
def linear(input: Shape, filter: Shape, bias: Shape) -> Shape:
    op = 'linear'
    if len(input) != 2 or len(filter) != 2:
        fail(op, f"input and filter must have rank 2, found {fmt(input)} and {fmt(filter)}")
    if input[1] != filter[1]:
        fail(op, f"filter channels ({filter[1]}) must equal input channels ({input[1]})")
    output = (input[0], filter[0])
    # bias is added NNEF-style (aligned from the left), so [1,n] or [1,1] (the Khronos tools also take [n]).
    check_broadcastable_to(op, 'bias', bias, 'output', output)
    return output


# Miscellaneous (spec 4.9.6).

@shape_rule('copy_n')
def copy_n(x: Shape, *, times: int) -> list[Shape]:
    if times <= 0:
        fail('copy_n', f"'times' must be strictly positive, found {times}")
    check_result_count('copy_n', "'times'", times)
    return [tuple(x)] * times


@shape_rule('add_n')
def add_n(x: Sequence[Shape]) -> Shape:
    if not x:
        fail('add_n', "'x' must not be empty")
    first = tuple(x[0])
    if any(tuple(item) != first for item in x):
        fail('add_n', f"shapes of 'x' must be identical, found {', '.join(fmt(item) for item in x)}")
    return first
