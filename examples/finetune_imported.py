"""Fine-tune an NNEF model in PyTorch: import it, freeze a layer, train, save it back as NNEF, and check the files.

The model is the small CNN shipped inside the package (`nnef_torch/models/tiny_cnn`: a 1x16x16 grey image in, four
class probabilities out, with graph.quant entries on the image and both ReLU outputs). It stands in for a pretrained
model someone handed you. The example
- imports it with `nnef_torch.load` and prints the generated `forward` (`model.code`);
- freezes the first convolution (`conv1.filter`, `conv1.bias`: the parameter names follow the NNEF labels);
- fine-tunes the rest on a synthetic task (which of four oriented strokes an image shows, under noise), seeded;
- saves the tuned model with `model.save` (same graph text and graph.quant, new weights), imports the files again
  and checks that they compute what the tuned module computes, and that the frozen tensors' .dat files are unchanged.

    python examples/finetune_imported.py [--out FOLDER] [--steps N]

It runs on one CPU thread in about ten seconds (6 s of CPU time on a 2-core machine, imports included) and writes
to a temporary folder unless `--out` is given.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import nnef_torch

SIZE = 16
CLASSES = 4
FROZEN = "conv1"  # the layer kept as it was imported


def packaged_model() -> Path:
    """The NNEF model folder shipped inside the package."""
    return Path(str(resources.files("nnef_torch").joinpath("models", "tiny_cnn")))


def make_images(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Strokes at 0, 45, 90 or 135 degrees at random offsets and lengths, with noise, clipped to [0, 1] (the range
    the model's graph.quant gives its input)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    angles = labels.float() * math.pi / CLASSES
    grid = torch.stack(torch.meshgrid(torch.arange(SIZE), torch.arange(SIZE), indexing="ij"), -1).float()
    centre = SIZE / 2 - 0.5 + torch.randn(count, 2, generator=generator) * 1.5
    direction = torch.stack([torch.sin(angles), torch.cos(angles)], -1)
    normal = torch.stack([-direction[:, 1], direction[:, 0]], -1)
    offset = grid[None] - centre[:, None, None]
    along = (offset * direction[:, None, None]).sum(-1)
    across = (offset * normal[:, None, None]).sum(-1)
    half_length = 3.0 + 3.0 * torch.rand(count, 1, 1, generator=generator)
    stroke = torch.exp(-across ** 2 / 1.5) * (along.abs() < half_length).float()
    images = 0.2 + 0.7 * stroke + 0.15 * torch.randn(count, SIZE, SIZE, generator=generator)
    return images.clamp(0.0, 1.0)[:, None], labels


@torch.no_grad()
def accuracy(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> float:
    images, labels = data
    return 100.0 * (model(images).argmax(1) == labels).float().mean().item()


def fine_tune(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor], steps: int, lr: float = 1e-2,
              batch: int = 64) -> list[float]:
    """Adam on the trainable parameters; the model outputs probabilities, so the loss is NLL of their log."""
    images, labels = data
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    generator = torch.Generator().manual_seed(0)
    losses = []
    model.train()
    for _ in range(steps):
        chosen = torch.randint(0, len(images), (batch,), generator=generator)
        optimizer.zero_grad()
        loss = F.nll_loss(model(images[chosen]).clamp_min(1e-8).log(), labels[chosen])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def tensor_file(folder: Path, name: str) -> Path:
    """The .dat file of a parameter: 'conv1.filter' is the variable labelled 'conv1/filter'."""
    return folder / (name.replace(".", "/") + ".dat")


def run(out: Path, steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    source = packaged_model()
    model = nnef_torch.load(source)
    print(f"imported {source}\n--- model.code ---{model.code.rstrip()}\n---")

    frozen = [name for name, _ in model.named_parameters() if name.startswith(FROZEN + ".")]
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in frozen)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    print(f"frozen: {', '.join(frozen)}; trained: {', '.join(trainable)}")

    train_data, test_data = make_images(2000, seed=1), make_images(1000, seed=2)
    before = accuracy(model, test_data)
    losses = fine_tune(model, train_data, steps)
    after = accuracy(model, test_data)
    print(f"accuracy on held-out images: {before:.1f}% before, {after:.1f}% after {steps} steps "
          f"(loss {losses[0]:.3f} -> {losses[-1]:.3f}; chance is {100 / CLASSES:.0f}%)")

    tuned_folder = out / "tuned"
    model.save(tuned_folder)
    reimported = nnef_torch.load(tuned_folder)
    with torch.no_grad():
        difference = (reimported(test_data[0]) - model(test_data[0])).abs().max().item()
    unchanged = {name: bool(np.array_equal(nnef_torch.read_tensor(tensor_file(source, name)),
                                           nnef_torch.read_tensor(tensor_file(tuned_folder, name))))
                 for name, _ in model.named_parameters()}
    print(f"saved {tuned_folder}; re-imported vs tuned module: max |diff| {difference:.3g}")
    print("unchanged .dat files: " + ", ".join(f"{name} {'yes' if same else 'no'}" for name, same in unchanged.items()))
    return {"source": source, "folder": tuned_folder, "model": model, "test_data": test_data, "frozen": frozen,
            "trainable": trainable, "accuracy_before": before, "accuracy_after": after, "losses": losses,
            "max_difference": difference, "unchanged": unchanged}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns what it measured (`folder` only outlives the call when `--out` is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the tuned model (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=150, help="fine-tuning steps (batches of 64)")
    args = parser.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, args.steps)
    with tempfile.TemporaryDirectory(prefix="nnef_finetune_") as folder:
        return run(Path(folder), args.steps)


if __name__ == "__main__":
    # tensors this small gain nothing from more threads, and on a busy machine OpenMP's idle threads spin
    torch.set_num_threads(1)
    main(sys.argv[1:])
