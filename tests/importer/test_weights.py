"""Quantized codes <-> float values, checked against the stdlib formulas written out in numpy."""
from __future__ import annotations

import numpy as np
import pytest

from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.importer.weights import dequantize_codes, quantize_codes


def test_zero_point_codes_round_trip_per_channel():
    spec = QuantSpec("zero_point_linear_quantize", {"zero_point": [[3], [7]], "scale": [[0.5], [0.25]], "bits": 8,
                                                     "signed": False, "symmetric": False})
    codes = np.array([[0, 3, 255], [7, 8, 100]], np.uint8)
    values = dequantize_codes(codes, spec, None)
    np.testing.assert_allclose(values, [[-1.5, 0.0, 126.0], [0.0, 0.25, 23.25]])
    assert np.array_equal(quantize_codes(values.astype(np.float64), spec, np.dtype(np.uint8)), codes)


def test_signed_symmetric_min_max_codes():
    spec = QuantSpec("min_max_linear_quantize", {"min": -1.0, "max": 1.0, "bits": 8, "signed": True,
                                                  "symmetric": True})
    # r = 2^8 - 1 - 1 = 254, p = 2^7 - 1 = 127: code c means (c + 127) / 254 * 2 - 1
    codes = np.array([-127, 0, 127], np.int8)
    values = dequantize_codes(codes, spec, None)
    np.testing.assert_allclose(values, [-1.0, 0.0, 1.0], atol=1e-7)
    assert np.array_equal(quantize_codes(np.array([-2.0, 0.002, 0.5]), spec, np.dtype(np.int8)), [-127, 0, 64])


def test_quantize_rounds_halfway_away_from_zero():
    spec = QuantSpec("zero_point_linear_quantize", {"zero_point": 0, "scale": 1.0, "bits": 8, "signed": True,
                                                     "symmetric": False})
    assert quantize_codes(np.array([0.5, -0.5, 1.5, -2.5]), spec, np.dtype(np.int8)).tolist() == [1, -1, 2, -3]


def test_logarithmic_codes_are_refused():
    from nnef_torch.errors import NNEFQuantizationError
    with pytest.raises(NNEFQuantizationError, match="cannot be read"):
        dequantize_codes(np.zeros(2, np.uint8), QuantSpec("logarithmic_quantize", {"max": 1.0, "bits": 8}), "w.dat")
