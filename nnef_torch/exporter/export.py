"""`nnef_torch.export`: module -> traced ATen graph -> IR -> NNEF text and tensors, in memory."""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.exporter.convert import graph_name, to_ir
from nnef_torch.exporter.document import graph_text
from nnef_torch.exporter.model import Model
from nnef_torch.exporter.trace import trace, unwrap


def export(module: torch.nn.Module, example_inputs: Any) -> Model:
    """Trace `module` on `example_inputs` (a tensor or a tuple of tensors) and return it as an NNEF `Model`.

    The module is not changed. Raises `ExportError` listing every operation without an NNEF form.
    """
    module = unwrap(module)
    program = trace(module, example_inputs)
    graph, emit = to_ir(program, graph_name(module))
    return Model(graph, graph_text(graph, emit.fragments), emit.data, None, tuple(emit.fragments))
