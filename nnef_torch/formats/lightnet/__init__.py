"""LightNet's JSON IR (`{"ops": [...]}`) with its `.wts` weights, read with no LightNet installed: `ir_json` checks the
container against the optype table of `optypes`, `wts` reads and writes the weight files, `weights` binds
`params=`, `convert` walks the ops with the import rules of `rules/` (LightNet optype names).

`set_printing(module, enabled)` switches the `print` and `fprint` ops of an imported module on or off.
"""
from __future__ import annotations

from typing import Any

from nnef_torch.formats.lightnet import rules  # noqa: F401  (registers the import rules in the op table)
from nnef_torch.formats.lightnet.convert import read as read_ir

FORMAT = "lightnet"
OPTIONS = ("params", "input_shapes", "inputs", "outputs")  # what `nnef_torch.load` passes on to `read`


def read(path: Any, **options: Any) -> Any:
    """Read a LightNet JSON IR file and its weights (see `formats.convert` and `convert.read`)."""
    return read_ir(path, **options)


def set_printing(module: Any, enabled: bool) -> int:
    """Switch every `print` / `fprint` op of an imported module on or off; the number of ops switched."""
    from nnef_torch.ops.torch_lightnet import TensorFilePrint, TensorPrint  # lazy: keeps torch out of reading

    count = 0
    for submodule in module.modules():
        if isinstance(submodule, (TensorPrint, TensorFilePrint)):
            submodule.enabled = bool(enabled)
            count += 1
    return count


__all__ = ["FORMAT", "OPTIONS", "read", "set_printing"]
