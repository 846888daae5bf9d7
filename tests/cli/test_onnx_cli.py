"""The command line on ONNX files (made by torch.onnx; onnxruntime is the reference): `info`, `validate`, `run`,
`viz` and `convert` read them as they read NNEF, a symbolic batch takes `--input-shape`, and `convert` writes
standard NNEF (graph.quant included for a quantized file) that the Khronos executor runs to onnxruntime's outputs."""
from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest
from formats.khronos_session import run_khronos

from cli.helpers import cli

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
FIXTURES = Path(__file__).resolve().parents[1] / "formats" / "onnx" / "fixtures"
CNN = FIXTURES / "cnn13.onnx"
SYMBOLIC = FIXTURES / "symbolic" / "mlp_batch.onnx"
QUANTIZED = FIXTURES / "quantized" / "cnn13_qdq_u8s8_pc.onnx"


def _reference(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path))
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_info_and_validate(capsys):
    status, out, err = cli(capsys, "info", CNN)
    assert status == 0, err
    assert "converted from onnx" in out and "conv" in out and "1, 3, 12, 12" in out
    status, out, err = cli(capsys, "validate", CNN)
    assert status == 0 and "valid onnx model, converted to valid NNEF" in out, err


def test_symbolic_batch_needs_an_input_shape_and_says_how(capsys):
    status, _, err = cli(capsys, "info", SYMBOLIC)
    assert status == 1 and "'batch'" in err and "--input-shape NAME=D0,D1" in err
    status, out, err = cli(capsys, "info", SYMBOLIC, "--input-shape", "x=4,6")
    assert status == 0 and "scalar[4, 6]" in out, err


def test_run_matches_onnxruntime_at_another_batch(tmp_path, capsys):
    x = np.random.RandomState(0).randn(5, 6).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    status, _, err = cli(capsys, "run", SYMBOLIC, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "y.npz")
    assert status == 0, err
    with np.load(tmp_path / "y.npz") as outputs:
        np.testing.assert_allclose(outputs["y"], _reference(SYMBOLIC, x), rtol=1e-5, atol=1e-6)


def test_viz_draws_the_converted_graph(tmp_path, capsys):
    status, _, err = cli(capsys, "viz", CNN, "-o", tmp_path / "cnn.dot")
    assert status == 0, err
    assert "conv" in (tmp_path / "cnn.dot").read_text()


@pytest.mark.parametrize("source", [CNN, QUANTIZED], ids=["float", "qdq"])
def test_convert_writes_nnef_the_khronos_executor_runs(source, tmp_path, capsys):
    status, _, err = cli(capsys, "convert", source, tmp_path / "out.tgz")
    assert status == 0, err
    with tarfile.open(tmp_path / "out.tgz") as archive:
        archive.extractall(tmp_path / "out", filter="data")
        names = archive.getnames()
    assert ("graph.quant" in names) == (source == QUANTIZED)
    x = np.random.RandomState(1).randn(1, 3, 12, 12).astype(np.float32)
    if source == CNN:  # the Khronos executor ignores graph.quant, so only the float model is compared
        np.testing.assert_allclose(run_khronos(tmp_path / "out", [x])[0], _reference(CNN, x), rtol=1e-4, atol=1e-5)
    else:
        assert "zero_point_linear_quantize" in (tmp_path / "out" / "graph.quant").read_text()
