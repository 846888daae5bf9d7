"""Hand-edited twins of the packaged demo model: its folder copied with graph.nnef edited as a person would, run
in the Khronos executor as the independent reference for what a pass must produce."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from formats.khronos_session import run_khronos

from nnef_torch.cli import demo_model_path

TINY = Path(demo_model_path())
TINY_TEXT = (TINY / "graph.nnef").read_text()


def twin(folder: Path, edits: list[tuple[str, str]], *, quant: bool = True) -> Path:
    """The demo model with each (old, new) replacement made in graph.nnef (each must apply once)."""
    shutil.copytree(TINY, folder)
    text = TINY_TEXT
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "graph.nnef").write_text(text)
    if not quant:
        (folder / "graph.quant").unlink()
    return folder


def images(batch: int = 1, size: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 1, size, size)).astype(np.float32)


def khronos_outputs(folder: Path, *inputs: np.ndarray) -> list[np.ndarray]:
    return run_khronos(folder, list(inputs))
