"""`dynamic_batch=`: only the `external` declarations hold the batch extent.

Each model is exported at one batch size, then run at batch 1 and batch 7 (its text edited, or loaded with
`batch_size=`) by the Khronos executor, tract and nnef_torch, against torch at that batch. Texts exported at two
batch sizes differ in their `external` lines only. A module whose code fixes the batch fails with the operation
and the source line.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import nnef_torch
from exporter.consumers import close, khronos_parse, run_khronos, run_tract
from nnef_torch.errors import ExportError, NNEFOptionError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The tensor attributes .*_flat_weights.*:UserWarning"),
]

BATCHES = (1, 7)


class ConvNet(nn.Module):
    """Convolution, flatten, linear; 4 channels, exported at batch 4: the flatten keeps the batch, not a channel."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.linear = nn.Linear(4 * 5 * 5, 3)

    def forward(self, x):
        return self.linear(torch.flatten(torch.relu(self.conv(x)), 1))


class Encoder(nn.Module):
    """A transformer encoder layer (batch first): its attention reshapes the batch into heads and back."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class Recurrent(nn.Module):
    """An LSTM without an initial state: torch makes zeros of the batch's size."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 10, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class TimeMajorAttention(nn.Module):
    """Multi-head attention on [length, batch, features]: the batch is axis 1."""

    def __init__(self):
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class Filled(nn.Module):
    """Batch-sized constants: zeros, ones, a full tensor, and a parameter expanded to the batch."""

    def __init__(self):
        super().__init__()
        self.row = nn.Parameter(torch.randn(1, 8))

    def forward(self, x):
        ones = torch.ones(x.shape[0], 8) * 3
        return x + self.row.expand(x.shape[0], -1) + ones + torch.zeros_like(x) + x.new_full((x.shape[0], 8), 2.0)


class SliceEnds(nn.Module):
    """Slices of a batch-sized axis written from its end: `end = -1`, and `end = 0` (to the end)."""

    def __init__(self):
        super().__init__()
        self.row = nn.Parameter(torch.randn(1, 8))

    def forward(self, x):
        return torch.cat([x, self.row])[:-1] * 2 + torch.cat([self.row, x])[1:]


class TwoInputs(nn.Module):
    """Two batched inputs and one without a batch axis."""

    def forward(self, x, y, scale):
        return torch.cat([x * scale, y], dim=1).reshape(x.shape[0], 2, -1).sum(2)


# name -> (module factory, example shape with the batch along `axis`, axis, consumers expected to fail)
MODELS = {
    "convnet": (ConvNet, (4, 4, 5, 5), 0, {}),
    "encoder": (Encoder, (4, 9, 16), 0, {}),
    "lstm": (Recurrent, (4, 9, 6), 0, {}),
    "time_major_attention": (TimeMajorAttention, (5, 4, 8), 1, {}),
    "filled": (Filled, (4, 8), 0, {}),
    "slice_ends": (SliceEnds, (4, 8), 0, {}),
}


def _module(name: str) -> nn.Module:
    torch.manual_seed(0)
    return MODELS[name][0]().eval()


def _shape(name: str, batch: int) -> tuple[int, ...]:
    shape, axis = list(MODELS[name][1]), MODELS[name][2]
    shape[axis] = batch
    return tuple(shape)


def at_batch(text: str, batch: int, axis: int = 0) -> str:
    """The text with the batch axis of every `external` declared `batch`."""
    def declare(match: re.Match) -> str:
        extents = [item.strip() for item in match.group(2).split(",")]
        extents[axis] = str(batch)
        return f"{match.group(1)}[{', '.join(extents)}]"
    return re.sub(r"(external<\w+>\(shape = )\[([^\]]*)\]", declare, text)


def without_externals(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "= external<" not in line)


def _copy_at(folder: Path, batch: int, axis: int, target: Path) -> Path:
    shutil.copytree(folder, target)
    (target / "graph.nnef").write_text(at_batch((folder / "graph.nnef").read_text(), batch, axis))
    return target


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> the folder of each model exported with dynamic_batch, at its example batch."""
    folders = {}
    for name, (_, _, axis, _) in MODELS.items():
        folder = tmp_path_factory.mktemp(name) / "model"
        example = torch.randn(_shape(name, 4))
        nnef_torch.save(_module(name), folder, example, dynamic_batch=axis if axis else True)
        folders[name] = folder
    return folders


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("batch", BATCHES)
def test_consumers_run_another_batch(name, batch, exported, tmp_path):
    axis, failing = MODELS[name][2], MODELS[name][3]
    folder = _copy_at(exported[name], batch, axis, tmp_path / "model")
    graph = khronos_parse(folder)
    assert list(graph.tensors[graph.inputs[0]].shape)[axis] == batch
    x = torch.randn(_shape(name, batch))
    with torch.no_grad():
        expected = _module(name)(x).numpy()
    close(run_khronos(folder, [x.numpy()])[0], expected)
    if "tract" in failing:
        with pytest.raises(Exception, match=failing["tract"]):
            run_tract(folder, [x.numpy()])
    else:
        close(run_tract(folder, [x.numpy()])[0], expected)


@pytest.mark.parametrize("name", list(MODELS))
def test_loads_at_another_batch(name, exported):
    axis = MODELS[name][2]
    module = nnef_torch.load(exported[name], batch_size=7, batch_axes={"x": axis} if axis else None)
    x = torch.randn(_shape(name, 7))
    assert module.nnef_graph.signature.externals[0].shape == x.shape
    with torch.no_grad():
        close(module(x), _module(name)(x))


@pytest.mark.parametrize("name", list(MODELS))
def test_only_externals_hold_the_batch(name):
    axis = MODELS[name][2]
    texts = [nnef_torch.export(_module(name), torch.randn(_shape(name, batch)), dynamic_batch=[axis]).text
             for batch in (5, 7)]
    assert without_externals(texts[0]) == without_externals(texts[1])
    assert at_batch(texts[0], 7, axis) == texts[1]


def test_flatten_keeps_the_batch_where_a_channel_count_equals_it():
    model = nnef_torch.export(_module("convnet"), torch.randn(4, 4, 5, 5), dynamic_batch=True)
    assert "x = external<scalar>(shape = [4, 4, 5, 5]);" in model.text
    assert re.search(r"reshape\(\w+, shape = \[0, 100\]\)", model.text)
    assert model.graph.tensors[model.graph.outputs[0]].shape == (4, 3)


def test_model_graph_has_the_example_batch():
    model = nnef_torch.export(_module("encoder"), torch.randn(3, 9, 16), dynamic_batch=True)
    assert model.graph.signature.externals[0].shape == (3, 9, 16)
    assert all(model.graph.tensors[name].shape == (3, 9, 16) for name in model.graph.outputs)


def test_batch_sized_constants_broadcast_from_an_input():
    text = nnef_torch.export(_module("lstm"), torch.randn(4, 9, 6), dynamic_batch=True).text
    assert "constant<" not in text  # the zero initial states are made from the input: tract reads them
    assert re.search(r"= mul\(\w+, 0\.0\);", text)


def test_slices_count_from_the_end():
    text = nnef_torch.export(_module("slice_ends"), torch.randn(4, 8), dynamic_batch=True).text
    assert "begin = [0], end = [-1]" in text and "begin = [1], end = [0]" in text


def test_several_inputs_and_one_without_batch(tmp_path):
    module = TwoInputs()
    inputs = (torch.randn(4, 6), torch.randn(4, 2), torch.randn(6))
    nnef_torch.save(module, tmp_path / "m", inputs, dynamic_batch=[0, 0, None])
    text = (tmp_path / "m" / "graph.nnef").read_text()
    assert "shape = [6]" in text
    folder = tmp_path / "m7"
    shutil.copytree(tmp_path / "m", folder)
    (folder / "graph.nnef").write_text(text.replace("shape = [4, 6]", "shape = [7, 6]")
                                       .replace("shape = [4, 2]", "shape = [7, 2]"))
    inputs = (torch.randn(7, 6), torch.randn(7, 2), torch.randn(6))
    expected = module(*inputs).numpy()
    arrays = [x.numpy() for x in inputs]
    close(run_khronos(folder, arrays)[0], expected)
    close(run_tract(folder, arrays)[0], expected)
    loaded = nnef_torch.load(tmp_path / "m", batch_size=7, batch_axes={"scale": None})
    close(loaded(*inputs), expected)


class FixedReshape(nn.Module):
    def forward(self, x):
        return x.reshape(4, -1)


class FixedConstant(nn.Module):
    def forward(self, x):
        return torch.zeros(4, 8) + x


@pytest.mark.parametrize("module, code, operation", [
    (FixedReshape(), "return x.reshape(4, -1)", "aten.reshape.default fixes the batch size to 4"),
    (FixedConstant(), "return torch.zeros(4, 8) + x", "aten.add.Tensor fixes the batch size to 4"),
])
def test_code_that_fixes_the_batch_is_named(module, code, operation):
    with pytest.raises(ExportError) as caught:
        nnef_torch.export(module, torch.randn(4, 8), dynamic_batch=True)
    message = str(caught.value)
    assert "cannot be exported with a variable batch size" in message and operation in message
    assert "test_dynamic_batch.py:" in message and code in message
    (problem,) = caught.value.problems
    assert problem.location.file.endswith("test_dynamic_batch.py") and problem.code == code


class BatchPadding(nn.Module):
    def forward(self, x):
        return nn.functional.pad(x, (0, x.shape[0]))


class BatchDivision(nn.Module):
    def forward(self, x):
        return x / x.shape[0]


class BatchRange(nn.Module):
    def forward(self, x):
        return x + torch.arange(x.shape[0]).float()[:, None]


class IntegerInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, index):
        return self.table(index) + torch.ones(index.shape[0], 4)


@pytest.mark.parametrize("module, example, words", [
    (BatchPadding(), torch.randn(4, 8), ["aten.pad", "padding = [(0, 0), (0, 11)] at batch 11"]),
    (BatchDivision(), torch.randn(4, 8), ["aten.div.Tensor", "a value computed from the batch size has no NNEF form"]),
    (BatchRange(), torch.randn(4, 8), ["aten.arange", "its values vary along the batch axis"]),
    (IntegerInput(), torch.tensor([1, 2, 3, 4]), ["needs a scalar (floating-point) input with a batch axis"]),
])
def test_batch_dependent_values_without_nnef_form_are_named(module, example, words):
    with pytest.raises(ExportError) as caught:
        nnef_torch.export(module, example, dynamic_batch=True)
    assert all(word in str(caught.value) for word in words), str(caught.value)


@pytest.mark.parametrize("dynamic_batch, message", [
    ([0, 0], "one axis (or None) per input"),
    (3, "has no axis 3 to be the batch axis"),
    ([None], "names no batch axis"),
    ("yes", "must be True, an axis"),
])
def test_bad_batch_axes(dynamic_batch, message):
    with pytest.raises(ExportError, match=re.escape(message)):
        nnef_torch.export(_module("filled"), torch.randn(4, 8), dynamic_batch=dynamic_batch)


def test_inputs_must_share_the_batch():
    with pytest.raises(ExportError, match="different extents"):
        nnef_torch.export(TwoInputs(), (torch.randn(4, 6), torch.randn(5, 2), torch.randn(6)),
                          dynamic_batch=[0, 0, None])


def test_save_refuses_dynamic_batch_where_it_cannot_apply(tmp_path):
    with pytest.raises(NNEFOptionError, match="applies to NNEF models"):
        nnef_torch.save(_module("filled"), tmp_path / "m.json", torch.randn(4, 8), dynamic_batch=True)
    nnef_torch.save(_module("filled"), tmp_path / "m", torch.randn(4, 8))
    with pytest.raises(NNEFOptionError, match="load it with batch_size="):
        nnef_torch.save(nnef_torch.load(tmp_path / "m"), tmp_path / "again", dynamic_batch=True)


def test_default_export_is_unchanged():
    module, x = _module("convnet"), torch.randn(4, 4, 5, 5)
    assert nnef_torch.export(module, x).text == nnef_torch.export(module, x, dynamic_batch=False).text
    assert "shape = [4, 100]" in nnef_torch.export(module, x).text


def test_outputs_match_at_the_example_batch(exported):
    x = torch.randn(_shape("encoder", 4))
    module = nnef_torch.load(exported["encoder"])
    close(module(x), _module("encoder")(x))
    assert np.isfinite(module(x).detach().numpy()).all()
