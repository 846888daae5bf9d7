"""`nnef_torch.save`: write a module as an NNEF model."""
from __future__ import annotations

import os
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFUnsupportedError
from nnef_torch.importer.module import NNEFModule


def save(module: torch.nn.Module, path: str | os.PathLike, example_inputs: Any = None, *,
         quantization: Any = None, compress: bool | None = None, progress: bool | None = None) -> None:
    """Write `module` to `path` (a folder, or a .tgz/.tar.gz/.tar archive), atomically.

    A module made by `nnef_torch.load` writes its own graph with the current values of its variables; any other
    module is traced on `example_inputs` (a tensor, or a tuple or list of tensors) and exported
    (`nnef_torch.export`). DistributedDataParallel, DataParallel and torch.compile wrappers are saved as the module
    inside them, with its own state_dict names as labels. The module itself is not changed. `quantization`
    says how fake quantization is written (see `nnef_torch.export`).
    """
    from nnef_torch.exporter.trace import unwrap
    module = unwrap(module)  # DistributedDataParallel and similar wrappers
    if isinstance(module, NNEFModule):
        if quantization is not None:
            raise NNEFUnsupportedError("quantization= applies when exporting a torch module; an imported module "
                                       "saves the graph.quant it was loaded with")
        module.save(path, compress=compress, progress=progress)
        return
    if example_inputs is None:
        raise ExportError(f"saving a {type(module).__name__} traces it: pass example_inputs=(tensor, ...) with the "
                          "shapes the NNEF graph should have")
    from nnef_torch.exporter.export import export
    export(module, example_inputs, quantization=quantization).save(path, compress=compress, progress=progress)
