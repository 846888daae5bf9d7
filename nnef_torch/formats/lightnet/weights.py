"""The data of a LightNet model's `create` ops with `from_file: true`: a `.wts` file (LightNet's own), a `.npz`
archive, or a mapping of tensor name to array (numpy or torch), as `load(params=...)` gives it. By default, the
`.wts` file beside the JSON file with its stem (`model.json` -> `model.wts`), where there is one.

Files keep only the arrays the model reads (`wanted`), counting the others: a `.wts` file is mapped and checked
whole, in chunks, before those arrays are decoded; an `.npz` member's header is checked against the member's size
before it is read."""
from __future__ import annotations

import mmap
import os
import zipfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location, NNEFOptionError
from nnef_torch.formats.json_file import open_regular
from nnef_torch.formats.lightnet.wts import WtsContents, scan_wts
from nnef_torch.ir.limits import check_shape

MAX_WTS_BYTES = 1 << 30  # about 9 bytes a float32: 119M weights (YOLOv3 has 62M), read at about a second a GiB
MAX_NPZ_INFLATION = 20  # an .npz archive's arrays may take this many times the archive's size


@dataclass(frozen=True)
class Weights:
    arrays: dict[str, np.ndarray]
    file: str | None  # where they came from, for messages (None for a mapping)
    origin: Any = None  # how to read them again: the path or mapping given, or the default file found
    wts: bool = False  # read from a .wts file, whose types LightNet checks against the tensors'
    used: set[str] = field(default_factory=set)
    others: int = 0  # arrays of the file no `create` wants (not kept)
    other_names: tuple[str, ...] = ()  # the first of them

    def __contains__(self, name: str) -> bool:
        return name in self.arrays


def load_weights(params: Any, model_file: str, wanted: Collection[str] | None = None) -> Weights:
    """The weights `params` names (see the module docstring); of a file, those `wanted` names (all for None)."""
    if params is None:
        default = os.path.splitext(model_file)[0] + ".wts"
        if not os.path.isfile(default):
            return Weights({}, None)
        params = default
    if isinstance(params, Mapping):
        arrays = {}
        for name, value in params.items():
            if not isinstance(name, str):
                raise NNEFOptionError(f"params keys must be tensor names (strings), found {name!r}")
            arrays[name] = _array(value, f"params['{name}']")
        return Weights(arrays, None, params)
    if not isinstance(params, (str, os.PathLike)):
        raise TypeError(f"params must be a path or a mapping of tensor name to array, not {type(params).__name__}")
    path = os.fspath(params)
    if not os.path.exists(path):
        raise ForeignFormatError("no such weight file", Location(path))
    if os.path.isdir(path):
        raise ForeignFormatError("the weights must be a .wts or .npz file, not a folder", Location(path))
    with open_regular(path, "weight file") as handle:  # a FIFO or a device is refused, not waited on
        try:
            head = handle.read(4)
            size = os.fstat(handle.fileno()).st_size
            if head.startswith(b"PK"):
                contents = _npz(handle, path, size, wanted)
                return Weights(contents.arrays, path, path, others=contents.others,
                               other_names=contents.other_names)
            if size > MAX_WTS_BYTES:
                raise ForeignFormatError(f"weight file of {size:,} bytes is larger than the limit of "
                                         f"{MAX_WTS_BYTES:,}", Location(path))
            if size == 0:
                contents = scan_wts(b"", path, wanted)
            else:
                # not closed here: an error's traceback may still hold views of it; unmapped once unreferenced
                contents = scan_wts(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ), path, wanted)
        except OSError as error:
            raise ForeignFormatError(f"cannot read weight file: {error.strerror or error}", Location(path)) from None
    return Weights(contents.arrays, path, path, wts=True, others=contents.others, other_names=contents.other_names)


def _array(value: Any, what: str) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, read without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise NNEFOptionError(f"{what} is an array of {array.dtype}, not of numbers")
    return array


def _npz(handle: Any, path: str, size: int, wanted: Collection[str] | None) -> WtsContents:
    """The arrays of an .npz archive that `wanted` names; each member's header (shape and type) is checked against
    the member's size, and the total against MAX_NPZ_INFLATION times the archive's, before anything is read."""
    handle.seek(0)
    arrays: dict[str, np.ndarray] = {}
    others: list[str] = []
    other_count = 0
    try:
        with zipfile.ZipFile(handle) as archive:
            members = [info for info in archive.infolist() if info.filename.endswith(".npy")]
            total = sum(info.file_size for info in members)
            if total > MAX_NPZ_INFLATION * max(size, 1 << 20):
                raise ForeignFormatError(f"the arrays of this .npz archive would take {total:,} bytes, more than "
                                         f"{MAX_NPZ_INFLATION} times its size", Location(path))
            for info in members:
                name = info.filename[:-4]
                if wanted is not None and name not in wanted:
                    other_count += 1
                    if len(others) < 10:
                        others.append(name)
                    continue
                with archive.open(info) as member:
                    arrays[name] = _npy(member, info, name, path)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        if isinstance(error, ForeignFormatError):
            raise
        raise ForeignFormatError(f"cannot read .npz weights: {error}", Location(path)) from None
    return WtsContents(arrays, other_count, tuple(others))


def _npy(member: Any, info: zipfile.ZipInfo, name: str, path: str) -> np.ndarray:
    """One .npy member, once its header's shape and type fit the member's size."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ForeignFormatError(f"array '{name}' is of {dtype}, not of numbers", Location(path))
    shape = check_shape(f"array '{name}': shape", shape, Location(path), error=ForeignFormatError)
    count = int(np.prod(shape, dtype=object))
    header = member.tell()
    if count * dtype.itemsize != info.file_size - header:
        raise ForeignFormatError(f"array '{name}' says it holds {count:,} items of {dtype} "
                                 f"({count * dtype.itemsize:,} bytes), its member holds {info.file_size - header:,}",
                                 Location(path))
    data = bytearray(count * dtype.itemsize)
    view, read = memoryview(data), 0
    while read < len(data):
        got = member.readinto(view[read:])
        if not got:
            raise ForeignFormatError(f"array '{name}' is cut short at byte {read:,} of its data", Location(path))
        read += got
    return _array(np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C"), f"array '{name}' of {path}")
