"""ONNX Einsum as standard NNEF ops. The operands are folded pairwise, left to right: letters only one operand has
and no later step needs are summed away first, then each pair is a (batched) matmul — shared kept letters as the
batch, contracted letters last in the left operand and first in the right, the rest flattened into rows and
columns — so a contraction never materializes the outer product. One operand is a sum and a transpose."""
from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from nnef_torch.formats.onnx.node import OnnxNode
from nnef_torch.formats.onnx.rules.nn import _batched_matmul
from nnef_torch.ir.builder import Builder
from nnef_torch.ops.registry import import_rule

ONNX = "onnx"
_ELLIPSIS_LABEL = 0x100  # labels of the axes an ellipsis covers: characters no equation letter can be


def _parse(node: OnnxNode, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's labels (one per axis, ellipsis axes given labels of their own, aligned from the right as
    numpy broadcasts them) and the output's labels (implicit: the ellipsis axes, then letters used once, sorted)."""
    equation = equation.replace(" ", "")
    sides = equation.split("->")
    if len(sides) > 2:
        raise node.fail(f"equation {equation!r} has more than one '->'")
    terms = sides[0].split(",")
    if len(terms) != len(ranks):
        raise node.fail(f"equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    for term in sides:
        if not all(c.isalpha() and c.isascii() for c in term.replace("...", "").replace(",", "")):
            raise node.fail(f"equation {equation!r}: labels must be letters (and '...')")
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks):
        letters = len(term.replace("...", ""))
        if term.count("...") > 1 or (letters != rank and "..." not in term) or letters > rank:
            raise node.fail(f"equation term {term!r} does not fit an operand of rank {rank}")
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - letters)
    ellipsis = "".join(chr(_ELLIPSIS_LABEL + i) for i in range(ellipsis_rank))
    labels = [term.replace("...", ellipsis[ellipsis_rank - (rank - len(term.replace("...", ""))):])
              for term, rank in zip(terms, ranks)]
    for term, own in zip(terms, labels):
        repeated = sorted({c for c in own if own.count(c) > 1})
        if repeated:
            raise node.fail(f"equation term {term!r} repeats {repeated} (a diagonal): not supported")
    used = "".join(labels)
    if len(sides) == 1:
        return labels, ellipsis + "".join(sorted(c for c in set(used) if c.isascii() and used.count(c) == 1))
    output = sides[1].replace("...", ellipsis)
    if sides[1].count("...") > 1 or len(set(output)) != len(output) or not set(output) <= set(used):
        raise node.fail(f"equation output {sides[1]!r} repeats a label or names one no operand has")
    if ellipsis and "..." not in sides[1] and "..." in sides[0]:
        raise node.fail(f"equation {equation!r}: an output without '...' summing ellipsis axes is not supported")
    return labels, output


class _Einsum:
    """The builder calls of one Einsum node; tensors travel with their labels (one character per axis)."""

    def __init__(self, b: Builder, node: OnnxNode):
        self.b, self.node = b, node

    def transpose(self, x: Any, labels: str, order: str) -> Any:
        if labels == order:
            return x
        return self.b.op("transpose", x, axes=[labels.index(c) for c in order])

    def reshape(self, x: Any, shape: list[int]) -> Any:
        return x if list(self.b.shape(x)) == shape else self.b.op("reshape", x, shape=shape)

    def sum_away(self, x: Any, labels: str, keep: set[str]) -> tuple[Any, str]:
        """`x` summed over its labels not in `keep`."""
        axes = [i for i, c in enumerate(labels) if c not in keep]
        if not axes:
            return x, labels
        summed = self.b.op("squeeze", self.b.op("sum_reduce", x, axes=axes), axes=axes)
        return summed, "".join(c for c in labels if c in keep)

    def extents(self, x: Any, labels: str) -> dict[str, int]:
        return dict(zip(labels, self.b.shape(x)))

    def pair(self, x: Any, xl: str, y: Any, yl: str, keep: set[str]) -> tuple[Any, str]:
        """x and y contracted over their shared labels not in `keep`: [batch, rows, k] @ [batch, k, cols]."""
        x, xl = self.sum_away(x, xl, keep | set(yl))
        y, yl = self.sum_away(y, yl, keep | set(xl))
        ex, ey = self.extents(x, xl), self.extents(y, yl)
        for c in set(xl) & set(yl):
            if ex[c] != ey[c] and 1 not in (ex[c], ey[c]):
                raise self.node.fail(f"label {c!r} has extents {ex[c]} and {ey[c]} in two operands")
        batch = "".join(c for c in xl if c in yl and c in keep)
        contracted = "".join(c for c in xl if c in yl and c not in keep)
        rows = "".join(c for c in xl if c not in yl)
        cols = "".join(c for c in yl if c not in xl)
        for c in contracted:  # a contracted label of extent 1 on one side: the other side summed over it first
            if ex[c] != ey[c]:
                x, y = (x, self.b.op("sum_reduce", y, axes=[yl.index(c)])) if ex[c] == 1 else \
                    (self.b.op("sum_reduce", x, axes=[xl.index(c)]), y)
        ex, ey = self.extents(x, xl), self.extents(y, yl)
        size_k = prod(ex[c] for c in contracted)
        x = self.reshape(self.transpose(x, xl, batch + rows + contracted),
                         [ex[c] for c in batch] + [prod(ex[c] for c in rows), size_k])
        y = self.reshape(self.transpose(y, yl, batch + contracted + cols),
                         [ey[c] for c in batch] + [size_k, prod(ey[c] for c in cols)])
        # without contracted labels the product is an outer one: a broadcasting mul ([.., m, 1] * [.., 1, n])
        z = self.b.op("mul", x, y) if not contracted else _batched_matmul(self.b, x, y)
        shape = [max(ex[c], ey[c]) for c in batch] + [ex[c] for c in rows] + [ey[c] for c in cols]
        return self.reshape(z, shape), batch + rows + cols


def _operand(b: Builder, node: OnnxNode, position: int) -> Any:
    """Input `position` as an IR tensor of its own shape (a known single item too, which `tensor` makes a literal)."""
    if node.known(position) and node.const(position).size == 1:
        value = node.const(position).astype(np.float32)
        return b.op("constant", shape=list(value.shape), value=[float(value.reshape(-1)[0])], generic="scalar",
                    out_shape=tuple(value.shape))
    return node.tensor(position)


@import_rule("matmul", ONNX, "Einsum")
def einsum(b: Builder, node: OnnxNode) -> Any:
    equation = str(node.attr("equation", ""))
    count = len(node.inputs)
    if count == 0:
        raise node.fail("Einsum needs at least one operand")
    if all(node.known(i) for i in range(count)):
        return np.einsum(equation, *[node.const(i) for i in range(count)])
    labels, output = _parse(node, equation, [node.rank(i) for i in range(count)])
    steps = _Einsum(b, node)
    # rank-0 operands carry no labels: factors multiplied in at the end
    operands = [(_operand(b, node, i), own) for i, own in enumerate(labels) if node.rank(i) > 0]
    factors = [node.tensor(i) for i in range(count) if node.rank(i) == 0]
    if not operands:
        raise node.fail("Einsum of scalars only is not supported")
    x, xl = operands[0]
    for i, (y, yl) in enumerate(operands[1:], start=2):
        later = set(output).union(*[own for _, own in operands[i:]])
        x, xl = steps.pair(x, xl, y, yl, later)
    x, xl = steps.sum_away(x, xl, set(output))
    x = steps.transpose(x, xl, output)
    for factor in factors:
        x = b.op("mul", x, factor)
    return x
