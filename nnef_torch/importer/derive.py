"""Calls of an imported module with input shapes other than those its `forward` was generated for.

NNEF re-declares a graph's externals (spec 2.2): a standard module called with inputs of other shapes runs its
graph lowered again for them (`relower.module_graph` with the call's shapes; a model of another format is converted
again, as MXNet binds a symbol to new shapes). That graph is generated as a `Form`: fx code whose Parameters,
buffers and quantizers are the module's own, looked up on the module at every call, so that training, `.to()`,
`load_state_dict` and `state_dict` see one set of tensors. A module keeps the forms of the last MAX_FORMS
signatures it was called with. Where the graph fixes an extent, lowering it fails at that operation of the document,
and the error names the inputs that differ from their declaration. Read leniently (the default), a call that
changes only the batch axis (axis 0, or `batch_axes=`'s) of a graph that fixes it (a producer's `reshape` to
`[1, 256]`) runs the module's own code, which keeps the batch axis free, with an `NNEFShapeWarning` naming the
operation; `lenient=False` refuses it.

A module loaded before its input shapes were known (tract symbols no option binds, an MXNet symbol without
shapes; `ModelInfo.unbound`) generates its own forward at its first call, for that call's shapes: they become
the shapes it saves and draws with, as MXNet binds a symbol's shapes when it first runs.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx as fx

from nnef_torch.errors import NNEFError, NNEFShapeError, NNEFShapeWarning
from nnef_torch.formats.dialects import dynamic_inputs
from nnef_torch.importer import fuse as fusion
from nnef_torch.importer import inputs as checks
from nnef_torch.importer.build import (
    OP_MODULES,
    QUANTIZERS,
    GraphBuilder,
    Slot,
    check_supported,
    implementations,
    module_state,
    plan_slots,
)
from nnef_torch.importer.load import custom_shape_rules, trainable
from nnef_torch.importer.module import FORMS, ModelInfo, NNEFModule, holder, parametrized, place, tensor_at
from nnef_torch.importer.relower import derived_source, module_graph
from nnef_torch.ir.graph import Graph

MAX_FORMS = 8  # the forwards a module keeps for other signatures (the least recently called goes first)
LEVEL = "import"  # `module_graph`'s level for the graph a forward is generated from


class Form(fx.GraphModule):
    """The forward of an imported module for other input shapes: generated code that holds only the constants and
    operation submodules it made, and reads every other attribute (Parameters, buffers, quantizers) from the
    module when it runs."""

    def __init__(self, module: NNEFModule, root: torch.nn.Module, graph: fx.Graph, shared: set[str]):
        super().__init__(root, graph, "NNEFForm")
        for store in (self._parameters, self._buffers, self._modules):
            for name in [name for name in store if name in shared]:
                del store[name]
        self.__dict__["_nnef_module"] = module  # not a submodule: its tensors stay the module's

    def __getattr__(self, name: str) -> Any:
        held = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            found = held.get(store)
            if found is not None and name in found:
                return found[name]
        module = held.get("_nnef_module")
        if module is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(module, name)


def derived_call(module: NNEFModule, generated: Callable[..., Any], key: checks.Signature, values: Sequence[Any],
                 args: tuple, kwargs: Mapping[str, Any]) -> Any:
    """Run `module` on inputs of signature `key` (other than its forward's, or the first call of a module whose
    shapes were not known): check their extents, then run the forward derived for them. Under torch.compile it
    runs eagerly (deriving a graph is no code to compile; importing the compiler to say so would cost a second)."""
    if torch.compiler.is_compiling():
        return torch.compiler.disable(_derived_call)(module, generated, key, values, args, kwargs)
    return _derived_call(module, generated, key, values, args, kwargs)


def _derived_call(module: NNEFModule, generated: Callable[..., Any], key: checks.Signature, values: Sequence[Any],
                  args: tuple, kwargs: Mapping[str, Any]) -> Any:
    info = module.nnef
    try:
        checks.check_extents(info.inputs, values)
    except NNEFError as error:
        raise info.located(error) from None
    if info.unbound is not None:
        _bind(module, key)
        return module.forward(*args, **kwargs)
    forms = module.__dict__.setdefault(FORMS, OrderedDict())
    if key in forms:
        forms.move_to_end(key)
        form = forms[key]
    else:
        try:
            form = _form(module, key)
        except NNEFError as error:
            if not (info.options.lenient and _batch_only(info, key)):
                raise
            warnings.warn(NNEFShapeWarning(
                f"{error.message}; run leniently with the code generated for the shapes the module was loaded "
                f"with, which keeps the batch axis free (load with lenient=False to refuse)", error.location),
                stacklevel=5)
            form = None
        forms[key] = form
        while len(forms) > MAX_FORMS:
            forms.popitem(last=False)
    if form is None:
        return generated(module, *args, **kwargs)
    return form(*args, **kwargs)


def _batch_only(info: ModelInfo, key: checks.Signature) -> bool:
    """Whether `key` differs from the module's own signature at the batch axes of its inputs only (axis 0, or
    those `batch_axes=` gives): the axis the generated code keeps free where the graph fixes it."""
    if info.signature is None:
        return False
    axes = info.options.axes or {}
    for decl, shape, loaded in zip(info.inputs, key, info.signature):
        if shape is None or loaded is None or shape == loaded:
            continue
        batch = axes.get(decl.name, 0)
        if batch is None or len(shape) != len(loaded):
            return False
        batch %= len(shape)
        if any(a != b for axis, (a, b) in enumerate(zip(shape, loaded)) if axis != batch):
            return False
    return True


def _shapes(info: ModelInfo, key: checks.Signature) -> dict[str, list[int]]:
    return {decl.name: list(shape) for decl, shape in zip(info.inputs, key) if shape is not None}


def _graph(module: NNEFModule, key: checks.Signature) -> Graph:
    """The module's graph lowered for the shapes of `key`, as the module's own was when it was loaded."""
    info = module.nnef
    custom = info.import_options.custom_ops or {}
    find = implementations(custom)
    shapes = _shapes(info, key)
    try:
        graph = module_graph(module, LEVEL, lambda name: find(name) is not None, quant=True, input_shapes=shapes,
                             custom_shapes=custom_shape_rules(custom))
        graph = fusion.fuse(graph, info.import_options.fuse, replaced=set(custom))
        check_supported(graph, find)
    except NNEFError as error:
        error.message = f"{checks.described(info.inputs, key)} does not fit the graph: {error.message}"
        raise
    for decl in info.inputs:  # a format whose files fix an input's shape reads it with that shape
        external = next((e for e in graph.signature.externals if e.name == decl.name), None)
        if external is not None and decl.name in shapes and list(external.shape) != shapes[decl.name]:
            raise info.located(NNEFShapeError(
                f"input '{decl.name}' has shape {shapes[decl.name]}, but the {info.options.format} model fixes its "
                f"shape at {list(external.shape)}", decl.location))
    return graph


def _checked_slots(module: NNEFModule, graph: Graph, slots: Mapping[str, Slot]) -> None:
    """Each variable of `graph` (`slots`, planned from it) is one of the module's, with the same shape."""
    have = module.nnef.slots
    where = {op.outputs["output"].name: op.location for op in graph.operations if op.name == "variable"}
    for key, slot in slots.items():
        old = have.get(key)
        if old is None or tuple(old.shape) != tuple(slot.shape):
            variable = graph.shared_variables()[key][0]
            loaded = "none" if old is None else f"shape {list(old.shape)}"
            raise module.nnef.located(NNEFShapeError(
                f"variable '{slot.label}' has shape {list(slot.shape)} for these input shapes, and the module holds "
                f"{loaded} for it: its shape depends on the input shapes (load the model with input_shapes= for "
                "them)", where.get(variable.name)))


def _form(module: NNEFModule, key: checks.Signature) -> Form:
    info = module.nnef
    graph = _graph(module, key)
    custom = info.import_options.custom_ops or {}
    _checked_slots(module, graph, plan_slots(graph))
    root = torch.nn.Module()  # the module's tensors and quantizers by reference, for the builder to find
    for slot in info.slots.values():
        if parametrized(module, slot.path):
            raise NNEFError(f"the variable at '{slot.path}' is computed by a parametrization (torch.nn.utils."
                            "parametrize); a call at input shapes other than those already called needs plain "
                            "Parameters: merge it first (parametrize.remove_parametrizations(..., "
                            "leave_parametrized=True))")
        _refer(root, slot.path, tensor_at(module, slot.path))
    quantizers = module._modules.get(QUANTIZERS)
    if quantizers is not None:
        root.add_module(QUANTIZERS, quantizers)
    builder = GraphBuilder(graph, root, info.slots, implementations(custom), custom or None,
                           info.import_options.dtype)
    shared = {slot.path.split(".")[0] for slot in info.slots.values()} | {QUANTIZERS}
    form = Form(module, root, builder.build(), shared)
    device, dtype = _placement(module)
    form.to(device=device, dtype=dtype)  # the constants its code made follow the module's tensors (`.to()` since)
    return form.train(module.training)


def _placement(module: NNEFModule) -> tuple[torch.device | None, torch.dtype | None]:
    """Where the module's tensors live and the dtype of its floating ones, as `.to()` left them (None: it has none
    with data)."""
    tensors = [tensor for tensor in (*module.parameters(), *module.buffers()) if not tensor.is_meta]
    items: dict[torch.dtype, int] = {}  # the dtype of most floating items: a stored float64 scalar (a mask's
    for tensor in tensors:              # -inf) beside float32 weights does not decide it
        if tensor.is_floating_point():
            items[tensor.dtype] = items.get(tensor.dtype, 0) + tensor.numel()
    floating = max(items, key=items.__getitem__) if items else None
    return (tensors[0].device if tensors else None), floating


def _refer(root: torch.nn.Module, path: str, tensor: torch.Tensor) -> None:
    """Hold `tensor` itself (a Parameter or a buffer) at `path` of `root`."""
    owner, leaf = holder(root, path)
    if isinstance(tensor, torch.nn.Parameter):
        owner._parameters[leaf] = tensor
    else:
        owner._buffers[leaf] = tensor


def _bind(module: NNEFModule, key: checks.Signature) -> None:
    """Generate the forward of a module loaded before its input shapes were known, for those of `key`: they
    become its own (`ModelInfo.graph`, `options`, `inputs`)."""
    info = module.nnef
    shapes = _shapes(info, key)
    source = derived_source(module, shapes)
    graph = _graph(module, key)
    custom = info.import_options.custom_ops or {}
    slots = plan_slots(graph, source.state | module_state(graph, set(custom)), source.names)
    _checked_slots(module, graph, slots)
    moved = [slot.label for key_, slot in slots.items() if slot.path != info.slots[key_].path]
    if moved:
        raise NNEFError(f"variables {moved} are kept under other names than those the module was loaded with")
    for slot in slots.values():  # a front end's knowledge of what is state may come with the graph
        tensor = tensor_at(module, slot.path)
        if isinstance(tensor, torch.nn.Parameter) != trainable(slot):
            place(module, slot.path, tensor.detach(), trainable(slot))
    for name in list(module._non_persistent_buffers_set):  # the constants of the planned forward
        module._buffers.pop(name, None)
        module._non_persistent_buffers_set.discard(name)
    module._modules.pop(OP_MODULES, None)
    builder = GraphBuilder(graph, module, slots, implementations(custom), custom or None, info.import_options.dtype)
    module.graph = builder.build()  # recompiled: the module's own forward
    module.train(module.training)  # the operation submodules just made follow the module's mode
    device, dtype = _placement(module)  # the constants and quantizers just made follow its tensors
    for name in module._non_persistent_buffers_set:
        constant = module._buffers[name]
        module._buffers[name] = constant.to(device=device, dtype=dtype if constant.is_floating_point() else None)
    for name in (QUANTIZERS, OP_MODULES):
        if name in module._modules:
            module._modules[name].to(device=device, dtype=dtype)
    nnef = info.options.format in (None, "nnef")
    info.graph, info.document, info.slots = graph, source.document, slots
    info.options = info.options.replace(input_shapes={**(info.options.shapes or {}), **shapes}) if nnef \
        else source.options
    info.quantizers.update(builder.quantizers)
    info.inputs, info.signature = checks.declared_inputs(graph, dynamic_inputs(source.document.document) if nnef
                                                         else {}, True)
    info.unbound = None
    for memo in ("nnef_graphs", "nnef_sources"):
        module.meta.pop(memo, None)
    module.__dict__.pop(FORMS, None)


__all__ = ["MAX_FORMS", "Form", "derived_call"]
