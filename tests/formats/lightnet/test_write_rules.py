"""Every LightNet write rule against its torch twin: a module is saved as LightNet, the file is checked against
LightNet's conventions, read back by the LightNet front end, and its outputs compared with the module's. One row
per case; `ops` lists optypes the file must use (LightNet's way of writing the operation). Torch modules first
(through the exporter), then NNEF graphs for what the exporter never writes."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nnef_torch
from tests.formats.lightnet.writing import Fn, assert_same, check_document, optypes, twin


@dataclass
class Row:
    id: str
    make: Any  # () -> module
    shapes: tuple[tuple[int, ...], ...]
    ops: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    positive: bool = False  # inputs > 0 (pow)


def _p(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


ROWS = [
    # -- convolution
    Row("conv_stride_pad", lambda: torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), ((1, 3, 9, 9),), ("conv2d",)),
    Row("conv_dilated_grouped_no_bias", lambda: torch.nn.Conv2d(4, 6, 3, dilation=2, groups=2, bias=False),
        ((2, 4, 10, 10),), ("conv2d",)),
    Row("conv_depthwise", lambda: torch.nn.Conv2d(4, 4, 3, padding=1, groups=4), ((1, 4, 6, 6),), ("conv2d",)),
    Row("conv_same_asymmetric", lambda: torch.nn.Conv2d(2, 3, 4, padding="same"), ((1, 2, 7, 7),), ("conv2d",)),
    Row("conv_rectangular", lambda: torch.nn.Conv2d(2, 3, (1, 3), stride=(2, 1), padding=(0, 1)), ((1, 2, 7, 5),),
        ("conv2d",)),
    Row("deconv_output_padding", lambda: torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
        ((1, 4, 5, 5),), ("deconv2d",)),
    Row("deconv_grouped", lambda: torch.nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2), ((2, 4, 3, 3),),
        ("deconv2d",)),
    # -- dense layers as 1x1 convolutions
    Row("linear", lambda: torch.nn.Linear(12, 5), ((3, 12),), ("conv2d", "reshape")),
    Row("linear_no_bias_3d", lambda: torch.nn.Linear(6, 4, bias=False), ((2, 3, 6),), ("conv2d",)),
    Row("matmul_weight", lambda: Fn(lambda m, x: x @ m.w, w=_p(6, 5)), ((4, 6),), ("conv2d",)),
    # -- normalization
    Row("batch_norm_2d", lambda: _bn(torch.nn.BatchNorm2d(5)), ((2, 5, 4, 4),), ("batchnorm",)),
    Row("batch_norm_1d", lambda: _bn(torch.nn.BatchNorm1d(6)), ((4, 6),), ("batchnorm", "reshape")),
    Row("batch_norm_1d_sequence", lambda: _bn(torch.nn.BatchNorm1d(3)), ((2, 3, 7),), ("batchnorm",)),
    # -- pooling and reductions
    Row("max_pool_ceil_pad", lambda: Fn(lambda m, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)), ((1, 2, 8, 8),),
        ("maxpool2d",)),
    Row("avg_pool", lambda: Fn(lambda m, x: F.avg_pool2d(x, 2)), ((1, 3, 6, 6),), ("avgpool2d",)),
    Row("avg_pool_count_include_pad", lambda: Fn(lambda m, x: F.avg_pool2d(x, 3, 1, 1)), ((1, 2, 5, 5),),
        ("avgpool2d", "elew")),
    Row("avg_pool_count_exclude_pad", lambda: Fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
        ((1, 2, 7, 7),), ("avgpool2d",), ("elew",)),
    Row("global_avg_pool", lambda: torch.nn.AdaptiveAvgPool2d(1), ((2, 3, 5, 4),), ("avgpool2d",)),
    Row("mean_channels", lambda: Fn(lambda m, x: x.mean(1, keepdim=True)), ((2, 3, 4, 5),), ("avgpool2d",)),
    Row("mean_3d", lambda: Fn(lambda m, x: x.mean([1, 2])), ((2, 3, 4, 5),), ("avgpool2d",)),
    Row("max_one_axis", lambda: Fn(lambda m, x: x.amax(1, keepdim=True)), ((2, 3, 4),), ("maxreduce",)),
    Row("max_spatial", lambda: Fn(lambda m, x: x.amax((2, 3), keepdim=True)), ((1, 2, 3, 5),), ("maxpool2d",)),
    Row("nearest_upsample", lambda: Fn(lambda m, x: F.interpolate(x, scale_factor=(2, 3), mode="nearest")),
        ((1, 2, 3, 4),), ("upsample",)),
    # -- activations
    Row("softmax", lambda: Fn(lambda m, x: torch.softmax(x, 1)), ((2, 7),), ("softmax",)),
    Row("softmax_last_axis", lambda: Fn(lambda m, x: torch.softmax(x, -1)), ((2, 3, 4),), ("softmax",)),
    Row("relu", lambda: torch.nn.ReLU(), ((2, 5),), ("relu",)),
    Row("sigmoid", lambda: torch.nn.Sigmoid(), ((2, 5),), ("sigmoid",)),
    Row("leaky_relu", lambda: torch.nn.LeakyReLU(0.2), ((2, 5),), ("lrelu",)),
    Row("prelu_one_slope", lambda: torch.nn.PReLU(init=0.3), ((1, 3, 4),), ("lrelu",)),
    Row("relu6", lambda: torch.nn.ReLU6(), ((2, 8),), ("relu", "elew")),
    Row("hardtanh", lambda: torch.nn.Hardtanh(-0.5, 0.25), ((2, 8),), ("elew",)),
    # -- elementwise, broadcasting made explicit
    Row("add_two_inputs", lambda: Fn(lambda m, x, y: x + y), ((2, 3, 4), (2, 3, 4)), ("elew",)),
    Row("mul_broadcast_computed", lambda: Fn(lambda m, x: x * torch.sigmoid(F.adaptive_avg_pool2d(x, 1))),
        ((1, 3, 4, 5),), ("elew", "upsample")),
    Row("add_scalar", lambda: Fn(lambda m, x: x + 1.5), ((2, 3),), ("elew",)),
    Row("sub_bias_parameter", lambda: Fn(lambda m, x: x - m.b, b=_p(3, 1, 1)), ((2, 3, 4, 4),), ("elew",)),
    Row("div_large_scalar", lambda: Fn(lambda m, x: x / 4.0), ((2, 8, 16, 16),), ("elew", "upsample")),
    Row("maximum_minimum", lambda: Fn(lambda m, x, y: torch.minimum(torch.maximum(x, y), y + 1)),
        ((3, 4), (3, 4)), ("elew",)),
    Row("pow", lambda: Fn(lambda m, x, y: torch.pow(x, y)), ((3, 4), (3, 4)), ("elew",), positive=True),
    Row("broadcast_both", lambda: Fn(lambda m, x, y: x + y), ((2, 1, 4), (2, 3, 1)), ("elew", "upsample")),
    Row("neg", lambda: Fn(lambda m, x: -x), ((2, 3),), ("elew",)),
    Row("abs", lambda: Fn(lambda m, x: torch.abs(x) + 1.0), ((2, 3),), ("elew",)),
    Row("expand", lambda: Fn(lambda m, x: x.expand(2, 3, 4) * 2.0), ((1, 3, 1),), ("upsample",)),
    Row("repeat", lambda: Fn(lambda m, x: x.repeat(1, 3, 2) + 1.0), ((2, 1, 3),), ("upsample", "concat")),
    # -- reshapes and copies
    Row("flatten", lambda: Fn(lambda m, x: torch.flatten(x, 1) * 2.0), ((2, 3, 2, 2),), ("reshape",)),
    Row("squeeze_unsqueeze", lambda: Fn(lambda m, x: torch.relu(x.squeeze(1)).unsqueeze(0)), ((2, 1, 5),),
        ("reshape",)),
    Row("permute", lambda: Fn(lambda m, x: x.permute(0, 2, 3, 1)), ((1, 2, 3, 4),), ("transpose",)),
    Row("channel_shuffle", lambda: Fn(lambda m, x: x.view(1, 2, 3, 4, 4).transpose(1, 2).reshape(1, 6, 4, 4)),
        ((1, 6, 4, 4),), ("reshape", "transpose")),
    Row("slice", lambda: Fn(lambda m, x: torch.relu(x[:, 1:3, :, 2:])), ((1, 4, 3, 5),), ("slice",)),
    Row("chunk", lambda: Fn(lambda m, x: tuple(torch.relu(c) for c in x.chunk(3, 1))), ((1, 6, 2),), ("slice",)),
    Row("concat_pairs", lambda: Fn(lambda m, x, y: torch.cat([x, torch.relu(y), x], 1)), ((1, 2, 3), (1, 3, 3)),
        ("concat",)),
    Row("concat_two", lambda: Fn(lambda m, x, y: torch.cat([x, y], 0)), ((1, 2), (3, 2)), ("concat",)),
    Row("outputs_read_by_ops", lambda: Fn(lambda m, x: _and_double(torch.relu(x))), ((2, 3),), ("forward",)),
]


def _and_double(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return y, y * 2.0


def _bn(module: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        channels = module.num_features
        module.running_mean.copy_(torch.randn(channels))
        module.running_var.copy_(torch.rand(channels) + 0.5)
        module.weight.copy_(torch.randn(channels))
        module.bias.copy_(torch.randn(channels))
    return module


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_write_rule(row: Row, tmp_path: Any) -> None:
    torch.manual_seed(0)
    module = row.make()
    inputs = [torch.rand(*shape) + 0.5 if row.positive else torch.randn(*shape) for shape in row.shapes]
    document = twin(module, inputs, tmp_path)
    found = optypes(document)
    for optype in row.ops:
        assert optype in found, (optype, found)
    for optype in row.absent:
        assert optype not in found, (optype, found)


# ---------------------------------------------------------------------------------------------- NNEF graphs
# Operations and attributes the exporter does not write (automatic padding, several softmax axes, ...), from NNEF
# text: the twin is the module nnef_torch imports from it.
@dataclass
class GraphRow:
    id: str
    body: str
    inputs: dict[str, tuple[int, ...]]
    variables: dict[str, tuple[int, ...]] = field(default_factory=dict)
    ops: tuple[str, ...] = ()
    outputs: str = "y"


GRAPH_ROWS = [
    GraphRow("conv_auto_padding", "y = conv(x, w, stride = [2, 2]);", {"x": (1, 2, 7, 8)}, {"w": (3, 2, 3, 3)},
             ("conv2d",)),
    GraphRow("conv_scalar_bias", "y = conv(x, w, 0.5, padding = [(0, 1), (2, 0)]);", {"x": (1, 2, 5, 5)},
             {"w": (3, 2, 2, 3)}, ("conv2d",)),
    GraphRow("deconv_auto_padding", "y = deconv(x, w, stride = [2, 2]);", {"x": (1, 2, 3, 4)}, {"w": (2, 3, 3, 3)},
             ("deconv2d",)),
    GraphRow("deconv_output_shape", "y = deconv(x, w, padding = [(1, 1), (0, 0)], stride = [2, 3], "
             "output_shape = [1, 3, 6, 9]);", {"x": (1, 2, 3, 3)}, {"w": (2, 3, 3, 2)}, ("deconv2d",)),
    GraphRow("separable_conv", "y = separable_conv(x, p, q, padding = [(1, 1), (1, 1)]);", {"x": (1, 2, 4, 4)},
             {"p": (2, 1, 3, 3), "q": (4, 2, 1, 1)}, ("conv2d",)),
    GraphRow("softmax_two_axes", "y = softmax(x, axes = [2, 3]);", {"x": (1, 2, 3, 4)}, ops=("softmax", "reshape")),
    GraphRow("max_pool_auto_padding", "y = max_pool(x, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], "
             "border = 'ignore');", {"x": (1, 2, 6, 7)}, ops=("maxpool2d",)),
    GraphRow("avg_pool_auto_padding_constant", "y = avg_pool(x, size = [1, 1, 3, 2], stride = [1, 1, 2, 2]);",
             {"x": (1, 2, 5, 7)}, ops=("avgpool2d", "elew")),
    GraphRow("matmul_transposed_weight", "y = matmul(x, w, transposeB = true);", {"x": (3, 4)}, {"w": (5, 4)},
             ("conv2d",)),
    GraphRow("sum_reduce", "y = sum_reduce(x, axes = [1]);", {"x": (2, 3, 4)}, ops=("avgpool2d", "elew")),
    GraphRow("batch_norm_numbers", "y = batch_normalization(x, m, v, 0.25, 2.0, epsilon = 1e-3);",
             {"x": (1, 2, 3, 3)}, {"m": (1, 2), "v": (1, 2)}, ("batchnorm",)),
    GraphRow("split_ratios", "[a, b] = split(x, axis = 1, ratios = [1, 2]);", {"x": (1, 6, 2)}, ops=("slice",),
             outputs="b, a"),
    GraphRow("transpose_leading_axes", "y = transpose(x, axes = [1, 0]);", {"x": (2, 3, 4, 5)}, ops=("transpose",)),
    GraphRow("slice_negative", "y = slice(x, axes = [1, 3], begin = [1, -3], end = [0, -1]);",
             {"x": (1, 3, 2, 5)}, ops=("slice",)),
    GraphRow("add_nnef_broadcast", "y = add(x, w);", {"x": (1, 2, 3, 3)}, {"w": (1, 2)}, ("elew",)),
    GraphRow("mul_two_broadcasts", "y = mul(x, z);", {"x": (1, 2, 1, 40), "z": (1, 1, 30, 40)}, ops=("upsample",)),
    GraphRow("copy_of_input", "y = copy(x);", {"x": (2, 3)}, ops=("forward",)),
    GraphRow("clamp_tensors", "y = clamp(x, lo, hi);", {"x": (2, 3), "lo": (2, 3), "hi": (2, 3)}, ops=("elew",)),
    GraphRow("nearest_resize_gather", "y = gather(x, i, axis = 2);", {"x": (1, 2, 4, 3)}, {"i": (6,)},
             ("resize",)),
]


def _graph_module(row: GraphRow, folder: Any) -> torch.nn.Module:
    from nnef_torch.format import container, tensor_file
    from nnef_torch.formats.lightnet.rules.tensor import nearest_indices

    lines = [f"    {name} = external<scalar>(shape = {list(shape)});" for name, shape in row.inputs.items()]
    tensors = []
    for name, shape in row.variables.items():
        kind = "integer" if name == "i" else "scalar"
        lines.append(f"    {name} = variable<{kind}>(shape = {list(shape)}, label = '{name}');")
        value = nearest_indices(4, 6).astype(np.int32) if name == "i" else \
            np.random.default_rng(3).uniform(0.5, 1.5 if name == "v" else 1.0, shape).astype(np.float32)
        tensors.append((name, tensor_file.encode(value)))
    text = (f"version 1.0;\n\ngraph G( {', '.join(row.inputs)} ) -> ( {row.outputs} )\n{{\n" + "\n".join(lines)
            + f"\n    {row.body}\n}}\n")
    container.write_model(folder / "graph", text, tensors)
    return nnef_torch.load(folder / "graph")


@pytest.mark.parametrize("row", GRAPH_ROWS, ids=[row.id for row in GRAPH_ROWS])
def test_write_rule_of_nnef_graph(row: GraphRow, tmp_path: Any) -> None:
    torch.manual_seed(0)
    module = _graph_module(row, tmp_path)
    inputs = [torch.randn(*shape) for shape in row.inputs.values()]
    module.save(tmp_path / "model.json")
    document = json.loads((tmp_path / "model.json").read_text())
    check_document(document, list(row.inputs), [name.strip() for name in row.outputs.split(",")])
    loaded = nnef_torch.load(tmp_path / "model.json", inputs=list(row.inputs))
    assert_same(loaded(*inputs), module(*inputs))
    for optype in row.ops:
        assert optype in optypes(document), (optype, optypes(document))
