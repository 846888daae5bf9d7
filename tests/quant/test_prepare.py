"""`prepare` / `calibrate`: where quantizers go, what calibration sets (against numpy), the calibrated model against a
torch twin written here from the stdlib definition of zero_point_linear_quantize, torch.export, QAT, config errors."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from nnef_torch import quant
from nnef_torch.quant import FakeQuantize, QuantConfig, QuantScheme, calibrate, prepare, quantizers


def small_cnn(seed: int = 0) -> nn.Sequential:
    """Conv-BN-ReLU-Linear with non-trivial BatchNorm statistics, in eval mode."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 5))
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.3, 0.3)
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].weight.uniform_(0.5, 1.5)
    return model.eval()


class Net(nn.Module):
    """A module with its own forward (the inputs are hooked on the root)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3)
        self.up = nn.ConvTranspose1d(4, 6, 2, stride=2)
        self.act = nn.ReLU6()
        self.bn = nn.BatchNorm1d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x, y):
        h = self.act(self.up(self.conv(x) + y))
        return self.fc(self.bn(h).mean(dim=2))


def data(count: int, seed: int = 1, shape=(4, 3, 6, 6)) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) * (1.0 + i) for i in range(count)]


# ----------------------------------------------------------------------------------------- where quantizers go
W, A = ("weight", "activation")  # kinds: weight quantizers are per channel (signed symmetric), others per tensor
CNN_ALL = {"0.parametrizations.weight.0": (W, 8), "0.output_quantizer": (A, None), "0.input_quantizers.0": (A, None),
           "2.output_quantizer": (A, None), "4.parametrizations.weight.0": (W, 5), "4.output_quantizer": (A, None)}
NET_ALL = {"input_quantizers.0": (A, None), "input_quantizers.1": (A, None),
           "conv.parametrizations.weight.0": (W, 4), "conv.output_quantizer": (A, None),
           "up.parametrizations.weight.0": (W, 4), "up.output_quantizer": (A, None),  # ConvTranspose: axis 0 = in
           "act.output_quantizer": (A, None), "fc.parametrizations.weight.0": (W, 3), "fc.output_quantizer": (A, None)}

PLACEMENT = [  # model, config, expected quantizers
    (small_cnn, None, CNN_ALL),
    (small_cnn, {"exclude": ["4"]}, {k: v for k, v in CNN_ALL.items() if not k.startswith("4.")}),
    (small_cnn, QuantConfig(names=("0",)), {k: v for k, v in CNN_ALL.items() if k.startswith("0.")}),
    (small_cnn, QuantConfig(weights=None), {k: v for k, v in CNN_ALL.items() if "weight" not in k}),
    (small_cnn, QuantConfig(activations=None, inputs=False),
     {k: v for k, v in CNN_ALL.items() if "weight" in k}),
    (small_cnn, QuantConfig(activation_layers=()), {k: v for k, v in CNN_ALL.items() if not k.startswith("2.")}),
    (small_cnn, QuantConfig(layers=("Linear",), activation_layers=()), {"0.input_quantizers.0": (A, None),
                                                                        "4.parametrizations.weight.0": (W, 5),
                                                                        "4.output_quantizer": (A, None)}),
    (small_cnn, QuantConfig(layers=None, names=("1",), inputs=False), {"1.output_quantizer": (A, None)}),  # BN: scale stays float
    (Net, None, NET_ALL),
    (Net, QuantConfig(inputs=1), {k: v for k, v in NET_ALL.items() if k != "input_quantizers.1"}),
    (Net, QuantConfig(names=("*c*",)), {k: v for k, v in NET_ALL.items() if k.startswith(("input", "conv", "fc", "act"))}),
]


@pytest.mark.parametrize("factory, config, expected", PLACEMENT)
def test_prepare_places_quantizers(factory, config, expected):
    prepared = prepare(factory(), config)
    found = quantizers(prepared)
    assert sorted(found) == sorted(expected)
    for name, (kind, channels) in expected.items():
        q = found[name]
        assert q.channels == channels and q.observing and q.enabled and q.observer is not None
        assert (q.signed, q.symmetric) == ((True, True) if kind == W else (False, False))
        assert q.observer.per_channel == (kind == W)


def test_prepare_leaves_original_unchanged():
    model = small_cnn()
    before = copy.deepcopy(model.state_dict())
    prepared = prepare(model)
    assert prepared is not model
    assert not any(isinstance(m, FakeQuantize) for m in model.modules())
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert isinstance(model[0].weight, nn.Parameter) and not hasattr(model[0], "parametrizations")
    x = data(1)[0]
    assert torch.equal(model(x), small_cnn()(x))
    same = prepare(model, inplace=True)
    assert same is model and "0.parametrizations.weight.original" in model.state_dict()


def test_prepare_sets_weight_ranges_and_first_batch_sets_activations():
    prepared = prepare(small_cnn())
    weight = small_cnn()[0].weight.detach().numpy().reshape(8, -1)
    low, high = quantizers(prepared)["0.parametrizations.weight.0"].observer.range()
    np.testing.assert_array_equal(low.numpy(), weight.min(axis=1))
    np.testing.assert_array_equal(high.numpy(), weight.max(axis=1))
    assert not quantizers(prepared)["0.input_quantizers.0"].observer.observed
    x = data(1)[0]
    prepared(x)
    low, high = quantizers(prepared)["0.input_quantizers.0"].observer.range()
    assert (low.item(), high.item()) == (x.min().item(), x.max().item())


# ----------------------------------------------------------------------------------------- calibration vs numpy
def conv_outputs(model: nn.Sequential, batches: list[torch.Tensor]) -> list[np.ndarray]:
    """The float convolution's outputs (what the conv output quantizer observes with fake quantization off)."""
    with torch.no_grad():
        return [model[0](x).numpy().astype(np.float64) for x in batches]


def ema(values: list[tuple[float, float]], momentum: float) -> tuple[float, float]:
    low, high = values[0]
    for b_low, b_high in values[1:]:
        low, high = (1 - momentum) * low + momentum * b_low, (1 - momentum) * high + momentum * b_high
    return low, high


def numpy_range(observer: str, arrays: list[np.ndarray]) -> tuple[float, float, float]:
    """(low, high, tolerance) of the tensors `arrays`, as the named observer defines it, written with numpy."""
    if observer == "minmax":
        return min(a.min() for a in arrays), max(a.max() for a in arrays), 1e-6
    if observer == "moving_average":
        return (*ema([(a.min(), a.max()) for a in arrays], 0.25), 1e-5)
    values = np.concatenate([a.ravel() for a in arrays])
    return np.percentile(values, 0.5), np.percentile(values, 99.5), None  # tolerance: the bin width


@pytest.mark.parametrize("observer", ["minmax", "moving_average", "percentile"])
def test_calibrated_ranges_match_numpy(observer):
    model, batches = small_cnn(), data(4)
    config = QuantConfig(observer=observer, momentum=0.25, percentile=99.5)
    prepared = prepare(model, config)
    prepared.train()
    prepared(data(1, seed=9)[0] * 50.0)  # seen before calibration; calibrate starts afresh
    calibrate(prepared, batches)
    assert prepared.training and all(m.training for m in prepared.modules())
    found = quantizers(prepared)
    assert all(q.enabled and not q.observing for q in found.values())
    for name, arrays in (("0.input_quantizers.0", [x.numpy().astype(np.float64) for x in batches]),
                         ("0.output_quantizer", conv_outputs(model, batches))):
        q = found[name]
        low, high, tol = numpy_range(observer, arrays)
        got_low, got_high = q.observer.range()
        tol = tol if tol is not None else q.observer.resolution().item() + 1e-6
        assert abs(got_low.item() - low) <= tol * max(1.0, abs(low))
        assert abs(got_high.item() - high) <= tol * max(1.0, abs(high))
        # unsigned asymmetric 8 bits: scale and zero point of the range widened to include zero
        lo, hi = min(got_low.item(), 0.0), max(got_high.item(), 0.0)
        scale = (hi - lo) / 255.0
        assert q.scale.item() == pytest.approx(scale, rel=1e-6)
        assert q.zero_point.item() == min(max(round(-lo / scale), 0), 255)
    weight = model[0].weight.detach().numpy().astype(np.float64).reshape(8, -1)
    w_low, w_high = found["0.parametrizations.weight.0"].observer.range()
    if observer != "percentile":
        np.testing.assert_allclose(w_low.numpy(), weight.min(axis=1), rtol=1e-6)
        np.testing.assert_allclose(w_high.numpy(), weight.max(axis=1), rtol=1e-6)
    else:
        width = found["0.parametrizations.weight.0"].observer.resolution().numpy()
        np.testing.assert_array_less(np.abs(w_high.numpy() - np.percentile(weight, 99.5, axis=1)), width + 1e-6)


def test_calibrate_max_batches_and_flags():
    prepared = prepare(small_cnn())
    prepared[1].train()  # one module training, the rest eval: each flag comes back
    calibrate(prepared, iter(data(10)), max_batches=3)
    assert quantizers(prepared)["0.input_quantizers.0"].observer.batches.item() == 3
    assert [m.training for m in prepared] == [False, True, False, False, False]


def test_calibrate_tuple_and_dict_batches():
    net = prepare(Net())
    xs = [(torch.randn(2, 2, 7), torch.randn(2, 4, 5)) for _ in range(2)]
    calibrate(net, xs)
    dict_net = prepare(Net())
    with pytest.warns(UserWarning, match=r"never reached quantizers \['input_quantizers.0', 'input_quantizers.1'\]"):
        calibrate(dict_net, [{"x": x, "y": y} for x, y in xs])
    # keyword inputs bypass the positional input quantizers: only the positional calls observed them
    assert quantizers(net)["input_quantizers.1"].observer.observed
    assert quantizers(dict_net)["fc.output_quantizer"].observer.observed


# ----------------------------------------------------------------------------------------- the torch twin
def round_half_away(v: torch.Tensor) -> torch.Tensor:
    v = v.double()
    return torch.where(v >= 0, torch.floor(v + 0.5), torch.ceil(v - 0.5)).float()


def zero_point_quantize(x, zero_point, scale, bits, signed, symmetric):
    """The stdlib fragment zero_point_linear_quantize, parameters broadcast from the left (axis 0)."""
    extra = (1,) * (x.dim() - zero_point.dim())
    z = zero_point.float().reshape(*zero_point.shape, *extra)
    s = scale.reshape(*scale.shape, *extra)
    r = 2.0 ** (bits - 1) - 1 if signed else 2.0 ** bits - 1
    low = 0.0 if not signed else (-r if symmetric else -r - 1.0)
    q = torch.clamp(round_half_away(x / s) + z, low, r)
    return (q - z) * s


def twin(model: nn.Sequential, prepared: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """small_cnn with quantization at the inputs, weights, conv/relu/linear outputs, by hand."""
    found = quantizers(prepared)

    def q(name, t):
        fq = found[name]
        return zero_point_quantize(t, fq.zero_point, fq.scale, fq.bits, fq.signed, fq.symmetric)

    conv, bn, fc = model[0], model[1], model[4]
    h = F.conv2d(q("0.input_quantizers.0", x), q("0.parametrizations.weight.0", conv.weight), conv.bias, padding=1)
    h = q("0.output_quantizer", h)
    h = F.batch_norm(h, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
    h = q("2.output_quantizer", torch.relu(h))
    return q("4.output_quantizer", F.linear(h.flatten(1), q("4.parametrizations.weight.0", fc.weight), fc.bias))


@pytest.mark.parametrize("observer", ["minmax", "percentile"])
def test_calibrated_model_equals_twin(observer):
    model = small_cnn()
    prepared = calibrate(prepare(model, {"observer": observer}), data(3))
    with torch.no_grad():
        for x in data(2, seed=5):
            got, want = prepared(x), twin(model, prepared, x)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert not torch.equal(got, model(x))


def test_disabled_quantizers_are_identity():
    model = small_cnn()
    prepared = calibrate(prepare(model), data(2))
    quant.set_enabled(prepared, False)
    x = data(1, seed=3)[0]
    with torch.no_grad():
        assert torch.equal(prepared(x), model(x))
    quant.set_enabled(prepared, True, names="*.output_quantizer")
    assert [q.enabled for q in quantizers(prepared).values()] == [False, True, False, True, False, True]
    with pytest.raises(ValueError, match="matches none"):
        quant.set_enabled(prepared, True, names="nothing*")


def test_state_dict_round_trip_into_fresh_prepare():
    config = QuantConfig(observer="percentile", weights={"observer": "moving_average"})
    prepared = calibrate(prepare(small_cnn(), config), data(3))
    fresh = prepare(small_cnn(seed=7), config)
    fresh.load_state_dict(prepared.state_dict())
    quant.set_observing(fresh, False)  # the switches are attributes, not state
    x = data(1, seed=4)[0]
    with torch.no_grad():
        assert torch.equal(fresh.eval()(x), prepared.eval()(x))
    for name, q in quantizers(prepared).items():
        other = quantizers(fresh)[name]
        assert all(torch.equal(a, b) for a, b in zip(q.observer.range(), other.observer.range()))


# ----------------------------------------------------------------------------------------- torch.export
def test_export_shows_fake_quantize_nodes_and_no_observers():
    prepared = calibrate(prepare(small_cnn()), data(2))
    program = torch.export.export(prepared.eval(), (data(1)[0],), strict=False)
    targets = [node.target for node in program.graph.nodes if node.op == "call_function"]
    fake = [node for node in program.graph.nodes if node.target == torch.ops.nnef_torch.fake_quantize.default]
    assert len(fake) == 6  # input, 2 weights, conv / relu / linear outputs
    sources = {node.args[0].name for node in fake}
    assert "input" in sources  # the graph input itself is quantized
    assert {"p_0_parametrizations_weight_original", "p_4_parametrizations_weight_original"} <= sources
    assert not program.graph_signature.buffers_to_mutate
    observer_ops = {"amin", "amax", "min", "max", "aminmax", "bincount", "histc", "lerp", "copy_"}
    assert not [t for t in targets if getattr(t, "__name__", "").split(".")[0] in observer_ops]
    names = {spec.target for spec in program.graph_signature.input_specs}
    assert "0.parametrizations.weight.original" in names


def test_export_min_max_op():
    prepared = calibrate(prepare(small_cnn(), {"op": "min_max_linear_quantize"}), data(2))
    program = torch.export.export(prepared.eval(), (data(1)[0],), strict=False)
    ops = [node.args[3] for node in program.graph.nodes if node.target == torch.ops.nnef_torch.fake_quantize.default]
    assert ops == ["min_max_linear_quantize"] * 6


# ----------------------------------------------------------------------------------------- training
@pytest.mark.parametrize("learnable", [False, True])
def test_qat_lowers_loss(learnable):
    torch.manual_seed(3)
    model = small_cnn()
    prepared = calibrate(prepare(model, {"learnable": learnable}), data(3))
    x, target = data(1, seed=6)[0], torch.randn(4, 5)
    optimizer = torch.optim.SGD(prepared.parameters(), lr=0.02)
    losses = []
    for step in range(8):
        optimizer.zero_grad()
        loss = F.mse_loss(prepared(x), target)
        loss.backward()
        if step == 0 and learnable:
            for name, q in quantizers(prepared).items():
                assert isinstance(q.scale, nn.Parameter), name
                assert q.scale.grad is not None and bool(q.scale.grad.abs().sum() > 0), name
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert prepared[0].parametrizations.weight.original.grad is not None


def test_fewer_bits_more_error():
    model = small_cnn()
    x = data(1, seed=8)[0]
    with torch.no_grad():
        reference = model(x)
        errors = [(calibrate(prepare(model, {"bits": bits}), data(3))(x) - reference).abs().mean().item()
                  for bits in (2, 4, 8)]
    assert errors[0] > errors[1] > errors[2] > 0
    assert errors[2] < 0.05 * reference.abs().mean().item()


def test_dict_schemes_update_defaults():
    prepared = prepare(small_cnn(), {"bits": 4, "weights": {"per_channel": False}})
    weight, act = quantizers(prepared)["0.parametrizations.weight.0"], quantizers(prepared)["0.output_quantizer"]
    assert (weight.bits, weight.signed, weight.symmetric, weight.channels) == (4, True, True, None)
    assert (act.bits, act.signed, act.symmetric) == (4, False, False)
    inputs_only = quantizers(prepare(small_cnn(), {"bits": 3, "activations": None, "weights": None}))
    assert list(inputs_only) == ["0.input_quantizers.0"] and inputs_only["0.input_quantizers.0"].bits == 3
    scheme = QuantScheme(bits=6, signed=True)  # a scheme replaces the default
    found = quantizers(prepare(small_cnn(), QuantConfig(activations=scheme)))
    assert (found["2.output_quantizer"].bits, found["2.output_quantizer"].signed) == (6, True)


# ----------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("config, match", [
    ({"bits": 0}, "bits must be an integer in 1..32"),
    ({"bits": 33}, "bits must be an integer in 1..32"),
    ({"bits": 4.0}, "bits must be an integer"),
    ({"weights": {"bits": 1}}, "signed quantization needs at least 2 bits"),
    ({"observer": "histogram"}, "unknown observer 'histogram'"),
    ({"op": "round"}, "unknown quantization op 'round'"),
    ({"op": "linear_quantize"}, "weights: linear_quantize is unsigned"),
    ({"op": "logarithmic_quantize", "learnable": True}, "no learnable parameters"),
    ({"momentum": 0.0}, "momentum"),
    ({"percentile": 20}, "percentile"),
    ({"grad_scale": -1.0}, "grad_scale"),
    ({"activations": {"per_channel": True}}, "per tensor"),
    ({"inputs": -1}, "inputs must be"),
    ({"names": ["features.*"]}, "names glob 'features.*' matches no module"),
    ({"exclude": ["5"]}, "exclude glob '5' matches no module"),
    ({"exclude": ["*"]}, "nothing to quantize"),
    ({"layers": ["Conv9d"]}, "'Conv9d' names no torch.nn module class"),
    ({"layers": None}, "give names"),
    ({"bitz": 4}, "unknown QuantConfig fields \\['bitz'\\]"),
    ({"weights": {"bitz": 4}}, "unknown QuantScheme fields"),
])
def test_config_errors(config, match):
    with pytest.raises(ValueError, match=match):
        prepare(small_cnn(), config)


def test_usage_errors():
    prepared = prepare(small_cnn())
    with pytest.raises(ValueError, match="prepare a module once"):
        prepare(prepared)
    with pytest.raises(ValueError, match="no batches"):
        calibrate(prepared, [])
    assert all(q.enabled and q.observing for q in quantizers(prepared).values())  # flags unchanged
    with pytest.raises(ValueError, match="call nnef_torch.quant.prepare first"):
        calibrate(small_cnn(), data(1))
    with pytest.raises(ValueError, match="max_batches"):
        calibrate(prepared, data(1), max_batches=0)
    with pytest.raises(TypeError, match="QuantConfig, a dict or None"):
        prepare(small_cnn(), [("bits", 4)])
