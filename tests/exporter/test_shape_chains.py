"""Chains of shape operations on computed tensors are exported as the one operation they amount to
(nnef_torch/exporter/shape_chains.py). Each module below makes torch trace a chain; the export must hold the merged
operation only (counted by the Khronos parser, nothing lowered), and the Khronos executor and tract must still
reproduce torch's output."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch import nn

import nnef_torch
from exporter.consumers import close_all, khronos_parse, run_khronos, run_tract

pytestmark = pytest.mark.slow


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _heads(x):  # torch.nn.MultiheadAttention's packed projection: q, k, v out of one [.., 3, E] view
    q, k, v = x.unflatten(-1, (3, 4)).unsqueeze(0).transpose(0, -2).squeeze(-2)
    return q * k + v


def _select_all(y):  # y[:, 0] + y[:, 1] + y[:, 2]: one select per index of axis 1
    return y[:, 0] + y[:, 1] * 2 + y[:, 2] * 3


CASES = [
    # (name, function, input shape, operations expected by kind (Counter subset), kinds that must be absent)
    ("view_of_view", lambda x: (x.view(6, 4) * 2).view(2, 3, 4).view(6, 2, 2) + 1, (2, 12),
     {"reshape": 2}, ()),
    ("unsqueeze_then_flatten", lambda x: torch.relu(x).unsqueeze(1).flatten(0, 1), (3, 5),
     {}, ("reshape", "unsqueeze")),
    ("transpose_of_transpose", lambda x: torch.relu(x).transpose(1, 2).permute(2, 0, 1), (2, 3, 4),
     {"transpose": 1}, ()),
    ("transposes_that_cancel", lambda x: torch.relu(x).transpose(0, 1).transpose(0, 1) * 3, (2, 3),
     {}, ("transpose",)),
    ("unbind_after_unsqueezed_transpose", _heads, (2, 5, 12), {"unstack": 1, "transpose": 1},
     ("squeeze", "slice", "unsqueeze")),
    ("select_every_index", lambda x: _select_all(torch.relu(x)), (4, 3, 2),
     {"unstack": 1}, ("slice", "squeeze")),
]


def _counts(folder: Path) -> Counter:
    graph = khronos_parse(folder)
    return Counter(op.name for op in graph.operations if op.name not in ("external", "variable"))


@pytest.mark.parametrize("name, fn, shape, expected, absent", CASES, ids=[case[0] for case in CASES])
@pytest.mark.parametrize("target", ["standard", "tract"])
def test_chain_is_one_operation(name, fn, shape, expected, absent, target, tmp_path: Path) -> None:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    module = Fn(fn)
    with torch.no_grad():
        wanted = [module(x).numpy()]
    nnef_torch.export(module, (x,), target=target).save(tmp_path / "model")
    if target == "standard":
        counts = _counts(tmp_path / "model")
        for kind, count in expected.items():
            assert counts[kind] == count, f"{kind}: {counts[kind]} written, {count} expected ({dict(counts)})"
        assert not [kind for kind in absent if counts[kind]], f"left in the graph: {dict(counts)}"
        close_all(run_khronos(tmp_path / "model", [x.numpy()]), wanted, 1e-5, "nnef.Session")
    else:
        text = (tmp_path / "model" / "graph.nnef").read_text()
        assert not [kind for kind in absent if f"= {kind}(" in text], text
    close_all(run_tract(tmp_path / "model", [x.numpy()]) if target == "standard" else _tract(tmp_path / "model", x),
              wanted, 1e-5, "tract")


def _tract(folder: Path, x: torch.Tensor) -> list:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    outputs = tract.nnef().load(str(folder)).into_runnable().run([x.numpy()])
    return [outputs[i].to_numpy() for i in range(len(outputs))]


def test_a_chain_whose_middle_is_read_elsewhere_stays(tmp_path: Path) -> None:
    """The intermediate tensor has a second reader: both operations stay, and the result is still right."""
    def fn(x):
        middle = torch.relu(x).view(6, 4)
        return middle.view(2, 12) + middle.sum()
    x = torch.randn(2, 3, 4)
    nnef_torch.export(Fn(fn), (x,)).save(tmp_path / "model")
    assert _counts(tmp_path / "model")["reshape"] == 2
    close_all(run_khronos(tmp_path / "model", [x.numpy()]), [fn(x).numpy()], 1e-5)


def test_an_output_in_the_middle_of_a_chain_keeps_its_name(tmp_path: Path) -> None:
    class TwoOutputs(nn.Module):
        def forward(self, x):
            middle = torch.relu(x).view(6, 4)
            return middle, middle.view(24)
    x = torch.randn(2, 3, 4)
    model = nnef_torch.export(TwoOutputs(), (x,), output_names=["middle", "flat"])
    model.save(tmp_path / "model")
    found = run_khronos(tmp_path / "model", [x.numpy()])
    close_all(found, [t.numpy() for t in TwoOutputs()(x)], 1e-5)
    assert khronos_parse(tmp_path / "model").outputs == ["middle", "flat"]
