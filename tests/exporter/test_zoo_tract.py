"""The model zoo exported with target="tract": tract, with its default registries (tract_core included), loads and
runs every export and matches torch, and nnef_torch reads its own tract export back and matches torch too.

One row per model and mode, as in test_zoo. tract keeps no state between runs: the tract export of a training-mode
batch norm leaves its running-statistics `update`s out, and these rows compare the outputs only.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import nnef_torch
from tests.exporter.consumers import _as_list, _numpy, close_all
from tests.exporter.test_zoo import IDS, ROWS, Row, tolerance
from tests.exporter.zoo import make

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore:The tensor attributes .*_flat_weights.*:UserWarning"),
]


def run_tract(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """tract's default NNEF reader (tract_core included) on `folder`. tract reads NNEF's `integer` as i64, so
    integer inputs are given as int64."""
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    model = tract.nnef().load(str(folder)).into_runnable()
    arrays = [np.ascontiguousarray(x.astype(np.int64) if x.dtype.kind in "iu" else x) for x in inputs]
    outputs = model.run(arrays)
    return [outputs[i].to_numpy() for i in range(len(outputs))]


_EXPORTS: dict[str, tuple[Path, float, list[Any], list[np.ndarray]]] = {}



@pytest.fixture
def exported(request, tmp_path_factory):
    """(row, folder of the tract export, tolerance, torch's outputs, the inputs as arrays), made once per row."""
    row: Row = request.param
    if row.id not in _EXPORTS:
        module, inputs = make(row.model, row.mode)
        with torch.no_grad():
            expected = [_numpy(v) for v in _as_list(copy.deepcopy(module)(*inputs))]
        rtol = tolerance(row, module, inputs)
        folder = tmp_path_factory.mktemp(f"tract-{row.id}")
        nnef_torch.export(module, inputs, target="tract").save(folder)
        _EXPORTS[row.id] = (folder, rtol, expected, [_numpy(x) for x in inputs])
    return (row, *_EXPORTS[row.id])


@pytest.mark.parametrize("exported", ROWS, ids=IDS, indirect=True)
def test_tract_runs_tract_export(exported):
    row, folder, rtol, expected, arrays = exported
    close_all(run_tract(folder, arrays), expected, rtol, who=f"tract on {row.id}")


@pytest.mark.parametrize("exported", ROWS, ids=IDS, indirect=True)
def test_nnef_torch_reads_tract_export(exported):
    row, folder, rtol, expected, arrays = exported
    loaded = nnef_torch.load(folder)
    with torch.no_grad():
        found = [_numpy(v) for v in _as_list(loaded(*[torch.as_tensor(a) for a in arrays]))]
    close_all(found, expected, rtol, who=f"nnef_torch on {row.id}")
