"""`FakeQuantize`: switches, ranges, graph.quant specs, state, training, devices and torch.compile.

Outputs are checked against the numpy transcription of the stdlib definitions in quant/test_functional.py.
"""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from nnef_torch.format.quant_file import QuantSpec, print_quantization, read_quantization
from nnef_torch.quant import FakeQuantize
from nnef_torch.stdlib import standard_fragments
from quant.test_functional import FLAGS, LINEAR, LOG, MIN_MAX, ZERO_POINT, code_bounds, reference

# (op, signed, symmetric): every flag combination each op takes
CONFIGS = ([(ZERO_POINT, s, y) for s, y in FLAGS] + [(MIN_MAX, s, y) for s, y in FLAGS]
           + [(LINEAR, False, False), (LOG, False, False)])
RANGES = [(-1.5, 3.0), (0.0, 2.0), (-4.0, -1.0), (0.2, 5.0), (-0.001, 0.002)]


def config_id(config) -> str:
    op, signed, symmetric = config
    return op + "-signed" * signed + "-symmetric" * symmetric


def make(config, bits: int = 8, **kwargs) -> FakeQuantize:
    op, signed, symmetric = config
    return FakeQuantize(op, bits=bits, signed=signed, symmetric=symmetric, **kwargs)


def expected_output(fq: FakeQuantize, x: torch.Tensor) -> np.ndarray:
    a, b = (t.detach().numpy() for t in fq.params())
    return reference(fq.op, x.detach().numpy(), a, b, fq.bits, fq.signed, fq.symmetric)


def step(fq: FakeQuantize) -> np.ndarray:
    """The distance between neighbouring representable values (per channel)."""
    a, b = (t.detach().double().numpy() for t in fq.params())
    if fq.op == ZERO_POINT:
        return b
    low, high = code_bounds(fq.op, fq.bits, fq.signed, fq.symmetric)
    return (b - a) / (high - low)


# ---- switches -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_disabled_is_the_identity(config):
    fq = make(config, bits=3)
    x = torch.linspace(-3, 3, 25, requires_grad=True)
    fq.enabled = False
    y = fq(x)
    assert torch.equal(y, x)
    y.backward(torch.arange(25.0))
    assert torch.equal(x.grad, torch.arange(25.0))
    fq.enabled = True
    assert not torch.equal(fq(x), x)
    assert "disabled" not in repr(fq)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_forward_equals_definition(config, dtype):
    fq = make(config, bits=4, channels=3)
    fq.set_range(torch.tensor([-1.0, -0.1, 0.0]), torch.tensor([1.0, 2.5, 0.3]))
    x = torch.randn(3, 7, 5, dtype=dtype, generator=torch.Generator().manual_seed(0)) * 2
    y = fq(x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.numpy(), expected_output(fq, x))


# ---- ranges ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_set_range_makes_the_range_representable(config, bits, per_channel):
    if per_channel:
        lows, highs = (torch.tensor([r[i] for r in RANGES]) for i in (0, 1))
        fq = make(config, bits=bits, channels=len(RANGES))
        fq.set_range(lows, highs)
        x = torch.stack([lows, highs, torch.zeros(len(RANGES))], dim=1)  # one row per channel
    else:
        fq = make(config, bits=bits)
        fq.set_range(*RANGES[0])
        x = torch.tensor([*RANGES[0], 0.0])
    for value in fq.params():
        assert torch.isfinite(value.float()).all()
    y = fq(x).double().numpy()
    x = x.double().numpy()
    assert np.array_equal(y[..., -1], np.zeros_like(y[..., -1]))  # 0 is exact (every form here keeps 0 in range)
    if fq.op == LOG:
        # |low| and |high| within a factor sqrt(2) (the rounding of log2), unless below the lowest magnitude
        top = np.ceil(np.log2(fq.max.double().numpy()))
        floor = np.exp2(top - (2 ** bits - 1)).reshape(-1, 1) if per_channel else np.exp2(top - (2 ** bits - 1))
        ends, found = x[..., :2], y[..., :2]
        big = np.abs(ends) >= floor
        assert big.any()
        assert np.all(np.sign(found[big]) == np.sign(ends[big]))
        ratio = np.abs(found[big] / ends[big])
        assert np.all((ratio >= 2 ** -0.5 * (1 - 1e-6)) & (ratio <= 2 ** 0.5 * (1 + 1e-6)))
        return
    half = 0.5 * step(fq)
    half = half.reshape(-1, 1) if per_channel else half
    scale = np.abs(x).max(axis=-1, keepdims=True)
    assert np.all(np.abs(y - x) <= half * (1 + 1e-6) + 1e-6 * scale), (y, x, half)


@pytest.mark.parametrize("config", [c for c in CONFIGS if c[0] == ZERO_POINT], ids=config_id)
def test_zero_stays_exact_for_zero_point_forms(config):
    """Zero point forms represent 0 exactly whatever the range (it is the zero point's code)."""
    fq = make(config, bits=4)
    for low, high in [(-0.37, 1.91), (-5.0, 0.01), (0.3, 0.7)]:
        fq.set_range(low, high)
        assert fq(torch.zeros(3)).tolist() == [0.0, 0.0, 0.0]
        z = int(fq.zero_point)
        assert code_bounds(ZERO_POINT, 4, fq.signed, fq.symmetric)[0] <= z <= 15


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_degenerate_range_gives_finite_parameters(config):
    fq = make(config, bits=8)
    fq.set_range(0.0, 0.0)
    assert all(torch.isfinite(value.float()).all() for value in fq.params())
    assert fq(torch.zeros(4)).tolist() == [0.0] * 4
    assert torch.isfinite(fq(torch.randn(100))).all()
    per_channel = make(config, bits=8, channels=3)
    per_channel.set_range(torch.tensor([0.0, -1.0, 0.0]), torch.tensor([0.0, 1.0, 2.0]))
    assert all(torch.isfinite(value.float()).all() for value in per_channel.params())
    assert torch.isfinite(per_channel(torch.randn(3, 10))).all()


# ---- graph.quant ----------------------------------------------------------------------------------------------

SPEC_ROWS = [
    (dict(op=ZERO_POINT, bits=8, signed=True, zero_point=3, scale=0.5),
     QuantSpec(ZERO_POINT, {"zero_point": 3, "scale": 0.5, "bits": 8, "signed": True, "symmetric": False})),
    (dict(op=ZERO_POINT, bits=4, channels=2, zero_point=[1, 2], scale=[0.25, 0.125]),
     QuantSpec(ZERO_POINT, {"zero_point": [1, 2], "scale": [0.25, 0.125], "bits": 4, "signed": False,
                            "symmetric": False})),
    (dict(op=MIN_MAX, bits=5, signed=True, symmetric=True, min=-2.0, max=2.0),
     QuantSpec(MIN_MAX, {"min": -2.0, "max": 2.0, "bits": 5, "signed": True, "symmetric": True})),
    (dict(op=LINEAR, bits=8, min=-1.0, max=3.0), QuantSpec(LINEAR, {"min": -1.0, "max": 3.0, "bits": 8})),
    (dict(op=LOG, bits=5, max=8.0), QuantSpec(LOG, {"max": 8.0, "bits": 5})),
]


@pytest.mark.parametrize("kwargs, expected", SPEC_ROWS, ids=lambda v: getattr(v, "op", ""))
def test_spec_is_the_graph_quant_entry(kwargs, expected):
    kwargs = dict(kwargs)
    fq = FakeQuantize(kwargs.pop("op"), **kwargs)
    assert fq.spec() == expected


@pytest.mark.parametrize("learnable", [False, True], ids=["fixed", "learnable"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_spec_round_trips(config, per_channel, learnable):
    if learnable and config[0] == LOG:
        pytest.skip("logarithmic_quantize has nothing to learn")
    fq = make(config, bits=6, channels=3 if per_channel else None, learnable=learnable)
    if per_channel:
        fq.set_range(torch.tensor([-0.7, -3.0, 0.0]), torch.tensor([1.3, 0.5, 0.9]))
    else:
        fq.set_range(-0.7, 1.3)
    x = torch.randn(3, 11, generator=torch.Generator().manual_seed(1)) * 2
    spec = fq.spec()
    text = print_quantization({"conv1": spec})
    read = read_quantization(text, standard_fragments())["conv1"]
    assert read == spec
    for again in (FakeQuantize.from_spec(spec, learnable=learnable), FakeQuantize.from_spec(read, learnable=learnable)):
        assert (again.op, again.bits, again.signed, again.symmetric) == (fq.op, fq.bits, fq.signed, fq.symmetric)
        assert dict(again.named_parameters()).keys() == dict(fq.named_parameters()).keys()
        for mine, theirs in zip(fq.params(), again.params()):
            assert torch.equal(mine, theirs)
        assert torch.equal(again(x), fq(x))


def test_hand_written_graph_quant_drives_the_module():
    """Text as an exporter would write it -> modules whose outputs follow the definition with those numbers."""
    text = ('"a": zero_point_linear_quantize(zero_point = [0, 4], scale = [0.5, 0.1], bits = 4, signed = false, '
            'symmetric = false);\n'
            '"b": min_max_linear_quantize(min = -1.0, max = 1.0, bits = 3, signed = true, symmetric = true);\n'
            '"c": linear_quantize(min = [0.0, -2.0], max = [1.0, 2.0], bits = 2);\n'
            '"d": logarithmic_quantize(max = 5.0, bits = 3);\n')
    x = torch.linspace(-3, 3, 22).reshape(2, 11)
    expected = {"a": ([0, 4], [0.5, 0.1], False, False), "b": (-1.0, 1.0, True, True),
                "c": ([0.0, -2.0], [1.0, 2.0], False, False), "d": (5.0, 5.0, False, False)}
    for name, spec in read_quantization(text, standard_fragments()).items():
        fq = FakeQuantize.from_spec(spec)
        a, b, signed, symmetric = expected[name]
        bits = spec.args["bits"]
        np.testing.assert_array_equal(fq(x).numpy(), reference(spec.op, x.numpy(), np.float32(a), np.float32(b),
                                                               bits, signed, symmetric))


# ---- state and learning -------------------------------------------------------------------------------------

@pytest.mark.parametrize("config, learnable, channels, keys", [
    ((ZERO_POINT, True, False), True, 4, {"zero_point", "scale"}),
    ((MIN_MAX, True, True), True, None, {"max"}),   # tied: min = -max
    ((MIN_MAX, True, True), False, 4, {"min", "max"}),
    ((LINEAR, False, False), True, 4, {"min", "max"}),
    ((LOG, False, False), False, None, {"max"}),
], ids=["zero_point", "tied", "symmetric-fixed", "linear", "log"])
def test_state_dict_save_and_load(config, learnable, channels, keys):
    fq = make(config, bits=5, channels=channels, learnable=learnable)
    shape = (channels,) if channels else ()
    fq.set_range(-torch.rand(shape) - 0.5, torch.rand(shape) + 0.5)
    assert set(fq.state_dict()) == keys
    buffer = io.BytesIO()
    torch.save(fq.state_dict(), buffer)
    buffer.seek(0)
    fresh = make(config, bits=5, channels=channels, learnable=learnable)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    x = torch.randn(channels or 2, 9)
    assert torch.equal(fresh(x), fq(x))
    for mine, theirs in zip(fq.params(), fresh.params()):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("config, learned", [
    ((ZERO_POINT, False, False), ["scale"]), ((ZERO_POINT, True, True), ["scale"]),
    ((MIN_MAX, False, False), ["min", "max"]), ((MIN_MAX, True, False), ["min", "max"]),
    ((MIN_MAX, True, True), ["max"]), ((LINEAR, False, False), ["min", "max"])], ids=lambda v: str(v))
def test_learnable_parameters_are_parameters(config, learned):
    fq = make(config, learnable=True, channels=3)
    assert sorted(name for name, _ in fq.named_parameters()) == sorted(learned)
    assert all(isinstance(p, torch.nn.Parameter) and p.requires_grad for p in fq.parameters())
    if config[0] == ZERO_POINT:
        assert "zero_point" in dict(fq.named_buffers()) and fq.zero_point.dtype == torch.int64
    assert list(make(config).parameters()) == []  # fixed: buffers only


def test_log_and_zero_point_cannot_be_learned():
    with pytest.raises(ValueError, match="no learnable"):
        FakeQuantize(LOG, learnable=True)
    fq = FakeQuantize(ZERO_POINT, learnable=True)
    assert not fq.zero_point.requires_grad


# (config, parameter name, initial params, data spread, sign of the change one SGD step should make)
TRAIN_ROWS = [
    ((ZERO_POINT, True, True), "scale", dict(scale=0.05), 4.0, +1),   # clips nearly everything: grow
    ((ZERO_POINT, True, True), "scale", dict(scale=2.0), 1.0, -1),    # everything rounds to 0: shrink
    ((ZERO_POINT, False, False), "scale", dict(scale=0.01, zero_point=8), 3.0, +1),
    ((MIN_MAX, True, False), "max", dict(min=-0.1, max=0.1), 4.0, +1),
    ((MIN_MAX, True, False), "min", dict(min=-0.1, max=0.1), 4.0, -1),
    ((MIN_MAX, True, False), "max", dict(min=-50.0, max=50.0), 1.0, -1),  # rounding error dominates: narrow
    ((MIN_MAX, True, False), "min", dict(min=-50.0, max=50.0), 1.0, +1),
    ((MIN_MAX, True, True), "max", dict(max=0.1), 4.0, +1),
    ((MIN_MAX, True, True), "max", dict(max=50.0), 1.0, -1),
    ((LINEAR, False, False), "max", dict(min=-0.2, max=0.2), 3.0, +1),
]


@pytest.mark.parametrize("config, name, params, spread, direction", TRAIN_ROWS)
def test_one_sgd_step_moves_the_range_the_right_way(config, name, params, spread, direction):
    if config[2] and "max" in params and "min" not in params and config[0] == MIN_MAX:
        params = dict(params, min=-params["max"])
    fq = make(config, bits=4, learnable=True, **params)
    x = (torch.rand(4000, generator=torch.Generator().manual_seed(2)) * 2 - 1) * spread
    before = float(getattr(fq, name).detach())
    loss = torch.nn.functional.mse_loss(fq(x), x)
    optimizer = torch.optim.SGD(fq.parameters(), lr=1e-3)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    after = float(getattr(fq, name).detach())
    assert math.copysign(1.0, after - before) == direction and after != before


# ---- devices and compilation ----------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_cuda_forward_equals_cpu(config):
    fq = make(config, bits=6, channels=3)
    fq.set_range(torch.tensor([-1.0, -0.3, 0.0]), torch.tensor([1.0, 2.1, 0.7]))
    x = torch.randn(3, 1000, generator=torch.Generator().manual_seed(3)) * 2
    x[:, :200] = torch.linspace(-2, 2, 200)  # many halfway points
    on_cpu = fq(x)
    assert torch.equal(fq.to("cuda")(x.to("cuda")).cpu(), on_cpu)


def test_compile_fullgraph_matches_eager():
    """One small model through torch.compile(fullgraph=True): fake quantization is one opaque custom op there, so the
    forward is the eager op's to the bit; the compiled backward may sum the tied gradient in another order."""
    try:
        import torch._inductor  # noqa: F401
    except Exception as error:  # pragma: no cover - depends on the installation
        pytest.skip(f"torch.compile is unavailable: {error}")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                FakeQuantize(MIN_MAX, bits=4, signed=True, symmetric=True, learnable=True))
    x = torch.randn(5, 4)
    compiled = torch.compile(model, fullgraph=True)
    found = compiled(x)
    found.sum().backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    assert torch.equal(found, expected)
    for mine, theirs in zip(compiled_grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op, signed, symmetric", [("zero_point_linear_quantize", True, True),
                                                   ("zero_point_linear_quantize", False, True),
                                                   ("min_max_linear_quantize", True, True)])
def test_one_bit_needs_an_unsigned_asymmetric_range(op, signed, symmetric):
    with pytest.raises(ValueError, match="at least 2 bits"):
        FakeQuantize(op, bits=1, signed=signed, symmetric=symmetric)
    assert torch.isfinite(FakeQuantize(op, bits=1)(torch.linspace(-1, 2, 7))).all()
