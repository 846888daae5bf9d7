"""`nnef_torch.load`: model files -> IR graph -> Parameters and buffers -> generated `NNEFModule`."""
from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

from nnef_torch.errors import NNEFError, NNEFShapeError
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.formats.dialects import UnboundDimensionError, dynamic_inputs
from nnef_torch.gc_pause import gc_paused
from nnef_torch.importer import fuse as fusion
from nnef_torch.importer.build import (
    QUANTIZERS,
    GraphBuilder,
    Slot,
    check_supported,
    implementations,
    module_state,
    plan_slots,
    unbound_graph,
)
from nnef_torch.importer.inputs import declared_inputs
from nnef_torch.importer.module import INFO_KEY, ModelInfo, NNEFModule, place, tensor_at
from nnef_torch.importer.weights import Storage, declared_dtype, to_tensor
from nnef_torch.ir.graph import Graph
from nnef_torch.ops import registry
from nnef_torch.options import ImportOptions, ReadOptions
from nnef_torch.reader import ModelSource, check_batch_format, constant_reader, open_source, read_document

registry.require("shape", "torch")  # the importer generates code from the table's shape rules and torch kernels
PROGRESS_BYTES = 64 << 20  # show a progress bar on a terminal from this many bytes of variables
PROBES = (1, 2, 4, 8, 16)  # values a dynamic dimension takes to plan the Parameters of a module loaded without it


@gc_paused
def load(path: str | os.PathLike, *, params: Any = None, format: str | None = None,
         device: torch.device | str | int | None = None, dtype: torch.dtype | None = None,
         input_shapes: Mapping[str, Any] | None = None,
         custom_ops: Mapping[str, Callable[..., Any]] | None = None, progress: bool | None = None,
         inputs: Sequence[str] | None = None, outputs: Sequence[str] | None = None, batch_size: int | None = None,
         batch_axes: Mapping[str, int | None] | None = None, fuse: bool | Collection[str] = True,
         lenient: bool = True) -> NNEFModule:
    """Import a model as a torch module: an NNEF model (a folder, a graph.nnef file, or a .tar/.tgz/.tar.gz
    archive), or a model of another format that a front end reads (NNVM graph JSON, an MXNet `-symbol.json`,
    LightNet's JSON IR, an ONNX file with the `onnx` extra).

    params: the parameters of a model of another format: a path (MXNet `.params`, LightNet `.wts`, `.npz`) or a
    mapping of name to array or tensor; by default the `prefix-NNNN.params` beside `prefix-symbol.json`, the
    `model.wts` beside a LightNet `model.json`. format: 'nnef', 'nnvm', 'lightnet', 'onnx' (detected from the content by
    default). inputs, outputs: a LightNet model's tensors that the caller fills (created tensors, which become the
    positional inputs in this order) and that the module returns (by default the tensors no op reads).
    device: where Parameters and buffers live; 'meta' reads no tensor data (fill it later with `.materialize`).
    dtype: the floating dtype of variables and of scalar inputs (default: as stored, float32 for inputs).
    input_shapes: new shapes for graph inputs, by name (spec 2.2). batch_size: the batch size of every other input
    of an NNEF model: its axis 0, or the axis `batch_axes` gives by input name (None: no batch axis); for a model
    exported with a variable batch (`nnef_torch.export(..., dynamic_batch=True)`). custom_ops: torch implementations of
    operations by name, called with the NNEF signature; they replace fragments defined in the document too.
    progress: show a tqdm bar while reading tensors (default: on a terminal, for large models). fuse: replace chains
    of operations by one faster operation computing the same: all passes of `nnef_torch.importer.fuse.PASSES`
    (layer norm, GELU), or those named. lenient: read the deviations from the spec that real producers write
    (docs/tract_core.md, "Deviations read"), each with an `NNEFDeviationWarning`; False: each is an `NNEFError`.

    The module is returned in eval mode, ready for inference; `.train()` switches the operations that follow the
    training mode (batch statistics and dropout of imported MXNet models) to their training behaviour.

    Its `forward` is generated for the input shapes it is loaded with; a call with other shapes runs the graph
    derived for them (NNEF re-declares a graph's inputs), on the same Parameters (`importer/derive.py`), and every
    call's inputs are checked against their declaration first (`importer/inputs.py`). A model that does not say its
    input shapes (tract symbols that input_shapes= and batch_size= leave unbound, an MXNet symbol without shapes,
    ONNX inputs with a dim_param)
    loads with its Parameters and binds its shapes at its first call.
    """
    read = ReadOptions.of(format=format, params=params, input_shapes=input_shapes, inputs=inputs, outputs=outputs,
                          batch_size=batch_size, batch_axes=batch_axes, lenient=lenient)
    options = ImportOptions.of(device=device, dtype=dtype, custom_ops=custom_ops, fuse=fuse, progress=progress)
    with open_source(path, read, shapes_at_call=True, progress=progress) as files:
        return load_source(files, options)


@gc_paused
def load_source(files: ModelSource, options: ImportOptions | None = None, **keywords: Any) -> NNEFModule:
    """The module of an opened model source (a file's, or one made in memory, as graph_def's networks are), read
    with the source's `ReadOptions` and imported with `options` (or `ImportOptions.of(**keywords)`)."""
    options = ImportOptions.of(**keywords) if options is None else options
    read = files.options
    check_batch_format(files.format, read.batch_size, read.axes)
    custom_ops = options.custom_ops or {}
    find = implementations(custom_ops)
    device, dtype = options.device, options.dtype
    nnef = files.format == "nnef"

    def lowered(shapes: Mapping[str, Any] | None) -> Graph:
        return read_document(files.document, quant_text=files.quant_text, quant_file=files.quant_file,
                             atomic=lambda name: find(name) is not None, custom_shapes=custom_shape_rules(custom_ops),
                             input_shapes=shapes if nnef else None, batch_size=read.batch_size,
                             batch_axes=read.axes, lenient=read.lenient, constants=constant_reader(files))
    unbound = files.unbound
    if files.graph is not None and unbound is not None:  # a symbol without input shapes: its variables only
        graph = files.graph
    else:
        try:
            graph = lowered(read.shapes)
        except UnboundDimensionError as error:
            graph, unbound = _planned(files, read, error, lowered)
    graph = fusion.fuse(graph, options.fuse, replaced=set(custom_ops))
    check_supported(graph, find)
    slots = plan_slots(graph, files.state | module_state(graph, set(custom_ops)), files.names)
    root = torch.nn.Module()  # meta placeholders: the graph is generated while the data is being read
    for slot in slots.values():
        _check_size(graph, slot, declared_dtype(slot.nnef_type, dtype))
        empty = torch.empty(slot.shape, dtype=declared_dtype(slot.nnef_type, dtype), device="meta")
        place(root, slot.path, empty, trainable(slot))
    storage: dict[str, Storage] = {}
    with _Reader(files, graph, slots, device, dtype, options.progress) as reader:
        builder = GraphBuilder(graph, root, slots, find, custom_ops or None, dtype)
        fx_graph = builder.build() if unbound is None else unbound_graph(graph, unbound)
        module = NNEFModule(root, fx_graph, class_name=_class_name(graph.name))
        for slot in slots.values():  # variables no operation reads are still part of the model
            if not _has(module, slot.path):
                place(module, slot.path, tensor_at(root, slot.path), trainable(slot))
        for slot, tensor, stored in reader.results():
            place(module, slot.path, tensor, trainable(slot))
            storage[slot.key] = stored
        _keep_unread_quantizers(module, root, builder.quantizers.values())
    if builder.quantizers and device is not None and device.type != "meta":
        module.get_submodule(QUANTIZERS).to(device)
    module.eval()
    declared, signature = declared_inputs(graph, dynamic_inputs(files.document.document) if nnef else {},
                                          unbound is None)
    module.meta[INFO_KEY] = ModelInfo(graph, files.document, files.quant_text, slots, storage,
                                      os.fspath(files.source), builder.quantizers, read, options, declared, signature,
                                      unbound)
    return module


def _planned(files: ModelSource, read: ReadOptions, error: UnboundDimensionError,
             lowered: Callable[[Mapping[str, Any] | None], Graph]) -> tuple[Graph, str]:
    """The graph of a document whose dynamic dimensions no option binds, lowered with each at one of PROBES to plan
    the module's Parameters (they bind at its first call), and why it is unbound; raises `error` where the graph
    lowers at none of them."""
    declared = dynamic_inputs(files.document.document)
    problem = None
    for value in PROBES:
        shapes = {name: [value if isinstance(extent, str) else extent for extent in extents]
                  for name, extents in declared.items() if any(isinstance(extent, str) for extent in extents)
                  and None not in extents}
        try:
            graph = lowered({**shapes, **(read.shapes or {})})
        except NNEFError as failed:
            problem = failed
            continue
        return graph, f"no option binds the dynamic dimension(s) {', '.join(error.symbols)}"
    error.message += (f" (loaded without them, a module binds them at its first call, but this graph does not lower "
                      f"with them at any of {list(PROBES)}: {problem.message if problem else ''})")
    raise error


def _check_size(graph: Graph, slot: Slot, dtype: torch.dtype) -> None:
    """A variable's bytes fit a torch tensor (its volume fits 64 bits, its size in bytes may not)."""
    volume = 1
    for extent in slot.shape:
        volume *= extent
    if volume * dtype.itemsize > MAX_INTEGER:
        variable = graph.shared_variables()[slot.key][0]
        declared = next((op.location for op in graph.operations if op.name == "variable"
                         and op.outputs["output"].name == variable.name), None)
        raise NNEFShapeError(f"variable '{variable.name}' of shape {list(slot.shape)} holds {volume:,} items, more "
                             f"bytes than a tensor can have (2^63 - 1)", declared)


def _keep_unread_quantizers(module: NNEFModule, root: torch.nn.Module, paths: Iterable[str]) -> None:
    """The FakeQuantize of a graph.quant entry whose tensor no operation reads (fx copies only the submodules its
    graph calls): still part of the model, saved back with its entry."""
    for path in paths:
        holder_name, _, key = path.rpartition(".")
        holder = module._modules.get(holder_name)
        if holder is None:
            holder = torch.nn.Module()
            module.add_module(holder_name, holder)
        if key not in holder._modules:
            holder.add_module(key, root.get_submodule(path))


def fill_from_source(module: NNEFModule, device: torch.device | str | int | None,
                     progress: bool | None) -> None:
    """Read every variable of `module` from the files it was loaded from, onto `device`."""
    info = module.nnef
    device = torch.device(device) if device is not None else torch.device("cpu")
    with open_source(info.source, info.options, shapes_at_call=True) as files:
        for slot, tensor, stored in _read_tensors(files, info.graph, info.slots, device, None, progress):
            current = tensor_at(module, slot.path)
            value = tensor.to(current.dtype) if current.dtype.is_floating_point else tensor
            place(module, slot.path, value, isinstance(current, torch.nn.Parameter))
            info.storage[slot.key] = stored
    for name, buffer in list(module.named_buffers()):  # constants made while tracing
        if buffer.is_meta:
            raise NNEFError(f"buffer '{name}' has no data source; load the model on a real device instead")


def _read_tensors(files: ModelSource, graph: Graph, slots: Mapping[str, Slot],
                  device: torch.device | None, dtype: torch.dtype | None,
                  progress: bool | None) -> Iterator[tuple[Slot, torch.Tensor, Storage]]:
    """Decode each variable's file in turn and move it to its device, so host memory holds one file at a time."""
    groups = graph.shared_variables()
    sizes = {key: _nbytes(slot) for key, slot in slots.items()}
    bar = _progress_bar(sum(sizes.values()), progress)
    try:
        for key, slot in slots.items():
            variable = groups[key][0]
            data = files.read_variable(variable)
            tensor, stored = to_tensor(data, graph.quantization.get(variable.name), name=variable.name,
                                       file=files.tensor_path(variable.label))
            del data
            if dtype is not None and tensor.is_floating_point():
                tensor = tensor.to(dtype)
            elif tensor.dtype == torch.float16:  # stored small, computed in float32 as tract does (saved as stored)
                tensor = tensor.float()
            if device is not None:
                tensor = tensor.to(device)
            yield slot, tensor, stored
            if bar is not None:
                bar.update(sizes[key])
    finally:
        if bar is not None:
            bar.close()


def _progress_bar(total: int, progress: bool | None):
    show = progress if progress is not None else (total >= PROGRESS_BYTES and sys.stderr.isatty())
    if not show:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, desc="loading NNEF tensors")


def _nbytes(slot: Slot) -> int:
    count = 1
    for extent in slot.shape:
        count *= extent
    return count * 4


def trainable(slot: Slot) -> bool:
    """A variable's tensor is a Parameter (else a buffer)."""
    return not slot.state and slot.nnef_type == "scalar"


class _Reader:
    """Reads the variables' data on a worker thread (file reads release the GIL) while the caller generates code.

    On leaving the block early (an error while generating), the worker is told to stop and is waited for, so the
    container is never closed under it.
    """

    def __init__(self, files: ModelSource, graph: Graph, slots: Mapping[str, Slot],
                 device: torch.device | None, dtype: torch.dtype | None, progress: bool | None):
        self.skip = device is not None and device.type == "meta"
        self.stop = threading.Event()
        self.items: list[tuple[Slot, torch.Tensor, Storage]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(files, graph, slots, device, dtype, progress),
                                       name="nnef-tensor-reader", daemon=True)

    def _run(self, *args: Any) -> None:
        try:
            for item in _read_tensors(*args):
                if self.stop.is_set():
                    return
                self.items.append(item)
        except BaseException as error:  # noqa: BLE001 - handed to the caller by results()
            self.error = error

    def __enter__(self) -> _Reader:
        if not self.skip:
            self.thread.start()
        return self

    def results(self) -> list[tuple[Slot, torch.Tensor, Storage]]:
        if self.skip:
            return []
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.items

    def __exit__(self, *exc: object) -> None:
        if not self.skip:
            self.stop.set()
            self.thread.join()


def _has(module: torch.nn.Module, path: str) -> bool:
    try:
        tensor_at(module, path)
        return True
    except (AttributeError, KeyError):
        return False


def _class_name(name: str) -> str:
    return name if name.isidentifier() else "NNEFGraph"


def custom_shape_rules(custom_ops: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The shape rule of each custom op: its implementation run on meta tensors."""
    return {name: _meta_shape_rule(fn) for name, fn in custom_ops.items()}


def _meta_shape_rule(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A shape rule for a custom op: run its implementation on meta tensors (None where that fails)."""
    def rule(*shapes: Any, **attribs: Any) -> Any:
        def meta(shape: Any) -> Any:
            if isinstance(shape, list):
                return [meta(item) for item in shape]
            return torch.empty(shape, device="meta")
        try:
            result = fn(*(meta(shape) for shape in shapes), **attribs)
        except Exception:  # noqa: BLE001 - an implementation that cannot run on meta tensors has unknown shapes
            return None
        return _shapes_of(result)
    return rule


def _shapes_of(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return tuple(result.shape)
    if isinstance(result, tuple):
        return tuple(_shapes_of(item) for item in result)
    if isinstance(result, Iterable):
        return [_shapes_of(item) for item in result]
    return ()
