"""Each torch operation of the single-op table, exported with target="tract": tract, with its default registries
(tract_core included), must load the file and reproduce torch's output, and so must nnef_torch's importer, which
reads tract's operations. The rows marked `extra` run with NNEF_TORCH_ALL_OPS=1, as in test_single_ops. `BEYOND`
adds modules outside the table whose operations the tract target writes in another form (exporter/tract_forms.py)."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import nnef_torch
from exporter.consumers import _as_list, _numpy, close_all
from exporter.single_op_rows import Row, randn
from exporter.single_op_rows import row as table_row
from exporter.test_single_ops import SELECTED

pytestmark = pytest.mark.slow

BEYOND = [
    table_row("nearest_downsample_2d", lambda v: F.interpolate(v, scale_factor=0.5, mode="nearest"), randn(1, 2, 8, 6)),
    table_row("nearest_downsample_1d", lambda v: F.interpolate(v, size=3, mode="nearest"), randn(2, 3, 9)),
    table_row("conv_replicate_padding", nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"), randn(1, 3, 5, 6)),
    table_row("elu_alpha_after_conv", nn.Sequential(nn.Conv1d(2, 3, 1), nn.ELU(alpha=2.0)), randn(2, 2, 5)),
]


def run_tract(folder: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs of tract's default NNEF reader (tract_core included) on the model in `folder`."""
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    model = tract.nnef().load(str(folder)).into_runnable()
    outputs = model.run([np.ascontiguousarray(x) for x in inputs])
    return [outputs[i].to_numpy() for i in range(len(outputs))]


@pytest.mark.parametrize("row", SELECTED + BEYOND, ids=lambda row: row.name)
def test_single_op_tract_target(row: Row, tmp_path: Path) -> None:
    with torch.no_grad():
        expected = [_numpy(v) for v in _as_list(copy.deepcopy(row.module)(*row.inputs))]
    folder = tmp_path / "model"
    nnef_torch.export(row.module, row.inputs, target="tract").save(folder)
    arrays = [_numpy(x) for x in row.inputs]
    close_all(run_tract(folder, arrays), expected, row.rtol, who="tract")
    loaded = nnef_torch.load(folder)
    with torch.no_grad():
        found = [_numpy(v) for v in _as_list(loaded(*[torch.as_tensor(a) for a in arrays]))]
    close_all(found, expected, row.rtol, who="nnef_torch")


def test_buffer_updates_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """tract keeps no state between runs: a training-mode batch norm's running statistics are not written, the
    export says so, and the outputs still match torch's (batch statistics)."""
    module = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)).train()
    x = randn(4, 2, 3, 3)
    with torch.no_grad():
        expected = copy.deepcopy(module)(x)
    with pytest.warns(UserWarning, match=r"leaves out the updates of 3 buffer\(s\) \(1\.running_mean"):
        model = nnef_torch.export(module, (x,), target="tract")
    assert "update(" not in model.text
    model.save(tmp_path / "model")
    close_all(run_tract(tmp_path / "model", [x.numpy()]), [expected.numpy()], 1e-4)
