"""What the tests of the LightNet back end share: the conventions every written file must follow (checked against
LightNet's documented layout and the optype table, independently of the writer), and a save, re-import and
compare helper."""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

import nnef_torch
from nnef_torch.formats.lightnet.optypes import OPTYPES, check_param

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # tools/il2json's tensor names


class Fn(torch.nn.Module):
    """A module computing `fn(self, *inputs)`, with `params` as Parameters (floating) or buffers."""

    def __init__(self, fn: Callable[..., Any], **params: torch.Tensor):
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            if value.is_floating_point():
                self.register_parameter(name, torch.nn.Parameter(value))
            else:
                self.register_buffer(name, value)

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.fn(self, *inputs)


def check_document(document: Any, inputs: Sequence[str], outputs: int | Sequence[str] | None = None) -> list[dict]:
    """Every convention of a written file; returns its ops. `inputs`: the input names in order; `outputs`: their
    count or names in order."""
    assert isinstance(document, dict) and list(document) == ["ops"]
    ops = document["ops"]
    counts: dict[str, int] = {}
    defined: dict[str, int] = {}
    read: set[str] = set()
    for index, op in enumerate(ops):
        assert list(op) == ["name", "optype", "tensors_in", "tensors_out", "params"], op
        kind = OPTYPES[op["optype"]]
        assert op["name"] == f"{op['optype']}{counts.get(op['optype'], 0)}", op["name"]
        counts[op["optype"]] = counts.get(op["optype"], 0) + 1
        assert [t["arg_name"] for t in op["tensors_in"]] == list(kind.tensors_in), op["name"]
        assert [t["arg_name"] for t in op["tensors_out"]] == list(kind.tensors_out), op["name"]
        assert [p["arg_name"] for p in op["params"]] == [p.name for p in kind.params], op["name"]
        for param in op["params"]:
            problem = check_param(kind, kind.param(param["arg_name"]), param["value"])
            assert problem is None, (op["name"], param, problem)
        for tensor in op["tensors_in"]:
            assert tensor["name"] in defined, f"{op['name']} reads {tensor['name']} before it is defined"
            if op["optype"] not in ("print", "fprint"):  # they observe: a printed tensor is still an output
                read.add(tensor["name"])
        for tensor in op["tensors_out"]:
            name = tensor["name"]
            assert IDENTIFIER.match(name) and len(name) < 512, name
            assert name not in defined, f"{name} is defined twice"
            defined[name] = index
        if op["optype"] == "create":
            params = {p["arg_name"]: p["value"] for p in op["params"]}
            data = params["data"]
            assert params["from_file"] or data == [0] or len(data) == math.prod(params["dims"]), op["name"]
    for index, name in enumerate(inputs):
        op = ops[index]
        assert op["optype"] == "create" and op["tensors_out"][0]["name"] == name, (index, op)
        params = {p["arg_name"]: p["value"] for p in op["params"]}
        assert params["data"] == [0] and params["ran"] == [0, 0] and params["from_file"] is False
    found = [name for name in defined if name not in read and name not in inputs]
    if isinstance(outputs, int):
        assert len(found) == outputs, found
    elif outputs is not None:
        assert found == list(outputs), found
    return ops


def optypes(document: Any) -> list[str]:
    return [op["optype"] for op in document["ops"]]


def save_and_load(module: torch.nn.Module, inputs: Sequence[torch.Tensor], folder: Any, name: str = "model.json",
                  **options: Any) -> tuple[dict, torch.nn.Module]:
    """Save `module` as LightNet in `folder`, check the file's conventions, load it back."""
    path = os.path.join(folder, name)
    nnef_torch.save(module, path, tuple(inputs), **options)
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    names = _input_names(document, len(inputs))
    check_document(document, names)
    return document, nnef_torch.load(path, inputs=names)


def _input_names(document: dict, count: int) -> list[str]:
    return [op["tensors_out"][0]["name"] for op in document["ops"][:count]]


def assert_same(got: Any, expected: Any, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    got = got if isinstance(got, (tuple, list)) else (got,)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b.detach(), atol=atol, rtol=rtol)


def twin(module: torch.nn.Module, inputs: Sequence[torch.Tensor], folder: Any, atol: float = 1e-5,
         **options: Any) -> dict:
    """Save `module` as LightNet, load it back, and compare its outputs with the module's; returns the document."""
    module = module.eval()
    document, loaded = save_and_load(module, inputs, folder, **options)
    with torch.no_grad():
        assert_same(loaded(*inputs), module(*inputs), atol=atol)
    return document
