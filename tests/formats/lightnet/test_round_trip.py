"""Round trips through the LightNet back end: LightNet -> module -> LightNet and LightNet -> NNEF -> LightNet keep
the outputs equal, from the API and from the command line (`convert` in both directions)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.formats.lightnet.wts import read_wts, write_wts
from tests.cli.helpers import cli, quantized_weight_model
from tests.formats.lightnet.writing import assert_same, check_document, optypes


class _Net:
    """A LightNet model written the way LightNet's own nets are (protos/net/shufflenetv2.net, through il2json):
    weights from the .wts file, a ShuffleNet v2 unit, and a head with the other optypes the writer emits."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.weights: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}
        self.rng = np.random.default_rng(7)

    def op(self, optype: str, ins: dict[str, str], outs: dict[str, str], **params: Any) -> None:
        index = self.counts.get(optype, 0)
        self.counts[optype] = index + 1
        self.ops.append({"name": f"{optype}{index}", "optype": optype,
                         "tensors_in": [{"arg_name": k, "name": v} for k, v in ins.items()],
                         "tensors_out": [{"arg_name": k, "name": v} for k, v in outs.items()],
                         "params": [{"arg_name": k, "value": v} for k, v in params.items()]})

    def weight(self, name: str, dims: list[int], low: float = -0.5, high: float = 0.5) -> str:
        self.weights[name] = self.rng.uniform(low, high, math.prod(dims)).astype(np.float32)
        self.op("create", {}, {"dst": name}, dtype="TL_FLOAT", dims=dims, data=[0], ran=[0, 0], from_file=True)
        return name

    def conv(self, src: str, dst: str, cin: int, cout: int, group: int, size: int, stride: int, pad: int) -> None:
        weight = self.weight(f"{dst}_wts", [cout, cin // group, size, size])
        bias = self.weight(f"{dst}_bias", [cout])
        self.op("conv2d", {"src": src, "weight": weight, "bias": bias}, {"dst": dst}, group=group,
                size=[size, size], stride=[stride, stride], dilation=[1, 1], padding=[pad] * 4, autopad="NOTSET")

    def conv_bn(self, src: str, dst: str, cin: int, cout: int, group: int, size: int, pad: int,
                relu: bool) -> None:
        self.conv(src, f"{dst}_conv", cin, cout, group, size, 1, pad)
        stats = {arg: self.weight(f"{dst}_{arg}", [cout], *((0.5, 2.0) if arg == "var" else (-1.0, 1.0)))
                 for arg in ("scale", "offset", "mean", "var")}
        self.op("batchnorm", {"src": f"{dst}_conv", **stats}, {"dst": f"{dst}_bn" if relu else dst}, epsilon=1e-5)
        if relu:
            self.op("relu", {"src": f"{dst}_bn"}, {"dst": dst})

    def document(self) -> dict[str, Any]:
        return {"ops": self.ops}


def lightnet_model(folder: Path) -> Path:
    """input [1, 3, 12, 12] -> conv/bn/relu -> maxpool -> a ShuffleNet v2 unit -> heads: the softmax of a 1x1 conv
    over the global average (printed), the dot product of its logits, and a sigmoid of an elew product upsampled,
    resized and max-reduced."""
    net = _Net()
    net.op("create", {}, {"dst": "input"}, dtype="TL_FLOAT", dims=[1, 3, 12, 12], data=[0], ran=[0, 0],
           from_file=False)
    net.conv_bn("input", "conv1", 3, 8, 1, 3, 1, True)
    net.op("maxpool2d", {"src": "conv1"}, {"dst": "pool1"}, size=[2, 2], stride=[2, 2], padding=[0, 0, 0, 0],
           autopad="NOTSET")
    net.op("slice", {"src": "pool1"}, {"dst": "half1"}, axis=1, start=0, len=4)
    net.op("slice", {"src": "pool1"}, {"dst": "half2"}, axis=1, start=4, len=4)
    net.conv_bn("half1", "unit_conv1", 4, 4, 1, 1, 0, True)
    net.conv_bn("unit_conv1", "unit_conv2", 4, 4, 4, 3, 1, False)
    net.conv_bn("unit_conv2", "unit_conv3", 4, 4, 1, 1, 0, True)
    net.op("concat", {"src1": "unit_conv3", "src2": "half2"}, {"dst": "unit_concat"}, axis=1)
    net.op("reshape", {"src": "unit_concat"}, {"dst": "shuffle1"}, dims=[1, 2, 4, 6, 6])
    net.op("transpose", {"src": "shuffle1"}, {"dst": "shuffle2"}, axes=[0, 2, 1, 3, 4])
    net.op("reshape", {"src": "shuffle2"}, {"dst": "unit"}, dims=[1, 8, 6, 6])
    net.op("avgpool2d", {"src": "unit"}, {"dst": "pooled"}, size=[6, 6], stride=[1, 1], padding=[0, 0, 0, 0],
           autopad="NOTSET")
    net.conv("pooled", "logits", 8, 5, 1, 1, 1, 0)
    net.op("softmax", {"src": "logits"}, {"dst": "prob"}, axis=1)
    net.op("lrelu", {"src": "unit"}, {"dst": "leaky"}, negslope=0.1)
    net.op("elew", {"src1": "leaky", "src2": "unit"}, {"dst": "product"}, elew_op="TL_MUL")
    net.op("sigmoid", {"src": "product"}, {"dst": "gate"})
    net.op("upsample", {"src": "gate"}, {"dst": "mask"}, mode="TL_NEAREST", scales=[1, 1, 2, 2])
    net.op("print", {"src": "prob"}, {}, msg="prob:")
    net.op("resize", {"src": "mask"}, {"dst": "small"}, mode="TL_NEAREST", dims=[1, 8, 9, 9])
    net.op("maxreduce", {"src": "small"}, {"dst": "peak"}, axis=1)
    net.op("dot_product", {"src1": "logits", "src2": "logits"}, {"dst": "energy"})
    path = folder / "net.json"
    path.write_text(json.dumps(net.document(), indent=4))
    (folder / "net.wts").write_text(write_wts(net.weights))
    return path


@pytest.fixture
def net(tmp_path: Path) -> tuple[Path, torch.nn.Module, torch.Tensor]:
    path = lightnet_model(tmp_path)
    module = nnef_torch.load(path, inputs=["input"])
    return path, module, torch.randn(1, 3, 12, 12)


def _reloaded(path: Path, inputs: list[str]) -> tuple[dict, torch.nn.Module]:
    document = json.loads(path.read_text())
    check_document(document, inputs)
    return document, nnef_torch.load(path, inputs=inputs)


def test_lightnet_module_lightnet(net: Any, tmp_path: Path) -> None:
    path, module, x = net
    module.save(tmp_path / "again.json")
    document, again = _reloaded(tmp_path / "again.json", ["input"])
    assert_same(again(x), module(x))
    original = optypes(json.loads(path.read_text()))
    for optype in ("conv2d", "batchnorm", "maxpool2d", "slice", "concat", "transpose", "softmax", "lrelu",
                   "sigmoid", "upsample", "print", "resize", "maxreduce"):
        assert optypes(document).count(optype) == original.count(optype), optype
    assert read_wts((tmp_path / "again.wts").read_text()).keys() == read_wts(path.with_suffix(".wts")
                                                                             .read_text()).keys()
    # once more: what the writer wrote is written the same way again (constants it wrote inline, such as the
    # count that turns an average into a sum, read back as variables and go to the .wts file this time)
    again.save(tmp_path / "third.json")
    third = json.loads((tmp_path / "third.json").read_text())
    assert [_without_data(op) for op in third["ops"]] == [_without_data(op) for op in document["ops"]]


def _without_data(op: dict[str, Any]) -> dict[str, Any]:
    if op["optype"] != "create":
        return op
    return {**op, "params": [p for p in op["params"] if p["arg_name"] not in ("data", "from_file")]}


def test_lightnet_nnef_lightnet(net: Any, tmp_path: Path) -> None:
    _, module, x = net
    module.save(tmp_path / "net.tgz")
    nnef = nnef_torch.load(tmp_path / "net.tgz")
    assert_same(nnef(x), module(x))
    nnef.save(tmp_path / "back.json", weights="inline")
    _, back = _reloaded(tmp_path / "back.json", ["input"])
    assert_same(back(x), module(x))


def test_cli_lightnet_nnef_lightnet(net: Any, tmp_path: Path, capsys: Any) -> None:
    path, module, x = net
    status, out, err = cli(capsys, "convert", path, tmp_path / "net.tgz", "--inputs", "input")
    assert status == 0, err
    status, out, err = cli(capsys, "convert", tmp_path / "net.tgz", tmp_path / "back.json")
    assert status == 0, err
    assert "LightNet JSON IR" in out and "back.wts" in out and "outputs prob, peak, energy" in out
    _, back = _reloaded(tmp_path / "back.json", ["input"])
    assert_same(back(x), module(x))
    status, out, err = cli(capsys, "convert", path, tmp_path / "direct.json", "--inputs", "input", "--weights",
                           "inline")
    assert status == 0, err
    assert not (tmp_path / "direct.wts").exists()
    _, direct = _reloaded(tmp_path / "direct.json", ["input"])
    assert_same(direct(x), module(x))


def test_cli_nnef_to_lightnet(tmp_path: Path, capsys: Any) -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 5 * 5, 3)).eval()
    x = torch.randn(1, 2, 5, 5)
    nnef_torch.save(module, tmp_path / "model", (x,))
    status, out, err = cli(capsys, "convert", tmp_path / "model", tmp_path / "model.lnet", "--to", "lightnet")
    assert status == 0, err
    _, loaded = _reloaded(tmp_path / "model.lnet", ["input"])
    assert_same(loaded(x), module(x))


def test_cli_quantized_weights_are_written_as_their_values(tmp_path: Path, capsys: Any) -> None:
    folder = quantized_weight_model(tmp_path / "quantized")
    status, out, err = cli(capsys, "convert", folder, tmp_path / "model.json")
    assert status == 0, err
    codes = np.array([[0, 1, 2], [128, 254, 255]], np.float32)
    values = read_wts((tmp_path / "model.wts").read_text())
    np.testing.assert_allclose(values["w"], (codes / 255 * 2 - 1).ravel(), atol=1e-6)


@pytest.mark.parametrize("argv, message", [
    (["--strip-quant"], "--strip-quant applies to NNEF targets"),
    (["--weights", "inline", "--to", "nnef"], "--weights applies to LightNet targets"),
])
def test_cli_options_of_the_other_format_are_refused(argv: list[str], message: str, tmp_path: Path,
                                                     capsys: Any) -> None:
    folder = quantized_weight_model(tmp_path / "quantized")
    status, out, err = cli(capsys, "convert", folder, tmp_path / "model.json", *argv)
    assert status == 1 and message in err
    assert not (tmp_path / "model.json").exists()


def test_cli_refusals(tmp_path: Path, capsys: Any) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "graph.nnef").write_text(
        "version 1.0;\n\ngraph G( x ) -> ( y )\n{\n    x = external<scalar>(shape = [2, 3]);\n"
        "    t = tanh(x);\n    y = exp(t);\n}\n")
    status, out, err = cli(capsys, "convert", folder, tmp_path / "model.json")
    assert status == 1
    assert "2 problem(s)" in err and "tanh (t)" in err and "exp (y)" in err and "graph.nnef:6" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
