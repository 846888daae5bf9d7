"""module -> traced ATen graph, with `torch.export`.

The module is traced as it is (its training flag decides batch-norm and dropout behaviour), without being changed:
torch.export runs it on fake tensors. Operations the op table exports are kept whole (`conv2d`, `linear`,
`layer_norm`, ...); everything else is decomposed to core ATen first, so a rule exists for the pieces.
"""
from __future__ import annotations

from typing import Any

import torch

from nnef_torch.errors import ExportError
from nnef_torch.ops.registry import export_rules

_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException", "DynamicOutputShapeException",
                   "data-dependent", "data dependent")


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The module inside DistributedDataParallel / DataParallel-style wrappers."""
    while isinstance(getattr(module, "module", None), torch.nn.Module) and type(module).__name__ in (
            "DistributedDataParallel", "DataParallel"):
        module = module.module
    return module


def _overload(name: str) -> Any:
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


def _kept_whole() -> set[Any]:
    kept = set()
    for name in export_rules():
        if name.startswith("aten."):
            try:
                kept.add(_overload(name))
            except AttributeError:  # an overload this torch version does not have
                continue
    return kept


def trace(module: torch.nn.Module, example_inputs: tuple[Any, ...]) -> torch.export.ExportedProgram:
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    try:
        program = torch.export.export(module, example_inputs, strict=False)
        table = torch.export.default_decompositions()
        for op in _kept_whole():
            if op in table:
                del table[op]
        return program.run_decompositions(table)
    except ExportError:
        raise
    except Exception as error:  # torch reports tracing failures with many exception types
        raise ExportError(explain(error)) from error


def explain(error: Exception) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    where = _user_frame(text)
    if any(marker in type(error).__name__ + text for marker in _DATA_DEPENDENT):
        return ("the module cannot be traced to a fixed graph: a shape or a Python branch depends on tensor values "
                f"({first}){where}. NNEF graphs have static shapes; replace value-dependent code (.item(), "
                "int(tensor), boolean masks, nonzero) by shape-preserving ops such as torch.where, or move it out of "
                "the exported module")
    return f"torch.export could not trace the module: {type(error).__name__}: {first}{where}"


def _user_frame(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Caused by:") or line.startswith("File "):
            return f" [{line}]"
    return ""
