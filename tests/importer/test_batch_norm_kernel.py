"""Per-channel batch normalization runs as torch's inference batch norm over a computed factor and shift: the same
values as the spec's formula (numpy), gradients in every input (mean and variance included, as a torch twin of
the formula gives them), and the zero-mean, unit-variance constants it needs stay out of the state_dict."""
from __future__ import annotations

import copy

import numpy as np
import torch

import nnef_torch
from importer.model_files import rng, write_model

C = 5
TEXT = f"""version 1.0;
graph G( x ) -> ( y )
{{
    x = external<scalar>(shape = [2, {C}, 4, 3]);
    mean = variable<scalar>(shape = [1, {C}], label = 'bn/mean');
    variance = variable<scalar>(shape = [1, {C}], label = 'bn/variance');
    offset = variable<scalar>(shape = [1, {C}], label = 'bn/offset');
    scale = variable<scalar>(shape = [1, {C}], label = 'bn/scale');
    y = batch_normalization(x, mean, variance, offset, scale, epsilon = 1e-3);
}}
"""


def _model(tmp_path):
    r = rng(3)
    arrays = {"bn/mean": r.standard_normal((1, C)), "bn/variance": r.uniform(0.5, 2.0, (1, C)),
              "bn/offset": r.standard_normal((1, C)), "bn/scale": r.standard_normal((1, C))}
    arrays = {label: value.astype(np.float32) for label, value in arrays.items()}
    return nnef_torch.load(write_model(tmp_path, TEXT, arrays)), arrays


def test_values_follow_the_spec_formula(tmp_path):
    module, a = _model(tmp_path)
    x = rng(4).standard_normal((2, C, 4, 3)).astype(np.float32)
    col = {label: value.reshape(1, C, 1, 1).astype(np.float64) for label, value in a.items()}
    expected = (col["bn/offset"] + col["bn/scale"] * (x - col["bn/mean"]) / np.sqrt(col["bn/variance"] + 1e-3))
    with torch.no_grad():
        found = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-5)


def test_gradients_reach_every_input(tmp_path):
    module, _ = _model(tmp_path)
    x = torch.from_numpy(rng(5).standard_normal((2, C, 4, 3)).astype(np.float32)).requires_grad_()
    module(x).square().sum().backward()
    bn = module.bn
    twin = {name: getattr(bn, name).detach().clone().requires_grad_() for name in ("mean", "variance", "offset",
                                                                                    "scale")}
    xt = x.detach().clone().requires_grad_()
    col = {name: value[..., None, None] for name, value in twin.items()}
    y = col["offset"] + col["scale"] * (xt - col["mean"]) / torch.sqrt(col["variance"] + 1e-3)
    y.square().sum().backward()
    torch.testing.assert_close(x.grad, xt.grad, rtol=1e-4, atol=1e-4)
    for name, value in twin.items():
        torch.testing.assert_close(getattr(bn, name).grad, value.grad, rtol=1e-4, atol=1e-4)


def test_constants_stay_out_of_the_state_dict_also_in_copies(tmp_path):
    module, arrays = _model(tmp_path)
    expected = {label.replace("/", ".") for label in arrays}
    assert set(module.state_dict()) == expected
    assert len(list(module.buffers())) >= 2  # the zero mean and unit variance, by value
    assert set(copy.deepcopy(module).state_dict()) == expected
