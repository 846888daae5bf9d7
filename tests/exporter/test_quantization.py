"""Fake quantization exported as NNEF quantization.

Every export is parsed by the Khronos tools (`nnef.load_graph` reads graph.quant too) and re-imported by nnef_torch,
which must reproduce the torch module to the bit where the forms are the same. Per-tensor 8-bit entries with
weights stored as codes also run in tract, which computes in quantized integer types: it agrees with torch's fake
quantization within one step of the output quantizer (it requantizes with its own rounding). Inline ops run in
the Khronos executor; .dat codes are read back with `nnef.read_tensor` and compared with numpy quantization
written from the stdlib definitions.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn

import nnef_torch
from exporter.consumers import compound_standard_ops, khronos_parse
from nnef_torch.exporter.quantization import QuantExport, quant_options
from nnef_torch.quant import FakeQuantize, fake_quantize

torch.manual_seed(0)
X = torch.randn(2, 3, 6, 6)


def round_half_away(v: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


class Net(nn.Module):
    """input quantizer -> conv with a weight quantizer -> output quantizer."""

    def __init__(self, input_q: nn.Module | None, weight_q: nn.Module | None, output_q: nn.Module | None):
        super().__init__()
        torch.manual_seed(1)
        self.conv = nn.Conv2d(3, 4, 3)
        self.input_q = input_q or nn.Identity()
        self.weight_q = weight_q or nn.Identity()
        self.output_q = output_q or nn.Identity()

    def forward(self, x):
        return self.output_q(nn.functional.conv2d(self.input_q(x), self.weight_q(self.conv.weight), self.conv.bias))


def zp(scale=0.05, zero_point=3, **kw):
    return FakeQuantize("zero_point_linear_quantize", scale=scale, zero_point=zero_point, **kw)


def per_channel_weight():
    return FakeQuantize(signed=True, symmetric=True, channels=4, scale=torch.tensor([0.01, 0.02, 0.015, 0.03]))


def tied_range():  # learnable signed symmetric min/max: the graph computes min = -max
    return FakeQuantize("min_max_linear_quantize", signed=True, symmetric=True, learnable=True, max=2.5)


ROWS = {  # name: (input quantizer, weight quantizer, output quantizer)
    "zero_point unsigned / signed symmetric / signed": (zp(), zp(0.01, 0, signed=True, symmetric=True),
                                                        zp(0.04, -5, signed=True)),
    "per-channel weight": (zp(), per_channel_weight(), None),
    "tied min_max range": (None, None, tied_range()),
    "linear_quantize and 4 bits": (FakeQuantize("linear_quantize", min=-2.0, max=2.5),
                                   zp(0.05, 0, bits=4, signed=True), None),
    "logarithmic weight": (None, FakeQuantize("logarithmic_quantize", bits=3, max=0.25), None),
}


def save(module: nn.Module, folder: Path, quantization=None) -> nnef_torch.Model:
    model = nnef_torch.export(module, (X,), quantization=quantization)
    model.save(folder)
    return model


def reimported(folder: Path, x: torch.Tensor = X) -> torch.Tensor:
    with torch.no_grad():
        return nnef_torch.load(folder)(x)


def expected(module: nn.Module, x: torch.Tensor = X) -> torch.Tensor:
    with torch.no_grad():
        return module(x)


def khronos_entries(folder: Path) -> dict[str, dict]:
    graph = khronos_parse(folder)
    return {name: dict(t.quantization) for name, t in graph.tensors.items() if t.quantization}


def same_entry(found: dict, spec) -> bool:
    """A Khronos-parsed graph.quant entry (numpy values) equal to a QuantSpec (float32 rounding allowed)."""
    if found.pop("op-name") != spec.op or set(found) != set(spec.args):
        return False
    return all(np.allclose(np.asarray(found[key], np.float64), np.asarray(spec.args[key], np.float64), rtol=1e-7)
               for key in found)


def run_tract(folder: Path, x: torch.Tensor) -> np.ndarray:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    runnable = tract.nnef().without_tract_core().load(str(folder)).into_runnable()
    out = runnable.run([x.numpy()])[0]
    return out.convert_to(tract.tensor.DatumType.F32).to_numpy()  # dequantizes quantized outputs


@pytest.mark.parametrize("row", list(ROWS))
def test_entries_parse_and_reimport_bit_identical(row, tmp_path):
    quantizers = ROWS[row]
    module = Net(*quantizers).eval()
    model = save(module, tmp_path)
    entries = khronos_entries(tmp_path)
    specs = [q.spec() for q in quantizers if q is not None]
    assert len(entries) == len(specs)
    for spec in specs:
        assert any(same_entry(dict(found), spec) for found in entries.values()), (spec, entries)
    # the quantizers' parameters are folded into the entries: no variables left for them
    assert set(model.tensors) == {"conv/weight", "conv/bias"}
    assert "neg" not in model.text
    assert torch.equal(reimported(tmp_path), expected(module))


def test_entry_on_the_tensor_itself_or_on_a_copy(tmp_path):
    module = Net(zp(), per_channel_weight(), zp(0.04, 10)).eval()
    model = save(module, tmp_path)
    assert "input_q = copy(x);" in model.text  # a graph input: quantized through a copy (named after its module)
    assert set(model.graph.quantization) == {"input_q", "conv_weight", "conv2d"}  # weight, conv result
    assert model.graph.quantization["conv_weight"].args["scale"] == pytest.approx([0.01, 0.02, 0.015, 0.03])
    assert model.quant_text.count(";") == 3 and (tmp_path / "graph.quant").read_text() == model.quant_text


class ReadElsewhere(nn.Module):
    """h = conv(x) is quantized and also read unquantized, in the way `case` says."""

    def __init__(self, case: str):
        super().__init__()
        torch.manual_seed(2)
        self.case, self.conv, self.q, self.q2 = case, nn.Conv2d(3, 3, 1), zp(0.05, 2), zp(0.1, 1)

    def forward(self, x):
        h = self.conv(x)
        if self.case == "another user":
            return self.q(h) * h
        if self.case == "graph output":
            return self.q(h), h
        if self.case == "quantized twice":
            return self.q2(self.q(h))
        if self.case == "an alias":
            return self.q(h.view(h.shape)) - h.reshape(h.shape)
        return self.q(h)  # sole user: the entry goes on h itself


@pytest.mark.parametrize("case, copies", [("another user", 1), ("graph output", 1), ("quantized twice", 1),
                                          ("an alias", 1), ("sole user", 0)])
def test_copy_when_the_tensor_is_read_elsewhere(case, copies, tmp_path):
    module = ReadElsewhere(case).eval()
    model = save(module, tmp_path)
    assert model.text.count("copy(") == copies
    khronos_entries(tmp_path)
    found, want = reimported(tmp_path), expected(module)
    for f, w in zip(found if isinstance(found, tuple) else [found], want if isinstance(want, tuple) else [want]):
        assert torch.equal(f, w)


class Computed(nn.Module):
    """Parameters reaching fake_quantize through ops: a float64 buffer cast to float32, an int32 zero point."""

    def __init__(self, from_input: bool = False):
        super().__init__()
        self.from_input = from_input
        self.register_buffer("scale", torch.tensor(0.125, dtype=torch.float64))
        self.register_buffer("zero", torch.tensor(7, dtype=torch.int32))

    def forward(self, x):
        scale = x.abs().amax() / 127 if self.from_input else self.scale.float() * 2
        return fake_quantize(x, self.zero.long(), scale, "zero_point_linear_quantize", 8, False, False, 1.0)


def test_parameters_folded_from_computed_state(tmp_path):
    model = save(Computed().eval(), tmp_path)
    (spec,) = model.graph.quantization.values()
    assert spec.args == {"zero_point": 7, "scale": 0.25, "bits": 8, "signed": False, "symmetric": False}
    assert model.tensors == {} and "variable" not in model.text
    assert torch.equal(reimported(tmp_path), expected(Computed().eval()))


def test_parameters_from_an_input_are_an_error():
    with pytest.raises(nnef_torch.ExportError, match="computed from the graph input 'x'"):
        nnef_torch.export(Computed(from_input=True).eval(), (X,))


def test_inline_ops_equal_graph_quant(tmp_path):
    module = Net(zp(), per_channel_weight(), tied_range()).eval()
    model = save(module, tmp_path / "inline", QuantExport(inline=True))
    save(module, tmp_path / "entries")
    assert model.quant_text is None and not (tmp_path / "inline" / "graph.quant").exists()
    for op in ("zero_point_linear_quantize(x", "min_max_linear_quantize("):
        assert op in model.text
    assert "variable<integer>(shape = [4], label = 'weight_q/zero_point')" in model.text  # per-channel params
    khronos_parse(tmp_path / "inline")
    found = reimported(tmp_path / "inline")
    assert torch.equal(found, reimported(tmp_path / "entries"))
    assert torch.equal(found, expected(module))
    nnef = pytest.importorskip("nnef")
    with nnef.Session(str(tmp_path / "inline"), lowered=compound_standard_ops()) as session:
        (khronos,) = session(X.numpy())
    np.testing.assert_allclose(khronos, expected(module).numpy(), atol=1e-6)


def test_tract_runs_per_tensor_entries_in_quantized_types(tmp_path):
    """tract reads graph.quant and the codes in .dat and computes in u8/i8/i32; observed: within one output step."""
    rows = [(zp(0.05, 3), zp(0.01, 0, signed=True, symmetric=True), zp(0.04, -5, signed=True), 0.04),
            (zp(0.03, 128), zp(0.02, 0, signed=True, symmetric=True), FakeQuantize("linear_quantize", min=-1.0,
                                                                                 max=1.55), 2.55 / 255)]
    for i, (input_q, weight_q, output_q, step) in enumerate(rows):
        module, folder = Net(input_q, weight_q, output_q).eval(), tmp_path / str(i)
        save(module, folder, {"weights": "quantized"})
        khronos_entries(folder)
        want = expected(module).numpy()
        assert np.abs(run_tract(folder, X) - want).max() <= step * 1.01
        assert np.abs(reimported(folder).numpy() - want).max() <= step * 1.01  # the bias is now on a 32-bit grid


def test_quantized_codes_read_back_by_khronos(tmp_path):
    nnef = pytest.importorskip("nnef")
    module = Net(zp(0.05, 3), per_channel_weight(), None).eval()
    model = save(module, tmp_path, {"weights": "quantized"})
    with open(tmp_path / "conv" / "weight.dat", "rb") as file:
        weight_codes = nnef.read_tensor(file)
    with open(tmp_path / "conv" / "bias.dat", "rb") as file:
        bias_codes = nnef.read_tensor(file)
    w, b = module.conv.weight.detach().double().numpy(), module.conv.bias.detach().double().numpy()
    s_w = np.array([0.01, 0.02, 0.015, 0.03], np.float32).astype(np.float64)
    assert weight_codes.dtype == np.int8
    np.testing.assert_array_equal(weight_codes, np.clip(round_half_away(w / s_w[:, None, None, None]), -127, 127))
    s_b = (np.float64(np.float32(0.05)) * s_w).astype(np.float32).astype(np.float64)
    assert bias_codes.dtype == np.int32
    np.testing.assert_array_equal(bias_codes, round_half_away(b / s_b))
    bias_entry = model.graph.quantization["conv_bias"]
    assert bias_entry.args["bits"] == 32 and bias_entry.args["signed"] and bias_entry.args["zero_point"] == 0
    khronos_entries(tmp_path)
    # the codes dequantized by the entries give the fake-quantized weights; the bias moved by at most half a step
    found, want = reimported(tmp_path).numpy(), expected(module).numpy()
    assert np.abs(found - want).max() <= s_b.max() / 2 * 1.01


def khronos_graph_only(folder: Path) -> None:
    nnef = pytest.importorskip("nnef")
    nnef.infer_shapes(nnef.load_graph(str(folder), load_variables=False))


def seed_file(path: Path) -> tuple[int, int, float, float, np.ndarray]:
    """code, bits, min, max and the codes of a seed-layout file, read from the bytes directly (items of any width
    packed most significant bit first)."""
    data = path.read_bytes()
    rank = struct.unpack_from("<I", data, 8)[0]
    bits, code = struct.unpack_from("<II", data, 44)
    low, high = struct.unpack_from("<2f", data, 52)
    shape = struct.unpack_from(f"<{rank}I", data, 12)
    stream = np.unpackbits(np.frombuffer(data, np.uint8, offset=128))[: int(np.prod(shape)) * bits]
    codes = stream.reshape(-1, bits).astype(np.int64) @ (1 << np.arange(bits - 1, -1, -1))
    return code, bits, low, high, codes.reshape(shape)


def test_seed_layout(tmp_path):
    module = Net(None, zp(0.01, 100), None).eval()
    save(module, tmp_path / "linear", {"weights": "seed"})
    code, bits, low, high, codes = seed_file(tmp_path / "linear" / "conv" / "weight.dat")
    assert (code, bits) == (0x10, 8)
    assert low == pytest.approx(-1.0) and high == pytest.approx(1.55)  # (0 - 100) * 0.01, (255 - 100) * 0.01
    w = module.conv.weight.detach().double().numpy()
    np.testing.assert_array_equal(codes, round_half_away((np.clip(w, low, high) - low) / (high - low) * 255))
    khronos_graph_only(tmp_path / "linear")  # the Khronos tools read no seed-layout .dat files
    assert torch.equal(reimported(tmp_path / "linear"), expected(module))

    module = Net(None, FakeQuantize("logarithmic_quantize", bits=3, max=0.25), None).eval()
    save(module, tmp_path / "log", {"weights": "seed"})
    code, bits, low, high, codes = seed_file(tmp_path / "log" / "conv" / "weight.dat")
    assert (code, bits, low, high) == (0x11, 4, -0.25, 0.25)  # one more bit, for the sign
    m, r = -2, 7
    w = module.conv.weight.detach().double().numpy()
    magnitude = np.clip(round_half_away(np.clip(np.log2(np.abs(w)), m - r, m)), m - r, m) - (m - r)
    np.testing.assert_array_equal(codes, magnitude + 8 * (w < 0))
    assert torch.equal(reimported(tmp_path / "log"), expected(module))


@pytest.mark.parametrize("weight_q, words", [
    (per_channel_weight(), "one range per tensor"),
    (zp(0.01, 0, signed=True, symmetric=True), r"2\^bits - 1 levels"),
])
def test_seed_layout_refuses_what_it_cannot_hold(weight_q, words, tmp_path):
    with pytest.raises(nnef_torch.ExportError, match=words):
        nnef_torch.export(Net(None, weight_q, None).eval(), (X,), quantization={"weights": "seed"})


CONVERSIONS = [  # source quantizer, target op, the target entry's arguments (derived by hand)
    (zp(0.05, 3), "min_max_linear_quantize",
     {"min": -0.15, "max": 12.6, "bits": 8, "signed": False, "symmetric": False}),
    (zp(0.05, 3), "linear_quantize", {"min": -0.15, "max": 12.6, "bits": 8}),
    (zp(0.01, 0, signed=True, symmetric=True), "min_max_linear_quantize",
     {"min": -1.27, "max": 1.27, "bits": 8, "signed": True, "symmetric": True}),
    (FakeQuantize("min_max_linear_quantize", signed=True, symmetric=True, min=-1.27, max=1.27),
     "zero_point_linear_quantize", {"zero_point": 0, "scale": 0.01, "bits": 8, "signed": True, "symmetric": True}),
    (FakeQuantize("linear_quantize", min=-0.5, max=2.05), "zero_point_linear_quantize",
     {"zero_point": 50, "scale": 0.01, "bits": 8, "signed": False, "symmetric": False}),
]


@pytest.mark.parametrize("source, op, args", CONVERSIONS)
def test_form_conversion(source, op, args, tmp_path):
    module = Net(source, None, None).eval()
    model = save(module, tmp_path, {"op": op})
    (spec,) = model.graph.quantization.values()
    assert spec.op == op and set(spec.args) == set(args)
    for key, value in args.items():
        assert spec.args[key] == pytest.approx(value, rel=1e-6)
    khronos_entries(tmp_path)
    # the same grid: equal but for float rounding of the converted parameters and halfway points of negatives
    x = X * 3
    want = expected(module.input_q, x).numpy()
    found = FakeQuantize.from_spec(spec)(x).detach().numpy()
    step = (args["max"] - args["min"]) / 255 if "max" in args else args["scale"]
    assert np.abs(found - want).max() <= step * 1.01
    assert np.mean(np.abs(found - want) > 1e-5) < 1e-3


@pytest.mark.parametrize("source, op, words", [
    (zp(0.01, 0, signed=True, symmetric=True), "linear_quantize", r"2\^bits - 1 levels"),
    (FakeQuantize("min_max_linear_quantize", min=0.1, max=1.0), "zero_point_linear_quantize", "no zero point"),
    (FakeQuantize("logarithmic_quantize", max=1.0), "zero_point_linear_quantize", "grids differ"),
])
def test_form_conversion_refused(source, op, words):
    with pytest.raises(nnef_torch.ExportError, match=words):
        nnef_torch.export(Net(source, None, None).eval(), (X,), quantization={"op": op})


def test_options():
    assert quant_options(None) == QuantExport()
    assert quant_options({"op": "linear_quantize"}) == QuantExport(op="linear_quantize")
    options = QuantExport(inline=True)
    assert quant_options(options) is options
    for bad, words in [({"ops": 1}, "unknown quantization option"), ({"op": "round"}, "quantization op"),
                       ({"weights": "int8"}, "weights must be"), ({"inline": True, "weights": "quantized"},
                                                                 "one or the other"), ("seed", "dict")]:
        with pytest.raises(nnef_torch.ExportError, match=words):
            quant_options(bad)


def test_save_with_options_and_models_without_quantization(tmp_path):
    module = Net(zp(), None, None).eval()
    nnef_torch.save(module, tmp_path / "q", example_inputs=(X,), quantization={"op": "linear_quantize"})
    assert (tmp_path / "q" / "graph.quant").read_text().startswith('"input_q": linear_quantize(')
    plain = nnef_torch.export(nn.Sequential(nn.Conv2d(3, 4, 3)).eval(), (X,))
    assert plain.quant_text is None and plain.graph.quantization == {}


def test_a_quantizer_still_observing_is_an_error():
    quantizer = zp()
    quantizer.observer, quantizer.observing = (lambda x: None), True
    with pytest.raises(nnef_torch.ExportError, match="finish calibration first"):
        nnef_torch.export(Net(None, None, quantizer).eval(), (X,))


def test_parametrized_weight_is_labelled_by_its_name(tmp_path):
    conv = nn.Conv2d(3, 4, 3)
    nn.utils.parametrize.register_parametrization(conv, "weight", zp(0.01, 0, signed=True, symmetric=True))
    module = nn.Sequential(conv).eval()
    model = save(module, tmp_path)
    assert set(model.tensors) == {"0/weight", "0/bias"}
    assert "label = '0/weight'" in model.text and list(model.graph.quantization) == ["t_0_weight"]
    assert torch.equal(reimported(tmp_path), expected(module))
