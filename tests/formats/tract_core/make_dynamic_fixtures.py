"""Regenerate the dynamic tract_core fixtures: small seeded modules exported with torch_to_nnef's `TractNNEF`
target and `dynamic_axes`, so that their graph.nnef declares tract symbols (`extension tract_symbol S;`).

Run `python tests/formats/tract_core/make_dynamic_fixtures.py [name ...]` (needs torch_to_nnef; tract, when
installed, checks each export at its example sizes). The target wants a tract binary, which it downloads; offline,
a stub script that prints the version stands in (no IO check is run). Running it twice writes the same bytes (it
runs itself again with PYTHONHASHSEED=0: torch_to_nnef numbers some tensor names in set order).

Each fixture folder (fixtures/dynamic/<name>/) holds only graph.nnef and its .dat files: the tests make inputs
at the sizes they choose and compare with tract running the same folder and with the module that `build(name)`
makes again from its seed (test_dynamic_fixtures.py imports this file for that; torch_to_nnef is imported only
when exporting).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import shutil
import stat
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "dynamic"
TRACT_VERSION = "0.23.8"
MAX_BYTES = 50_000  # each fixture folder stays under this


class MLP(nn.Module):
    """[B, 16] -> [B, 8]."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 24), nn.GELU(), nn.LayerNorm(24), nn.Linear(24, 8), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class CausalConv1d(nn.Module):
    """[1, 4, T] -> [1, 6, T]: two dilated convolutions, each input prefixed along T with a zero context (as a
    streaming convolution's cache), so output t sees inputs <= t."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3)
        self.c2 = nn.Conv1d(8, 6, 3, dilation=2)
        self.register_buffer("context1", torch.zeros(1, 4, 2))
        self.register_buffer("context2", torch.zeros(1, 8, 4))

    def forward(self, x):
        y = torch.relu(self.c1(torch.cat([self.context1, x], dim=2)))
        return self.c2(torch.cat([self.context2, y], dim=2)) + x.mean(1, keepdim=True)


class CausalConv1dPad(CausalConv1d):
    """CausalConv1d with the left context written as `F.pad` (torch_to_nnef writes `pad` with nested arrays)."""

    def forward(self, x):
        y = torch.relu(self.c1(F.pad(x, (2, 0))))
        return self.c2(F.pad(y, (4, 0))) + x.mean(1, keepdim=True)


class CausalConv1dSlice(CausalConv1d):
    """CausalConv1d padded on both sides, the right-hand outputs cut off (torch_to_nnef writes its `dyn_slice`
    fragment for a slice of a dynamic axis)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 3, padding=2)
        self.c2 = nn.Conv1d(8, 6, 3, dilation=2, padding=4)

    def forward(self, x):
        y = torch.relu(self.c1(x)[..., :-2])
        return self.c2(y)[..., :-4] + x.mean(1, keepdim=True)


class Attention(nn.Module):
    """[1, S, 16] -> [1, S, 16]: two heads (reshaped with -1 for S), an additive causal mask from
    `arange(S)`, a residual and a norm."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(1, -1, 2, 8).transpose(1, 2) for t in (q, k, v))
        pos = torch.arange(x.shape[1])
        mask = (pos[None, :] > pos[:, None]).to(x.dtype) * -1e9
        scores = q @ k.transpose(-1, -2) / math.sqrt(8) + mask
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(1, -1, 16)
        return self.norm(x + self.out(y))


class AttentionShapeOf(Attention):
    """Attention with the heads reshaped to `x.shape` and the mask applied by `masked_fill` (torch_to_nnef writes
    reshape with a tensor in its shape and tile with tensor repeats)."""

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, 2, 8).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(8)
        pos = torch.arange(s)
        scores = scores.masked_fill(pos[None, :] > pos[:, None], -1e9)
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 16)
        return self.norm(x + self.out(y))


class CNN2d(nn.Module):
    """[1, 3, H, W] -> [1, 6]: convolutions, batch norm, pooling, a strided convolution and a global mean."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 6, 3, stride=2, padding=1)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        return torch.relu(self.c2(y)).mean((2, 3))


class TwoInputs(nn.Module):
    """x [B, T, 8] and y [B, T, 4] (symbols B and T shared by both) -> [B, T, 6]: gated mix of the two."""

    def __init__(self):
        super().__init__()
        self.fx = nn.Linear(8, 6)
        self.fy = nn.Linear(4, 6)
        self.gate = nn.Linear(12, 6)

    def forward(self, x, y):
        a, b = self.fx(x), self.fy(y)
        g = torch.sigmoid(self.gate(torch.cat([x, y], dim=-1)))
        return g * a + (1 - g) * b


@dataclasses.dataclass(frozen=True)
class Spec:
    """One fixture: its module, inputs (name -> shape, a symbol name where the axis is dynamic), the symbols'
    values in the example given to torch_to_nnef, and the seed the weights are drawn from."""

    module: type[nn.Module]
    inputs: dict[str, tuple[int | str, ...]]
    example: dict[str, int]
    seed: int


SPECS = {
    "mlp": Spec(MLP, {"x": ("B", 16)}, {"B": 2}, 11),
    "causal_conv1d": Spec(CausalConv1d, {"x": (1, 4, "T")}, {"T": 10}, 12),
    "causal_conv1d_pad": Spec(CausalConv1dPad, {"x": (1, 4, "T")}, {"T": 10}, 12),
    "causal_conv1d_slice": Spec(CausalConv1dSlice, {"x": (1, 4, "T")}, {"T": 10}, 12),
    "attention": Spec(Attention, {"x": (1, "S", 16)}, {"S": 5}, 13),
    "attention_shape_of": Spec(AttentionShapeOf, {"x": (1, "S", 16)}, {"S": 5}, 13),
    "cnn2d": Spec(CNN2d, {"x": (1, 3, "H", "W")}, {"H": 8, "W": 12}, 14),
    "two_inputs": Spec(TwoInputs, {"x": ("B", "T", 8), "y": ("B", "T", 4)}, {"B": 2, "T": 3}, 15),
}
OUTPUT = "output"


def build(name: str) -> nn.Module:
    """The fixture's module, in eval mode, with the weights drawn from its seed (the same ones every time)."""
    spec = SPECS[name]
    torch.manual_seed(spec.seed)
    model = spec.module()
    gen = torch.Generator().manual_seed(spec.seed + 1000)
    with torch.no_grad():
        for p in model.parameters():  # norm weights and biases off their defaults too
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
        for buffer_name, b in model.named_buffers():
            if buffer_name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
            elif buffer_name.endswith("running_mean"):
                b.copy_(0.2 * torch.randn(b.shape, generator=gen))
    return model.eval()


def shapes(name: str, values: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Each input's shape with the symbols at `values`."""
    return {inp: tuple(values[d] if isinstance(d, str) else d for d in dims)
            for inp, dims in SPECS[name].inputs.items()}


def inputs(name: str, values: dict[str, int], seed: int = 0) -> dict[str, torch.Tensor]:
    """Seeded float inputs of the fixture at the symbols' `values`."""
    gen = torch.Generator().manual_seed(seed)
    return {inp: torch.randn(shape, generator=gen) for inp, shape in shapes(name, values).items()}


def dynamic_axes(name: str) -> dict[str, dict[int, str]]:
    return {inp: {axis: d for axis, d in enumerate(dims) if isinstance(d, str)}
            for inp, dims in SPECS[name].inputs.items()}


def operations(text: str) -> Counter:
    """How many times the graph body invokes each operation."""
    body = text[text.index("graph "):]
    return Counter(re.findall(r"=\s*([A-Za-z_]\w*)\s*[(<]", body))


def stub_tract(folder: Path) -> Path:
    path = folder / "tract"
    path.write_text(f"#!/bin/sh\necho tract {TRACT_VERSION}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _stable(text: str) -> str:
    """graph.nnef without the entries that change from run to run or with unrelated packages (date, command line,
    Python and transformers versions)."""
    lines = [line for line in text.splitlines(True) if not any(
        key in line for key in ('"export_date"', '"export_cmd"', '"py_version"', '"transformers_version"'))]
    return "".join(lines).replace(",\n  ];", "\n  ];")


def export(name: str, stub: Path) -> Counter:
    from torch_to_nnef import TractNNEF, export_model_to_nnef

    spec = SPECS[name]
    model = build(name)
    args = tuple(inputs(name, spec.example).values())
    target = FIXTURES / name
    with tempfile.TemporaryDirectory() as tmp:
        inference = TractNNEF(TRACT_VERSION, specific_tract_binary_path=stub, check_io=False,
                              dump_identity_properties=False, reify_sdpa_operator=False,
                              dynamic_axes=dynamic_axes(name))
        export_model_to_nnef(model, args, Path(tmp) / "model.nnef", inference_target=inference,
                             input_names=list(spec.inputs), output_names=[OUTPUT], compression_level=None,
                             log_level=logging.WARNING)
        made = Path(tmp) / "model.nnef"
        graph = made / "graph.nnef"
        graph.write_text(_stable(graph.read_text()))
        size = sum(f.stat().st_size for f in made.iterdir())
        if size > MAX_BYTES:
            raise SystemExit(f"{name}: {size} bytes, over {MAX_BYTES}")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(made, target)
    _check_with_tract(name, target, model, args)
    return operations((target / "graph.nnef").read_text())


def _check_with_tract(name: str, folder: Path, model: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
    """tract reads the export and agrees with torch at the example sizes (skipped when tract is absent)."""
    try:
        import tract
    except ImportError:
        return
    ran = tract.nnef().load(str(folder)).into_runnable().run(
        [a.numpy() for a in args])[0].to_numpy()
    with torch.no_grad():
        expected = model(*args)
    if not torch.allclose(torch.from_numpy(ran), expected, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"{name}: tract differs from torch at the example sizes")


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    unknown = only - set(SPECS)
    if unknown:
        raise SystemExit(f"unknown fixtures {sorted(unknown)}; known: {sorted(SPECS)}")
    with tempfile.TemporaryDirectory() as tmp:
        stub = stub_tract(Path(tmp))
        for name in SPECS:
            if not only or name in only:
                print(f"{name}: {dict(sorted(export(name, stub).items()))}")


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # torch_to_nnef names some tensors in set order: fix the hash seed
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    main()
