"""NetworkPass: every edit and callback, the promoted network run (saved, in the Khronos executor, and as our module)
against a hand-edited twin of the model; a pass that breaks the graph fails with a located error."""
from __future__ import annotations

import nnef
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from graph_def.twins import TINY, images, khronos_outputs, twin
from nnef_torch import graph_def
from nnef_torch.errors import NNEFError, NNEFOptionError
from nnef_torch.graph_def import NetworkPass


def _tiny():
    return graph_def.load(TINY).default_graph()


def _check(promoted, folder, twin_folder, x):
    """The promoted network, saved and run by the Khronos executor and run as our module, equals the twin."""
    graph_def.save(folder, promoted)
    (expected,) = khronos_outputs(twin_folder, x)
    (found,) = khronos_outputs(folder, x)
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
    module = promoted.module()
    module.set_quantization(False)  # the Khronos executor ignores graph.quant
    with torch.no_grad():
        ours = module(torch.from_numpy(x))
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)
    return expected


def test_drop_function(tmp_path):
    promoted = _tiny().promote(NetworkPass().drop_function("relu1"))
    edited = twin(tmp_path / "twin", [("    relu1 = relu(conv1);\n", ""), ("max_pool(relu1", "max_pool(conv1")],
                  quant=False)
    assert "relu1" not in promoted.functions and promoted.functions["pool1"].inputs == ["conv1"]
    _check(promoted, tmp_path / "promoted", edited, images())


def test_remove_and_rewire(tmp_path):
    promoted = _tiny().promote(NetworkPass().remove_and_rewire("pool1", 0, 0))
    edited = twin(tmp_path / "twin", [("conv(pool1,", "conv(relu1,")], quant=False)
    _check(promoted, tmp_path / "promoted", edited, images())


def test_use_up_to_keeps_a_backbone(tmp_path):
    promoted = _tiny().promote(NetworkPass().use_up_to("pool1"))
    assert promoted.outputs == ["pool1"] and list(promoted.functions) == ["conv1", "relu1", "pool1"]
    assert set(promoted.parameters) == {"conv1_filter", "conv1_bias"}
    edited = twin(tmp_path / "twin", [("-> ( probabilities )", "-> ( pool1 )")], quant=False)
    _check(promoted, tmp_path / "promoted", edited, images())


def test_rename(tmp_path):
    promoted = _tiny().promote(NetworkPass().rename("relu1", "act1").rename("image", "picture"))
    assert "act1" in promoted.functions and promoted.inputs == ["picture"]
    assert promoted.functions["pool1"].inputs == ["act1"]
    _check(promoted, tmp_path / "promoted", TINY, images())


def test_set_variable_gives_a_parameter_a_value(tmp_path):
    bias = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    promoted = _tiny().promote(NetworkPass().set_variable("fc_bias", bias))
    edited = twin(tmp_path / "twin", [])
    with open(edited / "fc" / "bias.dat", "wb") as file:
        nnef.write_tensor(file, bias)
    _check(promoted, tmp_path / "promoted", edited, images())


def test_set_variable_fixes_an_activation(tmp_path):
    value = np.random.default_rng(1).random((1, 8, 16, 16)).astype(np.float32)
    promoted = _tiny().promote(NetworkPass().set_variable("relu1", value))
    assert promoted.variables["relu1"].kind == "parameter" and "relu1" not in promoted.functions
    x = images(1)
    expected = khronos_outputs(TINY, x)[0]  # sanity: the image no longer matters
    with torch.no_grad():
        module = promoted.module()
        a, b = module(torch.from_numpy(x)), module(torch.from_numpy(images(1, seed=5)))
    torch.testing.assert_close(a, b)
    assert not np.allclose(a.numpy(), expected)


def test_force_average_pooling_global(tmp_path):
    avg = twin(tmp_path / "avg", [("mean_reduce(relu2, axes = [2, 3])",
                                   "avg_pool(relu2, size = [1, 1, 8, 8], border = 'ignore', "
                                   "padding = [(0, 0), (0, 0), (0, 0), (0, 0)])")], quant=False)
    network = graph_def.load(avg).default_graph()
    promoted = network.promote(NetworkPass().force_average_pooling_global())
    assert promoted.functions["pooled"].type == "mean_reduce"
    _check(promoted, tmp_path / "promoted", TINY, images())
    bigger = torch.from_numpy(images(2, size=32))  # global pooling runs at any image size
    original = graph_def.load(TINY).default_graph().module()
    original.set_quantization(False)  # the twin has no graph.quant
    with torch.no_grad():
        torch.testing.assert_close(promoted.module()(bigger), original(bigger))


BN_TEXT = """version 1.0;
graph G( x ) -> ( y )
{
    x = external(shape = [4, 3, 5, 5]);
    mean = variable(shape = [1, 3], label = 'bn/mean');
    variance = variable(shape = [1, 3], label = 'bn/variance');
    offset = variable(shape = [1, 3], label = 'bn/offset');
    scale = variable(shape = [1, 3], label = 'bn/scale');
    y = batch_normalization(x, mean, variance, offset, scale, epsilon = 1e-5);
}
"""


@pytest.fixture
def bn_model(tmp_path):
    folder = tmp_path / "bn"
    (folder / "bn").mkdir(parents=True)
    (folder / "graph.nnef").write_text(BN_TEXT)
    rng = np.random.default_rng(3)
    values = {"mean": rng.standard_normal((1, 3)), "variance": rng.random((1, 3)) + 0.5,
              "offset": rng.standard_normal((1, 3)), "scale": rng.standard_normal((1, 3))}
    for name, value in values.items():
        with open(folder / "bn" / f"{name}.dat", "wb") as file:
            nnef.write_tensor(file, value.astype(np.float32))
    return folder, {k: torch.from_numpy(v.astype(np.float32)).reshape(3) for k, v in values.items()}


def test_batch_normalization_with_batch_statistics(tmp_path, bn_model):
    folder, values = bn_model
    network = graph_def.load(folder).default_graph()
    promoted = network.promote(NetworkPass().set_batch_normalization_batch_stat_all(True))
    assert [f.type for f in promoted.forward_sequence()] == ["moments", "batch_normalization"]
    x = np.random.default_rng(4).standard_normal((4, 3, 5, 5)).astype(np.float32) * 3 + 1
    edited = tmp_path / "twin"
    import shutil
    shutil.copytree(folder, edited)
    (edited / "graph.nnef").write_text(BN_TEXT.replace(
        "    y = batch_normalization(x, mean, variance,",
        "    m, v = moments(x, axes = [0, 2, 3]);\n    y = batch_normalization(x, m, v,"))
    expected = _check(promoted, tmp_path / "promoted", edited, x)
    twin_torch = F.batch_norm(torch.from_numpy(x), None, None, values["scale"], values["offset"], training=True,
                              eps=1e-5)
    np.testing.assert_allclose(expected, twin_torch.numpy(), rtol=1e-4, atol=1e-5)
    restored = promoted.promote(NetworkPass().set_batch_normalization_batch_stat_all(False))
    stored = F.batch_norm(torch.from_numpy(x), values["mean"], values["variance"], values["scale"],
                          values["offset"], training=False, eps=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(restored(torch.from_numpy(x)), stored, rtol=1e-5, atol=1e-5)


def test_fix_parameters_freezes_but_still_shares():
    g = graph_def.load(TINY)
    network = g.default_graph()
    frozen = network.promote(NetworkPass(name="frozen").fix_parameters())
    g.add(frozen)
    assert not any(v.need_grad for v in frozen.parameters.values())
    assert list(frozen.module().parameters()) == []
    trained = network.module()
    optimizer = torch.optim.SGD(trained.parameters(), lr=0.5)
    loss = trained(torch.from_numpy(images(4))).square().sum()
    loss.backward()
    optimizer.step()
    torch.testing.assert_close(frozen.module().get_buffer("fc.weight"), trained.fc.weight.detach())


def test_callbacks_by_type_hit_functions_of_that_type(tmp_path):
    network_pass = NetworkPass()
    seen = []

    @network_pass.on_function_pass_by_type("relu")
    def relu(function):
        seen.append(function.name)
        return function

    @network_pass.on_function_pass_by_type("conv")
    def no_padding(function):
        function.attributes["padding"] = [(0, 0), (0, 0)]
        return function

    promoted = _tiny().promote(network_pass)
    assert seen == ["relu1", "relu2"]  # by type, although no function is named 'relu'
    edited = twin(tmp_path / "twin", [("conv(image, conv1_filter, conv1_bias, padding = [(1, 1), (1, 1)])",
                                       "conv(image, conv1_filter, conv1_bias, padding = [(0, 0), (0, 0)])"),
                                      ("conv(pool1, conv2_filter, conv2_bias, padding = [(1, 1), (1, 1)])",
                                       "conv(pool1, conv2_filter, conv2_bias, padding = [(0, 0), (0, 0)])")],
                  quant=False)
    _check(promoted, tmp_path / "promoted", edited, images())


def test_callback_by_name_and_generate_callbacks(tmp_path):
    network_pass = NetworkPass()
    network_pass.on_function_pass_by_name("relu2")(lambda f: None)  # dropped: its readers read nothing
    network_pass.drop_function()  # no names: nothing
    with pytest.raises(NNEFError):
        _tiny().promote(network_pass)
    generate = NetworkPass()

    @generate.on_generate_function_by_type("max_pool")
    def smaller(function):
        function.attributes["size"] = [1, 1, 4, 4]
        function.attributes["stride"] = [1, 1, 4, 4]
        return function

    promoted = _tiny().promote(generate)
    edited = twin(tmp_path / "twin", [("size = [1, 1, 2, 2], stride = [1, 1, 2, 2]",
                                       "size = [1, 1, 4, 4], stride = [1, 1, 4, 4]")], quant=False)
    _check(promoted, tmp_path / "promoted", edited, images())


def test_on_generate_variable_changes_an_input(tmp_path):
    network_pass = NetworkPass()

    @network_pass.on_generate_variable("image")
    def larger(variable):
        variable.shape = (2, 1, 32, 32)
        return variable

    promoted = _tiny().promote(network_pass)
    assert promoted.variables["relu1"].shape == (2, 8, 32, 32)
    edited = twin(tmp_path / "twin", [("shape = [1, 1, 16, 16]", "shape = [2, 1, 32, 32]")], quant=False)
    _check(promoted, tmp_path / "promoted", edited, images(2, size=32))


def test_a_pass_that_breaks_the_graph_fails_with_a_located_error():
    network_pass = NetworkPass()

    @network_pass.on_function_pass_by_name("flat")
    def bad_reshape(function):
        function.attributes["shape"] = [3, 5]
        return function

    with pytest.raises(NNEFError) as caught:
        _tiny().promote(network_pass)
    assert "tiny_cnn (promoted):" in str(caught.value) and "reshape" in str(caught.value)
    assert caught.value.location.line is not None


def test_unknown_names_are_option_errors():
    with pytest.raises(NNEFOptionError, match="no function 'relu9'"):
        _tiny().promote(NetworkPass().drop_function("relu9"))
    with pytest.raises(NNEFOptionError, match="no tensor 'nothing'"):
        _tiny().promote(NetworkPass().use_up_to("nothing"))
