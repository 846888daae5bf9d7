"""nnef_torch.format.block_quant against torch_to_nnef's own Q4_0 (bit for bit), a line-by-line scalar twin of
tract's `quant_block` loops (q4_0.rs, q8_1.rs), and block bytes assembled by hand."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nnef_torch.format import block_quant as bq

F32 = np.float32


def weights(seed: int, shape=(16, 128), scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(shape) * scale).astype(F32)
    w[::3, 5] = -np.abs(w[::3, 5]) * 4  # negative extremes: the two quantizers differ there
    w[1, 32:64] = 0.0  # an all-zero block (scale 0)
    w[2, 32:64] = w[2, 32]  # a constant block
    return w


# -------------------------------------------------------------------- tract's quant_block, one value at a time

def tract_q4_0_block(block: list[float]) -> tuple[list[int], np.float16]:
    """tract's BaseQ4_0::quant_block in float32 scalars: first value of largest magnitude with its sign."""
    amax, top = F32(0), F32(0)
    for v in block:
        if amax < abs(F32(v)):
            amax, top = abs(F32(v)), F32(v)
    scale = F32(top) / F32(-8)
    r_scale = F32(0) if scale == 0 else F32(1) / scale
    codes = []
    for v in block:
        i = int(np.trunc(F32(v) * r_scale + F32(8.5)))  # `as i8` truncates toward zero
        codes.append(min(i, 15) - 8)
    return codes, np.float16(scale)


def tract_q8_1_block(block: list[float]) -> tuple[list[int], np.float16, np.float16]:
    amax, top, total = F32(0), F32(0), F32(0)
    for v in block:
        if amax < abs(F32(v)):
            amax, top = abs(F32(v)), F32(v)
        total = F32(total + F32(v))
    scale = F32(top) / F32(127)
    r_scale = F32(0) if scale == 0 else F32(1) / scale
    codes = []
    for v in block:
        x = F32(v) * r_scale
        rounded = np.floor(abs(x) + 0.5) * np.sign(x)  # Rust's f32::round: halfway away from zero
        codes.append(int(max(-128, min(127, rounded))))
    return codes, np.float16(scale), np.float16(total)


@pytest.mark.parametrize("seed", range(4))
def test_q4_0_ggml_rule_matches_tracts_quant_block(seed):
    w = weights(seed, (8, 96), scale=10.0 ** (seed - 2))
    codes, scales = bq.min_max_q4_0(w)
    assert codes.dtype == np.int8 and codes.shape == w.shape and scales.dtype == np.float16
    assert scales.shape == (8, 3)
    for row in range(8):
        for b in range(3):
            want_codes, want_scale = tract_q4_0_block(list(w[row, 32 * b: 32 * b + 32]))
            assert list(codes[row, 32 * b: 32 * b + 32]) == want_codes
            assert scales[row, b].view(np.uint16) == want_scale.view(np.uint16)


def test_q8_1_matches_tracts_quant_block():
    w = weights(7, (4, 64), scale=3.0)
    codes, scales = bq.min_max_q8_1(w)
    sums = bq.q8_1_sums(w)
    for row in range(4):
        for b in range(2):
            want_codes, want_scale, want_sum = tract_q8_1_block(list(w[row, 32 * b: 32 * b + 32]))
            assert list(codes[row, 32 * b: 32 * b + 32]) == want_codes
            assert scales[row, b].view(np.uint16) == want_scale.view(np.uint16)
            assert sums[row, b].view(np.uint16) == want_sum.view(np.uint16)


def test_q4_0_block_bytes_by_hand():
    codes = np.arange(32, dtype=np.int64) % 16 - 8
    scale = np.float16(-0.375)
    data = bq.pack_q4_0(codes.reshape(1, 32), np.array([scale]))
    nib = [int(c) + 8 for c in codes]
    ggml = struct.pack("<e", -0.375) + bytes(nib[j] | nib[j + 16] << 4 for j in range(16))
    legacy = struct.pack("<e", -0.375) + bytes(nib[2 * j] | nib[2 * j + 1] << 4 for j in range(16))
    assert data == ggml
    assert bq.pack_q4_0(codes, [scale], legacy=True) == legacy
    for packed, old in ((ggml, False), (legacy, True)):
        got_codes, got_scales = bq.unpack_q4_0(packed, 32, legacy=old)
        assert got_codes.tolist() == codes.tolist() and got_scales.tolist() == [-0.375]
    assert bq.dequantize_q4_0(codes, [scale]).tolist() == [float(c) * -0.375 for c in codes]


def test_q8_1_block_bytes_by_hand():
    codes = np.arange(-16, 16, dtype=np.int8)
    data = bq.pack_q8_1(codes, [np.float16(0.5)], sums=[np.float16(-8.0)])
    assert data == struct.pack("<ee", 0.5, -8.0) + codes.tobytes()
    got_codes, got_scales = bq.unpack_q8_1(data, 32)
    assert got_codes.tolist() == codes.tolist() and got_scales.tolist() == [0.5]
    assert bq.dequantize_q8_1(codes, [0.5]).tolist() == [c * 0.5 for c in codes.tolist()]


@pytest.mark.parametrize("rule", bq.RULES)
def test_q4_0_round_trip_and_range(rule):
    w = weights(3)
    codes, scales = bq.min_max_q4_0(w, rule=rule)
    assert codes.min() >= -8 and codes.max() <= 7
    back_codes, back_scales = bq.unpack_q4_0(bq.pack_q4_0(codes, scales), w.size)
    assert np.array_equal(back_codes.reshape(w.shape), codes)
    assert np.array_equal(back_scales.view(np.uint16), scales.reshape(-1).view(np.uint16))
    error = np.abs(bq.dequantize_q4_0(codes, scales) - w).reshape(-1, 32).max(axis=1)
    assert (error <= np.abs(w).reshape(-1, 32).max(axis=1) / 8 * 1.01 + 1e-6).all()  # half a step, f16 slack


def test_q4_0_requantizing_ggml_values_gives_the_same_blocks():
    codes, scales = bq.min_max_q4_0(weights(5))
    again = bq.min_max_q4_0(bq.dequantize_q4_0(codes, scales))
    assert np.array_equal(again[0], codes) and np.array_equal(again[1], scales)


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple of 32"):
        bq.min_max_q4_0(np.zeros((2, 40), F32))
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        bq.pack_q4_0(np.full(32, 8), [1.0])
    with pytest.raises(ValueError, match="need 1 scales"):
        bq.pack_q4_0(np.zeros(32, np.int8), [1.0, 2.0])
    with pytest.raises(ValueError, match="18 bytes"):
        bq.unpack_q4_0(b"\0" * 17, 32)
    with pytest.raises(ValueError, match="unknown rule"):
        bq.min_max_q4_0(np.zeros(32, F32), rule="round")


# ----------------------------------------------------------------------------------- torch_to_nnef, bit for bit

@pytest.mark.parametrize("seed", range(3))
def test_torch_to_nnef_rule_is_torch_to_nnefs_q4_0(seed):
    torch = pytest.importorskip("torch")
    qtract = pytest.importorskip("torch_to_nnef.tensor.quant.qtract",
                                 reason="torch_to_nnef is the reference for its own Q4_0")
    w = weights(seed, (32, 256), scale=10.0 ** (seed - 1))
    q = qtract.fp_to_tract_q4_0_with_min_max_calibration(torch.from_numpy(w.copy()))
    codes, scales = bq.min_max_q4_0(w, rule="torch_to_nnef")
    assert np.array_equal(codes, q.decompress_to_u8().numpy().astype(np.int16) - 8)
    assert np.array_equal(scales.view(np.uint16), q.qscheme.scale.numpy().reshape(scales.shape).view(np.uint16))
    assert np.array_equal(bq.dequantize_q4_0(codes, scales), q.decompress().numpy())
    assert bq.pack_q4_0(codes, scales) == q._build_binary_dat_content(post_tract_21_11=True)
    assert bq.pack_q4_0(codes, scales, legacy=True) == q._build_binary_dat_content(post_tract_21_11=False)
