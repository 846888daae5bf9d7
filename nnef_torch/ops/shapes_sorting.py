"""Shape rules of the exporter's `stable_sort` and `stable_topk` fragments, for consumers (our importer) that keep
them whole: values and indices have the input's shape, with `k` items along `axis` for topk."""
from __future__ import annotations

from nnef_torch.ops.registry import shape_rule
from nnef_torch.ops.shapes_common import Shape, check_axis, fail


def _check(op: str, input: Shape, positions: Shape, axis: int) -> None:
    check_axis(op, 'axis', axis, len(input))
    expected = tuple(input[axis] if d == axis else 1 for d in range(len(input)))
    if tuple(positions) != expected:
        fail(op, f"'positions' must have shape {list(expected)}, found {list(positions)}")


@shape_rule('stable_sort')
def sort(input: Shape, positions: Shape, *, axis: int, descending: bool) -> tuple[Shape, Shape]:
    _check('stable_sort', input, positions, axis)
    return tuple(input), tuple(input)


@shape_rule('stable_topk')
def topk(input: Shape, positions: Shape, *, axis: int, k: int, largest: bool) -> tuple[Shape, Shape]:
    _check('stable_topk', input, positions, axis)
    if not 1 <= k <= input[axis]:
        fail('stable_topk', f"'k' must be in range [1,{input[axis]}], found {k}")
    shape = tuple(k if d == axis else n for d, n in enumerate(input))
    return shape, shape
