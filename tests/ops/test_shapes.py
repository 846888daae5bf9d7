"""Shape rules of the 119 NNEF standard ops, checked against the Khronos `nnef` package as oracle.

Each row is one invocation: the op, its tensor inputs (a shape -> an `external` of that shape, None -> a literal,
a list of shapes -> a tensor array) and the attributes written in the document (the parser fills the defaults).
The test writes a tiny NNEF document for the row, parses it with `nnef.parse_string(..., lowered=[])` (so the
compound ops stay atomic), runs `nnef.infer_shapes`, and calls our rule with the row's input shapes and the attributes
the Khronos parser produced -- exactly what our lowering passes.

Rows where we deliberately differ from the Khronos shape inference carry `ours=` (our expected result) and a
`why`; the test then also asserts that the Khronos result differs (or that it raises).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from fragment_libraries import library_fragments
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch.errors import NNEFShapeError
from nnef_torch.ir.deviations import LENIENT_OPS
from nnef_torch.ops.registry import shape_rules

nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package is the oracle of these tests")

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "openvx_nnef_core"

STANDARD_OPS = """
external variable constant update reshape transpose concat split slice squeeze unsqueeze stack unstack tile pad gather
cast add sub mul div pow exp log sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh abs sign rcp neg copy lt
gt le ge eq ne and or not floor ceil round select sqr sqrt rsqr rsqrt log2 min max clamp matmul conv deconv box debox
argmax_pool sample desample nearest_downsample area_downsample nearest_upsample multilinear_upsample sum_reduce
max_reduce min_reduce argmax_reduce argmin_reduce any_reduce all_reduce mean_reduce moments relu sigmoid softabs
softmax softplus elu selu gelu silu prelu leaky_relu max_pool_with_index max_pool avg_pool rms_pool linear
separable_conv separable_deconv local_response_normalization local_mean_normalization local_variance_normalization
local_contrast_normalization l1_normalization l2_normalization batch_normalization avg_roi_pool max_roi_pool
roi_resample avg_roi_align max_roi_align min_max_linear_quantize zero_point_linear_quantize linear_quantize
logarithmic_quantize copy_n add_n
""".split()

# Input element types other than scalar, per op (positional); the rest are scalar.
INPUT_TYPES = {
    'and': ('logical', 'logical'), 'or': ('logical', 'logical'), 'not': ('logical',),
    'select': ('logical', 'scalar', 'scalar'), 'any_reduce': ('logical',), 'all_reduce': ('logical',),
    'gather': ('scalar', 'integer'), 'sample': ('scalar', 'integer'), 'desample': ('scalar', 'integer'),
    'avg_roi_pool': ('scalar', 'scalar', 'integer'), 'max_roi_pool': ('scalar', 'scalar', 'integer'),
    'roi_resample': ('scalar', 'scalar', 'integer'), 'avg_roi_align': ('scalar', 'scalar', 'integer'),
    'max_roi_align': ('scalar', 'scalar', 'integer'), 'zero_point_linear_quantize': ('scalar', 'integer', 'scalar'),
}
LITERALS = {'scalar': '0.5', 'integer': '0', 'logical': 'true'}
RESULT_COUNT = {'max_pool_with_index': 2, 'moments': 2}
ARRAY_RESULT = {'split', 'unstack', 'copy_n'}
GENERIC = {'cast': '<integer>'}
KEYWORD_ATTRIBUTES = {'lambda': 'lambda_'}  # NNEF attribute names that are Python keywords


@dataclass
class Row:
    op: str
    inputs: tuple
    attrs: dict[str, Any] = field(default_factory=dict)
    ours: Any = None  # set only where we deliberately differ from the Khronos result
    why: str = ''

    def __str__(self) -> str:
        return f"{self.op}{self.inputs}{self.attrs or ''}"


def row(op: str, *inputs, ours: Any = None, why: str = '', **attrs) -> Row:
    return Row(op, inputs, attrs, ours, why)


# The document, the Khronos result and ours.

def _text(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, tuple):
        return '(' + ', '.join(_text(item) for item in value) + ')'
    if isinstance(value, list):
        return '[' + ', '.join(_text(item) for item in value) + ']'
    return repr(value)


def document(r: Row, count: int) -> str:
    types = INPUT_TYPES.get(r.op, ('scalar',) * len(r.inputs))
    lines, names = ['d = external<scalar>(shape = [1]);'], ['d']
    args = []
    for i, (value, dtype) in enumerate(zip(r.inputs, types)):
        if value is None:
            args.append(LITERALS[dtype])
            continue
        items = value if isinstance(value, list) else [value]
        ids = [f"t{i}_{j}" for j in range(len(items))]
        for name, shape in zip(ids, items):
            if r.op == 'update' and i == 0:
                lines.append(f"{name} = variable<{dtype}>(shape = {_text(list(shape))}, label = '{name}');")
            else:
                lines.append(f"{name} = external<{dtype}>(shape = {_text(list(shape))});")
                names.append(name)
        args.append('[' + ', '.join(ids) + ']' if isinstance(value, list) else ids[0])
    args += [f"{key} = {_text(value)}" for key, value in r.attrs.items()]
    outputs = [f"o{i}" for i in range(count)]
    results = outputs
    if r.op == 'external':  # an external's result must be a graph input, which cannot be a graph output too
        names.append('o0')
        results = ['z']
    target = '[' + ', '.join(outputs) + ']' if r.op in ARRAY_RESULT else ', '.join(outputs)
    lines.append(f"{target} = {r.op}{GENERIC.get(r.op, '')}({', '.join(args)});")
    if r.op == 'external':
        lines.append("z = copy(o0);")
    body = '\n    '.join(lines)
    return f"version 1.0;\ngraph G( {', '.join(names)} ) -> ( {', '.join(results)} )\n{{\n    {body}\n}}\n"


def our_inputs(r: Row) -> list:
    return [() if value is None else [tuple(v) for v in value] if isinstance(value, list) else tuple(value)
            for value in r.inputs]


def run_ours(op: str, inputs: list, attribs: dict) -> Any:
    kwargs = {KEYWORD_ATTRIBUTES.get(key, key): value for key, value in attribs.items()}
    return shape_rules()[op](*inputs, **kwargs)


def khronos_result(graph, op) -> Any:
    def shape(name):
        return tuple(graph.tensors[name].shape)

    results = [[shape(n) for n in value] if isinstance(value, list) else shape(value) for value in op.outputs.values()]
    return results[0] if len(results) == 1 else tuple(results)


def run_row(r: Row) -> tuple[Any, Any]:
    """(our result or NNEFShapeError, Khronos result or the exception it raised) for a row."""
    # Our rule needs the attributes with defaults, which the parser fills; parse once with a guessed count.
    def parse(count):
        graph = nnef.parse_string(document(r, count), lowered=[])
        op = next(op for op in graph.operations
                  if any(value == 'o0' or isinstance(value, list) and 'o0' in value for value in op.outputs.values()))
        return graph, op

    count = RESULT_COUNT.get(r.op, 1)
    graph, op = parse(count)
    try:
        ours = run_ours(r.op, our_inputs(r), dict(op.attribs))
    except NNEFShapeError as error:
        ours = error
    if r.op in ARRAY_RESULT and isinstance(ours, list) and len(ours) != count:
        graph, op = parse(len(ours))
    try:
        nnef.infer_shapes(graph)
        theirs = khronos_result(graph, op)
    except Exception as error:  # the Khronos rules raise nnef.Error, and IndexError etc. where they do not check
        theirs = error
    return ours, theirs


# Valid rows.

UNARY = """copy neg rcp exp log sin cos tan sinh cosh tanh asin acos atan asinh acosh atanh abs sign floor ceil round
sqr sqrt rsqr rsqrt log2 relu sigmoid softplus gelu silu not cast""".split()
BINARY = "add sub mul div pow lt gt le ge eq ne and or min max".split()
REDUCE = "sum_reduce mean_reduce max_reduce min_reduce argmax_reduce argmin_reduce any_reduce all_reduce".split()
POOL = "box argmax_pool max_pool avg_pool rms_pool".split()

X4 = (4, 16, 32, 32)
ROWS = [
    *(row(op, shape) for op in UNARY for shape in (X4, (7,), (2, 1, 3))),
    row('exp', None), row('neg', None),
    row('softabs', X4, epsilon=0.1), row('elu', X4), row('elu', (3, 5), alpha=0.5), row('selu', X4),
    row('selu', (3, 5), alpha=1.5, **{'lambda': 2.0}), row('leaky_relu', X4, alpha=0.2),
    *(row(op, x, y) for op in BINARY for x, y in (
        (X4, X4), (X4, (1, 16)), ((1, 16), X4), (X4, None), (None, (4, 5)), ((2, 1, 3), (1, 5, 3)), ((3,), (3, 4)))),
    row('select', (4, 1, 3), (1, 5, 3), (4, 5, 1)), row('select', None, X4, (1, 16)),
    row('select', (4, 16), (4, 16), None), row('select', (1, 16, 1, 1), None, None),
    row('clamp', X4, None, None), row('clamp', (4, 16), (1, 16), (4, 1)), row('clamp', (1, 3), (5, 1), (5, 3, 2)),
    row('prelu', X4, (1, 16)), row('prelu', (4, 16), None), row('prelu', (4, 16, 8), (4, 16, 8)),
    row('linear_quantize', X4, None, None, bits=8), row('linear_quantize', X4, (1, 16), (1, 16), bits=4),
    row('logarithmic_quantize', X4, None, bits=8), row('logarithmic_quantize', (4, 16), (1, 16), bits=3),
    row('min_max_linear_quantize', X4, None, None, bits=8, signed=True, symmetric=False),
    row('min_max_linear_quantize', (4, 16), (1, 16), (1, 1), bits=8, signed=False, symmetric=True),
    row('zero_point_linear_quantize', X4, None, None, bits=8, signed=True, symmetric=True),
    row('zero_point_linear_quantize', (4, 16), (1, 16), (1, 16), bits=8, signed=False, symmetric=False),
    # Tensor introducing ops and updates.
    row('external', shape=[2, 3]), row('external', shape=[1]), row('external', shape=[]),
    row('variable', shape=[16, 3, 3, 3], label='conv1/filter'), row('variable', shape=[5], label='a.b-c_d\\e'),
    row('constant', shape=[2, 2], value=[1.0]), row('constant', shape=[2, 2], value=[1.0, 2.0, 3.0, 4.0]),
    row('constant', shape=[1], value=[3.14]), row('update', (4, 6), (4, 6)), row('update', (1,), (1,)),
    # Reshaping.
    row('reshape', X4, shape=[4, -1]), row('reshape', X4, shape=[0, -1]), row('reshape', X4, shape=[0, 0, 1024]),
    row('reshape', X4, shape=[-1]), row('reshape', (3, 16, 4, 4), shape=[0, 256]),
    row('reshape', X4, shape=[2, 2, 0, 8, 8, 8]), row('reshape', X4, shape=[512], axis_start=1, axis_count=2),
    row('reshape', X4, shape=[4, 4], axis_start=1, axis_count=1), row('reshape', X4, shape=[-1], axis_start=2),
    row('reshape', X4, shape=[1], axis_start=1, axis_count=0), row('reshape', X4, shape=[0, -1], axis_start=1),
    row('reshape', (6,), shape=[2, 3]), row('reshape', (2, 3), shape=[6, 1, 1]),
    row('squeeze', (4, 16, 1, 1), axes=[2, 3]), row('squeeze', (1, 5), axes=[0]), row('squeeze', X4, axes=[]),
    row('unsqueeze', (4, 16), axes=[2, 3]), row('unsqueeze', (4, 16), axes=[0]), row('unsqueeze', (5, 6), axes=[0, 3]),
    row('unsqueeze', (5, 6), axes=[1]), row('unsqueeze', (4, 16), axes=[3, 0]),
    row('unsqueeze', (5, 6), axes=[2, 0], ours=(1, 5, 1, 6),
        why="axes are output positions; the Khronos Python rule inserts in list order and gives [1,5,6,1]"),
    row('transpose', X4, axes=[0, 2, 3, 1]), row('transpose', X4, axes=[1, 0]), row('transpose', X4, axes=[]),
    row('transpose', (2, 3, 5), axes=[2, 0, 1]),
    # Splitting, concatenation, stacking.
    row('concat', [(4, 16, 8), (4, 8, 8)], axis=1), row('concat', [(1, 3), (2, 3), (3, 3)], axis=0),
    row('concat', [(4, 6)], axis=1), row('concat', [(2, 3, 4), (2, 3, 1)], axis=2),
    row('split', (4, 6), axis=1, ratios=[1, 2]), row('split', X4, axis=1, ratios=[1, 1, 2]),
    row('split', (4, 6), axis=0, ratios=[1]), row('split', (12, 6), axis=0, ratios=[3, 1]),
    row('stack', [(4, 6)] * 3, axis=0), row('stack', [(4, 6)] * 2, axis=2), row('stack', [(4, 6)] * 5, axis=1),
    row('unstack', (3, 4, 5), axis=0), row('unstack', (3, 4, 5), axis=1), row('unstack', (3, 4, 5), axis=2),
    # Slicing, incl. the 1.0.5 strides.
    row('slice', X4, axes=[1], begin=[2], end=[5]), row('slice', X4, axes=[1], begin=[2], end=[0]),
    row('slice', X4, axes=[2, 3], begin=[1, -8], end=[-1, 0]), row('slice', X4, axes=[1], begin=[-4], end=[-1]),
    row('slice', X4, axes=[1], begin=[0], end=[100]), row('slice', X4, axes=[1], begin=[3], end=[16], stride=[2]),
    row('slice', X4, axes=[1], begin=[0], end=[16], stride=[5]),
    row('slice', X4, axes=[3], begin=[1], end=[-1], stride=[3]),
    row('slice', X4, axes=[1], begin=[-1], end=[-17], stride=[-1]),
    row('slice', X4, axes=[1], begin=[-1], end=[-100], stride=[-2]),
    row('slice', X4, axes=[1], begin=[10], end=[2], stride=[-3]),
    row('slice', X4, axes=[1], begin=[15], end=[0], stride=[-1]),
    row('slice', X4, axes=[1, 2], begin=[15, 0], end=[-100, 32], stride=[-1, 1]),
    row('slice', X4, axes=[], begin=[], end=[]), row('slice', X4, axes=[0, 1], begin=[1, 1], end=[3, 2], stride=[]),
    row('slice', (4, 16, 8, 8), axes=[1, 2], begin=[0, 0], end=[0, 8], stride=[1, 2], ours=(4, 16, 4, 8),
        why="end 0 means 'to the end' on each axis of stride 1 (as the Khronos C++ rule); the Python rule needs "
            "all strides 1"),
    # tile, pad, gather, matmul, linear, copy_n, add_n.
    row('tile', (2, 3), repeats=[2, 2]), row('tile', (4, 16, 1, 1), repeats=[1, 1, 8, 8]),
    row('tile', (5,), repeats=[1]),
    row('pad', X4, padding=[(0, 0), (0, 0), (1, 1), (2, 0)]),
    row('pad', X4, padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border='reflect', value=1.0),
    row('pad', (3, 4), padding=[(1, 2), (-1, 0)], border='replicate'),
    row('pad', (3,), padding=[(0, 0)], border='reflect-even'),
    row('gather', (10, 16), (4,)), row('gather', (4, 10, 16), (2, 3), axis=1),
    row('gather', (4, 10, 16), None, axis=2), row('gather', (4, 10), (5, 1, 2), axis=0),
    row('matmul', (4, 16), (16, 8)), row('matmul', (16, 4), (16, 8), transposeA=True),
    row('matmul', (4, 16), (8, 16), transposeB=True),
    row('matmul', (16, 4), (8, 16), transposeA=True, transposeB=True),
    row('matmul', (2, 4, 16), (2, 16, 8)), row('matmul', (2, 1, 4, 16), (1, 3, 16, 8)),
    row('matmul', (2, 4, 16), (1, 8, 16), transposeB=True),
    row('linear', (4, 16), (32, 16), (1, 32)), row('linear', (4, 16), (32, 16), None),
    row('linear', (1, 3), (2, 3), None),
    row('linear', (4, 16), (32, 16), (1, 1), ours=(4, 32),
        why="a [1,1] bias broadcasts (spec: linear adds bias); the Khronos Python rule demands bias[-1] == 32"),
    row('copy_n', (4, 16), times=3), row('copy_n', (7,), times=1),
    row('add_n', [(4, 16)] * 3), row('add_n', [X4]),
    # Reductions and the normalizations built on them.
    *(row(op, X4, axes=axes) for op in REDUCE for axes in ([2, 3], [1], [])),
    row('sum_reduce', X4, axes=[0, 1, 2, 3], normalize=True),
    row('moments', X4, axes=[2, 3]), row('moments', (5, 7), axes=[0]),
    row('softmax', X4), row('softmax', X4, axes=[0, 1]), row('softmax', (3, 5), axes=[1]),
    row('l1_normalization', X4, axes=[1]), row('l2_normalization', X4, axes=[1], bias=1.0, epsilon=0.1),
    row('l2_normalization', X4, axes=[2, 3]),
    row('batch_normalization', X4, (1, 16), (1, 16), (1, 16), (1, 16), epsilon=0.001),
    row('batch_normalization', X4, None, None, None, None, epsilon=0.0),
    row('batch_normalization', (4, 16), (1, 16), (1, 16), None, (1, 1), epsilon=1.0),
]

# Sliding windows: every padding / stride / dilation combination in 2-D, a product in 1-D and 3-D.
PADDINGS = {1: ([], [(0, 0)], [(1, 1)], [(0, 2)]), 2: ([], [(0, 0)] * 2, [(1, 1)] * 2, [(0, 1), (2, 1)]),
            3: ([], [(0, 0)] * 3, [(1, 1)] * 3, [(1, 0), (0, 1), (2, 2)])}
STRIDES = {1: ([], [1], [2]), 2: ([], [1, 1], [2, 2], [2, 3]), 3: ([], [2, 2, 2], [1, 2, 3])}
DILATIONS = {1: ([], [3]), 2: ([], [2, 2], [1, 3]), 3: ([], [2, 1, 2])}
SPATIAL = {1: (20,), 2: (20, 17), 3: (10, 9, 8)}
KERNEL = {1: (3,), 2: (3, 4), 3: (3, 3, 2)}
for dims in (1, 2, 3):
    for padding, stride, dilation in product(PADDINGS[dims], STRIDES[dims], DILATIONS[dims]):
        window = dict(padding=padding, stride=stride, dilation=dilation)
        ROWS.append(row('conv', (2, 8) + SPATIAL[dims], (6, 8) + KERNEL[dims], (1, 6), **window))
        ROWS.append(row('deconv', (2, 8) + SPATIAL[dims], (8, 6) + KERNEL[dims], None, **window))
        if dims == 2:
            # the pooling family lists all dimensions: extend the spatial lists by the batch and channel items
            leads = ([(0, 0)] * 2, [1, 1], [1, 2])
            window = {key: value and lead + value for (key, value), lead in zip(window.items(), leads)}
            ROWS.append(row('box', (2, 4) + SPATIAL[2], size=[1, 1, 3, 4], **window))
            ROWS.append(row('debox', (2, 4) + SPATIAL[2], size=[1, 2, 3, 4], **window))

CONV_IN, POOL_IN = (2, 8, 20, 18), (2, 4, 20, 18)
ROWS += [
    row('conv', CONV_IN, (6, 4, 3, 3), None, groups=2), row('conv', CONV_IN, (8, 1, 3, 3), (1, 8), groups=0),
    row('conv', CONV_IN, (16, 1, 5, 5), None, groups=0, padding=[(2, 2), (2, 2)]),
    row('conv', CONV_IN, (16, 1, 3, 3), None, groups=8), row('conv', CONV_IN, (6, 8, 3, 3), (1, 6), border='reflect'),
    row('conv', (4, 16, 32, 32), (16, 1, 3, 3), (1, 16), groups=0),
    row('conv', CONV_IN, (6, 8, 20, 18), None, padding=[(0, 0), (0, 0)]), row('conv', (3, 5), (7, 5), None),
    row('conv', CONV_IN, (6, 8, 3, 3), (1, 1), ours=(2, 6, 20, 18),
        why="spec: the bias channel extent may be singular; the Khronos Python rule demands 6"),
    row('conv', CONV_IN, (6, 8, 3, 3), (1, 6, 1, 1), ours=(2, 6, 20, 18),
        why="spec: bias singular in all dimensions but the channel one; the Khronos rule demands rank <= 2"),
    row('deconv', (2, 8, 10, 9), (8, 6, 3, 3), None, stride=[2, 2], output_shape=[2, 6, 20, 18]),
    row('deconv', (2, 8, 10, 9), (8, 6, 3, 3), None, stride=[2, 2], output_shape=[2, 6, 19, 17]),
    row('deconv', (2, 8, 10, 9), (8, 6, 3, 3), None, stride=[2, 2], padding=[(1, 1), (1, 1)],
        output_shape=[2, 6, 20, 18]),
    row('deconv', (2, 8, 10, 9), (8, 6, 3, 3), None, stride=[2, 2], padding=[(1, 0), (0, 1)]),
    row('deconv', (4, 16, 32, 32), (16, 1, 3, 3), (1, 16), groups=0),
    row('deconv', CONV_IN, (8, 3, 3, 3), None, groups=2),
    row('deconv', CONV_IN, (8, 1, 3, 3), None, groups=0, output_shape=[2, 8, 20, 18]),
    row('deconv', (2, 8, 10, 9), (8, 3, 3, 3), (1, 6), groups=2, stride=[2, 2], output_shape=[2, 6, 20, 18]),
    *(row(op, POOL_IN, size=[1, 1, 3, 3], border=border, padding=padding, stride=stride)
      for op in POOL for border, padding, stride in (
          ('constant', [], []), ('ignore', [], [1, 1, 2, 2]), ('ignore', [(0, 0)] * 2 + [(0, 1)] * 2, [1, 1, 2, 2]),
          ('reflect', [(0, 0), (0, 0), (1, 1), (1, 1)], []))),
    row('box', POOL_IN, size=[2, 2, 2, 2], stride=[2, 2, 2, 2], normalize=True),
    row('max_pool', POOL_IN, size=[1, 1, 3, 3], dilation=[1, 1, 2, 2], padding=[(0, 0)] * 4),
    row('debox', (2, 4, 10, 9), size=[1, 1, 3, 3], stride=[1, 1, 2, 2], output_shape=[2, 4, 19, 17]),
    row('debox', (2, 4, 10, 9), size=[1, 1, 2, 2], stride=[1, 1, 2, 2], padding=[(0, 0)] * 4,
        output_shape=[2, 4, 20, 19]),
    *(row('max_pool_with_index', POOL_IN, size=[1, 1, 3, 3], border='ignore', padding=padding, stride=stride)
      for padding, stride in (([], []), ([], [1, 1, 2, 2]), ([(0, 0)] * 2 + [(1, 1)] * 2, [1, 1, 2, 2]))),
    row('sample', POOL_IN, POOL_IN, size=[1, 1, 3, 3]),
    row('sample', POOL_IN, POOL_IN, size=[1, 1, 3, 3], border='ignore'),
    row('sample', POOL_IN, (2, 4, 10, 9), size=[1, 1, 3, 3], stride=[1, 1, 2, 2], ours=(2, 4, 10, 9),
        why="spec: index has the output shape; the Khronos rule compares it with the input, rejecting any stride"),
    row('desample', (2, 4, 10, 9), (2, 4, 10, 9), size=[1, 1, 3, 3], stride=[1, 1, 2, 2]),
    row('desample', (2, 4, 10, 9), (2, 4, 10, 9), size=[1, 1, 3, 3], stride=[1, 1, 2, 2], output_shape=[2, 4, 19, 17]),
    row('desample', POOL_IN, POOL_IN, size=[1, 1, 3, 3], padding=[(0, 0), (0, 0), (1, 1), (1, 1)], border='ignore'),
    # Separable convolutions follow their definition (groups and point filters of any size allowed).
    row('separable_conv', (2, 8, 20, 20), (8, 1, 3, 3), (16, 8, 1, 1), (1, 16)),
    row('separable_conv', (2, 8, 20, 20), (16, 1, 3, 3), (12, 16, 1, 1), None, stride=[2, 2], padding=[(1, 1)] * 2),
    row('separable_conv', (2, 8, 20, 20), (8, 1, 3, 3), (12, 4, 1, 1), None, groups=2, ours=(2, 12, 20, 20),
        why="the definition's second conv takes groups; the Khronos rule only works for groups = 1"),
    row('separable_conv', (2, 8, 20, 20), (8, 1, 3, 3), (12, 8, 3, 3), None, ours=(2, 12, 20, 20),
        why="the definition's second conv has automatic padding, so point filters need not be 1x1"),
    row('separable_deconv', (2, 16, 10, 10), (8, 1, 3, 3), (16, 8, 1, 1), (1, 8)),
    row('separable_deconv', (2, 16, 10, 10), (8, 1, 3, 3), (16, 8, 1, 1), None, stride=[2, 2],
        output_shape=[2, 8, 19, 19]),
    row('separable_deconv', (2, 16, 10, 10), (8, 1, 3, 3), (16, 4, 1, 1), None, groups=2, ours=(2, 8, 10, 10),
        why="the definition's first deconv takes groups; the Khronos rule only works for groups = 1"),
    # Up- and down-sampling.
    row('nearest_downsample', POOL_IN, factor=[2, 3]), row('nearest_downsample', (2, 4, 9), factor=[3]),
    row('area_downsample', POOL_IN, factor=[4, 2]), row('area_downsample', (1, 2, 8, 8, 8), factor=[2, 4, 8]),
    row('nearest_upsample', (2, 4, 5, 6), factor=[2, 3]), row('nearest_upsample', (2, 4, 5), factor=[4]),
    row('multilinear_upsample', (2, 4, 5, 6), factor=[2, 2]),
    row('multilinear_upsample', (2, 4, 5, 6), factor=[2, 3], method='aligned', border='constant'),
    row('multilinear_upsample', (2, 4, 5), factor=[4], method='asymmetric', border='reflect-even'),
    # Local normalizations.
    row('local_response_normalization', X4, size=[1, 5, 1, 1]),
    row('local_response_normalization', X4, size=[1, 1, 3, 3], alpha=0.1, beta=0.75, bias=2.0),
    row('local_mean_normalization', X4, size=[1, 1, 3, 3]), row('local_variance_normalization', X4, size=[1, 1, 3, 3]),
    row('local_contrast_normalization', X4, size=[1, 1, 3, 3], bias=1.0, epsilon=0.1),
    # Region of interest ops.
    row('avg_roi_pool', X4, (5, 4), (5,), output_size=[7, 7]),
    row('max_roi_pool', X4, (5, 4), (5,), output_size=[3, 2]),
    row('roi_resample', X4, (5, 4), (5,), output_size=[7, 7], method='aligned'),
    row('avg_roi_align', X4, (5, 4), (5,), output_size=[7, 7], sampling_rate=[2, 2]),
    row('max_roi_align', X4, (1, 4), (1,), output_size=[2, 3], sampling_rate=[1, 2], resize_method='asymmetric'),
    row('max_roi_pool', (2, 16, 32), (5, 2), (5,), output_size=[7], ours=(5, 16, 7),
        why="spec: rois are [N, 2 * spatial dims]; the Khronos rule demands 4 coordinates"),
    row('avg_roi_pool', X4, (5, 4), (5, 1), output_size=[7, 7], ours=(5, 16, 7, 7),
        why="spec: batch_index is [N, 1]; the Khronos rule demands [N] (accepted too)"),
]


@pytest.mark.parametrize("r", ROWS, ids=str)
def test_shape_rule_matches_khronos(r: Row) -> None:
    ours, theirs = run_row(r)
    assert not isinstance(ours, Exception), f"our rule rejected a valid row: {ours}"
    if r.ours is None:
        assert ours == theirs
    else:
        assert ours == r.ours, r.why
        assert isinstance(theirs, Exception) or theirs != ours, f"Khronos now agrees; drop the override ({r.why})"


def test_exactly_the_standard_ops_have_rules() -> None:
    assert len(STANDARD_OPS) == len(set(STANDARD_OPS)) == 119
    # beyond the standard ops, only fragments of the package's own libraries (front ends), tested with them
    assert set(STANDARD_OPS) <= set(shape_rules())
    assert set(shape_rules()) - set(STANDARD_OPS) <= library_fragments() | LENIENT_OPS  # and what real producers write


def test_every_op_has_rows() -> None:
    assert len(ROWS) >= 250
    assert {r.op for r in ROWS} == set(STANDARD_OPS)


def test_broadcast_aligns_from_the_left() -> None:
    rules = shape_rules()
    assert rules['add']((4, 16, 32, 32), (1, 16)) == (4, 16, 32, 32)
    assert rules['mul']((16,), (16, 3)) == (16, 3)
    with pytest.raises(NNEFShapeError):
        rules['add']((4, 16, 32, 32), (16,))  # numpy would align 16 with the last 32


def test_result_kinds() -> None:
    rules = shape_rules()
    pool = dict(size=[1, 1, 2, 2], border='ignore', padding=[], stride=[1, 1, 2, 2], dilation=[])
    assert rules['max_pool_with_index']((1, 2, 4, 4), **pool) == ((1, 2, 2, 2), (1, 2, 2, 2))
    assert rules['moments']((3, 5), axes=[1]) == ((3, 1), (3, 1))
    assert rules['split']((4, 6), axis=1, ratios=[1, 2]) == [(4, 2), (4, 4)]
    assert rules['copy_n']((3,), times=2) == [(3,), (3,)]
    assert rules['reshape']([4, 6], shape=[-1], axis_start=0, axis_count=-1) == (24,)


def test_groups_zero_means_depthwise() -> None:
    conv = shape_rules()['conv']
    window = dict(border='constant', padding=[], stride=[], dilation=[])
    assert conv((1, 8, 5, 5), (16, 1, 3, 3), (1, 16), groups=0, **window) == (1, 16, 5, 5)
    with pytest.raises(NNEFShapeError, match="groups \\(0 = depthwise: 8\\)"):
        conv((1, 8, 5, 5), (16, 2, 3, 3), (), groups=0, **window)


def test_selu_receives_lambda_as_lambda_() -> None:
    # `lambda` is a Python keyword: the lowering passes it as `lambda_` (see KEYWORD_ATTRIBUTES).
    assert shape_rules()['selu']((2, 3), alpha=1.0, lambda_=1.0) == (2, 3)


# Invalid arguments: our rule raises NNEFShapeError. `khronos=True` where the Khronos shape inference rejects the
# same case (it raises); `khronos=False` marks where it is lenient and we trust the spec (`why` says which rule).

@dataclass
class Bad:
    row: Row
    match: str
    khronos: bool
    why: str = ''

    def __str__(self) -> str:
        return str(self.row)


def bad(op: str, *inputs, match: str, khronos: bool = True, why: str = '', **attrs) -> Bad:
    assert khronos or why, "say which spec rule the Khronos tools do not check"
    return Bad(Row(op, inputs, attrs), match, khronos, why)


LENIENT = "not checked by the Khronos shape inference"
INVALID = [
    bad('add', (4, 16), (3, 16), match="broadcast compatible"),
    bad('select', (4, 16), (1, 16), (3, 1), match="broadcast compatible"),
    bad('clamp', (4, 16), (4, 15), None, match="broadcast compatible"),
    bad('prelu', (1, 16), (2, 16), match="cannot be broadcast"),
    bad('linear_quantize', (4, 16), (1, 7), None, bits=8, match="min shape [1,7] cannot be broadcast"),
    bad('logarithmic_quantize', (4, 16), None, bits=0, match="'bits' must be strictly positive"),
    bad('min_max_linear_quantize', (4,), (4, 3), None, bits=8, signed=False, symmetric=False, khronos=False,
        match="cannot be broadcast", why="a [4,3] range would enlarge x [4] (the Khronos check ignores extra dims)"),
    bad('update', (4, 6), (6, 4), match="value shape [6,4] must equal variable shape [4,6]"),
    bad('update', (3,), None, match="value shape [] must equal variable shape [3]"),
    bad('external', shape=[2, 0], match="'shape' must be strictly positive", khronos=False,
        why=f"spec 4.1.1: items in shape strictly positive; {LENIENT}"),
    bad('variable', shape=[-1], label='v', match="'shape' must be strictly positive", khronos=False,
        why=f"spec 4.1.3; {LENIENT}"),
    bad('variable', shape=[2], label='a b', match="'label'", khronos=False,
        why=f"spec 4.1.3 label characters; {LENIENT}"),
    bad('constant', shape=[2, 2], value=[1.0, 2.0, 3.0], match="length of 'value' must be 1 or", khronos=False,
        why="spec 4.1.2: value length 1 or the volume (the Khronos C++ rule checks it, the Python one does not)"),
    bad('reshape', (4, 6), shape=[5, 5], match="must equal the volume"),
    bad('reshape', (4, 6), shape=[-1, -1], match="at most one -1"),
    bad('reshape', (4, 6), shape=[-2, 12], match="items in 'shape' must be"),
    bad('reshape', (4, 6), shape=[5, -1], match="must divide the volume"),
    bad('reshape', (4, 6), shape=[24], axis_start=3, match="'axis_start' must be in range [0,2]"),
    bad('reshape', (4, 6), shape=[6], axis_start=1, axis_count=2, match="must not exceed the input rank"),
    bad('reshape', (4, 6), shape=[24], axis_count=-2, match="'axis_count' must be non-negative or -1"),
    bad('reshape', (4, 6), shape=[1, 0, 0], match="has no dimension 2"),
    bad('transpose', (4, 6, 8), axes=[0, 2], match="permutation"),
    bad('transpose', (4, 6), axes=[2, 1, 0], match="must not exceed the input rank"),
    bad('squeeze', (4, 16, 1), axes=[1], match="must be singleton", khronos=False,
        why="spec 4.5.1: squeeze removes singleton dimensions (the Khronos C++ rule checks it, the Python one not)"),
    bad('squeeze', (4, 1), axes=[2], match="in range [0,2)"),
    bad('unsqueeze', (4, 6), axes=[3], match="in range [0,3)"),
    bad('unsqueeze', (4, 6), axes=[1, 1], match="unique", khronos=False, why=f"axes must be unique; {LENIENT}"),
    bad('concat', [(4, 6), (4, 6, 1)], axis=1, match="same rank"),
    bad('concat', [(4, 6), (5, 6)], axis=1, match="agree in all dimensions but 'axis'"),
    bad('concat', [(4, 6), (4, 6)], axis=2, match="'axis' must be in range [0,2)"),
    bad('split', (4, 6), axis=1, ratios=[1, 3], match="must divide the extent"),
    bad('split', (4, 6), axis=1, ratios=[0, 6], match="strictly positive"),
    bad('split', (4, 6), axis=1, ratios=[], match="must not be empty"),
    bad('split', (4, 6), axis=-1, ratios=[1], match="'axis' must be in range"),
    bad('stack', [(4, 6), (4, 5)], axis=0, match="identical"),
    bad('stack', [(4, 6), (4, 6)], axis=3, match="'axis' must be in range [0,3)"),
    bad('unstack', (4, 6), axis=2, match="'axis' must be in range [0,2)"),
    bad('slice', X4, axes=[4], begin=[0], end=[1], match="in range [0,4)"),
    bad('slice', X4, axes=[1, 2], begin=[0], end=[1, 1], match="same length"),
    bad('slice', X4, axes=[1], begin=[0], end=[4], stride=[1, 1], match="length of 'stride'"),
    bad('slice', X4, axes=[1], begin=[0], end=[4], stride=[0], match="non-zero"),
    bad('slice', X4, axes=[1], begin=[5], end=[2], match="empty or out of range"),
    bad('slice', X4, axes=[1], begin=[2], end=[5], stride=[-1], match="empty or out of range"),
    bad('slice', X4, axes=[1], begin=[100], end=[-100], stride=[-1], match="empty or out of range"),
    bad('slice', X4, axes=[1], begin=[-100], end=[4], match="empty or out of range"),
    bad('slice', X4, axes=[1], begin=[3], end=[3], match="empty", khronos=False,
        why="spec 4.5.4: end must be greater than begin (the Khronos rule returns extent 0)"),
    bad('slice', X4, axes=[1, 1], begin=[0, 1], end=[4, 3], match="unique", khronos=False,
        why=f"an axis sliced twice is ambiguous; {LENIENT}"),
    bad('tile', (2, 3), repeats=[2], match="length of 'repeats' must be 2"),
    bad('tile', (2, 3), repeats=[2, 0], match="strictly positive", khronos=False,
        why="repeats must be positive (the Khronos C++ rule checks it, the Python one not)"),
    bad('pad', (2, 3), padding=[(1, 1)], match="length of 'padding' must be 2"),
    bad('pad', (2, 3), padding=[(0, 0), (1, 1)], border='ignore', match="'border' must be one of", khronos=False,
        why=f"pad border is constant, replicate, reflect or reflect-even; {LENIENT}"),
    bad('pad', (2, 3), padding=[(0, 0), (-2, -1)], match="strictly positive", khronos=False,
        why="extents must stay positive (the Khronos rule returns 0)"),
    bad('gather', (4, 6), (3,), axis=2, match="'axis' must be in range [0,2)"),
    bad('matmul', (4, 16), (8, 16), match="inner dimensions must agree"),
    bad('matmul', (4, 16), (16, 8), transposeA=True, match="inner dimensions must agree"),
    bad('matmul', (2, 4, 16), (16, 8), match="same rank"),
    bad('matmul', (16,), (16,), match="rank at least 2"),
    bad('matmul', (2, 4, 16), (3, 16, 8), match="broadcast compatible"),
    bad('linear', (4, 16, 1), (32, 16), None, match="rank 2"),
    bad('linear', (4, 16), (32, 15), None, match="filter channels (15) must equal input channels (16)"),
    bad('linear', (4, 16), (32, 16), (1, 7), match="bias shape [1,7] cannot be broadcast"),
    bad('linear', (4, 16), (32, 16), (32,), match="bias shape [32] cannot be broadcast", khronos=False,
        why="linear adds bias NNEF-style (aligned from the left), so a rank-1 [32] bias meets the batch dimension"),
    bad('copy_n', (4,), times=0, match="'times' must be strictly positive"),
    bad('add_n', [(4, 6), (4, 5)], match="identical"),
    # Reductions and normalizations.
    bad('sum_reduce', X4, axes=[4], match="in range [0,4)"),
    bad('mean_reduce', X4, axes=[-1], match="in range [0,4)"),
    bad('max_reduce', X4, axes=[1, 1], match="unique", khronos=False, why=f"spec 4.4: axes unique; {LENIENT}"),
    bad('moments', X4, axes=[5], match="in range [0,4)"),
    bad('softmax', (4, 16), axes=[2], match="in range [0,2)"),
    bad('l2_normalization', X4, axes=[7], match="in range [0,4)"),
    bad('batch_normalization', X4, (1, 7), None, None, None, epsilon=0.0, match="mean shape [1,7]"),
    bad('batch_normalization', X4, None, None, None, None, epsilon=-1.0, match="'epsilon' must be non-negative"),
    bad('local_response_normalization', X4, size=[1, 5], match="length of 'size' must be 4"),
    bad('local_mean_normalization', X4, size=[], match="length of 'size' must be 4", khronos=False,
        why="size is the box window over every dimension (the Khronos Python rule skips an empty size)"),
    bad('local_variance_normalization', X4, size=[1, 0, 1, 1], match="strictly positive"),
    # Sliding windows.
    bad('conv', (4,), (4,), None, match="rank at least 2"),
    bad('conv', CONV_IN, (6, 8, 3), None, match="filter rank must equal input rank"),
    bad('conv', CONV_IN, (6, 4, 3, 3), None,
        match="filter channels (4) times groups (1) must equal input channels (8)"),
    bad('conv', (2, 6, 9, 9), (8, 2, 3, 3), None, groups=3, match="groups (3) must divide filter batch (8)"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, groups=-1, match="'groups' must be non-negative"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, groups=0, match="groups (0 = depthwise: 8)"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, padding=[(1, 1)] * 3, match="length of 'padding' must be 2"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, stride=[2], match="length of 'stride' must be 2"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, dilation=[1, 1, 1, 1], match="length of 'dilation' must be 2"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, stride=[0, 1], match="'stride' must be strictly positive"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, dilation=[1, 0], match="'dilation' must be strictly positive"),
    bad('conv', CONV_IN, (6, 8, 3, 3), (1, 7), match="bias shape [1,7]"),
    bad('conv', CONV_IN, (6, 8, 3, 3), (6,), match="bias shape [6]", khronos=False,
        why="spec 4.3.1: bias is singular but in the channel dimension, so a rank-1 [6] bias is a batch of 6"),
    bad('conv', CONV_IN, (6, 8, 3, 3), None, border='ignore', match="'border' must be one of", khronos=False,
        why=f"spec 4.3.1: conv border is constant, replicate, reflect or reflect-even; {LENIENT}"),
    bad('conv', (1, 1, 2, 2), (1, 1, 5, 5), None, padding=[(0, 0), (0, 0)], match="must be at least the dilated window",
        khronos=False, why="spec 4.3: p + X + q >= fd (the Khronos rule returns a negative extent)"),
    bad('deconv', (2, 8, 10, 10), (8, 6, 3, 3), None, stride=[2, 2], output_shape=[2, 6, 25, 25],
        match="downscales to spatial extents [13,13]"),
    bad('deconv', (2, 8, 10, 10), (8, 6, 3, 3), None, stride=[2, 2], output_shape=[2, 5, 20, 20],
        match="'output_shape' channels (5)"),
    bad('deconv', (2, 8, 10, 10), (8, 6, 3, 3), None, output_shape=[2, 6, 10],
        match="length of 'output_shape' must be 4"),
    bad('deconv', (2, 8, 10, 10), (6, 8, 3, 3), None, match="filter batch (6) must equal input channels (8)"),
    bad('deconv', (1, 1, 1, 1), (1, 1, 1, 1), None, padding=[(1, 1), (0, 0)], match="must be strictly positive",
        khronos=False, why="extents must be positive (the Khronos rule returns -1)"),
    bad('separable_conv', (2, 8, 20, 20), (8, 1, 3, 3), (16, 4, 1, 1), None,
        match="point_filter channels (4) times groups (1) must equal plane-filtered input channels (8)"),
    bad('separable_conv', (2, 8, 20, 20), (8, 2, 3, 3), (16, 8, 1, 1), None,
        match="plane_filter channels (2) times groups (0 = depthwise: 8)"),
    bad('separable_deconv', (2, 16, 10, 10), (8, 1, 3, 3), (12, 8, 1, 1), None,
        match="point_filter batch (12) must equal input channels (16)"),
    bad('box', POOL_IN, size=[3, 3], match="length of 'size' must be 4"),
    bad('box', POOL_IN, size=[1, 1, 0, 3], match="'size' must be strictly positive", khronos=False,
        why="spec 4.3: size strictly positive (the Khronos C++ rule checks it, the Python one not)"),
    bad('max_pool', POOL_IN, size=[1, 1, 3, 3], padding=[(1, 1)] * 2, match="length of 'padding' must be 4"),
    bad('avg_pool', POOL_IN, size=[1, 1, 3, 3], stride=[1, 1, 2], match="length of 'stride' must be 4"),
    bad('max_pool', POOL_IN, size=[1, 1, 3, 3], border='wrap', match="'border' must be one of", khronos=False,
        why=f"spec 4.3: border modes; {LENIENT}"),
    bad('debox', (2, 4, 10, 9), size=[1, 1, 3, 3], stride=[1, 1, 2, 2], output_shape=[2, 4, 22, 17],
        match="downscales to [2,4,11,9]"),
    bad('argmax_pool', POOL_IN, size=[1, 1, 3, 3], dilation=[1, 1, 0, 1], match="'dilation' must be strictly positive"),
    bad('sample', POOL_IN, (2, 4, 20, 17), size=[1, 1, 3, 3], match="index shape [2,4,20,17] must equal"),
    bad('desample', (2, 4, 10, 9), (2, 4, 10, 8), size=[1, 1, 3, 3], match="index shape [2,4,10,8] must equal"),
    bad('desample', (2, 4, 10, 9), (2, 4, 10, 9), size=[1, 1, 3, 3], border='replicate', match="'border' must be",
        khronos=False, why=f"spec 4.3.3: desample border must be 'constant'; {LENIENT}"),
    bad('max_pool_with_index', POOL_IN, size=[1, 3, 3], match="length of 'size' must be 4"),
    bad('rms_pool', POOL_IN, size=[1, 1, 3, 3], stride=[1, 1, -2, 1], match="'stride' must be strictly positive"),
    # Up- and down-sampling.
    bad('nearest_downsample', POOL_IN, factor=[3, 3], match="must divide the spatial extents"),
    bad('area_downsample', POOL_IN, factor=[2, 0], match="'factor' must be strictly positive"),
    bad('nearest_upsample', (2, 4, 5, 6), factor=[2, -1], match="strictly positive", khronos=False,
        why=f"spec 4.3.4: factor strictly positive; {LENIENT}"),
    bad('multilinear_upsample', (2, 4, 5, 6), factor=[2], match="length of 'factor' must be 2"),
    bad('multilinear_upsample', (2, 4, 5, 6), factor=[2, 2], method='cubic', match="'method' must be one of",
        khronos=False, why=f"spec 4.3.4: methods; {LENIENT}"),
    bad('multilinear_upsample', (2, 4, 5, 6), factor=[2, 2], border='ignore', match="'border' must be one of",
        khronos=False, why=f"spec 4.3.4: border constant, replicate, reflect or reflect-even; {LENIENT}"),
    # Region of interest ops.
    bad('avg_roi_pool', X4, (5, 3), (5,), output_size=[7, 7], match="rois must have shape [N,4]"),
    bad('max_roi_pool', X4, (5, 4), (4,), output_size=[7, 7], match="batch_index must have shape [5]"),
    bad('roi_resample', X4, (5, 4), (5,), output_size=[7], match="length of 'output_size' must be 2"),
    bad('roi_resample', X4, (5, 4), (5,), output_size=[7, 7], method='nearest', match="'method' must be one of",
        khronos=False, why=f"spec 4.6.2: resampling methods; {LENIENT}"),
    bad('avg_roi_align', X4, (5, 4), (5,), output_size=[7, 7], sampling_rate=[2, 0], match="'sampling_rate'"),
    bad('max_roi_align', X4, (5, 4), (5,), output_size=[0, 7], sampling_rate=[2, 2], match="'output_size'"),
]


@pytest.mark.parametrize("case", INVALID, ids=str)
def test_invalid_arguments_raise(case: Bad) -> None:
    ours, theirs = run_row(case.row)
    assert isinstance(ours, NNEFShapeError), f"expected NNEFShapeError, got {ours!r}"
    assert ours.location is None
    assert str(ours.message).startswith(f"{case.row.op}: ")
    assert case.match in ours.message
    if case.khronos:
        assert isinstance(theirs, Exception), f"Khronos accepts this row: {theirs}"
    else:
        assert not isinstance(theirs, Exception), f"Khronos now rejects it too; drop the 'why' ({theirs})"


def test_invalid_table_is_large() -> None:
    assert len(INVALID) >= 40


# The Khronos conformance graphs: every op of every graph, fed the shapes and attributes the Khronos parser
# produces, gets the shapes the Khronos inference gets.

def _conformance_cases() -> list[Path]:
    return sorted(path for path in CONFORMANCE.glob("*/graph.nnef")) if CONFORMANCE.is_dir() else []


@pytest.mark.parametrize("path", _conformance_cases(), ids=lambda path: path.parent.name)
def test_conformance_graph_shapes(path: Path) -> None:
    graph = nnef.parse_string(path.read_text(), lowered=[])
    nnef.infer_shapes(graph)

    def shape_of(value):
        if isinstance(value, list):
            return [shape_of(item) for item in value]
        return tuple(graph.tensors[value].shape) if isinstance(value, nnef.Identifier) else ()

    for op in graph.operations:
        inputs = [shape_of(value) for value in op.inputs.values()]
        assert run_ours(op.name, inputs, dict(op.attribs)) == khronos_result(graph, op), op.name


# Properties over many random windows and slices, against the Khronos Python rules called directly and, for slice,
# Python's own slicing.

def _ours_or_error(op: str, *inputs, **attrs) -> Any:
    try:
        return run_ours(op, list(inputs), attrs)
    except NNEFShapeError as error:
        return error


@given(extent=st.integers(1, 12), begin=st.integers(-15, 15), end=st.integers(-15, 15),
       stride=st.integers(-4, 4).filter(bool))
def test_slice_matches_khronos_and_python(extent: int, begin: int, end: int, stride: int) -> None:
    ours = _ours_or_error('slice', (extent, 3), axes=[0], begin=[begin], end=[end], stride=[stride])
    try:
        theirs = tuple(nnef.shapes.slice_shape([extent, 3], axes=[0], begin=[begin], end=[end], stride=[stride]))
    except AssertionError:
        theirs = None
    if theirs is None or theirs[0] == 0:  # Khronos rejects it, or returns an empty slice, which we reject
        assert isinstance(ours, NNEFShapeError)
        return
    assert ours == theirs
    python_end = None if end == 0 and stride == 1 else end
    assert ours[0] == len(range(extent)[begin:python_end:stride])


@given(size=st.integers(1, 40), kernel=st.integers(1, 6), p=st.integers(0, 4), q=st.integers(0, 4),
       stride=st.integers(1, 4), dilation=st.integers(1, 3), auto=st.booleans(), transposed=st.booleans())
def test_window_extent_matches_khronos(size: int, kernel: int, p: int, q: int, stride: int, dilation: int,
                                       auto: bool, transposed: bool) -> None:
    padding = [] if auto else [(p, q)]
    op, khronos_rule = ('deconv', nnef.shapes.deconv_shape) if transposed else ('conv', nnef.shapes.conv_shape)
    attrs = dict(border='constant', padding=padding, stride=[stride], dilation=[dilation], groups=1)
    if transposed:
        attrs['output_shape'] = []
    ours = _ours_or_error(op, (1, 2, size), (2, 2, kernel), (), **attrs)
    theirs = tuple(khronos_rule([1, 2, size], [2, 2, kernel], [], **attrs))
    if theirs[2] <= 0:  # the Khronos rule returns a non-positive extent where the spec says the window does not fit
        assert isinstance(ours, NNEFShapeError)
    else:
        assert ours == theirs
