"""Write the ONNX fixtures of symbolic extents (dim_param) under fixtures/symbolic/: rerun with
`python tests/formats/onnx/make_symbolic_fixtures.py` (seeded; needs torch, onnx and onnxscript for dynamo=True).

- mlp_batch.onnx: an MLP, input 'x' of shape [batch, 6] (TorchScript exporter, dynamic_axes);
- cnn_N.onnx: a small CNN, input 'x' of shape [N, 3, 8, 8] (TorchScript exporter, dynamic_axes);
- attention_seq.onnx: a self-attention block, input 'x' of shape [batch, seq, 8] (TorchScript exporter);
- attention_batch.onnx: the same block, input 'x' of shape [batch, 5, 8];
- mlp_dynamo.onnx: the MLP through the dynamo exporter, with dynamic_shapes (a Dim named 'batch').
"""
from __future__ import annotations

import math
from pathlib import Path

import torch

OUT = Path(__file__).parent / "fixtures" / "symbolic"
OPSET = 17


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(torch.flatten(x, 1))


class Attention(torch.nn.Module):
    """Two-head self-attention over [batch, seq, 8], with a residual and a layer norm."""

    def __init__(self, width: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).reshape(batch, seq, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(width // self.heads), dim=-1)
        mixed = (scores @ v).transpose(1, 2).reshape(batch, seq, width)
        return self.norm(x + self.out(mixed))


def _export(module: torch.nn.Module, example: torch.Tensor, name: str, axes: dict[int, str]) -> None:
    torch.onnx.export(module, (example,), str(OUT / name), input_names=["x"], output_names=["y"], opset_version=OPSET,
                      dynamic_axes={"x": axes, "y": {0: axes[0]}}, dynamo=False)


def _export_dynamo(module: torch.nn.Module, example: torch.Tensor, name: str) -> None:
    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.onnx.export(module, (example,), input_names=["x"], output_names=["y"], opset_version=18,
                                dynamic_shapes={"x": {0: batch}}, dynamo=True, external_data=False)
    program.save(str(OUT / name), external_data=False)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    mlp, cnn, attention = MLP().eval(), CNN().eval(), Attention().eval()
    _export(mlp, torch.randn(2, 6), "mlp_batch.onnx", {0: "batch"})
    _export(cnn, torch.randn(2, 3, 8, 8), "cnn_N.onnx", {0: "N"})
    _export(attention, torch.randn(2, 5, 8), "attention_seq.onnx", {0: "batch", 1: "seq"})
    _export(attention, torch.randn(2, 5, 8), "attention_batch.onnx", {0: "batch"})
    _export_dynamo(mlp, torch.randn(2, 6), "mlp_dynamo.onnx")
    for path in sorted(OUT.glob("*.onnx")):
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
