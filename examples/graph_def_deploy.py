"""Freeze a PyTorch model and re-batch it for deployment, with `nnef_torch.graph_def`.

The example
- turns a small CNN (convolutions, batch norm, flatten, linear) into a network with
  `graph_def.create_graph_from_module`, traced with a symbolic batch: its NNEF text holds the batch only in the
  input declaration;
- freezes it with a pass (`NetworkPass().fix_parameters()`: its generated module has no trainable parameters);
- saves it (`graph_def.save` checks that the batch is not fixed anywhere else), then loads it at the batch sizes a
  deployment wants (`graph_def.load(path, batch_size=N)`), and compares each with the torch module.

    python examples/graph_def_deploy.py [--out FOLDER] [--batches 1,8]

It runs on one CPU thread in about ten seconds (6 s of CPU time on a 2-core machine, imports included) and writes
to a temporary folder unless `--out` is given.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from nnef_torch import graph_def
from nnef_torch.graph_def import NetworkPass


def small_cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 8, 10))
    with torch.no_grad():  # statistics as a trained model would have them
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 2.0)
    return model.eval()


def run(out: Path, batches: list[int]) -> dict[str, Any]:
    module = small_cnn()
    with graph_def.graph() as graph:
        network = graph_def.create_graph_from_module("classifier", module, (torch.randn(2, 3, 16, 16),),
                                                     names={"input": "image"})
    deploy = graph.add(network.promote(NetworkPass(name="deploy").fix_parameters()))
    trainable = sum(p.numel() for p in deploy.module().parameters())
    print(f"{deploy}; trainable parameters in its module: {trainable}")
    folder = out / "deploy"
    graph_def.save(folder, deploy)
    print(f"saved {folder}; the batch appears in: "
          + "; ".join(line.strip() for line in (folder / "graph.nnef").read_text().splitlines() if "external" in line))
    differences = {}
    for batch in batches:
        loaded = graph_def.load(folder, batch_size=batch)
        x = torch.randn(batch, 3, 16, 16)
        with torch.no_grad():
            differences[batch] = (loaded(x) - module(x)).abs().max().item()
        print(f"batch {batch}: max |ours - torch| {differences[batch]:.3g}")
    return {"folder": folder, "module": module, "trainable": trainable, "differences": differences}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the example; returns what it measured (`folder` only outlives the call when `--out` is given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the model (default: a temp dir)")
    parser.add_argument("--batches", default="1,8", help="the batch sizes to load it at (default 1,8)")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        return run(args.out, batches)
    with tempfile.TemporaryDirectory(prefix="nnef_deploy_") as folder:
        return run(Path(folder), batches)


if __name__ == "__main__":
    # tensors this small gain nothing from more threads, and on a busy machine OpenMP's idle threads spin
    torch.set_num_threads(1)
    main(sys.argv[1:])
