"""`nnef_torch.export`: module -> traced ATen graph -> IR -> NNEF text and tensors, in memory."""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.convert import graph_name, to_ir
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.quantization import check_calibrated, quant_options, quant_text, store_weights
from nnef_torch.exporter.torch_ao import substitute
from nnef_torch.exporter.trace import decompose, direct, trace, unwrap
from nnef_torch.ir.document import graph_text


def export(module: torch.nn.Module, example_inputs: Any, *, quantization: Any = None) -> Model:
    """Trace `module` on `example_inputs` (a tensor, or a tuple or list of tensors: forward's positional arguments)
    and return it as an NNEF `Model`.

    Fake quantization (nnef_torch.quant.FakeQuantize, torch.ao.quantization fake quantizers) is written as
    graph.quant entries; `quantization` (None, a dict, or `nnef_torch.exporter.quantization.QuantExport`) can
    convert them to one op form (`op`), write them inline in graph.nnef (`inline=True`), or store the weights
    quantized in their .dat files (`weights="quantized"` or `"seed"`).

    The module is not changed: its parameters, buffers, training flags and hooks stay as they were, and the model's
    tensors are the module's own (no copies). Raises `ExportError` listing every problem (operations without an NNEF
    form, value-dependent shapes, non-tensor inputs, unsupported element types) with the user's source line of each.
    """
    options = quant_options(quantization)
    module = unwrap(module)  # DistributedDataParallel, DataParallel, torch.compile
    check_calibrated(module)
    module = substitute(module)  # torch.ao fake quantizers -> nnef_torch FakeQuantize, on a shallow copy
    program = trace(module, example_inputs)
    name = graph_name(module)
    converted = None
    if direct(program, module):
        try:
            converted = to_ir(program, name, options)
        except ExportError:  # a rule met a case only the decomposition covers; the decomposed graph decides
            converted = None
    graph, emit = converted or to_ir(decompose(program, name), name, options)
    graph, storage = store_weights(graph, emit.data, options)
    try:
        text = graph_text(graph, emit.fragments)
    except Exception as error:  # an invariant of our own broke: still an ExportError, with the cause chained
        raise ExportError(f"{name} cannot be written as NNEF text: internal error {type(error).__name__}: {error} "
                          "(a bug in nnef_torch)") from error
    return Model(graph, text, emit.data, quant_text(graph), tuple(emit.fragments), storage)
