"""User code that type checkers must accept, run by tests/test_typing.py through mypy (never executed).

A line marked `# expect: CODE` is a misuse that mypy must reject with that error code; every other line must pass.
"""
from __future__ import annotations

from pathlib import Path
from typing import assert_type

import numpy as np
import torch

import nnef_torch
from nnef_torch import NNEFModule, read_model, read_tensor, write_tensor
from nnef_torch.quant import QuantConfig, QuantExport, QuantScheme, calibrate, prepare


def import_and_train(path: str) -> None:
    model: nnef_torch.NNEFModule = nnef_torch.load(path)
    on_cpu = nnef_torch.load(Path(path), device="cpu", dtype=torch.float32, input_shapes={"input": [1, 3, 8, 8]})
    lightnet = nnef_torch.load("model.json", params="weights.wts", inputs=["input"], outputs=["prob"])
    assert_type(lightnet, NNEFModule)
    assert_type(on_cpu, NNEFModule)
    assert_type(model.code, str)
    assert_type(model.quantizers(), dict[str, torch.nn.Module])
    model.set_quantization(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.rand(1, 3, 8, 8)).sum()
    loss.backward()
    optimizer.step()
    model.save(path + ".tgz", compress=True)
    nnef_torch.save(model, path + ".copy")


def export(module: torch.nn.Module, x: torch.Tensor) -> None:
    model: nnef_torch.Model = nnef_torch.export(module, (x,))
    assert_type(model.text, str)
    assert_type(model.quant_text, str | None)
    model.save("out.tgz", progress=False)
    nnef_torch.save(module, "out", x, quantization=QuantExport(inline=True))


def quantize(module: torch.nn.Module, batches: list[torch.Tensor]) -> None:
    config = QuantConfig(weights=QuantScheme(bits=4), activations={"bits": 8})
    prepared: torch.nn.Module = prepare(module, config)
    prepared = prepare(module, {"weights": {"bits": 8}}, inplace=True)
    calibrated: torch.nn.Module = calibrate(prepared, batches, max_batches=4)
    nnef_torch.save(calibrated, "qat", batches[0], quantization=QuantExport(op="linear_quantize"))


def files(folder: str) -> None:
    data = read_model(folder, load_tensors=False)
    assert_type(data.source, str)
    array: np.ndarray = read_tensor(folder + "/weight.dat")
    write_tensor(folder + "/copy.dat", array, layout="current")
    try:
        read_tensor(b"\x4e\xef")
    except nnef_torch.NNEFTensorFileError as error:
        assert_type(error, nnef_torch.NNEFTensorFileError)


def misuses(module: torch.nn.Module, x: torch.Tensor) -> None:
    nnef_torch.load(42)  # expect: arg-type
    nnef_torch.export(module, x, quantisation=None)  # expect: call-arg
    calibrate(module, [x], max_batches="all")  # expect: arg-type


def text_length(module: torch.nn.Module, x: torch.Tensor) -> int:
    return nnef_torch.export(module, x).text  # expect: return-value
