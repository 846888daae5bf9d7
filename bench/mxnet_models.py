"""The MXNet model of bench/bench_mxnet.py: Gluon's ResNet-50 v1 as MXNet exports it, with a `.params` file written
from seeded arrays, and its hand-written torch twin.

    symbol, params, twin = write_resnet50(folder, seed=0)   # folder/resnet50_v1-symbol.json, -0000.params; the twin
    module = nnef_torch.load(symbol, params=params, input_shapes={"data": [1, 3, 224, 224]})

The symbol is bench/data/resnet50_v1-symbol.json.gz (made by MXNet: bench/make_mxnet_resnet50.py). Its parameters
are drawn here by `mxnet_params.seeded_params`, for the names and shapes of the twin, which checks them against the
symbol's argument nodes, and written with `mxnet_params.write_ndarray_list` (what `mx.nd.save` writes, `arg:` and
`aux:` prefixes); the twin gets the same arrays by name. No MXNet is needed.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F
from mxnet_params import seeded_params, write_ndarray_list
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
NET = "resnet50_v1"
SYMBOL_GZ = os.path.join(HERE, "data", f"{NET}-symbol.json.gz")
PREFIX = "resnetv10_"  # Gluon's name scope of the first ResNetV1 of a process
EPSILON = 1e-5  # Gluon's BatchNorm default
LAYERS = (3, 4, 6, 3)  # resnet_spec[50]
CHANNELS = (64, 256, 512, 1024, 2048)
AUX_SUFFIXES = ("_running_mean", "_running_var")  # Gluon BatchNorm's aux states


class BottleneckV1(nn.Module):
    """Gluon's BottleneckV1. Unlike torchvision's ResNet-50 (v1.5: stride on the 3x3 convolution), Gluon puts the
    stride on the first 1x1 convolution; the two 1x1 convolutions of the body have biases (Gluon's Conv2D default),
    the 3x3 one and the downsample's 1x1 do not. Modules are registered in Gluon's creation order (body conv0, bn0,
    conv1, bn1, conv2, bn2, then the downsample's conv and bn), which `gluon_names` relies on."""

    def __init__(self, in_channels: int, channels: int, stride: int, downsample: bool):
        super().__init__()
        mid = channels // 4
        self.conv0 = nn.Conv2d(in_channels, mid, 1, stride=stride, bias=True)
        self.bn0 = nn.BatchNorm2d(mid, eps=EPSILON)
        self.conv1 = nn.Conv2d(mid, mid, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid, eps=EPSILON)
        self.conv2 = nn.Conv2d(mid, channels, 1, bias=True)
        self.bn2 = nn.BatchNorm2d(channels, eps=EPSILON)
        self.down_conv = nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False) if downsample else None
        self.down_bn = nn.BatchNorm2d(channels, eps=EPSILON) if downsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn0(self.conv0(x)))
        y = F.relu(self.bn1(self.conv1(y)))
        y = self.bn2(self.conv2(y))
        residual = self.down_bn(self.down_conv(x)) if self.down_conv is not None else x
        return F.relu(y + residual)


class GluonResNet50V1(nn.Module):
    """Gluon's `resnet50_v1` (ResNetV1 with BottleneckV1 blocks [3, 4, 6, 3]) written by hand in torch: 7x7/2 stem
    convolution without bias, BatchNorm, relu, 3x3/2 max pooling (padding 1), four stages (the first block of each
    downsamples; stride 2 from stage 2 on), global average pooling, a dense layer. Use it in eval mode."""

    def __init__(self, classes: int = 1000):
        super().__init__()
        self.conv0 = nn.Conv2d(3, CHANNELS[0], 7, stride=2, padding=3, bias=False)
        self.bn0 = nn.BatchNorm2d(CHANNELS[0], eps=EPSILON)
        stages = []
        for i, count in enumerate(LAYERS):
            stride = 1 if i == 0 else 2
            blocks = [BottleneckV1(CHANNELS[i], CHANNELS[i + 1], stride, CHANNELS[i + 1] != CHANNELS[i])]
            blocks += [BottleneckV1(CHANNELS[i + 1], CHANNELS[i + 1], 1, False) for _ in range(count - 1)]
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.dense = nn.Linear(CHANNELS[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn0(self.conv0(x)))
        x = F.max_pool2d(x, 3, 2, 1)
        x = self.stages(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.dense(x)

    def gluon_names(self) -> dict[str, str]:
        """Gluon's name of every parameter and running statistic -> its key in this module's state_dict."""
        names: dict[str, str] = {}

        def add(gluon: str, module: nn.Module, key: str) -> None:
            if isinstance(module, nn.Conv2d | nn.Linear):
                pairs = [("weight", "weight")] + ([("bias", "bias")] if module.bias is not None else [])
            else:
                pairs = [("gamma", "weight"), ("beta", "bias"), ("running_mean", "running_mean"),
                         ("running_var", "running_var")]
            names.update({f"{gluon}_{suffix}": f"{key}.{attribute}" for suffix, attribute in pairs})

        add(f"{PREFIX}conv0", self.conv0, "conv0")
        add(f"{PREFIX}batchnorm0", self.bn0, "bn0")
        for i, stage in enumerate(self.stages):
            convs = bns = 0  # Gluon counts layers per name scope: one per stage
            for key, module in stage.named_modules():
                if isinstance(module, nn.Conv2d):
                    add(f"{PREFIX}stage{i + 1}_conv{convs}", module, f"stages.{i}.{key}")
                    convs += 1
                elif isinstance(module, nn.BatchNorm2d):
                    add(f"{PREFIX}stage{i + 1}_batchnorm{bns}", module, f"stages.{i}.{key}")
                    bns += 1
        add(f"{PREFIX}dense0", self.dense, "dense")
        return names

    @torch.no_grad()
    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Copy the arrays (Gluon names, with or without `arg:` / `aux:` prefixes) into this module, by name."""
        bare = {name.split(":", 1)[-1]: array for name, array in arrays.items()}
        state = self.state_dict(keep_vars=True)
        names = self.gluon_names()
        if set(bare) != set(names):
            raise ValueError(f"arrays and the twin's names differ: {sorted(set(bare) ^ set(names))[:8]}")
        for gluon, key in names.items():
            state[key].copy_(torch.from_numpy(bare[gluon]))


def symbol_arguments(symbol: str) -> list[str]:
    """The names of the symbol's argument nodes (op 'null'), in node order."""
    with open(symbol, encoding="utf-8") as handle:
        graph = json.load(handle)
    return [graph["nodes"][i]["name"] for i in graph["arg_nodes"]]


def write_resnet50(folder: str, seed: int = 0) -> tuple[str, str, GluonResNet50V1]:
    """Write `folder`/resnet50_v1-symbol.json and a seeded -0000.params; return their paths and the twin holding the
    same arrays (eval mode)."""
    os.makedirs(folder, exist_ok=True)
    symbol = os.path.join(folder, f"{NET}-symbol.json")
    params = os.path.join(folder, f"{NET}-0000.params")
    with gzip.open(SYMBOL_GZ, "rb") as source, open(symbol, "wb") as target:
        shutil.copyfileobj(source, target)
    twin = GluonResNet50V1()
    names = twin.gluon_names()
    arguments = [name for name in symbol_arguments(symbol) if name != "data"]
    if set(arguments) != set(names):
        raise ValueError(f"the twin's names and the symbol's arguments differ: {sorted(set(arguments) ^ set(names))}")
    state = twin.state_dict()
    shapes = {name: tuple(state[names[name]].shape) for name in arguments}  # the symbol's order
    arrays = seeded_params(shapes, {name for name in arguments if name.endswith(AUX_SUFFIXES)}, seed)
    write_ndarray_list(params, arrays)
    twin.load_arrays(arrays)
    return symbol, params, twin.eval()
