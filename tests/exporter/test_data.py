"""What the exporter does with a module's data: the module itself is never changed; parameters and buffers become
variables labelled by their state_dict names; tied weights are one variable; buffers written by forward become
`update`s; small constants are literals and large ones variables; scalar options are attributes.

Note: integer buffer arithmetic (BatchNorm's `num_batches_tracked += 1`, a step counter) is written with `cast`,
since NNEF arithmetic is defined on scalars only; tract's NNEF reader has no `cast`, so those graphs do not load in
tract (checked below, not hidden)."""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import nnef_torch
from exporter.consumers import export_and_check

pytestmark = pytest.mark.slow

torch.manual_seed(0)


def variables(text: str) -> dict[str, str]:
    """label -> name of every `variable` in a graph text."""
    return {label: name for name, label in re.findall(r"(\w+) = variable<\w+>\(shape = \[[^]]*\], label = '([^']+)'\)",
                                                      text)}


# ------------------------------------------------------------------------------------------ the module is unchanged

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(4, 2)
        self.register_buffer("count", torch.zeros(1, dtype=torch.int64))

    def forward(self, x):
        self.count.add_(1)
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x)))).mean((2, 3)))


def snapshot(module: nn.Module) -> dict:
    return {
        "state": {name: value.clone() for name, value in module.state_dict().items()},
        "pointers": {name: value.data_ptr() for name, value in module.state_dict().items()},
        "training": {name: sub.training for name, sub in module.named_modules()},
        "requires_grad": {name: p.requires_grad for name, p in module.named_parameters()},
        "objects": {name: id(p) for name, p in module.named_parameters()},
        "grads": {name: p.grad for name, p in module.named_parameters()},
        "hooks": {name: (dict(sub._forward_hooks), dict(sub._forward_pre_hooks), dict(sub._backward_hooks))
                  for name, sub in module.named_modules()},
    }


def configure(mode: str) -> nn.Module:
    module = Block()
    module.register_forward_hook(lambda mod, args, out: None)
    if mode == "eval":
        module.eval()
    elif mode == "mixed":  # training, with a frozen batch norm and a frozen convolution
        module.bn.eval()
        module.conv.requires_grad_(False)
    return module


@pytest.mark.parametrize("mode", ["eval", "train", "mixed"])
def test_export_leaves_the_module_unchanged_and_trainable(mode):
    module = configure(mode)
    before = snapshot(module)
    x = torch.randn(2, 3, 6, 6)
    first = nnef_torch.export(module, (x,)).text
    assert nnef_torch.export(module, (x,)).text == first  # exporting twice gives the same text
    after = snapshot(module)
    for name, value in before["state"].items():  # bitwise equal, same dtype
        assert torch.equal(value, after["state"][name]) and value.dtype == after["state"][name].dtype, name
    assert before["state"].keys() == after["state"].keys()
    for key in ("pointers", "training", "requires_grad", "objects", "grads", "hooks"):
        assert before[key] == after[key], key
    assert torch.is_grad_enabled()
    trainable = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    old = [p.detach().clone() for p in trainable]
    module(x).sum().backward()
    optimizer.step()
    # a bias before a training-mode batch norm has a zero gradient up to rounding (the batch mean removes it)
    moved = [not torch.equal(a, p) for a, p in zip(old, trainable) if float(p.grad.abs().max()) > 1e-4]
    assert moved and all(moved)
    assert int(module.count) == 1  # the real call counts; tracing did not


# ------------------------------------------------------------------------------------------ labels follow names

class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(x + self.bn1(self.conv1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1)
        self.layer1 = nn.Sequential(Residual(), Residual())

    def forward(self, x):
        return self.layer1(self.stem(x))


def test_labels_follow_state_dict_names(tmp_path):
    module = Net().eval()
    nnef_torch.save(module, tmp_path / "m", (torch.randn(1, 3, 5, 5),))
    found = variables((tmp_path / "m" / "graph.nnef").read_text())
    expected = {name.replace(".", "/"): value for name, value in module.state_dict().items()}
    assert "layer1/0/conv1/weight" in found
    assert found.keys() == expected.keys() - {k for k in expected if k.endswith("num_batches_tracked")}
    text = (tmp_path / "m" / "graph.nnef").read_text()
    for label in found:
        stored = nnef_torch.read_tensor(tmp_path / "m" / (label + ".dat"))
        declared = re.search(rf"variable<\w+>\(shape = \[([^]]*)\], label = '{label}'\)", text).group(1)
        assert list(stored.shape) == [int(d) for d in declared.split(",")], label  # the shape its readers take
        np.testing.assert_array_equal(stored.reshape(expected[label].shape), expected[label].numpy(), err_msg=label)


# ------------------------------------------------------------------------------------------ tied parameters

class TiedLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(12, 6)
        self.mix = nn.Linear(6, 6)
        self.head = nn.Linear(6, 12, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


def test_tied_parameter_is_one_variable_used_twice(tmp_path):
    module = TiedLanguageModel()
    tokens = torch.tensor([[1, 5, 7, 11]])
    model = nnef_torch.export(module, (tokens,))
    found = variables(model.text)
    assert sorted(found) == ["embed/weight", "mix/bias", "mix/weight"]
    name = found["embed/weight"]
    body = model.text.split("\ngraph ", 1)[1]
    assert len(re.findall(rf"\b{name}\b", body)) == 3  # declared once, read by the gather and by the output linear
    assert model.tensors["embed/weight"].data_ptr() == module.embed.weight.data_ptr()
    report = export_and_check(module, (tokens,), tmp_path)
    assert report.failures.keys() == {"tract"} and "gather" in report.failures["tract"]  # no gather in tract's NNEF
    assert [n for n, _ in nnef_torch.load(tmp_path).named_parameters()] == ["embed.weight", "mix.weight", "mix.bias"]


# ------------------------------------------------------------------------------------------ buffers written by forward

class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1, dtype=torch.int64))

    def forward(self, x):
        self.count.add_(1)
        return x * 2


class RunningState(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x):
        self.state.copy_(x.mean(0))
        return x - self.state


class Decay(nn.Module):
    """A parameter changed in place by forward (weight decay by hand): an update, like a buffer."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        with torch.no_grad():
            self.w.mul_(0.9)
        return x * self.w


NO_UPDATE = "tract's standard NNEF has no update"
NO_CAST = "tract's standard NNEF has no cast (integer buffer arithmetic) nor update"
# module, input, buffers written, whether integer arithmetic needs `cast`, consumers that cannot run it and why
MUTATIONS = [
    ("batch_norm_train", nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)).train(), torch.randn(4, 2, 3, 3),
     ["1.running_mean", "1.running_var", "1.num_batches_tracked"], True, {"tract": NO_CAST}),
    ("counter", Counter(), torch.randn(2, 3), ["count"], True, {"tract": NO_CAST}),
    ("copy_mean", RunningState(), torch.randn(4, 3), ["state"], False, {"tract": NO_UPDATE}),
    ("parameter", Decay(), torch.randn(2, 3), ["w"], False, {"tract": NO_UPDATE}),
]


@pytest.mark.parametrize("module, x, written, casts, skip", [row[1:] for row in MUTATIONS],
                         ids=[row[0] for row in MUTATIONS])
def test_mutated_buffers_become_updates(tmp_path, module, x, written, casts, skip):
    text = nnef_torch.export(module, (x,)).text
    names = variables(text)
    for buffer in written:
        assert re.search(rf"= update\({names[buffer.replace('.', '/')]}, \w+\);", text), buffer
    assert ("cast<" in text) == casts
    report = export_and_check(module, (x,), tmp_path)
    assert report.failures.keys() == skip.keys(), report.failures
    reference = copy.deepcopy(module)
    loaded = nnef_torch.load(tmp_path)
    with torch.no_grad():
        for _ in range(2):  # every call applies the update, as torch does
            reference(x)
            loaded(x)
    buffers = dict(loaded.named_buffers())  # variables that `update` writes are buffers of the imported module
    state = reference.state_dict()
    for buffer in written:
        expected = state[buffer]
        np.testing.assert_allclose(buffers[buffer].reshape(expected.shape).numpy(), expected.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=buffer)


# ------------------------------------------------------------------------------------------ constants

class Constants(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(1000.0).reshape(10, 100) / 1000, persistent=False)

    def forward(self, x):
        small = torch.tensor([0.5, 0.25, 0.125, 2.0])
        large = torch.tensor([float(i % 7) for i in range(1000)]).reshape(10, 100)
        return x[:, :4] * small, x * large + self.table


def test_small_constants_inline_large_ones_variables(tmp_path):
    module = Constants()
    x = torch.randn(10, 100)
    model = nnef_torch.export(module, (x,))
    assert re.search(r"constant<scalar>\(shape = \[4\], value = \[0\.5, 0\.25, 0\.125, 2\.0\]\)", model.text)
    found = variables(model.text)
    large = [label for label in found if label.startswith("constants/")]
    assert sorted(found) == sorted(["table"] + large) and len(large) == 1, found
    assert model.tensors["table"].data_ptr() == module.table.data_ptr()
    report = export_and_check(module, (x,), tmp_path)
    assert report.failures.keys() == {"tract"} and "constant" in report.failures["tract"]  # tract: no `constant`
    stored = nnef_torch.read_tensor(tmp_path / (large[0] + ".dat"))
    np.testing.assert_array_equal(stored.reshape(-1), np.arange(1000) % 7)


# ------------------------------------------------------------------------------------------ scalar options

class Options(nn.Module):
    def __init__(self, elu: bool = True):
        super().__init__()
        self.ln = nn.LayerNorm(5, eps=1e-3)
        self.bn = nn.BatchNorm1d(4, eps=2e-3).eval()
        self.elu = elu

    def forward(self, x):
        outputs = self.ln(x), self.bn(x), F.leaky_relu(x, negative_slope=0.2), F.hardtanh(x, -0.5, 0.75)
        return outputs + (F.elu(x, alpha=0.7),) if self.elu else outputs


OPTIONS = [  # how each scalar option of `Options` must appear in the text: as an attribute, never a tensor
    r"layer_norm\([^;]*epsilon = 0\.001\)",
    r"batch_normalization\([^;]*epsilon = 0\.002\)",
    r"elu\(x, alpha = 0\.7\)",
    r"leaky_relu\(x, alpha = 0\.2\)",
    r"clamp\(x, -0\.5, 0\.75\)",
]


def test_scalar_options_are_attributes(tmp_path):
    module = Options()
    x = torch.randn(2, 4, 5)
    model = nnef_torch.export(module, (x,))
    for pattern in OPTIONS:
        assert re.search(pattern, model.text), (pattern, model.text)
    assert sorted(variables(model.text)) == ["bn/bias", "bn/running_mean", "bn/running_var", "bn/weight",
                                             "ln/bias", "ln/weight"]
    report = export_and_check(module, (x,), tmp_path / "all")
    # tract's elu ignores its alpha attribute (it computes alpha = 1): F.elu(x, alpha=0.7) differs there only
    assert report.failures.keys() == {"tract"} and "Not equal" in report.failures["tract"], report.failures
    without_elu = export_and_check(Options(elu=False), (x,), tmp_path / "without_elu", consumers=("tract",))
    assert without_elu.passed == ["tract"], without_elu.failures


def test_model_tensors_are_the_module_tensors():
    module = Net().eval()
    model = nnef_torch.export(module, (torch.randn(1, 3, 5, 5),))
    state = module.state_dict()
    for label, value in model.tensors.items():
        own = state[label.replace("/", ".")]
        assert value.data_ptr() == own.data_ptr() and value.numel() == own.numel(), label

