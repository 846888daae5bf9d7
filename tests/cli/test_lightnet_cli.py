"""The command line on LightNet models (JSON IR and .wts): `info`, `validate`, `run` and `convert` read them as they
read NNEF, with --inputs / --outputs naming the tensors the caller fills and takes; `convert` writes standard NNEF
that the Khronos executor runs to the same outputs."""
from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from exporter.consumers import close
from formats.khronos_session import run_khronos

from cli.helpers import cli

FIXTURES = Path(__file__).resolve().parents[1] / "formats" / "lightnet" / "fixtures"


@pytest.fixture()
def net(tmp_path: Path) -> Path:
    """tools/il2json's JSON of fixtures/net.il, with the .wts genwts.pl made beside it."""
    for name in ("net_il2json.json", "net_il2json.wts"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path / "net_il2json.json"


def test_info_describes_the_converted_model(net: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "info", net, "--inputs", "input")
    assert status == 0, err
    assert "converted from lightnet" in out and "input" in out and "1, 3, 8, 8" in out
    assert "conv" in out and "batch_normalization" in out


def test_validate_says_valid(net: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "validate", net, "--inputs", "input", "--outputs", "prob,act1")
    assert status == 0, err
    assert "valid lightnet model, converted to valid NNEF" in out


def test_validate_reports_a_bad_model_at_its_op(net: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net.write_text(net.read_text().replace('"optype" : "lrelu"', '"optype" : "lrelu_cuda"'))
    status, out, err = cli(capsys, "validate", net, "--inputs", "input")
    assert status == 1
    assert "compiled LightNet IR" in err and "(lrelu_cuda) at line" in err


def test_validate_without_inputs_names_what_lacks_weights(net: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "validate", net)
    assert status == 1
    assert "'input'" in err and "name it in inputs=" in err


def test_run_prints_and_writes_outputs(net: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    status, out, err = cli(capsys, "run", net, "--inputs", "input", "--input", f"input={tmp_path / 'x.npy'}",
                           "-o", tmp_path / "out.npz")
    assert status == 0, err
    assert out.startswith("prob:\n[[")  # the model's print op, as it runs
    with np.load(tmp_path / "out.npz") as outputs:
        assert list(outputs) == ["prob"] and outputs["prob"].shape == (1, 16)
        assert abs(float(outputs["prob"].sum()) - 1.0) < 1e-5


def test_run_the_seed_example(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "run", FIXTURES / "seed_example.json")
    assert status == 0, err
    assert out.startswith("tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n")


def test_convert_writes_nnef_the_khronos_tools_run(net: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    weights = tmp_path / "elsewhere.wts"
    shutil.move(tmp_path / "net_il2json.wts", weights)  # --params, not the file beside the JSON
    status, out, err = cli(capsys, "convert", net, tmp_path / "net.tgz", "--params", weights, "--inputs", "input")
    assert status == 0, err
    assert "(from lightnet)" in out and "valid NNEF" in out
    folder = tmp_path / "net"
    with tarfile.open(tmp_path / "net.tgz") as archive:
        archive.extractall(folder, filter="data")
    import torch

    import nnef_torch
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = nnef_torch.load(net, params=weights, inputs=["input"])(torch.from_numpy(x))
    (found,) = run_khronos(folder, [x])
    close(found, expected, 1e-5)
