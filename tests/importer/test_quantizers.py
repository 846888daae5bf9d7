"""graph.quant entries on import: FakeQuantize submodules on externals, variables and activations, switchable,
trainable (straight-through and LSQ), and saved back with their current parameters."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.format import tensor_file
from nnef_torch.quant import FakeQuantize
from tests.exporter.consumers import compound_standard_ops
from tests.importer.model_files import CODES, rng, write_codes_model, write_model

TEXT = """version 1.0;

graph G( x ) -> ( y )
{{
    x = external<scalar>(shape = [2, 4]);
    w = variable<scalar>(shape = [3, 4], label = 'w');
    b = variable<scalar>(shape = [1, 3], label = 'b');
{quantize_w}    h = linear(x{x}, w{w}, b);
{quantize_h}    y = relu(h{h});
}}
"""
QUANT = """"x": zero_point_linear_quantize(zero_point = 100, scale = 0.02, bits = 8, signed = false, symmetric = false);
"w": min_max_linear_quantize(min = [-1.0, -0.5, -0.25], max = [1.0, 0.5, 0.25], bits = 4, signed = true, symmetric = true);
"h": linear_quantize(min = -2.0, max = 2.0, bits = 6);
"""
# the same quantization written inline, for the Khronos executor (which does not apply graph.quant)
INLINE = {
    "x": "_q", "w": "_q", "h": "_q",
    "quantize_w": "    x_q = zero_point_linear_quantize(x, zero_point = 100, scale = 0.02, bits = 8, signed = false, "
                  "symmetric = false);\n"
                  "    w_min = constant<scalar>(shape = [3, 1], value = [-1.0, -0.5, -0.25]);\n"
                  "    w_q = min_max_linear_quantize(w, min = w_min, max = -w_min, bits = 4, signed = true, "
                  "symmetric = true);\n",
    "quantize_h": "    h_q = linear_quantize(h, min = -2.0, max = 2.0, bits = 6);\n",
}
PLAIN = {"x": "", "w": "", "h": "", "quantize_w": "", "quantize_h": ""}


def weights() -> dict[str, np.ndarray]:
    r = rng(3)
    return {"w": r.uniform(-1.2, 1.2, (3, 4)).astype(np.float32), "b": r.uniform(-0.3, 0.3, (1, 3)).astype(np.float32)}


def inputs() -> np.ndarray:
    values = rng(4).uniform(-2.5, 4.0, (2, 4)).astype(np.float32)
    values[0, 0] = 0.01  # a halfway case of x's scale: rounded away from zero
    return values


@pytest.fixture
def quantized(tmp_path):
    return write_model(tmp_path / "q", TEXT.format(**PLAIN), weights(), quant=QUANT)


def test_entries_become_fake_quantize_modules(quantized):
    module = nnef_torch.load(quantized)
    found = module.quantizers()
    assert list(found) == ["x", "w", "h"]
    assert all(isinstance(q, FakeQuantize) for q in found.values())
    assert found["w"].channels == 3 and found["x"].channels is None
    assert "fake_quant.w.max" in module.state_dict()
    assert "self.fake_quant.h(" in module.code


def test_forward_equals_the_khronos_executor_on_inline_quantization(quantized, tmp_path):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    inline = write_model(tmp_path / "inline", TEXT.format(**INLINE), weights())
    with nnef.Session(str(inline), lowered=compound_standard_ops()) as session:
        expected = np.asarray(session(inputs())[0])
    found = nnef_torch.load(quantized)(torch.from_numpy(inputs())).detach().numpy()
    step = 4.0 / 63
    grid = (expected[expected > 0] + 2.0) / step
    assert np.abs(grid - np.round(grid)).max() < 1e-4  # relu of values on linear_quantize's 6-bit grid
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-6)


def test_switching_quantization_off(quantized, tmp_path):
    module = nnef_torch.load(quantized)
    plain = nnef_torch.load(write_model(tmp_path / "plain", TEXT.format(**PLAIN), weights()))
    x = torch.from_numpy(inputs())
    assert not torch.equal(module(x), plain(x))
    module.set_quantization(False)
    assert torch.equal(module(x), plain(x))
    module.set_quantization(True, "h")  # only the activation
    h = torch.nn.functional.linear(x, plain.w, plain.b.reshape(3)).detach().double().numpy()
    u = (np.clip(h, -2.0, 2.0) + 2.0) / 4.0 * 63  # linear_quantize(min = -2, max = 2, bits = 6), written out
    expected = torch.relu(torch.from_numpy(np.copysign(np.floor(np.abs(u) + 0.5), u) / 63 * 4.0 - 2.0).float())
    torch.testing.assert_close(module(x), expected, rtol=0, atol=1e-6)
    with pytest.raises(KeyError, match="no graph.quant entry"):
        module.set_quantization(True, ["nope"])


def test_gradients_pass_straight_through(quantized):
    """QAT at once: the weight gradient is the float gradient taken at the quantized weight, zero where the
    weight lies outside its range; the input gradient is masked the same way."""
    module = nnef_torch.load(quantized)
    x = torch.from_numpy(inputs()).requires_grad_()
    module(x).sum().backward()
    quantizers = module.quantizers()
    xq = quantizers["x"](x.detach())
    wq = quantizers["w"](module.w.detach()).requires_grad_()
    hq_in = torch.nn.functional.linear(xq, wq, module.b.detach().reshape(3))
    h_inside = (hq_in >= -2.0) & (hq_in <= 2.0)
    hq = quantizers["h"](hq_in.detach())
    grad_h = (hq > 0).float() * h_inside.float()  # relu after linear_quantize(h)
    expected_w = grad_h.t() @ xq
    bound = torch.tensor([1.0, 0.5, 0.25])[:, None]
    expected_w = expected_w * (module.w.detach().abs() <= bound).float()
    torch.testing.assert_close(module.w.grad, expected_w, rtol=0, atol=1e-6)
    codes = torch.round(x.detach() / 0.02) + 100
    x_inside = ((codes >= 0) & (codes <= 255)).float()
    torch.testing.assert_close(x.grad, (grad_h @ wq.detach()) * x_inside, rtol=0, atol=1e-6)


def test_learnable_ranges_train_and_save(quantized, tmp_path):
    module = nnef_torch.load(quantized).set_quantization(learnable=True)
    names = {name for name, _ in module.named_parameters()}
    assert {"fake_quant.x.scale", "fake_quant.w.max", "fake_quant.h.min", "fake_quant.h.max"} <= names
    x = torch.from_numpy(inputs())
    before = module(x).detach()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    loss = ((module(x) - 1.0) ** 2).mean()
    loss.backward()
    assert module.fake_quant.x.scale.grad != 0 and module.fake_quant.h.max.grad != 0
    optimizer.step()
    after = module(x).detach()
    assert not torch.equal(before, after)
    module.save(tmp_path / "tuned")
    text = (tmp_path / "tuned" / "graph.quant").read_text()
    assert f"scale = {module.fake_quant.x.scale.item()!r}" in text
    again = nnef_torch.load(tmp_path / "tuned")
    assert torch.equal(again(x), after)


def test_unchanged_graph_quant_is_saved_verbatim(quantized, tmp_path):
    module = nnef_torch.load(quantized)
    module.save(tmp_path / "same")
    assert (tmp_path / "same" / "graph.quant").read_text() == QUANT


def test_quantized_weights_are_requantized_by_the_current_entry(tmp_path):
    """Codes stored in .dat are read through the entry and written back through the quantizer's current scale."""
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    folder = write_codes_model(tmp_path / "m")
    codes = CODES
    module = nnef_torch.load(folder)
    module.fake_quant.w.scale.fill_(0.25)
    module.save(tmp_path / "saved")
    with open(tmp_path / "saved" / "w.dat", "rb") as file:
        stored = nnef.read_tensor(file)
    values = (codes.astype(np.float64) - 128) * 0.5
    expected = np.clip(np.copysign(np.floor(np.abs(values / 0.25) + 0.5), values) + 128, 0, 255)
    assert stored.dtype == np.uint8 and np.array_equal(stored, expected)
    assert "scale = 0.25" in (tmp_path / "saved" / "graph.quant").read_text()
    header = tensor_file.decode((tmp_path / "saved" / "w.dat").read_bytes()).header
    assert header.kind == "quantized"


def test_custom_quantization_op_stays_a_function(quantized):
    calls = []

    def my_quantize(x, min, max, bits):
        calls.append(bits)
        return x

    module = nnef_torch.load(quantized, custom_ops={"linear_quantize": my_quantize})
    assert list(module.quantizers()) == ["x", "w"]
    module(torch.from_numpy(inputs()))
    assert calls == [6]


def test_a_label_named_like_the_quantizers_keeps_its_own_tensor(tmp_path):
    text = """version 1.0;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2]);
    w = variable<scalar>(shape = [2], label = 'fake_quant');
    y = add(x, w);
}
"""
    quant = '"y": linear_quantize(min = 0.0, max = 3.0, bits = 2);\n'
    module = nnef_torch.load(write_model(tmp_path, text, {"fake_quant": np.array([0.4, 1.2], np.float32)}, quant=quant))
    assert torch.equal(module(torch.tensor([0.0, 0.0])), torch.tensor([0.0, 1.0]))
    assert module.label_of("fake_quant_") == "fake_quant"


def _entries(specs) -> list[tuple]:
    """graph.quant entries as comparable rows, parameters at float32 (what the quantizers hold)."""
    def value(v):
        return tuple(np.float32(v).reshape(-1).tolist()) if isinstance(v, (float, list)) else v
    return sorted((spec.op, tuple(sorted((k, value(v)) for k, v in spec.args.items()))) for spec in specs)


@pytest.mark.parametrize("source", ["quantized", "tiny_cnn"])
def test_import_then_export_writes_the_same_entries(source, quantized, tmp_path):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    folder = quantized if source == "quantized" else Path(nnef_torch.__file__).parent / "models" / "tiny_cnn"
    module = nnef_torch.load(folder)
    x = torch.rand(tuple(module.nnef_graph.tensors[module.nnef_graph.signature.externals[0].name].shape))
    exported = nnef_torch.export(module, (x,))
    assert _entries(exported.graph.quantization.values()) == _entries(module.nnef_graph.quantization.values())
    exported.save(tmp_path / "again")
    khronos = nnef.load_graph(str(tmp_path / "again"))
    assert sum(1 for t in khronos.tensors.values() if t.quantization) == len(module.quantizers())
    assert torch.equal(nnef_torch.load(tmp_path / "again")(x), module(x))


def test_entry_of_a_tensor_no_operation_reads_is_kept_and_saved(tmp_path):
    """`z` is computed but nothing reads it: its entry is still a FakeQuantize of the module, and saving writes the
    entry back (the Khronos parser reads the saved graph.quant)."""
    nnef = pytest.importorskip("nnef", reason="the Khronos parser reads the saved graph.quant")
    text = """version 1.0;

graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 3]);
    y = relu(x);
    z = neg(x);
}
"""
    quant = '"z": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
    module = nnef_torch.load(write_model(tmp_path / "in", text, quant=quant))
    assert set(module.quantizers()) == {"z"}
    module.save(tmp_path / "out")
    graph = nnef.load_graph(str(tmp_path / "out"))
    assert graph.tensors["z"].quantization["op-name"] == "linear_quantize"
    assert graph.tensors["z"].quantization["bits"] == 8
