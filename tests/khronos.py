"""Helpers to compare our IR with the graph the Khronos `nnef` package builds (the independent oracle)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnef_torch.ir.graph import Graph, Ref

SHARED = Path(__file__).resolve().parents[2] / "shared"
CONFORMANCE = SHARED / "conformance" / "openvx_nnef_core"


def conformance_cases() -> list[Path]:
    if not CONFORMANCE.is_dir():
        return []
    return sorted(path for path in CONFORMANCE.iterdir() if (path / "graph.nnef").is_file())


def require_conformance() -> None:
    if not CONFORMANCE.is_dir():
        pytest.skip(f"the shared conformance suite is absent ({CONFORMANCE}); it lives in ../shared beside the repo")


def khronos():
    return pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")


def canonical_khronos(graph) -> list[tuple]:
    """Khronos graph -> comparable rows: (op, dtype, attribs, inputs, output shapes, outputs)."""
    return _canonical(graph.operations, lambda v: type(v).__name__ == "Identifier", str,
                      lambda name: graph.tensors[str(name)].shape)


def canonical_ours(graph: Graph) -> list[tuple]:
    return _canonical(graph.operations, lambda v: isinstance(v, Ref), lambda ref: ref.name,
                      lambda ref: graph.tensors[ref.name].shape)


def _canonical(operations, is_ref, name_of, shape_of) -> list[tuple]:
    """Tensor names become their order of first appearance, so generated names do not matter."""
    names: dict[str, int] = {}

    def ref(value):
        if isinstance(value, list):
            return [ref(item) for item in value]
        if isinstance(value, tuple):
            return tuple(ref(item) for item in value)
        if is_ref(value):
            return ("%", names.setdefault(name_of(value), len(names)))
        return _float32(value)

    rows = []
    for op in operations:
        outputs = list(op.outputs.values())
        rows.append((op.name, op.dtype, _attribs(op.attribs), [ref(v) for v in op.inputs.values()],
                     _shapes(outputs, shape_of), ref(outputs)))
    return rows


def _shapes(values, lookup):
    out = []
    for value in values:
        if isinstance(value, list):
            out.append([_shape(lookup(item)) for item in value])
        else:
            out.append(_shape(lookup(value)))
    return out


def _shape(shape):
    return None if shape is None else tuple(int(x) for x in shape)


def _attribs(attribs) -> dict:
    def norm(value):
        if isinstance(value, (list, tuple)):
            return type(value)(norm(v) for v in value)
        return _float32(value)
    return {key: norm(value) for key, value in attribs.items()}


def _float32(value):
    """Khronos keeps scalars as float32, we keep the literal's float64; compare at float32."""
    if isinstance(value, float):
        return float(np.float32(value))
    return value


