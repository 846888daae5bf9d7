"""tract's block-quantized weight formats (Q4_0, Q8_1) as pure numpy functions: quantize, dequantize, (un)pack.

Facts from sonos/tract 0.23 (`linalg/src/frame/block_quant/q4_0.rs`, `q8_1.rs`, `helpers.rs`) and ggml:

* blocks of 32 consecutive values along the last axis (a .dat file's rows are its first extent, each row the
  flattened rest, which must be a multiple of 32);
* Q4_0 block (18 bytes): scale d as little-endian f16, then 16 bytes; byte j holds code j + 8 in its low nibble and
  code j + 16 + 8 in its high nibble (ggml order). The older tract order (item type 0x2040) puts codes 2j and 2j + 1
  in byte j instead. A value is `(nibble - 8) * float32(d)`;
* Q8_1 block (36 bytes): scale d as f16, then the f16 sum of the block's values (tract never reads it back), then 32
  signed bytes; a value is `int8 * float32(d)`. tract 0.23 has no Q8_0.

Quantization ("min-max"), per block: tract and ggml take the value of largest magnitude with its sign (the first one
on a tie), d = max / -8 in float32, codes `min(trunc(x * (1 / d) + 8.5), 15) - 8`. torch_to_nnef's
`fp_to_tract_q4_0_with_min_max_calibration` differs: d = |max| / -8 (always <= 0), rounded to f16 first, its
reciprocal also rounded to f16, codes `clamp(floor(x * r + 8.5), 0, 15) - 8`; `rule="torch_to_nnef"` gives that.
"""
from __future__ import annotations

import numpy as np

BLOCK = 32
Q4_0_BLOCK_BYTES = 18
Q8_1_BLOCK_BYTES = 36
RULES = ("ggml", "torch_to_nnef")

__all__ = ["BLOCK", "Q4_0_BLOCK_BYTES", "Q8_1_BLOCK_BYTES", "RULES", "block_count", "dequantize_q4_0",
           "dequantize_q8_1", "min_max_q4_0", "min_max_q8_1", "pack_q4_0", "pack_q8_1", "q8_1_sums",
           "unpack_q4_0", "unpack_q8_1"]


def block_count(count: int) -> int:
    """Blocks of `count` values; `count` must be a multiple of 32."""
    if count % BLOCK:
        raise ValueError(f"{count} values do not split into blocks of {BLOCK}")
    return count // BLOCK


def _blocks(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % BLOCK:
        raise ValueError(f"block quantization needs a last axis that is a multiple of {BLOCK}, got shape "
                         f"{list(x.shape)}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)


def _signed_max(blocks: np.ndarray) -> np.ndarray:
    """Per block, the first value of largest magnitude, with its sign (NaN never wins, as in tract's `<` test)."""
    magnitude = np.abs(blocks)
    magnitude = np.where(np.isnan(magnitude), -1.0, magnitude)
    first = np.argmax(magnitude, axis=-1)[..., None]
    return np.take_along_axis(blocks, first, axis=-1)[..., 0]


def _reciprocal(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d == 0, np.float32(0), np.float32(1) / np.where(d == 0, np.float32(1), d))


def _saturate_i8(y: np.ndarray, rounding: str) -> np.ndarray:
    """Rust's `f32 as i8` after rounding: NaN -> 0, saturating at -128 / 127."""
    y = np.trunc(y) if rounding == "trunc" else np.copysign(np.floor(np.abs(y) + np.float32(0.5)), y)
    return np.clip(np.nan_to_num(y, nan=0.0, posinf=127.0, neginf=-128.0), -128, 127).astype(np.int8)


def min_max_q4_0(values: np.ndarray, *, rule: str = "ggml") -> tuple[np.ndarray, np.ndarray]:
    """Float values [..., K] (K a multiple of 32) -> (int8 codes in [-8, 7], same shape; float16 scales
    [..., K // 32]). `rule` 'ggml' is tract's and ggml's own quantizer, 'torch_to_nnef' torch_to_nnef's."""
    blocks = _blocks(values)
    with np.errstate(over="ignore", invalid="ignore"):
        if rule == "ggml":
            d = _signed_max(blocks) / np.float32(-8)
            scales = d.astype(np.float16)
            y = blocks * _reciprocal(d)[..., None] + np.float32(8.5)
            codes = np.minimum(_saturate_i8(y, "trunc"), 15)
        elif rule == "torch_to_nnef":
            scales = (np.abs(blocks).max(axis=-1) / np.float32(-8)).astype(np.float16)
            recip = _reciprocal(scales.astype(np.float32)).astype(np.float16)
            y = blocks * recip.astype(np.float32)[..., None] + np.float32(8.5)
            codes = np.clip(np.nan_to_num(np.floor(y), nan=0.0), 0, 15).astype(np.int8)
        else:
            raise ValueError(f"unknown rule {rule!r}; expected one of {', '.join(RULES)}")
    codes = np.clip(codes, 0, 15).astype(np.int8) - np.int8(8)
    return codes.reshape(np.shape(values)), scales


def min_max_q8_1(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float values [..., K] -> (int8 codes, float16 scales [..., K // 32]) as tract's Q8_1 quantizer: d = signed
    max / 127 in float32, codes round(x * (1 / d)) half away from zero."""
    blocks = _blocks(values)
    with np.errstate(over="ignore", invalid="ignore"):
        d = _signed_max(blocks) / np.float32(127)
        codes = _saturate_i8(blocks * _reciprocal(d)[..., None], "round")
    return codes.reshape(np.shape(values)), d.astype(np.float16)


def q8_1_sums(values: np.ndarray) -> np.ndarray:
    """The f16 sum tract stores in each Q8_1 block: the block's values added in order in float32."""
    blocks = _blocks(values)
    total = np.zeros(blocks.shape[:-1], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(BLOCK):
            total += blocks[..., i]
        return total.astype(np.float16)


def _check_codes(codes: np.ndarray, scales: np.ndarray, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(codes)
    s = np.asarray(scales, dtype=np.float16)
    if c.dtype.kind not in "iu":
        raise ValueError(f"codes must be integers, got dtype {c.dtype}")
    n = block_count(c.size)
    if s.size != n:
        raise ValueError(f"{c.size} codes need {n} scales, got {s.size}")
    if c.size and (c.min() < low or c.max() > high):
        raise ValueError(f"codes must lie in [{low}, {high}], found [{c.min()}, {c.max()}]")
    return c.reshape(n, BLOCK), s.reshape(n)


def _expand(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    c = np.asarray(codes)
    s = np.asarray(scales, dtype=np.float16).astype(np.float32)
    blocks = c.reshape(*c.shape[:-1], c.shape[-1] // BLOCK, BLOCK).astype(np.float32)
    return (blocks * s.reshape(blocks.shape[:-1])[..., None]).reshape(c.shape)


def dequantize_q4_0(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """float32 values as tract decodes them: code * float32(f16 scale) (exact in float32)."""
    _check_codes(codes, scales, -8, 7)
    return _expand(codes, scales)


def dequantize_q8_1(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """float32 values as tract decodes Q8_1: int8 code * float32(f16 scale)."""
    _check_codes(codes, scales, -128, 127)
    return _expand(codes, scales)


def pack_q4_0(codes: np.ndarray, scales: np.ndarray, *, legacy: bool = False) -> bytes:
    """Q4_0 blocks in row-major block order, ggml nibble order (item type 0x3040), or tract's older order when
    `legacy` (0x2040)."""
    c, s = _check_codes(codes, scales, -8, 7)
    nibbles = (c + 8).astype(np.uint8)
    pairs = nibbles.reshape(-1, 16, 2) if legacy else nibbles.reshape(-1, 2, 16).transpose(0, 2, 1)
    out = np.empty((c.shape[0], Q4_0_BLOCK_BYTES), np.uint8)
    out[:, :2] = s.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = pairs[:, :, 0] | (pairs[:, :, 1] << 4)
    return out.tobytes()


def unpack_q4_0(data: bytes | bytearray | memoryview, count: int, *,
                legacy: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes [count], float16 scales [count // 32]) of `count` values packed by `pack_q4_0`."""
    n = block_count(count)
    raw = _raw(data, n, Q4_0_BLOCK_BYTES)
    scales = raw[:, :2].copy().view("<f2").reshape(n).astype(np.float16)
    low, high = raw[:, 2:] & 0x0F, raw[:, 2:] >> 4
    pairs = np.stack([low, high], axis=-1)  # [n, 16, 2]
    nibbles = pairs.reshape(n, BLOCK) if legacy else pairs.transpose(0, 2, 1).reshape(n, BLOCK)
    return (nibbles.astype(np.int8) - np.int8(8)).reshape(count), scales


def pack_q8_1(codes: np.ndarray, scales: np.ndarray, *, sums: np.ndarray | None = None) -> bytes:
    """Q8_1 blocks; `sums` (f16 per block, see `q8_1_sums`) defaults to the sums of the dequantized values."""
    c, s = _check_codes(codes, scales, -128, 127)
    if sums is None:
        sums = q8_1_sums(_expand(c, s))
    sums = np.asarray(sums, dtype=np.float16).reshape(-1)
    if sums.size != c.shape[0]:
        raise ValueError(f"{c.shape[0]} blocks need {c.shape[0]} sums, got {sums.size}")
    out = np.empty((c.shape[0], Q8_1_BLOCK_BYTES), np.uint8)
    out[:, :2] = s.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = sums.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 4:] = c.astype(np.int8).view(np.uint8)
    return out.tobytes()


def unpack_q8_1(data: bytes | bytearray | memoryview, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes [count], float16 scales [count // 32]) of `count` values packed by `pack_q8_1`."""
    n = block_count(count)
    raw = _raw(data, n, Q8_1_BLOCK_BYTES)
    scales = raw[:, :2].copy().view("<f2").reshape(n).astype(np.float16)
    return raw[:, 4:].copy().view(np.int8).reshape(count), scales


def _raw(data: bytes | bytearray | memoryview, blocks: int, block_bytes: int) -> np.ndarray:
    raw = np.frombuffer(data, np.uint8)
    if raw.size != blocks * block_bytes:
        raise ValueError(f"{blocks} blocks need {blocks * block_bytes} bytes, got {raw.size}")
    return raw.reshape(blocks, block_bytes)
