"""The importer's fusion passes (nnef_torch/importer/fuse.py): each finds its pattern in the benchmark models and
in small texts, leaves near misses alone, and keeps the outputs of the unfused module up to float32 rounding."""
from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.importer.fuse import PASSES, fuse
from nnef_torch.reader import read_graph
from tests.exporter.consumers import compound_standard_ops

BENCH = Path(__file__).resolve().parents[2] / "bench"
EXTENSIONS = "extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n"


def _bench_models():
    name = "bench_import_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / "import_models.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _graph_text(body: str, inputs: dict[str, list[int]], outputs: list[str], library: str = "") -> str:
    header = "version 1.0;\n" + EXTENSIONS + library
    lines = [f"    {name} = external<scalar>(shape = {shape});" for name, shape in inputs.items()]
    lines += [f"    {line.strip()}" for line in body.strip().splitlines()]
    return (header + f"\ngraph G( {', '.join(inputs)} ) -> ( {', '.join(outputs)} )\n{{\n" + "\n".join(lines)
            + "\n}\n")


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(text)
    return folder


def _inputs(shapes: dict[str, list[int]], seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator) * 2 for shape in shapes.values()]


def _names(module) -> Counter:
    return Counter(op.name for op in module.nnef_graph.operations)


def _outputs(module, inputs) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        result = module(*inputs)
    return result if isinstance(result, tuple) else (result,)


def _same_as_unfused(folder: Path, inputs: list[torch.Tensor]):
    fused, plain = nnef_torch.load(folder), nnef_torch.load(folder, fuse=False)
    for a, b in zip(_outputs(fused, inputs), _outputs(plain, inputs)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    return fused, plain


LAYER_NORM_SHAPES = {"x": [2, 3, 8], "scale": [1, 1, 8], "offset": [1, 1, 8]}

# the forms a layer norm takes: (name, body computing y from x, scale and offset, the fused ops expected)
LAYER_NORMS = [
    ("rsqrt", """
        mean, var = moments(x, axes = [2]);
        c = sub(x, mean);
        v = add(var, 1e-5);
        r = rsqrt(v);
        n = mul(c, r);
        s = mul(n, scale);
        y = add(s, offset);""", 1),
    ("sqrt_div_commuted", """
        mean, var = moments(x, axes = [2]);
        c = sub(x, mean);
        v = add(1e-3, var);
        r = sqrt(v);
        n = div(c, r);
        s = mul(scale, n);
        y = add(offset, s);""", 1),
    ("two_axes_no_affine", """
        mean, var = moments(x, axes = [1, 2]);
        y = (x - mean) * rsqrt(var + 1e-5);""", 1),
    ("literal_scale_stays", """
        mean, var = moments(x, axes = [2]);
        y = (x - mean) * rsqrt(var + 1e-5) * 2.0 + offset * scale;""", 1),
    # near misses
    ("not_trailing_axes", """
        mean, var = moments(x, axes = [1]);
        y = (x - mean) * rsqrt(var + 1e-5);""", 0),
    ("epsilon_outside_the_root", """
        mean, var = moments(x, axes = [2]);
        y = (x - mean) * (rsqrt(var) + 1e-5);""", 0),
    ("centered_other_tensor", """
        mean, var = moments(x, axes = [2]);
        y = (scale - mean) * rsqrt(var + 1e-5);""", 0),
    ("sqrt_times", """
        mean, var = moments(x, axes = [2]);
        y = (x - mean) * sqrt(var + 1e-5);""", 0),
]


@pytest.mark.parametrize("name, body, fused", LAYER_NORMS, ids=[row[0] for row in LAYER_NORMS])
def test_layer_norm_forms(tmp_path, name, body, fused):
    folder = _write(tmp_path, _graph_text(body, LAYER_NORM_SHAPES, ["y"]))
    module, plain = _same_as_unfused(folder, _inputs(LAYER_NORM_SHAPES))
    assert _names(module)["fused_layer_norm"] == fused
    assert _names(plain)["fused_layer_norm"] == 0
    if fused:
        assert "moments" not in _names(module) and "layer_norm(" in module.code


def test_shared_intermediate_is_not_fused(tmp_path):
    body = """
        mean, var = moments(x, axes = [2]);
        y = (x - mean) * rsqrt(var + 1e-5);
        z = var * 2.0;"""
    folder = _write(tmp_path, _graph_text(body, LAYER_NORM_SHAPES, ["y", "z"]))
    module, _ = _same_as_unfused(folder, _inputs(LAYER_NORM_SHAPES))
    assert "fused_layer_norm" not in _names(module)


def test_an_intermediate_graph_output_is_not_fused(tmp_path):
    body = """
        mean, var = moments(x, axes = [2]);
        n = (x - mean) * rsqrt(var + 1e-5);
        y = n * scale + offset;"""
    folder = _write(tmp_path, _graph_text(body, LAYER_NORM_SHAPES, ["y", "n"]))
    module, _ = _same_as_unfused(folder, _inputs(LAYER_NORM_SHAPES))
    fused = [op for op in module.nnef_graph.operations if op.name == "fused_layer_norm"]
    assert len(fused) == 1 and fused[0].inputs["scale"] == 1.0  # stops at n: the affine part stays
    assert _names(module)["mul"] == 1 and _names(module)["add"] == 1


def test_the_exporter_layer_norm_fragment_fuses(tmp_path):
    library = resources.files("nnef_torch.stdlib").joinpath("extensions.nnef").read_text()
    body = """
        y = layer_norm(x, scale, offset, axes = [2], epsilon = 1e-5);
        z = layer_norm(x, axes = [1, 2], epsilon = 1e-5);"""
    folder = _write(tmp_path, _graph_text(body, LAYER_NORM_SHAPES, ["y", "z"], library=library))
    module, _ = _same_as_unfused(folder, _inputs(LAYER_NORM_SHAPES))
    assert _names(module)["fused_layer_norm"] == 2
    fused = [op for op in module.nnef_graph.operations if op.name == "fused_layer_norm"]
    assert all(op.scope and op.scope[0].startswith("layer_norm#") for op in fused)
    declared = [fragment.name for fragment in module.nnef_graph.custom_fragments]
    assert declared.count("fused_layer_norm") == 1  # besides the library's fragments that have torch kernels
    assert set(declared) - {"fused_layer_norm"} <= {"stable_sort", "stable_topk"}


def test_an_exported_layer_norm_fuses_and_matches_torch(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(approximate="tanh"))
    x = torch.randn(3, 8)
    nnef_torch.save(model, tmp_path / "exported", example_inputs=(x,))
    module = nnef_torch.load(tmp_path / "exported")
    assert _names(module)["fused_layer_norm"] == 1 and _names(module)["fused_gelu_tanh"] == 1
    torch.testing.assert_close(module(x), model(x), rtol=1e-5, atol=1e-5)


GELU_SHAPES = {"x": [4, 16]}
GELUS = [
    ("tanh_fragment_form", "y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));",
     "fused_gelu_tanh"),
    ("tanh_pow_form", "y = (1.0 + tanh((pow(x, 3.0) * 0.044715 + x) * 0.7978846)) * (x * 0.5);", "fused_gelu_tanh"),
    ("tanh_sqr_form", "y = x * (0.5 * (tanh(0.7978845608 * (x + sqr(x) * x * 0.044715)) + 1.0));", "fused_gelu_tanh"),
    ("sigmoid_form", "y = x * sigmoid(1.702 * x);", "gelu"),
    ("sigmoid_commuted", "y = sigmoid(x * 1.702) * x;", "gelu"),
    # near misses
    ("tanh_other_constant", "y = 0.5 * x * (1.0 + tanh(0.79 * (x + 0.044715 * x * x * x)));", None),
    ("tanh_square", "y = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x)));", None),
    ("sigmoid_other_constant", "y = x * sigmoid(1.5 * x);", None),
    ("sigmoid_of_a_square", "y = x * sigmoid(1.702 * x * x);", None),
    ("silu", "y = x * sigmoid(x);", None),
]


@pytest.mark.parametrize("name, body, fused", GELUS, ids=[row[0] for row in GELUS])
def test_gelu_forms(tmp_path, name, body, fused):
    folder = _write(tmp_path, _graph_text(body, GELU_SHAPES, ["y"]))
    module, plain = _same_as_unfused(folder, _inputs(GELU_SHAPES))
    names = _names(module)
    if fused is None:
        assert names == _names(plain)
    else:
        assert names[fused] == 1 and "tanh" not in names and "sigmoid" not in names and "mul" not in names


def test_gelu_with_a_shared_product_is_not_fused(tmp_path):
    body = """
        h = 0.5 * x;
        y = h * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        z = h + 1.0;"""
    folder = _write(tmp_path, _graph_text(body, GELU_SHAPES, ["y", "z"]))
    module, plain = _same_as_unfused(folder, _inputs(GELU_SHAPES))
    assert _names(module) == _names(plain)


def test_tanh_gelu_is_torch_gelu():
    x = torch.linspace(-8, 8, 2001)
    library = resources.files("nnef_torch.stdlib").joinpath("extensions.nnef").read_text()
    text = _graph_text("y = gelu_tanh(x);", {"x": [2001]}, ["y"], library=library)
    graph = read_graph(text)
    assert [op.name for op in fuse(graph).operations] == ["external", "fused_gelu_tanh"]
    torch.testing.assert_close(torch.nn.functional.gelu(x, approximate="tanh"),
                               0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))))


def test_fused_outputs_match_the_khronos_executor(tmp_path):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    shapes = {**LAYER_NORM_SHAPES}
    body = LAYER_NORMS[0][1] + "\n" + "g = 0.5 * y * (1.0 + tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));"
    folder = _write(tmp_path, _graph_text(body, shapes, ["g"]))
    module = nnef_torch.load(folder)
    assert _names(module)["fused_layer_norm"] == 1 and _names(module)["fused_gelu_tanh"] == 1
    inputs = _inputs(shapes)
    with nnef.Session(str(folder), lowered=compound_standard_ops()) as session:
        expected = np.asarray(session(*(t.numpy() for t in inputs))[0])
    np.testing.assert_allclose(module(*inputs).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("transformer")
    twin = _bench_models().write_transformer(folder, layers=2, d_model=32, heads=2, seq=8, d_ff=64)
    return folder, twin


def test_the_benchmark_transformer_fuses_every_layer_norm(transformer):
    folder, twin = transformer
    module, plain = nnef_torch.load(folder, batch_size=3), nnef_torch.load(folder, batch_size=3, fuse=False)
    assert _names(module)["fused_layer_norm"] == 4 and "moments" not in _names(module)
    assert _names(plain)["moments"] == 4 and "fused_layer_norm" not in _names(plain)
    x = torch.randn(3, 8, 32)
    torch.testing.assert_close(module(x), plain(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(module(x), twin(x), rtol=1e-5, atol=1e-5)


def test_the_benchmark_lstm_has_nothing_to_fuse(tmp_path):
    _bench_models().write_lstm(tmp_path, steps=3, inputs=4, hidden=8)
    assert _names(nnef_torch.load(tmp_path)) == _names(nnef_torch.load(tmp_path, fuse=False))


def test_passes_switch_one_by_one(transformer):
    folder, _ = transformer
    assert "fused_layer_norm" not in _names(nnef_torch.load(folder, fuse=["gelu_tanh"]))
    assert "fused_layer_norm" in _names(nnef_torch.load(folder, fuse=["layer_norm"]))
    with pytest.raises(ValueError, match="unknown fusion passes"):
        nnef_torch.load(folder, fuse=["layer_nrom"])
    assert set(PASSES) == {"layer_norm", "gelu_tanh", "gelu_sigmoid"}


def test_save_writes_the_original_text(transformer, tmp_path):
    folder, _ = transformer
    module = nnef_torch.load(folder)
    module.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "graph.nnef").read_text() == (folder / "graph.nnef").read_text()
    again = nnef_torch.load(tmp_path / "saved")
    x = torch.randn(1, 8, 32)
    torch.testing.assert_close(again(x), module(x))


def test_a_custom_implementation_keeps_its_chain(tmp_path):
    body = "y = x * sigmoid(1.702 * x);"
    folder = _write(tmp_path, _graph_text(body, GELU_SHAPES, ["y"]))
    calls = []

    def sigmoid(x):
        calls.append(1)
        return torch.sigmoid(x)
    module = nnef_torch.load(folder, custom_ops={"sigmoid": sigmoid})
    assert "gelu" not in _names(module)
    module(*_inputs(GELU_SHAPES))
    assert calls


def test_a_quantized_intermediate_is_not_fused(tmp_path):
    body = """
        mean, var = moments(x, axes = [2]);
        c = sub(x, mean);
        v = add(var, 1e-5);
        r = rsqrt(v);
        y = mul(c, r);"""
    folder = _write(tmp_path, _graph_text(body, LAYER_NORM_SHAPES, ["y"]))
    (folder / "graph.quant").write_text('"r": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n')
    module = nnef_torch.load(folder)
    assert "fused_layer_norm" not in _names(module)
