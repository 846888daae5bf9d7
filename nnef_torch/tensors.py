"""`read_tensor` / `write_tensor`: one .dat file to and from a numpy array."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from nnef_torch.format import container, tensor_file


def read_tensor(source: str | os.PathLike | bytes | bytearray | memoryview) -> np.ndarray:
    """Decode a .dat file (a path, or its bytes); quantized data comes back dequantized (tract's Q4_0 / Q8_1
    blocks as the float32 values tract computes)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return tensor_file.decode(source).array
    file = os.fspath(source)
    return tensor_file.decode(container.read_file(source, check=tensor_file.header_check(file=file)), file=file).array


def write_tensor(path: str | os.PathLike, array: Any, *, quantization: dict[str, Any] | None = None,
                 layout: str = "current", item_type: str | None = None) -> None:
    """Encode `array` (numpy or torch) as a .dat file; see `tensor_file.encode` for quantization and layout.
    item_type: 'q4_0' / 'q8_1' (tract's blocks of 32, quantized min-max as tract does), 'f16' or 'f32'."""
    container.write_file(path, tensor_file.encode(array, quantization=quantization, layout=layout,
                                                  item_type=item_type))
