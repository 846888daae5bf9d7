"""Quantization-aware training to graph.quant, end to end, on a CPU in under a minute.

A small CNN learns a synthetic image task (which of four oriented strokes an image shows, under noise). It is then
prepared for 8-bit quantization (per-channel signed weights, unsigned activations), calibrated on a few batches,
fine-tuned with fake quantization (QAT), exported as NNEF (graph.nnef + graph.quant + 8-bit weight codes) and
imported again. The same run at 4 bits shows what fewer bits cost. It runs on one CPU thread: about 15 s of CPU time
on a 2-core machine, imports included.

    python examples/qat_to_graph_quant.py [--out FOLDER] [--epochs N]
"""
from __future__ import annotations

import argparse
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import nnef_torch
from nnef_torch.quant import QuantConfig, calibrate, prepare

SIZE = 16
CLASSES = 4


def make_images(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Strokes at 0, 45, 90 or 135 degrees, at random offsets and lengths, with Gaussian noise."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    angles = labels.float() * math.pi / CLASSES
    grid = torch.stack(torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij"), -1).float()
    centre = SIZE / 2 - 0.5 + torch.randn(count, 2, generator=generator) * 1.5
    direction = torch.stack([torch.sin(angles), torch.cos(angles)], -1)
    offset = grid[None] - centre[:, None, None]
    along = (offset * direction[:, None, None]).sum(-1)
    across = (offset * torch.stack([-direction[:, 1], direction[:, 0]], -1)[:, None, None]).sum(-1)
    half_length = 3.0 + 3.0 * torch.rand(count, 1, 1, generator=generator)
    stroke = torch.exp(-across ** 2 / 1.5) * (along.abs() < half_length).float()
    images = stroke + 0.6 * torch.randn(count, SIZE, SIZE, generator=generator)
    return images[:, None], labels


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * (SIZE // 4) ** 2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def train(model: nn.Module, data: tuple[torch.Tensor, torch.Tensor], epochs: int, lr: float) -> None:
    images, labels = data
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), generator=torch.Generator().manual_seed(len(images) + epochs))
        for batch in order.split(64):
            optimizer.zero_grad()
            F.cross_entropy(model(images[batch]), labels[batch]).backward()
            optimizer.step()
    model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> float:
    images, labels = data
    return 100.0 * (model(images).argmax(1) == labels).float().mean().item()


@dataclass
class Result:
    bits: int
    float_accuracy: float
    calibrated_accuracy: float
    qat_accuracy: float
    reimported_accuracy: float  # the NNEF export (float weights) imported again
    max_output_difference: float  # between the QAT model and that re-imported export
    codes_accuracy: float  # the export with 8-bit (or `bits`) weight codes and 32-bit biases, imported again
    folder: Path  # the export with weight codes, for an accelerator


def quantize(model: nn.Module, bits: int, train_data, test_data, qat_epochs: int, folder: Path,
             config: QuantConfig | None = None) -> tuple[Result, nn.Module]:
    prepared = prepare(model, config or QuantConfig(bits=bits))
    calibrate(prepared, (train_data[0][i:i + 64] for i in range(0, 512, 64)))
    calibrated = accuracy(prepared, test_data)
    train(prepared, train_data, qat_epochs, lr=1e-3)
    example = (test_data[0][:1],)
    nnef_torch.save(prepared, folder.with_name(folder.name + "_float"), example)
    reimported = nnef_torch.load(folder.with_name(folder.name + "_float"))
    nnef_torch.save(prepared, folder, example, quantization={"weights": "quantized"})
    with torch.no_grad():
        difference = (reimported(test_data[0]) - prepared(test_data[0])).abs().max().item()
    result = Result(bits, accuracy(model, test_data), calibrated, accuracy(prepared, test_data),
                    accuracy(reimported, test_data), difference, accuracy(nnef_torch.load(folder), test_data), folder)
    return result, prepared


def main(out: Path, epochs: int = 6, qat_epochs: int = 2, train_count: int = 4000, test_count: int = 2000,
         bit_widths: tuple[int, ...] = (8, 4)) -> list[Result]:
    torch.manual_seed(0)
    train_data, test_data = make_images(train_count, seed=1), make_images(test_count, seed=2)
    model = SmallCNN()
    train(model, train_data, epochs, lr=3e-3)
    return [quantize(model, bits, train_data, test_data, qat_epochs, out / f"cnn_{bits}bit")[0] for bits in bit_widths]


if __name__ == "__main__":
    # tensors this small gain nothing from more threads, and on a busy machine OpenMP's idle threads spin
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the NNEF models (default: a temp dir)")
    parser.add_argument("--epochs", type=int, default=6, help="float training epochs")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="nnef_qat_"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{'bits':>4} {'float %':>8} {'calibrated %':>13} {'QAT %':>7} {'re-imported %':>14} {'max |diff|':>11} "
          f"{'with codes %':>13}")
    for result in main(out, epochs=args.epochs):
        print(f"{result.bits:>4} {result.float_accuracy:>8.2f} {result.calibrated_accuracy:>13.2f} "
              f"{result.qat_accuracy:>7.2f} {result.reimported_accuracy:>14.2f} {result.max_output_difference:>11.2e} "
              f"{result.codes_accuracy:>13.2f}   {result.folder}")
