"""The command line on models of other formats (an MXNet symbol and its `.params`, written by MXNet 1.9.1):
`info`, `validate`, `run` and `convert` read them as they read NNEF, and `convert` writes standard NNEF that the
Khronos parser accepts and the Khronos executor runs to MXNet's outputs."""
from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from exporter.consumers import close
from formats.khronos_session import run_khronos

from cli.helpers import cli

FIXTURES = Path(__file__).resolve().parents[1] / "formats" / "nnvm" / "fixtures"
TRAINING = FIXTURES / "training"
SHAPE = "data=4,3,8,8"


@pytest.fixture()
def mxnet_model(tmp_path) -> Path:
    """The training fixture's CNN copied beside nothing else: `cnn-symbol.json` and `cnn-0000.params`."""
    for name in ("cnn-symbol.json", "cnn-0000.params"):
        shutil.copy(TRAINING / name, tmp_path / name)
    return tmp_path / "cnn-symbol.json"


def _expected() -> tuple[np.ndarray, np.ndarray]:
    with np.load(TRAINING / "cnn.npz") as arrays:
        return arrays["data"], arrays["eval_output"]


def test_info_describes_the_converted_model(mxnet_model, capsys):
    status, out, err = cli(capsys, "info", mxnet_model, "--input-shape", SHAPE)
    assert status == 0, err
    assert "converted from nnvm" in out and "data" in out and "4, 3, 8, 8" in out
    assert "batch_normalization" in out and "conv" in out


def test_validate_says_valid(mxnet_model, capsys):
    status, out, err = cli(capsys, "validate", mxnet_model, "--input-shape", SHAPE)
    assert status == 0, err
    assert "valid nnvm model, converted to valid NNEF" in out


def test_validate_reports_a_bad_symbol_with_status_1(mxnet_model, capsys):
    document = json.loads(mxnet_model.read_text())
    document["heads"] = [[999, 0, 0]]
    mxnet_model.write_text(json.dumps(document))
    status, out, err = cli(capsys, "validate", mxnet_model, "--input-shape", SHAPE)
    assert status == 1
    assert "cnn-symbol.json" in err and "head 0 reads node 999, which is out of range" in err


def test_run_reproduces_mxnet(mxnet_model, tmp_path, capsys):
    data, expected = _expected()
    np.save(tmp_path / "data.npy", data)
    status, out, err = cli(capsys, "run", mxnet_model, "--input", f"data={tmp_path / 'data.npy'}", "-o",
                           tmp_path / "out.npz")
    assert status == 0, err
    with np.load(tmp_path / "out.npz") as outputs:
        (found,) = outputs.values()
    close(found, expected, 1e-5)


def test_convert_writes_nnef_the_khronos_tools_run(mxnet_model, tmp_path, capsys):
    params = tmp_path / "elsewhere.params"
    shutil.move(tmp_path / "cnn-0000.params", params)  # --params, not the file beside the symbol
    status, out, err = cli(capsys, "convert", mxnet_model, tmp_path / "cnn.tgz", "--params", params,
                           "--input-shape", SHAPE)
    assert status == 0, err
    assert "(from nnvm)" in out and "valid NNEF" in out
    folder = tmp_path / "cnn"
    with tarfile.open(tmp_path / "cnn.tgz") as archive:
        archive.extractall(folder, filter="data")
    data, expected = _expected()
    (found,) = run_khronos(folder, [data])
    close(found, expected, 1e-5)


def test_missing_input_shape_is_a_clear_error(mxnet_model, capsys):
    document = json.loads(mxnet_model.read_text())
    document.get("attrs", {}).pop("shape", None)
    mxnet_model.write_text(json.dumps(document))
    status, out, err = cli(capsys, "info", mxnet_model)
    assert status == 1
    assert "--input-shape" in err or "input_shapes" in err
