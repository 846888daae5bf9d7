"""The symbolic extents of an ONNX model's inputs (dim_param), kept when a module loaded from it is saved for tract.

A module converted from ONNX runs a graph of static shapes (converted again for each call's shapes); saved with
`target='tract'`, it is exported instead (`nnef_torch.export`) with a `torch.export.Dim` per dim_param, so that the
tract document declares them as symbols (`extension tract_symbol batch;`) and its inputs with them."""
from __future__ import annotations

import os
import re
from typing import Any

import torch

from nnef_torch.errors import ExportError, NNEFError
from nnef_torch.format.lexer import KEYWORDS
from nnef_torch.formats.onnx.reading import parse_model


def symbol_name(dim_param: str, input_name: str, axis: int) -> str:
    """`dim_param` made an identifier NNEF, tract and torch.export all take (`<input>_<axis>` for an unnamed one)."""
    name = re.sub(r"\W", "_", dim_param or f"{input_name}_{axis}", flags=re.ASCII)
    name = name if re.match(r"[A-Za-z]", name) else "s_" + name
    return name + "_" if name in KEYWORDS | {"true", "false"} else name


def input_symbols(file: str) -> list[dict[int, str]]:
    """The symbolic extents of the graph inputs (initializers aside) of the ONNX file at `file`, in their order:
    the symbol of each axis that is no fixed extent."""
    graph = parse_model(file).graph
    initializers = {tensor.name for tensor in graph.initializer}
    return [{axis: symbol_name(dim.dim_param, value.name, axis)
             for axis, dim in enumerate(value.type.tensor_type.shape.dim) if not dim.HasField("dim_value")}
            for value in graph.input if value.name not in initializers]


def symbolic_export(module: Any, example_inputs: Any, target: str) -> Any:
    """The export (`nnef_torch.exporter.model.Model`) of `module`, an NNEFModule read from an ONNX file, traced on
    `example_inputs` with a `torch.export.Dim` named after each dim_param of its inputs (one Dim per name, shared
    by the inputs that name it; traced at static shapes when they have none, so that the target's own forms are
    written). A module whose shapes bind at its first call is called once on `example_inputs` first."""
    symbols = input_symbols(module.nnef.source)
    if len(symbols) != len(module.nnef.inputs):
        return None
    from nnef_torch.exporter.export import export  # lazy: torch.export and the ATen rules load only to trace
    examples = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if module.nnef.unbound is not None:
        with torch.no_grad():
            module(*examples)
    dims: dict[str, Any] = {}
    shapes = tuple({axis: dims.setdefault(name, torch.export.Dim(name)) for axis, name in axes.items()} or None
                   for axes in symbols)
    if not dims:  # static: traced all the same, so that the target's own forms are written (tract's gather, ...)
        return export(module, examples, target=target)
    try:
        return export(module, examples, dynamic_shapes=shapes, target=target)
    except NNEFError as error:  # a specialized extent (ExportError), or an extent tract cannot write
        problems = error.problems if isinstance(error, ExportError) and error.problems else [str(error)]
        raise ExportError(f"saving {os.path.basename(module.nnef.source)} for tract with its symbols "
                          f"{sorted(dims)} traces the module converted at the example's shapes, whose code keeps "
                          "only the leading axis free (other extents, such as a reshape's, are fixed by the "
                          "conversion); save it with the default target to write it at the example's shapes",
                          problems) from error


__all__ = ["input_symbols", "symbol_name", "symbolic_export"]
