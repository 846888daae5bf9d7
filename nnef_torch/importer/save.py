"""Save an imported module back as NNEF: its graph text and graph.quant as read, each variable's current value
encoded as it was stored, written atomically and one tensor at a time."""
from __future__ import annotations

import os
from typing import Callable, Iterator

from nnef_torch.errors import NNEFError
from nnef_torch.format import container
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.importer.weights import Storage, encode


def save_imported(module: NNEFModule, path: str | os.PathLike, *, compress: bool | None = None,
                  progress: bool | None = None) -> None:
    info = module.nnef
    for slot in info.slots.values():
        if tensor_at(module, slot.path).is_meta:
            raise NNEFError(f"variable '{slot.label}' has no data (the module was loaded on the meta device); "
                            "call .materialize() before saving")
    container.write_model(path, info.graph_text, _tensors(module, progress), info.quant_text, compress=compress)


def _tensors(module: NNEFModule, progress: bool | None) -> Iterator[tuple[str, Callable[[], bytes]]]:
    info = module.nnef
    slots = list(info.slots.values())
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(slots), unit="tensor", desc="saving NNEF tensors")
    try:
        for slot in slots:
            yield slot.label, _encoder(module, slot.path, info.storage[slot.key])
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _encoder(module: NNEFModule, path: str, storage: Storage) -> Callable[[], bytes]:
    return lambda: encode(tensor_at(module, path), storage)
