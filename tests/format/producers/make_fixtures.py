"""Write the fixtures of tests/format/test_lenient.py: small models exported by real NNEF producers, each with the
deviation from the spec it is for, its inputs and the outputs its producer's consumer computes.

- nnef_tools' ONNX converter (torch.onnx.export first): outputs by the Khronos interpreter of nnef_tools;
- torch_to_nnef's KhronosNNEF target: outputs by tract where tract runs the file; tract 0.23 has no `erf`, so
  for the GELU block they are those of the torch module that was exported (the producer's source).

Run from the repository root: `python tests/format/producers/make_fixtures.py` (needs torch, onnx, nnef_tools,
nnef, torch_to_nnef, tract). Each folder gets graph.nnef, its .dat files, input_<i>.npy, expected_<i>.npy and
CONSUMER (who computed the expected outputs).
"""
from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent


class Rotary(torch.nn.Module):
    """A partial rotary embedding whose rotated part is the whole head: ONNX Split with sizes [8, 0]."""

    def forward(self, x, cos, sin):
        x_rot, x_pass = torch.split(x, [8, 0], dim=-1)
        x1, x2 = x_rot.chunk(2, dim=-1)
        rotated = torch.cat((-x2, x1), dim=-1)
        return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)


class Dot(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Block(torch.nn.Module):
    """A tiny transformer block: layer norm, self-attention scores by softmax, a linear layer and GELU."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        h = self.norm(x)
        attention = torch.softmax(h @ h.t(), dim=-1) @ h
        return x + torch.nn.functional.gelu(self.fc(attention))


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class Twice(torch.nn.Module):
    """The same constant used by two operations."""

    def forward(self, x):
        return torch.relu(x) * 3.0 + torch.sigmoid(x) * 3.0


# name -> (producer, module, inputs, patterns the graph must hold: the deviation it is for)
FIXTURES = {
    "khronos_rotary": ("nnef_tools", Rotary, [(1, 4, 8), (4, 8), (4, 8)], [r"ratios = \[8, 0\]"]),
    "khronos_dot": ("nnef_tools", Dot, [(8,), (8,)], [r"external<scalar>\(shape = \[8\]\)", r"= matmul\("]),
    "t2n_softmax": ("torch_to_nnef", Softmax, [(2, 5)], [r"softmax\(x, 1\)"]),
    "t2n_block": ("torch_to_nnef", Block, [(4, 8)],
                  [r"^fragment gelu", r"erf\(", r"eps = \w+\)", r"softmax\(\w+, 1\)"]),
}


def onnx_to_nnef(module: torch.nn.Module, inputs: list[torch.Tensor], folder: Path, work: Path) -> None:
    onnx_path = work / "model.onnx"
    torch.onnx.export(module, tuple(inputs), str(onnx_path), dynamo=False, opset_version=13)
    subprocess.run([sys.executable, "-m", "nnef_tools.convert", "--input-format", "onnx", "--output-format", "nnef",
                    "--input-model", str(onnx_path), "--output-model", str(folder), "--fold-constants"], check=True)


def khronos_nnef(module: torch.nn.Module, inputs: list[torch.Tensor], folder: Path, work: Path) -> None:
    from torch_to_nnef import export_model_to_nnef
    from torch_to_nnef.inference_target import KhronosNNEF

    archive = work / "model.nnef.tgz"
    names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
    export_model_to_nnef(module, tuple(inputs), archive, inference_target=KhronosNNEF("1.0.5", check_io=False),
                         input_names=names, output_names=["y"], log_level=logging.WARNING)
    folder.mkdir()
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and "/" not in member.name.lstrip("./"):
                (folder / Path(member.name).name).write_bytes(tar.extractfile(member).read())


def run_khronos(folder: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The outputs by the Khronos interpreter of nnef_tools (its C++ `nnef.Session` refuses a zero ratio)."""
    from nnef_tools.interpreter.pytorch import Interpreter

    interpreter = Interpreter(str(folder), custom_operators={}, decomposed=[])
    outputs = interpreter(arrays, None, False)
    return [np.asarray(outputs[tensor.name]) for tensor in interpreter.output_details()]


def run_tract(folder: Path, arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    import tract

    try:
        model = tract.nnef().without_tract_core().load(str(folder)).into_runnable()
    except Exception as error:  # tract refuses the file (tract 0.23 has no `erf`)
        print(f"{folder.name}: tract does not run it ({str(error).splitlines()[-1] if str(error) else error})")
        return None
    return [output.to_numpy() for output in model.run(arrays)]


def make(name: str) -> None:
    producer, factory, shapes, patterns = FIXTURES[name]
    torch.manual_seed(sum(map(ord, name)))
    module = factory().eval()
    inputs = [torch.randn(*shape) for shape in shapes]
    arrays = [x.numpy() for x in inputs]
    folder = HERE / name
    shutil.rmtree(folder, ignore_errors=True)
    with tempfile.TemporaryDirectory() as work:
        (onnx_to_nnef if producer == "nnef_tools" else khronos_nnef)(module, inputs, folder, Path(work))
    text = (folder / "graph.nnef").read_text()
    for pattern in patterns:  # the fixture really holds the deviation it is for
        assert re.search(pattern, text, flags=re.M), f"{name}: no /{pattern}/ in\n{text}"
    if producer == "nnef_tools":
        outputs, consumer = run_khronos(folder, arrays), "nnef_tools interpreter"
    else:
        outputs, consumer = run_tract(folder, arrays), "tract"
        if outputs is None:
            with torch.no_grad():
                outputs, consumer = [module(*inputs).numpy()], "torch (the exported module; tract has no erf)"
    for i, array in enumerate(arrays):
        np.save(folder / f"input_{i}.npy", array)
    for i, array in enumerate(outputs):
        np.save(folder / f"expected_{i}.npy", np.asarray(array, dtype=np.float32))
    (folder / "CONSUMER").write_text(consumer + "\n")
    print(f"{name}: {producer}, expected outputs by {consumer}")


if __name__ == "__main__":
    for fixture in sys.argv[1:] or FIXTURES:
        make(fixture)
