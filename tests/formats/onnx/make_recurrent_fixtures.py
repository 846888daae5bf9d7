"""Write the ONNX fixtures of the recurrent operators: small seeded nn.LSTM, nn.GRU and nn.RNN modules (input 4,
hidden 5, sequence 6) exported by torch.onnx legacy (dynamo=False) at opsets 13 and 17, and one LSTM by the dynamo
exporter (dynamo=True, which writes one ONNX LSTM node per layer, opset 18 and up). Each module's state_dict goes to
`<case>.npz` and its constructor to `manifest.json`, so that the tests rebuild the source module. Run from the
repository root: `python tests/formats/onnx/make_recurrent_fixtures.py`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

FIXTURES = Path(__file__).parent / "fixtures" / "recurrent"
INPUT, HIDDEN, STEPS, BATCH = 4, 5, 6, 3

# case -> (torch class, constructor keywords, whether the initial states are graph inputs, opsets, dynamo exporter)
CASES: dict[str, tuple[str, dict, bool, tuple[int, ...], bool]] = {
    "lstm_2layer_bidir": ("LSTM", {"num_layers": 2, "bidirectional": True}, False, (13, 17), False),
    "lstm_batch_first_states": ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True}, True,
                                (13, 17), False),
    "lstm_1layer_states": ("LSTM", {}, True, (17,), False),
    "gru_2layer_bidir": ("GRU", {"num_layers": 2, "bidirectional": True}, False, (13, 17), False),
    "gru_batch_first_states": ("GRU", {"batch_first": True}, True, (17,), False),
    "rnn_tanh": ("RNN", {"nonlinearity": "tanh", "num_layers": 2}, False, (13, 17), False),
    "rnn_relu_bidir": ("RNN", {"nonlinearity": "relu", "bidirectional": True}, True, (13, 17), False),
    "lstm_dynamo": ("LSTM", {"num_layers": 2, "bidirectional": True}, False, (18,), True),
}


def make_module(kind: str, keywords: dict) -> nn.Module:
    return getattr(nn, kind)(INPUT, HIDDEN, **keywords)


def example_inputs(kind: str, keywords: dict, states: bool, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """x (and h0, and c0 for an LSTM, when the states are inputs), seeded."""
    generator = torch.Generator().manual_seed(seed)
    x_shape = (BATCH, STEPS, INPUT) if keywords.get("batch_first") else (STEPS, BATCH, INPUT)
    rows = keywords.get("num_layers", 1) * (2 if keywords.get("bidirectional") else 1)
    shapes = [x_shape] + ([(rows, BATCH, HIDDEN)] * (2 if kind == "LSTM" else 1) if states else [])
    return tuple(torch.randn(*shape, generator=generator) for shape in shapes)


class WithStates(nn.Module):
    """The module called with its initial states as separate inputs: forward(x, h0[, c0])."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor, *states: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y, final = self.inner(x, states if len(states) > 1 else states[0])
        return (y, *final) if isinstance(final, tuple) else (y, final)


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for index, (case, (kind, keywords, states, opsets, dynamo)) in enumerate(CASES.items()):
        torch.manual_seed(index)
        module = make_module(kind, keywords).eval()
        np.savez(FIXTURES / f"{case}.npz", **{key: value.numpy() for key, value in module.state_dict().items()})
        inputs = example_inputs(kind, keywords, states)
        exported = WithStates(module) if states else module
        files = []
        for opset in opsets:
            path = FIXTURES / f"{case}{opset}.onnx"
            if dynamo:
                torch.onnx.export(exported, inputs, str(path), opset_version=opset, dynamo=True, optimize=True,
                                  external_data=False)
            else:
                torch.onnx.export(exported, inputs, str(path), opset_version=opset, dynamo=False)
            files.append(path.name)
        manifest[case] = {"kind": kind, "keywords": keywords, "states": states, "files": files}
    (FIXTURES / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
