"""Save an imported module back as NNEF: its graph text as read (a document read with deviations from the spec is
written as standard NNEF, see `normalize.py`), graph.quant with each quantizer's current parameters (the text as
read while none changed), each variable's current value encoded as it was stored (quantized codes by its current
graph.quant entry), written atomically and one tensor at a time."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator

import numpy as np

from nnef_torch.errors import NNEFError, NNEFOptionError
from nnef_torch.format import container
from nnef_torch.format.quant_file import QuantSpec, print_quantization
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.importer.weights import Storage, encode


def save_imported(module: NNEFModule, path: str | os.PathLike, *, compress: bool | None = None,
                  progress: bool | None = None, dialect: str | None = None) -> None:
    info = module.nnef
    for slot in info.slots.values():
        if tensor_at(module, slot.path).is_meta:
            raise NNEFError(f"variable '{slot.label}' has no data (the module was loaded on the meta device); "
                            "call .materialize() before saving")
    from nnef_torch.dialects.tract_core import is_dialect
    if is_dialect(info.graph.extensions):  # standard NNEF, or tract's form (nnef_torch.dialects.tract_core.save)
        from nnef_torch.dialects.tract_core.save import save_tract
        return save_tract(module, path, dialect=dialect, compress=compress, progress=progress)
    if dialect is not None:
        raise NNEFOptionError(f"dialect={dialect!r} applies to a module read from a document of that dialect "
                              "('extension tract_registry tract_core;'); this one is standard NNEF")
    specs = current_quantization(module)
    text, tensors = info.graph_text, _tensors(module, specs, progress)
    if info.deviations:  # read leniently: written as standard NNEF (README, "Deviations read")
        from nnef_torch.importer.normalize import standard_document
        text, graph = standard_document(module)
        labels = {variable.key for variable in graph.signature.variables}
        tensors = ((label, encode) for label, encode in tensors if label.lower() in labels)
        specs = {name: spec for name, spec in specs.items() if name in graph.tensors}  # of tensors kept
    quant_text = info.quant_text if specs == info.graph.quantization else print_quantization(specs) or None
    container.write_model(path, text, tensors, quant_text, compress=compress)


def current_quantization(module: NNEFModule) -> dict[str, QuantSpec]:
    """graph.quant as read, with the entries of quantizers whose parameters changed since loading replaced."""
    info = module.nnef
    specs = dict(info.graph.quantization)
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


def _tensors(module: NNEFModule, specs: dict[str, QuantSpec],
             progress: bool | None) -> Iterator[tuple[str, Callable[[], bytes]]]:
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
            yield slot.label, _encoder(module, slot.path, storage)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _encoder(module: NNEFModule, path: str, storage: Storage) -> Callable[[], bytes]:
    return lambda: encode(tensor_at(module, path), storage)
