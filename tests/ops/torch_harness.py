"""Run one NNEF operation several ways and compare: our torch function called eagerly, the same function traced
into generated code as the importer does, our importer's module (once `nnef_torch.load` exists), and an independent reference (the Khronos `nnef.Session` executor, or a
numpy function written for the test).

A row of a per-op table is an `OpCase`: the op, its named tensor inputs (numpy arrays, or Python numbers for
literals), its attributes as the IR holds them (lists, tuples, str, numbers), and the reference.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from nnef_torch.format.printer import print_literal
from nnef_torch.ops import registry

_KIND = {"f": "scalar", "i": "integer", "u": "integer", "b": "logical"}

SESSION = "session"  # reference: run the same document in the Khronos reference executor


@dataclass
class OpCase:
    op: str
    inputs: dict[str, Any]  # NNEF parameter name -> numpy array (an external) or Python number (a literal)
    attribs: dict[str, Any] = field(default_factory=dict)
    ref: Any = SESSION  # SESSION, or a function of the numpy inputs (positional) and attribs -> array(s)
    tol: float = 1e-5  # max |ours - ref| allowed, relative to max(1, max |ref|)
    results: int = 1  # how many results the op returns (an array result counts as 1)
    id: str | None = None
    generic: str | None = None  # the generic type to invoke with, e.g. 'scalar' for cast<scalar>

    def name(self) -> str:
        return self.id or self.op


def case_ids(cases: Sequence[OpCase]) -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for case in cases:
        base = case.name()
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return ids


def graph_text(case: OpCase) -> str:
    """A one-operation document: each array input an external, literals inline, results y0, y1, ..."""
    externals = {name: value for name, value in case.inputs.items() if isinstance(value, np.ndarray)}
    results = [f"y{i}" for i in range(case.results)]
    lines = ["version 1.0;", "", f"graph G( {', '.join(externals)} ) -> ( {', '.join(results)} )", "{"]
    for name, value in externals.items():
        shape = ", ".join(str(d) for d in value.shape)
        lines.append(f"    {name} = external<{_KIND[value.dtype.kind]}>(shape = [{shape}]);")
    args = [name if isinstance(value, np.ndarray) else print_literal(value) for name, value in case.inputs.items()]
    args += [f"{key.rstrip('_')} = {print_literal(value)}" for key, value in case.attribs.items()]
    generic = f"<{case.generic}>" if case.generic else ""
    lhs = results[0] if case.results == 1 else f"({', '.join(results)})"
    lines.append(f"    {lhs} = {case.op}{generic}({', '.join(args)});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_session(case: OpCase) -> list[np.ndarray]:
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    # the Khronos binding reads strided arrays as if they were contiguous
    arrays = [np.ascontiguousarray(value) for value in case.inputs.values() if isinstance(value, np.ndarray)]
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "graph.nnef").write_text(graph_text(case))
        with nnef.Session(folder, lowered=[]) as session:
            outputs = session(*arrays)
    return [np.asarray(output) for output in outputs]


def run_reference(case: OpCase) -> list[np.ndarray]:
    if case.ref == SESSION:
        return run_session(case)
    result = case.ref(*case.inputs.values(), **case.attribs)
    return _as_list(result, case.results, np.asarray)


def run_eager(case: OpCase, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Call our registered torch function directly on tensors."""
    op = registry.entry(case.op)
    assert op is not None and op.torch is not None, f"no torch implementation registered for {case.op}"
    args = [_tensor(value, dtype) for value in case.inputs.values()]
    kwargs = dict(case.attribs)
    if op.typed:
        kwargs["dtype"] = _torch_dtype(case.generic, dtype)
    return _as_list(op.torch(*args, **kwargs), case.results, lambda t: t)


def run_loaded(case: OpCase) -> list[torch.Tensor] | None:
    """Run the one-op document through `nnef_torch.load`; None until the importer exists."""
    import nnef_torch
    load = getattr(nnef_torch, "load", None)
    if load is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "graph.nnef").write_text(graph_text(case))
        module = load(folder)
    arrays = [torch.from_numpy(np.ascontiguousarray(v)) for v in case.inputs.values() if isinstance(v, np.ndarray)]
    return _as_list(module(*arrays), case.results, lambda t: t)


def assert_close(actual: Sequence[Any], expected: Sequence[np.ndarray], tol: float, what: str = "") -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} results, expected {len(expected)}"
    for index, (ours, ref) in enumerate(zip(actual, expected)):
        ours = _numpy(ours)
        ref = np.asarray(ref)
        assert ours.shape == ref.shape, f"{what} result {index}: shape {ours.shape}, expected {ref.shape}"
        if ref.dtype == bool or ours.dtype == bool:
            assert ours.dtype == ref.dtype and np.array_equal(ours, ref), f"{what} result {index} differs"
            continue
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        np.testing.assert_allclose(ours.astype(np.float64), ref.astype(np.float64), rtol=0, atol=tol * scale,
                                   err_msg=f"{what} result {index}")


def check_case(case: OpCase) -> None:
    """The full per-op check: eager and loaded results both equal the reference."""
    expected = run_reference(case)
    assert_close(run_eager(case), expected, case.tol, f"{case.name()} (eager)")
    assert_close(run_traced(case), expected, case.tol, f"{case.name()} (traced)")
    loaded = run_loaded(case)
    if loaded is not None:
        assert_close(loaded, expected, case.tol, f"{case.name()} (loaded)")


def _as_list(result: Any, count: int, convert: Callable[[Any], Any]) -> list[Any]:
    if count == 1:
        return [convert(result)]
    return [convert(item) for item in result]


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, list):
        return np.stack([_numpy(item) for item in value])
    return np.asarray(value)


def _tensor(value: Any, dtype: torch.dtype) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    tensor = torch.from_numpy(np.ascontiguousarray(value))
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


def _torch_dtype(generic: str | None, float_dtype: torch.dtype) -> torch.dtype:
    return {"integer": torch.int64, "logical": torch.bool}.get(generic or "scalar", float_dtype)


def gradcheck_case(case: OpCase) -> None:
    """`torch.autograd.gradcheck` in float64 of the eager op with respect to its floating inputs."""
    op = registry.entry(case.op)
    names = [name for name, value in case.inputs.items()
             if isinstance(value, np.ndarray) and value.dtype.kind == "f"]
    tensors = {name: torch.from_numpy(np.ascontiguousarray(value)).to(torch.float64).requires_grad_(True)
               for name, value in case.inputs.items() if name in names}

    def fn(*grad_inputs):
        given = dict(zip(names, grad_inputs))
        args = [given.get(name, _tensor(value, torch.float64)) for name, value in case.inputs.items()]
        kwargs = dict(case.attribs)
        if op.typed:
            kwargs["dtype"] = _torch_dtype(case.generic, torch.float64)
        result = op.torch(*args, **kwargs)
        if isinstance(result, list):
            return torch.stack(result)
        return result

    assert torch.autograd.gradcheck(fn, tuple(tensors[name] for name in names), eps=1e-6, atol=1e-5, rtol=1e-3)


def run_traced(case: OpCase, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Trace the op function into an fx.GraphModule the way the importer does, then run the generated code."""
    from nnef_torch.importer.tracer import OpTracer

    op = registry.entry(case.op)
    root = torch.nn.Module()
    tracer = OpTracer(root)
    args, tensors = [], []
    for name, value in case.inputs.items():
        if isinstance(value, np.ndarray):
            tensor = _tensor(value, dtype)
            tensors.append(tensor)
            args.append(tracer.placeholder(name, tensor.shape, tensor.dtype))
        else:
            args.append(value)
    kwargs = dict(case.attribs)
    if op.typed:
        kwargs["dtype"] = _torch_dtype(case.generic, dtype)
    result = op.torch(*args, **kwargs)
    tracer.create_node("output", "output", (tracer.create_arg(result),), {})
    module = torch.fx.GraphModule(root, tracer.graph)
    return _as_list(module(*tensors), case.results, lambda t: t)
