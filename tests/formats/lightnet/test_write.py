"""The LightNet back end: the files it writes (conventions, inputs, outputs, weights, numbers), what it refuses,
how it saves (format, weights, atomicity), and the models of the issue: a small CNN, an MLP and a ShuffleNet-style
block, from torch and from modules imported from NNEF and NNVM, equal after reading them back."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nnef_torch
from nnef_torch.format import container, tensor_file
from nnef_torch.formats.lightnet.wts import read_wts
from tests.formats.lightnet.writing import Fn, assert_same, check_document, optypes, save_and_load, twin

NNVM_ZOO = Path(__file__).parent.parent / "nnvm" / "fixtures" / "zoo"


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = F.leaky_relu(self.conv2(x), 0.1)
        return torch.softmax(self.fc(torch.flatten(x, 1)), 1)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                                          torch.nn.Sigmoid(), torch.nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class ShuffleBlock(torch.nn.Module):
    """ShuffleNet v2's unit: split the channels, a 1x1 / depthwise 3x3 / 1x1 branch with batch norms, concat,
    channel shuffle."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        half = channels // 2
        self.branch = torch.nn.Sequential(
            torch.nn.Conv2d(half, half, 1, bias=False), torch.nn.BatchNorm2d(half), torch.nn.ReLU(),
            torch.nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False), torch.nn.BatchNorm2d(half),
            torch.nn.Conv2d(half, half, 1, bias=False), torch.nn.BatchNorm2d(half), torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        left, right = x.chunk(2, dim=1)
        y = torch.cat([left, self.branch(right)], dim=1)
        return y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


def _trained(module: torch.nn.Module) -> torch.nn.Module:
    """Batch-norm statistics that are not the identity, in eval mode."""
    torch.manual_seed(1)
    for submodule in module.modules():
        if isinstance(submodule, torch.nn.BatchNorm2d):
            with torch.no_grad():
                submodule.running_mean.normal_()
                submodule.running_var.uniform_(0.5, 2.0)
                submodule.weight.normal_()
                submodule.bias.normal_()
    return module.eval()


MODELS = {"small_cnn": (SmallCNN, (2, 3, 16, 16)), "mlp": (MLP, (5, 20)), "shufflenet_block": (ShuffleBlock, (1, 8, 6, 6))}


@pytest.mark.parametrize("weights", ["file", "inline"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_issue_models(name: str, weights: str, tmp_path: Path) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(0)
    module = _trained(make())
    document = twin(module, [torch.randn(*shape)], tmp_path, weights=weights)
    assert ("model.wts" in os.listdir(tmp_path)) == (weights == "file")
    if name == "shufflenet_block":
        assert {"slice", "concat", "transpose", "batchnorm"} <= set(optypes(document))
    if name == "mlp":
        assert "conv2d" in optypes(document) and "linear" not in optypes(document)


def test_module_imported_from_nnef(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = _trained(SmallCNN())
    x = torch.randn(2, 3, 16, 16)
    nnef_torch.save(module, tmp_path / "cnn.tgz", (x,))
    imported = nnef_torch.load(tmp_path / "cnn.tgz")
    with torch.no_grad():
        imported.conv1.weight.mul_(0.5)  # the current values are written, not those loaded
    imported.save(tmp_path / "cnn.json")
    loaded = nnef_torch.load(tmp_path / "cnn.json", inputs=["x"])
    assert_same(loaded(x), imported(x))
    nnef_torch.save(imported, tmp_path / "inline.json", weights="inline")
    assert not (tmp_path / "inline.wts").exists()
    assert_same(nnef_torch.load(tmp_path / "inline.json", inputs=["x"])(x), imported(x))


def test_module_imported_from_nnvm(tmp_path: Path) -> None:
    """MobileNet 0.25 as MXNet's Gluon wrote it (NNVM JSON and .params): batch norms with moving statistics,
    depthwise convolutions, global pooling, flatten, dense, softmax."""
    module = nnef_torch.load(NNVM_ZOO / "mobilenet0.25-symbol.json", input_shapes={"data": [2, 3, 32, 32]}).eval()
    x = torch.randn(2, 3, 32, 32)
    document, loaded = save_and_load(module, [x], tmp_path)
    assert {"conv2d", "batchnorm", "avgpool2d"} <= set(optypes(document))
    with torch.no_grad():
        assert_same(loaded(x), module(x), atol=1e-4)


# ---------------------------------------------------------------------------------------------- conventions
class TwoInputs(torch.nn.Module):
    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Any:
        return self.fn(self, a, b)


@pytest.mark.parametrize("case", ["reversed", "input", "repeated", "read"])
def test_outputs_are_the_unread_tensors_in_output_order(case: str, tmp_path: Path) -> None:
    functions = {
        "reversed": lambda m, a, b: _pair(torch.relu(a), torch.sigmoid(b))[::-1],
        "input": lambda m, a, b: (a, torch.relu(b)),
        "repeated": lambda m, a, b: _twice(torch.relu(a + b)),
        "read": lambda m, a, b: _and_sum(torch.relu(a), b),
    }
    module = TwoInputs(functions[case])
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    path = tmp_path / "model.json"
    nnef_torch.save(module, path, inputs)
    document = json.loads(path.read_text())
    names = nnef_torch.export(module, inputs).graph.outputs
    check_document(document, ["a", "b"], 2 if case == "input" else names)
    assert optypes(document)[-1] == "forward"
    loaded = nnef_torch.load(path, inputs=["a", "b"])
    assert_same(loaded(*inputs), module(*inputs))


def _pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, y


def _and_sum(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, x + y


def _twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, x


def test_inputs_are_creates_in_input_order(tmp_path: Path) -> None:
    class Masked(torch.nn.Module):
        def forward(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return image * mask

    module = Masked()
    path = tmp_path / "model.json"
    nnef_torch.save(module, path, (torch.randn(1, 2, 3), torch.randn(1, 2, 3)))
    ops = json.loads(path.read_text())["ops"]
    assert ops[0] == {"name": "create0", "optype": "create", "tensors_in": [],
                      "tensors_out": [{"arg_name": "dst", "name": "image"}],
                      "params": [{"arg_name": "dtype", "value": "TL_FLOAT"},
                                 {"arg_name": "dims", "value": [1, 2, 3]},
                                 {"arg_name": "data", "value": [0]},
                                 {"arg_name": "ran", "value": [0, 0]},
                                 {"arg_name": "from_file", "value": False}]}
    assert ops[1]["name"] == "create1" and ops[1]["tensors_out"][0]["name"] == "mask"


def test_layout_is_the_documented_one(tmp_path: Path) -> None:
    """One op a block with its keys in the documented order, one tensor or param a line."""
    path = tmp_path / "model.json"
    nnef_torch.save(torch.nn.ReLU(), path, (torch.randn(2, 3),))
    text = path.read_text()
    assert text.startswith('{\n    "ops": [\n        {\n            "name": "create0",\n')
    assert '                {"arg_name": "dims", "value": [2, 3]},\n' in text
    assert '            "tensors_in": [\n                {"arg_name": "src", "name": "input"}\n            ],\n' in text


def test_weights_file_holds_each_variable_once(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = _trained(SmallCNN())
    document, _ = save_and_load(module, [torch.randn(1, 3, 16, 16)], tmp_path)
    arrays = read_wts((tmp_path / "model.wts").read_text())
    from_file = {op["tensors_out"][0]["name"]: {p["arg_name"]: p["value"] for p in op["params"]}
                 for op in document["ops"][1:] if op["optype"] == "create"}
    assert set(arrays) == {name for name, params in from_file.items() if params["from_file"]}
    assert from_file["conv1_weight"]["dims"] == [8, 3, 3, 3] and from_file["conv1_weight"]["data"] == [0]
    np.testing.assert_array_equal(arrays["conv1_weight"], module.conv1.weight.detach().numpy().ravel())
    np.testing.assert_array_equal(arrays["bn1_running_var"], module.bn1.running_var.numpy())
    # a linear layer's weight becomes the 1x1 filter of a conv2d: [M, K, 1, 1]
    assert from_file["fc_weight"]["dims"] == [10, 256, 1, 1]


def test_inline_numbers_are_the_float32_values(tmp_path: Path) -> None:
    """Inline data holds JSON numbers in their shortest form that reads back as the same float32."""
    weight = torch.tensor([[0.1, -2.5e-8, 3.4e38, 1.0], [1 / 3, 0.0, -0.0, 7.0]])
    module = Fn(lambda m, x: x @ m.w, w=weight.T.contiguous())
    path = tmp_path / "model.json"
    nnef_torch.save(module, path, (torch.randn(3, 4),), weights="inline")
    text = path.read_text()
    assert "0.1," in text and "3.4e+38" in text and "0.33333334" in text
    data = [p["value"] for op in json.loads(text)["ops"] for p in op["params"] if p["arg_name"] == "data"]
    filter_ = next(values for values in data if len(values) == 8)
    assert all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in filter_)
    np.testing.assert_array_equal(np.float32(filter_), weight.numpy().ravel())


def test_names_are_unique_identifiers(tmp_path: Path) -> None:
    """NNEF names are kept where free; intermediate tensors get fresh ones."""
    module = Fn(lambda m, x: torch.cat([x, x, x, x], 1))
    document = twin(module, [torch.randn(1, 2, 2)], tmp_path)
    names = [t["name"] for op in document["ops"] for t in op["tensors_out"]]
    assert len(names) == len(set(names)) and optypes(document).count("concat") == 3


# ---------------------------------------------------------------------------------------------- refusals
def test_refusals_are_listed_in_one_error(tmp_path: Path) -> None:
    class Mixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(2, 2, 3)

        def forward(self, x: torch.Tensor, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = torch.tanh(torch.relu(x))
            return self.conv(torch.exp(y)), F.max_pool2d(image, 2, dilation=2)

    path = tmp_path / "model.json"
    with pytest.raises(nnef_torch.ExportError) as caught:
        nnef_torch.save(Mixed(), path, (torch.randn(1, 2, 8), torch.randn(1, 2, 6, 6)))
    problems = caught.value.problems
    assert len(problems) == 4, problems
    text = str(caught.value)
    for expected in ("tanh", "exp", "LightNet's conv2d takes 4-D", "has no dilation"):
        assert expected in text
    assert os.listdir(tmp_path) == []


def test_state_updates_are_refused(tmp_path: Path) -> None:
    module = torch.nn.BatchNorm2d(3).train()
    with pytest.raises(nnef_torch.ExportError, match="keep no state"):
        nnef_torch.save(module, tmp_path / "model.json", (torch.randn(2, 3, 4, 4),))


@pytest.mark.parametrize("line, shape, weight, reason", [
    ("y = avg_pool(x, size = [1, 1, 2, 2], border = 'reflect', padding = [(0, 0), (0, 0), (1, 1), (1, 1)]);",
     [1, 2, 4, 4], None, "border 'reflect'"),
    ("y = conv(x, w, border = 'replicate', padding = [(1, 1), (1, 1)]);", [1, 2, 4, 4], [2, 2, 3, 3],
     "border 'replicate'"),
    ("y = max_pool(x, size = [1, 2, 1, 1]);", [1, 2, 4, 4], None, "two spatial dimensions only"),
    ("y = softmax(x, axes = [1, 3]);", [1, 2, 4, 4], None, "not contiguous"),
    ("y = slice(x, axes = [2], begin = [0], end = [4], stride = [2]);", [1, 2, 4, 4], None, "stride 2"),
    ("y = matmul(x, x, transposeB = true);", [4, 4], None, "B must be a 2-D value"),
    ("y = prelu(x, w);", [1, 2, 4, 4], [1, 2], "one slope"),
    ("y = multilinear_upsample(x, factor = [2, 2]);", [1, 2, 4, 4], None, "no operation"),
])
def test_unwritable_attributes_are_refused(line: str, shape: list[int], weight: list[int] | None, reason: str,
                                           tmp_path: Path) -> None:
    declare = "" if weight is None else f"    w = variable<scalar>(shape = {weight}, label = 'w');\n"
    text = (f"version 1.0;\ngraph G( x ) -> ( y )\n{{\n    x = external<scalar>(shape = {shape});\n{declare}"
            f"    {line}\n}}\n")
    tensors = [] if weight is None else [("w", tensor_file.encode(np.arange(np.prod(weight), dtype=np.float32)
                                                                  .reshape(weight)))]
    container.write_model(tmp_path / "model", text, tensors)
    module = nnef_torch.load(tmp_path / "model")
    with pytest.raises(nnef_torch.ExportError, match=reason):
        module.save(tmp_path / "model.json")
    assert not (tmp_path / "model.json").exists()


# ---------------------------------------------------------------------------------------------- saving
def test_format_follows_the_suffix(tmp_path: Path) -> None:
    module, x = torch.nn.ReLU(), torch.randn(2, 3)
    nnef_torch.save(module, tmp_path / "a.json", (x,))
    assert sorted(os.listdir(tmp_path)) == ["a.json", "a.wts"]
    nnef_torch.save(module, tmp_path / "b.lnet", (x,), format="lightnet")
    assert {"b.lnet", "b.wts"} <= set(os.listdir(tmp_path))
    nnef_torch.save(module, tmp_path / "c.json", (x,), format="nnef")
    assert (tmp_path / "c.json" / "graph.nnef").is_file()
    nnef_torch.save(module, tmp_path / "d.tgz", (x,))
    imported = nnef_torch.load(tmp_path / "d.tgz")
    imported.save(tmp_path / "e.JSON")
    imported.save(tmp_path / "f.json", format="nnef")
    assert (tmp_path / "e.wts").is_file() and (tmp_path / "f.json" / "graph.nnef").is_file()


def test_options_that_do_not_apply_are_refused(tmp_path: Path) -> None:
    module, x = torch.nn.ReLU(), (torch.randn(2, 3),)
    with pytest.raises(ValueError, match="weights must be one of .stored., .float. for an NNEF model, not .inline."):
        nnef_torch.save(module, tmp_path / "a.tgz", x, weights="inline")
    with pytest.raises(ValueError, match="compress= applies to NNEF"):
        nnef_torch.save(module, tmp_path / "a.json", x, compress=True)
    with pytest.raises(ValueError, match="unknown format"):
        nnef_torch.save(module, tmp_path / "a.json", x, format="onnx")
    with pytest.raises(ValueError, match="weights must be one of"):
        nnef_torch.save(module, tmp_path / "a.json", x, weights="npz")
    with pytest.raises(ValueError, match="cannot go to a .wts path"):
        nnef_torch.save(module, tmp_path / "a.wts", x, format="lightnet")
    with pytest.raises(nnef_torch.ExportError, match="example_inputs"):
        nnef_torch.save(module, tmp_path / "a.json")
    assert os.listdir(tmp_path) == []


def _files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_a_refused_save_leaves_the_previous_files(tmp_path: Path) -> None:
    nnef_torch.save(torch.nn.ReLU(), tmp_path / "model.json", (torch.randn(2, 3),))
    before = _files(tmp_path)
    with pytest.raises(nnef_torch.ExportError):
        nnef_torch.save(torch.nn.Tanh(), tmp_path / "model.json", (torch.randn(2, 3),))
    assert _files(tmp_path) == before


def test_an_interrupted_save_leaves_the_previous_files(tmp_path: Path, monkeypatch: Any) -> None:
    """The .wts and the JSON go to temporary siblings; a failure before both are complete removes them and
    replaces nothing."""
    torch.manual_seed(0)
    nnef_torch.save(torch.nn.Linear(3, 2), tmp_path / "model.json", (torch.randn(2, 3),))
    before = _files(tmp_path)
    calls = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        nnef_torch.save(torch.nn.Linear(3, 2), tmp_path / "model.json", (torch.randn(2, 3),))
    assert _files(tmp_path) == before


def test_save_writes_nothing_but_its_two_files(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    nnef_torch.save(MLP().eval(), target / "mlp.json", (torch.randn(1, 20),))
    assert sorted(os.listdir(target)) == ["mlp.json", "mlp.wts"] and os.listdir(tmp_path) == ["out"]
    nnef_torch.save(MLP().eval(), target / "inline.json", (torch.randn(1, 20),), weights="inline")
    assert sorted(os.listdir(target)) == ["inline.json", "mlp.json", "mlp.wts"]


def test_params_out_of_lightnet_ranges_are_refused(tmp_path: Path) -> None:
    """Every param is checked against LightNet's definition: batchnorm's epsilon must be positive."""
    with pytest.raises(nnef_torch.ExportError, match="param 'epsilon' should be greater than 0"):
        nnef_torch.save(torch.nn.BatchNorm2d(3, eps=0.0).eval(), tmp_path / "model.json", (torch.randn(1, 3, 2, 2),))


def test_values_json_cannot_hold_go_to_the_weights_file(tmp_path: Path) -> None:
    module = Fn(lambda m, x: x * m.scale, scale=torch.tensor([1.0, float("nan"), float("inf")]))
    x = (torch.randn(2, 3),)
    with pytest.raises(nnef_torch.ExportError, match="NaN or an infinity"):
        nnef_torch.save(module, tmp_path / "inline.json", x, weights="inline")
    nnef_torch.save(module, tmp_path / "model.json", x)
    scale = read_wts((tmp_path / "model.wts").read_text())["scale"]
    assert scale.shape == (3,) and np.isnan(scale[1]) and np.isinf(scale[2])  # a weight keeps its items


def test_rules_are_for_operations_nnef_torch_knows() -> None:
    """One rule per NNEF operation: standard ones, and the print fragments of the LightNet front end."""
    from nnef_torch.formats.lightnet.write import lightnet_rules
    from nnef_torch.ir.builder import fragment_library
    from nnef_torch.stdlib import standard_fragments

    library = fragment_library("nnef_torch.formats.lightnet", "fragments.nnef")
    rules = lightnet_rules()
    assert {"conv", "deconv", "linear", "batch_normalization", "max_pool", "avg_pool", "add", "concat",
            "softmax", "reshape", "transpose", "slice"} <= set(rules)
    assert set(rules) <= set(standard_fragments()) | set(library)
