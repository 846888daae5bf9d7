"""The public read_tensor / write_tensor pair, against the Khronos reader."""
from __future__ import annotations

import numpy as np
import pytest
from khronos import khronos

import nnef_torch
from nnef_torch.errors import NNEFContainerError, NNEFTensorFileError


def test_write_then_read_and_khronos_agrees(tmp_path):
    nnef = khronos()
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    nnef_torch.write_tensor(tmp_path / "w.dat", array)
    np.testing.assert_array_equal(nnef_torch.read_tensor(tmp_path / "w.dat"), array)
    with open(tmp_path / "w.dat", "rb") as handle:
        np.testing.assert_array_equal(nnef.read_tensor(handle), array)
    assert [p.name for p in tmp_path.iterdir()] == ["w.dat"]  # no temporary left behind


def test_read_from_bytes_and_quantized_write(tmp_path):
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    nnef_torch.write_tensor(tmp_path / "q.dat", x, layout="seed",
                            quantization={"op": "linear_quantize", "min": -1.0, "max": 1.0, "bits": 4})
    decoded = nnef_torch.read_tensor((tmp_path / "q.dat").read_bytes())
    codes = np.round((x + 1) / 2 * 15)  # DESIGN.md's linear encoding with r = 2^4 - 1
    np.testing.assert_allclose(decoded, codes / 15 * 2 - 1, rtol=0, atol=1e-6)


def test_errors_are_nnef_errors(tmp_path):
    with pytest.raises(NNEFContainerError):
        nnef_torch.read_tensor(tmp_path / "missing.dat")
    with pytest.raises(NNEFTensorFileError):
        nnef_torch.read_tensor(b"N\xef\x01\x00")
