"""`nnef_torch.export`: module -> traced ATen graph -> IR -> NNEF text and tensors, in memory."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.convert import graph_name, to_ir
from nnef_torch.exporter.emitter import Emitter
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.quantization import (
    QuantExport,
    check_calibrated,
    quant_options,
    quant_text,
    store_weights,
)
from nnef_torch.exporter.torch_ao import substitute
from nnef_torch.exporter.trace import decompose, direct, trace, unwrap
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph


@dataclass(frozen=True)
class Built:
    """One trace of a module as IR, before any text is written: the graph, the emitter that wrote it (its
    variables' data and the fragments it uses), and the traced program its operations come from."""

    graph: Graph
    emit: Emitter
    program: torch.export.ExportedProgram


def export(module: torch.nn.Module, example_inputs: Any, *, quantization: Any = None,
           dynamic_batch: bool | int | Sequence[int | None] = False) -> Model:
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

    The module is not changed: its parameters, buffers, training flags and hooks stay as they were, and the model's
    tensors are the module's own (no copies). Raises `ExportError` listing every problem (operations without an NNEF
    form, value-dependent shapes, non-tensor inputs, unsupported element types) with the user's source line of each.
    """
    options = quant_options(quantization)
    module = prepare(module)
    if dynamic_batch is not False and dynamic_batch is not None:
        from nnef_torch.exporter.dynamic_batch import export_dynamic
        return export_dynamic(module, example_inputs, dynamic_batch, options)
    built = build(module, example_inputs, options)
    return finish(built.graph, built.emit.data, built.emit.fragments, options)


def prepare(module: torch.nn.Module) -> torch.nn.Module:
    """The module as it is traced: without DistributedDataParallel / DataParallel / torch.compile wrappers, and
    with torch.ao fake quantizers as nnef_torch FakeQuantize (on a shallow copy)."""
    module = unwrap(module)
    check_calibrated(module)
    return substitute(module)


def build(module: torch.nn.Module, example_inputs: Any, options: QuantExport) -> Built:
    """`module` (already `prepare`d) traced on `example_inputs` and converted to IR."""
    program = trace(module, example_inputs)
    name = graph_name(module)
    if direct(program, module):
        try:
            return Built(*to_ir(program, name, options), program)
        except ExportError:  # a rule met a case only the decomposition covers; the decomposed graph decides
            pass
    program = decompose(program, name)
    return Built(*to_ir(program, name, options), program)


def finish(graph: Graph, data: dict[str, torch.Tensor], fragments: Sequence[str], options: QuantExport) -> Model:
    """The `Model` of an IR graph: its text, its tensors and its graph.quant."""
    graph, storage = store_weights(graph, data, options)
    try:
        text = graph_text(graph, fragments)
    except ExportError as error:  # a value NNEF cannot write (an infinite attribute), named and located
        raise ExportError(f"{graph.name} cannot be written as NNEF text: {error}") from None
    except Exception as error:  # an invariant of our own broke: still an ExportError, with the cause chained
        raise ExportError(f"{graph.name} cannot be written as NNEF text: internal error {type(error).__name__}: "
                          f"{error} (a bug in nnef_torch)") from error
    return Model(graph, text, data, quant_text(graph), tuple(fragments), storage)
