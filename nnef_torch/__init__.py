"""nnef_torch: a PyTorch-native, trainable bridge for the Khronos NNEF format."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnef_torch.errors import (
    ExportError,
    ForeignFormatError,
    Location,
    NNEFContainerError,
    NNEFDeviationWarning,
    NNEFError,
    NNEFOptionError,
    NNEFQuantizationError,
    NNEFSemanticError,
    NNEFShapeError,
    NNEFSyntaxError,
    NNEFTensorFileError,
    NNEFTypeError,
    NNEFUnsupportedError,
)
from nnef_torch.gc_pause import paused as _paused
from nnef_torch.reader import read_graph, read_model
from nnef_torch.tensors import read_tensor, write_tensor

if TYPE_CHECKING:  # what `__getattr__` imports on first use, visible to type checkers
    from nnef_torch.exporter.export import export
    from nnef_torch.exporter.model import Model
    from nnef_torch.importer.load import load
    from nnef_torch.importer.module import NNEFModule
    from nnef_torch.writers import save

__all__ = ["ExportError", "ForeignFormatError", "Location", "Model", "NNEFContainerError", "NNEFDeviationWarning",
           "NNEFError", "NNEFModule", "NNEFOptionError", "NNEFQuantizationError", "NNEFSemanticError", "NNEFShapeError",
           "NNEFSyntaxError", "NNEFTensorFileError", "NNEFTypeError", "NNEFUnsupportedError", "export", "load",
           "read_graph", "read_model", "read_tensor", "save", "write_tensor"]

__version__ = "0.1.0"

_TORCH_API = {"load": "nnef_torch.importer.load", "save": "nnef_torch.writers",
              "NNEFModule": "nnef_torch.importer.module", "export": "nnef_torch.exporter.export",
              "Model": "nnef_torch.exporter.model"}


_SUBPACKAGES = ("viz", "graph_def", "llm")


def __getattr__(name: str) -> Any:
    """The torch side (`load`, `save`, `NNEFModule`), `viz`, `graph_def` and `llm` are imported on first use: reading
    files needs no torch."""
    import importlib

    if name in _SUBPACKAGES:
        with _paused():  # importing registers hundreds of ops: no full collection of torch's heap meanwhile
            return importlib.import_module(f"nnef_torch.{name}")
    if name in _TORCH_API:
        with _paused():
            value = getattr(importlib.import_module(_TORCH_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nnef_torch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_TORCH_API) + list(_SUBPACKAGES))
