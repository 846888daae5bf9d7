"""The module `nnef_torch.load` returns: an `fx.GraphModule` that remembers the NNEF model it came from."""
from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from nnef_torch.errors import NNEFError, NNEFOptionError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.importer import inputs as checks
from nnef_torch.importer.build import Slot
from nnef_torch.importer.weights import Storage
from nnef_torch.ir.graph import Graph
from nnef_torch.options import ImportOptions, ReadOptions

INFO_KEY = "nnef"
FORMS = "_nnef_forms"  # the module's attribute holding its forward for other input shapes (`derive.py`), by signature


@dataclass
class ModelInfo:
    """What saving needs beyond the module's tensors: the graph as written, and how each variable was stored."""

    graph: Graph
    document: GraphFile  # the graph.nnef it was read from (a front end's, printed when first asked for)
    quant_text: str | None
    slots: dict[str, Slot]
    storage: dict[str, Storage] = field(default_factory=dict)
    source: str | None = None
    quantizers: dict[str, str] = field(default_factory=dict)  # tensor name -> FakeQuantize submodule path
    options: ReadOptions = ReadOptions()  # how the source opens again (format, params, shapes, batch, ...)
    import_options: ImportOptions = ImportOptions()  # how it was made a module (device, dtype, custom ops, ...)
    inputs: tuple[checks.Declared, ...] = ()  # the graph inputs as calls are checked against them
    signature: checks.Signature | None = None  # the input shapes its own forward was generated for
    # why its input shapes are not known yet (they bind at its first call); `graph` is then the one its Parameters
    # were planned from, and what needs the module's graph (saving, drawing) waits for the first call
    unbound: str | None = None

    @property
    def graph_text(self) -> str:
        return self.document.text

    def check_bound(self, what: str) -> None:
        """Raise for `what` (saving, drawing, ...) on a module whose input shapes bind at its first call."""
        if self.unbound is not None:
            raise NNEFOptionError(f"{what} needs the module's input shapes, which bind at its first call "
                                  f"({self.unbound}): call it once, or load it with input_shapes=")

    def located(self, error: NNEFError) -> NNEFError:
        """`error` with the line of the module's document it points at, where the text is at hand."""
        text = self.document.held_text
        if text is not None and error.location is not None and error.location.file in (None, self.document.file):
            return error.with_source(text, self.document.file)
        return error

    @property
    def deviations(self) -> tuple[str, ...]:
        """The deviations from the spec its document was read with (rules of `nnef_torch.ir.deviations`); a
        module with some saves as standard NNEF (`nnef_torch.writers.normalize`)."""
        return self.graph.deviations


class NNEFModule(fx.GraphModule):
    """An imported NNEF graph. `forward` is generated code (see `.code`) for the input shapes it was loaded with;
    a call with other shapes runs the graph derived for them (`nnef_torch.importer.derive`), on the same Parameters.
    Every call's inputs are checked first (`nnef_torch.importer.inputs`). Parameters and buffers follow the
    variable labels (`conv1/filter` -> `conv1.filter`); `save` writes the model back as NNEF."""

    def __init__(self, root: torch.nn.Module, graph: fx.Graph, class_name: str = "GraphModule"):
        super().__init__(root, graph, class_name)
        # fx copies buffers as persistent ones: the constants the tracer made stay out of the state_dict
        self._non_persistent_buffers_set.update(root._non_persistent_buffers_set & self._buffers.keys())

    def recompile(self) -> Any:
        """fx's recompile, with the generated `forward` called through the check of the inputs (same signature)."""
        code = super().recompile()
        cls = type(self)
        generated = cls.forward

        def forward(self: NNEFModule, *args: Any, **kwargs: Any) -> Any:
            return _checked_call(self, generated, args, kwargs)
        forward.__signature__ = inspect.signature(generated)  # type: ignore[attr-defined]
        forward.__doc__ = generated.__doc__
        cls.forward = forward  # type: ignore[method-assign]
        return code

    @property
    def nnef(self) -> ModelInfo:
        return self.meta[INFO_KEY]

    @property
    def nnef_graph(self) -> Graph:
        """The flat IR graph the module was generated from."""
        self.nnef.check_bound("its graph")
        return self.nnef.graph

    def forms(self) -> dict[checks.Signature, fx.GraphModule]:
        """The forward derived for each other signature it was called with (the last few), by signature."""
        return {key: form for key, form in (self.__dict__.get(FORMS) or {}).items() if form is not None}

    def train(self, mode: bool = True) -> NNEFModule:
        super().train(mode)
        for form in self.forms().values():
            form.train(mode)
        return self

    def _apply(self, fn: Any, recurse: bool = True) -> NNEFModule:
        super()._apply(fn, recurse)
        for form in self.forms().values():  # their own constants follow the module
            form._apply(fn, recurse)
        return self

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
             format: str | None = None, weights: str | None = None, dialect: str | None = None,
             target: str | None = None) -> None:
        """Write the same graph (and graph.quant) with the current values of the variables: one call of
        `nnef_torch.save` (format 'nnef' or 'lightnet', by default 'lightnet' for a .json path, and the writer's
        options)."""
        from nnef_torch.writers import save  # up-edge kept: the writers import this module; found when called
        save(self, path, compress=compress, progress=progress, format=format, weights=weights, dialect=dialect,
             target=target)

    def materialize(self, device: torch.device | str | int | None = None, *,
                    progress: bool | None = None) -> NNEFModule:
        """Fill a module loaded with `device='meta'` from its files, one tensor at a time, straight on `device`."""
        from nnef_torch.importer.load import fill_from_source  # cycle: importer.load imports this module
        fill_from_source(self, device, progress)
        return self

    def __deepcopy__(self, memo: dict) -> NNEFModule:
        forms = self.__dict__.pop(FORMS, None)  # derived again by the copy when it is called
        try:
            result = super().__deepcopy__(memo)  # fx rebuilds the copy with GraphModule.__init__
        finally:
            if forms is not None:
                self.__dict__[FORMS] = forms
        result.meta[INFO_KEY] = copy.copy(self.nnef)
        for memo in ("nnef_graphs", "nnef_sources"):  # of the original's values (relower.py)
            result.meta.pop(memo, None)
        result._non_persistent_buffers_set.update(self._non_persistent_buffers_set & result._buffers.keys())
        return result

    def __reduce__(self) -> tuple[Any, ...]:
        function, (body, *rest) = super().__reduce__()
        return function, ({key: value for key, value in body.items() if key != FORMS}, *rest)


def _checked_call(module: NNEFModule, generated: Any, args: tuple, kwargs: dict) -> Any:
    """Run `generated` (the module's forward) on inputs of the signature it was made for, after checking them;
    inputs of another signature run the forward derived for it."""
    info = module.meta.get(INFO_KEY)
    if info is None or not info.inputs:
        return generated(module, *args, **kwargs)
    values = checks.bind(info.inputs, args, kwargs)
    try:
        key = checks.signature_of(info.inputs, values) if values is not None else None
    except NNEFError as error:
        raise info.located(error) from None
    if key is None and info.unbound is not None and values is not None:
        info.check_bound("tracing it with symbolic shapes")  # its own forward is not generated yet
    if key is None or (key == info.signature and info.unbound is None):
        return generated(module, *args, **kwargs)
    from nnef_torch.importer.derive import derived_call  # cycle: derive builds on this module
    return derived_call(module, generated, key, values, args, kwargs)


def tensor_at(module: torch.nn.Module, path: str) -> torch.Tensor:
    """The Parameter or buffer at `path`; for a tensor under `torch.nn.utils.parametrize` (LoRA adapters, say), its
    current value (what saving writes)."""
    module_path, _, leaf = path.rpartition(".")
    owner = module.get_submodule(module_path) if module_path else module
    if leaf in owner._parameters:
        return owner._parameters[leaf]
    if leaf in owner._buffers:
        return owner._buffers[leaf]
    return getattr(owner, leaf)


def parametrized(module: torch.nn.Module, path: str) -> bool:
    """Whether the tensor at `path` is computed by `torch.nn.utils.parametrize`."""
    module_path, _, leaf = path.rpartition(".")
    owner = module.get_submodule(module_path) if module_path else module
    return leaf not in owner._parameters and leaf not in owner._buffers


def holder(module: torch.nn.Module, path: str) -> tuple[torch.nn.Module, str]:
    """The submodule that holds the tensor at `path` (plain submodules created on the way) and its name there."""
    owner = module
    *parents, leaf = path.split(".")
    for name in parents:
        child = owner._modules.get(name)
        if child is None:
            child = torch.nn.Module()
            owner.add_module(name, child)
        owner = child
    return owner, leaf


def place(module: torch.nn.Module, path: str, tensor: torch.Tensor, trainable: bool) -> None:
    """Set the Parameter (trainable) or persistent buffer at `path`, creating plain submodules on the way."""
    owner, leaf = holder(module, path)
    owner._parameters.pop(leaf, None)
    owner._buffers.pop(leaf, None)
    if trainable:
        owner.register_parameter(leaf, torch.nn.Parameter(tensor, requires_grad=True))
    else:
        owner.register_buffer(leaf, tensor, persistent=True)
