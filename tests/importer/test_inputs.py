"""A call's inputs are checked before any generated code runs: the number of axes, the dtype against the input's
NNEF type; each error names the input, its declared shape and the axis (or the axes), at its declaration."""
from __future__ import annotations

import pytest
import torch

import nnef_torch
from importer.model_files import write_model
from nnef_torch.errors import NNEFShapeError, NNEFTypeError

TEXT = """version 1.0;
graph G( x, index, mask ) -> ( kept, picked )
{
    x = external<scalar>(shape = [2, 4]);
    index = external<integer>(shape = [3]);
    mask = external<logical>(shape = [2, 4]);
    kept = select(mask, x, 0.0);
    picked = gather(x, index, axis = 1);
}
"""


@pytest.fixture()
def module(tmp_path):
    return nnef_torch.load(write_model(tmp_path / "m", TEXT))


def _inputs(batch: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.arange(batch * 4, dtype=torch.float32).reshape(batch, 4)
    return x, torch.tensor([3, 0, 1]), x > 2


def test_inputs_of_the_declared_shapes_and_of_others_run(module):
    for batch in (2, 5):
        x, index, mask = _inputs(batch)
        kept, picked = module(x, index, mask)
        torch.testing.assert_close(kept, torch.where(mask, x, 0.0))
        torch.testing.assert_close(picked, x[:, [3, 0, 1]])
    kept, picked = module(x, mask=mask, index=index)  # by name
    torch.testing.assert_close(picked, x[:, [3, 0, 1]])


@pytest.mark.parametrize(("position", "value", "declared", "kind"), [
    (0, torch.zeros(2, 4, dtype=torch.int64), "scalar [2, 4]", "a floating-point tensor; found torch.int64"),
    (1, torch.zeros(3), "integer [3]", "an integer tensor; found torch.float32"),
    (1, torch.zeros(3, dtype=torch.bool), "integer [3]", "an integer tensor; found torch.bool"),
    (2, torch.zeros(2, 4), "logical [2, 4]", "a bool tensor; found torch.float32"),
])
def test_a_wrong_dtype_names_the_input_and_its_declaration(module, position, value, declared, kind):
    inputs = list(_inputs())
    inputs[position] = value
    name = ("x", "index", "mask")[position]
    with pytest.raises(NNEFTypeError) as caught:
        module(*inputs)
    assert f"input '{name}' is declared {declared}, which takes {kind}" in str(caught.value)
    assert caught.value.location.line == 4 + position  # its `external`, with the line shown
    assert f"{name} = external" in str(caught.value)


def test_a_wrong_number_of_axes_names_the_input_and_its_declaration(module):
    x, index, mask = _inputs()
    with pytest.raises(NNEFShapeError, match=r"input 'mask' has shape \[2, 4, 1\] \(3 axes\); it is declared "
                                             r"\[2, 4\] \(2 axes\): no axis may be added or removed"):
        module(x, index, mask[..., None])


def test_an_extent_the_graph_fixes_names_the_input_the_declaration_and_the_axis(module):
    x, index, mask = _inputs()
    with pytest.raises(NNEFShapeError) as caught:
        module(x, index, torch.ones(2, 5, dtype=torch.bool))
    message = str(caught.value)
    assert "input 'mask' of shape [2, 5] (declared [2, 4], other at axis 1) does not fit the graph" in message
    assert caught.value.location.line == 7  # the select that broadcasts mask with x


def test_arguments_that_do_not_bind_get_pythons_error(module):
    with pytest.raises(TypeError):
        module(*_inputs(), torch.zeros(1))
    with pytest.raises(TypeError):
        module(*_inputs()[:2], masks=_inputs()[2])
    with pytest.raises(TypeError, match="mask"):
        module(*_inputs()[:2])
    assert not module.forms()
