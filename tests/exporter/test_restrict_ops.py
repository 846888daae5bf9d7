"""`ops=[...]`: an export written with a fixed list of NNEF operations (an accelerator importer's), fragments
outside the list expanded into their bodies. Checked by the Khronos parser without lowering (every operation it
reports is in the list, no fragment is defined), by the Khronos executor against torch, and for the one error that
lists what the list lacks."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import nnef_torch
from exporter.consumers import close, compound_standard_ops
from nnef_torch.errors import ExportError, NNEFOptionError

# The operations AMD MIVisionX's NNEF importer maps (model_compiler/python/nnef_to_nnir.py); it raises on any other.
MIVISIONX = ["conv", "deconv", "batch_normalization", "avg_pool", "max_pool", "mean_reduce", "relu", "add", "mul",
             "sub", "div", "min", "max", "matmul", "linear", "softmax", "local_response_normalization", "slice",
             "concat", "leaky_relu", "sigmoid", "reshape", "squeeze", "unsqueeze", "transpose", "copy", "clamp",
             "nearest_upsample"]
DECLARATIONS = {"external", "variable"}  # every graph has them


def _khronos_operations(folder: Path) -> set[str]:
    """The operations the Khronos parser reads from the document, nothing lowered."""
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    graph = nnef.load_graph(str(folder), lowered=[])
    if not _defined(folder):  # its shape functions know the standard operations only
        nnef.infer_shapes(graph)
    return {op.name for op in graph.operations}


def _defined(folder: Path) -> list[str]:
    return re.findall(r"^\s*fragment\s+(\w+)", (folder / "graph.nnef").read_text(), flags=re.M)


def _seeded(module: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.BatchNorm2d):
                layer.running_mean.uniform_(-1.0, 1.0)
                layer.running_var.uniform_(0.5, 2.0)
                layer.weight.uniform_(0.5, 2.0)
                layer.bias.uniform_(-1.0, 1.0)
    return module.eval()


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 4, 3, stride=2, bias=False)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return F.avg_pool2d(F.leaky_relu(self.conv2(x), 0.1), 1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.ReLU(), nn.Linear(16, 5))

    def forward(self, x):
        return torch.softmax(self.body(x), dim=1)


class Activations(nn.Module):
    """Extension fragments (hard_swish, hard_sigmoid, gelu_erf with erf_rational, gelu_tanh)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.hard_swish, self.gelu, self.hard_sigmoid = nn.Hardswish(), nn.GELU(), nn.Hardsigmoid()

    def forward(self, x):
        x = self.hard_swish(self.conv(x))
        return self.gelu(x) + self.hard_sigmoid(x) * torch.sigmoid(x) - torch.clamp(x, -0.5, 0.5)


class MeanUpsample(nn.Module):
    """Mean over axes, nearest up-sampling, concatenation, slicing, permutation, squeeze and unsqueeze."""

    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        y = self.up(x)
        centred = y - y.mean(dim=(2, 3), keepdim=True)
        joined = torch.cat([centred, y[:, :1]], dim=1)
        return joined.permute(0, 2, 3, 1), x.mean(dim=(2, 3)).unsqueeze(-1).squeeze(0)


MODULES = {"conv_bn_relu": ConvBnRelu, "mlp": MLP, "activations": Activations, "mean_upsample": MeanUpsample}


def _run_khronos(folder: Path, x: torch.Tensor) -> list[np.ndarray]:
    """The Khronos executor's outputs. It runs compound operations (linear, batch_normalization, ...) and
    nearest_upsample, for which it has no kernel, only lowered: that is its run, not the document."""
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    lowered = [*compound_standard_ops(), "nearest_upsample", *_defined(folder)]
    with nnef.Session(str(folder), lowered=lowered) as session:
        outputs = session(np.ascontiguousarray(x.numpy()))
    return [np.asarray(output) for output in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]


def _check(module: nn.Module, x: torch.Tensor, folder: Path, allowed: list[str], rtol: float = 1e-5) -> None:
    """Only listed operations (Khronos parser, nothing lowered), no fragment beyond `allowed`, and the Khronos
    executor's outputs equal to torch's."""
    assert _khronos_operations(folder) <= set(allowed) | DECLARATIONS
    assert set(_defined(folder)) <= set(allowed)
    with torch.no_grad():
        expected = module(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    found = _run_khronos(folder, x)
    assert len(found) == len(expected)
    for f, e in zip(found, expected):
        close(f, e, rtol)


@pytest.mark.parametrize("name", list(MODULES))
def test_export_writes_only_the_listed_operations(tmp_path, name):
    module = _seeded(MODULES[name]())
    x = torch.randn(1, 3, 8, 8)
    nnef_torch.save(module, tmp_path / "net", x, ops=MIVISIONX)
    assert _defined(tmp_path / "net") == []
    assert "extension" not in (tmp_path / "net" / "graph.nnef").read_text()
    _check(module, x, tmp_path / "net", MIVISIONX)


def test_fragments_outside_the_list_are_expanded(tmp_path):
    module, x = _seeded(Activations()), torch.randn(1, 3, 8, 8)
    nnef_torch.save(module, tmp_path / "plain", x)
    assert {"hard_swish", "gelu_erf"} <= set(_defined(tmp_path / "plain"))  # what ops= has to expand
    nnef_torch.save(module, tmp_path / "listed", x, ops=MIVISIONX)
    assert not {"hard_swish", "gelu_erf", "erf_rational"} & _khronos_operations(tmp_path / "listed")


def test_a_listed_fragment_stays_whole_with_the_fragments_its_body_uses(tmp_path):
    module, x = _seeded(Activations()), torch.randn(1, 3, 8, 8)
    allowed = [*MIVISIONX, "hard_swish"]
    nnef_torch.save(module, tmp_path / "net", x, ops=allowed)
    assert "hard_swish" in _khronos_operations(tmp_path / "net")
    assert _defined(tmp_path / "net") == ["hard_sigmoid", "hard_swish"]  # hard_swish's body invokes hard_sigmoid
    assert _khronos_operations(tmp_path / "net") <= set(allowed) | DECLARATIONS
    with torch.no_grad():
        close(_run_khronos(tmp_path / "net", x)[0], module(x))


class Unlisted(nn.Module):
    def forward(self, x):
        y = torch.exp(x)
        z = torch.sort(x, dim=-1).values
        return y + z + F.pad(x, (1, 1))[..., 1:-1]


def test_operations_outside_the_list_raise_one_error_naming_each(tmp_path):
    with pytest.raises(ExportError) as caught:
        nnef_torch.save(Unlisted(), tmp_path / "net", torch.randn(2, 5), ops=MIVISIONX)
    error = caught.value
    assert len(error.problems) == 3  # exp, the sort, pad: one problem per operation of the graph
    assert all(problem.location is not None and problem.location.file == __file__ for problem in error.problems)
    lines = sorted(problem.location.line for problem in error.problems)
    assert len(set(lines)) == 3
    text = str(error)
    for name in ("'exp'", "'pad'", "'select'", "stable_sort"):
        assert name in text
    assert not (tmp_path / "net").exists()


class Normalized(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 4, 3), nn.LayerNorm([4, 6, 6])

    def forward(self, x):
        return self.norm(self.conv(x))


def test_the_names_the_error_asks_for_are_enough(tmp_path):
    module, x = _seeded(Normalized()), torch.randn(1, 3, 8, 8)
    with pytest.raises(ExportError, match="ops= would need 'pow'") as caught:
        nnef_torch.export(module, x, ops=MIVISIONX)
    assert "layer_norm" in str(caught.value)  # or kept whole
    nnef_torch.save(module, tmp_path / "net", x, ops=[*MIVISIONX, "pow"])
    _check(module, x, tmp_path / "net", [*MIVISIONX, "pow"])


def test_folded_batch_norm_needs_no_batch_normalization(tmp_path):
    module, x = _seeded(ConvBnRelu()), torch.randn(1, 3, 8, 8)
    without = [name for name in MIVISIONX if name != "batch_normalization"]
    with pytest.raises(ExportError, match="'pow'"):  # its body's sqrt is a power
        nnef_torch.export(module, x, ops=without)
    nnef_torch.save(module, tmp_path / "net", x, ops=without, fold_batch_norm=True)
    _check(module, x, tmp_path / "net", without)


def test_dynamic_batch_and_names_with_a_list(tmp_path):
    module = _seeded(MLP())
    nnef_torch.save(module, tmp_path / "net", torch.randn(2, 3, 8, 8), ops=MIVISIONX, dynamic_batch=True,
                    input_names=["image"], output_names=["scores"])
    assert _khronos_operations(tmp_path / "net") <= set(MIVISIONX) | DECLARATIONS
    assert "graph MLP( image ) -> ( scores )" in (tmp_path / "net" / "graph.nnef").read_text()
    x = torch.randn(5, 3, 8, 8)
    with torch.no_grad():
        close(nnef_torch.load(tmp_path / "net", batch_size=5)(x), module(x))


@pytest.mark.parametrize(("ops", "message"), [
    (["conv", "convolution"], "'convolution' (did you mean 'conv'?)"),
    (["Relu"], "did you mean 'relu'"),
    ("relu", "takes a list of NNEF operation names"),
    ([1, 2], "holds operation names (str)"),
])
def test_the_list_is_checked(ops, message):
    with pytest.raises(ExportError) as caught:
        nnef_torch.export(MLP().eval(), torch.randn(1, 3, 8, 8), ops=ops)
    assert message in str(caught.value)


def test_tract_target_and_imported_modules_refuse_a_list(tmp_path):
    with pytest.raises(ExportError, match="target='tract'"):
        nnef_torch.export(MLP().eval(), torch.randn(1, 3, 8, 8), ops=MIVISIONX, target="tract")
    nnef_torch.save(MLP().eval(), tmp_path / "net", torch.randn(1, 3, 8, 8))
    with pytest.raises(NNEFOptionError, match="ops= applies when exporting"):
        nnef_torch.save(nnef_torch.load(tmp_path / "net"), tmp_path / "again", ops=MIVISIONX)
