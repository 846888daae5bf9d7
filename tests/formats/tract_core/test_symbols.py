"""tract's dynamic dimensions (`extension tract_symbol S;`) without a binding: the module loads with its Parameters,
binds S at its first call, and takes any value of S after it (each derived from the document), as tract runs the
same file with a symbolic input. input_shapes= and batch_size= still bind S at load."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from importer.model_files import write_model

import nnef_torch
from nnef_torch.errors import NNEFOptionError, NNEFShapeError

FIXTURES = Path(__file__).parent / "fixtures"
LENGTHS = (3, 5, 9)

# written as torch_to_nnef's TractNNEF target writes a dynamic axis: the symbol in the external's shape and in the
# body's expressions
TEXT = """version 1.0;

extension tract_registry tract_core;
extension tract_symbol S;

graph network( input ) -> ( output )
{
    input = external<scalar>(shape = [1, S, 4]);
    weight = variable<scalar>(label = 'fc.weight', shape = [3, 4]);
    bias = variable<scalar>(label = 'fc.bias', shape = [1, 3]);
    flat = reshape(input, shape = [S, 4]);
    hidden = relu(linear(flat, weight, bias));
    scores = softmax(hidden, axes = [0]);
    output = unsqueeze(scores, axes = [0]);
}
"""

TWO_INPUTS = """version 1.0;

extension tract_registry tract_core;
extension tract_symbol S;

graph network( a, b ) -> ( output )
{
    a = tract_core_external(shape = [1, S, 4], datum_type = 'f32');
    b = tract_core_external(shape = [1, S, 1], datum_type = 'f32');
    output = mul(a, b);
}
"""


@pytest.fixture()
def folder(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    return write_model(tmp_path / "symbolic", TEXT, {"fc.weight": rng.standard_normal((3, 4)).astype(np.float32),
                                                      "fc.bias": rng.standard_normal((1, 3)).astype(np.float32)})


def _tract(folder: Path):
    tract = pytest.importorskip("tract")
    model = tract.nnef().load(str(folder))
    assert "S" in str(model.input_fact(0))  # tract keeps the dimension symbolic
    return model.into_runnable()


def test_unbound_symbol_loads_and_every_length_equals_tract(folder):
    runnable = _tract(folder)
    module = nnef_torch.load(folder)
    assert module.nnef.unbound is not None and list(module.state_dict()) == ["fc.weight", "fc.bias"]
    rng = np.random.default_rng(1)
    for length in LENGTHS:
        x = rng.standard_normal((1, length, 4)).astype(np.float32)
        expected = runnable.run([x])[0].to_numpy()
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    assert module.nnef.unbound is None and module.nnef.signature == ((1, LENGTHS[0], 4),)
    assert len(module.forms()) == len(LENGTHS) - 1


def test_positions_fixture_unbound_equals_tract_at_every_length():
    folder = FIXTURES / "positions"
    runnable = _tract(folder)
    module = nnef_torch.load(folder)
    for length in LENGTHS:
        x = np.random.default_rng(length).integers(0, 9, (1, length)).astype(np.int64)
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), runnable.run([x])[0].to_numpy(),
                                   rtol=1e-6, atol=1e-6)


def test_a_length_the_graph_cannot_take_is_located_at_the_operation():
    module = nnef_torch.load(FIXTURES / "positions")  # 16 positions are stored
    with pytest.raises(NNEFShapeError) as caught:
        module(torch.zeros(1, 17, dtype=torch.int64))
    message = str(caught.value)
    assert "input 'input' of shape [1, 17] (declared [1, S], other at axis 1) does not fit the graph" in message
    assert "tract_core_gather" in message and caught.value.location.line == 32


def test_a_fixed_axis_names_the_input_the_declared_shape_and_the_axis(folder):
    module = nnef_torch.load(folder)
    with pytest.raises(NNEFShapeError) as caught:
        module(torch.zeros(1, 5, 3))
    message = str(caught.value)
    assert "input 'input' has shape [1, 5, 3]; it is declared [1, S, 4], whose axis 2 is fixed at 4" in message
    assert caught.value.location.line == 8 and "input = external" in message
    module(torch.zeros(1, 5, 4))
    with pytest.raises(NNEFShapeError, match=r"declared \[1, S, 4\], whose axis 0 is fixed at 1"):
        module(torch.zeros(2, 5, 4))  # also once bound


def test_one_symbol_takes_one_value_per_call(tmp_path):
    module = nnef_torch.load(write_model(tmp_path / "two", TWO_INPUTS))
    with pytest.raises(NNEFShapeError, match=r"input 'b' has shape \[1, 6, 1\]; it is declared \[1, S, 1\], and its "
                                             r"axis 1 \(S\) is 6 where axis 1 of input 'a' makes S 5"):
        module(torch.zeros(1, 5, 4), torch.zeros(1, 6, 1))
    a, b = torch.rand(1, 7, 4), torch.rand(1, 7, 1)
    torch.testing.assert_close(module(a, b), a * b)


def test_input_shapes_still_bind_the_symbol_and_other_lengths_run(folder):
    runnable = _tract(folder)
    module = nnef_torch.load(folder, input_shapes={"input": [1, 6, 4]})
    assert module.nnef.unbound is None and module.nnef.signature == ((1, 6, 4),)
    for length in (6, 2):
        x = np.random.default_rng(length).standard_normal((1, length, 4)).astype(np.float32)
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), runnable.run([x])[0].to_numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert list(module.forms()) == [((1, 2, 4),)]


def test_training_across_lengths_reaches_the_parameters(folder):
    module = nnef_torch.load(folder)
    weight = module.get_parameter("fc.weight")
    for length in LENGTHS:
        module(torch.rand(1, length, 4)).square().sum().backward()
    assert module.get_parameter("fc.weight") is weight and weight.grad is not None
    assert torch.count_nonzero(weight.grad) > 0


def test_save_and_export_wait_for_the_first_call(folder, tmp_path):
    module = nnef_torch.load(folder)
    with pytest.raises(NNEFOptionError, match="bind at its first call"):
        module.save(tmp_path / "early")
    with pytest.raises(NNEFOptionError, match="bind at its first call"):
        torch.export.export(module, (torch.rand(1, 5, 4),))
    x = torch.rand(1, 5, 4)
    y = module(x)
    module.save(tmp_path / "saved")  # standard NNEF has no symbols: the shapes of the first call
    assert "shape = [1, 5, 4]" in (tmp_path / "saved" / "graph.nnef").read_text()
    torch.testing.assert_close(nnef_torch.load(tmp_path / "saved")(x), y)
    assert "scalar[1,5,4]" in nnef_torch.viz.tree(module)


def test_a_graph_that_lowers_at_no_probed_length_keeps_the_binding_error(tmp_path):
    text = TEXT.replace("flat = reshape(input, shape = [S, 4]);", "flat = reshape(input, shape = [S, 5]);")
    with pytest.raises(NNEFOptionError, match=r"tract_symbol S.*input_shapes=.*does not lower with them"):
        nnef_torch.load(write_model(tmp_path / "bad", text, {"fc.weight": np.zeros((3, 4), np.float32),
                                                              "fc.bias": np.zeros((1, 3), np.float32)}))
