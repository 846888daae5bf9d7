"""A minimal writer of MXNet's NDArray list format (`.params`), as `mx.nd.save` writes it, for the benchmarks.

    write_ndarray_list(path, {"arg:conv0_weight": array, "aux:bn0_running_var": array, ...})

The layout (little-endian) is the one `nnef_torch/formats/nnvm/params.py` reads: the list magic 0x112 and a
reserved word (uint64 each), the number of arrays (uint64), each array, then the number of names (uint64) and each
name (uint64 length, UTF-8 bytes). Each array is written in the V2 layout: magic 0xF993FAC9 (uint32), storage type 0
(int32, dense), rank (int32) and extents (int64 each), the context (int32 device type 1 = CPU, int32 device id 0),
the mshadow type flag (int32) and the items in C order. Names carry `arg:` (trained parameters) or `aux:` (state such
as BatchNorm's running statistics) prefixes, as `Module.save_checkpoint` and Gluon's `export` write them.

Checked against MXNet 1.9.1 (scratch venv, `bench/make_mxnet_resnet50.py --check-writer`): for the arrays of
ResNet-50 v1, the file this writer makes is byte for byte the file `mx.nd.save` makes, and `mx.nd.load` reads it back
into the same names and arrays. Only numpy and the standard library are used, so both that venv and the benchmark
import this module.

`seeded_params(shapes, aux, seed)` draws the arrays of a net from seeds, by the role each Gluon name says (weights,
BatchNorm scales and running statistics, biases), each array from its own stream.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping

import numpy as np

LIST_MAGIC = 0x112
V2_MAGIC = 0xF993FAC9
CPU = (1, 0)  # (device type, device id)
TYPE_FLAGS = {np.dtype(name): flag for flag, name in ((0, "float32"), (1, "float64"), (2, "float16"), (3, "uint8"),
                                                      (4, "int32"), (5, "int8"), (6, "int64"))}


def ndarray_header(array: np.ndarray) -> bytes:
    """Everything of one V2 array before its items."""
    dtype = np.dtype(array.dtype).newbyteorder("=")
    if dtype not in TYPE_FLAGS:
        raise ValueError(f"no MXNet type flag for dtype {array.dtype}")
    if array.ndim == 0:
        raise ValueError("MXNet's V2 layout has no rank-0 arrays (rank 0 means an empty array)")
    return (struct.pack("<Ii", V2_MAGIC, 0) + struct.pack(f"<i{array.ndim}q", array.ndim, *array.shape)
            + struct.pack("<iii", *CPU, TYPE_FLAGS[dtype]))


def write_ndarray_list(path: str, arrays: Mapping[str, np.ndarray]) -> int:
    """Write `arrays` (name -> array, names with their `arg:` / `aux:` prefixes) to `path`; return the bytes
    written. Arrays are written as they are, without a joined copy of the whole file in memory."""
    written = 0
    with open(path, "wb") as handle:
        def put(data: bytes | memoryview) -> None:
            nonlocal written
            handle.write(data)
            written += len(data)
        put(struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays)))
        for array in arrays.values():
            array = np.asarray(array)
            put(ndarray_header(array))
            little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
            put(memoryview(little).cast("B") if little.size else b"")
        put(struct.pack("<Q", len(arrays)))
        for name in arrays:
            encoded = name.encode("utf-8")
            put(struct.pack("<Q", len(encoded)) + encoded)
    return written


def _stream(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def seeded_array(name: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """A float32 array for the Gluon parameter `name` (bare, no prefix), from its own stream (seed and name), by the
    role its name says: BatchNorm scales and running variances uniform in [0.5, 1.5] (variances positive), shifts,
    biases and running means normal with deviation 0.1, weights He-scaled normals (variance 2 / fan-in)."""
    rs = _stream(seed, name)
    shape = tuple(int(extent) for extent in shape)
    if name.endswith(("_gamma", "_running_var", "_moving_var")):
        return rs.random(shape, dtype=np.float32) + np.float32(0.5)
    values = rs.standard_normal(shape, dtype=np.float32)
    if name.endswith(("_beta", "_bias", "_running_mean", "_moving_mean")):
        values *= np.float32(0.1)
    else:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values *= np.float32(np.sqrt(2.0 / max(fan_in, 1)))
    return values


def seeded_params(shapes: Mapping[str, tuple[int, ...]], aux: set[str] | frozenset[str], seed: int) \
        -> dict[str, np.ndarray]:
    """Every array of a net, keyed as a `.params` file names them: `aux:<name>` for the names in `aux`, else
    `arg:<name>`; in the order of `shapes`."""
    return {f"{'aux' if name in aux else 'arg'}:{name}": seeded_array(name, shape, seed)
            for name, shape in shapes.items()}
