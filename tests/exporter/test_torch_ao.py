"""torch.ao.quantization fake quantization exported as NNEF quantization.

Each torch.ao quantizer becomes a zero_point_linear_quantize entry with its scale and zero point; the re-imported
model (nnef_torch's FakeQuantize, halfway cases rounded away from zero, x / scale) matches torch (halfway cases to
even, x * (1 / scale)) within one quantization step, and the user's module is left exactly as it was. Eager
`prepare_qat` and FX `prepare_qat_fx` models are checked end to end with the Khronos parser and re-import, and a
per-tensor 8-bit QAT model runs in tract on its quantized .dat codes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

import nnef_torch
from exporter.consumers import khronos_parse

tq = pytest.importorskip("torch.ao.quantization")
from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize  # noqa: E402
from torch.ao.quantization.quantize_fx import prepare_qat_fx  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
torch.manual_seed(0)
X = torch.randn(8, 3, 6, 6) * 2


def calibrated(q: nn.Module, data: torch.Tensor = X) -> nn.Module:
    for _ in range(2):
        q(data)
    q.apply(tq.disable_observer)
    return q.eval()


def minmax(**kw):
    return tq.FakeQuantize(observer=tq.MovingAverageMinMaxObserver, **kw)


def learnable():
    q = _LearnableFakeQuantize(observer=tq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255, scale=0.05,
                               zero_point=10.3, use_grad_scaling=True)
    return q.enable_param_learning()


QUANTIZERS = {  # name: (the calibrated quantizer, (bits, signed, symmetric) of its entry)
    "per-tensor quint8": (lambda: calibrated(minmax(quant_min=0, quant_max=255)), (8, False, False)),
    "reduce_range 0..127": (lambda: calibrated(minmax(quant_min=0, quant_max=127)), (7, False, False)),
    "per-tensor symmetric qint8": (lambda: calibrated(minmax(quant_min=-128, quant_max=127, dtype=torch.qint8,
                                                             qscheme=torch.per_tensor_symmetric)), (8, True, False)),
    "restricted -127..127": (lambda: calibrated(minmax(quant_min=-127, quant_max=127, dtype=torch.qint8,
                                                       qscheme=torch.per_tensor_symmetric)), (8, True, True)),
    "per-channel along axis 0": (lambda: calibrated(tq.FakeQuantize(
        observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=torch.qint8,
        qscheme=torch.per_channel_symmetric, ch_axis=0)), (8, True, False)),
    "FusedMovingAvgObsFakeQuantize": (lambda: calibrated(tq.FusedMovingAvgObsFakeQuantize()), (8, False, False)),
    "_LearnableFakeQuantize": (learnable, (8, False, False)),
    "FixedQParamsFakeQuantize": (lambda: tq.default_fixed_qparams_range_0to1_fake_quant().eval(), (8, False, False)),
}


class Quantized(nn.Module):
    def __init__(self, q: nn.Module):
        super().__init__()
        self.q = q

    def forward(self, x):
        return self.q(x) * 1.0  # the product keeps the quantized tensor off the graph outputs


def state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in module.state_dict().items()}


def reimported(folder: Path, x: torch.Tensor = X) -> torch.Tensor:
    with torch.no_grad():
        return nnef_torch.load(folder)(x)


def within_one_step(found: torch.Tensor, want: torch.Tensor, step: float, rare: bool = True) -> None:
    """Equal but where torch's halfway rounding (to even, x * (1 / s)) and NNEF's (away from zero) differ: rare
    for one quantizer on random data. In a model one such point can move many outputs: a symmetric observer sets
    s = max|w| / 127.5, so the largest weight lies exactly halfway, and when torch's x * (1 / s) falls just below
    it, that weight (and every output of its channel) is one step apart."""
    difference = (found - want).abs()
    assert difference.max().item() <= step * 1.001
    if rare:
        assert (difference > 1e-6).float().mean().item() < 0.01


@pytest.mark.parametrize("name", list(QUANTIZERS))
def test_quantizer_becomes_a_zero_point_entry(name, tmp_path):
    make, (bits, signed, symmetric) = QUANTIZERS[name]
    q = make()
    module = Quantized(q)
    before, kind = state(module), type(q)
    model = nnef_torch.export(module, (X,))
    model.save(tmp_path)
    assert type(module.q) is kind and all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    (spec,) = model.graph.quantization.values()
    scale, zero = q.scale.detach().reshape(-1), q.zero_point.detach().reshape(-1).float().round()
    assert spec.op == "zero_point_linear_quantize"
    assert (spec.args["bits"], spec.args["signed"], spec.args["symmetric"]) == (bits, signed, symmetric)
    np.testing.assert_array_equal(np.float32(spec.args["scale"]).reshape(-1), scale.numpy())
    np.testing.assert_array_equal(np.asarray(spec.args["zero_point"]).reshape(-1), zero.numpy())
    khronos_parse(tmp_path)
    with torch.no_grad():
        want = module(X)
    step = scale.max().item()
    within_one_step(reimported(tmp_path), want, step)


def test_disabled_quantizer_is_the_identity():
    q = calibrated(minmax(quant_min=0, quant_max=255))
    q.apply(tq.disable_fake_quant)
    model = nnef_torch.export(Quantized(q), (X,))
    assert model.quant_text is None and "copy" not in model.text


@pytest.mark.parametrize("make, words", [
    (lambda: calibrated(tq.FakeQuantize(observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=0,
                                        quant_max=255, qscheme=torch.per_channel_affine, ch_axis=1)), "axis 1"),
    (lambda: minmax(quant_min=0, quant_max=255), "has not observed any data"),
    (lambda: calibrated(minmax(quant_min=0, quant_max=100)), "code range 0..100"),
])
def test_quantizers_without_nnef_form(make, words):
    with pytest.raises(nnef_torch.ExportError, match=words):
        nnef_torch.export(Quantized(make()), (X,))


class EagerNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu, self.fc = nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.dequant(self.fc(self.relu(self.conv(self.quant(x))).flatten(1)))


def eager_qat(qconfig) -> nn.Module:
    module = EagerNet().train()
    module.qconfig = qconfig
    tq.prepare_qat(module, inplace=True)
    return calibrated(module)


def test_eager_prepare_qat_model(tmp_path):
    module = eager_qat(tq.get_default_qat_qconfig("fbgemm"))
    before = state(module)
    model = nnef_torch.export(module, (X,))
    model.save(tmp_path)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert isinstance(module.fc.weight_fake_quant, tq.FakeQuantizeBase)
    assert set(model.tensors) == {"conv/weight", "conv/bias", "fc/weight", "fc/bias"}
    assert len(khronos_entries(tmp_path)) == 5  # input, conv weight and output, fc weight and output
    with torch.no_grad():
        want = module(X)
    within_one_step(reimported(tmp_path), want, module.fc.activation_post_process.scale.item(), rare=False)


def khronos_entries(folder: Path) -> dict[str, dict]:
    return {name: t.quantization for name, t in khronos_parse(folder).tensors.items() if t.quantization}


class FxNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return torch.sigmoid(self.fc(x.flatten(1)) + 1.0)


def test_fx_prepare_qat_fx_model(tmp_path):
    module = prepare_qat_fx(FxNet().train(), tq.get_default_qat_qconfig_mapping("x86"), (X,))
    module = calibrated(module)
    before = state(module)
    model = nnef_torch.export(module, (X,))
    model.save(tmp_path)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    entries = khronos_entries(tmp_path)
    assert len(entries) >= 5 and all(e["op-name"] == "zero_point_linear_quantize" for e in entries.values())
    with torch.no_grad():
        want = module(X)
    within_one_step(reimported(tmp_path), want, 1 / 256, rare=False)  # sigmoid's fixed output quantizer


def test_per_tensor_qat_model_runs_in_tract(tmp_path):
    """Observed: tract (u8 activations, i8 weights, i32 biases) agrees with torch within one output step (a fifth
    of the outputs one step apart here, from the halfway weight described in `within_one_step`)."""
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    qconfig = tq.QConfig(activation=tq.FakeQuantize.with_args(
        observer=tq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255),
        weight=tq.FakeQuantize.with_args(observer=tq.MovingAverageMinMaxObserver, quant_min=-128, quant_max=127,
                                         dtype=torch.qint8, qscheme=torch.per_tensor_symmetric))
    module = eager_qat(qconfig)
    nnef_torch.save(module, tmp_path, example_inputs=(X,), quantization={"weights": "quantized"})
    assert len(khronos_entries(tmp_path)) == 6  # with the conv bias (the fc input has no entry of its own)
    runnable = tract.nnef().without_tract_core().load(str(tmp_path)).into_runnable()
    found = runnable.run([X.numpy()])[0].convert_to(tract.tensor.DatumType.F32).to_numpy()
    with torch.no_grad():
        want = module(X).numpy()
    step = module.fc.activation_post_process.scale.item()
    assert np.abs(found - want).max() <= step * 1.001
