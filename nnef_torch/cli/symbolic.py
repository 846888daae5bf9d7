"""What `info` shows of shapes that are not fixed: a tract model's dynamic dimensions (`extension tract_symbol S;`)
and the variable batch of a model exported with --dynamic-batch, found by reading the graph at a few values.

A dimension no option binds is read at the first of PROBES the graph lowers at (the counts `info` shows are at that
value), and again at another to see which extents follow it: an input's extent is shown as its declared symbol, an
output's as `S`, `2*S`, `S + 1` where it follows one symbol linearly, `?` where it follows several.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nnef_torch.errors import NNEFError
from nnef_torch.formats.dialects import UnboundDimensionError, dynamic_inputs
from nnef_torch.reader import ModelData, open_source

PROBES = (1, 2, 4, 8, 16, 3, 5)  # values an unbound dynamic dimension is read at
BATCH = "B"  # the name `info` gives a variable batch size
Shape = list[int | str]


@dataclass(frozen=True)
class Shapes:
    """The shapes to show for a model read with dimensions no option binds: by input and output name, each extent an
    integer or a symbol's expression; `note` says what was read at which value."""

    inputs: dict[str, Shape]
    outputs: dict[str, Shape | None]
    note: str


def read_symbolic(path: str, read: Callable[..., ModelData], options: Mapping[str, Any],
                  error: UnboundDimensionError) -> tuple[ModelData, Shapes]:
    """A tract model whose symbols no option binds: read at the first two PROBES it lowers at (`read` takes
    input_shapes=); raises `error` where it lowers at none."""
    given = {key: value for key, value in options.items() if value is not None and key in ("format",)}
    with open_source(path, **given) as source:
        declared = dynamic_inputs(source.document.document)
    symbols = list(error.symbols)
    bound = {name: extents for name, extents in declared.items()
             if any(extent in symbols for extent in extents) and None not in extents}

    def at(value: int) -> dict[str, list[int]]:
        return {name: [value if extent in symbols else extent for extent in extents]  # type: ignore[misc]
                for name, extents in bound.items()}
    found = _probe(lambda value, tensors: read(input_shapes=at(value), load_tensors=tensors))
    if not found:
        raise error
    (first, model), rest = found[0], found[1:]
    inputs = {ext.name: [extent if isinstance(extent, (int, str)) else "?" for extent in declared[ext.name]]
              if ext.name in declared else list(ext.shape) for ext in model.graph.signature.externals}
    outputs = _outputs(model, rest, first, symbols[0] if len(symbols) == 1 else None)
    values = ", ".join(f"{symbol} = {first}" for symbol in symbols)
    return model, Shapes(inputs, outputs, f"dynamic dimension(s) {', '.join(symbols)} not bound: the counts are at "
                                          f"{values} (bind with --input-shape or --batch-size)")


def read_batch(model: ModelData, read: Callable[..., ModelData]) -> Shapes | None:
    """The shapes of an NNEF model whose graph reads at any batch size (axis 0 of every input, as --dynamic-batch
    exports write), with the batch shown as B; None where it reads only at its declared batch."""
    externals = model.graph.signature.externals
    if not externals or any(not ext.shape for ext in externals) or len({ext.shape[0] for ext in externals}) != 1:
        return None
    batch = externals[0].shape[0]
    probes = [value for value in (3, 5) if value != batch]
    found = _probe(lambda value, tensors: read(batch_size=value, load_tensors=False), probes, every=True)
    if len(found) != len(probes):
        return None
    inputs: dict[str, Shape] = {ext.name: [BATCH, *ext.shape[1:]] for ext in externals}
    outputs = _outputs(model, found, batch, BATCH)
    return Shapes(inputs, outputs, f"variable batch size {BATCH}: the graph reads at any batch size (run one with "
                                   f"--batch-size N); the counts are at {BATCH} = {batch}")


def _probe(read: Callable[[int, bool], ModelData], values: Sequence[int] = PROBES,
           every: bool = False) -> list[tuple[int, ModelData]]:
    """The model read at values (the first with its tensors): the first two that lower, or every one (`every`,
    stopping at the first that does not)."""
    found: list[tuple[int, ModelData]] = []
    for value in values:
        try:
            with warnings.catch_warnings():  # each deviation was shown once already, or is when the model is read
                warnings.simplefilter("ignore")
                found.append((value, read(value, not found)))
        except NNEFError:
            if every:
                return found
            continue
        if not every and len(found) == 2:
            break
    return found


def _outputs(model: ModelData, others: Sequence[tuple[int, ModelData]], value: int,
             symbol: str | None) -> dict[str, Shape | None]:
    """Each output's shape, its extents that follow the symbol written as expressions of it."""
    shapes: dict[str, Shape | None] = {}
    for name in model.graph.outputs:
        shape = model.graph.tensors[name].shape
        seen = [other.graph.tensors[name].shape for _, other in others if name in other.graph.tensors]
        if shape is None or any(other is None or len(other) != len(shape) for other in seen):
            shapes[name] = None if shape is None else list(shape)
            continue
        points = [(value, shape), *((at, other) for (at, _), other in zip(others, seen))]
        shapes[name] = [_extent([(at, dims[axis]) for at, dims in points], symbol)  # type: ignore[index]
                        for axis in range(len(shape))]
    return shapes


def _extent(points: Sequence[tuple[int, int]], symbol: str | None) -> int | str:
    """An extent seen at several values of a symbol: an integer, `scale*S + offset`, or '?'."""
    extents = {extent for _, extent in points}
    if len(extents) == 1:
        return extents.pop()
    if symbol is None or len(points) < 2:
        return "?"
    (v0, a0), (v1, a1) = points[0], points[1]
    scale, rest = divmod(a1 - a0, v1 - v0)
    offset = a0 - scale * v0
    if rest or scale < 1 or any(extent != scale * at + offset for at, extent in points):
        return "?"
    text = symbol if scale == 1 else f"{scale}*{symbol}"
    return text if offset == 0 else f"{text} + {offset}" if offset > 0 else f"{text} - {-offset}"


def shape_text(shape: Shape | None) -> str:
    """[1, 3, 224, 224] or [B, 3, 224, 224] (symbols unquoted)."""
    return "unknown shape" if shape is None else "[" + ", ".join(str(extent) for extent in shape) + "]"
