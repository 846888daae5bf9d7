"""Q4_0 fake quantization (quant/groupwise.py, quant/groupwise_prepare.py).

References: the numpy Q4_0 codec of format/block_quant.py (tract's and ggml's rule), torch_to_nnef's own Q4_0
quantizer, a hand-written torch twin of the straight-through / LSQ gradients, and torch.export.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from nnef_torch.format import tensor_file
from nnef_torch.format.block_quant import dequantize_q4_0, min_max_q4_0, pack_q4_0, unpack_q4_0
from nnef_torch.quant import Q4_0FakeQuantize, prepare_q4_0, q4_0_codes, q4_0_quantize, remove_q4_0
from nnef_torch.quant.groupwise import GRAD_SCALE, min_max_scale, q4_0_fake_quantize


def _reference(w: torch.Tensor) -> np.ndarray:
    rows = w.detach().numpy().reshape(w.shape[0], -1)
    return dequantize_q4_0(*min_max_q4_0(rows)).reshape(w.shape)


@pytest.mark.parametrize("shape", [(24, 96), (8, 4, 2, 4), (3, 32)])
def test_init_equals_tract_min_max(shape):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 0.05
    quantizer = Q4_0FakeQuantize.from_weight(w)
    np.testing.assert_array_equal(quantizer(w).detach().numpy(), _reference(w))


@pytest.mark.slow  # importing torch_to_nnef takes seconds
def test_init_equals_torch_to_nnef():
    qtract = pytest.importorskip("torch_to_nnef.tensor.quant.qtract")
    # torch_to_nnef rounds the scale and its reciprocal to float16 and takes |max|: blocks whose largest value is
    # positive, 8 * a power of two, and whose codes sit away from halfway give the same codes by either rule
    gen = torch.Generator().manual_seed(2)
    d = -(2.0 ** torch.randint(-9, -3, (16, 4, 1), generator=gen)).float()
    codes = torch.randint(-8, 8, (16, 4, 32), generator=gen).float()
    codes[..., 5] = -8.0
    w = (d * (codes + (torch.rand(codes.shape, generator=gen) - 0.5) * 0.6)).reshape(16, 128)
    w.view(16, 4, 32)[..., 5] = d[..., 0] * -8.0
    theirs = qtract.fp_to_tract_q4_0_with_min_max_calibration(w.clone())
    theirs.specific_machine = "x86_64"  # float32 decoding, as tract on this machine
    ours = Q4_0FakeQuantize.from_weight(w)(w)
    torch.testing.assert_close(ours, theirs.decompress().float(), rtol=0, atol=0)


def test_zero_block_stays_zero():
    w = torch.zeros(2, 64)
    w[1, 40] = 0.3
    quantizer = Q4_0FakeQuantize.from_weight(w)
    w.requires_grad_(True)
    out = quantizer(w)
    out.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), _reference(w))
    assert torch.isfinite(w.grad).all() and torch.isfinite(quantizer.scale.grad).all()


def _twin(w: torch.Tensor, s: torch.Tensor, g: float) -> torch.Tensor:
    """LSQ with explicit straight-through: y = s * clamp(round(w / s)), round and the f16 cast of s passed through."""
    s_g = s * g + (s - s * g).detach()  # value s, gradient scaled by g
    v = w.reshape(s.shape[0], s.shape[1], 32) * (1.0 / s_g[..., None])
    r = v + (torch.floor(v + 8.5) - 8.0 - v).detach()
    q = torch.clamp(r, -8.0, 7.0)
    return (q * s_g[..., None]).reshape(w.shape)


@pytest.mark.parametrize("learn_scale", [True, False])
def test_gradients_equal_ste_lsq_twin(learn_scale):
    gen = torch.Generator().manual_seed(3)
    w0 = torch.randn(6, 64, generator=gen)
    scale0 = min_max_scale(w0) * 0.6  # some values fall outside the clamp range
    upstream = torch.randn(6, 64, generator=gen)

    w = w0.clone().requires_grad_(True)
    quantizer = Q4_0FakeQuantize(scale0, learn_scale=learn_scale)
    (quantizer(w) * upstream).sum().backward()

    w_ref = w0.clone().requires_grad_(True)
    s_ref = scale0.clone().requires_grad_(learn_scale)
    (_twin(w_ref, s_ref, GRAD_SCALE) * upstream).sum().backward()

    outside = (w_ref.grad == 0).float().mean()
    assert 0.05 < outside < 0.9  # both the clamped and the straight-through cases are exercised
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-6, atol=1e-6)
    if learn_scale:
        torch.testing.assert_close(quantizer.scale.grad, s_ref.grad, rtol=1e-5, atol=1e-6)
    else:
        assert "scale" not in dict(quantizer.named_parameters()) and quantizer.scale.grad is None


def test_traced_op_equals_eager():
    gen = torch.Generator().manual_seed(4)
    w0, upstream = torch.randn(4, 64, generator=gen), torch.randn(4, 64, generator=gen)
    scale0 = min_max_scale(w0) * 0.7
    results = []
    for call in (q4_0_quantize, q4_0_fake_quantize):
        w, s = w0.clone().requires_grad_(True), scale0.clone().requires_grad_(True)
        out = call(w, s, GRAD_SCALE)
        (out * upstream).sum().backward()
        results.append((out.detach(), w.grad, s.grad))
    for eager, op in zip(*results):
        torch.testing.assert_close(eager, op, rtol=0, atol=0)


def _mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(nn.functional.mse_loss(model(x), y))


def test_qat_beats_min_max_post_training():
    # features of rank 24 in 64: rounding each weight to its nearest code is not the best Q4_0 weight, and QAT can
    # move weights along directions the data never sees to make up for the rounding of the others
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(256, 24, generator=gen) @ torch.randn(24, 64, generator=gen) / 5
    y = x @ torch.randn(64, 8, generator=gen) * 0.1
    floating = nn.Linear(64, 8)
    with torch.no_grad():  # the float optimum (least squares with a bias)
        solution = torch.linalg.lstsq(torch.cat([x, torch.ones(256, 1)], 1), y, driver="gelsd").solution
        floating.weight.copy_(solution[:64].T)
        floating.bias.copy_(solution[64])
    assert _mse(floating, x, y) < 1e-9
    ptq_loss = _mse(prepare_q4_0(floating), x, y)  # min-max Q4_0 of the float-trained weights

    model = prepare_q4_0(floating)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / 100)
    for _ in range(100):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        schedule.step()
    qat_loss = _mse(model, x, y)
    assert qat_loss < 0.8 * ptq_loss, (qat_loss, ptq_loss)
    # what tract would compute: the written codes decoded
    codes, scales = q4_0_codes(model)["weight"]
    decoded = torch.from_numpy(dequantize_q4_0(codes, scales))
    assert _mse(lambda t: nn.functional.linear(t, decoded, model.bias), x, y) == pytest.approx(qat_loss, rel=1e-5)


def _trained() -> nn.Module:
    torch.manual_seed(6)
    model = prepare_q4_0(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(16, 64)).square().mean().backward()
        optimizer.step()
    return model


def test_codes_round_trip_through_the_packed_bytes():
    model = _trained()
    codes = q4_0_codes(model)
    assert sorted(codes) == ["0.weight", "2.weight"]
    for name, (c, s) in codes.items():
        assert c.dtype == np.int8 and s.dtype == np.float16 and s.shape == (c.shape[0], c.shape[1] // 32)
        back_codes, back_scales = unpack_q4_0(pack_q4_0(c, s), c.size)
        decoded = dequantize_q4_0(back_codes, back_scales).reshape(c.shape)
        np.testing.assert_array_equal(decoded, model.get_submodule(name[:-7]).weight.detach().numpy())


def test_tract_computes_the_fake_quantized_weight(tmp_path):
    tract = pytest.importorskip("tract", reason="tract executes the written codes as the reference")
    model = _trained()
    codes, scales = q4_0_codes(model)["0.weight"]
    (tmp_path / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n"
        "    x = external<scalar>(shape = [64, 64]);\n"
        "    w = variable<scalar>(shape = [32, 64], label = 'w');\n"
        "    b = variable<scalar>(shape = [1, 32], label = 'b');\n"
        "    y = linear(x, w, b);\n}\n")
    (tmp_path / "w.dat").write_bytes(tensor_file.encode_blocks(codes, scales))
    (tmp_path / "b.dat").write_bytes(tensor_file.encode(np.zeros((1, 32), np.float32)))
    identity = np.eye(64, dtype=np.float32)
    weight_t = tract.nnef().load(str(tmp_path)).into_runnable().run([identity])[0].to_numpy()
    np.testing.assert_array_equal(weight_t.T, model[0].weight.detach().numpy())


def test_remove_leaves_dequantized_weights():
    model = _trained()
    x = torch.randn(5, 64)
    expected = model(x).detach()
    weights = {name: dequantize_q4_0(c, s) for name, (c, s) in q4_0_codes(model).items()}
    remove_q4_0(model)
    assert q4_0_codes(model) == {}
    assert all(isinstance(model.get_submodule(n[:-7]).weight, nn.Parameter) for n in weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(model.state_dict()[name].numpy(), value)
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)


def test_export_traces_one_node_per_weight():
    model = _trained()
    x = torch.randn(2, 64)
    program = torch.export.export(model, (x,))
    nodes = [n for n in program.graph.nodes if n.target is torch.ops.nnef_torch.q4_0_fake_quantize.default]
    assert len(nodes) == 2
    targets = program.graph_signature.inputs_to_parameters
    assert [(targets[n.args[0].name], targets[n.args[1].name]) for n in nodes] == [
        (f"{i}.parametrizations.weight.original", f"{i}.parametrizations.weight.0.scale") for i in (0, 2)]
    torch.testing.assert_close(program.module()(x), model(x), rtol=0, atol=0)


def test_prepare_selects_skips_and_refuses():
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 48), nn.Linear(48, 4))
    with pytest.warns(UserWarning, match=r"2\.weight \[4, 48\]"):
        prepared = prepare_q4_0(model, skip="1")
    assert sorted(q4_0_codes(prepared)) == ["0.weight"]
    assert not any(hasattr(layer, "parametrizations") for layer in model)  # a copy by default
    with pytest.raises(ValueError, match=r"multiple of 32: 2\.weight \[4, 48\]"):
        prepare_q4_0(model, indivisible="raise")
    frozen = prepare_q4_0(model, skip=["1", "2"], learn_scale=False, inplace=True)
    assert frozen is model and [n for n, _ in model.named_parameters()] == [
        "0.bias", "0.parametrizations.weight.original", "1.weight", "1.bias", "2.weight", "2.bias"]
    with pytest.raises(ValueError, match="already parametrized"):
        prepare_q4_0(model)


def test_grad_scale_default_is_lsq():
    assert GRAD_SCALE == pytest.approx(1 / math.sqrt(32 * 7))
