"""Operators of MXNet 2 that MXNet 1.9.1 (the fixtures' producer) lacks: log_sigmoid and mish, as operators and as
Activation's act_type. One-node symbols
written by hand as MXNet 2 saves them, read by nnef_torch, must give what MXNet 2's kernels compute (its formulas,
`src/operator/mshadow_op.h`, in float64 here); saved as NNEF, they must pass the Khronos parser and executor."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from exporter.consumers import close, compound_standard_ops, khronos_parse

import nnef_torch

X = np.concatenate([np.linspace(-30.0, 30.0, 41), [-0.5, 0.0, 1e-3, 19.5, 20.5, 80.0, -80.0]]).astype(np.float32)


def log_sigmoid(a: np.ndarray) -> np.ndarray:
    return np.log(1.0 / (1.0 + np.exp(-a)))


def mish(a: np.ndarray) -> np.ndarray:
    softrelu = np.where(a > 20.0, a, np.log1p(np.exp(np.minimum(a, 20.0))))
    return a * np.tanh(softrelu)


TWINS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"log_sigmoid": log_sigmoid, "mish": mish}


def _symbol(op: str, attrs: dict[str, str]) -> dict:
    node = {"op": op, "name": "y", "inputs": [[0, 0, 0]], **({"attrs": attrs} if attrs else {})}
    return {"nodes": [{"op": "null", "name": "data", "inputs": []}, node],
            "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
            "attrs": {"mxnet_version": ["int", 20000]}}


@pytest.mark.parametrize("op", sorted(TWINS))
@pytest.mark.parametrize("form", ["operator", "activation"])
def test_mxnet2_unary(op: str, form: str, tmp_path: Path) -> None:
    path = tmp_path / f"{op}.json"
    symbol = _symbol(op, {}) if form == "operator" else _symbol("Activation", {"act_type": op})
    path.write_text(json.dumps(symbol))
    module = nnef_torch.load(path, input_shapes={"data": list(X.shape)})
    expected = TWINS[op](X.astype(np.float64)).astype(np.float32)
    with torch.no_grad():
        close(module(torch.from_numpy(X)).numpy(), expected, 1e-5)
    folder = tmp_path / "nnef"
    module.save(folder)
    khronos_parse(folder)
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    with nnef.Session(str(folder), lowered=compound_standard_ops()) as session:
        (found,) = session(X)
    close(np.asarray(found), expected, 1e-5)
