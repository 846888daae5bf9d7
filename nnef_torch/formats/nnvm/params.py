"""Parameters of NNVM and MXNet models: MXNet's `.params` files (an NDArray list), `.npz` archives, or a mapping.

A `.params` file is little-endian: the list magic 0x112 and a reserved word (uint64 each), the number of arrays
(uint64), each array, then the number of names (uint64) and each name (uint64 length, UTF-8 bytes). An array is a
magic (uint32: 0xF993FAC9 V2, 0xF993FACA V3 with numpy shapes, 0xF993FAC8 V1, or else the legacy layout where this
word is the rank), its storage type (int32; 0 dense, V2/V3 only), its shape (rank int32, then int64 extents; the
legacy layout: uint32 extents), and, unless it is empty, its context (two int32), its type flag (int32) and its
items. Names carry `arg:` (trained parameters) or `aux:` (state such as moving statistics) prefixes. Every count and
length is checked against the bytes left before anything is allocated; sparse arrays are refused. A file is opened
only when it is a regular file (never a FIFO or a device), and only its first bytes (the magic, an array count of at
most MAX_ARRAYS) are read until they are found good. Nothing is unpickled: an `.npz` member's `.npy` header must be
numeric and claim no more than the member holds before its data is read.
"""
from __future__ import annotations

import glob
import math
import os
import re
import struct
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location, NNEFError, NNEFOptionError
from nnef_torch.formats.json_file import open_regular
from nnef_torch.ir.limits import check_count

LIST_MAGIC = 0x112
V1_MAGIC, V2_MAGIC, V3_MAGIC = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
MAX_RANK = 32
MAX_BYTES = 64 << 30
MAX_ITEMS = 1 << 40
# mshadow type flags
TYPE_FLAGS = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64", 7: "bool",
              8: "int16", 9: "uint16", 10: "uint32", 11: "uint64", 12: "bfloat16"}
_STORAGE = {1: "row_sparse", 2: "csr"}
HEAD_BYTES = 24  # the list magic, a reserved word and the number of arrays
MAX_ARRAYS = 1 << 18  # arrays in one file (real models hold a few thousand)
NPZ_INFLATION, NPZ_FLOOR = 20, 16 << 20  # an .npz archive's arrays take at most 20 times its size (plus 16 MiB)
_EMPTY = np.zeros((0,), np.float32)  # every empty array of a file: one, read-only
_EMPTY.flags.writeable = False


class Parameters:
    """Named arrays; `aux` names the state arrays (MXNet's `aux:` prefix)."""

    def __init__(self, arrays: Mapping[str, np.ndarray], aux: set[str], file: str | None, origin: Any):
        self.arrays = dict(arrays)
        self.aux = set(aux)
        self.file = file
        self.origin = origin  # what to read again: the path, or the mapping given

    def __contains__(self, name: str) -> bool:
        return name in self.arrays

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def extra(self, graph: Any) -> list[str]:
        """Names that match no argument node of `graph`."""
        arguments = {graph.nodes[index].name for index in graph.arg_nodes}
        return sorted(name for name in self.arrays if name not in arguments)


def load_parameters(params: Any, graph_file: str | None) -> Parameters:
    """Parameters from `params` (a path to .params or .npz, or a mapping of name to array or tensor); by default
    the one `prefix-NNNN.params` beside `prefix-symbol.json`."""
    if params is None:
        found = default_params(graph_file)
        if found is None:
            return Parameters({}, set(), None, None)
        params = found
    if isinstance(params, Mapping):
        arrays, aux = _split(((str(name), _array(value, str(name))) for name, value in params.items()), None)
        return Parameters(arrays, aux, None, params)
    if not isinstance(params, (str, os.PathLike)):
        raise NNEFOptionError(f"params= must be a path (.params or .npz) or a mapping of name to array, found "
                              f"{type(params).__name__}")
    path = os.fspath(params)
    with open_regular(path, "parameter file", max_bytes=MAX_BYTES) as handle:  # no FIFO, device or folder
        if path.lower().endswith(".npz"):
            return Parameters(*_split(_read_npz(handle, path), path), path, path)
        return Parameters(*_split(read_ndarray_list(_read_params(handle, path), path), path), path, path)


def _read_params(handle: BinaryIO, path: str) -> memoryview:
    """The bytes of a `.params` file, read once its first bytes (the magic, the array count) are checked against
    its size: nothing more is read of a file that is no parameter file or claims more arrays than it holds."""
    size = os.fstat(handle.fileno()).st_size
    head = handle.read(HEAD_BYTES)
    _list_head(_Reader(head, path, size))
    data = np.empty(size, np.uint8)  # not zeroed; the arrays are views of it: the file is held once, writable
    data[:len(head)] = np.frombuffer(head, np.uint8)
    read = len(head) + (handle.readinto(memoryview(data)[len(head):]) or 0)
    if read != size or handle.read(1):
        raise ForeignFormatError(f"the file changed size while being read (read {read:,} bytes of {size:,})",
                                 Location(file=path))
    return memoryview(data)


def default_params(graph_file: str | None) -> str | None:
    """The `prefix-NNNN.params` beside `prefix-symbol.json`; an error lists them when there are several."""
    if graph_file is None or not graph_file.endswith("-symbol.json"):
        return None
    prefix = graph_file[:-len("-symbol.json")]
    candidates = sorted(path for path in glob.glob(glob.escape(prefix) + "-*.params")
                        if re.fullmatch(r"-\d+\.params", path[len(prefix):]))
    if len(candidates) > 1:
        listed = ", ".join(os.path.basename(path) for path in candidates)
        raise ForeignFormatError(f"several parameter files match this symbol ({listed}); pass params= to choose one",
                                 Location(file=graph_file))
    if not candidates:
        raise ForeignFormatError(f"no {os.path.basename(prefix)}-NNNN.params beside this symbol file; pass params= "
                                 "(a .params or .npz file, or a mapping of name to array)", Location(file=graph_file))
    return candidates[0]


def _split(named: Iterator[tuple[str, np.ndarray]], file: str | None) -> tuple[dict[str, np.ndarray], set[str]]:
    arrays: dict[str, np.ndarray] = {}
    aux: set[str] = set()
    for name, array in named:
        kind, _, bare = name.partition(":") if name.startswith(("arg:", "aux:")) else ("", "", name)
        if bare in arrays:
            raise ForeignFormatError(f"parameter '{bare}' is given twice", Location(file=file))
        arrays[bare] = array
        if kind == "aux":
            aux.add(bare)
    return arrays, aux


def _array(value: Any, name: str) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        array = value.numpy()
    else:
        try:
            array = np.asarray(value) if isinstance(value, (np.ndarray, np.generic, int, float, bool, list, tuple)) \
                else None
        except ValueError:  # nested lists of unequal lengths
            array = None
    if array is None or array.dtype.kind not in "fiub" or array.ndim > MAX_RANK:
        found = f"dtype {array.dtype}, rank {array.ndim}" if array is not None else type(value).__name__
        raise NNEFOptionError(f"params['{name}'] must be a numeric array of rank at most {MAX_RANK}, found {found}")
    return array


def _read_npz(handle: BinaryIO, path: str) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays of an `.npz` archive, each read once its `.npy` header says a shape and dtype that its member's
    size holds (a header may not claim more than the member has), with pickles off."""
    budget = NPZ_INFLATION * os.fstat(handle.fileno()).st_size + NPZ_FLOOR
    try:
        with zipfile.ZipFile(handle) as archive:
            members = archive.infolist()
            check_count("the number of arrays", len(members), MAX_ARRAYS, Location(file=path),
                        error=ForeignFormatError)
            for info in members:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    shape, fortran, dtype = header(member)
                    if dtype.hasobject or dtype.kind not in "fiub" or len(shape) > MAX_RANK:
                        raise ValueError(f"array '{name}' has dtype {dtype} and rank {len(shape)}; parameters are "
                                         f"numeric arrays of rank at most {MAX_RANK}")
                    count, left = math.prod(shape), info.file_size - member.tell()
                    if count * dtype.itemsize > left:
                        raise ValueError(f"array '{name}' claims shape {list(shape)} of {dtype}, more than the "
                                         f"{left:,} bytes after its header hold")
                    budget -= count * dtype.itemsize
                    if budget < 0:
                        raise ValueError(f"array '{name}' brings the arrays past {NPZ_INFLATION} times the size of "
                                         "the archive (a compressed archive of repeated values: save it with "
                                         "numpy.savez, uncompressed)")
                    data = _read_fully(member, count * dtype.itemsize, name)
                array = np.frombuffer(data, dtype, count)
                if not array.dtype.isnative:
                    array = array.astype(dtype.newbyteorder("="))
                yield name, array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, NotImplementedError) as error:
        if isinstance(error, NNEFError):
            raise
        raise ForeignFormatError(f"not a readable .npz archive of named arrays ({error})",
                                 Location(file=path)) from None


def _read_fully(member: BinaryIO, size: int, name: str) -> bytearray:
    """`size` bytes of an archive member, read in pieces into one writable buffer that grows with what is read
    (a member that holds less than it claims costs what it holds)."""
    data = bytearray()
    while len(data) < size:
        piece = member.read(min(size - len(data), 1 << 24))
        if not piece:
            raise ValueError(f"array '{name}' is truncated: {len(data):,} of {size:,} bytes")
        data += piece
    return data


class _Reader:
    """Reads `data`, the first bytes of a file of `end` bytes (all of it by default)."""

    def __init__(self, data: bytes | memoryview, file: str | None, end: int | None = None):
        self.data, self.file, self.pos = memoryview(data), file, 0
        self.end = len(self.data) if end is None else end

    def fail(self, message: str, at: int | None = None) -> ForeignFormatError:
        return ForeignFormatError(message, Location(file=self.file, offset=self.pos if at is None else at))

    def take(self, count: int, what: str) -> memoryview:
        if count < 0 or count > len(self.data) - self.pos:
            raise self.fail(f"{what} needs {count:,} bytes but {len(self.data) - self.pos:,} are left")
        chunk = self.data[self.pos:self.pos + count]
        self.pos += count
        return chunk

    def unpack(self, fmt: str, what: str) -> Any:
        values = struct.unpack(fmt, self.take(struct.calcsize(fmt), what))
        return values[0] if len(values) == 1 else values

    def count(self, what: str, item_size: int) -> int:
        """A uint64 count of items of at least `item_size` bytes each, checked against the bytes left."""
        at = self.pos
        value = self.unpack("<Q", what)
        if value * item_size > self.end - self.pos:
            raise self.fail(f"{what} is {value:,}, more than the {self.end - self.pos:,} bytes left can hold", at)
        return value


def read_ndarray_list(data: bytes | memoryview, file: str | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """The named arrays of an MXNet `.params` file (see the module docstring for the layout)."""
    reader = _Reader(data, file)
    arrays = [_ndarray(reader, i) for i in range(_list_head(reader))]
    names = [bytes(reader.take(reader.count(f"the length of name {i}", 1), f"name {i}")).decode("utf-8", "replace")
             for i in range(reader.count("the number of names", 8))]
    if reader.pos != len(data):
        raise reader.fail(f"{len(data) - reader.pos:,} unexpected bytes after the names")
    if names and len(names) != len(arrays):
        raise reader.fail(f"the file holds {len(arrays)} arrays but {len(names)} names")
    if not names and arrays:
        raise reader.fail(f"the file holds {len(arrays)} arrays without names; parameters are found by name")
    return iter(list(zip(names, arrays)))


def _list_head(reader: _Reader) -> int:
    """The number of arrays, once the magic and the count (at most MAX_ARRAYS, of 4 bytes or more each) are checked
    (of the whole file, or of its first HEAD_BYTES bytes only: `reader.end` is the file's size)."""
    magic, _ = reader.unpack("<QQ", "the file header")
    if magic != LIST_MAGIC:
        raise reader.fail(f"not an MXNet parameter file: magic 0x{magic:X}, expected 0x{LIST_MAGIC:X}", 0)
    at = reader.pos
    count = reader.count("the number of arrays", 4)
    return check_count("the number of arrays", count, MAX_ARRAYS, Location(file=reader.file, offset=at),
                       error=ForeignFormatError)


def _ndarray(reader: _Reader, index: int) -> np.ndarray:
    start = reader.pos
    what = f"array {index}"
    magic = reader.unpack("<I", f"the magic of {what}")
    if magic in (V2_MAGIC, V3_MAGIC):
        storage = reader.unpack("<i", f"the storage type of {what}")
        if storage != 0:
            kind = _STORAGE.get(storage, f"storage type {storage}")
            raise reader.fail(f"{what} is a {kind} (sparse) array; only dense arrays are supported", start)
        shape = _shape(reader, what, wide=True)
    elif magic == V1_MAGIC:
        shape = _shape(reader, what, wide=True)
    else:  # legacy: the word read is the rank, extents are uint32
        reader.pos = start
        shape = _shape(reader, what, wide=False)
    if shape is None or (magic != V3_MAGIC and len(shape) == 0):
        return _EMPTY  # an empty ('none') array
    reader.unpack("<ii", f"the context of {what}")
    flag = reader.unpack("<i", f"the type flag of {what}")
    if flag not in TYPE_FLAGS:
        raise reader.fail(f"{what} has unknown type flag {flag}", reader.pos - 4)
    name = TYPE_FLAGS[flag]
    dtype = np.dtype(np.uint16 if name == "bfloat16" else name).newbyteorder("<")
    count = 1
    for extent in shape:
        count *= extent
    raw = reader.take(count * dtype.itemsize, f"the data of {what} (shape {list(shape)}, {name})")
    array = np.frombuffer(raw, dtype, count).reshape(shape)
    if name == "bfloat16":  # widened to float32 exactly
        return (array.astype(np.uint32) << 16).view(np.float32)
    if array.dtype.isnative and array.flags.aligned and array.flags.writeable:
        return array  # a view of the file's bytes
    return array.astype(dtype.newbyteorder("="), copy=True)


def _shape(reader: _Reader, what: str, wide: bool) -> tuple[int, ...] | None:
    at = reader.pos
    rank = reader.unpack("<i" if wide else "<I", f"the rank of {what}")
    if wide and rank == -1:
        return None  # unknown shape (V3): an empty array
    if not 0 <= rank <= MAX_RANK:
        raise reader.fail(f"{what} has rank {rank}; expected 0 to {MAX_RANK}", at)
    extents = reader.unpack(f"<{rank}{'q' if wide else 'I'}", f"the shape of {what}") if rank else ()
    extents = (extents,) if isinstance(extents, int) else tuple(extents)
    if any(extent < 0 for extent in extents):
        raise reader.fail(f"{what} has a negative extent in shape {list(extents)}", at)
    nonzero = 1
    for extent in extents:
        nonzero *= max(extent, 1)
    if nonzero > MAX_ITEMS:  # even an empty array may not claim extents no real one could have
        raise reader.fail(f"{what} has shape {list(extents)}, beyond {MAX_ITEMS:,} items", at)
    return extents
