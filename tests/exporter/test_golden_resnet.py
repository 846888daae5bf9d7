"""A small ResNet exported to a golden graph.nnef (tests/exporter/golden/): the whole text is pinned, so any change
to what the exporter writes for the most common kind of model shows up here as a diff to review.

The golden texts were written once by the exporter and checked by eye: every parameter is declared in the shape its
consumer reads (batch-norm statistics and biases as [1, C], no `unsqueeze` or `reshape` applied to a variable),
tensors are named after their modules (`layer1_0_conv1`), and the graph's input and output are named as
`input_names=` / `output_names=` say. Independently of the text, the export must parse in the Khronos tools and
run in the Khronos executor, in tract and in nnef_torch's importer with torch's outputs.

To rewrite a golden text after a deliberate change, run this file with NNEF_TORCH_WRITE_GOLDEN=1, then read the
diff before committing it.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import nnef_torch
from tests.exporter.consumers import close, khronos_parse, run_khronos, run_tract
from tests.exporter.zoo import BasicBlock, conv3x3, trained_look

GOLDEN = Path(__file__).parent / "golden"
SHAPE_OPS = ("unsqueeze", "squeeze", "reshape", "transpose")


class TinyResNet(nn.Module):
    """torchvision's ResNet layout at toy size: a 3x3 stem, one BasicBlock per stage (the second downsamples through
    a 1x1 convolution), global average pool, classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = conv3x3(3, 4), nn.BatchNorm2d(4), nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(BasicBlock(4, 4))
        downsample = nn.Sequential(nn.Conv2d(4, 8, 1, 2, bias=False), nn.BatchNorm2d(8))
        self.layer2 = nn.Sequential(BasicBlock(4, 8, 2, downsample))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def tiny_resnet() -> nn.Module:
    torch.manual_seed(0)
    module = TinyResNet()
    trained_look(module)
    return module.eval()


def shape_ops_on_variables(graph) -> list[str]:
    """The shape operations of a Khronos-parsed graph whose input is a variable, as 'op(variable)'."""
    variables = {op.outputs["output"] for op in graph.operations if op.name == "variable"}
    return [f"{op.name}({op.inputs['input']})" for op in graph.operations
            if op.name in SHAPE_OPS and op.inputs.get("input") in variables]


@pytest.mark.parametrize("fold, golden", [(False, "resnet.nnef"), (True, "resnet_folded.nnef")],
                         ids=["batch_norm", "folded"])
def test_tiny_resnet_graph_is_golden(tmp_path, fold, golden):
    module = tiny_resnet()
    x = torch.randn(1, 3, 8, 8)
    model = nnef_torch.export(module, (x,), input_names=["image"], output_names=["logits"], fold_batch_norm=fold)
    if os.environ.get("NNEF_TORCH_WRITE_GOLDEN"):
        (GOLDEN / golden).write_text(model.text)
    assert model.text == (GOLDEN / golden).read_text()

    model.save(tmp_path)
    graph = khronos_parse(tmp_path)  # also checks each .dat's shape against its variable's declaration
    assert (list(graph.inputs), list(graph.outputs)) == (["image"], ["logits"])
    assert shape_ops_on_variables(graph) == []
    names = {name for op in graph.operations for name in op.outputs.values()}
    assert {"layer1_0_conv1", "layer2_0_conv2", "layer2_0_downsample_0"} <= names
    assert ("layer2_0_bn1" in names) != fold  # folded batch norms leave no tensor of their own
    with torch.no_grad():
        expected = module(x)
        close(nnef_torch.load(tmp_path)(x), expected)
    close(run_khronos(tmp_path, [x.numpy()])[0], expected)
    close(run_tract(tmp_path, [x.numpy()])[0], expected)
