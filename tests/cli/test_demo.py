"""`demo` end to end in a subprocess, as a user runs it: import, fine-tune, export, check, re-import."""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

from exporter.consumers import khronos_parse


def test_demo_runs_as_a_module(tmp_path):
    out = tmp_path / "tuned"
    result = subprocess.run([sys.executable, "-m", "nnef_torch", "demo", "--out", str(out)], capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "tiny_cnn" in text and "quantized tensors: 3" in text
    assert "def forward(self, image):" in text
    loss = re.search(r"loss +([\d.]+) -> ([\d.]+)", text)
    accuracy = re.search(r"accuracy +([\d.]+)% -> ([\d.]+)%", text)
    assert loss and accuracy, text
    assert float(loss.group(2)) < float(loss.group(1))
    assert float(accuracy.group(2)) > float(accuracy.group(1))
    assert "read back with nnef_torch.reader.read_model: valid NNEF" in text
    difference = re.search(r"max abs difference from the fine-tuned model ([\d.e+-]+)", text)
    assert difference and float(difference.group(1)) < 1e-5
    graph = khronos_parse(out)  # the kept model is standard NNEF
    assert [list(graph.tensors[name].shape) for name in graph.inputs] == [[1, 1, 16, 16]]
    # exported by tracing, it keeps the shipped document's tensor names, labels and graph.quant keys
    shipped = khronos_parse(Path(str(resources.files("nnef_torch").joinpath("models", "tiny_cnn"))))
    assert set(graph.tensors) == set(shipped.tensors)
    assert sorted(op.attribs["label"] for op in graph.operations if op.name == "variable") == \
        sorted(op.attribs["label"] for op in shipped.operations if op.name == "variable")
    assert {name for name, tensor in graph.tensors.items() if tensor.quantization} == \
        {name for name, tensor in shipped.tensors.items() if tensor.quantization} == {"image", "relu1", "relu2"}
