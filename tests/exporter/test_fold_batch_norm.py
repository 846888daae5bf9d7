"""`fold_batch_norm=True`: inference batch norm folded into the convolution or linear layer before it
(`nnef_torch.exporter.fold`), checked in nnef_torch, the Khronos executor and tract, and under fake quantization."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import nnef_torch
from exporter.consumers import close, khronos_parse, run_khronos, run_tract
from nnef_torch.quant import QuantConfig, prepare, set_observing


def _statistics(module: nn.Module) -> nn.Module:
    """Batch-norm statistics and affine parameters away from the identity, as a trained model has them."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.modules.batchnorm._BatchNorm):
                layer.running_mean.uniform_(-1.0, 1.0)
                layer.running_var.uniform_(0.5, 2.0)
                layer.weight.uniform_(0.5, 2.0)
                layer.bias.uniform_(-1.0, 1.0)
    return module.eval()


class SmallCNN(nn.Module):
    """conv-bn-relu twice (the second conv without a bias), then linear-bn1d."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, bias=False), nn.BatchNorm2d(8)
        self.fc, self.bn3 = nn.Linear(8, 5), nn.BatchNorm1d(5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.bn3(self.fc(x.mean((2, 3))))


class Functional(nn.Module):
    """F.batch_norm(training=False) on the module's buffers after a Conv1d."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.register_buffer("mean", torch.linspace(-1, 1, 4))
        self.register_buffer("var", torch.linspace(0.5, 2, 4))

    def forward(self, x):
        return F.batch_norm(self.conv(x), self.mean, self.var, training=False)


class TwoUsers(nn.Module):
    """A convolution whose output the batch norm and a residual both read: not folded."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


X = torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(0))


def _operations(text: str) -> list[str]:
    return re.findall(r"=\s*(\w+)\s*[<(]", text)


def _variables(model: nnef_torch.Model) -> int:
    return _operations(model.text).count("variable")


def test_small_cnn_folds_and_runs_in_every_consumer(tmp_path):
    torch.manual_seed(0)
    module = _statistics(SmallCNN())
    with torch.no_grad():
        expected = module(X).numpy()
    plain = nnef_torch.export(module, X)
    folded = nnef_torch.export(module, X, fold_batch_norm=True)
    assert "batch_normalization" in _operations(plain.text)
    assert "batch_normalization" not in _operations(folded.text)
    assert _variables(folded) < _variables(plain)
    folded.save(tmp_path)
    khronos_parse(tmp_path)
    with torch.no_grad():
        close(nnef_torch.load(tmp_path)(X).numpy(), expected)
    close(run_khronos(tmp_path, [X.numpy()])[0], expected)
    close(run_tract(tmp_path, [X.numpy()])[0], expected)


def test_save_takes_the_option(tmp_path):
    torch.manual_seed(1)
    module = _statistics(SmallCNN())
    nnef_torch.save(module, tmp_path / "m.nnef", X, fold_batch_norm=True)
    assert "batch_normalization" not in (tmp_path / "m.nnef" / "graph.nnef").read_text()


def test_functional_batch_norm_after_conv1d_folds():
    torch.manual_seed(2)
    module = Functional().eval()
    x = torch.randn(2, 3, 10)
    model = nnef_torch.export(module, x, fold_batch_norm=True)
    assert "batch_normalization" not in _operations(model.text)
    assert "var" not in " ".join(re.findall(r"label = '([^']*)'", model.text))


def test_conv_with_two_users_is_not_folded(tmp_path):
    torch.manual_seed(3)
    module = _statistics(TwoUsers())
    x = torch.randn(1, 4, 6, 6)
    model = nnef_torch.export(module, x, fold_batch_norm=True)
    assert "batch_normalization" in _operations(model.text)
    model.save(tmp_path)
    with torch.no_grad():
        close(nnef_torch.load(tmp_path)(x).numpy(), module(x).numpy())


def test_training_mode_batch_norm_is_not_folded():
    module = _statistics(SmallCNN()).train()
    model = nnef_torch.export(module, X, fold_batch_norm=True)
    assert "conv" in _operations(model.text) and len(_operations(model.text)) > 10  # statistics computed


def test_user_module_is_unchanged():
    torch.manual_seed(4)
    module = _statistics(SmallCNN())
    before = {name: value.clone() for name, value in module.state_dict().items()}
    parameters = {name: id(value) for name, value in module.named_parameters()}
    nnef_torch.export(module, X, fold_batch_norm=True)
    assert all(torch.equal(before[name], value) for name, value in module.state_dict().items())
    assert parameters == {name: id(value) for name, value in module.named_parameters()}
    assert not module.training and all(not m.training for m in module.modules())


def _qat(per_channel: bool = True) -> nn.Module:
    """SmallCNN with 8-bit fake-quantized weights (outputs float, so each batch norm follows its layer)."""
    torch.manual_seed(5)
    module = prepare(_statistics(SmallCNN()),
                     QuantConfig(activations=None, inputs=False, weights={"per_channel": per_channel}))
    module(X)
    set_observing(module, False)
    return module.eval()


def test_qat_folded_export_matches_the_fake_quantized_module(tmp_path):
    module = _qat()
    with torch.no_grad():
        expected = module(X).numpy()
    model = nnef_torch.export(module, X, fold_batch_norm=True)
    assert "batch_normalization" not in _operations(model.text)
    assert model.quant_text.count("zero_point_linear_quantize") == 3
    model.save(tmp_path)
    with torch.no_grad():
        close(nnef_torch.load(tmp_path)(X).numpy(), expected)
    # weights stored as 8-bit codes: the scaled quantizer gives back the same codes
    nnef_torch.export(module, X, fold_batch_norm=True, quantization={"weights": "quantized"}).save(tmp_path / "q")
    with torch.no_grad():
        close(nnef_torch.load(tmp_path / "q")(X).numpy(), expected)


def test_qat_per_tensor_weights_refuse_to_fold():
    module = _qat(per_channel=False)
    with pytest.raises(nnef_torch.ExportError, match="per-tensor"):
        nnef_torch.export(module, X, fold_batch_norm=True)


def test_qat_negative_batch_norm_scale_refuses_to_fold():
    module = _qat()
    with torch.no_grad():
        module.bn1.weight[0] = -1.0
    with pytest.raises(nnef_torch.ExportError, match="not positive"):
        nnef_torch.export(module, X, fold_batch_norm=True)
    assert np.isfinite(module(X).detach().numpy()).all()
