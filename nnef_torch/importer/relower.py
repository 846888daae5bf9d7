"""An imported module's graph lowered again: with the options it was loaded with (`ReadOptions`), its current
constants, and the compound operations a consumer keeps whole; or for other input shapes. The one place that
re-reads a module's document: the writers, the viewer, graph_def and the calls of other input shapes
(`derive.py`) use it, and it memoises on the module."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnef_torch.errors import NNEFDeviationWarning, NNEFOptionError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.ir.graph import Graph, Variable
from nnef_torch.options import ReadOptions
from nnef_torch.reader import open_source, read_document

# which compound operations stay whole (the others are expanded); a level names one such choice
Keep = Callable[[str], bool]
MAX_MEMO = 16  # graphs (and converted documents) kept per module, by level and signature


def module_graph(module: NNEFModule, level: str, keep: Keep | None = None, *, quant: bool = False,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 custom_shapes: Mapping[str, Callable[..., Any]] | None = None) -> Graph:
    """The graph of `module`'s document lowered again with the options it was loaded with and its current
    constants, keeping whole the operations `keep` names (`level` names that choice and keys the memo), with its
    graph.quant entries when `quant`. input_shapes: other shapes of its inputs (a call's signature; `derived_source`
    reads a model of another format again for them); custom_shapes: the shape rules of `keep`'s operations that
    the op table lacks. Graphs whose shape depends on no variable's value are memoised on the module, by level and
    signature (the last MAX_MEMO)."""
    info = module.nnef
    if input_shapes is None:
        info.check_bound(f"the module's graph ({level})")
    signature = None if input_shapes is None else tuple((name, tuple(shape)) for name, shape in input_shapes.items())
    memo = module.meta.setdefault("nnef_graphs", {})
    if (level, quant, signature) in memo:
        return memo[level, quant, signature]
    source = derived_source(module, input_shapes)
    options = source.options
    nnef = options.format in (None, "nnef")
    shapes = options.shapes if input_shapes is None or not nnef else {**(options.shapes or {}), **input_shapes}
    with warnings.catch_warnings():  # met and warned about when the module was loaded
        warnings.simplefilter("ignore", NNEFDeviationWarning)
        graph = read_document(source.document, quant_text=info.quant_text if quant else None, atomic=keep,
                              custom_shapes=custom_shapes, input_shapes=shapes if nnef else None,
                              batch_size=options.batch_size if nnef else None,
                              batch_axes=options.axes if nnef else None,
                              lenient=options.lenient, constants=current_values(module))
    if "tensor-attribute" not in info.deviations:
        while len(memo) >= MAX_MEMO:
            del memo[next(iter(memo))]
        memo[level, quant, signature] = graph
    return graph


@dataclass(frozen=True)
class Derived:
    """A module's document for other input shapes: the same for NNEF (the lowering re-declares the inputs), a model
    of another format converted again for them; the options that read it, and the front end's state labels and
    names (`ModelSource`'s)."""

    document: GraphFile
    options: ReadOptions
    state: frozenset[str] = frozenset()
    names: Mapping[str, str] = field(default_factory=dict)


def derived_source(module: NNEFModule, input_shapes: Mapping[str, Sequence[int]] | None) -> Derived:
    """`module`'s document for `input_shapes` (None: as loaded); a converted model is read again from its files
    (memoised on the module by signature, the last MAX_MEMO)."""
    info = module.nnef
    if input_shapes is None or info.options.format in (None, "nnef"):
        return Derived(info.document, info.options)
    if info.source is None:
        raise NNEFOptionError(f"a {info.options.format} model made in memory is read for the input shapes it was "
                              "loaded with only")
    signature = tuple((name, tuple(shape)) for name, shape in input_shapes.items())
    memo = module.meta.setdefault("nnef_sources", {})
    if signature not in memo:
        shapes = {**(info.options.shapes or {}), **{name: list(shape) for name, shape in input_shapes.items()}}
        with open_source(info.source, info.options.replace(input_shapes=shapes)) as source:
            found = Derived(source.document, source.options, source.state, dict(source.names))
        while len(memo) >= MAX_MEMO:
            del memo[next(iter(memo))]
        memo[signature] = found
    return memo[signature]


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


__all__ = ["Derived", "current_values", "derived_source", "module_graph"]
