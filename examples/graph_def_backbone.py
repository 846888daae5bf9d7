"""Cut a backbone out of an NNEF model and fine-tune it under a new head, with `nnef_torch.graph_def`.

The model is the small CNN shipped inside the package (`nnef_torch/models/tiny_cnn`). The example
- loads it as a ProtoGraph and cuts its convolutional backbone with a pass: `NetworkPass().use_up_to("pooled")`
  keeps the operations up to the pooled features (16 channels) and drops the classifier;
- puts a new torch head (a linear layer for two classes) on the backbone's generated module and fine-tunes both on
  a synthetic task (are an image's stripes horizontal or vertical?), seeded;
- saves the whole graph with `graph_def.save`: the original network as graph.nnef and the backbone as
  backbone.nnef beside it, sharing one set of .dat files, which now hold the tuned convolutions;
- loads the folder again and checks that the backbone computes what the tuned one computes.

    python examples/graph_def_backbone.py [--out FOLDER] [--steps N]

It runs on one CPU thread in about ten seconds (6 s of CPU time on a 2-core machine, imports included) and writes
to a temporary folder unless `--out` is given.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from nnef_torch import graph_def
from nnef_torch.graph_def import NetworkPass

SIZE = 16


def stripes(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Images of stripes with a random period and phase, horizontal (label 0) or vertical (label 1), noisy."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (count,), generator=generator)
    period = 3.0 + 3.0 * torch.rand(count, 1, 1, generator=generator)
    phase = 6.3 * torch.rand(count, 1, 1, generator=generator)
    rows, columns = torch.meshgrid(torch.arange(SIZE).float(), torch.arange(SIZE).float(), indexing="ij")
    along = torch.where(labels[:, None, None] == 0, rows[None], columns[None])
    images = 0.5 + 0.4 * torch.sin(2 * torch.pi * along / period + phase)
    images = images + 0.1 * torch.randn(count, SIZE, SIZE, generator=generator)
    return images.clamp(0.0, 1.0)[:, None], labels


class Classifier(torch.nn.Module):
    """The backbone's generated module, then a new linear head."""

    def __init__(self, backbone: torch.nn.Module, channels: int, classes: int):
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Linear(channels, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(images).flatten(1))


@torch.no_grad()
def accuracy(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> float:
    images, labels = data
    return 100.0 * (model(images).argmax(1) == labels).float().mean().item()


def run(out: Path, steps: int) -> dict[str, Any]:
    torch.manual_seed(0)
    source = Path(str(resources.files("nnef_torch").joinpath("models", "tiny_cnn")))
    graph = graph_def.load(source)
    network = graph.default_graph()
    backbone = graph.add(network.promote(NetworkPass(name="backbone").use_up_to("pooled")))
    print(f"{network}\n{backbone}: functions {', '.join(backbone.functions)}")

    features = backbone.module()
    channels = backbone.variables["pooled"].shape[1]
    model = Classifier(features, channels, 2)
    train_data, test_data = stripes(2000, seed=1), stripes(500, seed=2)
    before = accuracy(model, test_data)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        chosen = torch.randint(0, len(train_data[0]), (64,), generator=generator)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_data[0][chosen]), train_data[1][chosen])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    after = accuracy(model, test_data)
    print(f"accuracy on held-out images: {before:.1f}% before, {after:.1f}% after {steps} steps "
          f"(loss {losses[0]:.3f} -> {losses[-1]:.3f})")

    folder = out / "tuned"
    graph_def.save(folder, graph)
    again = graph_def.load(folder)
    with torch.no_grad():
        difference = (again.backbone(test_data[0]) - features(test_data[0])).abs().max().item()
    shared = network.module().conv1.filter is features.conv1.filter
    print(f"saved {folder}: {', '.join(sorted(p.name for p in folder.iterdir()))}; reloaded backbone vs tuned: "
          f"max |diff| {difference:.3g}; the original network holds the tuned filters: {shared}")
    return {"graph": graph, "folder": folder, "model": model, "test_data": test_data, "accuracy_before": before,
            "accuracy_after": after, "losses": losses, "max_difference": difference, "shared": shared}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns what it measured (`folder` only outlives the call when `--out` is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the model (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=120, help="fine-tuning steps (batches of 64)")
    args = parser.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, args.steps)
    with tempfile.TemporaryDirectory(prefix="nnef_backbone_") as folder:
        return run(Path(folder), args.steps)


if __name__ == "__main__":
    # tensors this small gain nothing from more threads, and on a busy machine OpenMP's idle threads spin
    torch.set_num_threads(1)
    main(sys.argv[1:])
