"""Fake quantization exported with target="tract", run by tract with its default registries and compared with the
fake-quantized torch module.

tract reads a graph.quant entry as a quantized type: it refuses per-channel entries, a float .dat for a variable
with an entry, and a quantized activation beside float weights. So for tract, fake quantization is written as the
arithmetic of its NNEF definition (exact in float: tract and torch agree up to float rounding in the layers, which
can move a value across a rounding boundary of the next quantizer, one step), except with weights="quantized",
where every entry is per-tensor and tract computes in its quantized types (within one output step).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from exporter.test_quantization import Net, X, expected, per_channel_weight, zp
from nnef_torch.quant import FakeQuantize

CHANNELS = torch.tensor([0.5, 0.4, 0.35, 0.6])


def run_tract(folder: Path, x: torch.Tensor, *, standard_registry: bool = False) -> np.ndarray:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    reader = tract.nnef().without_tract_core() if standard_registry else tract.nnef()
    out = reader.load(str(folder)).into_runnable().run([x.numpy()])[0]
    return out.convert_to(tract.tensor.DatumType.F32).to_numpy()  # dequantizes quantized outputs


def reimported(folder: Path) -> torch.Tensor:
    with torch.no_grad():
        return nnef_torch.load(folder)(X)


def within_steps(found: np.ndarray, want: np.ndarray, step: float, exact_share: float = 0.99) -> None:
    """Every value within one output step, and nearly all equal up to float rounding."""
    error = np.abs(found - want)
    assert error.max() <= step * 1.01, f"max error {error.max()} > one step {step}"
    assert (error <= 1e-5 * np.abs(want).max()).mean() >= exact_share, f"mean error {error.mean()}"


def test_per_channel_weights_and_per_tensor_activations_run_in_tract(tmp_path):
    """The issue's model: per-channel weight quantizer, per-tensor input and output quantizers."""
    module = Net(zp(), per_channel_weight(), zp(0.04, -5, signed=True)).eval()
    model = nnef_torch.export(module, (X,), target="tract")
    model.save(tmp_path)
    assert model.quant_text is None and not (tmp_path / "graph.quant").exists()
    # the per-channel parameters as variables broadcasting along the output channels
    assert "variable<scalar>(shape = [4, 1, 1, 1]" in model.text
    assert "round(" in model.text and "_quantize(" not in model.text
    want = expected(module).numpy()
    within_steps(run_tract(tmp_path, X), want, 0.04)
    assert torch.equal(reimported(tmp_path), expected(module))


@pytest.mark.parametrize("weight_q", [
    FakeQuantize("min_max_linear_quantize", signed=True, symmetric=True, channels=4, min=-CHANNELS, max=CHANNELS),
    FakeQuantize("linear_quantize", channels=4, min=-CHANNELS, max=CHANNELS * 1.1),
    FakeQuantize("logarithmic_quantize", bits=3, channels=4, max=CHANNELS / 2),
], ids=["min_max_linear_quantize", "linear_quantize", "logarithmic_quantize"])
def test_every_per_channel_form_runs_in_tract(weight_q, tmp_path):
    module = Net(FakeQuantize("linear_quantize", min=-2.0, max=2.5), weight_q, None).eval()
    nnef_torch.export(module, (X,), target="tract").save(tmp_path)
    want = expected(module).numpy()
    np.testing.assert_allclose(run_tract(tmp_path, X), want, atol=1e-5 * np.abs(want).max())
    assert torch.equal(reimported(tmp_path), expected(module))


def test_per_tensor_entries_with_codes_run_in_quantized_types(tmp_path):
    """weights="quantized": graph.quant entries, which tract computes in u8/i8/i32 (within one output step)."""
    module = Net(zp(0.05, 3), zp(0.01, 0, signed=True, symmetric=True), zp(0.04, -5, signed=True)).eval()
    model = nnef_torch.export(module, (X,), target="tract", quantization={"weights": "quantized"})
    model.save(tmp_path)
    assert model.quant_text is not None and "round(" not in model.text
    want = expected(module).numpy()
    assert np.abs(run_tract(tmp_path, X) - want).max() <= 0.04 * 1.01
    assert np.abs(reimported(tmp_path).numpy() - want).max() <= 0.04 * 1.01  # the bias on its 32-bit grid


def test_entries_on_float_weights_are_what_tract_refuses(tmp_path):
    """Why float weights are written inline for tract: the standard export's entry on a float variable is refused
    by tract, and the tract export of the same module runs."""
    module = Net(zp(0.05, 3), zp(0.01, 0, signed=True, symmetric=True), None).eval()
    nnef_torch.export(module, (X,)).save(tmp_path / "standard")
    with pytest.raises(Exception, match="Mismatched tensor type"):  # noqa: PT011  (tract's one error type)
        run_tract(tmp_path / "standard", X)
    nnef_torch.export(module, (X,), target="tract").save(tmp_path / "tract")
    want = expected(module).numpy()
    np.testing.assert_allclose(run_tract(tmp_path / "tract", X), want, atol=1e-5 * np.abs(want).max())


def test_per_channel_with_codes_is_refused_for_tract():
    module = Net(zp(), per_channel_weight(), None).eval()
    with pytest.raises(nnef_torch.ExportError, match="one scale per tensor"):
        nnef_torch.export(module, (X,), target="tract", quantization={"weights": "quantized"})
