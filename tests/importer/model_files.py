"""Write small NNEF models for importer tests: graph text, .dat files by label, optional graph.quant."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from nnef_torch.format import tensor_file


def write_model(folder: Path, text: str, tensors: Mapping[str, np.ndarray] = {}, quant: str | None = None,
                quantization: Mapping[str, dict] = {}) -> Path:
    """`tensors` maps labels to arrays; `quantization` maps labels to the `encode` quantization of that file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    if quant is not None:
        (folder / "graph.quant").write_text(quant)
    for label, array in tensors.items():
        path = folder / (label + ".dat")
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = quantization.get(label)
        layout = "seed" if spec is not None and "op" in spec else "current"
        path.write_bytes(tensor_file.encode(array, quantization=spec, layout=layout))
    return folder


CODES = np.array([[0, 10, 255], [128, 129, 7]], np.uint8)
CODES_QUANT = ('"w": zero_point_linear_quantize(zero_point = 128, scale = 0.5, bits = 8, signed = false, '
               'symmetric = false);\n')


def write_codes_model(folder: Path) -> Path:
    """y = x * w, with w stored as uint8 codes (CODES) that its graph.quant entry (CODES_QUANT) dequantizes."""
    text = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 3]);
    w = variable<scalar>(shape = [2, 3], label = 'w');
    y = mul(x, w);
}
"""
    return write_model(folder, text, {"w": CODES}, quant=CODES_QUANT, quantization={"w": {"signed": False}})


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
