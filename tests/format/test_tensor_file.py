"""Tests of nnef_torch.format.tensor_file: round trips, the Khronos `nnef` package as oracle, bad input, fuzzing."""
from __future__ import annotations

import math
import struct
import tempfile
from pathlib import Path

import nnef
import numpy as np
import pytest
import torch
from fuzzing import fuzz
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnef_torch.errors import NNEFTensorFileError
from nnef_torch.format.tensor_file import HEAD_BYTES, TensorData, decode, encode, parse_header, read_header

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO_ROOT.parent / "shared" / "conformance" / "openvx_nnef_core"

ALL_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
SHAPES = [(), (5,), (2, 3), (2, 1, 3), (1, 2, 2, 3), (2, 1, 1, 2, 3), (1, 2, 1, 2, 1, 2),
          (2, 1, 2, 1, 2, 1, 2), (1, 2, 1, 2, 1, 2, 1, 3)]


# ------------------------------------------------------------------------------------------------- helpers

def raw_file(code: int, bits: int, shape: tuple[int, ...], payload: bytes, *, params: bytes = b"",
             data_length: int | None = None, rank: int | None = None, version: tuple[int, int] = (1, 0),
             magic: bytes = b"\x4e\xef") -> bytes:
    """A tensor file assembled by hand with struct, independent of the module under test."""
    extents = list(shape) + [0] * (8 - len(shape))
    head = magic + bytes(version)
    head += struct.pack("<II", len(payload) if data_length is None else data_length,
                        len(shape) if rank is None else rank)
    head += struct.pack("<8I", *extents) + struct.pack("<II", bits, code) + params.ljust(32, b"\0")
    return head.ljust(128, b"\0") + payload


def msb_bit_stream(values: list[int], bits: int) -> bytes:
    """Pack integers (two's complement) MSB first into a zero-padded byte string, with Python big ints."""
    text = "".join(format(v & ((1 << bits) - 1), f"0{bits}b") for v in values)
    text += "0" * (-len(text) % 8)
    return int(text, 2).to_bytes(len(text) // 8, "big") if text else b""


def sample_array(dtype, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(size=shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def nnef_read(tmp_path: Path, data: bytes, name: str = "t.dat", **kwargs):
    path = tmp_path / name
    path.write_bytes(data)
    with open(path, "rb") as f:
        return nnef.read_tensor(f, **kwargs)


def nnef_write(tmp_path: Path, array: np.ndarray, name: str = "t.dat", quantized: bool = False) -> bytes:
    path = tmp_path / name
    with open(path, "wb") as f:
        nnef.write_tensor(f, array, quantized=quantized)
    return path.read_bytes()


def reference_linear(values: np.ndarray, low: float, high: float, bits: int) -> tuple[list[int], np.ndarray]:
    """The spec's linear formulas, one Python float at a time."""
    r = 2 ** bits - 1
    codes = []
    for x in values.ravel().tolist():
        v = (min(max(x, low), high) - low) / (high - low) * r
        codes.append(min(math.floor(v + 0.5), r))
    decoded = np.array([q / r * (high - low) + low for q in codes], dtype=np.float64).astype(np.float32)
    return codes, decoded.reshape(values.shape)


def reference_log(values: np.ndarray, high: float, bits: int, signed: bool) -> tuple[list[int], np.ndarray]:
    """The spec's logarithmic formulas; the sign is the top bit of the code when signed."""
    b = bits - 1 if signed else bits
    r, m = 2 ** b - 1, math.ceil(math.log2(high))
    codes, decoded = [], []
    for x in values.ravel().tolist():
        t = float(np.log2(abs(x))) if x != 0 else -math.inf
        t = min(t, m)
        q = int(math.floor(t + 0.5)) if t >= 0 else -int(math.floor(-t + 0.5)) if t > -math.inf else m - r
        q = max(q, m - r)  # clamping before or after rounding agrees: the bounds are integers
        code = q - (m - r)
        negative = signed and x < 0
        codes.append(code | (1 << b) if negative else code)
        decoded.append((-1.0 if negative else 1.0) * 2.0 ** q)
    return codes, np.array(decoded, dtype=np.float64).astype(np.float32).reshape(values.shape)


# --------------------------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype_and_rank(dtype, shape):
    array = sample_array(dtype, shape)
    result = decode(encode(array))
    assert result.array.dtype == np.dtype(dtype)
    assert result.array.shape == shape
    np.testing.assert_array_equal(result.array, array)
    assert result.codes is None and result.quantization is None
    assert result.header.layout == "current" and result.header.data_offset == 128


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                   np.uint8, np.uint16, np.uint32, np.uint64])
def test_seed_layout_plain_round_trip(dtype, tmp_path):
    array = sample_array(dtype, (3, 4))
    data = encode(array, layout="seed")
    code = struct.unpack_from("<I", data, 48)[0]
    signed_flag = struct.unpack_from("<I", data, 52)[0]
    assert code == (0 if np.issubdtype(dtype, np.floating) else 1)
    assert signed_flag == (1 if np.issubdtype(dtype, np.signedinteger) else 0)
    np.testing.assert_array_equal(decode(data).array, array)
    assert decode(data).array.dtype == np.dtype(dtype)
    read = nnef_read(tmp_path, data)
    assert read.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(read, array)


def test_byte_aligned_data_is_a_zero_copy_view():
    data = encode(np.arange(12, dtype=np.int32).reshape(3, 4))
    array = decode(data).array
    assert not array.flags.owndata and not array.flags.writeable
    assert np.shares_memory(array, np.frombuffer(data, np.uint8))


def test_torch_tensors_are_accepted():
    tensor = torch.randn(2, 3, requires_grad=True)
    np.testing.assert_array_equal(decode(encode(tensor)).array, tensor.detach().numpy())
    np.testing.assert_array_equal(decode(encode(torch.tensor([True, False]))).array, [True, False])
    with pytest.raises(NNEFTensorFileError, match="bfloat16"):
        encode(torch.zeros(2, dtype=torch.bfloat16))


LINEAR_BITS = [1, 3, 4, 7, 8, 12, 16, 33, 64]


@pytest.mark.parametrize("bits", LINEAR_BITS)
def test_seed_linear_quantization_matches_reference(bits):
    rng = np.random.default_rng(bits)
    values = rng.uniform(-1.5, 1.2, size=(4, 7)).astype(np.float32)  # includes clamped values
    low, high = -1.0, 0.75
    data = encode(values, quantization={"op": "linear_quantize", "min": low, "max": high, "bits": bits},
                  layout="seed")
    result = decode(data)
    codes, expected = reference_linear(values, low, high, bits)
    assert result.header.code == 0x10 and result.header.layout == "seed" and result.header.bits == bits
    assert len(data) == 128 + (values.size * bits + 7) // 8
    assert result.codes.ravel().tolist() == codes
    assert result.array.dtype == np.float32 and result.array.shape == values.shape
    np.testing.assert_array_equal(result.array, expected)
    assert result.quantization == {"op": "linear_quantize", "min": low, "max": high, "bits": bits}


LOG_CASES = [(bits, False) for bits in (1, 2, 3, 4, 8, 12, 16, 33, 64)] + \
            [(bits, True) for bits in (2, 3, 4, 7, 8, 12, 16, 33, 64)]


@pytest.mark.parametrize("bits,signed", LOG_CASES, ids=lambda v: str(v))
def test_seed_logarithmic_quantization_matches_reference(bits, signed):
    rng = np.random.default_rng(bits)
    magnitudes = 2.0 ** rng.uniform(-12, 4, size=20)
    values = (magnitudes * (rng.choice([-1, 1], size=20) if signed else 1)).astype(np.float32)
    values = np.concatenate([values, np.float32([0.0, 16.0, 100.0])])  # zero and clamped-at-top values
    high = 10.0
    data = encode(values, quantization={"op": "logarithmic_quantize", "max": high, "bits": bits,
                                        "signed": signed}, layout="seed")
    result = decode(data)
    codes, expected = reference_log(values, high, bits, signed)
    assert result.header.code == 0x11 and result.header.signed == signed
    assert struct.unpack_from("<2f", data, 52) == ((-high if signed else 0.0), high)
    assert result.codes.ravel().tolist() == codes
    np.testing.assert_array_equal(result.array, expected)
    assert result.quantization == {"op": "logarithmic_quantize", "max": high, "bits": bits, "signed": signed}


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint64])
def test_current_quantized_codes_round_trip(dtype, tmp_path):
    codes = sample_array(dtype, (2, 5))
    signed = np.issubdtype(dtype, np.signedinteger)
    data = encode(codes, quantization={"op": "zero_point_linear_quantize", "signed": signed})
    result = decode(data)
    assert result.header.code == (3 if signed else 2)
    np.testing.assert_array_equal(result.codes, codes)
    np.testing.assert_array_equal(result.array, codes)
    assert result.quantization == {"op": None, "signed": signed, "bits": np.dtype(dtype).itemsize * 8}
    read, quantized = nnef_read(tmp_path, data, return_quantization=True)
    assert quantized and read.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(read, codes)


def test_large_bit_stream_round_trip():
    codes = np.random.default_rng(1).integers(0, 8, size=1_000_003, dtype=np.uint64)
    data = encode(codes.astype(np.float32) / 7, quantization={"op": "linear_quantize", "min": 0, "max": 1,
                                                               "bits": 3}, layout="seed")
    np.testing.assert_array_equal(decode(data).codes, codes)


# -------------------------------------------------------------------------------- hand-built and legacy files

def test_seed_signed_integer_at_12_bits():
    values = [-2048, -1, 0, 1, 2047, -300, 5]
    data = raw_file(0x01, 12, (7,), msb_bit_stream(values, 12), params=struct.pack("<I", 1))
    result = decode(data)
    assert result.array.dtype == np.int16 and result.array.tolist() == values
    assert result.header.kind == "integer" and result.header.signed


def test_seed_unsigned_integer_at_5_and_24_bits():
    values = [0, 31, 7, 16, 1]
    assert decode(raw_file(0x01, 5, (5,), msb_bit_stream(values, 5))).array.tolist() == values
    wide = [0, 0xABCDEF, 0x123456]
    payload = b"".join(v.to_bytes(3, "little") for v in wide)
    result = decode(raw_file(0x01, 24, (3,), payload))
    assert result.array.dtype == np.uint32 and result.array.tolist() == wide


def test_seed_signed_integer_at_byte_widths_uses_little_endian():
    data = raw_file(0x01, 16, (3,), struct.pack("<3h", -2, 300, -32768), params=struct.pack("<I", 7))
    assert decode(data).array.tolist() == [-2, 300, -32768]


def test_hand_built_seed_linear_file():
    payload = msb_bit_stream([0, 5, 15, 10], 4)
    data = raw_file(0x10, 4, (2, 2), payload, params=struct.pack("<2f", -1.0, 2.0))
    result = decode(data)
    np.testing.assert_allclose(result.array, [[-1.0, 0.0], [2.0, 1.0]], rtol=1e-6)
    assert result.codes.tolist() == [[0, 5], [15, 10]]


def test_2018_header_four_bytes_too_long(tmp_path):
    # the 2018 Khronos writer ended its header with twelve reserved zero words instead of eleven
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = encode(array)
    legacy = good[:128] + b"\x00\x00\x00\x00" + good[128:]
    result = decode(legacy)
    assert result.header.data_offset == 132
    np.testing.assert_array_equal(result.array, array)


def test_four_bytes_too_long_with_nonzero_padding_names_both_readings():
    good = encode(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(NNEFTensorFileError, match="fits neither reading") as info:
        decode(good[:128] + b"\x01\x02\x03\x04" + good[128:])
    assert info.value.location.offset == 128 and "01 02 03 04" in info.value.message


def test_trailing_bytes_are_not_read_as_a_shifted_2018_file():
    """Regression: a current file with four bytes of garbage after its data has the size of a 2018 file; read
    that way, every item moved by one and the garbage became the last item. The Khronos reader refuses it."""
    good = encode(np.arange(1, 11, dtype=np.float32))
    with pytest.raises(NNEFTensorFileError, match="unexpected bytes follow the tensor data"):
        decode(good + b"\x01\x02\x03\x04")
    with tempfile.TemporaryFile() as handle:
        handle.write(good + b"\x01\x02\x03\x04")
        handle.seek(0)
        with pytest.raises(ValueError, match="size does not match"):
            nnef.read_tensor(handle)


def test_any_version_is_accepted():
    data = raw_file(0x00, 32, (2,), struct.pack("<2f", 1.5, -2.0), version=(2, 7))
    result = decode(data)
    assert result.header.version == (2, 7) and result.array.tolist() == [1.5, -2.0]


def test_logical_with_eight_bits():
    result = decode(raw_file(5, 8, (4,), bytes([0, 1, 2, 0])))
    assert result.array.dtype == np.bool_ and result.array.tolist() == [False, True, True, False]


def test_read_header_alone():
    header = read_header(encode(np.zeros((3, 2), np.int64)))
    assert header.shape == (3, 2) and header.bits == 64 and header.code == 4 and header.count == 6
    assert hash(header) == hash(read_header(encode(np.zeros((3, 2), np.int64))))


def test_expected_shape_accepts_match():
    assert decode(encode(np.zeros((1, 4), np.float32)), expected_shape=[1, 4]).array.shape == (1, 4)


# ------------------------------------------------------------------------------ the Khronos package as oracle

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 5)], ids=lambda s: f"rank{len(s)}")
def test_files_we_write_are_read_by_nnef(dtype, shape, tmp_path):
    array = sample_array(dtype, shape, seed=3)
    read = nnef_read(tmp_path, encode(array))
    assert read.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(read, array)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (9,), (3, 1, 4)], ids=lambda s: f"rank{len(s)}")
def test_files_nnef_writes_are_decoded(dtype, shape, tmp_path):
    array = sample_array(dtype, shape, seed=4)
    result = decode(nnef_write(tmp_path, array))
    assert result.array.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result.array, array)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint32, np.int64])
def test_quantized_files_nnef_writes_are_decoded(dtype, tmp_path):
    array = sample_array(dtype, (4, 3), seed=5)
    result = decode(nnef_write(tmp_path, array, quantized=True))
    signed = np.issubdtype(dtype, np.signedinteger)
    assert result.header.kind == "quantized" and result.header.code == (3 if signed else 2)
    assert result.codes.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result.codes, array)
    assert result.quantization == {"op": None, "signed": signed, "bits": np.dtype(dtype).itemsize * 8}


def conformance_files():
    files = sorted(CONFORMANCE.glob("*/*.dat")) if CONFORMANCE.is_dir() else []
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"conformance folder {CONFORMANCE} is absent"))]
    return [pytest.param(f, id=f"{f.parent.name}/{f.name}") for f in files]


@pytest.mark.parametrize("path", conformance_files())
def test_conformance_files_agree_with_nnef(path):
    data = path.read_bytes()
    result = decode(data, file=str(path))
    with open(path, "rb") as f:
        expected = nnef.read_tensor(f)
    assert result.array.dtype == expected.dtype
    np.testing.assert_array_equal(result.array, expected)
    assert encode(result.array) == data


# ------------------------------------------------------------------------------------------------ bad input

def valid_file() -> bytes:
    return encode(np.arange(6, dtype=np.float32).reshape(2, 3))  # 24 data bytes


def patched(data: bytes, offset: int, fmt: str, *values) -> bytes:
    buffer = bytearray(data)
    struct.pack_into(fmt, buffer, offset, *values)
    return bytes(buffer)


HUGE = raw_file(0x00, 32, (2 ** 32 - 1,) * 8, b"\0" * 64, data_length=64)
HUGE_MAX_LENGTH = raw_file(0x00, 32, (2 ** 32 - 1,) * 8, b"", data_length=2 ** 32 - 1)

BAD_INPUTS = [
    ("empty", b"", 0, "empty"),
    ("one_byte", b"N", 1, "truncated"),
    ("short_header", valid_file()[:100], 100, "header truncated"),
    ("bad_magic", b"PK" + valid_file()[2:], 0, "magic"),
    ("bad_second_magic_byte", b"N\x00", 0, "magic"),
    ("rank_9", patched(valid_file(), 8, "<I", 9), 8, "rank 9"),
    ("zero_extent", patched(valid_file(), 16, "<I", 0), 16, "extent of dimension 1 is 0"),
    ("bits_0", patched(valid_file(), 44, "<I", 0), 44, "bits per item is 0"),
    ("bits_65", patched(valid_file(), 44, "<I", 65), 44, "bits per item is 65"),
    ("float_bits_8", patched(valid_file(), 44, "<I", 8), 44, "float items"),
    ("logical_bits_4", raw_file(5, 4, (2,), b"\x12"), 44, "logical items"),
    ("unknown_code", patched(valid_file(), 48, "<I", 7), 48, "unknown"),
    ("unknown_code_0x12", patched(valid_file(), 48, "<I", 0x12), 48, "unknown"),
    ("vendor_code", patched(valid_file(), 48, "<I", 0x00010000), 48, "0x00010000"),
    ("vendor_code_with_algorithm", patched(valid_file(), 48, "<I", 0xABCD0010), 48, "vendor 0xABCD"),
    ("data_length_disagrees", patched(valid_file(), 4, "<I", 20), 4, "needs 24"),
    ("truncated_data", valid_file()[:140], 140, "truncated"),
    ("header_only", valid_file()[:128], 128, "truncated"),
    ("trailing_byte", valid_file() + b"\0", 152, "unexpected bytes"),
    ("trailing_garbage", valid_file() + b"garbage!", 152, "unexpected bytes"),
    ("huge_extents", HUGE, 4, "needs"),
    ("huge_extents_max_length", HUGE_MAX_LENGTH, 4, "needs"),
    ("linear_min_above_max", raw_file(0x10, 8, (1,), b"\0", params=struct.pack("<2f", 1, -1)), 52, "min <= max"),
    ("linear_nan", raw_file(0x10, 8, (1,), b"\0", params=struct.pack("<2f", math.nan, 1)), 52, "finite"),
    ("log_bad_min", raw_file(0x11, 8, (1,), b"\0", params=struct.pack("<2f", -1, 2)), 52, "min = 0 or -max"),
    ("log_zero_max", raw_file(0x11, 8, (1,), b"\0", params=struct.pack("<2f", 0, 0)), 52, "max > 0"),
    ("log_signed_one_bit", raw_file(0x11, 1, (1,), b"\0", params=struct.pack("<2f", -2, 2)), 44, "sign"),
]


@pytest.mark.parametrize("data,offset,fragment", [case[1:] for case in BAD_INPUTS],
                         ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_raises_with_offset(data, offset, fragment):
    with pytest.raises(NNEFTensorFileError, match=fragment) as info:
        decode(data, file="weights.dat")
    assert info.value.location.offset == offset
    assert info.value.location.file == "weights.dat"
    assert "weights.dat" in str(info.value)


@pytest.mark.parametrize("expected,offset", [((3, 2), 12), ((2, 4), 16), ((6,), 8), ((2, 3, 1), 8)])
def test_expected_shape_mismatch_names_both_shapes(expected, offset):
    with pytest.raises(NNEFTensorFileError) as info:
        decode(valid_file(), expected_shape=expected)
    assert info.value.location.offset == offset
    assert "[2, 3]" in info.value.message and str(list(expected)) in info.value.message


@pytest.mark.parametrize("array,kwargs,error", [
    (np.zeros((0, 3), np.float32), {}, NNEFTensorFileError),
    (np.zeros((1,) * 9, np.float32), {}, NNEFTensorFileError),
    (np.zeros(2, np.complex64), {}, NNEFTensorFileError),
    (np.zeros(2, bool), {"layout": "seed"}, ValueError),
    (np.zeros(2, np.float32), {"layout": "other"}, ValueError),
    (np.zeros(2, np.float32), {"quantization": {"signed": True}}, ValueError),
    (np.zeros(2, np.float32), {"quantization": {"op": "linear_quantize", "min": 0, "max": 1, "bits": 65},
                               "layout": "seed"}, ValueError),
    (np.float32([math.nan]), {"quantization": {"op": "linear_quantize", "min": 0, "max": 1, "bits": 8},
                              "layout": "seed"}, ValueError),
    (np.zeros(2, np.float32), {"quantization": {"op": "logarithmic_quantize", "max": 1, "bits": 1,
                                                "signed": True}, "layout": "seed"}, ValueError),
])
def test_encode_rejects_what_the_format_cannot_hold(array, kwargs, error):
    with pytest.raises(error):
        encode(array, **kwargs)


# -------------------------------------------------------------------------------------------------- fuzzing

def decode_or_file_error(data: bytes) -> TensorData | None:
    try:
        return decode(data)
    except NNEFTensorFileError as error:
        assert error.location is not None and error.location.offset is not None
        assert 0 <= error.location.offset <= len(data)
        return None


SEEDS = [
    valid_file(),
    encode(np.arange(10, dtype=np.float32) / 10, quantization={"op": "linear_quantize", "min": 0, "max": 1,
                                                                "bits": 12}, layout="seed"),
    encode(np.float32([0.5, -2, 4]), quantization={"op": "logarithmic_quantize", "max": 4, "bits": 5,
                                                    "signed": True}, layout="seed"),
    encode(np.array([True, False, True, True, False, True, False, True, True])),
    encode(np.int16([[1, -2], [3, -4]]), layout="seed"),
    raw_file(0x01, 12, (3,), msb_bit_stream([1, -1, 7], 12), params=b"\1"),
]

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 200), st.integers(1, 255)),
    st.tuples(st.just("word"), st.integers(0, 31), st.sampled_from([0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 33,
                                                                    64, 65, 0x10, 0x11, 2 ** 31, 2 ** 32 - 1])),
    st.tuples(st.just("truncate"), st.integers(0, 200), st.just(0)),
    st.tuples(st.just("extend"), st.integers(1, 8), st.integers(0, 255)),
)


@fuzz(300)
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    decode_or_file_error(data)
    decode_or_file_error(b"\x4e\xef" + data)


def mutated(seed: bytes, mutations) -> bytes:
    data = bytearray(seed)
    for kind, a, b in mutations:
        if kind == "flip" and a < len(data):
            data[a] ^= b
        elif kind == "word" and 4 * a + 4 <= min(len(data), 128):
            struct.pack_into("<I", data, 4 * a, b)
        elif kind == "truncate":
            del data[a:]
        elif kind == "extend":
            data += bytes([b]) * a
    return bytes(data)


@fuzz(300)
@given(st.sampled_from(SEEDS), st.lists(mutation, min_size=1, max_size=4))
def test_fuzz_mutated_valid_files(seed, mutations):
    decode_or_file_error(mutated(seed, mutations))


@fuzz(300)
@given(st.sampled_from(SEEDS), st.lists(mutation, min_size=1, max_size=4))
def test_fuzz_header_alone_decides_as_the_whole_file_does(seed, mutations):
    """Containers check a file from its first bytes and its size before reading the rest: that check accepts
    exactly the files `decode` accepts, and a file read with the 2018 layout has its four padding bytes zero."""
    data = mutated(seed, mutations)
    whole = decode_or_file_error(data)
    try:
        header = parse_header(data[:HEAD_BYTES], len(data))
    except NNEFTensorFileError:
        header = None
    assert (header is None) == (whole is None)
    if whole is not None:
        assert header == whole.header and len(data) == header.data_offset + header.data_length
        assert header.data_offset == 128 or data[128:132] == bytes(4)


ROUND_TRIP_DTYPES = st.sampled_from([np.dtype(d) for d in ALL_DTYPES])


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(ROUND_TRIP_DTYPES, hnp.array_shapes(min_dims=0, max_dims=8, min_side=1, max_side=3)))
def test_round_trip_property(array):
    result = decode(encode(array))
    assert result.array.dtype == array.dtype and result.array.shape == array.shape
    assert result.array.tobytes() == np.ascontiguousarray(array).tobytes()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 20), st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=30))
def test_linear_requantization_is_stable(bits, values):
    quantization = {"op": "linear_quantize", "min": -2.0, "max": 3.0, "bits": bits}
    first = decode(encode(np.float32(values), quantization=quantization, layout="seed"))
    second = decode(encode(first.array, quantization=quantization, layout="seed"))
    np.testing.assert_array_equal(second.codes, first.codes)
