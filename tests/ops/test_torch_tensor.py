"""Torch implementations of the tensor shape ops, constant, cast, matmul / linear, copy_n and add_n, against the
Khronos executor (or a numpy function written from the NNEF definition where the executor cannot run the case).

The shared harness writes neither tensor-array inputs (concat, stack, add_n) nor array results (split, unstack,
copy_n) nor a graph without inputs (constant) into its one-op document, so `document(...)` here builds those,
`khronos(...)` runs them in the Khronos executor, and `check_local_case` runs them eager, traced and loaded.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ops.torch_harness import OpCase, assert_close, case_ids, check_case, gradcheck_case

import nnef_torch
import nnef_torch.ops.torch_tensor  # noqa: F401  (registers the ops)
from nnef_torch.format.printer import print_literal
from nnef_torch.importer.tracer import OpTracer
from nnef_torch.ops import registry

rng = np.random.default_rng(0)
_KIND = {"f": "scalar", "i": "integer", "u": "integer", "b": "logical"}


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def document(op: str, values: Sequence[Any], attribs: dict[str, Any], *, results: int = 1,
             array_result: bool = False, generic: str | None = None) -> tuple[str, list[np.ndarray]]:
    """A one-operation NNEF document: each array (also inside a tensor-array argument) an external, literals
    inline, results y0, y1, ... (`[y0, y1] = op(...)` for an array result). Returns the text and the arrays."""
    externals: dict[str, np.ndarray] = {}

    def argument(value: Any) -> str:
        if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
            return "[" + ", ".join(argument(item) for item in value) + "]"
        if isinstance(value, np.ndarray):
            externals[f"x{len(externals)}"] = value
            return f"x{len(externals) - 1}"
        return print_literal(value)

    args = [argument(value) for value in values]
    args += [f"{key.rstrip('_')} = {print_literal(value)}" for key, value in attribs.items()]
    names = [f"y{i}" for i in range(results)]
    lhs = f"[{', '.join(names)}]" if array_result else names[0] if results == 1 else f"({', '.join(names)})"
    lines = ["version 1.0;", f"graph G( {', '.join(externals)} ) -> ( {', '.join(names)} )", "{"]
    for name, array in externals.items():
        lines.append(f"  {name} = external<{_KIND[array.dtype.kind]}>(shape = {list(array.shape)});")
    lines += [f"  {lhs} = {op}{f'<{generic}>' if generic else ''}({', '.join(args)});", "}", ""]
    return "\n".join(lines), list(externals.values())


def khronos(op: str, *, results: int = 1, array_result: bool = False, lowered: Sequence[str] = (),
            generic: str | None = None) -> Callable[..., Any]:
    """A reference that runs one invocation of `op` in `nnef.Session`, with tensor-array inputs, array results
    and optional lowering of compound ops into their stdlib bodies (the executor has no kernel for those)."""
    def run(*values: Any, **attribs: Any) -> list[np.ndarray]:
        nnef = pytest.importorskip("nnef")
        text, arrays = document(op, values, attribs, results=results, array_result=array_result, generic=generic)
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "graph.nnef").write_text(text)
            with nnef.Session(folder, lowered=list(lowered)) as session:
                outputs = session(*[a.astype(np.int32) if a.dtype.kind in "iu" else a for a in arrays])
        arrays = [np.asarray(output) for output in outputs]
        return arrays[0] if results == 1 and not array_result else arrays
    return run


def _torch_value(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, list):
        return [_torch_value(item, dtype) for item in value]
    if isinstance(value, np.ndarray):
        tensor = torch.from_numpy(np.ascontiguousarray(value))
        return tensor.to(dtype) if tensor.is_floating_point() else tensor
    return value


def _outputs(result: Any, count: int) -> list[Any]:
    return [result] if count == 1 else list(result)


def _kwargs(case: OpCase, dtype: torch.dtype) -> dict[str, Any]:
    kwargs = dict(case.attribs)
    if registry.entry(case.op).typed:
        kwargs["dtype"] = {"integer": torch.int64, "logical": torch.bool}.get(case.generic or "scalar", dtype)
    return kwargs


def check_local_case(case: OpCase, *, array_result: bool = False) -> None:
    """check_case for what the harness document cannot express (tensor-array inputs, array results, no inputs):
    eager, traced (one placeholder per array, also inside a list) and, for a valid document, loaded."""
    expected = case.ref(*case.inputs.values(), **case.attribs)
    expected = [expected] if case.results == 1 and not isinstance(expected, list) else expected
    fn = registry.entry(case.op).torch
    eager = fn(*[_torch_value(v, torch.float32) for v in case.inputs.values()], **_kwargs(case, torch.float32))
    assert_close(_outputs(eager, case.results), expected, case.tol, f"{case.name()} (eager)")

    root = torch.nn.Module()
    tracer = OpTracer(root)
    tensors: list[torch.Tensor] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, list):
            return [placeholder(item) for item in value]
        if isinstance(value, np.ndarray):
            tensors.append(_torch_value(value, torch.float32))
            return tracer.placeholder(f"x{len(tensors)}", tensors[-1].shape, tensors[-1].dtype)
        return value

    result = fn(*[placeholder(v) for v in case.inputs.values()], **_kwargs(case, torch.float32))
    tracer.create_node("output", "output", (tracer.create_arg(result),), {})
    traced = torch.fx.GraphModule(root, tracer.graph)(*tensors)
    assert_close(_outputs(traced, case.results), expected, case.tol, f"{case.name()} (traced)")

    load = getattr(nnef_torch, "load", None)
    if load is None or not tensors:  # a graph needs at least one input
        return
    text, arrays = document(case.op, list(case.inputs.values()), case.attribs, results=case.results,
                            array_result=array_result, generic=case.generic)
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "graph.nnef").write_text(text)
        module = load(folder)
    loaded = module(*[torch.from_numpy(np.ascontiguousarray(a)) for a in arrays])
    assert_close(_outputs(loaded, case.results), expected, case.tol, f"{case.name()} (loaded)")


def gradcheck_array_case(case: OpCase) -> None:
    """gradcheck in float64 with respect to every float array of the tensor-array input."""
    fn = registry.entry(case.op).torch
    (name, values), = [(k, v) for k, v in case.inputs.items() if isinstance(v, list)]
    leaves = tuple(torch.from_numpy(v).double().requires_grad_(True) for v in values)

    def call(*items: torch.Tensor) -> torch.Tensor:
        args = [list(items) if k == name else _torch_value(v, torch.float64) for k, v in case.inputs.items()]
        return fn(*args, **case.attribs)

    assert torch.autograd.gradcheck(call, leaves, eps=1e-6, atol=1e-5, rtol=1e-3)


# Numpy references written from the definitions.

def constant_ref(*, shape, value):
    return np.full(shape, value[0], dtype=np.float32) if len(value) == 1 else np.array(value, np.float32).reshape(shape)


def slice_ref(x, *, axes, begin, end, stride=()):
    """The IR's slice: negative items count from the end, end 0 is the extent for stride 1, clamp to [-1, extent]."""
    for i, axis in enumerate(axes):
        size, step = x.shape[axis], stride[i] if stride else 1
        first = begin[i] + size if begin[i] < 0 else begin[i]
        last = end[i] + size if end[i] < 0 else (size if end[i] == 0 and step == 1 else end[i])
        first, last = min(max(first, -1), size), min(max(last, -1), size)
        x = np.take(x, list(range(first, last, step)), axis=axis)
    return x


def matmul_ref(A, B, *, transposeA=False, transposeB=False):
    A = np.swapaxes(A, -1, -2) if transposeA else A
    B = np.swapaxes(B, -1, -2) if transposeB else B
    return np.matmul(A.astype(np.float64), B.astype(np.float64))


def gather_ref(x, indices, *, axis=0):
    return np.take(x, indices, axis=axis)


def add_n_ref(x):
    total = np.zeros([1], np.float64)
    for value in reversed(x):
        total = value + total
    return total


X = f32(2, 3, 4)
INDEX = np.array([[2, 0], [1, 1], [0, 2]], dtype=np.int32)

CASES = [
    # reshape: 0 copies, -1 infers, axis_start / axis_count reshape a range only
    OpCase('reshape', {'input': X}, {'shape': [6, 4]}, id='reshape'),
    OpCase('reshape', {'input': X}, {'shape': [0, -1]}, id='reshape_copy_infer'),
    OpCase('reshape', {'input': X}, {'shape': [-1]}, id='reshape_flatten'),
    OpCase('reshape', {'input': X}, {'shape': [12], 'axis_start': 1, 'axis_count': -1}, id='reshape_axis_start'),
    OpCase('reshape', {'input': X}, {'shape': [2, 2], 'axis_start': 2, 'axis_count': 1}, id='reshape_axis_count'),
    OpCase('reshape', {'input': X}, {'shape': [1, 0, -1], 'axis_start': 1, 'axis_count': 2}, id='reshape_range_copy'),
    OpCase('reshape', {'input': X}, {'shape': [0, 0, 0]}, id='reshape_identity'),
    OpCase('squeeze', {'input': f32(1, 3, 1, 2)}, {'axes': [0, 2]}),
    OpCase('squeeze', {'input': X}, {'axes': []}, id='squeeze_none'),
    OpCase('unsqueeze', {'input': X}, {'axes': [0, 4]}),
    OpCase('unsqueeze', {'input': X}, {'axes': [3, 0]}, id='unsqueeze_unsorted'),
    OpCase('transpose', {'input': X}, {'axes': [2, 0, 1]}),
    OpCase('transpose', {'input': X}, {'axes': [1, 0]}, id='transpose_leading'),
    OpCase('transpose', {'input': X}, {'axes': [0, 1]}, id='transpose_identity'),
    # slice: negative indices, end 0, strides (positive and negative), clamping
    OpCase('slice', {'input': X}, {'axes': [1, 2], 'begin': [1, 0], 'end': [3, 2]}, id='slice'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [-3], 'end': [-1]}, id='slice_negative'),
    OpCase('slice', {'input': X}, {'axes': [1], 'begin': [1], 'end': [0]}, id='slice_end_zero'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [0], 'end': [4], 'stride': [2]}, id='slice_stride'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [1], 'end': [100], 'stride': [2]}, id='slice_clamped'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [-1], 'end': [-5], 'stride': [-1]}, id='slice_reverse'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [3], 'end': [-100], 'stride': [-2]},
           id='slice_negative_stride'),
    OpCase('slice', {'input': X}, {'axes': [2], 'begin': [3], 'end': [0], 'stride': [-1]},
           id='slice_end_zero_negative_stride'),  # end 0 is a plain index where the stride is not 1
    OpCase('slice', {'input': X}, {'axes': [1, 2], 'begin': [2, 2], 'end': [0, 0], 'stride': [-1, 1]},
           id='slice_mixed'),
    OpCase('slice', {'input': X}, {'axes': [0, 2], 'begin': [-1, 3], 'end': [-3, -100], 'stride': [-1, -3]},
           ref=slice_ref, id='slice_reverse_two_axes'),
    OpCase('slice', {'input': X}, {'axes': [0], 'begin': [1], 'end': [2]}, id='slice_batch'),
    # tile, gather, cast
    OpCase('tile', {'input': X}, {'repeats': [1, 2, 3]}),
    OpCase('tile', {'input': X}, {'repeats': [1, 1, 1]}, id='tile_identity'),
    OpCase('gather', {'input': X, 'indices': INDEX}, {'axis': 1}),
    OpCase('gather', {'input': X, 'indices': np.array([1, 0, 1], np.int32)}, {'axis': 0}, id='gather_batch'),
    OpCase('gather', {'input': X, 'indices': np.array([-1, 0], np.int32)}, {'axis': 2}, ref=gather_ref,
           id='gather_negative_index'),  # the executor does not wrap negative indices
    OpCase('cast', {'input': np.array([1.7, -2.7, 0.0, 3.2], np.float32)}, generic='integer', id='cast_to_integer'),
    OpCase('cast', {'input': np.array([1.7, 0.0, -3.0], np.float32)}, generic='logical', id='cast_to_logical'),
    OpCase('cast', {'input': np.array([1, -2, 3], np.int32)}, generic='scalar', id='cast_integer_to_scalar'),
    OpCase('cast', {'input': np.array([True, False])}, generic='scalar', id='cast_logical_to_scalar'),
    # matmul: transposes, batches, NNEF batch broadcasting (the executor does not broadcast)
    OpCase('matmul', {'A': f32(3, 4), 'B': f32(4, 5)}),
    OpCase('matmul', {'A': f32(4, 3), 'B': f32(5, 4)}, {'transposeA': True, 'transposeB': True}, id='matmul_tt'),
    OpCase('matmul', {'A': f32(3, 4), 'B': f32(5, 4)}, {'transposeB': True}, id='matmul_tb'),
    OpCase('matmul', {'A': f32(2, 3, 4), 'B': f32(2, 4, 5)}, id='matmul_batched'),
    OpCase('matmul', {'A': f32(2, 1, 3, 4), 'B': f32(1, 3, 5, 4)}, {'transposeB': True}, ref=matmul_ref,
           id='matmul_broadcast'),
    # linear: bias [1, M], [1, 1] (the Khronos shape inference rejects it), or a literal
    OpCase('linear', {'input': f32(3, 4), 'filter': f32(5, 4), 'bias': f32(1, 5)}),
    OpCase('linear', {'input': f32(3, 4), 'filter': f32(5, 4), 'bias': f32(1, 1)}, id='linear_scalar_bias',
           ref=lambda x, w, b: x.astype(np.float64) @ w.T + b),
    OpCase('linear', {'input': f32(3, 4), 'filter': f32(5, 4), 'bias': f32(3, 1)}, id='linear_row_bias',
           ref=lambda x, w, b: x.astype(np.float64) @ w.T + b),  # NNEF broadcasting: one bias per input row
    OpCase('linear', {'input': f32(3, 4), 'filter': f32(5, 4), 'bias': 0.0}, id='linear_no_bias'),
    OpCase('linear', {'input': f32(3, 4), 'filter': f32(5, 4), 'bias': 0.5}, id='linear_literal_bias'),
]

# What the harness document cannot say: no inputs, tensor-array inputs.
LOCAL_CASES = [
    OpCase('constant', {}, {'shape': [2, 3], 'value': [1.5]}, ref=constant_ref, generic='scalar', id='constant_fill'),
    OpCase('constant', {}, {'shape': [2, 2], 'value': [1.0, 2.0, 3.0, 4.0]}, ref=constant_ref, generic='scalar',
           id='constant_values'),
    OpCase('constant', {}, {'shape': [3], 'value': [2]}, generic='integer', id='constant_integer',
           ref=lambda *, shape, value: np.full(shape, value[0], np.int64)),
    OpCase('constant', {}, {'shape': [2], 'value': [True, False]}, generic='logical', id='constant_logical',
           ref=lambda *, shape, value: np.array(value, bool)),
    OpCase('cast', {'input': 2.7}, generic='integer', id='cast_literal', ref=lambda x: np.array(int(x))),
    OpCase('concat', {'values': [f32(2, 3), f32(2, 1), f32(2, 2)]}, {'axis': 1}, ref=khronos('concat')),
    OpCase('concat', {'values': [f32(1, 3), f32(2, 3)]}, {'axis': 0}, ref=khronos('concat'), id='concat_batch'),
    OpCase('stack', {'values': [f32(2, 3), f32(2, 3), f32(2, 3)]}, {'axis': 1}, ref=khronos('stack')),
    OpCase('stack', {'values': [f32(2, 3), f32(2, 3)]}, {'axis': 2}, ref=khronos('stack'), id='stack_last'),
    OpCase('add_n', {'x': [f32(2, 3), f32(2, 3), f32(2, 3)]}, ref=khronos('add_n', lowered=['add_n'])),
    OpCase('add_n', {'x': [f32(2, 3)]}, ref=add_n_ref, id='add_n_single'),
]

# Array results: `[y0, y1] = split(...)`.
ARRAY_RESULT_CASES = [
    OpCase('split', {'value': f32(2, 6)}, {'axis': 1, 'ratios': [1, 2]}, results=2,
           ref=khronos('split', results=2, array_result=True)),
    OpCase('split', {'value': X}, {'axis': 0, 'ratios': [1, 1]}, results=2, id='split_batch',
           ref=khronos('split', results=2, array_result=True)),
    OpCase('unstack', {'value': X}, {'axis': 1}, results=3, ref=khronos('unstack', results=3, array_result=True)),
    OpCase('copy_n', {'x': X}, {'times': 2}, results=2,
           ref=khronos('copy_n', results=2, array_result=True, lowered=['copy_n'])),
]

GRAD_IDS = {'reshape_copy_infer', 'reshape_axis_count', 'squeeze', 'unsqueeze_unsorted', 'transpose',
            'transpose_leading', 'slice_mixed', 'slice_negative_stride', 'tile', 'gather', 'matmul_tt',
            'matmul_broadcast', 'linear', 'linear_scalar_bias', 'linear_literal_bias'}
GRAD_CASES = [case for case, name in zip(CASES, case_ids(CASES)) if name in GRAD_IDS]
GRAD_CASES += [case for case in ARRAY_RESULT_CASES if case.name() != 'split']  # gradcheck stacks equal pieces
GRAD_ARRAY_CASES = [case for case in LOCAL_CASES if case.op in ('concat', 'stack', 'add_n')]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_tensor_op(case: OpCase) -> None:
    check_case(case)


@pytest.mark.parametrize("case", LOCAL_CASES, ids=case_ids(LOCAL_CASES))
def test_tensor_op_local(case: OpCase) -> None:
    check_local_case(case)


@pytest.mark.parametrize("case", ARRAY_RESULT_CASES, ids=case_ids(ARRAY_RESULT_CASES))
def test_array_result_op(case: OpCase) -> None:
    check_local_case(case, array_result=True)


@pytest.mark.parametrize("case", GRAD_CASES, ids=case_ids(GRAD_CASES))
def test_gradcheck(case: OpCase) -> None:
    gradcheck_case(case)


@pytest.mark.parametrize("case", GRAD_ARRAY_CASES, ids=case_ids(GRAD_ARRAY_CASES))
def test_gradcheck_array_input(case: OpCase) -> None:
    gradcheck_array_case(case)


def test_float64_kept() -> None:
    x = torch.from_numpy(X).double()
    assert registry.entry('slice').torch(x, axes=[2], begin=[-1], end=[-5], stride=[-1]).dtype == torch.float64
    assert registry.entry('matmul').torch(x, x, transposeB=True).dtype == torch.float64


# Batch dimensions an op only carries along stay free in the traced code: trace at batch 1, run at batch 3.

def _traced(op: str, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[torch.dtype], **attribs: Any):
    root = torch.nn.Module()
    tracer = OpTracer(root)
    args = [tracer.placeholder(f"x{i}", shape, dtype) for i, (shape, dtype) in enumerate(zip(shapes, dtypes))]
    result = registry.entry(op).torch(*args, **attribs)
    tracer.create_node("output", "output", (tracer.create_arg(result),), {})
    return torch.fx.GraphModule(root, tracer.graph)


DYNAMIC = [
    ('reshape', [(1, 2, 3, 4)], {'shape': [1, -1]}, lambda x: x.reshape(3, -1)),
    ('reshape', [(1, 2, 3, 4)], {'shape': [1, 24]}, lambda x: x.reshape(3, 24)),
    ('reshape', [(1, 2, 3, 4)], {'shape': [6], 'axis_start': 1, 'axis_count': 2}, lambda x: x.reshape(3, 6, 4)),
    ('transpose', [(1, 2, 3, 4)], {'axes': [0, 2, 3, 1]}, lambda x: x.transpose(0, 2, 3, 1)),
    ('squeeze', [(1, 2, 1, 4)], {'axes': [2]}, lambda x: x[:, :, 0]),
    ('unsqueeze', [(1, 2, 4)], {'axes': [1]}, lambda x: x[:, None]),
    ('slice', [(1, 2, 3, 4)], {'axes': [3], 'begin': [-1], 'end': [-5], 'stride': [-2]}, lambda x: x[..., ::-2]),
    ('tile', [(1, 2, 3)], {'repeats': [1, 2, 1]}, lambda x: np.tile(x, (1, 2, 1))),
    ('matmul', [(1, 2, 3), (1, 3, 2)], {}, lambda a, b: a @ b),
    ('linear', [(1, 4), (5, 4), (1, 5)], {}, lambda x, w, b: x @ w.T + b),
]


@pytest.mark.parametrize("op, shapes, attribs, expected", DYNAMIC, ids=[row[0] for row in DYNAMIC])
def test_batch_stays_dynamic(op, shapes, attribs, expected) -> None:
    module = _traced(op, shapes, [torch.float32] * len(shapes), **attribs)
    batched = [f32(3, *shape[1:]) if i == 0 or op == 'matmul' else f32(*shape) for i, shape in enumerate(shapes)]
    result = module(*[torch.from_numpy(x) for x in batched])
    np.testing.assert_allclose(result.numpy(), expected(*batched), rtol=1e-5, atol=1e-5)
