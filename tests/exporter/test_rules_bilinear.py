"""Export of nn.Bilinear (aten.bilinear, and aten._trilinear where the graph is decomposed) as matrix products
(nnef_torch/exporter/rules/nn.py), checked in the Khronos parser and executor, tract and re-import against torch,
with gradients of inputs, weight and bias against torch's."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from exporter.consumers import export_and_check
from exporter.grads import check_gradients

_GEN = torch.Generator().manual_seed(5)


def _bilinear(bias: bool, train: bool) -> nn.Module:
    torch.manual_seed(0)
    module = nn.Bilinear(3, 4, 5, bias=bias)
    return module.train(train)


CASES = [  # training mode goes through the decomposed graph, where bilinear is aten._trilinear
    ("batch", _bilinear(True, False), (2, 3), (2, 4)),
    ("leading_axes_no_bias", _bilinear(False, False), (6, 2, 3), (6, 2, 4)),
    ("training_mode", _bilinear(True, True), (2, 3), (2, 4)),
]


@pytest.mark.parametrize("module, shape1, shape2", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bilinear(module, shape1, shape2, tmp_path) -> None:
    inputs = (torch.randn(*shape1, generator=_GEN), torch.randn(*shape2, generator=_GEN))
    report = export_and_check(module, inputs, tmp_path / "model", rtol=1e-5)
    assert set(report.passed) == {"khronos", "tract", "nnef_torch"}, report.failures
    check_gradients(module, inputs, tmp_path / "model")


def test_general_trilinear(tmp_path) -> None:
    """_trilinear with another pattern of expanded and summed axes: the broadcast product, summed."""
    class Trilinear(nn.Module):
        def forward(self, a, b, c):
            return torch.ops.aten._trilinear(a, b, c, [2], [0], [1], [1])

    inputs = (torch.randn(2, 3, generator=_GEN), torch.randn(3, 4, generator=_GEN), torch.randn(2, 4, generator=_GEN))
    report = export_and_check(Trilinear(), inputs, tmp_path / "model")
    assert set(report.passed) == {"khronos", "tract", "nnef_torch"}, report.failures
    check_gradients(Trilinear(), inputs, tmp_path / "model")
