"""`convert`: folder <-> archive round trips with the Khronos reader as the independent check, layout re-encoding
that keeps quantized codes, graph.quant stripped or replaced, and the errors."""
from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest
from khronos import khronos

import nnef_torch
from cli.helpers import WEIGHT_CODES, cli, logarithmic_weight_model, quantized_weight_model
from nnef_torch.cli import demo_model_path
from nnef_torch.format import tensor_file

TINY = Path(demo_model_path())
LABELS = ("conv1/filter", "conv1/bias", "conv2/filter", "conv2/bias", "fc/weight", "fc/bias")


def khronos_tensor(path: Path) -> np.ndarray:
    with open(path, "rb") as file:
        return khronos().read_tensor(file)


def test_folder_to_tgz_to_folder_round_trip(tmp_path, capsys):
    status, out, err = cli(capsys, "convert", TINY, tmp_path / "tiny.tgz")
    assert status == 0, err
    assert "(archive): 6 tensor files (bytes kept), graph.quant kept; valid NNEF" in out
    with tarfile.open(tmp_path / "tiny.tgz") as archive:
        assert sorted(archive.getnames()) == sorted(["graph.nnef", "graph.quant", *(f"{x}.dat" for x in LABELS)])
    status, _, err = cli(capsys, "convert", tmp_path / "tiny.tgz", tmp_path / "back")
    assert status == 0, err
    for name in ("graph.nnef", "graph.quant"):
        assert (tmp_path / "back" / name).read_bytes() == (TINY / name).read_bytes()
    for label in LABELS:
        np.testing.assert_array_equal(khronos_tensor(tmp_path / "back" / f"{label}.dat"),
                                      khronos_tensor(TINY / f"{label}.dat"))


def test_current_layout_re_encode_read_by_khronos(tmp_path, capsys):
    status, _, err = cli(capsys, "convert", TINY, tmp_path / "current", "--tensor-layout", "current")
    assert status == 0, err
    assert (tmp_path / "current" / "graph.nnef").read_text() == (TINY / "graph.nnef").read_text()
    for label in LABELS:
        np.testing.assert_array_equal(khronos_tensor(tmp_path / "current" / f"{label}.dat"),
                                      khronos_tensor(TINY / f"{label}.dat"))


def test_quantized_codes_to_seed_layout_and_back(tmp_path, capsys):
    source = quantized_weight_model(tmp_path / "codes")
    status, _, err = cli(capsys, "convert", source, tmp_path / "seed", "--tensor-layout", "seed")
    assert status == 0, err
    seed = tensor_file.decode((tmp_path / "seed" / "w.dat").read_bytes())
    assert (seed.header.layout, seed.header.code, seed.header.bits) == ("seed", 0x10, 8)
    np.testing.assert_array_equal(seed.codes, WEIGHT_CODES)
    expected = WEIGHT_CODES.astype(np.float64) / 255.0 * 2.0 - 1.0  # linear_quantize(min = -1, max = 1, bits = 8)
    np.testing.assert_allclose(nnef_torch.read_tensor(tmp_path / "seed" / "w.dat"), expected, rtol=0, atol=1e-6)

    status, _, err = cli(capsys, "convert", tmp_path / "seed", tmp_path / "again.tar", "--tensor-layout", "current")
    assert status == 0, err
    with tarfile.open(tmp_path / "again.tar") as archive:
        again = tensor_file.decode(archive.extractfile("w.dat").read())
    assert (again.header.layout, again.header.kind) == ("current", "quantized")
    np.testing.assert_array_equal(again.codes, WEIGHT_CODES)


def test_strip_quant(tmp_path, capsys):
    status, out, err = cli(capsys, "convert", TINY, tmp_path / "plain", "--strip-quant")
    assert status == 0, err
    assert not (tmp_path / "plain" / "graph.quant").exists() and "0 quantized tensors" in out
    assert (tmp_path / "plain" / "graph.nnef").read_text() == (TINY / "graph.nnef").read_text()


def test_strip_quant_refused_where_codes_need_their_entry(tmp_path, capsys):
    source = quantized_weight_model(tmp_path / "codes")
    status, _, err = cli(capsys, "convert", source, tmp_path / "out", "--strip-quant")
    assert status == 1 and "graph.quant has no entry for it" in err
    assert not (tmp_path / "out").exists()


def test_quant_file_replaces_graph_quant(tmp_path, capsys):
    (tmp_path / "new.quant").write_text('"relu1": linear_quantize(min = 0.0, max = 8.0, bits = 4);\n')
    status, out, err = cli(capsys, "convert", TINY, tmp_path / "out.tgz", "--quant", tmp_path / "new.quant")
    assert status == 0, err
    assert "1 quantized tensors" in out
    model = nnef_torch.read_model(tmp_path / "out.tgz")
    assert model.graph.quantization["relu1"].args == {"min": 0.0, "max": 8.0, "bits": 4}


def test_quant_file_naming_an_unknown_tensor_exits_1(tmp_path, capsys):
    (tmp_path / "bad.quant").write_text('"nope": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n')
    status, _, err = cli(capsys, "convert", TINY, tmp_path / "out", "--quant", tmp_path / "bad.quant")
    assert status == 1 and "graph.quant names 'nope', which is not a tensor of the graph" in err
    assert not (tmp_path / "out").exists()


def test_logarithmic_codes_have_no_current_form(tmp_path, capsys):
    source = logarithmic_weight_model(tmp_path / "log")
    status, _, err = cli(capsys, "convert", source, tmp_path / "out", "--tensor-layout", "current")
    assert status == 1 and "logarithmic codes have no current-layout form" in err


@pytest.mark.parametrize("quant, message", [
    (None, "its codes have no graph.quant entry, which the seed layout cannot express"),
    ('"w": zero_point_linear_quantize(zero_point = 128, scale = 0.01, bits = 8, signed = false, symmetric = false);',
     "its codes follow zero_point_linear_quantize(zero_point = 128, scale = 0.01"),
])
def test_codes_the_seed_layout_cannot_hold_exit_1(tmp_path, capsys, quant, message):
    source = quantized_weight_model(tmp_path / "codes")
    if quant is None:
        (source / "graph.quant").unlink()
    else:
        (source / "graph.quant").write_text(quant + "\n")
    status, _, err = cli(capsys, "convert", source, tmp_path / "out", "--tensor-layout", "seed")
    assert status == 1 and message in err and "Traceback" not in err


def test_seed_codes_to_current_need_a_matching_entry(tmp_path, capsys):
    source = quantized_weight_model(tmp_path / "codes")
    assert cli(capsys, "convert", source, tmp_path / "seed", "--tensor-layout", "seed")[0] == 0
    status, _, err = cli(capsys, "convert", tmp_path / "seed", tmp_path / "out", "--tensor-layout", "current",
                         "--strip-quant")
    assert status == 1 and '"w": linear_quantize(min = -1.0, max = 1.0, bits = 8);' in err


def test_logarithmic_seed_codes_re_encode_in_the_seed_layout(tmp_path, capsys):
    source = logarithmic_weight_model(tmp_path / "log")
    status, _, err = cli(capsys, "convert", source, tmp_path / "out.tgz", "--tensor-layout", "seed")
    assert status == 0, err
    np.testing.assert_array_equal(nnef_torch.read_model(tmp_path / "out.tgz").tensors["w"].array, [0.5, -2.0, 4.0])


def test_missing_source_exits_1(tmp_path, capsys):
    status, _, err = cli(capsys, "convert", tmp_path / "absent", tmp_path / "out")
    assert status == 1 and "no such model folder" in err
