"""What writers take, from any module: `Source`.

An imported module (`nnef_torch.load`) is its document as read, its graph re-lowered at the level a writer asks
for (`nnef_torch.importer.relower.module_graph`) and its current weights; any other module is its export trace
(`nnef_torch.export`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFError, NNEFOptionError
from nnef_torch.exporter.trace import unwrap
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.formats.tract_core import is_dialect
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.importer.weights import to_tensor
from nnef_torch.ir.graph import Variable
from nnef_torch.reader import ModelSource, read_document


@dataclass(frozen=True)
class Source:
    """A module as writers see it: `imported` (an NNEFModule, written from its own document) or `model` (the
    export of any other module). `located`: problems are reported at the user's document (an imported module's)."""

    imported: NNEFModule | None = None
    model: Any = None  # nnef_torch.exporter.model.Model
    opened: ModelSource | None = None  # a model on disk, written without making a module (`nnef-torch convert`)
    quantization: Mapping[str, QuantSpec] = field(default_factory=dict)  # an opened model's graph.quant entries

    @property
    def located(self) -> bool:
        return self.imported is not None or self.opened is not None

    def value(self, variable: Variable) -> Any:
        """The current value of `variable` (a tensor)."""
        if self.imported is not None:
            return tensor_at(self.imported, self.imported.nnef.slots[variable.key].path)
        if self.opened is not None:  # quantized codes read through their graph.quant entries
            data = self.opened.read_variable(variable)
            return to_tensor(data, self.quantization.get(variable.name), name=variable.name,
                             file=self.opened.tensor_path(variable.label))[0]
        return self.model.tensors[variable.label]


def opened_source(source: ModelSource) -> Source:
    """The `Source` of a model opened from disk, with its graph.quant entries (NNEF models)."""
    specs: Mapping[str, QuantSpec] = {}
    if source.quant_text is not None and source.files is not None:
        specs = read_document(source.document, quant_text=source.quant_text, quant_file=source.quant_file,
                              input_shapes=source.options.shapes).quantization
    return Source(opened=source, quantization=specs)


def source_of(module: torch.nn.Module, example_inputs: Any = None, *, quantization: Any = None,
              dynamic_batch: bool | int | Sequence[int | None] | None = None, dialect: str | None = None,
              dynamic_shapes: Any = None, target: str | None = None, fold_batch_norm: bool | None = None,
              input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
              ops: Sequence[str] | None = None) -> Source:
    """The `Source` of `module` (DistributedDataParallel and torch.compile wrappers unwrapped)."""
    module = unwrap(module)
    if isinstance(module, NNEFModule):
        if dynamic_shapes is not None:
            raise NNEFOptionError("dynamic_shapes= applies when exporting a torch module; an imported module saves "
                                  "the graph it was loaded from, at the shapes it declares")
        if dynamic_batch is not None:
            raise NNEFOptionError("dynamic_batch= applies when exporting a torch module; an imported module saves "
                                  "the graph text it was loaded from: load it with batch_size= to run another batch "
                                  "size, or export the original torch module with dynamic_batch=")
        if fold_batch_norm:
            raise NNEFOptionError("fold_batch_norm= applies when exporting a torch module; an imported module saves "
                                  "the graph it was loaded from")
        if ops is not None:
            raise NNEFOptionError("ops= applies when exporting a torch module; an imported module saves the graph it "
                                  "was loaded from")
        if input_names is not None or output_names is not None:
            raise NNEFOptionError("input_names= and output_names= apply when exporting a torch module; an imported "
                                  "module saves the graph it was loaded from, with its own names")
        if quantization is not None:
            raise NNEFOptionError("quantization= applies when exporting a torch module; an imported module saves "
                                  "the graph.quant it was loaded with")
        if target == "tract" and module.nnef.options.format == "onnx" and example_inputs is not None \
                and module.nnef.source is not None:  # traced: its dim_params kept as tract symbols
            from nnef_torch.formats.onnx.symbols import symbolic_export  # lazy: the onnx extra is optional
            exported = symbolic_export(module, example_inputs, target)
            if exported is not None:
                return Source(model=exported)
        if not keeps_symbols(module.nnef.graph.extensions, dialect, target):  # else written as read
            module.nnef.check_bound("saving")
        for slot in module.nnef.slots.values():
            if tensor_at(module, slot.path).is_meta:
                raise NNEFError(f"variable '{slot.label}' has no data (the module was loaded on the meta device); "
                                "call .materialize() before saving")
        return Source(imported=module)
    if dialect is not None:
        raise NNEFOptionError(f"dialect={dialect!r} applies when saving, as NNEF, a module read from a document "
                              "of that dialect (nnef_torch.load of a tract_core document)")
    if example_inputs is None:
        raise ExportError(f"saving a {type(module).__name__} traces it: pass example_inputs=(tensor, ...) with the "
                          "shapes the graph should have")
    from nnef_torch.exporter.export import export  # lazy: torch.export and the ATen rules load only to trace
    return Source(model=export(module, example_inputs, quantization=quantization,
                               dynamic_batch=dynamic_batch if dynamic_batch is not None else False,
                               dynamic_shapes=dynamic_shapes, target=target,
                               fold_batch_norm=bool(fold_batch_norm), input_names=input_names,
                               output_names=output_names, ops=ops))


__all__ = ["Source", "opened_source", "source_of"]


def keeps_symbols(extensions: tuple[str, ...], dialect: str | None, target: str | None) -> bool:
    """Whether an imported tract document that declares symbols (`extension tract_symbol S;`) is saved as read, with
    its current weights: asked for in tract's form (standard NNEF holds no symbols: it is written at the shapes of
    the last call)."""
    return (dialect == "tract_core" or target == "tract") and is_dialect(extensions) and "tract_symbol" in extensions
