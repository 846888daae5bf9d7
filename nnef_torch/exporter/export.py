"""`nnef_torch.export`: module -> traced ATen graph -> IR -> NNEF text and tensors, in memory."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter import recurrent
from nnef_torch.exporter.convert import graph_name, to_ir
from nnef_torch.exporter.emitter import Emitter
from nnef_torch.exporter.fold import fold_norms
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.naming import name_model
from nnef_torch.exporter.quantization import (
    QuantExport,
    check_calibrated,
    quant_options,
    quant_text,
    store_weights,
)
from nnef_torch.exporter.restrict import checked_ops, restrict_model
from nnef_torch.exporter.shape_chains import merge_shape_chains
from nnef_torch.exporter.symbolic import Symbols, names_from_spec, verify, verify_text
from nnef_torch.exporter.torch_ao import substitute
from nnef_torch.exporter.trace import decompose, direct, example_tuple, trace, unwrap
from nnef_torch.exporter.variable_shapes import declare_read_shapes
from nnef_torch.formats.tract_core.target import defined_fragments, exported_text
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph
from nnef_torch.phases import phase, reporting

TARGETS = ("standard", "tract")


@dataclass(frozen=True)
class Built:
    """One trace of a module as IR, before any text is written: the graph, the emitter that wrote it (its
    variables' data and the fragments it uses), and the traced program its operations come from."""

    graph: Graph
    emit: Emitter
    program: torch.export.ExportedProgram


def export(module: torch.nn.Module, example_inputs: Any, *, quantization: Any = None,
           dynamic_batch: bool | int | Sequence[int | None] = False, dynamic_shapes: Any = None,
           target: str | None = None, fold_batch_norm: bool = False, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, ops: Sequence[str] | None = None,
           progress: bool | None = None) -> Model:
    """Trace `module` on `example_inputs` (a tensor, or a tuple or list of tensors: forward's positional arguments)
    and return it as an NNEF `Model`.

    Fake quantization (nnef_torch.quant.FakeQuantize, torch.ao.quantization fake quantizers) is written as
    graph.quant entries; `quantization` (None, a dict, or `nnef_torch.exporter.quantization.QuantExport`) can
    convert them to one op form (`op`), write them inline in graph.nnef (`inline=True`), or store the weights
    quantized in their .dat files (`weights="quantized"` or `"seed"`).

    dynamic_batch: write a graph whose batch size is only declared by its `external`s, so that a consumer may
    run it at any batch size (see `nnef_torch.exporter.dynamic_batch`): True (axis 0 of every input), an axis
    of every input, or one axis (None: no batch axis) per input. A module whose code fixes the batch size
    raises `ExportError` naming the operation that does.

    dynamic_shapes: symbolic extents, as `torch.export.export` takes them (a `torch.export.Dim` per dynamic axis,
    by input, shared between inputs by using one Dim; see `nnef_torch.exporter.symbolic`). The graph declares the
    example extents in its `external`s and writes every other operation relative to its inputs, so it reads at
    any value of the symbols; what standard NNEF cannot write that way raises `ExportError` naming the operation,
    the extent and the source line. `Model.dims` and `Model.symbols` keep the symbolic input shapes.

    target: 'standard' (the default) or 'tract': the text tract reads (`formats.tract_core.target`): symbols
    declared, inputs declared with them, tract's operations where standard NNEF has none (`tract_core_range` for an
    arange over a symbolic length), extents as expressions of the symbols, and no `constant` (tract lacks it);
    standard ops tract lacks in forms it reads (`exporter/tract_forms.py`); buffer updates (a training batch norm's
    running statistics) are left out, as tract keeps no state between runs: the outputs are the module's.

    fold_batch_norm: fold each inference batch norm (eval-mode nn.BatchNorm1d/2d/3d, F.batch_norm with
    training=False) into the convolution (conv1d/2d/3d) or linear layer whose only user it is, within float
    rounding (`nnef_torch.exporter.fold`); under fake quantization the weight's quantizer is scaled with it, and a
    fold that would not reproduce the fake-quantized module exactly raises `ExportError`.

    input_names, output_names: names of the graph's inputs (`external`s) and outputs, in order (NNEF identifiers,
    each once; `ExportError` otherwise). Other tensors are named after the module that computed them
    (`layer1_0_conv1`; see `nnef_torch.exporter.naming`).

    ops: the NNEF operations the graph may use (an accelerator importer's list; `external` and `variable` always):
    every fragment not in the list (a compound standard op such as `linear`, an extension fragment such as
    `gelu_erf`) is expanded into its body until each operation is in it, and the document defines only the
    fragments it still uses (`nnef_torch.exporter.restrict`). `ExportError` names every operation left outside,
    with its source line, and an unknown name. Standard target only.

    progress: one line on stderr per phase (tracing, decomposing, converting, writing the text, the traces and
    checks of a dynamic batch or of symbolic extents), with its time: True always, False never, None (the default)
    on a terminal for the phases that last over a second (`nnef_torch.phases`).

    The module is not changed: its parameters, buffers, training flags and hooks stay as they were, and the model's
    tensors are the module's own (no copies). Raises `ExportError` listing every problem (operations without an NNEF
    form, value-dependent shapes, non-tensor inputs, unsupported element types) with the user's source line of each.
    """
    with reporting(progress):
        return _export(module, example_inputs, quantization, dynamic_batch, dynamic_shapes, target,
                       bool(fold_batch_norm), input_names, output_names, ops)


def _export(module: torch.nn.Module, example_inputs: Any, quantization: Any,
            dynamic_batch: bool | int | Sequence[int | None], dynamic_shapes: Any, target: str | None, fold: bool,
            input_names: Sequence[str] | None, output_names: Sequence[str] | None, ops: Sequence[str] | None
            ) -> Model:
    options = quant_options(quantization)
    target = target or "standard"
    if target not in TARGETS:
        raise ExportError(f"target must be one of {', '.join(map(repr, TARGETS))}, not {target!r}")
    allowed = checked_ops(ops, target)
    locate = None
    module = prepare(module)
    if dynamic_shapes is not None or target == "tract":
        if dynamic_batch is not False and dynamic_batch is not None:
            raise ExportError("give dynamic_shapes= (or target='tract') or dynamic_batch=, not both "
                              "(dynamic_batch=True is the dynamic_shapes with one Dim on axis 0 of every input)")
        model = export_symbolic(module, example_inputs, dynamic_shapes, options, target, fold)
    elif dynamic_batch is not False and dynamic_batch is not None:
        from nnef_torch.exporter.dynamic_batch import export_dynamic  # cycle: dynamic_batch imports this module
        model = export_dynamic(module, example_inputs, dynamic_batch, options, fold)
    else:
        built = build(module, example_inputs, options, fold=fold)
        model = finish(merge_shape_chains(built.graph), built.emit.data, built.emit.fragments, options)
        locate = built.emit.sources.get
    if allowed is not None:
        model = restrict_model(model, allowed, locate)
    return name_model(model, input_names, output_names, target)


def prepare(module: torch.nn.Module) -> torch.nn.Module:
    """The module as it is traced: without DistributedDataParallel / DataParallel / torch.compile wrappers, and
    with torch.ao fake quantizers as nnef_torch FakeQuantize (on a shallow copy)."""
    module = unwrap(module)
    check_calibrated(module)
    return substitute(module)


def build(module: torch.nn.Module, example_inputs: Any, options: QuantExport, dynamic_shapes: Any = None,
          target: str = "standard", fold: bool = False) -> Built:
    """`module` (already `prepare`d) traced on `example_inputs` (with the symbolic extents of `dynamic_shapes`)
    and converted to IR for `target`; with `fold`, inference batch norms folded into the layer before them."""
    program = trace(module, example_inputs, dynamic_shapes)
    if fold:
        fold_norms(program)
    name = graph_name(module)
    names = names_from_spec(program, dynamic_shapes, example_tuple(example_inputs)) if dynamic_shapes else None
    if direct(program, module):
        try:
            return _converted(program, name, options, names, target, module)
        except ExportError:  # a rule met a case only the decomposition covers; the decomposed graph decides
            pass
    program = decompose(program, name)
    return _converted(program, name, options, names, target, module)


def _converted(program: torch.export.ExportedProgram, name: str, options: QuantExport,
               names: dict[str, str] | None, target: str, module: torch.nn.Module) -> Built:
    count = sum(node.op == "call_function" for node in program.graph.nodes)
    with phase(f"converting {count} traced operation{'s' * (count != 1)} of {name} to NNEF"):
        return Built(*to_ir(program, name, options, _symbols(program, names), target, module), program)


def _symbols(program: torch.export.ExportedProgram, names: dict[str, str] | None) -> Symbols | None:
    """The symbols of a trace with `dynamic_shapes` (`names`: the user's names of its symbols), else None."""
    if names is None:
        return None
    symbols = Symbols(program, names)
    return symbols if symbols else None


def export_symbolic(module: torch.nn.Module, example_inputs: Any, dynamic_shapes: Any, options: QuantExport,
                    target: str = "standard", fold: bool = False) -> Model:
    """`module` (already `prepare`d) exported with symbolic extents (or for tract): one trace, then the graph
    read at other values of the symbols to check that nothing in it holds an example extent (`symbolic.verify`)."""
    if target == "tract":
        built = _build_tract(module, example_inputs, options, dynamic_shapes, fold)
    else:
        built = build(module, example_inputs, options, dynamic_shapes, target, fold)
    symbols = built.emit.symbols
    if target == "tract":
        graph = built.graph if symbols is not None else merge_shape_chains(built.graph)  # static shapes only
        graph, storage = store_weights(graph, built.emit.data, options)
        graph, data = declare_read_shapes(graph, built.emit.data)
        dims, ranges = _declared(graph, symbols, built.program)
        fragments = tuple(name for name in built.emit.fragments if name in defined_fragments())
        with phase(f"writing {len(graph.operations)} operations as NNEF text"):
            text = exported_text(graph, fragments, dims, ranges)
        model = Model(graph, text, data, quant_text(graph), fragments, storage, dims, ranges)
        if symbols is not None:
            with phase(f"reading {graph.name} back at other values of its symbols"):
                verify_text(model.text, graph, symbols, built.program, graph.name)
        return model
    model = finish(built.graph, built.emit.data, built.emit.fragments, options)
    if symbols is None:  # torch found every extent static (a Dim it specialized raises in torch.export)
        return model
    with phase(f"reading {model.graph.name} back at other values of its symbols"):
        verify(model.graph, model.fragments, symbols, built.program, model.graph.name)
    dims, ranges = _declared(model.graph, symbols, built.program)
    return dataclasses.replace(model, dims=dims, symbols=ranges)


def _build_tract(module: torch.nn.Module, example_inputs: Any, options: QuantExport, dynamic_shapes: Any,
                 fold: bool = False) -> Built:
    """`build` for the tract target. A module whose nn.LSTM / nn.GRU torch cannot trace over a symbolic length
    (torch's loop over time fixes it) is traced again with each of them kept whole, written as tract_core_scan
    (`exporter.recurrent`); any other module is traced as it is."""
    try:
        return build(module, example_inputs, options, dynamic_shapes, "tract", fold)
    except ExportError:
        if dynamic_shapes is None or not recurrent.has_recurrence(module):
            raise
    with phase(f"tracing {type(module).__name__} again, its LSTM / GRU layers kept whole for tract"):
        return build(recurrent.substitute(module), example_inputs, options, dynamic_shapes, "tract", fold)


def _declared(graph: Graph, symbols: Symbols | None, program: torch.export.ExportedProgram
              ) -> tuple[dict[str, tuple[int | str, ...]], dict[str, tuple[int, int | None]]]:
    """Each input's shape with its symbols by name, and each symbol's range."""
    if symbols is None:
        return {}, {}
    nodes = {node.name: node for node in program.graph.nodes}
    dims = {}
    for external in graph.signature.externals:
        shape = symbols.shape(nodes.get(external.name))
        if shape is not None:
            dims[external.name] = tuple(d if isinstance(d, int) else symbols.show(d) for d in shape)
    return dims, {symbols.names[symbol]: bounds for symbol, bounds in symbols.ranges.items()}


def finish(graph: Graph, data: dict[str, torch.Tensor], fragments: Sequence[str], options: QuantExport) -> Model:
    """The `Model` of an IR graph: its text, its tensors and its graph.quant; each variable declared in the shape
    its consumers read (`variable_shapes`)."""
    graph, storage = store_weights(graph, data, options)
    graph, data = declare_read_shapes(graph, data)
    try:
        with phase(f"writing {len(graph.operations)} operations as NNEF text"):
            text = graph_text(graph, fragments)
    except ExportError as error:  # a value NNEF cannot write (an infinite attribute), named and located
        raise ExportError(f"{graph.name} cannot be written as NNEF text: {error}") from None
    except Exception as error:  # an invariant of our own broke: still an ExportError, with the cause chained
        raise ExportError(f"{graph.name} cannot be written as NNEF text: internal error {type(error).__name__}: "
                          f"{error} (a bug in nnef_torch)") from error
    return Model(graph, text, data, quant_text(graph), tuple(fragments), storage)
