"""The NNEF writer: graph.nnef, graph.quant and one .dat per variable, to a folder or a .tgz/.tar.gz/.tar archive,
written atomically and one tensor at a time.

An exported module writes its trace (`nnef_torch.Model`). An imported module writes its document as read, with each
variable's current value encoded as it was stored (quantized codes by its current graph.quant entry) and graph.quant
with each quantizer's current parameters (the text as read while none changed). Two IR-to-IR rewrites apply to
imported documents: one read with deviations from the spec is written as standard NNEF (`normalize.py`), and one
read from tract's dialect as standard NNEF or, with `dialect='tract_core'`, in tract's form
(`nnef_torch.formats.tract_core.rewrite`). In tract's form, a document that declares symbols (S, P) is written as
read, with the current weights (standard NNEF holds no symbols: it is written at the shapes of the last call).

Each variable is written with the item type it was read with or exported as (tract's Q4_0 / Q8_1 blocks quantized
again from the current values, float16 as float16); `weights='float'` writes those as float32 instead.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterator

import numpy as np

from nnef_torch.errors import NNEFOptionError
from nnef_torch.format import container, tensor_file
from nnef_torch.format.quant_file import QuantSpec, print_quantization
from nnef_torch.formats.tract_core import declarations, is_dialect
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.importer.relower import module_graph
from nnef_torch.importer.weights import Storage, as_float, encode, float_storage
from nnef_torch.ir.document import graph_text
from nnef_torch.stdlib import standard_fragments
from nnef_torch.writers.normalize import standard_graph
from nnef_torch.writers.source import Source, keeps_symbols

OPTIONS = ("compress", "progress", "dialect", "target", "quantization", "dynamic_batch", "dynamic_shapes",
           "fold_batch_norm", "input_names", "output_names", "ops", "weights")
WEIGHTS = ("stored", "float")  # `weights=`: each variable's item type as read / exported, or float32
TARGETS = ("standard", "tract")
Encoded = Iterator[tuple[str, Callable[[], bytes]]]


def write(source: Source, path: str | os.PathLike, *, compress: bool | None = None, progress: bool | None = None,
          dialect: str | None = None, target: str | None = None, weights: str | None = None) -> None:
    if target is not None and target not in TARGETS:
        raise NNEFOptionError(f"target must be one of {', '.join(map(repr, TARGETS))}, not {target!r}")
    if weights is not None and weights not in WEIGHTS:
        raise NNEFOptionError(f"weights must be one of {', '.join(map(repr, WEIGHTS))} for an NNEF model, "
                              f"not {weights!r}")
    as_stored = weights != "float"
    if source.model is not None:  # traced for its target (`source_of`)
        model = source.model
        if not as_stored:
            storage = {label: as_float(stored) for label, stored in model.storage.items()}
            storage.update({label: float_storage() for label, tensor in model.tensors.items()
                            if label not in storage and tensor.is_floating_point() and tensor.element_size() < 4})
            model = dataclasses.replace(model, storage=storage)
        model.save(path, compress=compress, progress=progress)
        return
    if target == "tract":
        if dialect not in (None, "tract_core"):
            raise NNEFOptionError(f"target='tract' writes tract's dialect; dialect={dialect!r} contradicts it")
        dialect = "tract_core" if is_dialect(source.imported.nnef.graph.extensions) else None
    module = source.imported
    assert module is not None
    info = module.nnef
    specs = current_quantization(module)
    tensors: Encoded = _tensors(module, specs, progress, as_stored)
    if keeps_symbols(info.graph.extensions, dialect, target):  # the document as read, with the current weights
        quant_text = info.quant_text if specs == info.graph.quantization else print_quantization(specs) or None
        container.write_model(path, info.graph_text, tensors, quant_text, compress=compress)
        return
    if is_dialect(info.graph.extensions):
        from nnef_torch.formats.tract_core.document import document  # lazy: the dialect's writer loads when used
        standard, dialect_ops = standard_fragments(), declarations()
        graph = module_graph(module, "tract_core", lambda name: name in standard or name in dialect_ops)
        text, data = document(graph, dialect)
        tensors = itertools.chain(tensors, ((label, _encoder(array)) for label, array in data.items()))
        container.write_model(path, text, tensors, None, compress=compress)
        return
    if dialect is not None:
        raise NNEFOptionError(f"dialect={dialect!r} applies to a module read from a document of that dialect "
                              "('extension tract_registry tract_core;'); this one is standard NNEF")
    text = info.graph_text
    if info.deviations:  # read leniently: written as standard NNEF (docs/tract_core.md, "Deviations read")
        standard = standard_fragments()
        graph, fragments, library = standard_graph(module_graph(module, "standard", lambda name: name in standard),
                                                   info.document)
        text = graph_text(graph, fragments, library)
        labels = {variable.key for variable in graph.signature.variables}
        tensors = ((label, encoded) for label, encoded in tensors if label.lower() in labels)
        specs = {name: spec for name, spec in specs.items() if name in graph.tensors}  # of tensors kept
    quant_text = info.quant_text if specs == info.graph.quantization else print_quantization(specs) or None
    container.write_model(path, text, tensors, quant_text, compress=compress)


def current_quantization(module: NNEFModule) -> dict[str, QuantSpec]:
    """graph.quant as read, with the entries of quantizers whose parameters changed since loading replaced."""
    specs = dict(module.nnef.graph.quantization)
    for name, quantizer in module.quantizers().items():
        current = quantizer.spec()
        if not _same(current, specs[name]):
            specs[name] = current
    return specs


def _same(current: QuantSpec, original: QuantSpec) -> bool:
    """The same entry up to float32 rounding (the quantizer holds float32 parameters)."""
    if current.op != original.op or set(current.args) != set(original.args):
        return False
    for key, value in current.args.items():
        old = original.args[key]
        if isinstance(value, (bool, int)) and not isinstance(old, float):
            if value != old:
                return False
        elif not np.array_equal(np.float32(value), np.broadcast_to(np.float32(old), np.shape(value))):
            return False
    return True


def _tensors(module: NNEFModule, specs: dict[str, QuantSpec], progress: bool | None, as_stored: bool = True
             ) -> Encoded:
    info = module.nnef
    slots = list(info.slots.values())
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(slots), unit="tensor", desc="saving NNEF tensors")
    try:
        for slot in slots:
            storage = info.storage[slot.key]
            if storage.spec is not None:  # codes follow the variable's current entry
                variable = info.graph.shared_variables()[slot.key][0]
                storage = dataclasses.replace(storage, spec=specs.get(variable.name, storage.spec))
            if not as_stored:
                storage = as_float(storage)
            yield slot.label, _stored(module, slot.path, storage)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _stored(module: NNEFModule, path: str, storage: Storage) -> Callable[[], bytes]:
    return lambda: encode(tensor_at(module, path), storage)


def _encoder(array: np.ndarray) -> Callable[[], bytes]:
    return lambda: tensor_file.encode(array)
