"""Bicubic interpolation and grid sampling, exported alone: the Khronos parser and shape inference accept the
document, the Khronos executor, tract and nnef_torch's importer reproduce torch's output, and the re-imported
module's gradients (input, and grid for bilinear sampling) equal torch's."""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import nnef_torch
from exporter.consumers import close, export_and_check

pytestmark = pytest.mark.slow

_GEN = torch.Generator().manual_seed(19)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def spread(*shape: int, reach: float = 1.6) -> torch.Tensor:
    """Grid coordinates uniform in [-reach, reach]: many fall outside [-1, 1], where padding decides."""
    return (torch.rand(*shape, generator=_GEN) * 2 - 1) * reach


class Interpolate(nn.Module):
    def __init__(self, **options: Any):
        super().__init__()
        self.options = options

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, mode="bicubic", **self.options)


class GridSample(nn.Module):
    def __init__(self, **options: Any):
        super().__init__()
        self.options = options

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(x, grid, **self.options)


def weighting(shape: torch.Size) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(7))


def check_gradients(module: nn.Module, inputs: tuple[torch.Tensor, ...], folder: Path,
                    differentiable: tuple[bool, ...], expected: list[torch.Tensor] | None = None) -> None:
    """The re-imported module's gradients of a random weighting of the output equal torch's (or `expected`), for
    each input; an input marked not differentiable (the grid of nearest sampling) has zero gradient in torch and
    none or zero in the re-imported module."""
    loaded = nnef_torch.load(folder)
    grads = []
    for model in (module, loaded):
        leaves = [x.clone().requires_grad_(True) for x in inputs]
        out = model(*leaves)
        out.backward(weighting(out.shape))
        grads.append([torch.zeros_like(x) if x.grad is None else x.grad for x in leaves])
    for found, wanted, smooth in zip(grads[1], expected or grads[0], differentiable):
        if not smooth:
            assert not wanted.any(), "torch's gradient of a non-differentiable input is zero"
        close(found, wanted, rtol=2e-5)


def check_consumers(module: nn.Module, inputs: tuple[torch.Tensor, ...], folder: Path) -> None:
    report = export_and_check(module, inputs, folder)
    assert not report.failures, f"consumers failed: {report.failures}"
    assert report.passed == ["khronos", "tract", "nnef_torch"]


BICUBIC = [
    ("up_to_size", dict(size=(9, 13), align_corners=False)),
    ("up_to_size_aligned", dict(size=(9, 13), align_corners=True)),
    ("scale_2_5", dict(scale_factor=2.5, align_corners=False)),  # torch samples with 1/2.5, not in/out
    ("down_0_6", dict(scale_factor=0.6, align_corners=False)),
    ("down_aligned_to_one_row", dict(size=(1, 4), align_corners=True)),
    ("scale_1_1_same_size", dict(scale_factor=1.1, align_corners=False)),  # 5 -> 5 and 6 -> 6, yet not a copy
    ("antialias_down", dict(size=(2, 4), antialias=True, align_corners=False)),  # the filter widens to 2.5 and 1.5
    ("antialias_down_aligned", dict(scale_factor=0.45, antialias=True, align_corners=True)),
    ("antialias_up_one_axis", dict(size=(8, 6), antialias=True, align_corners=False)),  # width kept: a copy
]


def adjoint_gradient(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The gradient of torch's (linear, per-channel) forward from its response to each one-pixel image: torch's
    own backward copies the gradient whenever the output has the input's size, though its forward with an explicit
    scale factor is then no copy."""
    n, c, h, w = x.shape
    basis = torch.eye(h * w, dtype=torch.float64).reshape(h * w, 1, h, w)
    with torch.no_grad():
        responses = module(basis)  # [h*w, 1, H_out, W_out]: the output of each input pixel
        weights = weighting(module(x).shape).double()
        grad = torch.einsum("kuv,ncuv->nck", responses[:, 0], weights)
    return grad.reshape(n, c, h, w).float()


@pytest.mark.parametrize("options", [case[1] for case in BICUBIC], ids=[case[0] for case in BICUBIC])
def test_bicubic(options: dict[str, Any], tmp_path: Path) -> None:
    module, inputs = Interpolate(**options), (randn(2, 3, 5, 6),)
    check_consumers(module, inputs, tmp_path / "model")
    same_size = module(inputs[0]).shape == inputs[0].shape
    expected = [adjoint_gradient(module, inputs[0])] if same_size else None
    check_gradients(module, inputs, tmp_path / "model", (True,), expected)


GRID_CASES = list(itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)))


@pytest.mark.parametrize("mode, padding, align_corners", GRID_CASES,
                         ids=[f"{m}-{p}-{'aligned' if a else 'unaligned'}" for m, p, a in GRID_CASES])
def test_grid_sample(mode: str, padding: str, align_corners: bool, tmp_path: Path) -> None:
    module = GridSample(mode=mode, padding_mode=padding, align_corners=align_corners)
    inputs = (randn(2, 3, 4, 5), spread(2, 3, 7, 2, reach=2.6 if padding == "reflection" else 1.6))
    check_consumers(module, inputs, tmp_path / "model")
    check_gradients(module, inputs, tmp_path / "model", (True, mode == "bilinear"))


@pytest.mark.parametrize("align_corners", [False, True], ids=["unaligned", "aligned"])
def test_nearest_rounds_half_to_even(align_corners: bool, tmp_path: Path) -> None:
    """Every sampling point lies exactly halfway between two pixels on both axes: torch takes the even one."""
    size = 5 if align_corners else 4
    halves = torch.arange(size - 1, dtype=torch.float64) + 0.5  # pixel coordinates 0.5, 1.5, ...
    g = 2 * halves / (size - 1) - 1 if align_corners else 2 * (halves + 0.5) / size - 1
    grid = torch.stack(torch.meshgrid(g, g.flip(0), indexing="xy"), dim=-1).unsqueeze(0).float()
    back = (grid.double() + 1) * ((size - 1) / 2 if align_corners else size / 2) - (0 if align_corners else 0.5)
    assert torch.equal(back - back.floor(), torch.full_like(back, 0.5)), "the grid must hit exact ties"
    inputs = (randn(1, 2, size, size), grid)
    check_consumers(GridSample(mode="nearest", padding_mode="zeros", align_corners=align_corners), inputs,
                    tmp_path / "model")


REFUSED = [
    ("grid_sample_bicubic", GridSample(mode="bicubic", align_corners=False), (randn(1, 1, 4, 4), spread(1, 2, 2, 2)),
     "mode='bicubic'"),
    ("grid_sample_volumetric", GridSample(align_corners=False), (randn(1, 1, 2, 3, 3), spread(1, 2, 2, 2, 3)),
     "5-D"),
    # 128 channels x 512 rows x 4096 points: a 2^28-item product (1 GiB of float32)
    ("grid_sample_too_large", GridSample(align_corners=False), (torch.zeros(1, 128, 512, 2), spread(1, 64, 64, 2)),
     "intermediate tensors"),
]


@pytest.mark.parametrize("name, module, inputs, reason", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_reason(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], reason: str) -> None:
    with pytest.raises(nnef_torch.ExportError, match=reason):
        nnef_torch.export(module, inputs)
