"""Saving a module read from tract's Q4_0 and float16 .dat files: the same item types again (the same bytes while
nothing changed, quantized again from changed values, which tract then runs), `weights='float'`, `convert`."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import main
from nnef_torch.format import block_quant, tensor_file

K, N = 64, 8
GRAPH = f"""version 1.0;

graph G( x ) -> ( y )
{{
    x = external<scalar>(shape = [{K}, {K}]);
    w = variable<scalar>(shape = [{N}, {K}], label = 'w');
    b = variable<scalar>(shape = [1, {N}], label = 'b');
    y = linear(x, w, b);
}}
"""


def q4_0_model(folder):
    """w as torch_to_nnef quantizes it (the rule whose blocks min-max does not reproduce), b as float16."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, K)).astype(np.float32)
    codes, scales = block_quant.min_max_q4_0(w, rule="torch_to_nnef")
    folder.mkdir()
    (folder / "graph.nnef").write_text(GRAPH)
    (folder / "w.dat").write_bytes(tensor_file.encode_blocks(codes, scales))
    (folder / "b.dat").write_bytes(tensor_file.encode(rng.standard_normal((1, N)).astype(np.float16)))
    return folder


def tract_output(folder) -> np.ndarray:
    tract = pytest.importorskip("tract", reason="tract executes the saved file as the reference")
    return tract.nnef().load(str(folder)).into_runnable().run([np.eye(K, dtype=np.float32)])[0].to_numpy()


def test_loaded_values_are_tracts_and_unchanged_save_keeps_the_bytes(tmp_path):
    source = q4_0_model(tmp_path / "m")
    module = nnef_torch.load(source, dtype=torch.float32)  # float16 files load as float16 without dtype=
    assert {p.dtype for p in module.parameters()} == {torch.float32}
    with torch.no_grad():
        np.testing.assert_array_equal(module(torch.eye(K)).numpy(), tract_output(source))
    module.save(tmp_path / "s")
    for label in ("w", "b"):
        assert (tmp_path / "s" / f"{label}.dat").read_bytes() == (source / f"{label}.dat").read_bytes()


def test_changed_values_are_quantized_again_as_q4_0(tmp_path):
    module = nnef_torch.load(q4_0_model(tmp_path / "m"), dtype=torch.float32)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.mul_(1.5)
    module.save(tmp_path / "s")
    saved = tmp_path / "s" / "w.dat"
    header = tensor_file.read_header(saved.read_bytes())
    assert header.block == "q4_0" and struct.unpack_from("<HH", saved.read_bytes(), 48) == (0x3040, 0x5452)
    assert tensor_file.read_header((tmp_path / "s" / "b.dat").read_bytes()).bits == 16
    w_now = dict(module.named_parameters())
    current = next(v for k, v in w_now.items() if tuple(v.shape) == (N, K)).detach().numpy()
    stored = nnef_torch.read_tensor(saved)
    assert np.abs(stored - current).max() <= np.abs(current).max() / 8 * 1.01
    b = nnef_torch.read_tensor(tmp_path / "s" / "b.dat").astype(np.float32)
    np.testing.assert_array_equal(tract_output(tmp_path / "s") - b, stored.T)


def test_weights_float_writes_float32(tmp_path):
    module = nnef_torch.load(q4_0_model(tmp_path / "m"))
    module.save(tmp_path / "s", weights="float")
    for label, shape in (("w", (N, K)), ("b", (1, N))):
        data = tensor_file.decode((tmp_path / "s" / f"{label}.dat").read_bytes())
        assert data.header.block is None and data.array.dtype == np.float32 and data.array.shape == shape
        np.testing.assert_array_equal(data.array, nnef_torch.read_tensor(tmp_path / "m" / f"{label}.dat"))
    with pytest.raises(nnef_torch.NNEFOptionError, match="weights must be one of"):
        module.save(tmp_path / "t", weights="q4")


def test_convert_keeps_block_bytes(tmp_path):
    source = q4_0_model(tmp_path / "m")
    for layout in ("keep", "current"):
        assert main(["convert", str(source), str(tmp_path / layout), "--tensor-layout", layout]) == 0
        assert (tmp_path / layout / "w.dat").read_bytes() == (source / "w.dat").read_bytes()


# ------------------------------------------------------------------------------------------------- exporting

def test_export_block_weights_q4_0(tmp_path):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 64)
    nnef_torch.save(module, tmp_path / "e", x, quantization={"block_weights": "q4_0"})
    blocks = {path.relative_to(tmp_path / "e").as_posix(): tensor_file.read_header(path.read_bytes()).block
              for path in (tmp_path / "e").rglob("*.dat")}
    assert blocks == {"0/weight.dat": "q4_0", "0/bias.dat": None, "2/weight.dat": None, "2/bias.dat": None}
    weight = module[0].weight.detach().numpy()
    stored = nnef_torch.read_tensor(tmp_path / "e" / "0" / "weight.dat")
    np.testing.assert_array_equal(stored, block_quant.dequantize_q4_0(*block_quant.min_max_q4_0(weight)))
    tract = pytest.importorskip("tract", reason="tract executes the export as the reference")
    ran = tract.nnef().load(str(tmp_path / "e")).into_runnable().run([x.numpy()])[0].to_numpy()
    with torch.no_grad():
        np.testing.assert_allclose(nnef_torch.load(tmp_path / "e")(x).numpy(), ran, rtol=1e-5, atol=1e-6)
    with pytest.raises(nnef_torch.ExportError, match="block_weights must be None or one of q4_0"):
        nnef_torch.export(module, x, quantization={"block_weights": "q3"})


def test_given_codes_and_scales_are_written_as_they_are(tmp_path):
    from nnef_torch.importer.weights import block_storage

    module = torch.nn.Linear(64, 2, bias=False)
    model = nnef_torch.export(module, torch.randn(1, 64))
    codes = np.tile(np.arange(-8, 8, dtype=np.int8), 8).reshape(2, 64)
    scales = np.array([[0.5, -1.0], [2.0, 0.25]], np.float16)
    (label,) = model.tensors
    model.storage[label] = block_storage("q4_0", codes=codes, scales=scales)
    model.save(tmp_path / "q")
    (path,) = (tmp_path / "q").rglob("*.dat")
    expected = np.repeat(scales.astype(np.float32), 32, axis=1) * codes
    np.testing.assert_array_equal(nnef_torch.read_tensor(path), expected)
    x = np.eye(64, dtype=np.float32)[:1]
    tract = pytest.importorskip("tract", reason="tract executes the file as the reference")
    ran = tract.nnef().load(str(tmp_path / "q")).into_runnable().run([x])[0].to_numpy()
    np.testing.assert_array_equal(ran, expected[:, :1].T)


def test_weights_float_writes_a_traced_float16_module_as_float32(tmp_path):
    module = torch.nn.Linear(4, 2).half()
    x = torch.randn(1, 4).half()
    nnef_torch.save(module, tmp_path / "h", x)
    nnef_torch.save(module, tmp_path / "f", x, weights="float")
    for path in (tmp_path / "h").rglob("*.dat"):
        assert nnef_torch.read_tensor(path).dtype == np.float16
        twin = nnef_torch.read_tensor(tmp_path / "f" / path.relative_to(tmp_path / "h"))
        assert twin.dtype == np.float32
        np.testing.assert_array_equal(twin, nnef_torch.read_tensor(path).astype(np.float32))
