"""Tensor names of an export: after the module that computed them, and the user's input and output names."""
from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

import nnef_torch
from exporter.consumers import khronos_parse
from nnef_torch.errors import ExportError


class Block(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)  # self.relu twice


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.layer1 = nn.Sequential(Block(4), Block(4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layer1(self.stem(x))), 1))


def _model():
    torch.manual_seed(0)
    return Net().eval(), torch.randn(1, 3, 8, 8)


def _results(graph):
    return {ref.name: op.name for op in graph.operations for ref in op.output_refs()}


def test_names_follow_module_paths():
    module, x = _model()
    graph = nnef_torch.export(module, x).graph
    results = _results(graph)
    for name, op in {"stem_0": "conv", "stem_1": "relu", "layer1_0_conv1": "conv",
                     "layer1_0_bn1": "batch_normalization", "layer1_0_relu_1": "relu", "layer1_0_relu": "relu", "layer1_0_conv2": "conv",
                     "layer1_1_relu": "relu", "pool": "mean_reduce", "fc": "linear"}.items():
        assert results.get(name) == op, (name, sorted(results))
    assert "flatten" in results  # outside every submodule: the ATen name
    assert graph.signature.outputs == ("fc",)
    names = [ref.name for op in graph.operations for ref in op.output_refs()]
    assert len(names) == len(set(names))
    assert not {"conv2d", "conv2d_1", "relu_", "relu_1", "batch_norm", "linear_"} & set(names)
    labels = {v.label for v in graph.signature.variables}
    assert "layer1/0/conv1/weight" in labels  # variables keep their labels


def test_module_names_are_deterministic():
    module, x = _model()
    assert nnef_torch.export(module, x).text == nnef_torch.export(module, x).text


def test_input_and_output_names(tmp_path):
    module, x = _model()
    model = nnef_torch.export(module, x, input_names=["image"], output_names=["logits"])
    assert "graph Net( image ) -> ( logits )" in model.text
    assert "image = external<scalar>" in model.text
    path = tmp_path / "net.nnef"
    nnef_torch.save(module, path, x, input_names=("image",), output_names=("logits",))
    loaded = nnef_torch.load(path)
    assert list(inspect.signature(loaded.forward).parameters) == ["image"]
    torch.testing.assert_close(loaded(x), module(x), rtol=1e-4, atol=1e-5)
    parsed = khronos_parse(path)
    assert list(parsed.inputs) == ["image"] and list(parsed.outputs) == ["logits"]


def test_input_names_with_dynamic_batch():
    module, x = _model()
    model = nnef_torch.export(module, torch.cat([x, x]), dynamic_batch=True, input_names=["image"])
    assert "graph Net( image ) -> ( fc )" in model.text


@pytest.mark.parametrize("options, message", [
    ({"input_names": ["1x"]}, "not an NNEF identifier"),
    ({"input_names": ["a", "b"]}, "gives 2 name(s)"),
    ({"input_names": "image"}, "sequence of names"),
    ({"input_names": ["relu"]}, "operation's name"),
    ({"input_names": ["y"], "output_names": ["y"]}, "named twice"),
    ({"output_names": ["layer1_0_conv1"]}, "another tensor"),
])
def test_bad_names_refused(options, message):
    module, x = _model()
    with pytest.raises(ExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        nnef_torch.export(module, x, **options)

