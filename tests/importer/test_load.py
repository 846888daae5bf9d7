"""nnef_torch.load: generated code, signature handling, variables, dtypes, custom ops and unsupported ops."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import nnef_torch
from importer.model_files import CODES, rng, write_codes_model, write_model
from nnef_torch.errors import NNEFError, NNEFQuantizationError, NNEFShapeError, NNEFUnsupportedError

TWO_OUTPUTS = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( a, b ) -> ( total, scaled )
{
    a = external<scalar>(shape = [1, 3]);
    b = external<scalar>(shape = [1, 3]);
    w = variable<scalar>(shape = [1, 3], label = 'layer/w');
    total = add(a, b);
    scaled = mul(total, w);
}
"""


def test_code_is_generated_straight_line(tmp_path):
    module = nnef_torch.load(nnef_torch.__path__[0] + "/models/tiny_cnn")
    code = module.code
    assert "def forward(self, image)" in code
    assert not re.search(r"^\s*(for|while) ", code, re.M), code
    assert "torch.conv2d" in code or "conv2d" in code
    assert isinstance(module, torch.fx.GraphModule) and isinstance(module, nnef_torch.NNEFModule)
    assert [name for name, _ in module.named_parameters()] == [
        "conv1.filter", "conv1.bias", "conv2.filter", "conv2.bias", "fc.weight", "fc.bias"]
    out = module(torch.rand(1, 1, 16, 16))
    assert out.shape == (1, 4) and torch.allclose(out.sum(), torch.tensor(1.0))


def test_inputs_by_position_and_name_outputs_in_order(tmp_path):
    w = rng().standard_normal((1, 3)).astype(np.float32)
    module = nnef_torch.load(write_model(tmp_path, TWO_OUTPUTS, {"layer/w": w}))
    a, b = torch.rand(1, 3), torch.rand(1, 3)
    total, scaled = module(a, b)
    assert torch.equal(total, a + b) and torch.allclose(scaled, (a + b) * torch.from_numpy(w))
    by_name = module(b=b, a=a)
    assert torch.equal(by_name[0], total) and torch.equal(by_name[1], scaled)
    assert list(module.state_dict()) == ["layer.w"] and module.label_of("layer.w") == "layer/w"


def test_batch_one_graph_runs_at_batch_eight():
    module = nnef_torch.load(nnef_torch.__path__[0] + "/models/tiny_cnn")
    # without fake quantization: convolution kernels chosen per batch size round differently, and a value on a
    # quantization step's edge can then land one step apart
    module.set_quantization(False)
    images = torch.rand(8, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    batched = module(images)
    single = torch.cat([module(image[None]) for image in images])
    assert batched.shape == (8, 4) and torch.allclose(batched, single, atol=1e-6)


def test_input_shapes_replaces_external_shapes(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 2, 4, 4]);
    y = reshape(x, shape = [0, -1]);
}
"""
    module = nnef_torch.load(write_model(tmp_path, text), input_shapes={"x": [3, 2, 5, 5]})
    assert module.nnef_graph.tensors["y"].shape == (3, 50)
    assert module(torch.rand(3, 2, 5, 5)).shape == (3, 50)
    with pytest.raises(NNEFError, match="not graph inputs"):
        nnef_torch.load(write_model(tmp_path, text), input_shapes={"z": [1]})


def test_shared_labels_share_one_parameter(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 3]);
    w1 = variable<scalar>(shape = [2, 3], label = 'Shared/W');
    w2 = variable<scalar>(shape = [2, 3], label = 'shared/w');
    y = add(mul(x, w1), w2);
}
"""
    w = rng().standard_normal((2, 3)).astype(np.float32)
    module = nnef_torch.load(write_model(tmp_path, text, {"Shared/W": w}))
    assert [name for name, _ in module.named_parameters()] == ["Shared.W"]
    x = torch.rand(2, 3)
    module(x).sum().backward()
    assert torch.allclose(module.get_parameter("Shared.W").grad, x + 1)


def test_integer_and_logical_variables_are_buffers_with_stored_dtypes(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [4]);
    i = variable<integer>(shape = [4], label = 'idx');
    m = variable<logical>(shape = [4], label = 'mask');
    h = variable<scalar>(shape = [4], label = 'halfp');
    y = select(m, add(x, cast<scalar>(i)), h);
}
"""
    ints = np.array([1, 2, 3, 4], np.int32)
    mask = np.array([True, False, True, False])
    half = np.array([0.5, 1.5, 2.5, 3.5], np.float16)
    folder = write_model(tmp_path, text, {"idx": ints, "mask": mask, "halfp": half})
    module = nnef_torch.load(folder)
    assert [name for name, _ in module.named_parameters()] == ["halfp"]
    assert module.get_parameter("halfp").dtype == torch.float32  # float16 data computes in float32, as in tract
    assert nnef_torch.load(folder, dtype=torch.float16).get_parameter("halfp").dtype == torch.float16
    assert module.get_buffer("idx").dtype == torch.int32 and module.get_buffer("mask").dtype == torch.bool
    wide = nnef_torch.load(folder, dtype=torch.float64)
    assert wide.get_parameter("halfp").dtype == torch.float64
    x = torch.zeros(4, dtype=torch.float64)
    assert torch.equal(wide(x), torch.tensor([1.0, 1.5, 3.0, 3.5], dtype=torch.float64))


def test_seed_quantized_data_becomes_float_parameters(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [5]);
    w = variable<scalar>(shape = [5], label = 'w');
    y = mul(x, w);
}
"""
    values = np.array([-1.0, -0.5, 0.0, 0.25, 1.0], np.float32)
    spec = {"op": "linear_quantize", "min": -1.0, "max": 1.0, "bits": 8}
    module = nnef_torch.load(write_model(tmp_path, text, {"w": values}, quantization={"w": spec}))
    expected = np.round((values + 1.0) / 2.0 * 255) / 255 * 2.0 - 1.0  # the seed linear code, decoded
    np.testing.assert_allclose(module.get_parameter("w").detach().numpy(), expected, atol=1e-6)


def test_quantized_codes_are_dequantized_by_their_graph_quant_entry(tmp_path):
    folder = write_codes_model(tmp_path)
    codes = CODES
    module = nnef_torch.load(folder)
    np.testing.assert_allclose(module.get_parameter("w").detach().numpy(), (codes.astype(np.float64) - 128) * 0.5)
    (folder / "graph.quant").unlink()
    with pytest.raises(NNEFQuantizationError, match="stores quantized codes"):
        nnef_torch.load(folder)


def test_graph_quant_applies_in_forward(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [1, 6]);
    y = relu(x);
}
"""
    quant = '"y": linear_quantize(min = 0.0, max = 3.0, bits = 2);\n'
    module = nnef_torch.load(write_model(tmp_path, text, quant=quant))
    x = torch.tensor([[-1.0, 0.4, 0.6, 1.4, 2.6, 9.0]])
    # 2 bits over [0, 3]: the representable values are 0, 1, 2, 3
    assert torch.equal(module(x), torch.tensor([[0.0, 0.0, 1.0, 1.0, 3.0, 3.0]]))


CUSTOM = """version 1.0;
extension KHR_enable_fragment_definitions;

fragment scaled_tanh( x: tensor<scalar>, alpha: scalar ) -> ( y: tensor<scalar> )
{
    y = alpha * tanh(x);
}

fragment opaque( x: tensor<scalar>, k: integer ) -> ( y: tensor<scalar> );

graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [2, 3]);
    t = scaled_tanh(x, alpha = 2.0);
    y = opaque(t, k = 3);
}
"""


def test_document_fragments_expand_and_custom_ops_replace_them(tmp_path):
    folder = write_model(tmp_path, CUSTOM)
    x = torch.randn(2, 3)
    module = nnef_torch.load(folder, custom_ops={"opaque": lambda x, k: x * k})
    assert torch.allclose(module(x), 2.0 * torch.tanh(x) * 3)
    calls = []

    def scaled_tanh(x, alpha):
        calls.append(alpha)
        return alpha * torch.tanh(x) + 1.0

    module = nnef_torch.load(folder, custom_ops={"opaque": lambda x, k: x * k, "scaled_tanh": scaled_tanh})
    assert torch.allclose(module(x), (2.0 * torch.tanh(x) + 1.0) * 3)
    assert "scaled_tanh" in module.code


def test_unsupported_operations_are_reported_together(tmp_path):
    text = CUSTOM.replace("y = opaque(t, k = 3);", "u = opaque(t, k = 3);\n    y = opaque(u, k = 4);")
    with pytest.raises(NNEFUnsupportedError) as info:
        nnef_torch.load(write_model(tmp_path, text))
    message = str(info.value)
    assert "2 operation(s)" in message and "custom_ops" in message
    assert re.search(r"opaque at .*graph\.nnef:15:\d+", message) and re.search(r"graph\.nnef:16:\d+", message)
    assert info.value.location.line == 15


def test_meta_device_reads_no_data_and_materializes(tmp_path):
    w = rng().standard_normal((1, 3)).astype(np.float32)
    folder = write_model(tmp_path / "m", TWO_OUTPUTS, {"layer/w": w})
    module = nnef_torch.load(folder, device="meta")
    assert module.get_parameter("layer.w").is_meta
    with pytest.raises(NNEFError, match="materialize"):
        module.save(tmp_path / "out")
    module.materialize("cpu")
    assert torch.equal(module.get_parameter("layer.w").detach(), torch.from_numpy(w))
    a = torch.rand(1, 3)
    assert torch.allclose(module(a, a)[1], 2 * a * torch.from_numpy(w))


def test_loading_makes_no_redundant_copies(tmp_path):
    import tracemalloc
    w = rng().standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    text = TWO_OUTPUTS.replace("[1, 3]", "[1024, 1024]")
    folder = write_model(tmp_path, text, {"layer/w": w})
    tracemalloc.start()
    try:
        module = nnef_torch.load(folder)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.3 * w.nbytes, f"peak {peak} bytes while loading {w.nbytes} bytes of data"
    parameter = module.get_parameter("layer.w")
    assert parameter.requires_grad and torch.equal(parameter.detach(), torch.from_numpy(w))


def test_progress_bar_on_request(tmp_path, capsys):
    w = rng().standard_normal((1, 3)).astype(np.float32)
    folder = write_model(tmp_path, TWO_OUTPUTS, {"layer/w": w})
    nnef_torch.load(folder, progress=True)
    assert "loading NNEF tensors" in capsys.readouterr().err
    nnef_torch.load(folder, progress=False)
    assert "loading NNEF tensors" not in capsys.readouterr().err


def test_archive_models_load(tmp_path):
    module = nnef_torch.load(nnef_torch.__path__[0] + "/models/tiny_cnn")
    module.save(tmp_path / "model.tar")
    x = torch.rand(2, 1, 16, 16)
    assert torch.equal(nnef_torch.load(tmp_path / "model.tar")(x), module(x))


@pytest.mark.parametrize("order", ["unused_first", "unused_last"])
def test_an_input_nothing_reads_keeps_its_place(tmp_path, order):
    """An unread input before a read one stays a positional argument; a trailing one may be left out."""
    inputs = "( unused, x )" if order == "unused_first" else "( x, unused )"
    (tmp_path / "g.nnef").write_text(f"""version 1.0;
graph G{inputs} -> ( y )
{{
    unused = external(shape = [2]);
    x = external(shape = [1, 3]);
    y = relu(x);
}}
""")
    module = nnef_torch.load(tmp_path / "g.nnef")
    x = torch.tensor([[-1.0, 0.5, 2.0]])
    if order == "unused_first":
        torch.testing.assert_close(module(torch.zeros(2), x), torch.relu(x))
    else:
        torch.testing.assert_close(module(x), torch.relu(x))
        torch.testing.assert_close(module(x, torch.zeros(2)), torch.relu(x))


def test_variable_of_more_bytes_than_a_tensor_holds_is_refused_at_its_declaration(tmp_path):
    text = ("version 1.0;\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1]);\n"
            "    w = variable<scalar>(shape = [7, 1000000000000000000], label = 'w');\n    y = add(x, w);\n}\n")
    folder = write_model(tmp_path, text)
    with pytest.raises(NNEFShapeError, match="more bytes than a tensor can have") as caught:
        nnef_torch.load(folder, device="meta")
    assert (caught.value.location.line, caught.value.location.column) == (5, 9)
