"""All cases of the Khronos OpenVX NNEF conformance suite run to their expected outputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from khronos import conformance_cases, require_conformance

import nnef_torch

pytestmark = pytest.mark.slow

CASES = conformance_cases()


@pytest.mark.parametrize("case", CASES or [None], ids=[case.name for case in CASES] or ["absent"])
def test_conformance_case_matches_expected_output(case):
    require_conformance()
    module = nnef_torch.load(case)
    graph = module.nnef_graph
    inputs = [torch.tensor(nnef_torch.read_tensor(case / f"{name}.dat")) for name in graph.inputs]
    outputs = module(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert len(outputs) == len(graph.outputs)
    for name, output in zip(graph.outputs, outputs):
        expected = nnef_torch.read_tensor(case / f"{name}.dat")
        actual = output.detach().numpy()
        assert actual.shape == expected.shape, name
        scale = max(float(np.max(np.abs(expected))), 1e-30)
        error = float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale
        assert error <= 1e-4, f"{case.name}/{name}: max error {error:.3g} relative to the largest expected value"
