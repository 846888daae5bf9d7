"""`nnef_torch.save`: write a module as an NNEF model, or as a LightNet model (JSON IR and .wts)."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFError, NNEFOptionError, NNEFUnsupportedError
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.ir.graph import Graph, Variable

FORMATS = ("nnef", "lightnet")


def save(module: torch.nn.Module, path: str | os.PathLike, example_inputs: Any = None, *,
         quantization: Any = None, compress: bool | None = None, progress: bool | None = None,
         format: str | None = None, weights: str | None = None, dialect: str | None = None,
         dynamic_batch: bool | int | Sequence[int | None] = False) -> None:
    """Write `module` to `path`, atomically.

    format: 'nnef' (a folder, or a .tgz/.tar.gz/.tar archive) or 'lightnet' (LightNet's JSON IR, with its weights
    in a .wts file of the same stem beside it: `model.json` and `model.wts`); by default 'lightnet' for a path
    ending in .json, else 'nnef'. weights (LightNet only): 'file' (the default, a .wts file) or 'inline' (the
    values written into the `create` ops of the JSON file, no .wts file).

    A module made by `nnef_torch.load` writes its own graph with the current values of its variables; any other
    module is traced on `example_inputs` (a tensor, or a tuple or list of tensors) and exported
    (`nnef_torch.export`). DistributedDataParallel, DataParallel and torch.compile wrappers are saved as the module
    inside them, with its own state_dict names as labels. The module itself is not changed. `quantization`
    says how fake quantization is written (see `nnef_torch.export`); LightNet has no quantization, so a LightNet
    model is the float graph (an imported module's graph.quant entries are not written). An operation without a
    LightNet form (or without an NNEF one) stops the save: `ExportError` lists every such operation.

    dynamic_batch (NNEF, traced modules): write the graph with a variable batch size, declared only by its
    `external`s (see `nnef_torch.export`); such a model loads at any batch size with `nnef_torch.load(path,
    batch_size=N)`.

    dialect (NNEF, imported modules): 'tract_core' writes a module read from a tract_core document in tract's
    form; by default such a module is written as standard NNEF (README, "Dialects read").
    """
    from nnef_torch.exporter.trace import unwrap
    format = save_format(path, format)
    module = unwrap(module)  # DistributedDataParallel and similar wrappers
    dynamic = dynamic_batch is not False and dynamic_batch is not None
    if dynamic and format == "lightnet":
        raise NNEFOptionError("dynamic_batch= applies to NNEF models; a LightNet model has the static shapes it is "
                              "traced with")
    if dynamic and isinstance(module, NNEFModule):
        raise NNEFOptionError("dynamic_batch= applies when exporting a torch module; an imported module saves the "
                              "graph text it was loaded from: load it with batch_size= to run another batch size, "
                              "or export the original torch module with dynamic_batch=")
    if dialect is not None and (format != "nnef" or not isinstance(module, NNEFModule)):
        raise NNEFOptionError(f"dialect={dialect!r} applies when saving, as NNEF, a module read from a document "
                              "of that dialect (nnef_torch.load of a tract_core document)")
    if format == "lightnet":
        if compress is not None:
            raise ValueError("compress= applies to NNEF archives; a LightNet model is a JSON file and a .wts file")
        if quantization is not None:
            raise NNEFUnsupportedError("quantization= applies to NNEF (graph.quant); LightNet has no quantization")
        graph, values = lightnet_source(module, example_inputs)
        from nnef_torch.frontends.lightnet.write import save_lightnet
        # an imported module's problems are located in its graph text; an exported one's text is ours, not the user's
        save_lightnet(path, graph, values, weights=weights or "file", located=isinstance(module, NNEFModule))
        return
    if weights is not None:
        raise ValueError("weights= applies to LightNet models (format='lightnet'); NNEF keeps one .dat per variable")
    if isinstance(module, NNEFModule):
        if quantization is not None:
            raise NNEFUnsupportedError("quantization= applies when exporting a torch module; an imported module "
                                       "saves the graph.quant it was loaded with")
        module.save(path, compress=compress, progress=progress, dialect=dialect)
        return
    _need_inputs(module, example_inputs)
    from nnef_torch.exporter.export import export
    model = export(module, example_inputs, quantization=quantization, dynamic_batch=dynamic_batch)
    model.save(path, compress=compress, progress=progress)


def save_format(path: str | os.PathLike, format: str | None) -> str:
    """The back end `save` writes with: `format`, or by default 'lightnet' for a .json path, else 'nnef'."""
    if format is None:
        return "lightnet" if os.fspath(path).lower().endswith(".json") else "nnef"
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {FORMATS}")
    return format


def lightnet_source(module: torch.nn.Module, example_inputs: Any) -> tuple[Graph, Callable[[Variable], Any]]:
    """The IR graph LightNet writes for `module` and where its variables' values come from: an imported module's
    graph with its current values, or the export of any other module traced on `example_inputs`."""
    from nnef_torch.frontends.lightnet.write import lightnet_graph
    if isinstance(module, NNEFModule):
        from nnef_torch.reader import member_path
        info = module.nnef
        nnef = info.options.get("format", "nnef") == "nnef"
        file = (member_path(info.source, "graph.nnef") if nnef else f"{info.source} (as NNEF)") if info.source \
            else "graph.nnef"
        shapes = info.options.get("input_shapes") if nnef else None
        graph = lightnet_graph(info.graph_text, file=file, input_shapes=shapes or None)
        for slot in info.slots.values():
            if tensor_at(module, slot.path).is_meta:
                raise NNEFError(f"variable '{slot.label}' has no data (the module was loaded on the meta device); "
                                "call .materialize() before saving")
        slots = info.slots
        return graph, lambda variable: tensor_at(module, slots[variable.key].path)
    _need_inputs(module, example_inputs)
    from nnef_torch.exporter.export import export
    model = export(module, example_inputs)
    graph = lightnet_graph(model.text)
    return graph, lambda variable: model.tensors[variable.label]


def _need_inputs(module: torch.nn.Module, example_inputs: Any) -> None:
    if example_inputs is None:
        raise ExportError(f"saving a {type(module).__name__} traces it: pass example_inputs=(tensor, ...) with the "
                          "shapes the graph should have")
