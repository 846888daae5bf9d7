"""NNEF .dat tensor files as pure functions over bytes: `read_header`, `decode` and `encode`.

Both header families are read, told apart by the item code at byte 48 (never by the version bytes):

* current 1.0.x item types (what `nnef.write_tensor` writes): 0 float, 1 unsigned int (signed when the first
  parameter word is nonzero), 2 quantized unsigned, 3 quantized signed, 4 signed int, 5 logical;
* seed spec (1.0.0) algorithm codes: 0x00 float, 0x01 integer (same meaning as item type 1), 0x10 linear and
  0x11 logarithmic quantization with float32 min/max parameters.

Files of 2018-era writers have four zero bytes after the 128-byte header. A file four bytes longer than its header
says is read that way only when those bytes are zero; otherwise it is refused with both readings named.

tract's vendor item types (vendor 0x5452, 'TR', in the code's high half; bits per item 0xFFFFFFFF): blocks of 32
values quantized with an f16 scale (`block_quant.py`), rows being the first extent: 0x3040 Q4_0 (ggml nibble order,
what tract >= 0.21.11 and torch_to_nnef write), 0x2040 Q4_0 in tract's older nibble order, 0x3080 Q8_1 (tract 0.23
writes 0x3081, which it then refuses; read here too, written as 0x3080). They decode to float32 values exactly as
tract computes them; `TensorData.codes` / `.scales` hold the blocks.

Bit order (the spec text is silent on it): items whose width is a multiple of 8 are little-endian byte groups;
other widths form one continuous bit stream, each item most significant bit first, bytes filled from their most
significant bit (numpy.packbits order, as logical tensors use), the last byte zero-padded.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnef_torch.errors import Location, NNEFTensorFileError
from nnef_torch.format import block_quant

HEADER_SIZE = 128
LEGACY_PADDING = 4  # extra header bytes written by 2018-era tools
HEAD_BYTES = HEADER_SIZE + LEGACY_PADDING  # what `parse_header` needs of a file to check it
MAX_RANK = 8
MAGIC = b"\x4e\xef"

FLOAT, UINT, QUINT, QINT, INT, LOGICAL = 0, 1, 2, 3, 4, 5  # current item types (0 and 1 also seed codes)
SEED_LINEAR, SEED_LOGARITHMIC = 0x10, 0x11
KNOWN_CODES = {FLOAT, UINT, QUINT, QINT, INT, LOGICAL, SEED_LINEAR, SEED_LOGARITHMIC}
TRACT_VENDOR = 0x5452  # ('T' << 8) | 'R'
# tract's block item types: code -> (format, legacy nibble order); and the code each format is written with
BLOCK_CODES = {TRACT_VENDOR << 16 | 0x3040: ("q4_0", False), TRACT_VENDOR << 16 | 0x2040: ("q4_0", True),
               TRACT_VENDOR << 16 | 0x3080: ("q8_1", False), TRACT_VENDOR << 16 | 0x3081: ("q8_1", False)}
BLOCK_WRITE_CODES = {"q4_0": TRACT_VENDOR << 16 | 0x3040, "q8_1": TRACT_VENDOR << 16 | 0x3080}
BLOCK_BYTES = {"q4_0": block_quant.Q4_0_BLOCK_BYTES, "q8_1": block_quant.Q8_1_BLOCK_BYTES}
BLOCK_BITS = 0xFFFFFFFF  # bits per item in a block-quantized header
ITEM_TYPES = ("q4_0", "q8_1", "f16", "f32")  # `encode(item_type=)`

_FIXED = struct.Struct("<2s2BII8III")  # magic, version, data length, rank, extents, bits, code
_PARAMS = slice(52, 84)
_CHUNK_ITEMS = 1 << 18  # items per step of bit-stream (un)packing; a multiple of 8 keeps chunks byte aligned


@dataclass(frozen=True)
class TensorHeader:
    """The checked header of a tensor file.

    `kind` is 'float', 'integer', 'logical' or 'quantized'; `signed` says whether items carry a sign (floats do,
    quantized codes do when signed). `layout` is 'seed' for the codes only the seed spec defines (0x10, 0x11)
    and 'current' otherwise (codes 0 and 1 mean the same in both). `data_offset` is 128, or 132 for 2018 files.
    """

    version: tuple[int, int]
    data_length: int
    shape: tuple[int, ...]
    bits: int
    code: int
    params: bytes
    layout: str
    kind: str
    signed: bool
    quantization: dict[str, Any] | None = field(default=None, hash=False)
    data_offset: int = HEADER_SIZE
    block: str | None = None  # tract's block format ('q4_0', 'q8_1'); kind is then 'float'

    @property
    def count(self) -> int:
        """Number of items (1 for rank 0)."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class TensorData:
    """A decoded tensor file.

    `array` holds the values: floats as float16/32/64, integers in their numpy dtype, logical as bool, seed
    quantized data dequantized to float32, current quantized item types as their integer codes, tract's blocks as
    the float32 values tract computes. Byte-aligned data is a read-only zero-copy view of the input. `codes` holds
    the raw integer codes of quantized files and the int8 codes of blocks (else None); `quantization` describes
    the former (also in `header.quantization`); `scales` the f16 scale of each block of 32, [rows, blocks];
    `source` the whole file of block-quantized data (to write it again as it was).
    """

    array: np.ndarray
    codes: np.ndarray | None
    quantization: dict[str, Any] | None
    header: TensorHeader
    scales: np.ndarray | None = None
    source: bytes | None = field(default=None, repr=False)


def read_header(data: bytes | bytearray | memoryview, *, file: str | None = None) -> TensorHeader:
    """Parse and check the header of a whole tensor file held in `data`, including its size against the header."""
    view = _byte_view(data)
    return parse_header(view[:HEAD_BYTES], len(view), file=file)


def parse_header(head: bytes | bytearray | memoryview, size: int, *, file: str | None = None) -> TensorHeader:
    """Parse and check a header from the first `HEAD_BYTES` bytes of a file of `size` bytes, so that a file can
    be refused before its body is read: the size must be exactly what the header implies."""
    view = _byte_view(head)

    def fail(message: str, offset: int) -> NNEFTensorFileError:
        return NNEFTensorFileError(message, Location(file=file, offset=offset))

    if size == 0:
        raise fail("empty tensor file: expected a 128-byte header starting with the magic bytes 4E EF", 0)
    if bytes(view[:2]) != MAGIC[:size]:
        raise fail(f"bad magic number {bytes(view[:2]).hex(' ').upper()}: expected 4E EF", 0)
    if size < HEADER_SIZE:
        raise fail(f"tensor file header truncated: expected {HEADER_SIZE} bytes, the file has {size}", size)
    _, major, minor, data_length, rank, *extents, bits, code = _FIXED.unpack_from(view, 0)
    params = bytes(view[_PARAMS])

    if rank > MAX_RANK:
        raise fail(f"tensor rank {rank} exceeds the maximum of {MAX_RANK}", 8)
    shape = tuple(extents[:rank])
    for axis, extent in enumerate(shape):
        if extent == 0:
            raise fail(f"extent of dimension {axis} is 0; extents must be positive", 12 + 4 * axis)
    if code in BLOCK_CODES:
        return _block_header(view, size, (major, minor), data_length, shape, bits, code, fail)
    if code & 0xFFFF0000:
        known = ", ".join(f"0x{c:08X}" for c in BLOCK_CODES)
        raise fail(f"vendor-specific item code 0x{code:08X} (vendor 0x{code >> 16:04X}, algorithm "
                   f"0x{code & 0xFFFF:04X}) is not supported; the vendor codes read are tract's {known}", 48)
    if not 1 <= bits <= 64:
        raise fail(f"bits per item is {bits}; expected 1 to 64", 44)
    if code not in KNOWN_CODES:
        raise fail(f"unknown item type / algorithm code 0x{code:X}; expected one of 0-5, 0x10 or 0x11", 48)

    kind, signed, quantization = _classify(code, bits, params, fail)
    count = math.prod(shape)
    expected_length = (count * bits + 7) // 8
    if data_length != expected_length:
        raise fail(f"data length is {data_length} bytes but shape {list(shape)} at {bits} bits per item needs "
                   f"{expected_length}", 4)
    data_offset = _data_offset(view, size, data_length, fail)
    layout = "seed" if code in (SEED_LINEAR, SEED_LOGARITHMIC) else "current"
    return TensorHeader((major, minor), data_length, shape, bits, code, params, layout, kind, signed,
                        quantization, data_offset)


def _block_header(view: memoryview, size: int, version: tuple[int, int], data_length: int, shape: tuple[int, ...],
                  bits: int, code: int, fail: Callable[[str, int], NNEFTensorFileError]) -> TensorHeader:
    """The header of a tract block-quantized tensor: rank >= 2, rows of shape[1:] values a multiple of 32, and the
    data length of that many blocks (the bits field is not read, as tract does not)."""
    block, _ = BLOCK_CODES[code]
    if len(shape) < 2:
        raise fail(f"tract {block} data needs a rank of at least 2 (rows, then the values of a row), got rank "
                   f"{len(shape)}", 8)
    row = math.prod(shape[1:])
    if row % block_quant.BLOCK:
        raise fail(f"tract {block} rows hold shape[1:] = {list(shape[1:])}, {row} values, which is not a multiple "
                   f"of the block size {block_quant.BLOCK}", 16)
    expected_length = shape[0] * row // block_quant.BLOCK * BLOCK_BYTES[block]
    if data_length != expected_length:
        raise fail(f"data length is {data_length} bytes but shape {list(shape)} as tract {block} needs "
                   f"{expected_length} ({BLOCK_BYTES[block]} bytes per block of {block_quant.BLOCK})", 4)
    data_offset = _data_offset(view, size, data_length, fail)
    return TensorHeader(version, data_length, shape, bits, code, bytes(view[_PARAMS]), "current", "float", True,
                        None, data_offset, block)


def _data_offset(head: memoryview, size: int, data_length: int,
                 fail: Callable[[str, int], NNEFTensorFileError]) -> int:
    """Where the data starts: right after the header, or after the 2018 padding when the file has four more bytes
    and they are zero. Any other size is refused, naming what the header implies."""
    end = HEADER_SIZE + data_length
    if size == end:
        return HEADER_SIZE
    if size < end:
        raise fail(f"tensor data truncated: {data_length} bytes expected from byte {HEADER_SIZE}, "
                   f"the file ends at byte {size}", size)
    if size == end + LEGACY_PADDING:
        padding = bytes(head[HEADER_SIZE:HEAD_BYTES])
        if padding == bytes(LEGACY_PADDING):
            return HEADER_SIZE + LEGACY_PADDING
        raise fail(f"file size {size} fits neither reading: as a current file, {LEGACY_PADDING} unexpected bytes "
                   f"follow the tensor data (expected size {end}); as a 2018 file with a {HEAD_BYTES}-byte header, "
                   f"the padding at bytes {HEADER_SIZE}-{HEAD_BYTES - 1} must be zero but is "
                   f"{padding.hex(' ').upper()}", HEADER_SIZE)
    raise fail(f"{size - end} unexpected bytes after the tensor data (file size {size}, expected {end})", end)


def header_check(*, file: str | None = None, expected_shape: Sequence[int] | None = None,
                 kinds: Sequence[str] | None = None, declared: str = "") -> Callable[[bytes, int], None]:
    """A check for a container to run on a tensor file's first bytes and its size before reading the rest (see
    `container.Check`): the header, the size it implies, and optionally the shape and the item kinds allowed
    (`declared` says by what, as "variable 'w' is declared scalar")."""
    def check(head: bytes, size: int) -> None:
        header = parse_header(head, size, file=file)
        if expected_shape is not None:
            _check_shape(header, tuple(int(e) for e in expected_shape), file)
        if kinds is not None and header.kind not in kinds:
            raise NNEFTensorFileError(f"{declared or 'the tensor is declared with ' + ' or '.join(kinds) + ' items'} "
                                      f"but its file holds {header.kind} items", Location(file=file, offset=48))
    return check


def decode(data: bytes | bytearray | memoryview, *, file: str | None = None,
           expected_shape: Sequence[int] | None = None) -> TensorData:
    """Decode a whole tensor file; `expected_shape` (e.g. from the graph's `variable`) must match exactly, or for
    tract's blocks hold as many values (tract reads them in the variable's shape), which the values then take."""
    view = _byte_view(data)
    header = read_header(view, file=file)
    shape = header.shape
    if expected_shape is not None:
        shape = tuple(int(e) for e in expected_shape)
        _check_shape(header, shape, file)
    if header.block is not None:
        return _decode_blocks(view, header, shape)
    items = _read_items(view, header)
    if header.kind != "quantized":
        return TensorData(items.reshape(header.shape), None, None, header)
    codes = items.reshape(header.shape)
    q = header.quantization
    if header.code == SEED_LINEAR:
        array = _dequantize_linear(codes, q["bits"], q["min"], q["max"])
    elif header.code == SEED_LOGARITHMIC:
        array = _dequantize_logarithmic(codes, q["bits"], q["max"], q["signed"])
    else:
        array = codes
    return TensorData(array, codes, dict(q), header)


def _decode_blocks(view: memoryview, header: TensorHeader, shape: tuple[int, ...]) -> TensorData:
    """tract's blocks as float32 values in `shape` (the header's, or the variable's of the same volume)."""
    assert header.block is not None
    body = view[header.data_offset: header.data_offset + header.data_length]
    if header.block == "q4_0":
        codes, scales = block_quant.unpack_q4_0(body, header.count, legacy=BLOCK_CODES[header.code][1])
        values = block_quant.dequantize_q4_0(codes, scales)
    else:
        codes, scales = block_quant.unpack_q8_1(body, header.count)
        values = block_quant.dequantize_q8_1(codes, scales)
    rows = (shape[0], -1) if len(shape) > 1 else (-1,)
    return TensorData(values.reshape(shape), codes.reshape(shape), None, header, scales.reshape(*rows[:-1], -1),
                      bytes(view[: header.data_offset + header.data_length]))


def encode_blocks(codes: np.ndarray, scales: np.ndarray, *, item_type: str = "q4_0",
                  shape: Sequence[int] | None = None, sums: np.ndarray | None = None) -> bytes:
    """A tract block-quantized tensor file from int8 codes and f16 scales (one per 32 codes, in row-major order),
    in `shape` (the codes' shape by default: rank >= 2, shape[1:] a multiple of 32 values). `sums` (Q8_1 only):
    the f16 block sums tract stores (`block_quant.q8_1_sums`), else those of the dequantized values."""
    if item_type not in BLOCK_WRITE_CODES:
        raise ValueError(f"block item type must be one of {', '.join(BLOCK_WRITE_CODES)}, not {item_type!r}")
    shape = tuple(int(e) for e in (np.shape(codes) if shape is None else shape))
    if len(shape) < 2 or len(shape) > MAX_RANK or math.prod(shape[1:]) % block_quant.BLOCK or \
            any(not 1 <= e < 1 << 32 for e in shape):
        raise NNEFTensorFileError(f"shape {list(shape)} cannot be stored as tract {item_type}: it needs rank 2 to "
                                  f"{MAX_RANK}, extents in 1..2^32-1 and rows (shape[1:]) of a multiple of "
                                  f"{block_quant.BLOCK} values")
    if np.size(codes) != math.prod(shape):
        raise ValueError(f"{np.size(codes)} codes do not fill shape {list(shape)}")
    if item_type == "q4_0":
        payload = block_quant.pack_q4_0(codes, scales)
    else:
        payload = block_quant.pack_q8_1(codes, scales, sums=sums)
    if len(payload) >= 1 << 32:
        raise NNEFTensorFileError(f"tensor data of {len(payload)} bytes exceeds the 4 GiB limit of the format")
    extents = list(shape) + [0] * (MAX_RANK - len(shape))
    head = _FIXED.pack(MAGIC, 1, 0, len(payload), len(shape), *extents, BLOCK_BITS, BLOCK_WRITE_CODES[item_type])
    return head.ljust(HEADER_SIZE, b"\0") + payload


def quantize_blocks(values: Any, item_type: str = "q4_0", *, rule: str = "ggml") -> bytes:
    """A tract block-quantized tensor file of float `values` (rank >= 2), quantized min-max per block of 32 of the
    row-major values (`block_quant`; `rule` for Q4_0: 'ggml', tract's own, or 'torch_to_nnef')."""
    array = np.asarray(_to_numpy(values), dtype=np.float32)
    if array.ndim < 2 or math.prod(array.shape[1:]) % block_quant.BLOCK:
        raise NNEFTensorFileError(f"shape {list(array.shape)} cannot be stored as tract {item_type}: it needs rank "
                                  f">= 2 and rows (shape[1:]) of a multiple of {block_quant.BLOCK} values")
    flat = array.reshape(-1, block_quant.BLOCK)
    if item_type == "q4_0":
        codes, scales = block_quant.min_max_q4_0(flat, rule=rule)
        return encode_blocks(codes, scales, item_type=item_type, shape=array.shape)
    if item_type == "q8_1":
        codes, scales = block_quant.min_max_q8_1(flat)
        return encode_blocks(codes, scales, item_type=item_type, shape=array.shape,
                             sums=block_quant.q8_1_sums(flat))
    raise ValueError(f"block item type must be one of {', '.join(BLOCK_WRITE_CODES)}, not {item_type!r}")


def in_memory(array: np.ndarray) -> TensorData:
    """An array as if it had been read from the tensor file `encode` would write for it (current layout)."""
    dtype = array.dtype
    if dtype == np.bool_:
        code, bits, kind, signed = LOGICAL, 1, "logical", False
    elif dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        code, bits, kind, signed = FLOAT, dtype.itemsize * 8, "float", True
    elif dtype.kind in "iu" and dtype.itemsize in (1, 2, 4, 8):
        signed = dtype.kind == "i"
        code, bits, kind = (INT if signed else UINT), dtype.itemsize * 8, "integer"
    else:
        raise NNEFTensorFileError(f"dtype {dtype} has no NNEF item type")
    length = (array.size * bits + 7) // 8
    header = TensorHeader((1, 0), length, tuple(array.shape), bits, code, bytes(32), "current", kind, signed)
    return TensorData(array, None, None, header)


def encode(array: Any, *, quantization: dict[str, Any] | None = None, layout: str = "current",
           item_type: str | None = None) -> bytes:
    """Encode a numpy array or torch tensor as a tensor file.

    item_type: 'q4_0' or 'q8_1' writes float values quantized min-max as tract's blocks (`quantize_blocks`),
    'f16' / 'f32' writes them as float16 / float32; None writes the array's own dtype as below.

    layout='current': float16/32/64 -> item type 0, signed ints -> 4, unsigned -> 1, bool -> 5 (1 bit); with
    `quantization` ({'signed': bool, ...}) an integer array of codes is written as item type 2 or 3.
    layout='seed': floats -> 0x00, ints -> 0x01 (signed flag); with quantization {'op': 'linear_quantize',
    'min', 'max', 'bits'} or {'op': 'logarithmic_quantize', 'max', 'bits', 'signed'} a float array is quantized
    and written as code 0x10 / 0x11 at any width 1..64.
    """
    if item_type is not None:
        if item_type not in ITEM_TYPES:
            raise ValueError(f"item_type must be one of {', '.join(ITEM_TYPES)}, not {item_type!r}")
        if quantization is not None or layout != "current":
            raise ValueError(f"item_type={item_type!r} takes neither quantization nor layout={layout!r}")
        if item_type in BLOCK_WRITE_CODES:
            return quantize_blocks(array, item_type)
        array = np.asarray(_to_numpy(array), dtype=np.float16 if item_type == "f16" else np.float32)
    values = _to_numpy(array)
    if values.ndim > MAX_RANK:
        raise NNEFTensorFileError(f"tensor rank {values.ndim} exceeds the maximum of {MAX_RANK}")
    if any(extent == 0 for extent in values.shape) or any(e >= 1 << 32 for e in values.shape):
        raise NNEFTensorFileError(f"shape {list(values.shape)} cannot be stored: extents must be in 1..2^32-1")
    if layout not in ("current", "seed"):
        raise ValueError(f"layout must be 'current' or 'seed', not {layout!r}")
    flat = values.reshape(-1)
    dtype = values.dtype
    params = b""
    if quantization is not None and layout == "seed":
        code, bits, params, codes = _quantize_seed(flat, quantization)
        payload = _pack_items(codes, bits)
    elif quantization is not None:
        if dtype.kind not in "iu":
            raise ValueError(f"current-layout quantized tensors hold integer codes, got dtype {dtype}")
        signed = bool(quantization.get("signed", dtype.kind == "i"))
        if signed != (dtype.kind == "i"):
            raise ValueError(f"quantization says signed={signed} but the codes have dtype {dtype}")
        code, bits, payload = (QINT if signed else QUINT), dtype.itemsize * 8, _pack_items(flat, dtype.itemsize * 8)
    elif dtype == np.bool_:
        if layout == "seed":
            raise ValueError("the seed layout has no logical item type; use layout='current'")
        code, bits, payload = LOGICAL, 1, np.packbits(flat).tobytes()
    elif dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        code, bits, payload = FLOAT, dtype.itemsize * 8, _pack_items(flat, dtype.itemsize * 8)
    elif dtype.kind in "iu" and dtype.itemsize in (1, 2, 4, 8):
        signed = dtype.kind == "i"
        code = UINT if (layout == "seed" or not signed) else INT
        if layout == "seed" and signed:
            params = struct.pack("<I", 1)
        bits, payload = dtype.itemsize * 8, _pack_items(flat, dtype.itemsize * 8)
    else:
        raise NNEFTensorFileError(f"dtype {dtype} has no NNEF item type")
    if len(payload) >= 1 << 32:
        raise NNEFTensorFileError(f"tensor data of {len(payload)} bytes exceeds the 4 GiB limit of the format")
    extents = list(values.shape) + [0] * (MAX_RANK - values.ndim)
    head = _FIXED.pack(MAGIC, 1, 0, len(payload), values.ndim, *extents, bits, code)
    head += params.ljust(32, b"\0")
    return head.ljust(HEADER_SIZE, b"\0") + payload


# ---------------------------------------------------------------------------------------------- header details

def _classify(code: int, bits: int, params: bytes,
              fail: Callable[[str, int], NNEFTensorFileError]) -> tuple[str, bool, dict[str, Any] | None]:
    """Kind, signedness and quantization of a known code; checks bits and parameters for it."""
    if code == FLOAT:
        if bits not in (16, 32, 64):
            raise fail(f"float items must have 16, 32 or 64 bits, not {bits}", 44)
        return "float", True, None
    if code == LOGICAL:
        if bits not in (1, 8):
            raise fail(f"logical items must have 1 or 8 bits, not {bits}", 44)
        return "logical", False, None
    if code in (UINT, INT):
        return "integer", code == INT or params[:4] != b"\0\0\0\0", None
    if code in (QUINT, QINT):
        return "quantized", code == QINT, {"op": None, "signed": code == QINT, "bits": bits}
    low, high = struct.unpack_from("<2f", params)
    if code == SEED_LINEAR:
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise fail(f"linear quantization needs finite min <= max, got min={low}, max={high}", 52)
        return "quantized", False, {"op": "linear_quantize", "min": low, "max": high, "bits": bits}
    if not (math.isfinite(high) and high > 0 and low in (0.0, -high)):
        raise fail(f"logarithmic quantization needs max > 0 and min = 0 or -max, got min={low}, max={high}", 52)
    signed = low != 0.0
    if signed and bits < 2:
        raise fail("signed logarithmic quantization needs at least 2 bits (one is the sign)", 44)
    return "quantized", signed, {"op": "logarithmic_quantize", "max": high, "bits": bits, "signed": signed}


def _check_shape(header: TensorHeader, expected: tuple[int, ...], file: str | None) -> None:
    found = header.shape
    if found == expected:
        return
    if header.block is not None:
        if math.prod(expected) == header.count:
            return
        raise NNEFTensorFileError(f"tract {header.block} data of shape {list(found)} holds {header.count} values; "
                                  f"the expected shape {list(expected)} has {math.prod(expected)}",
                                  Location(file=file, offset=12))
    offset = 8
    if len(found) == len(expected):
        offset = 12 + 4 * next(i for i, (a, b) in enumerate(zip(found, expected)) if a != b)
    raise NNEFTensorFileError(f"tensor shape {list(found)} does not match the expected shape {list(expected)}",
                              Location(file=file, offset=offset))


def _byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


# ------------------------------------------------------------------------------------------- item (un)packing

def _container(bits: int, signed: bool) -> np.dtype:
    """The smallest little-endian numpy integer dtype holding `bits`-bit items."""
    width = next(w for w in (8, 16, 32, 64) if w >= bits)
    return np.dtype(f"<{'i' if signed else 'u'}{width // 8}")


def _read_items(view: memoryview, header: TensorHeader) -> np.ndarray:
    """The items of a checked file as a flat array (zero-copy for 8/16/32/64-bit items)."""
    count, bits, offset = header.count, header.bits, header.data_offset
    if header.kind == "float":
        return np.frombuffer(view, np.dtype(f"<f{bits // 8}"), count, offset)
    raw = np.frombuffer(view, np.uint8, header.data_length, offset)
    if header.kind == "logical":
        return np.unpackbits(raw, count=count).astype(bool) if bits == 1 else raw != 0
    signed = header.signed and header.code != SEED_LOGARITHMIC  # log codes hold a sign bit, not two's complement
    if bits in (8, 16, 32, 64):
        return np.frombuffer(view, _container(bits, signed), count, offset)
    if bits % 8 == 0:
        wide = np.zeros((count, 8), np.uint8)
        wide[:, : bits // 8] = raw.reshape(count, bits // 8)
        unsigned = wide.view("<u8").reshape(count)
    else:
        unsigned = _unpack_bit_stream(raw, count, bits)
    if signed:  # sign-extend two's complement b-bit values
        sign = np.int64(1 << (bits - 1))
        return ((unsigned.astype(np.int64) ^ sign) - sign).astype(_container(bits, True))
    return unsigned.astype(_container(bits, False))


def _unpack_bit_stream(raw: np.ndarray, count: int, bits: int) -> np.ndarray:
    """Unsigned items of an MSB-first bit stream, in chunks to bound the temporary bit matrix."""
    width = _container(bits, False).itemsize * 8
    out = np.empty(count, np.dtype(f"u{width // 8}"))
    for start in range(0, count, _CHUNK_ITEMS):
        n = min(_CHUNK_ITEMS, count - start)
        first = start * bits // 8
        stream = np.unpackbits(raw[first: first + (n * bits + 7) // 8], count=n * bits).reshape(n, bits)
        padded = np.zeros((n, width), np.uint8)
        padded[:, width - bits:] = stream
        out[start: start + n] = np.packbits(padded, axis=1).view(f">u{width // 8}").reshape(n)
    return out


def _pack_items(items: np.ndarray, bits: int) -> bytes | memoryview:
    """Bytes of integer or float items at `bits` per item (two's complement for signed integers)."""
    if bits in (8, 16, 32, 64):
        kind = items.dtype.kind if items.dtype.kind in "fiu" else "u"
        # a view, not .tobytes(): encode's header + payload concatenation is then the only copy of a large tensor
        return memoryview(np.ascontiguousarray(items, dtype=np.dtype(f"<{kind}{bits // 8}"))).cast("B")
    unsigned = items.astype(np.int64).view(np.uint64) if items.dtype.kind == "i" else items.astype(np.uint64)
    unsigned = unsigned & np.uint64((1 << bits) - 1)
    if bits % 8 == 0:
        return unsigned.astype("<u8").view(np.uint8).reshape(-1, 8)[:, : bits // 8].tobytes()
    parts = []
    for start in range(0, unsigned.size, _CHUNK_ITEMS):
        chunk = unsigned[start: start + _CHUNK_ITEMS].astype(">u8").view(np.uint8).reshape(-1, 8)
        parts.append(np.packbits(np.unpackbits(chunk, axis=1)[:, 64 - bits:]).tobytes())
    return b"".join(parts)


def _to_numpy(array: Any) -> np.ndarray:
    if hasattr(array, "detach") and hasattr(array, "numpy"):  # a torch tensor, without importing torch
        try:
            return array.detach().cpu().numpy()
        except TypeError as error:
            raise NNEFTensorFileError(f"dtype {array.dtype} has no NNEF item type") from error
    return np.asarray(array)


# ------------------------------------------------------------------------------------------------ quantization

def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _quantize_seed(flat: np.ndarray, quantization: dict[str, Any]) -> tuple[int, int, bytes, np.ndarray]:
    """Seed-spec code, bits, parameter bytes and unsigned codes for a float array."""
    op, bits = quantization.get("op"), int(quantization.get("bits", 0))
    if flat.dtype.kind not in "fiu":
        raise ValueError(f"seed quantization needs a numeric array, got dtype {flat.dtype}")
    x = flat.astype(np.float64)
    if np.isnan(x).any():
        raise ValueError("cannot quantize NaN values")
    if op == "linear_quantize" and 1 <= bits <= 64:
        low, high = float(np.float32(quantization["min"])), float(np.float32(quantization["max"]))
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"linear quantization needs finite min <= max, got {low}, {high}")
        codes = _quantize_linear(x, bits, low, high)
        return SEED_LINEAR, bits, struct.pack("<2f", low, high), codes
    signed = bool(quantization.get("signed", False))
    if op == "logarithmic_quantize" and 1 + signed <= bits <= 64:
        high = float(np.float32(quantization["max"]))
        if not (math.isfinite(high) and high > 0):
            raise ValueError(f"logarithmic quantization needs a finite max > 0, got {high}")
        codes = _quantize_logarithmic(x, bits, high, signed)
        return SEED_LOGARITHMIC, bits, struct.pack("<2f", -high if signed else 0.0, high), codes
    raise ValueError(f"unsupported seed quantization {quantization!r}: expected op 'linear_quantize' "
                     f"(min, max, bits 1..64) or 'logarithmic_quantize' (max, bits 1..64, signed)")


def _quantize_linear(x: np.ndarray, bits: int, low: float, high: float) -> np.ndarray:
    """q = round((clamp(x, min, max) - min) / (max - min) * r), r = 2^b - 1, as uint64."""
    r = (1 << bits) - 1
    if high == low:
        return np.zeros(x.shape, np.uint64)
    scaled = _round_half_away((np.clip(x, low, high) - low) / (high - low) * float(r))
    # float(r) rounds up to 2^64 for b = 64: map that top value to r exactly instead of overflowing
    return np.where(scaled >= 2.0 ** 64, np.uint64(r), np.minimum(scaled, 2.0 ** 64 - 2048).astype(np.uint64))


def _dequantize_linear(codes: np.ndarray, bits: int, low: float, high: float) -> np.ndarray:
    """x = q / r * (max - min) + min, computed in float64, returned as float32."""
    with np.errstate(all="ignore"):
        return (codes.astype(np.float64) / float((1 << bits) - 1) * (high - low) + low).astype(np.float32)


def _quantize_logarithmic(x: np.ndarray, bits: int, high: float, signed: bool) -> np.ndarray:
    """Codes c = round(clamp(log2|x|, m - r, m)) - (m - r), m = ceil(log2 max), r = 2^b' - 1.

    When signed, b' = b - 1 and the code's most significant bit holds the sign. Zero cannot be represented:
    log2 0 = -inf clamps to the smallest magnitude 2^(m - r) (code 0).
    """
    magnitude_bits = bits - 1 if signed else bits
    r, m = (1 << magnitude_bits) - 1, math.ceil(math.log2(high))
    with np.errstate(divide="ignore"):
        exponent = _round_half_away(np.minimum(np.log2(np.abs(x)), m))
    smallest = exponent <= float(m - r)  # also -inf; float(m - r) only rounds for r beyond any float exponent
    steps_below_top = np.clip(m - exponent, 0, min(float(r), 2.0 ** 62)).astype(np.uint64)
    codes = np.where(smallest, np.uint64(0), np.uint64(r) - np.minimum(steps_below_top, np.uint64(r)))
    if signed:
        codes = codes | np.where(x < 0, np.uint64(1 << magnitude_bits), np.uint64(0))
    return codes


def _dequantize_logarithmic(codes: np.ndarray, bits: int, high: float, signed: bool) -> np.ndarray:
    """x = sign * 2^(c + m - r), computed as 2^(m - (r - c)) so that 64-bit codes stay exact."""
    magnitude_bits = bits - 1 if signed else bits
    r, m = (1 << magnitude_bits) - 1, math.ceil(math.log2(high))
    unsigned = codes.astype(np.uint64)
    magnitude = unsigned & np.uint64(r)
    with np.errstate(all="ignore"):
        values = np.exp2(m - (np.uint64(r) - magnitude).astype(np.float64))
        if signed:
            values = np.where(unsigned >> np.uint64(magnitude_bits), -values, values)
        return values.astype(np.float32)
