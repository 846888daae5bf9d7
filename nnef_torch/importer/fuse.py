"""Import-time rewrites of the IR graph that replace a chain of standard operations by one operation computing the
same function in fewer torch calls (equal up to float32 rounding):

- `layer_norm`: moments, then sub / add epsilon / rsqrt and mul (or sqrt and div), then optionally mul by a scale
  and add an offset -> `fused_layer_norm` (torch.nn.functional.layer_norm)
- `gelu_tanh`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> `fused_gelu_tanh` (F.gelu(approximate='tanh'))
- `gelu_sigmoid`: x sigmoid(1.702 x) -> the standard `gelu`

A chain is fused only where each of its intermediate tensors is read by the next operation of the chain alone: no
other operation, graph output, update or graph.quant entry reads it, and no `custom_ops` entry replaces one of its
operations. The fused operations are fragments of the importer's library (fragments.nnef), added to the graph's
`custom_fragments`; the text the module saves is the original one.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from nnef_torch.ir.builder import fragment_library
from nnef_torch.ir.graph import Graph, Operation, Ref
from nnef_torch.ops.torch_fused import trailing

LIBRARY = (__package__, "fragments.nnef")
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TOLERANCE = 1e-6  # relative, for constants written in the text
_OUTPUTS = {"fused_layer_norm": "output", "fused_gelu_tanh": "y", "gelu": "y"}  # each fused op's result name


class Rewriter:
    """One graph's operations, who reads each tensor, and which operations a fusion has claimed."""

    def __init__(self, graph: Graph, replaced: Collection[str] = ()):
        self.graph = graph
        self.ops = list(graph.operations)
        self.replaced = set(replaced)  # op names with a custom implementation: never fused away
        self.producer: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}
        for index, op in enumerate(self.ops):
            for ref in op.output_refs():
                self.producer[ref.name] = index
            for ref in op.input_refs():
                self.readers.setdefault(ref.name, []).append(index)
        self.observed = set(graph.outputs) | set(graph.quantization)
        self.claimed: set[int] = set()
        self.fused: dict[int, Operation] = {}  # index of a chain's last operation -> the operation replacing it

    def op(self, index: int) -> Operation:
        return self.ops[index]

    def reader(self, ref: Any) -> int | None:
        """The one operation reading intermediate tensor `ref` (once), where nothing else observes it."""
        if not isinstance(ref, Ref) or ref.name in self.observed:
            return None
        readers = self.readers.get(ref.name, [])
        if len(readers) != 1 or readers[0] in self.claimed:
            return None
        if sum(1 for item in self.op(readers[0]).input_refs() if item == ref) != 1:
            return None
        return readers[0] if self.free(readers[0]) else None

    def private(self, ref: Any) -> int | None:
        """The operation producing `ref`, where `ref` is an intermediate tensor read only by one operation."""
        if not isinstance(ref, Ref) or ref.name not in self.producer or self.reader(ref) is None:
            return None
        index = self.producer[ref.name]
        return index if self.free(index) else None

    def free(self, index: int) -> bool:
        op = self.op(index)
        return index not in self.claimed and op.name not in self.replaced and all(
            self.graph.tensors[ref.name].dtype == "scalar" for ref in op.output_refs())

    def shape(self, ref: Any) -> tuple[int, ...] | None:
        return self.graph.tensors[ref.name].shape if isinstance(ref, Ref) else ()

    def fuse(self, chain: Collection[int], name: str, inputs: dict[str, Any], attribs: dict[str, Any]) -> None:
        """Replace the operations `chain` by one operation `name` writing the last one's result, in its place."""
        last = max(chain)
        scopes = [self.op(index).scope for index in chain]
        common = 0
        while all(len(scope) > common and scope[common] == scopes[0][common] for scope in scopes):
            common += 1
        outputs = {_OUTPUTS[name]: _result(self.op(last))}
        self.fused[last] = Operation(name, inputs, attribs, outputs, location=self.op(min(chain)).location,
                                     scope=scopes[0][:common])
        self.claimed.update(chain)

    def result(self) -> Graph:
        operations, dropped = [], set()
        for index, op in enumerate(self.ops):
            if index in self.fused:
                operations.append(self.fused[index])
                kept = {ref.name for ref in self.fused[index].output_refs()}
                dropped.update(ref.name for ref in op.output_refs() if ref.name not in kept)
            elif index in self.claimed:
                dropped.update(ref.name for ref in op.output_refs())
            else:
                operations.append(op)
        if not self.fused:
            return self.graph
        used = {op.name for op in self.fused.values()}
        library = fragment_library(*LIBRARY)
        declared = {fragment.name for fragment in self.graph.custom_fragments}
        fragments = tuple(library[name] for name in sorted(used) if name in library and name not in declared)
        tensors = {name: tensor for name, tensor in self.graph.tensors.items() if name not in dropped}
        return dataclasses.replace(self.graph, tensors=tensors, operations=tuple(operations),
                                   custom_fragments=self.graph.custom_fragments + fragments)


# -- helpers over operations --

def _literal(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(value: Any, expected: float) -> bool:
    return _literal(value) and math.isclose(value, expected, rel_tol=_TOLERANCE)


def _operands(op: Operation) -> list[Any]:
    return list(op.inputs.values())


def _other(op: Operation, ref: Ref) -> Any:
    """The other operand of a binary op of which `ref` is one operand."""
    x, y = _operands(op)
    return y if x == ref else x


def _result(op: Operation) -> Ref:
    return next(iter(op.outputs.values()))


# -- layer normalization --

def fuse_layer_norm(rewriter: Rewriter, index: int) -> None:
    """From a `moments` operation forward: see the module docstring."""
    moments = rewriter.op(index)
    if moments.name != "moments" or not rewriter.free(index):
        return
    x = moments.inputs["input"]
    shape = rewriter.shape(x)
    axes = list(moments.attribs["axes"])
    if shape is None or not trailing(axes, len(shape)):
        return
    mean, variance = moments.outputs["mean"], moments.outputs["variance"]
    sub = rewriter.reader(mean)
    if sub is None or rewriter.op(sub).name != "sub" or _operands(rewriter.op(sub)) != [x, mean]:
        return
    add = rewriter.reader(variance)
    if add is None or rewriter.op(add).name != "add" or not _literal(_other(rewriter.op(add), variance)):
        return
    epsilon = float(_other(rewriter.op(add), variance))
    root = rewriter.reader(_result(rewriter.op(add)))
    if root is None or rewriter.op(root).name not in ("rsqrt", "sqrt"):
        return
    centered, spread = _result(rewriter.op(sub)), _result(rewriter.op(root))
    combine = rewriter.reader(spread)
    if combine is None or rewriter.reader(centered) != combine:
        return
    op = rewriter.op(combine)
    if not (op.name == "mul" and rewriter.op(root).name == "rsqrt" and set(_operands(op)) == {centered, spread}) \
            and not (op.name == "div" and rewriter.op(root).name == "sqrt" and _operands(op) == [centered, spread]):
        return
    chain = [index, sub, add, root, combine]
    expected = (1,) * (len(shape) - len(axes)) + tuple(shape[len(shape) - len(axes):])
    scale, chain = _affine(rewriter, chain, "mul", 1.0, expected)
    offset, chain = _affine(rewriter, chain, "add", 0.0, expected)
    rewriter.fuse(chain, "fused_layer_norm", {"input": x, "scale": scale, "offset": offset},
                  {"axes": axes, "epsilon": epsilon})


def _affine(rewriter: Rewriter, chain: list[int], name: str, identity: float,
            expected: tuple[int, ...]) -> tuple[Any, list[int]]:
    """Extend `chain` by a following `name` op (mul by the scale, add of the offset) whose other operand is the
    identity literal or a tensor of shape `expected` (NNEF broadcasting: trailing singleton axes implied)."""
    last = _result(rewriter.op(chain[-1]))
    index = rewriter.reader(last)
    if index is None or rewriter.op(index).name != name:
        return identity, chain
    other = _other(rewriter.op(index), last)
    if isinstance(other, Ref):
        shape = rewriter.shape(other)
        if shape is None or len(shape) > len(expected) or \
                tuple(shape) + (1,) * (len(expected) - len(shape)) != expected:
            return identity, chain
        return other, chain + [index]
    if other == identity:
        return identity, chain + [index]
    return identity, chain


# -- GELU --

def _product(rewriter: Rewriter, ref: Any, chain: list[int]) -> tuple[float, Counter]:
    """`ref` as a coefficient times a product of tensors (a Counter of factor -> power), looking through the
    `mul`, `sqr` and `pow` (by 2 or 3) operations whose results only the product reads (appended to `chain`)."""
    if _literal(ref):
        return float(ref), Counter()
    index = rewriter.private(ref)
    op = rewriter.op(index) if index is not None else None
    if op is not None and op.name == "mul":
        return _expand(rewriter, index, chain)
    power = {"sqr": 2}.get(op.name) if op is not None else None
    if op is not None and op.name == "pow" and _literal(op.inputs["y"]) and op.inputs["y"] in (2, 3):
        power = int(op.inputs["y"])
    if power is not None and isinstance(op.inputs["x"], Ref):
        chain.append(index)
        return 1.0, Counter({op.inputs["x"]: power})
    return 1.0, Counter({ref: 1})


def _expand(rewriter: Rewriter, index: int, chain: list[int]) -> tuple[float, Counter]:
    """The product `mul` operation `index` computes (see `_product`)."""
    chain.append(index)
    coefficient, factors = 1.0, Counter()
    for operand in _operands(rewriter.op(index)):
        c, f = _product(rewriter, operand, chain)
        coefficient, factors = coefficient * c, factors + f
    return coefficient, factors


def _products_upward(rewriter: Rewriter, ref: Ref) -> list[tuple[float, Counter, list[int]]]:
    """The products that hold `ref` as a factor, along the chain of `mul` operations above it, longest first:
    (coefficient, factors, the operations)."""
    found = []
    index = rewriter.reader(ref)
    while index is not None and rewriter.op(index).name == "mul":
        chain: list[int] = []
        coefficient, factors = _expand(rewriter, index, chain)
        found.append((coefficient, factors, chain))
        index = rewriter.reader(_result(rewriter.op(index)))
    return found[::-1]


def fuse_gelu_tanh(rewriter: Rewriter, index: int) -> None:
    """From a `tanh` operation: its argument is sqrt(2/pi) (x + 0.044715 x^3), its result read by 1 + t, and
    that by a product 0.5 x (1 + t)."""
    tanh = rewriter.op(index)
    if tanh.name != "tanh" or not rewriter.free(index):
        return
    chain = [index]
    coefficient, factors = _product(rewriter, tanh.inputs["x"], chain)
    if not _close(coefficient, SQRT_2_OVER_PI) or len(factors) != 1 or sum(factors.values()) != 1:
        return
    inner = rewriter.private(next(iter(factors)))
    if inner is None or rewriter.op(inner).name != "add":
        return
    chain.append(inner)
    terms = {}
    for operand in _operands(rewriter.op(inner)):
        c, f = _product(rewriter, operand, chain)
        if len(f) != 1:
            return
        (x, power), = f.items()
        terms[power] = (c, x)
    if set(terms) != {1, 3} or terms[1][1] != terms[3][1] or not _close(terms[1][0], 1.0) \
            or not _close(terms[3][0], 0.044715):
        return
    x = terms[1][1]
    one = rewriter.reader(_result(tanh))
    if one is None or rewriter.op(one).name != "add" or not _close(_other(rewriter.op(one), _result(tanh)), 1.0):
        return
    chain.append(one)
    for c, f, tail in _products_upward(rewriter, _result(rewriter.op(one))):
        if _close(c, 0.5) and f == Counter({x: 1, _result(rewriter.op(one)): 1}) and not set(tail) & set(chain):
            rewriter.fuse(chain + tail, "fused_gelu_tanh", {"x": x}, {})
            return


def fuse_gelu_sigmoid(rewriter: Rewriter, index: int) -> None:
    """From a `sigmoid` operation: its argument is 1.702 x, its result read by a product x sigmoid(...)."""
    sigmoid = rewriter.op(index)
    if sigmoid.name != "sigmoid" or not rewriter.free(index):
        return
    chain = [index]
    coefficient, factors = _product(rewriter, sigmoid.inputs["x"], chain)
    if not _close(coefficient, 1.702) or len(factors) != 1 or sum(factors.values()) != 1:
        return
    x = next(iter(factors))
    for c, f, tail in _products_upward(rewriter, _result(sigmoid)):
        if _close(c, 1.0) and f == Counter({x: 1, _result(sigmoid): 1}) and not set(tail) & set(chain):
            rewriter.fuse(chain + tail, "gelu", {"x": x}, {})
            return


PASSES: dict[str, Callable[[Rewriter, int], None]] = {
    "layer_norm": fuse_layer_norm,
    "gelu_tanh": fuse_gelu_tanh,
    "gelu_sigmoid": fuse_gelu_sigmoid,
}


def fuse(graph: Graph, passes: bool | Collection[str] = True, replaced: Collection[str] = ()) -> Graph:
    """`graph` with the chains the named `passes` recognise (all for True, none for False) fused; `replaced`:
    the op names a `custom_ops` entry implements, left as they are."""
    names = list(PASSES) if passes is True else [] if passes is False else list(passes)
    unknown = sorted(set(names) - set(PASSES))
    if unknown:
        raise ValueError(f"unknown fusion passes {unknown}; expected some of {sorted(PASSES)}")
    if not names:
        return graph
    rewriter = Rewriter(graph, replaced)
    for name in names:
        for index in range(len(rewriter.ops)):
            PASSES[name](rewriter, index)
    return rewriter.result()
