"""The module `nnef_torch.load` returns: an `fx.GraphModule` that remembers the NNEF model it came from."""
from __future__ import annotations

import copy
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from nnef_torch.importer.build import Slot
from nnef_torch.importer.weights import Storage
from nnef_torch.ir.graph import Graph
from nnef_torch.options import ImportOptions, ReadOptions

INFO_KEY = "nnef"


@dataclass
class ModelInfo:
    """What saving needs beyond the module's tensors: the graph as written, and how each variable was stored."""

    graph: Graph
    graph_text: str
    quant_text: str | None
    slots: dict[str, Slot]
    storage: dict[str, Storage] = field(default_factory=dict)
    source: str | None = None
    quantizers: dict[str, str] = field(default_factory=dict)  # tensor name -> FakeQuantize submodule path
    options: ReadOptions = ReadOptions()  # how the source opens again (format, params, shapes, batch, ...)
    import_options: ImportOptions = ImportOptions()  # how it was made a module (device, dtype, custom ops, ...)

    @property
    def deviations(self) -> tuple[str, ...]:
        """The deviations from the spec its document was read with (rules of `nnef_torch.ir.deviations`); a
        module with some saves as standard NNEF (`nnef_torch.writers.normalize`)."""
        return self.graph.deviations


class NNEFModule(fx.GraphModule):
    """An imported NNEF graph. `forward` is generated code (see `.code`); Parameters and buffers follow the
    variable labels (`conv1/filter` -> `conv1.filter`); `save` writes the model back as NNEF."""

    def __init__(self, root: torch.nn.Module, graph: fx.Graph, class_name: str = "GraphModule"):
        super().__init__(root, graph, class_name)
        # fx copies buffers as persistent ones: the constants the tracer made stay out of the state_dict
        self._non_persistent_buffers_set.update(root._non_persistent_buffers_set & self._buffers.keys())

    @property
    def nnef(self) -> ModelInfo:
        return self.meta[INFO_KEY]

    @property
    def nnef_graph(self) -> Graph:
        """The flat IR graph the module was generated from."""
        return self.nnef.graph

    def label_of(self, path: str) -> str:
        """The NNEF variable label of a state_dict key."""
        for slot in self.nnef.slots.values():
            if slot.path == path:
                return slot.label
        raise KeyError(path)

    def quantizers(self) -> dict[str, torch.nn.Module]:
        """The fake quantization of each graph.quant entry, by NNEF tensor name (`FakeQuantize` modules)."""
        return {name: self.get_submodule(path) for name, path in self.nnef.quantizers.items()}

    def set_quantization(self, enabled: bool | None = None, tensors: str | Iterable[str] | None = None, *,
                         learnable: bool | None = None) -> NNEFModule:
        """Switch fake quantization on or off, or make its ranges/scales trainable (LSQ), for the named tensors
        (default: every graph.quant entry). Returns the module."""
        found = self.quantizers()
        names = list(found) if tensors is None else [tensors] if isinstance(tensors, str) else list(tensors)
        unknown = [name for name in names if name not in found]
        if unknown:
            raise KeyError(f"no graph.quant entry for tensor(s) {unknown}; quantized tensors: {sorted(found)}")
        for name in names:
            if enabled is not None:
                found[name].enabled = bool(enabled)
            if learnable is not None:
                found[name].set_learnable(learnable)
        return self

    def save(self, path: str | os.PathLike, *, compress: bool | None = None, progress: bool | None = None,
             format: str | None = None, weights: str | None = None, dialect: str | None = None) -> None:
        """Write the same graph (and graph.quant) with the current values of the variables: one call of
        `nnef_torch.save` (format 'nnef' or 'lightnet', by default 'lightnet' for a .json path, and the writer's
        options)."""
        from nnef_torch.writers import save
        save(self, path, compress=compress, progress=progress, format=format, weights=weights, dialect=dialect)

    def materialize(self, device: torch.device | str | int | None = None, *,
                    progress: bool | None = None) -> NNEFModule:
        """Fill a module loaded with `device='meta'` from its files, one tensor at a time, straight on `device`."""
        from nnef_torch.importer.load import fill_from_source
        fill_from_source(self, device, progress)
        return self

    def __deepcopy__(self, memo: dict) -> NNEFModule:
        result = super().__deepcopy__(memo)  # fx rebuilds the copy with GraphModule.__init__
        result.meta[INFO_KEY] = copy.copy(self.nnef)
        result._non_persistent_buffers_set.update(self._non_persistent_buffers_set & result._buffers.keys())
        return result


def tensor_at(module: torch.nn.Module, path: str) -> torch.Tensor:
    module_path, _, leaf = path.rpartition(".")
    owner = module.get_submodule(module_path) if module_path else module
    if leaf in owner._parameters:
        return owner._parameters[leaf]
    return owner._buffers[leaf]


def place(module: torch.nn.Module, path: str, tensor: torch.Tensor, trainable: bool) -> None:
    """Set the Parameter (trainable) or persistent buffer at `path`, creating plain submodules on the way."""
    owner = module
    *parents, leaf = path.split(".")
    for name in parents:
        child = owner._modules.get(name)
        if child is None:
            child = torch.nn.Module()
            owner.add_module(name, child)
        owner = child
    owner._parameters.pop(leaf, None)
    owner._buffers.pop(leaf, None)
    if trainable:
        owner.register_parameter(leaf, torch.nn.Parameter(tensor, requires_grad=True))
    else:
        owner.register_buffer(leaf, tensor, persistent=True)
