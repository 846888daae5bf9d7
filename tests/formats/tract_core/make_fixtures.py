"""Regenerate the tract_core fixtures: a tiny model zoo exported with torch_to_nnef's `TractNNEF` target.

Run `python tests/formats/tract_core/make_fixtures.py` (needs torch_to_nnef and tract). The target wants a tract
binary, which it downloads; offline, a stub script that prints the version stands in (no IO check is run).
Each fixture folder holds graph.nnef, its .dat files, input.npy and output.npy (what tract computes).
"""
from __future__ import annotations

import logging
import shutil
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
TRACT_VERSION = "0.23.8"


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        return torch.softmax(self.fc(y.flatten(1)), dim=1)


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(4)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(4)
        self.head = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + x)
        return self.head(y).flatten(1)


class LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 5, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class GRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 5, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm1 = nn.LayerNorm(8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
        self.norm2 = nn.LayerNorm(8)

    def forward(self, ids):
        x = self.emb(ids)
        x = self.norm1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.norm2(x + self.ff(x))


class Gathers(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 3)
        self.register_buffer("index", torch.tensor([[2, 0, 1], [1, 3, 0]]))

    def forward(self, ids):
        e = self.emb(ids)  # (2, 4, 3)
        s = e.sum(-1)  # (2, 4)
        g = torch.gather(s, 1, (ids[:, :3] > 3).long() + 2 * self.index.clamp(max=1))
        picked = torch.index_select(s, 1, torch.tensor([3, 0]))
        mixed = torch.einsum("bij,bkj->bik", e, e).flatten(1)
        counts = (ids > 2).to(torch.float32)
        return torch.cat([g, picked, mixed, counts], dim=1)


class Positions(nn.Module):
    """Position ids from the (dynamic) sequence length: tract_core_shape_of and range."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(9, 4)
        self.pos = nn.Embedding(16, 4)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.tok(ids) + self.pos(positions)


def zoo():
    gen = torch.Generator().manual_seed(0)
    return {
        "mlp": (MLP(), torch.randn(2, 6, generator=gen)),
        "cnn": (CNN(), torch.randn(1, 3, 8, 8, generator=gen)),
        "resblock": (ResBlock(), torch.randn(1, 4, 6, 6, generator=gen)),
        "lstm": (LSTM(), torch.randn(1, 3, 4, generator=gen)),
        "gru": (GRU(), torch.randn(1, 3, 4, generator=gen)),
        "transformer": (Transformer(), torch.randint(0, 11, (1, 5), generator=gen)),
        "gathers": (Gathers(), torch.randint(0, 7, (2, 4), generator=gen)),
        "positions": (Positions(), torch.randint(0, 9, (1, 5), generator=gen)),
    }


def stub_tract(folder: Path) -> Path:
    path = folder / "tract"
    path.write_text(f"#!/bin/sh\necho tract {TRACT_VERSION}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def tract_run(folder: Path, x: np.ndarray) -> np.ndarray:
    import tract

    model = tract.nnef().with_tract_transformers().load(str(folder)).into_runnable()  # tract_core: on by default
    return model.run([x])[0].to_numpy()


def ops_of(text: str) -> Counter:
    import re

    body = text[text.index("graph "):]
    return Counter(re.findall(r"=\s*(tract_core_\w+)\s*[(<]", body))


def export(name: str, model: nn.Module, x: torch.Tensor, stub: Path) -> None:
    from torch_to_nnef import TractNNEF, export_model_to_nnef

    torch.manual_seed(1)
    for p in model.parameters():  # move batch norm statistics and biases away from their defaults
        p.data.add_(0.1 * torch.randn_like(p))
    for name_, b in model.named_buffers():
        if "running_var" in name_:
            b.data.uniform_(0.5, 1.5)
        elif "running_mean" in name_:
            b.data.normal_(0, 0.2)
    model.eval()
    target = FIXTURES / name
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        inference = TractNNEF(TRACT_VERSION, specific_tract_binary_path=stub, check_io=False,
                              dump_identity_properties=False, reify_sdpa_operator=False,
                              dynamic_axes={"input": {1: "S"}} if name == "positions" else None)
        export_model_to_nnef(model, (x,), Path(tmp) / "model.nnef", inference_target=inference,
                             input_names=["input"], output_names=["output"], compression_level=None,
                             log_level=logging.WARNING)
        shutil.copytree(Path(tmp) / "model.nnef", target)
    text = (target / "graph.nnef").read_text()
    # the properties fragment records the date and command line: drop the varying entries
    lines = [line for line in text.splitlines(True) if not any(
        key in line for key in ('"export_date"', '"export_cmd"', '"py_version"'))]
    (target / "graph.nnef").write_text("".join(lines).replace(",\n  ];", "\n  ];"))
    xn = x.numpy()
    np.save(target / "input.npy", xn)
    np.save(target / "output.npy", tract_run(target, xn))
    print(f"{name}: {dict(ops_of(text))}")


def main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    only = set(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        stub = stub_tract(Path(tmp))
        for name, (model, x) in zoo().items():
            if not only or name in only:
                export(name, model, x, stub)


if __name__ == "__main__":
    main()
