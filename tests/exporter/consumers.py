"""Run an exported model in every independent consumer: the Khronos parser and shape inference
(`nnef.load_graph` + `nnef.infer_shapes`), the Khronos reference executor (`nnef.Session`), tract, and
nnef_torch's own importer; and compare each with the torch module's outputs."""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import nnef_torch

RTOL = 1e-5


def _numpy(value: Any) -> np.ndarray:
    return np.ascontiguousarray(value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def close(found: Any, expected: Any, rtol: float = RTOL) -> None:
    """Equal within `rtol` relative to the expected output's largest magnitude (and elementwise)."""
    found, expected = np.asarray(_numpy(found)), np.asarray(_numpy(expected))
    assert found.shape == expected.shape, f"shape {found.shape} != {expected.shape}"
    if expected.dtype == np.bool_ or expected.dtype.kind in "iu":
        np.testing.assert_array_equal(found.astype(expected.dtype), expected)
        return
    scale = max(float(np.abs(expected).max(initial=0.0)), 1e-6)
    np.testing.assert_allclose(found.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=rtol * scale)


def close_all(found: list[Any], expected: list[Any], rtol: float = RTOL, who: str = "outputs") -> None:
    """`close` for each output of a list, which must be as long as the expected one; a failure names the output."""
    assert len(found) == len(expected), f"{who}: {len(found)} outputs, {len(expected)} expected"
    for i, (f, e) in enumerate(zip(found, expected)):
        try:
            close(f, e, rtol)
        except AssertionError as error:
            raise AssertionError(f"{who}, output {i}: {error}") from None


def defined_fragments(folder: Path) -> list[str]:
    """The fragments a document defines: Khronos tools must be told to lower (expand) them."""
    return re.findall(r"^fragment (\w+)", (folder / "graph.nnef").read_text(), flags=re.M)


def khronos_parse(folder: Path):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    graph = nnef.load_graph(str(folder), lowered=defined_fragments(folder))
    nnef.infer_shapes(graph)
    return graph


def compound_standard_ops() -> list[str]:
    """Standard ops defined by a body: the Khronos executor runs several of them (moments, batch_normalization...)
    only when told to expand them."""
    from nnef_torch.stdlib import standard_fragments
    native = {"max_pool", "max_pool_with_index", "avg_pool", "rms_pool", "separable_conv", "separable_deconv",
              "nearest_upsample", "nearest_downsample", "area_downsample"}  # expanded, these hit executor bugs
    return [name for name, fragment in standard_fragments().items() if fragment.body is not None
            and name not in native]


def run_khronos(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    lowered = defined_fragments(folder) + compound_standard_ops()
    # the executor's `integer` is int32 and it accepts no other integer input type
    inputs = [x.astype(np.int32) if x.dtype.kind in "iu" else x for x in inputs]
    with nnef.Session(str(folder), lowered=lowered) as session:
        outputs = session(*[np.ascontiguousarray(x) for x in inputs])
    return [np.asarray(o) for o in _as_list(outputs)]


def run_tract(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    model = tract.nnef().without_tract_core().load(str(folder)).into_runnable()
    outputs = model.run([np.ascontiguousarray(x) for x in inputs])
    return [outputs[i].to_numpy() for i in range(len(outputs))]


@dataclass
class Report:
    """Which consumers accepted and matched the export; `failures` holds the reason for every other one."""

    passed: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


def check_consumer(report: Report, name: str, run: Callable[[], list[Any]], expected: list[Any],
                   rtol: float) -> None:
    try:
        found = run()
        assert len(found) == len(expected), f"{len(found)} outputs, expected {len(expected)}"
        for f, x in zip(found, expected):
            close(f, x, rtol)
    except pytest.skip.Exception:
        raise
    except Exception as error:  # noqa: BLE001  (recorded, then asserted by the caller)
        report.failures[name] = f"{type(error).__name__}: {str(error)[:400]}"
        return
    report.passed.append(name)


def export_and_check(module: torch.nn.Module, inputs: tuple[Any, ...], folder: Path, *, rtol: float = RTOL,
                     consumers: tuple[str, ...] = ("khronos", "tract", "nnef_torch")) -> Report:
    """Export `module`, parse it with the Khronos tools (must succeed), then run it in each named consumer."""
    with torch.no_grad():
        expected = [_numpy(v) for v in _as_list(copy.deepcopy(module)(*inputs))]
    model = nnef_torch.export(module, inputs)
    model.save(folder)
    khronos_parse(folder)
    arrays = [_numpy(x) for x in inputs]
    report = Report()
    if "khronos" in consumers:
        check_consumer(report, "khronos", lambda: run_khronos(folder, arrays), expected, rtol)
    if "tract" in consumers:
        check_consumer(report, "tract", lambda: run_tract(folder, arrays), expected, rtol)
    if "nnef_torch" in consumers:
        def reimport() -> list[Any]:
            loaded = nnef_torch.load(folder)
            with torch.no_grad():
                return [_numpy(v) for v in _as_list(loaded(*[torch.as_tensor(a) for a in arrays]))]
        check_consumer(report, "nnef_torch", reimport, expected, rtol)
    return report
