"""An imported MXNet model trains as MXNet trains it (`fixtures/training/`, one step computed by MXNet 1.9.1):
batch statistics in training mode, moving statistics moved with MXNet's momentum m (torch's 1 - m) and the biased
batch variance, gamma fixed at 1 where `fix_gamma`, `use_global_stats` honoured, and every gradient. Fine-tuning
over several steps matches a hand-written torch twin and lowers the loss."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nnef_torch
from nnef_torch.formats.nnvm.params import load_parameters

FOLDER = Path(__file__).resolve().parent / "fixtures" / "training"
SYMBOL = FOLDER / "cnn-symbol.json"
MOMENTUM = {"bn1": 0.8, "bn2": 0.9}  # MXNet's, as the symbol says


@pytest.fixture()
def fixture() -> dict[str, np.ndarray]:
    with np.load(FOLDER / "cnn.npz") as arrays:
        return dict(arrays)


def _state_buffers(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The persistent buffers (constants the module computes with are non-persistent ones)."""
    state = module.state_dict()
    return {name: buffer for name, buffer in module.named_buffers() if name in state}


def _load() -> torch.nn.Module:
    return nnef_torch.load(SYMBOL, input_shapes={"data": [4, 3, 8, 8]})


def test_state_is_named_as_mxnet_names_it_and_aux_states_are_buffers():
    module = _load()
    parameters, buffers = dict(module.named_parameters()), _state_buffers(module)
    stored = load_parameters(FOLDER / "cnn-0000.params", None)
    assert set(buffers) == stored.aux == {f"bn{i}_moving_{s}" for i in (1, 2, 3) for s in ("mean", "var")}
    # bn2's gamma is fixed at 1 (fix_gamma), so the graph never reads it
    assert set(parameters) == set(stored.arrays) - stored.aux - {"bn2_gamma"}
    for name, value in {**parameters, **buffers}.items():
        np.testing.assert_array_equal(value.detach().numpy(), stored[name])


def test_eval_mode_gives_mxnet_inference(fixture):
    module = _load().eval()
    with torch.no_grad():
        output = module(torch.from_numpy(fixture["data"]))
    np.testing.assert_allclose(output.numpy(), fixture["eval_output"], rtol=1e-5, atol=1e-5)


def test_training_step_gives_mxnet_outputs_gradients_and_moving_statistics(fixture):
    module = _load().train()
    output = module(torch.from_numpy(fixture["data"]))
    np.testing.assert_allclose(output.detach().numpy(), fixture["output"], rtol=1e-4, atol=1e-5)
    output.backward(torch.from_numpy(fixture["head_grad"]))
    parameters = dict(module.named_parameters())
    grads = {key[len("grad:"):]: value for key, value in fixture.items() if key.startswith("grad:")}
    assert not np.any(grads.pop("bn2_gamma")), "MXNet gives a fixed gamma no gradient"
    assert set(grads) == set(parameters)
    # a bias before batch statistics has a gradient of zero, in rounding noise: tolerances scale with all of them
    scale = max(float(np.abs(value).max()) for value in grads.values())
    for name, expected in grads.items():
        np.testing.assert_allclose(parameters[name].grad.numpy(), expected, rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=name)
    buffers = dict(module.named_buffers())
    for key, expected in fixture.items():
        if key.startswith("after:"):
            name = key[len("after:"):]
            np.testing.assert_allclose(buffers[name].numpy(), expected, rtol=1e-5, atol=1e-6, err_msg=name)
    stored = load_parameters(FOLDER / "cnn-0000.params", None)
    for name in ("bn3_moving_mean", "bn3_moving_var"):  # use_global_stats: never moved
        np.testing.assert_array_equal(buffers[name].numpy(), stored[name])


def test_momentum_is_torch_convention_in_the_module():
    modules = dict(_load().get_submodule("op_modules").named_children())
    assert {name: module.momentum for name, module in modules.items()} == {"bn1": 0.2, "bn2": 0.1}


class Twin(torch.nn.Module):
    """The fixture's CNN written by hand, with torch's layers and the same parameters."""

    def __init__(self, values: dict[str, np.ndarray]):
        super().__init__()
        self.p = torch.nn.ParameterDict({name: torch.nn.Parameter(torch.from_numpy(values[name].copy()))
                                         for name in values if not name.endswith(("moving_mean", "moving_var"))
                                         and name != "bn2_gamma"})
        for name in values:
            if name.endswith(("moving_mean", "moving_var")):
                self.register_buffer(name, torch.from_numpy(values[name].copy()))

    def bn(self, x: torch.Tensor, name: str, gamma: bool = True, global_stats: bool = False) -> torch.Tensor:
        training = self.training and not global_stats
        momentum = 1 - MOMENTUM.get(name, 0.9)
        weight = self.p[f"{name}_gamma"] if gamma else None
        return F.batch_norm(x, getattr(self, f"{name}_moving_mean"), getattr(self, f"{name}_moving_var"), weight,
                            self.p[f"{name}_beta"], training, momentum, 1e-5 if name == "bn1" else 1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.p
        x = F.conv2d(x, p["conv1_weight"], p["conv1_bias"], padding=1)
        x = F.max_pool2d(F.relu(self.bn(x, "bn1")), 2)
        x = F.relu(self.bn(F.conv2d(x, p["conv2_weight"], p["conv2_bias"], padding=1), "bn2", gamma=False))
        x = self.bn(F.conv2d(x, p["conv3_weight"], p["conv3_bias"]), "bn3", global_stats=True)
        return F.linear(x.flatten(1), p["fc_weight"], p["fc_bias"])


def test_fine_tuning_matches_a_hand_written_twin_and_lowers_the_loss():
    stored = load_parameters(FOLDER / "cnn-0000.params", None)
    module, twin = _load().train(), Twin(stored.arrays).train()
    rs = np.random.RandomState(0)
    x = torch.from_numpy(rs.standard_normal((16, 3, 8, 8)).astype(np.float32))
    labels = torch.from_numpy(rs.randint(0, 5, 16))
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (module, twin)]
    losses = []
    for _ in range(8):
        step = []
        for model, optimizer in zip((module, twin), optimizers):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
            step.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}))
            optimizer.step()
        (ours, our_grads), (theirs, their_grads) = step
        assert ours == pytest.approx(theirs, rel=1e-5)
        for name, grad in our_grads.items():
            torch.testing.assert_close(grad, their_grads[f"p.{name}"], rtol=1e-4, atol=1e-5)
        losses.append(ours)
    assert losses[-1] < 0.7 * losses[0]
    # torch's F.batch_norm moves the variance with the unbiased batch variance, MXNet (and nnef_torch) with the
    # biased one: the means agree, the variances differ by about that factor
    torch.testing.assert_close(module.get_buffer("bn1_moving_mean"), twin.bn1_moving_mean, rtol=1e-4, atol=1e-5)


def test_dropout_drops_in_training_only(tmp_path):
    import json
    document = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                          {"op": "Dropout", "name": "drop", "inputs": [[0, 0, 0]], "attrs": {"p": "0.5"}}],
                "arg_nodes": [0], "node_row_ptr": [0, 1, 3], "heads": [[1, 0, 0]]}
    path = tmp_path / "drop-symbol.json"
    path.write_text(json.dumps(document))
    module = nnef_torch.load(path, params={}, input_shapes={"data": [64, 64]})
    x = torch.ones(64, 64)
    torch.testing.assert_close(module.eval()(x), x)
    dropped = module.train()(x)
    assert set(dropped.unique().tolist()) == {0.0, 2.0}
    assert 0.4 < float((dropped == 0).float().mean()) < 0.6


def test_training_mode_under_torch_compile(fixture):
    module = _load().train()
    compiled = torch.compile(module, backend="eager")
    output = compiled(torch.from_numpy(fixture["data"]))
    np.testing.assert_allclose(output.detach().numpy(), fixture["output"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(module.get_buffer("bn1_moving_mean").numpy(), fixture["after:bn1_moving_mean"],
                               rtol=1e-5, atol=1e-6)


def test_saved_as_nnef_and_read_back_it_still_trains_as_mxnet(fixture, tmp_path):
    """The NNEF document defines batch_norm_moving and dropout as fragments (inference bodies any consumer runs);
    nnef_torch reads them back as the same training-mode submodules, with the statistics as buffers."""
    _load().save(tmp_path / "cnn.nnef")
    text = (tmp_path / "cnn.nnef" / "graph.nnef").read_text()
    assert "fragment batch_norm_moving" in text and "momentum = 0.2" in text
    module = nnef_torch.load(tmp_path / "cnn.nnef").train()
    # bn3's statistics (use_global_stats) are inputs of a plain batch_normalization: in NNEF, variables, which
    # nnef_torch makes Parameters; the moving ones stay buffers
    assert set(_state_buffers(module)) == {f"bn{i}_moving_{s}" for i in (1, 2)
                                                            for s in ("mean", "var")}
    output = module(torch.from_numpy(fixture["data"]))
    np.testing.assert_allclose(output.detach().numpy(), fixture["output"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(module.get_buffer("bn1_moving_var").numpy(), fixture["after:bn1_moving_var"],
                               rtol=1e-5, atol=1e-6)
