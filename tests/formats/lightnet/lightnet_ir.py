"""LightNet JSON IR documents for the import tests, written by hand from the documentation (the seed) and the op
definitions (`protos/op/*.op`), independently of nnef_torch: ops, `create`s, and the two layouts seen in the wild:
the documentation's hand layout (4-space indent, each tensor and param on one line) and `tools/il2json`'s (Perl
JSON::PP `pretty->canonical`: 3-space indent, sorted keys, ` : ` between key and value)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# params of `create` in the documentation's order
CREATE_ORDER = ("dtype", "dims", "data", "ran", "from_file")


def op(optype: str, name: str, ins: dict[str, str] | None = None, outs: dict[str, str] | None = None,
       **params: Any) -> dict[str, Any]:
    return {"name": name, "optype": optype,
            "tensors_in": [{"arg_name": arg, "name": tensor} for arg, tensor in (ins or {}).items()],
            "tensors_out": [{"arg_name": arg, "name": tensor} for arg, tensor in (outs or {}).items()],
            "params": [{"arg_name": key, "value": value} for key, value in params.items()]}


def create(tensor: str, dims: list[int], data: Any = None, *, dtype: str = "TL_FLOAT", from_file: bool = False,
           ran: tuple[float, float] = (0, 0), name: str | None = None) -> dict[str, Any]:
    """A `create` op of `tensor`; `data` an array (flattened), a list, or None for `[0]` (zeros)."""
    if data is None:
        values: list[Any] = [0]
    else:
        values = np.asarray(data).reshape(-1).tolist()
    return op("create", name or f"create_{tensor}", {}, {"dst": tensor}, dtype=dtype, dims=list(dims), data=values,
              ran=list(ran), from_file=from_file)


def document(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"ops": list(ops)}


def hand_layout(doc: dict[str, Any]) -> str:
    """The documentation's layout (as its example and LightNet's test data are written)."""
    lines = ["{", '    "ops": [']
    for index, item in enumerate(doc["ops"]):
        lines.append("        {")
        lines.append(f'            "name": {json.dumps(item["name"])},')
        lines.append(f'            "optype": {json.dumps(item["optype"])},')
        for key in ("tensors_in", "tensors_out", "params"):
            lines.append(f'            "{key}": [')
            entries = [json.dumps(entry, separators=(", ", ": ")) for entry in item[key]]
            lines.extend(f"                {entry}{',' if i < len(entries) - 1 else ''}"
                         for i, entry in enumerate(entries))
            lines.append("            ]" + ("," if key != "params" else ""))
        lines.append("        }" + ("," if index < len(doc["ops"]) - 1 else ""))
    lines += ["    ]", "}"]
    return "\n".join(lines) + "\n"


def il2json_layout(doc: dict[str, Any]) -> str:
    """tools/il2json's layout: JSON::PP with pretty (3-space indent, ` : `) and canonical (sorted keys)."""
    return json.dumps(doc, indent=3, sort_keys=True, separators=(",", " : ")) + "\n"


def write(folder: Path, doc: dict[str, Any], *, layout: str = "hand", name: str = "model.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(hand_layout(doc) if layout == "hand" else il2json_layout(doc))
    return path
