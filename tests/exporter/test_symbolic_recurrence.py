"""A recurrence over a symbolic length, for tract: nn.LSTM / nn.GRU become one `tract_core_scan` per layer.

torch's own LSTM and GRU fix the time extent while torch.export traces them (test_symbolic.py: the standard export
refuses a symbolic T). For `target="tract"` the layers are traced whole and written as a scan over a step fragment,
so the file is the same whatever the example length: tract runs it at any T, and nnef_torch reads it back at the
length of each call (its reader unrolls the scan).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.export import Dim

import nnef_torch
from exporter.consumers import close_all

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The tensor attributes .*_flat_weights.*:UserWarning"),
]

T, B = Dim("T"), Dim("B")
LENGTHS = (1, 5, 17)
LAYERS = {"lstm": nn.LSTM, "gru": nn.GRU}


class Recurrent(nn.Module):
    """A batch-first LSTM or GRU, returning every step's output."""

    def __init__(self, kind: str, layers: int):
        super().__init__()
        self.rnn = LAYERS[kind](4, 6, num_layers=layers, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class WithState(nn.Module):
    """A time-major LSTM given its initial state, returning the output and the final state; then a linear head."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 6, num_layers=2)
        self.head = nn.Linear(6, 3)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return self.head(y), h, c


def _expected(module: nn.Module, inputs: list[torch.Tensor]) -> list:
    with torch.no_grad():
        outputs = module(*inputs)
    return [o.numpy() for o in (outputs if isinstance(outputs, tuple) else (outputs,))]


def _operations(text: str) -> int:
    """The statements of the graph body."""
    body = text[text.index("\ngraph "):]
    return len(re.findall(r";\n", body))


def _check(module: nn.Module, folder: Path, make_inputs, lengths=LENGTHS) -> None:
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    runnable = tract.nnef().load(str(folder)).into_runnable()
    loaded = nnef_torch.load(folder)
    for t in lengths:
        inputs = make_inputs(t)
        expected = _expected(module, inputs)
        outputs = runnable.run([x.numpy() for x in inputs])
        close_all([outputs[i].to_numpy() for i in range(len(outputs))], expected, 1e-4, f"tract at T={t}")
        with torch.no_grad():
            found = loaded(*inputs)
        found = found if isinstance(found, tuple) else (found,)
        close_all([o.numpy() for o in found], expected, 1e-5, f"nnef_torch at T={t}")


@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("layers", [1, 2])
def test_a_recurrence_over_a_symbolic_length_is_a_scan_that_runs_at_every_length(tmp_path: Path, kind: str,
                                                                                  layers: int) -> None:
    torch.manual_seed(0)
    module = Recurrent(kind, layers).eval()
    nnef_torch.save(module, tmp_path / "rnn", torch.randn(2, 5, 4), dynamic_shapes=({1: T},), target="tract")
    text = (tmp_path / "rnn" / "graph.nnef").read_text()
    assert text.count("tract_core_scan(") == 1  # in the layer fragment, invoked once per layer
    assert text.count(f"nnef_torch_{kind}(") == 1 + layers  # its definition, and one invocation per layer
    assert f"fragment nnef_torch_{kind}_step(" in text and "external<scalar>(shape = [2, T, 4])" in text
    assert type(module.rnn) is LAYERS[kind]  # the user's module is not changed
    _check(module, tmp_path / "rnn", lambda t: [torch.randn(2, t, 4)])


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_the_scan_does_not_grow_with_the_example_length(tmp_path: Path, kind: str) -> None:
    """No step is unrolled: the file is the same whatever the example's length."""
    torch.manual_seed(0)
    module = Recurrent(kind, 2).eval()
    texts = []
    for t in (3, 11):
        nnef_torch.save(module, tmp_path / f"rnn{t}", torch.randn(2, t, 4), dynamic_shapes=({1: T},),
                        target="tract")
        texts.append((tmp_path / f"rnn{t}" / "graph.nnef").read_text())
    assert _operations(texts[0]) == _operations(texts[1])
    assert texts[0] == texts[1]


def test_an_lstm_given_its_state_over_a_symbolic_batch_and_length_returns_its_final_state(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = WithState().eval()

    def inputs(t: int, b: int = 3) -> list[torch.Tensor]:
        return [torch.randn(t, b, 4), torch.randn(2, b, 6), torch.randn(2, b, 6)]

    nnef_torch.save(module, tmp_path / "rnn", inputs(5), dynamic_shapes=({0: T, 1: B}, {1: B}, {1: B}),
                    target="tract")
    text = (tmp_path / "rnn" / "graph.nnef").read_text()
    assert "extension tract_symbol T;" in text and "extension tract_symbol B;" in text
    _check(module, tmp_path / "rnn", inputs)
    _check(module, tmp_path / "rnn", lambda t: inputs(t, 1), lengths=(4,))


def test_zero_initial_state_over_a_symbolic_batch_is_tiled(tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = Recurrent("lstm", 1).eval()
    nnef_torch.save(module, tmp_path / "rnn", torch.randn(2, 5, 4), dynamic_shapes=({0: B, 1: T},),
                    target="tract")
    assert "repeats = [1, B, 6]" in (tmp_path / "rnn" / "graph.nnef").read_text()
    _check(module, tmp_path / "rnn", lambda t: [torch.randn(t % 4 + 1, t, 4)])


def test_a_static_length_keeps_torch_s_own_recurrence(tmp_path: Path) -> None:
    """Only a length torch cannot trace symbolically takes the scan: a symbolic batch alone is exported as before."""
    module = Recurrent("lstm", 1).eval()
    text = nnef_torch.export(module, torch.randn(2, 5, 4), dynamic_shapes=({0: B},), target="tract").text
    assert "tract_core_scan" not in text
