"""The data of a LightNet model's `create` ops with `from_file: true`: a `.wts` file (LightNet's own), a `.npz`
archive, or a mapping of tensor name to array (numpy or torch), as `load(params=...)` gives it. By default, the
`.wts` file beside the JSON file with its stem (`model.json` -> `model.wts`), where there is one."""
from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.frontends.lightnet.wts import read_wts

MAX_WTS_BYTES = 1 << 34  # a text weight file is about 9 bytes per float


@dataclass(frozen=True)
class Weights:
    arrays: dict[str, np.ndarray]
    file: str | None  # where they came from, for messages (None for a mapping)
    origin: Any = None  # how to read them again: the path or mapping given, or the default file found
    wts: bool = False  # read from a .wts file, whose types LightNet checks against the tensors'
    used: set[str] = field(default_factory=set)

    def __contains__(self, name: str) -> bool:
        return name in self.arrays


def load_weights(params: Any, model_file: str) -> Weights:
    """The weights `params` names (see the module docstring)."""
    if params is None:
        default = os.path.splitext(model_file)[0] + ".wts"
        if not os.path.isfile(default):
            return Weights({}, None)
        params = default
    if isinstance(params, Mapping):
        arrays = {}
        for name, value in params.items():
            if not isinstance(name, str):
                raise ValueError(f"params keys must be tensor names (strings), found {name!r}")
            arrays[name] = _array(value, name)
        return Weights(arrays, None, params)
    if not isinstance(params, (str, os.PathLike)):
        raise TypeError(f"params must be a path or a mapping of tensor name to array, not {type(params).__name__}")
    path = os.fspath(params)
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if head.startswith(b"PK"):
                return Weights(_npz(path), path, path)
            if size > MAX_WTS_BYTES:
                raise ForeignFormatError(f"weight file of {size:,} bytes is larger than the limit of "
                                         f"{MAX_WTS_BYTES:,}", Location(path))
            handle.seek(0)
            data = handle.read()
    except FileNotFoundError:
        raise ForeignFormatError("no such weight file", Location(path)) from None
    except IsADirectoryError:
        raise ForeignFormatError("the weights must be a .wts or .npz file, not a folder", Location(path)) from None
    except OSError as error:
        raise ForeignFormatError(f"cannot read weight file: {error.strerror or error}", Location(path)) from None
    return Weights(read_wts(data, path), path, path, wts=True)


def _array(value: Any, name: str) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, read without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"params['{name}'] is an array of {array.dtype}, not of numbers")
    return array


def _npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: _array(archive[name], name) for name in archive.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as error:
        raise ForeignFormatError(f"cannot read .npz weights: {error}", Location(path)) from None
