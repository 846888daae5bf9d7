"""Transposed convolutions exported with target="tract" (tract reads `deconv` filters as [out, in/groups, ...] and
`output_shape` as the spatial extents, `exporter/tract_forms.py`): tract and nnef_torch's reading of the file
both match torch, and the standard export still writes NNEF's own `deconv`."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import nnef_torch

pytestmark = pytest.mark.slow

GENERATOR = torch.Generator().manual_seed(11)
CASES = {
    "2d": (nn.ConvTranspose2d(4, 6, 2, stride=2), (2, 4, 5, 6)),
    "2d_groups_output_padding": (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                                 (1, 4, 5, 6)),
    "2d_uneven_dilation": (nn.ConvTranspose2d(6, 4, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
                                              groups=2, dilation=(1, 2)), (1, 6, 5, 6)),
    "1d_depthwise": (nn.ConvTranspose1d(3, 3, 3, stride=2, groups=3, bias=False), (2, 3, 7)),
    "3d": (nn.ConvTranspose3d(2, 4, 2, stride=2), (1, 2, 3, 3, 3)),
    "fold": (nn.Fold((6, 6), 3), (2, 18, 16)),  # col2im: a deconv with one-hot filters
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_deconv_for_tract(case, tmp_path):
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    module, shape = case
    x = torch.randn(*shape, generator=GENERATOR)
    with torch.no_grad():
        expected = module(x).numpy()
    tolerance = 1e-5 * np.abs(expected).max()
    model = nnef_torch.export(module, (x,), target="tract")
    model.save(tmp_path / "tract")
    found = tract.nnef().load(str(tmp_path / "tract")).into_runnable().run([x.numpy()])[0].to_numpy()
    np.testing.assert_allclose(found, expected, atol=tolerance)
    with torch.no_grad():
        np.testing.assert_allclose(nnef_torch.load(tmp_path / "tract")(x).numpy(), expected, atol=tolerance)
    standard = nnef_torch.export(module, (x,)).text
    assert f"output_shape = {list(expected.shape)}" in standard and "transpose(" not in standard
