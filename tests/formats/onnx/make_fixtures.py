"""Write the ONNX fixtures: small seeded torch modules (an MLP, a CNN with batch norm and pooling, a one-layer
transformer encoder written out by hand: torch 2.13's legacy exporter fails on nn.TransformerEncoderLayer) exported
by torch.onnx legacy (dynamo=False) at opsets 13 and 17. Run from the repository root:
`python tests/formats/onnx/make_fixtures.py`. The other areas have scripts of their own beside it, each writing a
folder of fixtures/: make_op_fixtures.py (ops/), make_recurrent_fixtures.py (recurrent/), make_quantized_fixtures.py
(quantized/), make_sequence_fixtures.py (sequences/) and make_symbolic_fixtures.py (symbolic/)."""
from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures"


class Encoder(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv, self.o = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.n1, self.n2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.f1, self.f2 = nn.Linear(width, 32), nn.Linear(32, width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, width = x.shape
        q, k, v = (t.reshape(batch, steps, self.heads, width // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(width, dim=-1))
        attention = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(width // self.heads), dim=-1)
        y = (attention @ v).transpose(1, 2).reshape(batch, steps, width)
        x = self.n1(x + self.drop(self.o(y)))
        return self.n2(x + self.f2(nn.functional.gelu(self.f1(x))))


def main() -> None:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Sigmoid())
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(4, 4, 3, stride=2), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 3), nn.Softmax(-1))
    FIXTURES.mkdir(exist_ok=True)
    for name, module, x in (("mlp", mlp, torch.randn(2, 8)), ("cnn", cnn, torch.randn(1, 3, 12, 12)),
                            ("enc", Encoder(), torch.randn(1, 5, 16))):
        module.eval()
        for opset in (13, 17):
            torch.onnx.export(module, (x,), str(FIXTURES / f"{name}{opset}.onnx"), opset_version=opset,
                              dynamo=False)


if __name__ == "__main__":
    main()
