"""`update` (spec 4.8): updated variables are buffers holding the new value after each call."""
from __future__ import annotations

import numpy as np
import torch

import nnef_torch
from importer.model_files import write_model

ACCUMULATOR = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y, new_state )
{
    x = external<scalar>(shape = [1, 3]);
    state = variable<scalar>(shape = [1, 3], label = 'rnn/state');
    w = variable<scalar>(shape = [1, 3], label = 'rnn/w');
    y = mul(state, w) + x;
    new_state = update(state, y);
}
"""

RUNNING_MEAN = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [4, 2]);
    running = variable<scalar>(shape = [1, 2], label = 'bn/running_mean');
    mean = mean_reduce(x, axes = [0]);
    y = x - mean;
    updated = update(running, 0.9 * running + 0.1 * mean);
}
"""


def _accumulator(tmp_path):
    state = np.zeros((1, 3), np.float32)
    w = np.array([[0.5, 1.0, 2.0]], np.float32)
    return nnef_torch.load(write_model(tmp_path, ACCUMULATOR, {"rnn/state": state, "rnn/w": w})), w


def test_recurrent_state_accumulates_over_calls(tmp_path):
    module, w = _accumulator(tmp_path)
    assert [name for name, _ in module.named_parameters()] == ["rnn.w"]
    assert [name for name, _ in module.named_buffers()] == ["rnn.state"]
    state = np.zeros((1, 3))
    for step in range(4):
        x = np.full((1, 3), step + 1.0, np.float32)
        y, new_state = module(torch.from_numpy(x))
        expected = state * w + x  # during the call the variable is the old value
        np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-6)
        np.testing.assert_allclose(new_state.detach().numpy(), expected, rtol=1e-6)  # the update's result
        state = expected
        np.testing.assert_allclose(module.get_buffer("rnn.state").numpy(), state, rtol=1e-6)


def test_update_under_autograd_keeps_the_old_value_for_backward(tmp_path):
    module, w = _accumulator(tmp_path)
    module.get_buffer("rnn.state").fill_(2.0)
    y, _ = module(torch.ones(1, 3))
    y.sum().backward()  # mul saved the old state; the in-place write must not invalidate it
    assert torch.allclose(module.get_parameter("rnn.w").grad, torch.full((1, 3), 2.0))
    assert not module.get_buffer("rnn.state").requires_grad
    y2, _ = module(torch.ones(1, 3))
    y2.sum().backward()
    assert torch.allclose(module.get_parameter("rnn.w").grad, torch.full((1, 3), 2.0) + torch.tensor([[2.0, 3.0, 5.0]]))


def test_running_mean_like_batch_norm(tmp_path):
    folder = write_model(tmp_path, RUNNING_MEAN, {"bn/running_mean": np.zeros((1, 2), np.float32)})
    module = nnef_torch.load(folder)
    generator = np.random.default_rng(1)
    running = np.zeros((1, 2))
    for _ in range(5):
        x = generator.standard_normal((4, 2)).astype(np.float32)
        y = module(torch.from_numpy(x))
        mean = x.mean(axis=0, keepdims=True)
        running = 0.9 * running + 0.1 * mean
        np.testing.assert_allclose(y.numpy(), x - mean, atol=1e-6)
        np.testing.assert_allclose(module.get_buffer("bn.running_mean").numpy(), running, atol=1e-6)


def test_state_survives_state_dict_round_trip(tmp_path):
    module, _ = _accumulator(tmp_path / "a")
    for _ in range(3):
        module(torch.ones(1, 3))
    other, _ = _accumulator(tmp_path / "b")
    other.load_state_dict(module.state_dict())
    assert torch.equal(other.get_buffer("rnn.state"), module.get_buffer("rnn.state"))
    assert torch.equal(other(torch.ones(1, 3))[0], module(torch.ones(1, 3))[0])


def test_update_under_torch_export(tmp_path):
    module, _ = _accumulator(tmp_path)
    exported = torch.export.export(module, (torch.ones(1, 3),))
    kinds = [spec.kind.name for spec in exported.run_decompositions().graph_signature.output_specs]
    assert "BUFFER_MUTATION" in kinds
    runnable = exported.module()
    reference, _ = _accumulator(tmp_path / "ref")
    for step in range(3):
        x = torch.full((1, 3), float(step))
        assert torch.allclose(runnable(x)[0], reference(x)[0])


def test_update_under_torch_compile(tmp_path):
    module, _ = _accumulator(tmp_path)
    reference, _ = _accumulator(tmp_path / "ref")
    compiled = torch.compile(module, backend="eager")
    for step in range(3):
        x = torch.full((1, 3), float(step))
        assert torch.allclose(compiled(x)[0], reference(x)[0])
    assert torch.allclose(module.get_buffer("rnn.state"), reference.get_buffer("rnn.state"))
