"""Torch implementations of the LightNet front end's fragments that nnef_torch keeps whole.

`lightnet_print` and `lightnet_fprint` are submodules with a side effect (`registry.torch_module`): each call writes
its message and the tensor as TensorLight prints it. They are marked impure (`_is_impure`), so that dead-code
elimination keeps them though nothing reads their results, and are silenced by setting their `enabled` attribute
to False (`nnef_torch.formats.lightnet.set_printing(module, False)` does it for every one). Nothing is written
while `torch.export` or TorchScript traces the module. The sorts are `torch.sort`, stable as LightNet's (thrust's
radix sort) is.

The text is TensorLight's (`tl_tensor_print`, `tl_tensor_fprint`), made by `tensor_text`, a pure function from an
array to text. Items are written in C order, each in its dtype's printf format (`%.3f` for floating types, a plain
decimal for integers, 0 or 1 for booleans); items of the innermost dimension are separated by one space. The first
item opens one bracket per dimension. Where an item starts a new block of the last k dimensions, the previous block
is closed with k brackets, a line break follows, then ndim - k spaces of indentation and k opening brackets. The last
item is followed by ndim closing brackets and a line break:

    [[2.000 3.000 4.000]
     [6.000 7.000 8.000]]
"""
from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np
import torch

from nnef_torch.ops.registry import torch_module, torch_op


def tensor_text(array: np.ndarray) -> str:
    """What `tl_tensor_print` writes for `array` (of rank 1 or more, as TensorLight's tensors are)."""
    array = np.asarray(array)
    if array.ndim == 0:
        array = array.reshape(1)
    shape = array.shape
    ndim = len(shape)
    blocks = [math.prod(shape[axis:]) for axis in range(ndim)]  # items in a block of the last ndim - axis dims
    item = _formatter(array.dtype)
    parts = []
    for index, value in enumerate(array.reshape(-1).tolist()):
        if index == 0:
            parts.append("[" * ndim)
        else:
            closed = sum(1 for size in blocks[1:] if index % size == 0)
            parts.append("]" * closed + "\n" + " " * (ndim - closed) + "[" * closed if closed else " ")
        parts.append(item(value))
    parts.append("]" * ndim + "\n")
    return "".join(parts)


def print_text(message: str, array: np.ndarray) -> str:
    """What LightNet's `print` op writes: its message on a line, then the tensor."""
    return f"{message}\n{tensor_text(array)}"


def _formatter(dtype: np.dtype):
    if dtype.kind == "f":
        return _float
    if dtype.kind == "b":
        return lambda value: "1" if value else "0"
    return str


def _float(value: float) -> str:
    """C's `%.3f`: glibc writes a NaN with its sign bit set as -nan."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return f"{value:.3f}"


def _text(message: str, input: torch.Tensor) -> str:
    values = input.detach().cpu()
    if values.dtype in (torch.bfloat16, torch.float16):
        values = values.float()
    return print_text(message, values.numpy())


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_exporting()


class _Printing(torch.nn.Module):
    _is_impure = True  # fx dead-code elimination keeps call_module nodes of impure modules

    def __init__(self, msg: str):
        super().__init__()
        self.msg = str(msg)
        self.enabled = True


@torch_module("lightnet_print")
class TensorPrint(_Printing):
    """LightNet's print: writes `msg`, a line break and the tensor to standard output; returns its input."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.enabled and not _tracing():
            sys.stdout.write(_text(self.msg, input))
            sys.stdout.flush()
        return input

    def extra_repr(self) -> str:
        return f"msg={self.msg!r}, enabled={self.enabled}"


@torch_module("lightnet_fprint")
class TensorFilePrint(_Printing):
    """LightNet's fprint: rewrites the text file `file` (relative to the working directory) with `msg`, a line
    break and the tensor; a file that cannot be opened is warned about and skipped, as LightNet does."""

    def __init__(self, msg: str, file: str):
        super().__init__(msg)
        self.file = str(file)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.enabled and not _tracing():
            text = _text(self.msg, input)
            try:
                inside = os.path.realpath(self.file).startswith(os.path.join(os.path.realpath(os.getcwd()), ""))
                if not inside:  # a link out of the working directory: its shape rule refused every other way out
                    raise OSError(f"{self.file} leads outside the working directory")
                with open(self.file, "w", encoding="utf-8") as handle:
                    handle.write(text)
            except OSError as error:
                warnings.warn(f"fprint: cannot open file {self.file}: {error.strerror or error}; skip printing",
                              RuntimeWarning, stacklevel=2)
        return input

    def extra_repr(self) -> str:
        return f"msg={self.msg!r}, file={self.file!r}, enabled={self.enabled}"


@torch_op('lightnet_sort1d')
def lightnet_sort1d(key: torch.Tensor, positions: torch.Tensor, *, descending: bool) -> torch.Tensor:
    return torch.sort(key, stable=True, descending=bool(descending)).values


@torch_op('lightnet_sort1d_by_key')
def lightnet_sort1d_by_key(key: torch.Tensor, value: torch.Tensor, positions: torch.Tensor, *,
                           descending: bool) -> tuple[torch.Tensor, torch.Tensor]:
    sorted_key, order = torch.sort(key, stable=True, descending=bool(descending))
    return sorted_key, value[order]
