"""`tract_core_einsum` as standard operations, for a standard save.

One operand: sum_reduce (and squeeze) over the letters the output drops, then transpose. Two operands: each
letter is a batch axis (in both operands and the output), a row axis (first operand and output), a column axis
(second operand and output), a contracted axis (both operands, not the output), or summed away in one operand
alone; each operand is reduced over its own summed letters, transposed to (batch, rows, contracted) and
(batch, contracted, columns), reshaped to rank len(batch) + 2, multiplied with `matmul`, reshaped back and
transposed to the output order. This is exact for every expression without a letter repeated inside one operand;
three or more operands, repeated letters, and contracted letters of unequal extents are refused (batch letters
broadcast as `matmul`'s batch axes do).
"""
from __future__ import annotations

from nnef_torch.errors import NNEFShapeError, NNEFUnsupportedError
from nnef_torch.formats.tract_core.ops import parse_einsum
from nnef_torch.ir.builder import Builder
from nnef_torch.ir.graph import Operation, Ref


def _refuse(expr: str, why: str, op: Operation) -> NNEFUnsupportedError:
    return NNEFUnsupportedError(f"tract_core_einsum with expr '{expr}' has no standard NNEF form here: {why}; "
                                "save with dialect='tract_core' to keep it for tract", op.location)


def _product(extents: list[int]) -> int:
    result = 1
    for extent in extents:
        result *= extent
    return result


def _reduce(b: Builder, x: Ref, letters: str, drop: list[str]) -> tuple[Ref, str]:
    """`x` summed over the axes of `drop`, those axes removed."""
    if not drop:
        return x, letters
    axes = [letters.index(letter) for letter in drop]
    x = b.op("squeeze", b.op("sum_reduce", x, axes=axes), axes=axes)
    return x, "".join(letter for letter in letters if letter not in drop)


def _transpose(b: Builder, x: Ref, letters: str, order: list[str]) -> Ref:
    perm = [letters.index(letter) for letter in order]
    return x if perm == sorted(perm) else b.op("transpose", x, axes=perm)


def _reshape(b: Builder, x: Ref, shape: list[int]) -> Ref:
    return x if list(b.shape(x)) == shape else b.op("reshape", x, shape=shape)


def einsum(b: Builder, op: Operation) -> Ref:
    """Write `op` (a tract_core_einsum) with standard operations on `b`; returns its result (not yet named)."""
    expr = op.attribs["expr"]
    inputs = op.inputs["inputs"]
    try:
        operands, out = parse_einsum(expr, len(inputs))
    except NNEFShapeError as error:
        raise _refuse(expr, str(error), op) from None
    if len(inputs) > 2:
        raise _refuse(expr, f"{len(inputs)} operands (one or two are written)", op)
    if not all(isinstance(x, Ref) for x in inputs):
        raise _refuse(expr, "a literal operand", op)
    if any(len(set(letters)) != len(letters) for letters in operands):
        raise _refuse(expr, "a letter repeated inside one operand (a diagonal)", op)
    if len(inputs) == 1:
        x, letters = _reduce(b, inputs[0], operands[0], [c for c in operands[0] if c not in out])
        return _transpose(b, x, letters, list(out))
    (a, bb), (la, lb) = inputs, operands
    sizes_a = dict(zip(la, b.shape(a)))
    sizes_b = dict(zip(lb, b.shape(bb)))
    a, la = _reduce(b, a, la, [c for c in la if c not in lb and c not in out])
    bb, lb = _reduce(b, bb, lb, [c for c in lb if c not in la and c not in out])
    batch = [c for c in out if c in la and c in lb]
    rows = [c for c in out if c in la and c not in lb]
    cols = [c for c in out if c in lb and c not in la]
    inner = [c for c in la if c in lb and c not in out]
    unequal = [c for c in inner if sizes_a[c] != sizes_b[c]]
    if unequal:
        raise _refuse(expr, f"contracted letter(s) {unequal} have unequal extents", op)
    a = _transpose(b, a, la, batch + rows + inner)
    a = _reshape(b, a, [sizes_a[c] for c in batch] + [_product([sizes_a[c] for c in rows]),
                                                    _product([sizes_a[c] for c in inner])])
    bb = _transpose(b, bb, lb, batch + inner + cols)
    bb = _reshape(b, bb, [sizes_b[c] for c in batch] + [_product([sizes_b[c] for c in inner]),
                                                      _product([sizes_b[c] for c in cols])])
    c = b.op("matmul", a, bb)
    extents = [max(sizes_a[x], sizes_b[x]) for x in batch] + [sizes_a[x] for x in rows] + [sizes_b[x] for x in cols]
    c = _reshape(b, c, extents)
    return _transpose(b, c, "".join(batch + rows + cols), list(out))


__all__ = ["einsum"]
