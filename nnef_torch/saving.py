"""`nnef_torch.save`: write a module as an NNEF model."""
from __future__ import annotations

import os
from typing import Any

import torch

from nnef_torch.errors import NNEFUnsupportedError
from nnef_torch.importer.module import NNEFModule


def save(module: torch.nn.Module, path: str | os.PathLike, example_inputs: tuple[Any, ...] | None = None, *,
         quantization: Any = None, compress: bool | None = None, progress: bool | None = None) -> None:
    """Write `module` to `path` (a folder, or a .tgz/.tar.gz/.tar archive), atomically.

    A module made by `nnef_torch.load` writes its own graph with the current values of its variables.
    """
    inner = getattr(module, "module", None)
    if isinstance(inner, NNEFModule):  # DistributedDataParallel and similar wrappers
        module = inner
    if isinstance(module, NNEFModule):
        if quantization is not None:
            raise NNEFUnsupportedError("quantization= applies when exporting a torch module; an imported module "
                                       "saves the graph.quant it was loaded with")
        module.save(path, compress=compress, progress=progress)
        return
    raise NNEFUnsupportedError(f"saving a {type(module).__name__} needs the tracing exporter, which is not part "
                               "of this version yet; only modules made by nnef_torch.load can be saved")
