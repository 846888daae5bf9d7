"""Writers: one table from format name to writer, and `save`, the one dispatcher.

`save` turns any module into a `Source` (`source.py`: an imported module's graph with its current weights and load
options, or the export trace of any other module), checks the options against the writer's declared ones, and hands
the source over. Each writer is a module of this package with `OPTIONS` (the keywords it takes) and
`write(source, path, **options)`. `NNEFModule.save` and the command line's `convert` go through this table too.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nnef_torch.errors import NNEFOptionError
from nnef_torch.phases import reporting

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Writer:
    """A format the package writes: its name, the module that writes it, and the path suffixes that pick it by
    default."""

    name: str
    title: str
    module: str
    suffixes: tuple[str, ...] = ()

    def load(self) -> Any:
        return importlib.import_module(self.module)

    @property
    def options(self) -> tuple[str, ...]:
        return self.load().OPTIONS


WRITERS: dict[str, Writer] = {
    "nnef": Writer("nnef", "NNEF", "nnef_torch.writers.nnef"),
    "lightnet": Writer("lightnet", "LightNet", "nnef_torch.writers.lightnet", (".json",)),
}
FORMATS = tuple(WRITERS)
DEFAULT = "nnef"
# how a torch module is traced (writers that take them declare so)
TRACE_OPTIONS = ("quantization", "dynamic_batch", "dynamic_shapes", "fold_batch_norm", "input_names", "output_names",
                 "ops")


def writer_for(path: str | os.PathLike, format: str | None = None) -> Writer:
    """The writer of `format`, or by default the one whose suffix `path` has (NNEF otherwise)."""
    if format is None:
        lower = os.fspath(path).lower()
        return next((w for w in WRITERS.values() if lower.endswith(w.suffixes or ("\0",))), WRITERS[DEFAULT])
    if format not in WRITERS:
        raise NNEFOptionError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    return WRITERS[format]


def check_options(writer: Writer, given: dict[str, Any]) -> dict[str, Any]:
    """The options given (those not None), once each is one the writer takes; one error lists every other."""
    given = {key: value for key, value in given.items() if value is not None}
    for key in given:
        if key not in writer.options:
            takers = [w.title for w in WRITERS.values() if key in w.options]
            where = f"applies to {' and '.join(takers)} models" if takers else "is not an option of any writer"
            taken = ", ".join(option + "=" for option in writer.options) or "no options"
            raise NNEFOptionError(f"{key}= {where}; a {writer.title} model (format={writer.name!r}) takes {taken}")
    return given


def save(module: torch.nn.Module, path: str | os.PathLike, example_inputs: Any = None, *,
         quantization: Any = None, compress: bool | None = None, progress: bool | None = None,
         format: str | None = None, weights: str | None = None, dialect: str | None = None,
         dynamic_batch: bool | int | Sequence[int | None] = False, dynamic_shapes: Any = None,
         target: str | None = None, fold_batch_norm: bool = False, input_names: Sequence[str] | None = None,
         output_names: Sequence[str] | None = None, ops: Sequence[str] | None = None) -> None:
    """Write `module` to `path`, atomically.

    format: 'nnef' (a folder, or a .tgz/.tar.gz/.tar archive) or 'lightnet' (LightNet's JSON IR, with its weights
    in a .wts file of the same stem beside it: `model.json` and `model.wts`); by default 'lightnet' for a path
    ending in .json, else 'nnef'. weights: for LightNet 'file' (the default, a .wts file) or 'inline' (the
    values written into the `create` ops of the JSON file, no .wts file); for NNEF 'stored' (the default: each
    variable in the item type it was read in, tract's Q4_0 blocks or float16 included, quantized again from its
    current value when it changed) or 'float' (every float variable as float32).

    A module made by `nnef_torch.load` writes its own graph with the current values of its variables; any other
    module is traced on `example_inputs` (a tensor, or a tuple or list of tensors) and exported
    (`nnef_torch.export`). DistributedDataParallel, DataParallel and torch.compile wrappers are saved as the module
    inside them, with its own state_dict names as labels. The module itself is not changed. `quantization`
    says how fake quantization is written (see `nnef_torch.export`); LightNet has no quantization, so a LightNet
    model is the float graph (an imported module's graph.quant entries are not written). An operation without a
    LightNet form (or without an NNEF one) stops the save: `ExportError` lists every such operation.

    dynamic_batch (NNEF, traced modules): write the graph with a variable batch size, declared only by its
    `external`s (see `nnef_torch.export`); such a model loads at any batch size with `nnef_torch.load(path,
    batch_size=N)`.

    dynamic_shapes (NNEF, traced modules): symbolic extents as `torch.export.export` takes them (a
    `torch.export.Dim` per dynamic axis); the graph reads at any value of them (see `nnef_torch.export`).

    target (NNEF): 'standard' (the default) or 'tract': the file tract reads, with the symbols of `dynamic_shapes`
    declared (`extension tract_symbol S;`) and the inputs declared with them; for a module read from a tract_core
    document, its document in tract's form (as `dialect='tract_core'`); for a module read from an ONNX file whose
    inputs have symbolic extents (dim_param), its trace on `example_inputs` with a symbol per dim_param
    (`formats.onnx.symbols`).

    fold_batch_norm (traced modules): fold each inference batch norm into the convolution or linear layer before
    it (see `nnef_torch.export`).

    input_names, output_names (NNEF, traced modules): names of the graph's inputs and outputs, in order (see
    `nnef_torch.export`).

    ops (NNEF, traced modules): the only NNEF operations the graph may use; fragments outside the list are expanded
    (see `nnef_torch.export`).

    progress: a line on stderr per phase of a trace (see `nnef_torch.export`) and a bar while tensors are written:
    True always, False never, None (the default) on a terminal, for long phases and large tensors.

    dialect (NNEF, imported modules): 'tract_core' writes a module read from a tract_core document in tract's
    form; by default such a module is written as standard NNEF (docs/tract_core.md, "Dialects read").
    """
    from nnef_torch.writers.source import source_of  # lazy: keeps torch out of reading (the CLI imports writers)
    writer = writer_for(path, format)
    options = check_options(writer, {"compress": compress, "progress": progress, "weights": weights,
                                     "dialect": dialect, "target": target, "quantization": quantization,
                                     "dynamic_batch": dynamic_batch if dynamic_batch is not False else None,
                                     "dynamic_shapes": dynamic_shapes,
                                     "fold_batch_norm": True if fold_batch_norm else None,
                                     "input_names": input_names, "output_names": output_names, "ops": ops})
    trace = {key: options.pop(key) for key in TRACE_OPTIONS if key in options}
    with reporting(progress):  # the export's phase lines (`nnef_torch.phases`)
        source = source_of(module, example_inputs, dialect=options.get("dialect"), target=options.get("target"),
                           **trace)
        writer.load().write(source, path, **options)


__all__ = ["FORMATS", "WRITERS", "Writer", "check_options", "save", "writer_for"]
