"""What the ONNX tests compare against: onnxruntime's outputs on seeded inputs, and a source torch module's input
gradients (on the path of this folder's tests, as `import onnxruntime_oracle`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch


def inputs_of(path: Path) -> list[np.ndarray]:
    """Seeded float inputs of the shapes the file declares."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path))
    state = np.random.RandomState(0)
    return [state.randn(*spec.shape).astype(np.float32) for spec in session.get_inputs()]


def assert_same_input_gradients(source: Any, loaded: Any, xs: list[torch.Tensor]) -> None:
    """`loaded` and `source` give the same gradients of a seeded weighting of their outputs w.r.t. the inputs
    (the source's parameters get theirs too, for the caller to compare)."""
    theirs = [x.clone().requires_grad_() for x in xs]
    mine = [x.clone().requires_grad_() for x in xs]
    expected, got = source(*theirs), loaded(*mine)
    weight = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    (expected * weight).sum().backward()
    (got * weight).sum().backward()
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def assert_saved_nnef_runs(path: Path, folder: Path) -> None:
    """The module loaded from the ONNX file at `path`, saved as NNEF in `folder`, passes the Khronos parser, and
    the Khronos executor gives onnxruntime's outputs on the same file."""
    import nnef
    import onnxruntime as ort
    from formats.khronos_session import run_khronos

    import nnef_torch
    xs = inputs_of(path)
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {spec.name: x for spec, x in zip(session.get_inputs(), xs)})
    nnef_torch.save(nnef_torch.load(path), folder, tuple(torch.from_numpy(x) for x in xs))
    nnef.load_graph(str(folder))
    for got, want in zip(run_khronos(folder, xs), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
