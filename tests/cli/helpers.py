"""Shared by the command-line tests: run `main` and collect its exit status and streams, small model folders."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nnef_torch.cli import main
from nnef_torch.format import tensor_file


def cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `nnef-torch argv...`, argparse's own exits included."""
    try:
        status = main([str(arg) for arg in argv])
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


WEIGHT_CODES = np.array([[0, 1, 2], [128, 254, 255]], np.uint8)


def quantized_weight_model(folder: Path) -> Path:
    """y = x + w with w stored as 8-bit current-layout codes read through linear_quantize(-1, 1, 8)."""
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [2, 3]);\n"
        "    w = variable<scalar>(shape = [2, 3], label = 'w');\n    y = add(x, w);\n}\n")
    (folder / "graph.quant").write_text('"w": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n')
    (folder / "w.dat").write_bytes(tensor_file.encode(WEIGHT_CODES, quantization={"signed": False}))
    return folder


def logarithmic_weight_model(folder: Path) -> Path:
    """y = x * w with w in the seed layout's signed 4-bit logarithmic codes (no current-layout form)."""
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [3]);\n"
        "    w = variable<scalar>(shape = [3], label = 'w');\n    y = mul(x, w);\n}\n")
    values = np.array([0.5, -2.0, 4.0], np.float32)
    quantization = {"op": "logarithmic_quantize", "max": 4.0, "bits": 4, "signed": True}
    (folder / "w.dat").write_bytes(tensor_file.encode(values, quantization=quantization, layout="seed"))
    return folder
