"""`nnef_torch.export`: module -> traced ATen graph -> IR -> NNEF text and tensors, in memory."""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.exporter.convert import graph_name, to_ir
from nnef_torch.exporter.document import graph_text
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.trace import decompose, direct, trace, unwrap


def export(module: torch.nn.Module, example_inputs: Any) -> Model:
    """Trace `module` on `example_inputs` (a tensor, or a tuple or list of tensors: forward's positional arguments)
    and return it as an NNEF `Model`.

    The module is not changed: its parameters, buffers, training flags and hooks stay as they were, and the model's
    tensors are the module's own (no copies). Raises `ExportError` listing every problem (operations without an NNEF
    form, value-dependent shapes, non-tensor inputs, unsupported element types) with the user's source line of each.
    """
    module = unwrap(module)  # DistributedDataParallel, DataParallel, torch.compile
    program = trace(module, example_inputs)
    name = graph_name(module)
    converted = None
    if direct(program, module):
        try:
            converted = to_ir(program, name)
        except ExportError:  # a rule met a case only the decomposition covers; the decomposed graph decides
            converted = None
    graph, emit = converted or to_ir(decompose(program, name), name)
    try:
        text = graph_text(graph, emit.fragments)
    except Exception as error:  # an invariant of our own broke: still an ExportError, with the cause chained
        raise ExportError(f"{name} cannot be written as NNEF text: internal error {type(error).__name__}: {error} "
                          "(a bug in nnef_torch)") from error
    return Model(graph, text, emit.data, None, tuple(emit.fragments))
