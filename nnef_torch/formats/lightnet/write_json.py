"""LightNet's files as the back end writes them: the JSON IR's text (laid out as LightNet's documentation shows
it, numbers as JSON numbers) and where its .wts file goes. Pure functions over text."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnef_torch.formats.lightnet.wts import write_wts
from nnef_torch.ir.builder import Unmappable


@dataclass
class LightNetModel:
    """A written LightNet model in memory: the JSON IR's ops, the .wts arrays by tensor name (empty with inline
    weights), and the input and output tensor names."""

    ops: list[dict[str, Any]]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def json_text(self) -> str:
        return document_text(self.ops)

    def wts_text(self) -> str:
        return write_wts(self.weights)


def wts_path(path: str | os.PathLike) -> str:
    """The .wts file beside a JSON IR file: the same stem (`model.json` -> `model.wts`)."""
    return os.path.splitext(os.fspath(path))[0] + ".wts"


def numbers(array: np.ndarray, dtype: str) -> list[Any]:
    """The items of `array` as JSON numbers: float32 items in their shortest decimal form that reads back the same
    (LightNet reads them as doubles and converts), integers and logicals as integers."""
    flat = np.asarray(array).ravel()
    if dtype != "TL_FLOAT":
        return [int(item) for item in flat.astype(np.int64).tolist()]
    flat = flat.astype(np.float32)
    if not np.isfinite(flat).all():
        raise Unmappable("a value holds NaN or an infinity, which JSON numbers cannot hold")
    short = [float(text) for text in flat.astype(str).tolist()]
    back = np.asarray(short, dtype=np.float32)
    if not np.array_equal(back, flat):
        exact = flat.astype(np.float64).tolist()
        short = [s if b == f else e for s, b, f, e in zip(short, back.tolist(), flat.tolist(), exact)]
    return short


def document_text(ops: Iterable[Mapping[str, Any]]) -> str:
    """The JSON IR, laid out as LightNet's documentation shows it: one op a block, one tensor or param a line."""
    blocks = []
    for op in ops:
        lines = ["        {", f'            "name": {json.dumps(op["name"])},',
                 f'            "optype": {json.dumps(op["optype"])},']
        for key in ("tensors_in", "tensors_out", "params"):
            items = [json.dumps(item, allow_nan=False) for item in op[key]]
            end = "," if key != "params" else ""
            if not items:
                lines.append(f'            "{key}": []{end}')
            else:
                lines.append(f'            "{key}": [')
                lines.append(",\n".join(f"                {item}" for item in items))
                lines.append(f"            ]{end}")
        lines.append("        }")
        blocks.append("\n".join(lines))
    return '{\n    "ops": [\n' + ",\n".join(blocks) + "\n    ]\n}\n"
