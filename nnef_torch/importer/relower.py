"""An imported module's graph lowered again: with the options it was loaded with (`ReadOptions`), its current
constants, and the compound operations a consumer keeps whole. The one place that re-reads a module's document:
the writers, the viewer and graph_def use it, and it memoises on the module."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from nnef_torch.errors import NNEFDeviationWarning
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.ir.graph import Graph, Variable
from nnef_torch.reader import member_path, open_source, read_graph

# which compound operations stay whole (the others are expanded); a level names one such choice
Keep = Callable[[str], bool]


def module_graph(module: NNEFModule, level: str, keep: Keep | None = None, *, quant: bool = False) -> Graph:
    """The graph of `module`'s document lowered again with the options it was loaded with and its current
    constants, keeping whole the operations `keep` names (`level` names that choice and keys the memo), with its
    graph.quant entries when `quant`. Graphs whose shape depends on no variable's value are memoised on the
    module."""
    info = module.nnef
    memo = module.meta.setdefault("nnef_graphs", {})
    if (level, quant) in memo:
        return memo[level, quant]
    options = info.options
    nnef = options.format in (None, "nnef")
    file = member_path(info.source, "graph.nnef") if nnef and info.source else \
        f"{info.source} (as NNEF)" if info.source else "graph.nnef"
    with warnings.catch_warnings():  # met and warned about when the module was loaded
        warnings.simplefilter("ignore", NNEFDeviationWarning)
        graph = read_graph(info.graph_text, file=file, quant_text=info.quant_text if quant else None, atomic=keep,
                           input_shapes=options.shapes if nnef else None,
                           batch_size=options.batch_size if nnef else None,
                           batch_axes=options.axes if nnef else None,
                           lenient=options.lenient, constants=current_values(module))
    if "tensor-attribute" not in info.deviations:
        memo[level, quant] = graph
    return graph


def current_values(module: NNEFModule) -> Callable[[Variable], Any]:
    """A variable's current value in the module as an array, or (a variable no operation reads as a tensor, passed
    as an attribute) its data in the files the module was read from."""
    info = module.nnef

    def read(variable: Variable) -> Any:
        slot = info.slots.get(variable.key)
        if slot is not None:
            return tensor_at(module, slot.path).detach().cpu().numpy()
        if info.source is None:
            return None  # refused by the reading, naming the attribute
        with open_source(info.source, info.options) as source:
            return source.read_variable(variable).array
    return read


__all__ = ["current_values", "module_graph"]
