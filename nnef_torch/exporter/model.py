"""`nnef_torch.Model`: an exported model in memory (graph text, graph.quant text, tensor values by label, and how
variables with a graph.quant entry are stored: float, integer codes or the seed layout)."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from nnef_torch.format import container, tensor_file
from nnef_torch.importer.weights import Storage
from nnef_torch.importer.weights import encode as encode_stored
from nnef_torch.ir.graph import Graph

PROGRESS_BYTES = 64 << 20  # a progress bar shows on a terminal from this much tensor data


@dataclass
class Model:
    """What `nnef_torch.export` returns. `tensors` holds the module's own tensors (no copies): they are encoded one
    at a time when the model is saved, so saving needs little memory beyond the module itself."""

    graph: Graph
    text: str
    tensors: dict[str, torch.Tensor]
    quant_text: str | None = None
    fragments: tuple[str, ...] = field(default=())
    storage: dict[str, Storage] = field(default_factory=dict)  # label -> quantized layout (float when absent)
    # an export with symbolic extents: each input's shape with its symbolic extents by name ('S', '4*S'), and
    # each symbol's range (lowest, highest or None); the text declares the example extents
    dims: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    symbols: dict[str, tuple[int, int | None]] = field(default_factory=dict)

    def save(self, path: str | os.PathLike, *, compress: bool | None = None, progress: bool | None = None) -> None:
        """Write graph.nnef, graph.quant and one .dat per variable to a folder or a .tgz/.tar.gz/.tar archive,
        atomically: the previous model at `path` stays intact until the new one is complete."""
        container.write_model(path, self.text, self.encoded(progress), self.quant_text, compress=compress)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def encoded(self, progress: bool | None = None) -> Iterator[tuple[str, Callable[[], bytes]]]:
        """Each variable's label and the function that encodes its .dat, in turn (for `container.write_model`)."""
        if progress is None:
            progress = self.nbytes() >= PROGRESS_BYTES and _on_terminal()
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=self.nbytes(), unit="B", unit_scale=True, desc="writing NNEF tensors")
        try:
            for label, value in self.tensors.items():
                yield label, _encoder(value, bar, self.storage.get(label))
        finally:
            if bar is not None:
                bar.close()


def _encoder(value: torch.Tensor, bar: Any, storage: Storage | None = None) -> Callable[[], bytes]:
    def encode() -> bytes:
        data = tensor_file.encode(_numpy(value)) if storage is None else encode_stored(value, storage)
        if bar is not None:
            bar.update(value.numel() * value.element_size())
        return data
    return encode


def _numpy(value: torch.Tensor):
    value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    if value.dtype == torch.bfloat16:
        value = value.float()
    return value.contiguous().numpy()


def _on_terminal() -> bool:
    import sys
    return sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
