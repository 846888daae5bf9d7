"""An MXNet symbol without input shapes loads (its Parameters from the .params file) and binds its shapes at its
first call, as MXNet binds a symbol; a call with other shapes converts the symbol again for them. Each equals the
same model loaded with those shapes given."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFOptionError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MOBILENET = FIXTURES / "zoo" / "mobilenet0.25-symbol.json"  # real parameters beside it (mobilenet0.25-0000.params)
TRAINING = FIXTURES / "training"
SIZES = ([2, 3, 32, 32], [1, 3, 48, 40])


def test_a_symbol_without_shapes_binds_them_at_its_first_call_and_takes_others():
    module = nnef_torch.load(MOBILENET).eval()
    assert module.nnef.unbound is not None
    keys = list(module.state_dict())
    assert len(keys) > 50
    for shape in SIZES:
        x = torch.from_numpy(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32))
        reference = nnef_torch.load(MOBILENET, input_shapes={"data": shape}).eval()
        assert set(reference.state_dict()) <= set(keys)
        with torch.no_grad():
            torch.testing.assert_close(module(x), reference(x), rtol=1e-5, atol=1e-5)
    assert module.nnef.signature == (tuple(SIZES[0]),) and list(module.forms()) == [(tuple(SIZES[1]),)]
    assert list(module.state_dict()) == keys


def test_training_at_the_first_call_gives_mxnets_step():
    with np.load(TRAINING / "cnn.npz") as arrays:
        fixture = dict(arrays)
    module = nnef_torch.load(TRAINING / "cnn-symbol.json").train()
    output = module(torch.from_numpy(fixture["data"]))
    np.testing.assert_allclose(output.detach().numpy(), fixture["output"], rtol=1e-4, atol=1e-5)
    output.backward(torch.from_numpy(fixture["head_grad"]))
    assert module.get_parameter("fc_weight").grad is not None
    buffers = dict(module.named_buffers())
    for key, expected in fixture.items():
        if key.startswith("after:"):  # the moving statistics MXNet moved
            np.testing.assert_allclose(buffers[key[len("after:"):]].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_save_and_viz_wait_for_the_first_call(tmp_path):
    module = nnef_torch.load(TRAINING / "cnn-symbol.json").eval()
    with pytest.raises(NNEFOptionError, match=r"bind at its first call \(the graph does not say the shape of "
                                              r"input\(s\) \['data'\]\)"):
        module.save(tmp_path / "early")
    with pytest.raises(NNEFOptionError, match="bind at its first call"):
        nnef_torch.viz.tree(module)
    x = torch.rand(4, 3, 8, 8)
    y = module(x)
    module.save(tmp_path / "saved")
    assert "[4, 3, 8, 8]" in (tmp_path / "saved" / "graph.nnef").read_text()
    torch.testing.assert_close(nnef_torch.load(tmp_path / "saved").eval()(x), y)
    assert "scalar[4,3,8,8]" in nnef_torch.viz.tree(module)
