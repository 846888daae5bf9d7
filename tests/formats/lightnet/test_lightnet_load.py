"""`nnef_torch.load` of LightNet models: the seed's example (its print, byte for byte), a network in
`tools/il2json`'s layout with weights from `tools/genwts.pl`, every way of giving the weights, the inputs and outputs
the caller names, Parameters named after their tensors, and fine-tuning."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exporter.consumers import close, khronos_parse

import nnef_torch
from formats.khronos_session import run_khronos
from formats.lightnet.lightnet_ir import create, document, il2json_layout, op, write
from nnef_torch.formats.lightnet.wts import write_wts

FIXTURES = Path(__file__).parent / "fixtures"
SEED_OUTPUT = "tensor2:\n[[2.000 3.000 4.000]\n [6.000 7.000 8.000]]\n"


def test_seed_example_prints_what_the_seed_shows(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    module = nnef_torch.load(FIXTURES / "seed_example.json")
    assert capsys.readouterr().out == ""  # loading prints nothing; running does
    result = module()
    assert capsys.readouterr().out == SEED_OUTPUT
    np.testing.assert_array_equal(result.detach().numpy(), [[2, 3, 4], [6, 7, 8]])
    module.save(tmp_path / "nnef")  # valid NNEF for other consumers: there the print is a copy
    khronos_parse(tmp_path / "nnef")
    close(run_khronos(tmp_path / "nnef", [np.zeros(1, np.float32)])[0], [[2, 3, 4], [6, 7, 8]])


def test_seed_example_in_il2json_layout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = il2json_layout(json.loads((FIXTURES / "seed_example.json").read_text()))
    assert text.startswith('{\n   "ops" : [\n      {\n         "name" : "create1",\n         "optype" : "create",')
    path = tmp_path / "example.json"
    path.write_text(text)
    nnef_torch.load(path)()
    assert capsys.readouterr().out == SEED_OUTPUT


def test_print_can_be_silenced(capsys: pytest.CaptureFixture[str]) -> None:
    from nnef_torch.formats.lightnet import set_printing
    module = nnef_torch.load(FIXTURES / "seed_example.json")
    assert set_printing(module, False) == 1
    module()
    assert capsys.readouterr().out == ""
    printer = next(m for m in module.modules() if type(m).__name__ == "TensorPrint")
    printer.enabled = True
    module()
    assert capsys.readouterr().out == SEED_OUTPUT


def wts_floats(path: Path) -> dict[str, np.ndarray]:
    """A genwts.pl file decoded by hand: name, type 0, length, then big-endian float32 bit patterns."""
    lines = path.read_text().split("\n")
    arrays = {}
    for line in lines[1:int(lines[0]) + 1]:
        name, kind, count, *words = line.split()
        assert kind == "0" and int(count) == len(words)
        arrays[name] = np.array([struct.unpack(">f", bytes.fromhex(w))[0] for w in words], np.float32)
    return arrays


def net_twin(x: torch.Tensor) -> torch.Tensor:
    """fixtures/net.il by hand: conv 3x3 stride 2 SAME_UPPER (8 -> 4: total (4-1)*2+3-8 = 1, after), batchnorm,
    leaky relu 0.1, 2x2 max pool, flatten, softmax."""
    weights = wts_floats(FIXTURES / "net_il2json.wts")
    w = torch.from_numpy(weights["conv1_wts"]).reshape(4, 3, 3, 3)
    y = F.conv2d(F.pad(x, [0, 1, 0, 1]), w, torch.from_numpy(weights["conv1_bias"]), stride=2)

    def c(values: list[float]) -> torch.Tensor:
        return torch.tensor(values).reshape(1, 4, 1, 1)
    y = (y - c([0, 0, 0, 0])) / torch.sqrt(c([1, 2, 0.5, 4]) + 1e-5) * c([1.5, 0.5, 2, 1]) + c([0.1, -0.2, 0.3, 0])
    y = F.max_pool2d(F.leaky_relu(y, 0.1), 2)
    return torch.softmax(y.reshape(1, 16), dim=1)


def test_il2json_network_with_genwts_weights(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The JSON tools/il2json made from fixtures/net.il, and the .wts genwts.pl made, found beside it."""
    assert (FIXTURES / "net_il2json.json").read_text().startswith('{\n   "ops" : [')
    module = nnef_torch.load(FIXTURES / "net_il2json.json", inputs=["input"])
    x = torch.randn(1, 3, 8, 8)
    close(module(x), net_twin(x), 1e-4)
    printed = capsys.readouterr().out
    assert printed.startswith("prob:\n[[") and printed.endswith("]]\n") and len(printed.split()) == 17
    module.save(tmp_path / "nnef")
    close(run_khronos(tmp_path / "nnef", [x.numpy()])[0], net_twin(x), 1e-4)


def small_model(folder: Path, *, layout: str = "hand") -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    weights = {"fc_w": rng.standard_normal((3, 2, 1, 1)).astype(np.float32),
               "fc_b": rng.standard_normal(3).astype(np.float32)}
    doc = document(create("data", [2, 2, 3, 3], from_file=True),
                   create("fc_w", [3, 2, 1, 1], from_file=True), create("fc_b", [3], from_file=True),
                   op("conv2d", "fc", {"src": "data", "weight": "fc_w", "bias": "fc_b"}, {"dst": "out"}, group=1,
                      size=[1, 1], stride=[1, 1], dilation=[1, 1], padding=[0, 0, 0, 0], autopad="NOTSET"),
                   op("relu", "act", {"src": "out"}, {"dst": "act"}))
    return write(folder, doc, layout=layout), weights


def small_twin(x: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(np.einsum("oi,nihw->nohw", weights["fc_w"][:, :, 0, 0], x) + weights["fc_b"][:, None, None], 0)


@pytest.mark.parametrize("binding", ["wts", "beside", "mapping", "tensors", "npz"])
def test_weight_bindings(binding: str, tmp_path: Path) -> None:
    path, weights = small_model(tmp_path / "m", layout="il2json")
    params: object = None
    if binding == "wts":
        params = tmp_path / "weights.wts"
        params.write_text(write_wts(weights))
    elif binding == "beside":
        (tmp_path / "m" / "model.wts").write_text(write_wts({k: v.reshape(-1) for k, v in weights.items()}))
    elif binding == "mapping":
        params = {k: v.reshape(-1) for k, v in weights.items()}
    elif binding == "tensors":
        params = {k: torch.from_numpy(v) for k, v in weights.items()}
    else:
        params = tmp_path / "weights.npz"
        np.savez(params, **weights)
    module = nnef_torch.load(path, params=params, inputs=["data"])
    x = np.random.default_rng(1).standard_normal((2, 2, 3, 3)).astype(np.float32)
    close(module(torch.from_numpy(x)), small_twin(x, weights))


def test_constants_are_parameters_named_after_their_tensors(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    module = nnef_torch.load(path, params=weights, inputs=["data"])
    assert sorted(name for name, _ in module.named_parameters()) == ["fc_b", "fc_w"]
    assert all(p.requires_grad for p in module.parameters())
    np.testing.assert_array_equal(module.state_dict()["fc_w"].numpy(), weights["fc_w"])


def test_integer_constants_are_buffers(tmp_path: Path) -> None:
    path = write(tmp_path, document(create("k", [3], [1, 2, 3], dtype="TL_INT32"),
                                    create("f", [1], [0.5]), op("forward", "fw", {"src": "k"}, {"dst": "y"})))
    module = nnef_torch.load(path, outputs=["y"])
    assert [name for name, _ in module.named_parameters()] == []  # f is read by nothing: not in the graph
    assert module().tolist() == [1, 2, 3]
    assert "k" in dict(module.named_buffers())


def test_fine_tuning_moves_the_weights(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    module = nnef_torch.load(path, params=weights, inputs=["data"]).train()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    x = torch.randn(2, 2, 3, 3)
    target = torch.ones(2, 3, 3, 3)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = ((module(x) - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert not np.allclose(module.state_dict()["fc_b"].numpy(), weights["fc_b"])


def test_inputs_in_the_order_given_and_outputs_chosen(tmp_path: Path) -> None:
    doc = document(create("a", [2], from_file=True), create("b", [2], from_file=True),
                   op("elew", "sub", {"src1": "a", "src2": "b"}, {"dst": "d"}, elew_op="TL_SUB"),
                   op("relu", "r", {"src": "d"}, {"dst": "r"}))
    path = write(tmp_path, doc)
    module = nnef_torch.load(path, inputs=["b", "a"], outputs=["d", "a", "r"])
    d, a, r = module(torch.tensor([1.0, 5.0]), torch.tensor([3.0, 2.0]))
    assert d.tolist() == [2.0, -3.0] and a.tolist() == [3.0, 2.0] and r.tolist() == [2.0, 0.0]
    assert [name for name in module.nnef_graph.inputs] == ["b", "a"]
    assert nnef_torch.load(path, inputs=["a", "b"])(torch.tensor([3.0, 2.0]), torch.tensor([1.0, 5.0])).tolist() \
        == [2.0, 0.0]  # by default, what no op reads: r


def test_default_outputs_skip_prints_but_keep_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A print observes: the tensor it prints is still an output when nothing else reads it, and a print whose
    tensor other ops read still runs (dead-code elimination keeps it)."""
    doc = document(create("x", [2], from_file=True),
                   op("print", "p1", {"src": "x"}, {}, msg="x is"),
                   op("relu", "r", {"src": "x"}, {"dst": "y"}),
                   op("print", "p2", {"src": "y"}, {}, msg="y is"),
                   op("sigmoid", "s", {"src": "x"}, {"dst": "z"}))
    module = nnef_torch.load(write(tmp_path, doc), inputs=["x"])
    y, z = module(torch.tensor([-1.0, 2.0]))
    assert capsys.readouterr().out == "x is\n[-1.000 2.000]\ny is\n[0.000 2.000]\n"
    assert y.tolist() == [0.0, 2.0] and z.shape == (2,)
    assert sum(node.op == "call_module" for node in module.graph.nodes) == 2


def test_fprint_writes_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = document(create("c", [2, 2], [1, -2, 3, 4], dtype="TL_INT32"), create("t", [3], [1, 0, 1], dtype="TL_BOOL"),
                   op("fprint", "f1", {"src": "c"}, {}, msg="ints", file="c.txt"),
                   op("fprint", "f2", {"src": "t"}, {}, msg="bools", file="t.txt"))
    module = nnef_torch.load(write(tmp_path / "m", doc))
    monkeypatch.chdir(tmp_path)
    module()
    assert (tmp_path / "c.txt").read_text() == "ints\n[[1 -2]\n [3 4]]\n"
    assert (tmp_path / "t.txt").read_text() == "bools\n[1 0 1]\n"
    (tmp_path / "c.txt").unlink()
    from nnef_torch.formats.lightnet import set_printing
    assert set_printing(module, False) == 2
    module()
    assert not (tmp_path / "c.txt").exists()


@pytest.mark.parametrize("target", ["/tmp/owned.txt", "../owned.txt", "a/../../owned.txt", "C:/owned.txt", ""])
def test_fprint_outside_the_working_directory_is_refused_when_loading(tmp_path: Path, target: str) -> None:
    doc = document(create("c", [2], [1, 2]), op("fprint", "f1", {"src": "c"}, {}, msg="m", file=target))
    with pytest.raises(nnef_torch.NNEFError, match="relative path below the working directory"):
        nnef_torch.load(write(tmp_path / "m", doc))


def test_fprint_through_a_link_out_of_the_working_directory_writes_nothing(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "out").symlink_to(tmp_path)
    doc = document(create("c", [2], [1, 2]), op("fprint", "f1", {"src": "c"}, {}, msg="m", file="out/owned.txt"))
    module = nnef_torch.load(write(tmp_path / "m", doc))
    monkeypatch.chdir(tmp_path / "work")
    with pytest.warns(RuntimeWarning, match="leads outside the working directory"):
        module()
    assert not (tmp_path / "owned.txt").exists()


def test_random_constants_are_in_range_and_reproducible(tmp_path: Path) -> None:
    path = write(tmp_path, document(create("r", [50], ran=(-3, 2)), create("i", [50], dtype="TL_INT8", ran=(0, 9))))
    first, second = nnef_torch.load(path)(), nnef_torch.load(path)()
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert -3 <= first[0].min() and first[0].max() <= 2 and first[0].std() > 0.5
    assert first[1].dtype == torch.int64 and 0 <= first[1].min() and first[1].max() <= 8


def test_unknown_autopad_is_warned_about_and_padding_used(tmp_path: Path) -> None:
    doc = document(create("x", [1, 1, 4, 4], from_file=True), op("maxpool2d", "p", {"src": "x"}, {"dst": "y"},
                                                                    size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0],
                                                                    autopad="SAME"))
    with pytest.warns(UserWarning, match="unsupported 'autopad' 'SAME'"):
        module = nnef_torch.load(write(tmp_path, doc), inputs=["x"])
    assert module(torch.zeros(1, 1, 4, 4)).shape == (1, 1, 2, 2)


def test_unused_weights_are_warned_about(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    with pytest.warns(UserWarning, match="ignoring 1 weight"):
        nnef_torch.load(path, params={**weights, "stale": np.zeros(3, np.float32)}, inputs=["data"])


def test_options_that_do_not_apply_are_refused(tmp_path: Path) -> None:
    nnef_torch.load(FIXTURES / "seed_example.json").save(tmp_path / "nnef")
    with pytest.raises(ValueError, match="inputs= and outputs= are for LightNet models"):
        nnef_torch.load(tmp_path / "nnef", inputs=["x"])
    with pytest.raises(ValueError, match="input_shapes names \\['tensor1'\\], which are not inputs"):
        nnef_torch.load(FIXTURES / "seed_example.json", input_shapes={"tensor1": [2, 4]})


def test_input_shapes_replace_the_dims_of_inputs(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    module = nnef_torch.load(path, params=weights, inputs=["data"], input_shapes={"data": [5, 2, 4, 4]})
    x = np.random.default_rng(1).standard_normal((5, 2, 4, 4)).astype(np.float32)
    close(module(torch.from_numpy(x)), small_twin(x, weights))


def test_read_model_and_format_option(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    renamed = tmp_path / "model.txt"
    renamed.write_text(path.read_text())
    model = nnef_torch.read_model(renamed, format="lightnet", params=weights, inputs=["data"], outputs=["out"])
    assert model.format == "lightnet" and model.graph.inputs == ("data",) and model.graph.outputs == ("out",)
    assert set(model.tensors) == {"fc_w", "fc_b"}


def test_export_traces_without_printing(capsys: pytest.CaptureFixture[str]) -> None:
    module = nnef_torch.load(FIXTURES / "net_il2json.json", inputs=["input"])
    x = torch.randn(1, 3, 8, 8)
    exported = torch.export.export(module, (x,))
    assert capsys.readouterr().out == ""
    close(exported.module()(x), net_twin(x), 1e-4)


def test_meta_load_then_materialize(tmp_path: Path) -> None:
    path, weights = small_model(tmp_path)
    (tmp_path / "model.wts").write_text(write_wts(weights))
    module = nnef_torch.load(path, inputs=["data"], device="meta")
    assert module.fc_w.is_meta
    module.materialize("cpu")
    np.testing.assert_array_equal(module.fc_w.detach().numpy(), weights["fc_w"])
