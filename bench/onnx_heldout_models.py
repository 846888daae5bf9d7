"""The 13 held-out ONNX files of bench/bench_onnx_front_ends.py: small models of the kinds users bring, each written
by torch.onnx's legacy exporter (dynamo=False, opset 17), its dynamo exporter (dynamo=True, opset 18) or
onnxruntime's static quantization. Every maker writes one .onnx file and returns its example inputs (and, for the
dynamic-batch model, inputs at another batch). The caller seeds torch first; the modules are in eval mode.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

LEGACY_OPSET, DYNAMO_OPSET = 17, 18


def legacy(module: nn.Module, inputs: dict[str, torch.Tensor], path: Path, **options: Any) -> dict[str, Any]:
    torch.onnx.export(module, tuple(inputs.values()), str(path), dynamo=False, opset_version=LEGACY_OPSET,
                      input_names=list(inputs), output_names=["y"], **options)
    return {"inputs": {k: v.numpy() for k, v in inputs.items()}}


def dynamo(module: nn.Module, inputs: dict[str, torch.Tensor], path: Path) -> dict[str, Any]:
    torch.onnx.export(module, tuple(inputs.values()), str(path), dynamo=True, opset_version=DYNAMO_OPSET,
                      input_names=list(inputs), output_names=["y"], external_data=False)
    return {"inputs": {k: v.numpy() for k, v in inputs.items()}}


# ---------------------------------------------------------------- the modules


class BasicBlock(nn.Module):
    def __init__(self, inp: int, out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = (nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                         if stride != 1 or inp != out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def resnet() -> nn.Module:
    module = ResNetish()
    for m in module.modules():  # non-trivial batch-norm statistics, so folding them is tested
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return module.eval()


class MobileNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.Hardswish())
        self.depthwise = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.BatchNorm2d(8), nn.Hardswish())
        self.squeeze = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 4, 1), nn.ReLU(), nn.Conv2d(4, 8, 1),
                                     nn.Hardsigmoid())
        self.pointwise = nn.Sequential(nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.depthwise(x)
        y = self.pointwise(y * self.squeeze(y)) + x
        return self.head(y.mean(dim=(2, 3)))


class BiLSTMClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


class GRUClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.gru(x)[1][-1])


class LSTMTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])


class CumsumGather(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.register_buffer("positions", torch.tensor([0, 3, 6]).view(1, 3, 1).expand(1, 3, 8).contiguous())
        self.head = nn.Linear(8, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        running = torch.cumsum(self.embed(tokens), dim=1)
        return self.head(torch.gather(running, 1, self.positions))


class LoopIf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for _ in range(x.size(0)):  # a literal range(3) is unrolled by the exporter; this stays a Loop
            h = torch.tanh(self.linear(h)) + h
        if bool(h.sum() > 0):
            h = h * 2.0
        else:
            h = h - 1.0
        return h


class SplitMean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(self.linear(x), [6, 10], dim=-1)
        return torch.cat([a.mean(dim=-1), b.mean(dim=1)], dim=-1)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 4 * 4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


# ---------------------------------------------------------------- the makers


def image(size: int = 16) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(1, 3, size, size)}


def sequence() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(1, 5, 8)}


def make_transformer(path: Path) -> dict[str, Any]:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    return dynamo(layer, {"x": torch.randn(1, 6, 16)}, path)


def make_loop_if(path: Path) -> dict[str, Any]:
    return legacy(torch.jit.script(LoopIf().eval()), {"x": torch.randn(3, 6)}, path)


def make_mlp_dynamic(path: Path) -> dict[str, Any]:
    mlp = nn.Sequential(nn.Linear(10, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4)).eval()
    made = legacy(mlp, {"x": torch.randn(2, 10)}, path, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    made["other"] = {"x": torch.randn(5, 10).numpy()}
    return made


def quantized(quant_format: str, op_types: list[str] | None) -> Callable[[Path], dict[str, Any]]:
    """A maker: SmallCNN through the legacy exporter, then onnxruntime's quantize_static, per-channel."""
    def make(path: Path) -> dict[str, Any]:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        cnn = SmallCNN().eval()
        calibration = [{"x": torch.randn(1, 3, 16, 16).numpy()} for _ in range(16)]

        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                self.left = iter(calibration)

            def get_next(self) -> dict[str, np.ndarray] | None:
                return next(self.left, None)

        with tempfile.TemporaryDirectory() as tmp:
            float_path = Path(tmp, "float.onnx")
            made = legacy(cnn, image(), float_path)
            quantize_static(str(float_path), str(path), Reader(), quant_format=getattr(QuantFormat, quant_format),
                            op_types_to_quantize=op_types, per_channel=True, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8)
        return made
    return make


MAKERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "resnet_legacy": lambda path: legacy(resnet(), image(), path),
    "resnet_dynamo": lambda path: dynamo(resnet(), image(), path),
    "mobilenet_legacy": lambda path: legacy(MobileNetish().eval(), image(), path),
    "transformer_dynamo": make_transformer,
    "bilstm_legacy": lambda path: legacy(BiLSTMClassifier().eval(), sequence(), path),
    "gru_legacy": lambda path: legacy(GRUClassifier().eval(), sequence(), path),
    "lstm_dynamo": lambda path: dynamo(LSTMTagger().eval(), sequence(), path),
    "cumsum_gather_legacy": lambda path: legacy(CumsumGather().eval(), {"tokens": torch.randint(0, 20, (1, 7))},
                                                path),
    "loop_if_scripted_legacy": make_loop_if,
    "mlp_dynamic_legacy": make_mlp_dynamic,
    "split_mean_dynamo": lambda path: dynamo(SplitMean().eval(), {"x": torch.randn(2, 4, 8)}, path),
    "cnn_qdq": quantized("QDQ", None),
    "cnn_qoperator": quantized("QOperator", ["Conv", "MatMul"]),
}
