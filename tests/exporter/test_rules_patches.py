"""Export of nn.Unfold (im2col) and nn.Fold (col2im) as convolutions with one-hot filters
(nnef_torch/exporter/rules/patches.py), checked in the Khronos parser and executor, tract and re-import against
torch, with gradients against torch's."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from exporter.consumers import export_and_check
from exporter.grads import check_gradients

TRACT_DECONV = "tract reads deconv filters in another layout than the Khronos executor ([out, in / groups, ...])"
_GEN = torch.Generator().manual_seed(3)

CASES = [
    ("unfold", nn.Unfold(2, padding=1, stride=2), (1, 2, 5, 5), ()),
    ("unfold_dilated", nn.Unfold((2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)), (2, 3, 6, 7), ()),
    ("unfold_unbatched", nn.Unfold(2), (2, 4, 4), ()),
    ("fold", nn.Fold((4, 5), 2), (1, 8, 12), ("tract",)),
    ("fold_padded_strided", nn.Fold((5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), (2, 12, 12),
     ("tract",)),
]


@pytest.mark.parametrize("module, shape, tract_fails", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_patches(module, shape, tract_fails, tmp_path) -> None:
    inputs = (torch.randn(*shape, generator=_GEN),)
    report = export_and_check(module, inputs, tmp_path / "model")
    expected = {"khronos", "tract", "nnef_torch"} - set(tract_fails)
    assert set(report.passed) == expected, report.failures
    if tract_fails:
        assert "deconv" in report.failures["tract"], TRACT_DECONV
    check_gradients(module, inputs, tmp_path / "model")


def test_unfold_then_fold_round_trip(tmp_path) -> None:
    """Fold(Unfold(x)) counts each pixel once per patch covering it: torch's own composition is the reference."""
    class RoundTrip(nn.Module):
        def __init__(self):
            super().__init__()
            self.unfold, self.fold = nn.Unfold(3, padding=1), nn.Fold((4, 4), 3, padding=1)

        def forward(self, x):
            return self.fold(self.unfold(x) * 2.0)

    inputs = (torch.randn(1, 2, 4, 4, generator=_GEN),)
    report = export_and_check(RoundTrip(), inputs, tmp_path / "model")
    assert set(report.passed) == {"khronos", "nnef_torch"}, report.failures
