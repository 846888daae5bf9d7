"""torch_to_nnef `TractNNEF` exports with `dynamic_axes` (fixtures/dynamic/, made by make_dynamic_fixtures.py): each
declares tract symbols, and read at sizes of our choosing (three per fixture, none the export's example) equals
tract running the same folder and the torch module made again from its seed.

Every fixture is read (a new one this reader refuses fails here, naming what torch_to_nnef wrote). Three need
tract's typing of the dialect (nnef_torch/formats/tract_core/by_value.py): `pad` with nested arrays, the
`dyn_slice` fragment, shapes computed with `tract_core_shape_of`."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from formats.tract_core.make_dynamic_fixtures import FIXTURES, SPECS, build, inputs
from nnef_torch.errors import NNEFOptionError

# three values of each fixture's symbols; the export's example (make_dynamic_fixtures.SPECS) is none of them
SIZES = {
    "mlp": [{"B": 1}, {"B": 3}, {"B": 7}],
    "causal_conv1d": [{"T": 1}, {"T": 7}, {"T": 23}],
    "causal_conv1d_pad": [{"T": 1}, {"T": 7}, {"T": 23}],
    "causal_conv1d_slice": [{"T": 1}, {"T": 7}, {"T": 23}],
    "attention": [{"S": 1}, {"S": 4}, {"S": 11}],
    "attention_shape_of": [{"S": 1}, {"S": 4}, {"S": 11}],
    "cnn2d": [{"H": 4, "W": 4}, {"H": 7, "W": 9}, {"H": 13, "W": 6}],
    "two_inputs": [{"B": 1, "T": 1}, {"B": 3, "T": 5}, {"B": 4, "T": 2}],
}
READ = list(SIZES)
# the statement this reader refuses in each of the others (torch_to_nnef 0.24.12, tract target 0.23.8), and a size
CASES = [(name, values) for name in READ for values in SIZES[name]]
RTOL, ATOL = 1e-4, 1e-5


def _id(case: tuple[str, dict[str, int]]) -> str:
    name, values = case
    return name + "-" + "-".join(f"{symbol}{value}" for symbol, value in values.items())


def _inputs(name: str, values: dict[str, int]) -> dict[str, torch.Tensor]:
    return inputs(name, values, seed=sum(values.values()))


def _torch(name: str, xs: dict[str, torch.Tensor]) -> np.ndarray:
    with torch.no_grad():
        return build(name)(*xs.values()).numpy()


def _tract(folder: Path, xs: dict[str, torch.Tensor]) -> np.ndarray:
    tract = pytest.importorskip("tract")
    model = tract.nnef().load(str(folder)).into_runnable()  # tract_core is on by default (no with_tract_core())
    return model.run([x.numpy() for x in xs.values()])[0].to_numpy()


def _run(module: torch.nn.Module, xs: dict[str, torch.Tensor]) -> np.ndarray:
    with torch.no_grad():
        return module(*xs.values()).numpy()


def test_every_fixture_is_tested_or_refused():
    on_disk = {folder.name for folder in FIXTURES.iterdir() if folder.is_dir()}
    assert on_disk == set(SPECS) == set(READ)
    for name in SPECS:
        text = (FIXTURES / name / "graph.nnef").read_text()
        assert "extension tract_registry tract_core;" in text
        for symbol in {d for dims in SPECS[name].inputs.values() for d in dims if isinstance(d, str)}:
            assert f"extension tract_symbol {symbol};" in text
        assert sum(f.stat().st_size for f in (FIXTURES / name).iterdir()) < 50_000


@pytest.mark.parametrize("name", READ)
def test_sizes_are_not_the_example(name):
    assert SPECS[name].example not in SIZES[name] and len(SIZES[name]) == 3


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_bound_by_input_shapes_equals_tract_and_torch(case):
    name, values = case
    xs = _inputs(name, values)
    module = nnef_torch.load(FIXTURES / name, input_shapes={key: list(x.shape) for key, x in xs.items()})
    got, expected = _run(module, xs), _torch(name, xs)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got, _tract(FIXTURES / name, xs), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", READ)
def test_loaded_once_takes_every_size(name):
    """Without a binding, one module takes each size (the symbols bound at each call), as tract runs the file."""
    try:
        module = nnef_torch.load(FIXTURES / name)
    except NNEFOptionError as error:
        if "tract_symbol" not in str(error):
            raise
        pytest.skip(f"nnef_torch.load without input_shapes= refuses unbound tract symbols: {error}")
    for values in SIZES[name]:
        xs = _inputs(name, values)
        got = _run(module, xs)
        np.testing.assert_allclose(got, _torch(name, xs), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(got, _tract(FIXTURES / name, xs), rtol=RTOL, atol=ATOL)

