"""The ops implemented as training-mode submodules (`nnef_torch/ops/torch_training.py`), against numpy: eval mode
computes the NNEF definition, training mode uses and moves batch statistics (torch's momentum convention, biased
variance), dropout drops in training only, sharing decisions along `axes`."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nnef_torch.errors import NNEFShapeError
from nnef_torch.ops.registry import entry
from nnef_torch.ops.torch_training import BatchNormMoving, Dropout

RS = np.random.RandomState(3)
X = RS.standard_normal((4, 3, 5, 2)).astype(np.float32) * 2 + 1
MEAN, VAR = RS.standard_normal(3).astype(np.float32), RS.uniform(0.5, 2, 3).astype(np.float32)
GAMMA, BETA = RS.uniform(0.5, 2, 3).astype(np.float32), RS.standard_normal(3).astype(np.float32)


def _numpy_bn(x, mean, var, beta, gamma, eps):
    shape = (1, -1, 1, 1)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * np.reshape(gamma, shape) + \
        np.reshape(beta, shape)


@pytest.mark.parametrize("gamma", [GAMMA, 1.0, 2.5], ids=["vector", "one", "number"])
def test_batch_norm_moving_eval_is_inference_batch_normalization(gamma):
    module = BatchNormMoving(epsilon=1e-3, momentum=0.1).eval()
    mean, var = torch.from_numpy(MEAN.copy()), torch.from_numpy(VAR.copy())
    g = torch.from_numpy(gamma) if isinstance(gamma, np.ndarray) else gamma
    out = module(torch.from_numpy(X), mean, var, torch.from_numpy(BETA), g)
    np.testing.assert_allclose(out.numpy(), _numpy_bn(X, MEAN, VAR, BETA, np.asarray(gamma), 1e-3), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(mean.numpy(), MEAN)  # eval never moves the statistics


def test_batch_norm_moving_training_uses_and_moves_batch_statistics():
    module = BatchNormMoving(epsilon=1e-5, momentum=0.25).train()
    mean, var = torch.from_numpy(MEAN.copy()), torch.from_numpy(VAR.copy())
    out = module(torch.from_numpy(X), mean, var, torch.from_numpy(BETA), torch.from_numpy(GAMMA))
    batch_mean, batch_var = X.mean(axis=(0, 2, 3)), X.var(axis=(0, 2, 3))  # biased, as MXNet
    np.testing.assert_allclose(out.detach().numpy(), _numpy_bn(X, batch_mean, batch_var, BETA, GAMMA, 1e-5),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), 0.75 * MEAN + 0.25 * batch_mean, rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), 0.75 * VAR + 0.25 * batch_var, rtol=1e-6)


def test_batch_norm_moving_with_trainable_statistics_in_eval_mode():
    mean = torch.nn.Parameter(torch.from_numpy(MEAN.copy()))
    out = BatchNormMoving(1e-3, 0.1).eval()(torch.from_numpy(X), mean, torch.from_numpy(VAR), 0.0, 1.0)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), _numpy_bn(X, MEAN, VAR, 0.0, 1.0, 1e-3), rtol=1e-5, atol=1e-5)
    assert mean.grad is not None


def test_dropout_shares_one_decision_along_axes():
    torch.manual_seed(0)
    x = torch.ones(8, 6, 5)
    out = Dropout(rate=0.5, axes=[1, 2]).train()(x)
    per_sample = out.reshape(8, -1)
    assert all(len(set(row.tolist())) == 1 for row in per_sample)  # all kept (2.0) or all dropped (0.0)
    assert set(per_sample[:, 0].tolist()) <= {0.0, 2.0}
    torch.testing.assert_close(Dropout(0.5, [1]).eval()(x), x)


def test_shape_rules_and_registration():
    assert entry("batch_norm_moving", "torch").shape((2, 3, 4), (3,), (3,), (3,), (), epsilon=1e-5, momentum=0.1) == (2, 3, 4)
    with pytest.raises(NNEFShapeError, match="'offset' must have shape \\[3\\]"):
        entry("batch_norm_moving", "torch").shape((2, 3, 4), (3,), (3,), (1, 3), (), epsilon=1e-5, momentum=0.1)
    assert entry("batch_norm_moving", "torch").state == ("mean", "variance")
    with pytest.raises(NNEFShapeError, match="'mean' must have shape \\[3\\]"):
        entry("batch_norm_moving", "torch").shape((2, 3, 4), (1, 3), (3,), (), (), epsilon=1e-5, momentum=0.1)
    with pytest.raises(NNEFShapeError, match="'momentum' must be in"):
        entry("batch_norm_moving", "torch").shape((2, 3), (3,), (3,), (), (), epsilon=1e-5, momentum=1.5)
    with pytest.raises(NNEFShapeError, match="'rate' must be in"):
        entry("dropout").shape((2, 3), rate=1.0, axes=[])
    assert entry("dropout").module is Dropout and entry("batch_norm_moving", "torch").module is BatchNormMoving
