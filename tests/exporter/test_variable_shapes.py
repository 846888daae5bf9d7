"""Variables declared in the shape their consumers read (`nnef_torch.exporter.variable_shapes`): no exported graph
applies `unsqueeze` / `squeeze` / `reshape` / `transpose` to a variable, except where the variable is also read in
another shape or the move would change what it means (an `update`, a per-channel graph.quant entry, a copy).

Each export is read by the Khronos parser (not by our own IR) to find shape operations on variables, and run in
the Khronos executor, tract and nnef_torch's importer against torch."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn as nn

import nnef_torch
from nnef_torch.exporter.variable_shapes import declare_read_shapes
from nnef_torch.format.quant_file import QuantSpec
from nnef_torch.ir.builder import Builder
from tests.exporter.consumers import export_and_check
from tests.exporter.zoo import ZOO, make

pytestmark = pytest.mark.slow

nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")

SHAPE_OPS = ("unsqueeze", "squeeze", "reshape", "transpose")


def shape_ops_on_variables(text: str) -> list[str]:
    """'op(variable)' for each shape operation whose input is a variable, as the Khronos parser reads `text` (a
    tract text without its extension line: its operations here are standard ones)."""
    graph = nnef.parse_string(re.sub(r"^extension tract_registry .*;$", "", text, flags=re.M))
    variables = {op.outputs["output"] for op in graph.operations if op.name == "variable"}
    return [f"{op.name}({op.inputs['input']})" for op in graph.operations
            if op.name in SHAPE_OPS and op.inputs.get("input") in variables]


def declared(text: str) -> dict[str, list[int]]:
    """label -> declared shape of every variable, as the Khronos parser reads `text`."""
    graph = nnef.parse_string(text)
    return {op.attribs["label"]: list(op.attribs["shape"]) for op in graph.operations if op.name == "variable"}


# ------------------------------------------------------------------------------------------------- the zoo

@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_applies_no_shape_op_to_a_variable(name, mode):
    module, inputs = make(name, mode)
    assert shape_ops_on_variables(nnef_torch.export(module, inputs).text) == []


@pytest.mark.parametrize("options", [{"target": "tract"}, {"dynamic_batch": True}, {"fold_batch_norm": True}],
                         ids=["tract", "dynamic_batch", "fold_batch_norm"])
@pytest.mark.parametrize("name", ["resnet18", "vit"])
def test_no_shape_op_on_a_variable_with_options(name, options):
    module, inputs = make(name, "eval")
    assert shape_ops_on_variables(nnef_torch.export(module, inputs, **options).text) == []


def test_dynamic_shapes_declare_read_shapes():
    module, inputs = make("resnet18", "eval")
    batch = torch.export.Dim("batch", min=1, max=64)
    model = nnef_torch.export(module, inputs, dynamic_shapes=({0: batch},))
    assert shape_ops_on_variables(model.text) == []
    assert declared(model.text)["bn1/running_mean"] == [1, 8]


# ------------------------------------------------------------------------------------------------- what moves

class Broadcast(nn.Module):
    """A parameter broadcast against a rank-3 input (NNEF broadcasts from the left: written as [1, 3, 4]) and a
    permuted one; with `twice`, the first is also read as it is (a matmul)."""

    def __init__(self, twice: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(3, 4))
        self.p = nn.Parameter(torch.randn(3, 2, 4))
        self.twice = twice

    def forward(self, x):
        y = x + self.w + self.p.permute(1, 0, 2)
        return (y, x[0] @ self.w.t()) if self.twice else y


def test_broadcast_and_permuted_parameters_are_declared_as_read(tmp_path):
    module, x = Broadcast(), torch.randn(2, 3, 4)
    model = nnef_torch.export(module, (x,))
    assert shape_ops_on_variables(model.text) == []
    assert declared(model.text) == {"w": [1, 3, 4], "p": [2, 3, 4]}
    # the module's own memory, seen in the declared shape and layout
    assert model.tensors["p"].data_ptr() == module.p.data_ptr()
    np.testing.assert_array_equal(model.tensors["p"].numpy(), module.p.detach().permute(1, 0, 2).numpy())
    report = export_and_check(module, (x,), tmp_path)
    assert report.failures == {}, report.failures
    stored = nnef_torch.read_tensor(tmp_path / "w.dat")
    np.testing.assert_array_equal(stored, module.w.detach().numpy()[None])


def test_a_variable_read_in_two_shapes_stays(tmp_path):
    module, x = Broadcast(twice=True), torch.randn(2, 3, 4)
    model = nnef_torch.export(module, (x,))
    assert declared(model.text)["w"] == [3, 4]
    assert sorted(shape_ops_on_variables(model.text)) == ["transpose(w)", "unsqueeze(w)"]  # each read as before
    report = export_and_check(module, (x,), tmp_path)
    assert report.failures == {}, report.failures


def test_a_transpose_followed_by_a_copying_reshape_stays(tmp_path):
    """The transpose alone would be a view, the reshape after it a copy: the variable keeps torch's layout, rather
    than a layout of ours that is still reshaped (the model's tensors stay the module's own)."""
    class Scrambled(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.v = nn.Parameter(torch.randn(4, 3))

        def forward(self, x):
            return x @ self.v.t().reshape(4, 3)

    module, x = Scrambled(), torch.randn(2, 4)
    model = nnef_torch.export(module, (x,))
    assert declared(model.text)["v"] == [4, 3]
    assert shape_ops_on_variables(model.text) == ["transpose(v)"]
    assert model.tensors["v"].data_ptr() == module.v.data_ptr()
    report = export_and_check(module, (x,), tmp_path)
    assert report.failures == {}, report.failures


def test_running_statistics_written_by_update_keep_their_shape(tmp_path):
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    text = nnef_torch.export(module, (torch.randn(2, 3, 6, 6),)).text
    shapes = declared(text)
    assert shapes["1/running_mean"] == shapes["1/running_var"] == [4]  # as update writes them
    assert shapes["1/weight"] == shapes["1/bias"] == shapes["0/bias"] == [1, 4]
    assert re.search(r"update\(t_1_running_mean, ", text)


# ------------------------------------------------------------------------------------------------- graph.quant

def _graph(entry_on: str | None, spec: QuantSpec | None):
    """v: variable [4] -> unsqueeze [1, 4] -> add to x [2, 4]; `spec` on the variable ('v') or its reshape ('u')."""
    b = Builder()
    x = b.external("x", "scalar", [2, 4])
    v = b.variable("v", "scalar", [4], torch.arange(4.0), name="v")
    u = b.op("unsqueeze", v, axes=[0], out_name="u")
    y = b.op("add", x, u, out_name="y")
    if spec is not None:
        b.quantization[entry_on] = spec
    return b.graph("G", [y]), dict(b.data)


PER_TENSOR = QuantSpec("zero_point_linear_quantize", {"zero_point": 0, "scale": 0.5, "bits": 8, "signed": True,
                                                       "symmetric": False})
PER_CHANNEL = QuantSpec("zero_point_linear_quantize", {"zero_point": [0, 0, 0, 0], "scale": [0.5, 0.25, 1.0, 2.0],
                                                        "bits": 8, "signed": True, "symmetric": False})


@pytest.mark.parametrize("entry_on, spec, moves", [
    (None, None, True),
    ("v", PER_TENSOR, True),  # one scale: the entry holds in any shape
    ("u", PER_TENSOR, True),  # the entry on the reshaped tensor goes to the variable that now is it
    ("v", PER_CHANNEL, False),  # per channel along axis 0, which [1, 4] would move
], ids=["no_entry", "per_tensor", "entry_on_result", "per_channel"])
def test_quantization_entries_stay_correct(entry_on, spec, moves):
    graph, data = _graph(entry_on, spec)
    before = (graph, {key: value.clone() for key, value in data.items()})
    moved, moved_data = declare_read_shapes(graph, data)
    assert (graph, data.keys()) == (before[0], before[1].keys())  # the arguments are not changed
    assert torch.equal(data["v"], before[1]["v"])
    names = [op.name for op in moved.operations]
    if not moves:
        assert moved == graph and moved_data["v"].shape == (4,)
        return
    assert "unsqueeze" not in names and moved.tensors["v"].shape == (1, 4)
    assert moved.signature.variables[0].shape == (1, 4) and moved_data["v"].shape == (1, 4)
    add = next(op for op in moved.operations if op.name == "add")
    assert add.inputs["y"].name == "v"
    assert moved.quantization == ({"v": spec} if spec is not None else {})
