"""torch_to_nnef `TractNNEF` exports (fixtures/, made by make_fixtures.py) read as modules: outputs equal tract's,
they train, they save back as standard NNEF that the Khronos parser reads (and tract runs, where its standard mode
has the ops), and in tract's form (dialect='tract_core') that tract runs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import NNEFOptionError

FIXTURES = Path(__file__).parent / "fixtures"
NAMES = ["mlp", "cnn", "resblock", "lstm", "gru", "transformer", "gathers", "positions"]
# ops tract's standard mode lacks (it reads them only as tract_core ops)
NOT_IN_TRACT_STANDARD = ("gather(", "cast<", "constant<")


def _io(name: str) -> tuple[Path, np.ndarray, np.ndarray]:
    folder = FIXTURES / name
    return folder, np.load(folder / "input.npy"), np.load(folder / "output.npy")


def _load(folder: Path, x: np.ndarray):
    """positions declares `extension tract_symbol S;`: its length is bound by the input's shape."""
    if folder.name == "positions":
        return nnef_torch.load(folder, input_shapes={"input": list(x.shape)})
    return nnef_torch.load(folder)


def _run(module, x: np.ndarray) -> np.ndarray:
    return module(torch.from_numpy(x)).detach().numpy()


@pytest.mark.parametrize("name", NAMES)
def test_fixture_equals_tract(name):
    tract = pytest.importorskip("tract")
    folder, x, expected = _io(name)
    live = tract.nnef().load(str(folder)).into_runnable().run([x])[0].to_numpy()  # tract_core is on by default
    np.testing.assert_allclose(live, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(_load(folder, x), x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_trains(name):
    folder, x, _ = _io(name)
    module = _load(folder, x)
    params = [p for p in module.parameters() if p.is_floating_point()]
    assert params
    module(torch.from_numpy(x)).square().sum().backward()
    grads = [p.grad for p in params if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_saves_standard(name, tmp_path):
    nnef = pytest.importorskip("nnef")
    tract = pytest.importorskip("tract")
    folder, x, expected = _io(name)
    module = _load(folder, x)
    module.save(tmp_path / "out")
    text = (tmp_path / "out" / "graph.nnef").read_text()
    assert "tract_" not in text
    nnef.load_graph(str(tmp_path / "out"))
    again = nnef_torch.load(tmp_path / "out", lenient=False)
    np.testing.assert_allclose(_run(again, x), expected, rtol=1e-4, atol=1e-5)
    if not any(op in text for op in NOT_IN_TRACT_STANDARD):
        ran = tract.nnef().without_tract_core().load(str(tmp_path / "out")).into_runnable().run([x])[0].to_numpy()
        np.testing.assert_allclose(ran, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_saves_dialect(name, tmp_path):
    tract = pytest.importorskip("tract")
    folder, x, expected = _io(name)
    module = _load(folder, x)
    nnef_torch.save(module, tmp_path / "out", dialect="tract_core")
    assert "extension tract_registry tract_core;" in (tmp_path / "out" / "graph.nnef").read_text()
    ran = tract.nnef().load(str(tmp_path / "out")).into_runnable().run([x])[0].to_numpy()
    np.testing.assert_allclose(ran, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_run(nnef_torch.load(tmp_path / "out"), x), expected, rtol=1e-4, atol=1e-5)


def test_symbol_bound_by_batch_size_follows_tract():
    tract = pytest.importorskip("tract")
    folder = FIXTURES / "positions"
    x = np.random.default_rng(1).integers(0, 9, (1, 7)).astype(np.int64)  # another length than the stored input
    live = tract.nnef().load(str(folder)).into_runnable().run([x])[0].to_numpy()
    module = nnef_torch.load(folder, batch_size=7, batch_axes={"input": 1})
    np.testing.assert_allclose(_run(module, x), live, rtol=1e-6, atol=1e-6)


def test_symbol_unbound_names_it_and_the_options():
    """Reading the graph needs the symbol bound (a module binds it at its first call: test_generic_shapes.py)."""
    with pytest.raises(NNEFOptionError) as info:
        nnef_torch.read_model(FIXTURES / "positions")
    message = str(info.value)
    assert "tract_symbol S" in message and "input_shapes=" in message and "batch_axes={'input': 1}" in message
    assert "graph.nnef:" in message


def test_dialect_save_refused_for_standard_module(tmp_path):
    module = nnef_torch.load(FIXTURES / "mlp")
    module.save(tmp_path / "std")
    with pytest.raises(NNEFOptionError, match="dialect"):
        nnef_torch.load(tmp_path / "std").save(tmp_path / "again", dialect="tract_core")
    with pytest.raises(NNEFOptionError, match="dialect"):
        module.save(tmp_path / "x", dialect="onnx")
