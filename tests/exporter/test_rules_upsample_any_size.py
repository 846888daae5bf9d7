"""Linear, bilinear and trilinear resampling at sizes that are no integer factor (and antialiased bilinear),
exported alone: the Khronos parser accepts the document, the Khronos executor, tract and nnef_torch's importer
reproduce torch's output, and the re-imported module's input gradient equals torch's. Integer factors keep the
standard `multilinear_upsample`."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import nnef_torch
from exporter.consumers import close, export_and_check

pytestmark = pytest.mark.slow

_GEN = torch.Generator().manual_seed(23)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


class Interpolate(nn.Module):
    def __init__(self, **options: Any):
        super().__init__()
        self.options = options

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, **self.options)


def weighting(shape: torch.Size) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(7))


def torch_gradient(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    leaf = x.clone().requires_grad_(True)
    out = module(leaf)
    out.backward(weighting(out.shape))
    return leaf.grad


def adjoint_gradient(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The gradient of torch's (linear, per-channel) forward, from its response to each one-pixel input."""
    n, c, *spatial = x.shape
    pixels = int(torch.tensor(spatial).prod())
    basis = torch.eye(pixels, dtype=torch.float64).reshape(pixels, 1, *spatial)
    with torch.no_grad():
        responses = module(basis).reshape(pixels, -1)  # the output of each input pixel, flattened
        weights = weighting(module(x).shape).double().reshape(n, c, -1)
        grad = torch.einsum("ko,nco->nck", responses, weights)
    return grad.reshape(x.shape).float()


def operations(folder: Path) -> set[str]:
    return set(re.findall(r"= (\w+)\(", (folder / "graph.nnef").read_text()))


CASES = [  # (id, input shape, F.interpolate options)
    ("linear_scale_1_5", (2, 3, 5), dict(mode="linear", scale_factor=1.5, align_corners=False)),
    ("linear_down_0_6_aligned", (2, 3, 5), dict(mode="linear", scale_factor=0.6, align_corners=True)),
    ("bilinear_scale_1_5", (2, 3, 4, 6), dict(mode="bilinear", scale_factor=1.5, align_corners=False)),
    ("bilinear_scale_1_5_aligned", (2, 3, 4, 6), dict(mode="bilinear", scale_factor=1.5, align_corners=True)),
    ("bilinear_down_0_6", (2, 3, 4, 6), dict(mode="bilinear", scale_factor=0.6, align_corners=False)),
    ("bilinear_size_7_5", (2, 3, 4, 6), dict(mode="bilinear", size=(7, 5), align_corners=False)),
    ("bilinear_size_7_5_aligned", (2, 3, 4, 6), dict(mode="bilinear", size=(7, 5), align_corners=True)),
    # 4x6 -> 8x12, yet torch samples with 1/2.1: no multilinear_upsample by 2
    ("bilinear_integer_size_other_scale", (2, 3, 4, 6), dict(mode="bilinear", scale_factor=2.1,
                                                             align_corners=False)),
    # 4x6 -> 6x10, sampled with 4/6 and 6/10 rather than 1/1.7
    ("bilinear_recomputed_scale", (2, 3, 4, 6), dict(mode="bilinear", scale_factor=1.7, align_corners=False,
                                                     recompute_scale_factor=True)),
    ("trilinear_scale_1_5", (1, 2, 3, 4, 5), dict(mode="trilinear", scale_factor=1.5, align_corners=False)),
    ("trilinear_size_aligned", (1, 2, 3, 4, 5), dict(mode="trilinear", size=(2, 7, 5), align_corners=True)),
    ("antialias_size_7_5", (2, 3, 5, 6), dict(mode="bilinear", size=(7, 5), antialias=True, align_corners=False)),
    ("antialias_down_aligned", (2, 3, 9, 11), dict(mode="bilinear", scale_factor=0.45, antialias=True,
                                                   align_corners=True)),
]


@pytest.mark.parametrize("shape, options", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_resample_any_size(shape: tuple[int, ...], options: dict[str, Any], tmp_path: Path) -> None:
    module, x = Interpolate(**options), randn(*shape)
    folder = tmp_path / "model"
    report = export_and_check(module, (x,), folder)
    assert not report.failures, f"consumers failed: {report.failures}"
    assert report.passed == ["khronos", "tract", "nnef_torch"]
    assert "matmul" in operations(folder) and "multilinear_upsample" not in operations(folder)
    close(torch_gradient(nnef_torch.load(folder), x), torch_gradient(module, x), rtol=2e-5)


def test_antialias_kept_axis_gradient_is_the_adjoint(tmp_path: Path) -> None:
    """With an explicit scale of 1.1 the height keeps its size: torch's antialiased forward copies it, its backward
    interpolates it. The export reproduces the forward; its gradient is the forward's adjoint."""
    module, x = Interpolate(mode="bilinear", scale_factor=(1.1, 0.5), antialias=True), randn(1, 2, 5, 6)
    folder = tmp_path / "model"
    report = export_and_check(module, (x,), folder)
    assert not report.failures and report.passed == ["khronos", "tract", "nnef_torch"]
    assert not torch.allclose(torch_gradient(module, x), adjoint_gradient(module, x), atol=1e-3), \
        "torch's backward no longer differs from its forward's adjoint"
    close(torch_gradient(nnef_torch.load(folder), x), adjoint_gradient(module, x), rtol=2e-5)


INTEGER = [
    ("scale_2", dict(scale_factor=2, align_corners=False)),
    ("scale_2_aligned", dict(scale_factor=2, align_corners=True)),
    ("recomputed_2_1", dict(scale_factor=2.1, recompute_scale_factor=True, align_corners=False)),  # 3x4 -> 6x8
]


@pytest.mark.parametrize("options", [case[1] for case in INTEGER], ids=[case[0] for case in INTEGER])
def test_integer_factor_stays_multilinear_upsample(options: dict[str, Any], tmp_path: Path) -> None:
    """The Khronos executor runs `multilinear_upsample` only for factor 2 without aligned corners (tract not at
    all)."""
    module, x = Interpolate(mode="bilinear", **options), randn(1, 2, 3, 4)
    folder = tmp_path / "model"
    consumers = ("nnef_torch",) if options["align_corners"] else ("khronos", "nnef_torch")
    report = export_and_check(module, (x,), folder, consumers=consumers)
    assert not report.failures and report.passed == list(consumers)
    assert operations(folder) == {"multilinear_upsample"}
    close(torch_gradient(nnef_torch.load(folder), x), torch_gradient(module, x), rtol=2e-5)
